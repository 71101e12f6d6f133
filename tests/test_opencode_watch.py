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
from pathlib import Path

from loopledger.ledger import migrate

from tests.watch_support import wait_for_state

BIN = Path(sys.executable).parent / "loopledger"
STORAGE = Path(__file__).parent / "fixtures" / "formats" / "opencode" / "storage"
SID = "ses_4f1c2b7a9ffeR2xQe8mT0aLkVd"


def test_watch_follows_a_storage_session_through_its_part_files(tmp_path, fresh_db):
    storage = tmp_path / "opencode" / "storage"
    shutil.copytree(STORAGE, storage)
    migrate.upgrade(fresh_db)
    roots = [str(storage / k) for k in ("session", "message", "part")]
    proc = subprocess.Popen([str(BIN), "watch", *roots, "--db", fresh_db, "--interval", "0.2"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        paths, calls = wait_for_state(fresh_db, lambda p, c: c == 5, "the session's 5 calls stored")
        assert paths == [f"{SID}.json"]
        # OpenCode runs one more tool in the last assistant message: only a part file is written
        msg = "msg_b03e3d8a1001nYVv7R5pTLx2Ce"
        part = {"id": "prt_b03e3d8d3001Kk1lMm2nNo3pPq", "sessionID": SID, "messageID": msg, "type": "tool",
                "callID": "toolu_01Zz9yXx8wWv7uUt6sSr5qQp", "tool": "bash",
                "state": {"status": "completed", "input": {"command": "pytest -q"}, "output": "3 passed",
                          "title": "pytest", "metadata": {"exit": 0},
                          "time": {"start": 1764582091000, "end": 1764582091500}}}
        (storage / "part" / msg / f"{part['id']}.json").write_text(json.dumps(part, indent=2))
        paths, calls = wait_for_state(fresh_db, lambda p, c: c == 6, "the new tool part stored")
        assert paths == [f"{SID}.json"]  # still one source: no source per part or message file
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=30)


def test_watch_follows_opencodes_database_through_its_write_ahead_log(tmp_path, fresh_db):
    """OpenCode 1.x keeps sessions in one SQLite database and writes to its WAL while it runs: a
    new tool part (a row only the WAL holds yet) is a change `watch` picks up."""
    import sqlite3

    from tests.test_format_opencode import _database

    db = _database(tmp_path)
    writer = sqlite3.connect(db)
    writer.execute("PRAGMA wal_autocheckpoint = 0")  # as a running OpenCode: the rows stay in the WAL
    migrate.upgrade(fresh_db)
    proc = subprocess.Popen([str(BIN), "watch", str(db), "--db", fresh_db, "--interval", "0.2"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        paths, _ = wait_for_state(fresh_db, lambda p, c: c == 3, "the database's 3 calls stored")
        assert paths == ["opencode.db"]
        writer.execute("INSERT INTO part (id, message_id, session_id, time_created, time_updated, data) "
                       "SELECT 'prt_zzz', message_id, session_id, time_created, time_updated, "
                       "replace(data, 'call_3', 'call_4') FROM part WHERE data LIKE '%call_3%'")
        writer.commit()
        paths, _ = wait_for_state(fresh_db, lambda p, c: c == 4, "the call only the WAL holds stored")
        assert paths == ["opencode.db"]
    finally:
        writer.close()
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=30)
