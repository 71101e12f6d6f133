"""No secret from a transcript is stored in any table or column, or printed by any command:
valid lines, a malformed (quarantined) line and a file that is no transcript at all."""

from __future__ import annotations

import subprocess
import sys

import orjson
import pytest
from loopledger import worker
from loopledger.ledger import migrate, schema
from loopledger.ledger.engine import make_engine
from sqlalchemy import select

KEY = "sk-proj-" + "A1b2C3d4" * 6
# Near the excerpt's 200-character cut: only redacting before cutting hides all of it.
PAD = "x" * 136
BEARER = "abcdefghijklmnopqrstuvwxyz0123"


def _line(**msg) -> bytes:
    return orjson.dumps(msg) + b"\n"


def write_files(tmp_path):
    f = tmp_path / "s.jsonl"
    f.write_bytes(
        _line(role="user", content=f"use {KEY}")
        + _line(role="assistant", content=None, tool_calls=[{"id": "a", "type": "function", "function": {
            "name": "bash", "arguments": orjson.dumps({"cmd": f"export K={KEY}"}).decode()}}])
        + _line(role="tool", tool_call_id="a", content=f"K={KEY}\nBearer {BEARER}")
        # Malformed: truncated JSON holding a key, cut so the key straddles the excerpt's limit.
        + b'{"role": "assistant", "content": "' + PAD.encode() + b" " + KEY.encode() + b'\n'
        + b'{"role": "user", "content": "the key is ' + KEY.encode() + b'"\n'
        + _line(role="assistant", content=KEY))
    junk = tmp_path / "notes.json"  # not a transcript: its head is quoted in the error message
    junk.write_text(f'{{"api_key": "{KEY}", "notes": 1}}')
    return f, junk


def every_text(engine) -> str:
    """Every column of every row of every table, as text."""
    out = []
    with engine.connect() as conn:
        for table in schema.metadata.sorted_tables:
            for row in conn.execute(select(table)):
                out.append(repr(tuple(row)))
    return "\n".join(out)


@pytest.fixture
def engine(db_url):
    eng = make_engine(db_url)
    migrate.upgrade(eng)
    yield eng
    eng.dispose()


def test_no_secret_in_any_table_or_column(engine, tmp_path):
    f, junk = write_files(tmp_path)
    totals = worker.ingest_paths(engine, [f, junk], worker.Options())
    assert totals.quarantined == 2 and totals.errors == 1  # the malformed lines and the junk file
    text = every_text(engine)
    assert "[REDACTED:openai-key]" in text
    assert "sk-proj-" not in text and BEARER not in text
    with engine.connect() as conn:
        excerpts = list(conn.execute(select(schema.ingest_errors.c.excerpt)).scalars())
    assert len(excerpts) == 2 and all("[REDACTED:openai-key]" in e for e in excerpts)


def _cli(*args: str, cwd) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "loopledger.cli.app", *args], capture_output=True, text=True,
                          cwd=cwd, timeout=120)


def test_no_secret_printed_by_ingest_or_replay(tmp_path):
    f, junk = write_files(tmp_path)
    ing = _cli("ingest", str(f), str(junk), "--db", str(tmp_path / "l.sqlite"), cwd=tmp_path)
    assert ing.returncode == 1, ing.stderr
    rep = _cli("replay", str(f), cwd=tmp_path)
    assert rep.returncode == 3, rep.stderr  # printed, some lines malformed
    assert "REDACTED:openai-key" in rep.stdout
    for p in (ing, rep):
        assert "sk-proj-" not in p.stdout + p.stderr and BEARER not in p.stdout + p.stderr


def test_replay_judges_what_the_ledger_judged(tmp_path):
    """A secret that differs between two otherwise equal answers: the ledger (redacted) sees a
    repeat; an unredacted replay would see a change and judge differently."""
    f = tmp_path / "r.jsonl"
    lines = [_line(role="user", content="go")]
    for i in range(4):
        lines.append(_line(role="assistant", content=None, tool_calls=[{"id": f"c{i}", "type": "function",
                      "function": {"name": "env", "arguments": "{}"}}]))
        lines.append(_line(role="tool", tool_call_id=f"c{i}", content=f"TOKEN=sk-proj-{i}{'Z' * 30}"))
    f.write_bytes(b"".join(lines))
    redacted = _cli("replay", str(f), "--policy", "run-length:max_strikes=2", cwd=tmp_path)
    raw = _cli("replay", str(f), "--policy", "run-length:max_strikes=2", "--no-redact", cwd=tmp_path)
    assert redacted.returncode == 0 and raw.returncode == 0, redacted.stderr + raw.stderr
    assert "halts 1," in redacted.stdout and "repeated #2" in redacted.stdout
    assert "halts 0," in raw.stdout and "changed #2" in raw.stdout
