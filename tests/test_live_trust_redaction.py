"""Issue 17, points 4, 8 and 10: one deeply nested value costs that value (never the file or the
agent's call), a transcript that shrank loses nothing the ledger recorded from it, and messages
about bad input name the file and line. (Point 3, secrets everywhere: test_secrets_everywhere.py.)"""

from __future__ import annotations

import json
import subprocess
import sys

import orjson
import pytest
from loopledger.ledger import migrate, read
from loopledger.ledger.engine import make_engine
from sqlalchemy import text

from tests.live_support import BIN
from tests.test_secrets_everywhere import OPENAI, _transcript, assert_clean

MAX_DEPTH = 128  # docs/architecture.md, "Redaction": deeper containers become a marker
MARKER = f"[loopledger: nested deeper than {MAX_DEPTH} levels"


def _cli(*args: str, cwd, stdin: bytes | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([str(BIN), *args], input=stdin, capture_output=True, timeout=180, cwd=cwd)


def _nest(depth: int, leaf):
    for _ in range(depth):
        leaf = {"a": leaf}
    return leaf


def _deep_chat(path, depth: int = 600) -> None:
    """An OpenAI chat JSONL: one call whose arguments nest `depth` deep (a key at the bottom and a
    key at the top), then an ordinary call."""
    deep_args = json.dumps({"cmd": f"deploy --token {OPENAI}", "spec": _nest(depth, f"leaf {OPENAI}")})
    rows = [{"role": "user", "content": "deploy it"},
            {"role": "assistant", "content": None, "tool_calls": [
                {"id": "c1", "type": "function", "function": {"name": "deploy", "arguments": deep_args}}]},
            {"role": "tool", "tool_call_id": "c1", "content": "deployed"},
            {"role": "assistant", "content": None, "tool_calls": [
                {"id": "c2", "type": "function", "function": {"name": "bash", "arguments": '{"cmd": "ls"}'}}]},
            {"role": "tool", "tool_call_id": "c2", "content": "a b"}]
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))


def _rows(url: str, sql: str) -> list[tuple]:
    eng = make_engine(url)
    try:
        with eng.connect() as conn:
            return [tuple(r) for r in conn.execute(text(sql))]
    finally:
        eng.dispose()


# ── point 4: depth ───────────────────────────────────────────────────────────────────────────


@pytest.mark.parametrize("flag", ["--redact", "--no-redact"])
def test_point_4_600_deep_arguments_ingest_and_the_deep_value_becomes_a_marker(tmp_path, db_url, flag):
    f = tmp_path / "deep.jsonl"
    _deep_chat(f)
    proc = _cli("ingest", str(f), "--db", db_url, "--create", flag, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr.decode()
    assert b"RecursionError" not in proc.stdout + proc.stderr
    assert _rows(db_url, "SELECT count(*) FROM sessions") == [(1,)]
    calls = dict(_rows(db_url, "SELECT call_id, args FROM calls"))
    assert set(calls) == {"c1", "c2"}
    assert calls["c2"] == '{"cmd":"ls"}'  # the ordinary call is stored whole
    deep = calls["c1"]
    assert MARKER in deep and "leaf" not in deep  # cut at MAX_DEPTH: the bottom is gone
    # Everything above the cut is kept as it was: MAX_DEPTH levels of {"a": …} under "spec".
    assert deep.count('{"a":') == MAX_DEPTH - 1
    if flag == "--redact":
        assert '"deploy --token [REDACTED:openai-key]"' in deep
        assert_clean(deep.encode(), "the stored arguments")
    else:
        assert f"deploy --token {OPENAI}" in deep


def test_point_4_deep_values_through_guard_and_live_guard_cost_only_that_value(tmp_path, fresh_db):
    from loopledger.guards import LiveGuard

    migrate.upgrade(make_engine(fresh_db))
    lines = [{"session": "d", "event": "call", "id": f"c{i}", "tool": "deploy", "args": {"spec": _nest(600, "x")}}
             for i in range(3)]
    lines.append({"session": "d", "event": "answer", "id": "c2", "text": _nest(700, "y")})
    lines.append({"session": "d", "event": "call", "id": "c9", "tool": "bash", "args": {"cmd": "ls"}})
    feed = b"".join(json.dumps(x).encode() + b"\n" for x in lines)  # json: orjson stops at 255 levels
    proc = _cli("guard", "--db", fresh_db, stdin=feed, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    out = [json.loads(x) for x in proc.stdout.splitlines()]
    assert [o.get("id") for o in out] == ["c0", "c1", "c2", "c9"] and not any("error" in o for o in out)
    stored = _rows(fresh_db, "SELECT call_id, kind, args, text FROM live_events ORDER BY seq")
    calls = {cid: a for cid, kind, a, _ in stored if kind == "call"}
    assert set(calls) == {"c0", "c1", "c2", "c9"} and calls["c9"] == '{"cmd":"ls"}'
    assert all(MARKER in calls[c] for c in ("c0", "c1", "c2"))
    assert any(kind == "answer" and MARKER in (t or "") for _, kind, _, t in stored)  # the deep answer
    # In process, deeper than any JSON parser goes: the call is judged, not a RecursionError.
    with LiveGuard("run-length", db=fresh_db, session="py") as guard:
        for i in range(3):
            d = guard.call("deploy", {"spec": _nest(20_000, "z")}, f"p{i}")
            guard.answer(f"p{i}", "same")
    assert d.verdict != "allow"  # three identical (cut) calls with identical answers: a repeat


def test_point_4_redact_value_is_iterative_and_the_marker_keeps_values_apart():
    from loopledger.redact import redact_value

    very = _nest(200_000, "x")
    cut = redact_value(very, secrets=False)
    node = cut
    for _ in range(MAX_DEPTH - 1):
        node = node["a"]
    assert isinstance(node["a"], str) and node["a"].startswith(MARKER)
    assert orjson.dumps(cut)  # bounded: every consumer below can take it now
    same, other = redact_value(_nest(300, "x")), redact_value(_nest(300, "y"))
    assert orjson.dumps(same) == orjson.dumps(redact_value(_nest(300, "x")))
    assert orjson.dumps(same) != orjson.dumps(other)  # different deep values stay different calls
    shallow = {"a": [1, 2.5, None, {"b": "ls"}]}
    assert redact_value(shallow) is shallow  # nothing to change: the same object


# ── point 8: a file that shrank ──────────────────────────────────────────────────────────────


def test_point_8_an_emptied_transcript_keeps_its_session_marked_and_exits_0(tmp_path, db_url):
    f = _transcript(tmp_path)  # a Claude Code session of 3 calls
    assert _cli("ingest", str(f), "--db", db_url, "--create", cwd=tmp_path).returncode == 0
    before = _rows(db_url, "SELECT id, key, n_calls FROM sessions")
    assert len(before) == 1 and before[0][2] == 3
    n_checks = _rows(db_url, "SELECT count(*) FROM checks")[0][0]
    with open(f, "w"):  # `: > s.jsonl`, as log rotation does
        pass
    proc = _cli("ingest", str(f), "--db", db_url, cwd=tmp_path)
    err = proc.stderr.decode()
    assert proc.returncode == 0, err
    assert "error" not in err and "shrank" in err and str(f) in err
    # Nothing recorded is lost: the same session row, its calls and checks, moved to a source
    # marked truncated whose path names the file.
    assert _rows(db_url, "SELECT id, key, n_calls FROM sessions") == before
    assert _rows(db_url, "SELECT count(*) FROM calls") == [(3,)]
    assert _rows(db_url, "SELECT count(*) FROM checks") == [(n_checks,)]
    sources = {p: (st, e) for p, st, e in _rows(db_url, "SELECT path, status, error FROM sources")}
    assert sources[str(f)][0] == "ok" and "shrank" in sources[str(f)][1]
    (kept, (status, message)), = ((p, v) for p, v in sources.items() if p != str(f))
    assert status == "truncated" and kept.startswith(str(f)) and str(f) in message and "1 session" in message
    owner = _rows(db_url, f"SELECT s.path FROM sessions x JOIN sources s ON s.id = x.source_id WHERE x.id = {before[0][0]}")
    assert owner == [(kept,)]
    # The Ingest health page's read model shows it.
    eng = make_engine(db_url)
    with eng.connect() as conn:
        assert read.source_status_counts(conn).get("truncated") == 1
        page = read.sources_page(conn)
    eng.dispose()
    row = page[page["path"] == kept].iloc[0]
    assert row["status"] == "truncated" and row["sessions"] == 1 and row["calls"] == 3
    # The agent writes on (rotation): the new lines are a new session; the old one stays.
    f.write_text('{"role": "user", "content": "hello again"}\n')
    proc = _cli("ingest", str(f), "--db", db_url, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr.decode()
    assert len(_rows(db_url, "SELECT id FROM sessions")) == 2
    assert _rows(db_url, f"SELECT n_calls FROM sessions WHERE id = {before[0][0]}") == [(3,)]


def test_point_8_a_shrunk_file_keeps_what_was_read_and_reads_what_is_left(tmp_path, db_url):
    f = _transcript(tmp_path)
    lines = f.read_bytes().splitlines(keepends=True)
    assert _cli("ingest", str(f), "--db", db_url, "--create", cwd=tmp_path).returncode == 0
    f.write_bytes(b"".join(lines[:3]))  # cut after the first call and its result
    proc = _cli("ingest", str(f), "--db", db_url, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr.decode()
    got = sorted(_rows(db_url, "SELECT s.status, x.n_calls FROM sessions x JOIN sources s ON s.id = x.source_id"))
    assert got == [("ok", 1), ("truncated", 3)]  # what is left, and all that was read before


def test_point_8_an_empty_file_never_seen_is_not_an_error(tmp_path, db_url):
    f = tmp_path / "new.jsonl"
    f.write_bytes(b"")
    proc = _cli("ingest", str(f), "--db", db_url, "--create", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr.decode()
    assert _rows(db_url, "SELECT status FROM sources") == [("ok",)]


# ── point 10: words ──────────────────────────────────────────────────────────────────────────


def test_point_10_quarantined_lines_are_named_by_file_and_line(tmp_path):
    f = tmp_path / "bad.jsonl"
    good = [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "ok"}]
    f.write_text(json.dumps(good[0]) + "\n" + '{"role": "tool", oops\n' + json.dumps(good[1]) + "\n"
                 + "{not json either\n")
    proc = _cli("ingest", str(f), "--db", str(tmp_path / "l.sqlite"), "--create", cwd=tmp_path)
    err = proc.stderr.decode()
    assert proc.returncode == 3, err
    assert "2 malformed line(s) quarantined" in err
    assert f"{f}:2: " in err and f"{f}:4: " in err  # lines counted by hand above


def test_point_10_replay_of_a_missing_file_says_so_and_exits_2(tmp_path):
    proc = _cli("replay", "nope.traj", cwd=tmp_path)
    err = proc.stderr.decode()
    assert proc.returncode == 2
    assert "nope.traj" in err and "no such file" in err and "Errno" not in err


def test_point_10_help_says_the_default_policies_run_not_every_guard(tmp_path):
    from loopledger.detectors.policy import DEFAULT_DETECTORS

    for args in ([], ["ingest"]):
        out = _cli(*args, "--help", cwd=tmp_path).stdout.decode()
        flat = " ".join(out.split())
        assert "every loop guard" not in flat and "every policy" not in flat
    top = " ".join(_cli("--help", cwd=tmp_path).stdout.decode().split())
    assert all(d in top for d in DEFAULT_DETECTORS)


if __name__ == "__main__":  # pragma: no cover
    sys.exit(pytest.main([__file__, *sys.argv[1:]]))
