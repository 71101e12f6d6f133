"""`loopledger watch` (a real process) on OpenCode's storage folders: a session spread over a
session file, message files and part files is one source, and a tool part OpenCode writes
later (only the part file changes) is a change of that session. Waiting is bounded only so a
broken watcher cannot hang the suite."""

from __future__ import annotations

import json
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from loopledger.ledger import migrate, schema
from loopledger.ledger.engine import make_engine
from sqlalchemy import func, select

BIN = Path(sys.executable).parent / "loopledger"
STORAGE = Path(__file__).parent / "fixtures" / "formats" / "opencode" / "storage"
SID = "ses_4f1c2b7a9ffeR2xQe8mT0aLkVd"
HANG = 60.0


def _state(url: str) -> tuple[list[str], int | None]:
    eng = make_engine(url, readonly=True)
    try:
        with eng.connect() as conn:
            paths = [Path(p).name for p in conn.execute(select(schema.sources.c.path)).scalars()]
            calls = conn.execute(select(func.sum(schema.sessions.c.n_calls))).scalar()
        return paths, calls
    finally:
        eng.dispose()


def _wait(url: str, predicate, what: str) -> tuple[list[str], int | None]:
    t0 = time.monotonic()
    while True:
        try:
            state = _state(url)
            if predicate(*state):
                return state
        except Exception:  # the ledger may not be written yet  # noqa: BLE001
            pass
        if time.monotonic() - t0 > HANG:
            pytest.fail(f"watch never got to: {what}")
        time.sleep(0.1)


def test_watch_follows_a_storage_session_through_its_part_files(tmp_path, fresh_db):
    storage = tmp_path / "opencode" / "storage"
    shutil.copytree(STORAGE, storage)
    migrate.upgrade(fresh_db)
    roots = [str(storage / k) for k in ("session", "message", "part")]
    proc = subprocess.Popen([str(BIN), "watch", *roots, "--db", fresh_db, "--interval", "0.2"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        paths, calls = _wait(fresh_db, lambda p, c: c == 5, "the session's 5 calls stored")
        assert paths == [f"{SID}.json"]
        # OpenCode runs one more tool in the last assistant message: only a part file is written
        msg = "msg_b03e3d8a1001nYVv7R5pTLx2Ce"
        part = {"id": "prt_b03e3d8d3001Kk1lMm2nNo3pPq", "sessionID": SID, "messageID": msg, "type": "tool",
                "callID": "toolu_01Zz9yXx8wWv7uUt6sSr5qQp", "tool": "bash",
                "state": {"status": "completed", "input": {"command": "pytest -q"}, "output": "3 passed",
                          "title": "pytest", "metadata": {"exit": 0},
                          "time": {"start": 1764582091000, "end": 1764582091500}}}
        (storage / "part" / msg / f"{part['id']}.json").write_text(json.dumps(part, indent=2))
        paths, calls = _wait(fresh_db, lambda p, c: c == 6, "the new tool part stored")
        assert paths == [f"{SID}.json"]  # still one source: no source per part or message file
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=30)
