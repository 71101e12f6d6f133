"""Timestamps normalized by the readers (ISO 8601 UTC, the original kept where it said more),
stored in columns that take any value on SQLite and PostgreSQL, and a value PostgreSQL cannot
store (a NUL character) reported as one line naming file and line instead of failing the file."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from loopledger import worker
from loopledger.events import Batch, ReadError, SessionStart, UserTurn
from loopledger.formats import read
from loopledger.formats._common import iso_utc
from loopledger.ledger import migrate, schema
from loopledger.ledger.engine import make_engine
from sqlalchemy import select

BERLIN = "2025-10-01T09:12:44.123+01:00[Europe/Berlin]"
LONG_ZONE = "2025-10-01T09:12:45.123456789-03:00[America/Argentina/Buenos_Aires]"


@pytest.mark.parametrize("value, expected", [
    ("2026-03-01T10:00:00Z", "2026-03-01T10:00:00Z"),
    ("2026-03-01T10:00:00.250Z", "2026-03-01T10:00:00.250Z"),
    (BERLIN, "2025-10-01T08:12:44.123Z"),
    (LONG_ZONE, "2025-10-01T12:12:45.123456Z"),
    ("2025-10-01T09:12:44+01:00", "2025-10-01T08:12:44Z"),
    ("2025-10-01 09:12:44+00:00", "2025-10-01T09:12:44Z"),
    ("2025-02-11 14:03:52", "2025-02-11T14:03:52"),  # no zone: not invented
    (1772614800000, "2026-03-04T09:00:00.000Z"),  # Cline's ms since the epoch
    (1772614800, "2026-03-04T09:00:00Z"),
    ("last tuesday", "last tuesday"),  # not a time: kept as written
    (None, None),
])
def test_iso_utc(value, expected):
    assert iso_utc(value) == expected


def _rollout(path: Path, text: str = "list the files") -> Path:
    rows = [
        {"timestamp": BERLIN, "type": "session_meta",
         "payload": {"id": "0199c2a4-7e31-7b52-9d0e-5b8f2c1a6e47", "timestamp": BERLIN, "cwd": "/w"}},
        {"timestamp": BERLIN, "type": "response_item",
         "payload": {"type": "message", "role": "user", "content": [{"type": "input_text", "text": text}]}},
        {"timestamp": LONG_ZONE, "type": "response_item",
         "payload": {"type": "function_call", "call_id": "c1", "name": "shell", "arguments": "{\"command\": [\"ls\"]}"}},
        {"timestamp": LONG_ZONE, "type": "response_item",
         "payload": {"type": "function_call_output", "call_id": "c1", "output": "a.py\n"}},
    ]
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def test_readers_normalize_and_keep_the_original_start(tmp_path):
    items = list(read(_rollout(tmp_path / "rollout.jsonl")))
    info = items[0].info
    assert isinstance(items[0], SessionStart)
    assert info.started_at == "2025-10-01T08:12:44.123Z" and info.meta["started_at_original"] == BERLIN
    assert next(i for i in items if isinstance(i, UserTurn)).ts == "2025-10-01T08:12:44.123Z"
    assert next(i for i in items if isinstance(i, Batch)).ts == "2025-10-01T12:12:45.123456Z"
    # a UTC time says nothing more: no original kept
    cc = Path(__file__).parent / "fixtures" / "formats" / "claude_code" / "session.jsonl"
    assert "started_at_original" not in next(iter(read(cc))).info.meta


def test_nul_characters_are_replaced_and_reported_once(tmp_path):
    path = _rollout(tmp_path / "rollout.jsonl", text="list the files\u0000 please\u0000")
    items = list(read(path))
    (err,) = [i for i in items if isinstance(i, ReadError)]
    assert err.path == str(path) and err.line == 2 and "NUL" in err.message
    turn = next(i for i in items if isinstance(i, UserTurn))
    assert turn.text == "list the files\ufffd please\ufffd"


@pytest.fixture
def engine(db_url):
    eng = make_engine(db_url)
    migrate.upgrade(eng)
    yield eng
    eng.dispose()


def test_zoned_times_and_nul_text_ingest_on_both_backends(engine, tmp_path):
    path = _rollout(tmp_path / "rollout.jsonl", text="list\u0000 the files")
    totals = worker.ingest_paths(engine, [path], worker.Options())
    assert totals.exit_code == 3  # finished; the NUL line is in Ingest health
    with engine.connect() as conn:
        sess = conn.execute(select(schema.sessions)).mappings().one()
        assert sess["started_at"] == "2025-10-01T08:12:44.123Z" and sess["started_at_original"] == BERLIN
        ts = set(conn.execute(select(schema.events.c.ts)).scalars())
        assert ts == {"2025-10-01T08:12:44.123Z", "2025-10-01T12:12:45.123456Z"}
        errors = conn.execute(select(schema.ingest_errors)).mappings().all()
        assert len(errors) == 1 and errors[0]["line"] == 2 and "NUL" in errors[0]["message"]
        texts = list(conn.execute(select(schema.events.c.text).where(schema.events.c.kind == "user")).scalars())
        assert texts == ["list\ufffd the files"]


def test_a_0002_ledger_takes_long_times_after_upgrade(db_url):
    """Rows written at 0002 keep their times; afterwards a time longer than the old VARCHAR(40)
    is stored (PostgreSQL refused it before)."""
    eng = make_engine(db_url)
    try:
        migrate.upgrade(eng, "0002")
        with eng.begin() as conn:
            conn.exec_driver_sql("INSERT INTO sources (path, size, byte_offset, status) VALUES ('/a', 1, 1, 'ok')")
            conn.exec_driver_sql("INSERT INTO sessions (source_id, key, format, title, started_at, n_events, n_runs, n_calls) "
                                 "VALUES (1, 'k', 'codex', '', '2025-10-01T08:12:44Z', 0, 0, 0)")
        migrate.upgrade(eng)
        with eng.begin() as conn:
            conn.execute(schema.sessions.update().values(started_at=LONG_ZONE * 2, started_at_original=LONG_ZONE))
            row = conn.execute(select(schema.sessions.c.started_at, schema.sessions.c.started_at_original)).one()
        assert row == (LONG_ZONE * 2, LONG_ZONE)
    finally:
        eng.dispose()


@pytest.mark.parametrize("where", ["call name", "call id", "answer call id", "answer text", "batch text"])
def test_nul_anywhere_in_a_batch_or_answer_is_replaced_and_reported(tmp_path, where):
    from loopledger.events import Answers

    nul = "x\u0000y"
    call = {"id": nul if where == "call id" else "c1", "type": "function",
            "function": {"name": nul if where == "call name" else "bash", "arguments": "{}"}}
    lines = [{"role": "user", "content": "go"},
             {"role": "assistant", "content": nul if where == "batch text" else "", "tool_calls": [call]},
             {"role": "tool", "tool_call_id": nul if where == "answer call id" else call["id"],
              "content": nul if where == "answer text" else "ok"}]
    path = tmp_path / "chat.jsonl"
    path.write_text("".join(json.dumps(m) + "\n" for m in lines))
    items = list(read(path, "openai-chat"))
    (err,) = [i for i in items if isinstance(i, ReadError)]
    assert "NUL" in err.message and err.line == (3 if where.startswith("answer") else 2)
    batch = next(i for i in items if isinstance(i, Batch))
    answers = next(i for i in items if isinstance(i, Answers))
    texts = [batch.text, batch.calls[0].name, batch.calls[0].id or "", answers.answers[0].text,
             answers.answers[0].call_id or ""]
    assert not any("\u0000" in t for t in texts)
    # a NUL call id is also the answer's tool_call_id: both carry the replacement
    assert sum("x\ufffdy" in t for t in texts) == (2 if where == "call id" else 1)


def test_a_clean_item_comes_out_as_the_same_object(tmp_path):
    path = tmp_path / "chat.jsonl"
    path.write_text(json.dumps({"role": "user", "content": "go"}) + "\n")
    from loopledger.formats import _portable, openai_chat

    raw = [i for i in openai_chat.read(path) if not isinstance(i, ReadError)]
    assert [_portable._event(i) is i for i in raw] == [True] * len(raw)
