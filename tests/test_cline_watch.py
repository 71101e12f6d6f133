"""`loopledger watch` (a real process) on a Cline task folder: the folder is one source, and a
step the task takes (both files rewritten) re-judges it, with no second source for the API
history. Waiting is bounded only so a broken watcher cannot hang the suite."""

from __future__ import annotations

import json
import shutil
import signal
import subprocess
import sys
from pathlib import Path

from loopledger.ledger import migrate, schema
from loopledger.ledger.engine import make_engine
from sqlalchemy import select

from tests.watch_support import wait_for_state

BIN = Path(sys.executable).parent / "loopledger"
TASK = Path(__file__).parent / "fixtures" / "formats" / "cline" / "saoudrizwan.claude-dev" / "tasks" / "1772614800000"


def test_watch_takes_a_task_folder_as_one_source(tmp_path, fresh_db):
    root = tmp_path / "globalStorage" / "saoudrizwan.claude-dev" / "tasks"
    task = root / TASK.name
    shutil.copytree(TASK, task)
    migrate.upgrade(fresh_db)
    proc = subprocess.Popen([str(BIN), "watch", str(root), "--db", fresh_db, "--interval", "0.2"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        paths, calls = wait_for_state(fresh_db, lambda p, c: c == 5, "the task's 5 calls stored")
        assert paths == ["ui_messages.json"]
        # the task takes one more step: Cline appends to both files
        api = json.loads((task / "api_conversation_history.json").read_text())
        api[-1]["content"][0]["text"] = "<execute_command>\n<command>npm test</command>\n</execute_command>"
        api.append({"role": "user", "content": [{"type": "text", "text": "[execute_command for 'npm test'] Result:"},
                                                 {"type": "text", "text": "All tests passed."}]})
        (task / "api_conversation_history.json").write_text(json.dumps(api))
        ui = json.loads((task / "ui_messages.json").read_text())
        ui.append({"ts": ui[-1]["ts"] + 1000, "type": "say", "say": "command", "text": "npm test",
                   "conversationHistoryIndex": len(api) - 2})
        (task / "ui_messages.json").write_text(json.dumps(ui))
        paths, calls = wait_for_state(fresh_db, lambda p, c: c == 5 and _names(fresh_db)[-1] == "execute_command",
                             "the changed step re-judged")
        assert paths == ["ui_messages.json"]  # never a second source for the API history
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=30)


def _names(url: str) -> list[str]:
    eng = make_engine(url, readonly=True)
    try:
        with eng.connect() as conn:
            return list(conn.execute(select(schema.calls.c.tool).order_by(schema.calls.c.seq, schema.calls.c.idx)).scalars())
    finally:
        eng.dispose()
