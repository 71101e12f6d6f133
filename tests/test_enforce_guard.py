"""The enforced policy (loopledger.live.enforce) and `loopledger guard` over JSON lines, on SQLite and
PostgreSQL: real subprocesses, real ledgers."""

from __future__ import annotations

import json
import subprocess

import pytest
from loopledger import vocab
from loopledger.detectors.errors import ConfigError
from loopledger.detectors.policy import DEFAULT_SPECS, PolicySpec
from loopledger.guards import LiveGuard, Policy
from loopledger.ledger import migrate, schema
from loopledger.ledger.engine import make_engine
from loopledger.live import enforce
from sqlalchemy import select

from tests.live_support import BIN


@pytest.fixture
def ledger(db_url):
    eng = make_engine(db_url)
    migrate.upgrade(eng)
    yield db_url, eng
    eng.dispose()


def test_set_and_read_the_enforced_policy(ledger):
    url, eng = ledger
    with eng.connect() as conn:
        assert enforce.enforced(conn) is None and enforce.enforced_id(conn) is None
        assert enforce.enforced_or_default(conn) == enforce.LIVE_DEFAULT == DEFAULT_SPECS
    with eng.begin() as conn:
        enforce.set_enforced(conn, "window:threshold=4", origin="leaderboard")
    with eng.begin() as conn:
        enforce.set_enforced(conn, PolicySpec.parse("cycle:warn_repeats=2"), origin="compare")
    with eng.connect() as conn:
        assert enforce.enforced(conn) == PolicySpec.parse("cycle:warn_repeats=2")
        hist = enforce.history(conn)
        assert [h["origin"] for h in hist] == ["compare", "leaderboard"]
        stored = {r["id"] for r in conn.execute(select(schema.policies)).mappings()}
        assert {PolicySpec.parse("window:threshold=4").id, PolicySpec.parse("cycle:warn_repeats=2").id} <= stored
    assert Policy.enforced(url).spec == PolicySpec.parse("cycle:warn_repeats=2")
    with eng.begin() as conn:
        enforce.set_enforced(conn, None, origin="cli")  # back to the default
    with eng.connect() as conn:
        assert enforce.enforced(conn) is None
    with pytest.raises(ConfigError), eng.begin() as conn:
        enforce.set_enforced(conn, "ladder:halt_at=1")


def test_enforce_command(ledger):
    url, eng = ledger
    out = subprocess.run([str(BIN), "enforce", "ladder:halt_at=6", "--db", url], capture_output=True, text=True)
    assert out.returncode == 0 and "halt_at=6" in out.stdout
    bad = subprocess.run([str(BIN), "enforce", "ladder:halt_at=x", "--db", url], capture_output=True, text=True)
    assert bad.returncode == 2 and "halt_at" in bad.stderr and "Traceback" not in bad.stderr
    with eng.connect() as conn:
        assert enforce.enforced(conn) == PolicySpec.parse("ladder:halt_at=6")


def _guard(url: str | None, lines: list, *extra: str) -> list[dict]:
    cmd = [str(BIN), "guard", *(["--db", url] if url else []), *extra]
    raw = "".join((ln if isinstance(ln, str) else json.dumps(ln)) + "\n" for ln in lines)
    proc = subprocess.run(cmd, input=raw, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    return [json.loads(x) for x in proc.stdout.splitlines()]


def _call(i: int, session: str = "s1", **more) -> dict:
    return {"session": session, "event": "call", "id": f"c{i}", "tool": "Bash", "args": {"command": "npm test"},
            **more}


def test_guard_protocol(ledger, tmp_path):
    url, eng = ledger
    with eng.begin() as conn:
        enforce.set_enforced(conn, "ladder")
    lines = [{"session": "s1", "event": "user", "text": "fix the tests"}]
    for i in range(5):
        lines.append(_call(i))
        lines.append({"session": "s1", "event": "answer", "id": f"c{i}", "text": "1 failing", "error": True})
    lines += ["not json", '["a list"]', {"session": "s1", "event": "poke"}, {"event": "call", "tool": "x"},
              {"session": "s1", "event": "call", "id": "nameless"},
              _call(9, session="s2", transcript=str(tmp_path / "t.jsonl"), format="claude-code")]
    out = _guard(url, lines)
    verdicts = [o for o in out if "error" not in o]
    errors = [o for o in out if "error" in o]
    assert [v["verdict"] for v in verdicts] == [vocab.ALLOW, vocab.WARN, vocab.BLOCK, vocab.HALT,
                                                vocab.AFTER_HALT, vocab.ALLOW]
    assert [v["id"] for v in verdicts] == ["c0", "c1", "c2", "c3", "c4", "c9"]
    block = verdicts[2]
    assert block["session"] == "s1" and block["tool"] == "Bash" and block["count"] == 3
    assert "blocked" in block["message"] and block["policy"].startswith("ladder")
    assert "halted" in verdicts[3]["message"] and verdicts[0]["message"] == ""
    # Unreadable lines: one answer each, allowing, naming the line.
    assert [e["line"] for e in errors] == [12, 13, 14, 15, 16] and {e["verdict"] for e in errors} == {"allow"}
    assert "tool" in errors[-1]["error"] and errors[-1]["id"] == "nameless"
    with eng.connect() as conn:
        s, src, ec = schema.sessions.c, schema.sources.c, schema.enforced_checks.c
        rows = conn.execute(select(s.key, src.path, ec.verdict, ec.origin).join(schema.sources, src.id == s.source_id)
                            .join(schema.enforced_checks, ec.session_id == s.id).order_by(s.key, ec.seq)).all()
    assert [(r.key, r.verdict) for r in rows] == [("s1", v["verdict"]) for v in verdicts[:5]] + [("s2", "allow")]
    assert {r.origin for r in rows} == {"guard"}
    assert rows[0].path == "live:guard:s1" and rows[-1].path == str(tmp_path / "t.jsonl")

    # A second guard process picks the session up where the ledger has it.
    again = _guard(url, [{"session": "s1", "event": "user", "text": "again"}, _call(20), _call(21)])
    assert [v["verdict"] for v in again] == [vocab.ALLOW, vocab.WARN]


def test_guard_policy_flag_and_no_ledger():
    out = _guard(None, [_call(i) for i in range(4)], "--no-ledger", "--policy", "window:window=4,threshold=3")
    assert [v["verdict"] for v in out] == [vocab.ALLOW, vocab.ALLOW, vocab.HALT, vocab.AFTER_HALT]
    bad = subprocess.run([str(BIN), "guard", "--no-ledger", "--policy", "window:threshold=9,window=4"],
                         input="", capture_output=True, text=True)
    assert bad.returncode == 2 and "threshold" in bad.stderr


def test_live_guard_writes_through_the_same_lock(ledger):
    url, eng = ledger
    with LiveGuard("ladder:warn_at=2,block_at=3,halt_at=5", db=url, session="py") as g:
        verdicts = []
        for i in range(5):
            d = g.call("Edit", {"file_path": "a.py", "old_string": "x", "new_string": "y"}, f"e{i}")
            verdicts.append(d.verdict)
            if not d.refused:
                g.answer(f"e{i}", "String not found", is_error=True)
    assert verdicts == [vocab.ALLOW, vocab.WARN, vocab.BLOCK, vocab.BLOCK, vocab.HALT]
    with eng.connect() as conn:
        ec = schema.enforced_checks.c
        assert [r.verdict for r in conn.execute(select(ec.verdict).order_by(ec.seq))] == verdicts
        assert {r.origin for r in conn.execute(select(ec.origin))} == {"python"}


def test_ingest_also_replays_the_enforced_policy(ledger, tmp_path):
    from tests.live_support import npm_test_loop

    url, eng = ledger
    chosen = PolicySpec.parse("ladder:halt_at=6")
    with eng.begin() as conn:
        enforce.set_enforced(conn, chosen)
    loop = npm_test_loop(tmp_path, calls=6)
    proc = subprocess.run([str(BIN), "ingest", str(loop.transcript), "--db", url], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    with eng.connect() as conn:
        ch = schema.checks.c
        verdicts = [r.verdict for r in conn.execute(select(ch.verdict).where(ch.policy_id == chosen.id)
                                                      .order_by(ch.seq))]
    assert verdicts == [vocab.ALLOW, vocab.WARN, vocab.BLOCK, vocab.BLOCK, vocab.BLOCK, vocab.HALT]
