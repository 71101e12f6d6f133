"""OpenCode sessions: `opencode export` JSON (UTF-8, and UTF-16 with a BOM as a PowerShell
redirect writes it) and the local JSON storage, followed by `watch`.

The fixtures are built by hand from OpenCode's own schema (anomalyco/opencode, formerly
sst/opencode): the export document from packages/opencode/src/cli/cmd/export.ts ({info,
messages: [{info, parts}], todos}); messages and parts from packages/opencode/src/session/
message-v2.ts (TextPart with `synthetic`, ToolPart {callID, tool, state: {status, input,
output | error, time}}, StepStartPart / StepFinishPart, RetryPart); the `invalid` tool from
packages/opencode/src/tool/invalid.ts; the storage layout (session/<projectID>/<sessionID>.json,
message/<sessionID>/<messageID>.json, part/<messageID>/<partID>.json) from
packages/opencode/src/storage/json-migration.ts. Expected values are counted from the fixture
by hand (jq), not by the reader:
  jq '[.messages[].parts[]|select(.type=="tool")|.tool]' ses_export.json
    → read, bash, invalid, edit, bash
  jq '[.messages[].parts[]|select(.type=="tool")|.state.status]' → 4 completed, 1 error;
    the first bash has metadata.exit 1
"""

from __future__ import annotations

import json
import shutil
import time
from pathlib import Path

from loopledger import formats
from loopledger.changes import stamp
from loopledger.discovery import discover
from loopledger.events import Answers, Batch, Prose, ReadError, Retry, SessionStart, UserTurn
from loopledger.formats import read, sniff
from loopledger.formats.opencode import default_roots

FIX = Path(__file__).parent / "fixtures" / "formats" / "opencode"
EXPORT = FIX / "ses_export.json"
SID = "ses_4f1c2b7a9ffeR2xQe8mT0aLkVd"
STORAGE = FIX / "storage"
SESSION_FILE = STORAGE / "session" / "b7e1f0c3a2d94e6f8a1b2c3d4e5f6a7b8c9d0e1f" / f"{SID}.json"


def _summary(items: list) -> dict:
    calls = [c for i in items if isinstance(i, Batch) for c in i.calls]
    answers = {a.call_id: a for i in items if isinstance(i, Answers) for a in i.answers}
    return {
        "calls": [(c.id, c.name, c.args) for c in calls],
        "errors": [answers[c.id].is_error if c.id in answers else None for c in calls],
        "users": [i.text for i in items if isinstance(i, UserTurn)],
        "prose": [i.text for i in items if isinstance(i, Prose)],
        "retries": [i.text for i in items if isinstance(i, Retry)],
        "batches": sum(isinstance(i, Batch) for i in items),
    }


def test_export_is_read_step_by_step():
    assert sniff(EXPORT) == "opencode"
    items = list(read(EXPORT))
    info = items[0].info
    assert isinstance(items[0], SessionStart)
    assert (info.key, info.agent, info.model, info.title) == (
        SID, "opencode", "anthropic/claude-sonnet-4-5", "Fix the pager skipping page 2")
    assert info.started_at == "2025-12-01T09:40:00.000Z"  # time.created 1764582000000 ms
    got = _summary(items)
    assert [name for _, name, _ in got["calls"]] == ["read", "bash", "invalid", "edit", "bash"]
    # one Batch per step that called tools (3 steps with tools, 1 with text only)
    assert got["batches"] == 3 and got["prose"] == ["Fixed the step in `paginate`; the full test run was interrupted."]
    # read ok; bash exited 1; invalid never ran; edit ok; the last bash errored (interrupted)
    assert got["errors"] == [False, True, True, False, True]
    # the synthetic part is OpenCode's own addition, not the person
    assert got["users"] == ["The pager skips page 2. Fix it and run the tests.", "Thanks, that's all."]
    assert got["retries"] == ["retry (attempt 1): Overloaded"]


def test_a_call_opencode_rerouted_to_invalid_keeps_the_name_opencode_gives_it():
    """Issue 37: it was shown as "harness_error", a word the OpenCode user never chose."""
    items = list(read(EXPORT))
    call = next(c for i in items if isinstance(i, Batch) for c in i.calls if c.name == "invalid")
    assert call.args == {"reason": "invalid_tool_call", "tool": "edit"}
    answer = next(a for i in items if isinstance(i, Answers) for a in i.answers if a.call_id == call.id)
    assert answer.is_error and answer.text.startswith("The arguments provided to the tool are invalid")


def test_utf16_export_as_powershell_writes_it_reads_the_same(tmp_path):
    ps = tmp_path / "session.json"
    ps.write_bytes(EXPORT.read_text(encoding="utf-8").encode("utf-16"))  # BOM FF FE, then UTF-16LE
    assert ps.read_bytes()[:2] == b"\xff\xfe"
    assert sniff(ps) == "opencode"
    assert _summary(list(read(ps))) == _summary(list(read(EXPORT)))


def test_broken_utf16_export_names_file_and_line(tmp_path):
    text = EXPORT.read_text(encoding="utf-8").replace('"todos": []', '"todos": [,]')
    ps = tmp_path / "broken.json"
    ps.write_bytes(text.encode("utf-16"))
    items = list(read(ps))
    assert len(items) == 1 and items[0].path == str(ps)
    # the line of `"todos"` in the UTF-8 original (counted with grep -n)
    line = next(n for n, t in enumerate(text.splitlines(), 1) if '"todos"' in t)
    assert items[0].line == line


def test_storage_session_reads_like_its_export():
    assert sniff(SESSION_FILE) == "opencode"
    assert _summary(list(read(SESSION_FILE))) == _summary(list(read(EXPORT)))
    assert list(read(SESSION_FILE))[0].info.key == SID


def test_every_storage_file_of_a_session_stands_for_its_session_file():
    message = next((STORAGE / "message" / SID).glob("msg_*.json"))
    part = next((STORAGE / "part").glob("msg_*/prt_*.json"))
    assert formats.unit_of(message) == SESSION_FILE
    assert formats.unit_of(part) == SESSION_FILE
    assert formats.unit_of(SESSION_FILE) == SESSION_FILE
    # discovery of the three folders OpenCode writes sessions to: one source
    assert discover([STORAGE / "session", STORAGE / "message", STORAGE / "part"]) == [SESSION_FILE.absolute()]
    # 1 session + 3 message + 19 part files (find … -name '*.json' | wc -l)
    assert len(formats.members(SESSION_FILE)) == 1 + 3 + 19
    assert formats.members(EXPORT) == [EXPORT]


def test_a_new_part_is_a_change_of_the_session(tmp_path):
    storage = tmp_path / "storage"
    shutil.copytree(STORAGE, storage)
    unit = storage / SESSION_FILE.relative_to(STORAGE)
    before = stamp(unit)
    msg = sorted((storage / "message" / SID).glob("msg_*.json"))[-1].stem
    time.sleep(0.01)
    (storage / "part" / msg / "prt_b03e3e0f2001Zz9xYw8vUt7sRq.json").write_text(json.dumps({
        "id": "prt_b03e3e0f2001Zz9xYw8vUt7sRq", "sessionID": SID, "messageID": msg,
        "type": "text", "text": "And update the changelog."}))
    assert stamp(unit) != before
    assert _summary(list(read(unit)))["users"][-1] == "Thanks, that's all.\nAnd update the changelog."


def test_default_roots_follow_xdg_data_home(monkeypatch, tmp_path):
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path))
    monkeypatch.delenv("OPENCODE_DB", raising=False)
    assert default_roots() == [tmp_path / "opencode" / "storage" / k for k in ("session", "message", "part")] + [
        tmp_path / "opencode" / "opencode.db"]
    assert all(r in formats.default_roots() for r in default_roots())
    # OpenCode's own override of its database: a name in its data folder, or a path.
    monkeypatch.setenv("OPENCODE_DB", "mine.db")
    assert default_roots()[-1] == tmp_path / "opencode" / "mine.db"
    monkeypatch.setenv("OPENCODE_DB", str(tmp_path / "elsewhere.db"))
    assert default_roots()[-1] == tmp_path / "elsewhere.db"


# ── OpenCode 1.x: its SQLite database ────────────────────────────────────────────────────────

DB_DUMP = Path(__file__).parent / "fixtures" / "opencode_1_18" / "tables.sql"  # `.dump session message part` of a real OpenCode 1.18.33 run


def _database(tmp_path: Path, wal: bool = True) -> Path:
    """The recorded tables in a fresh database, in WAL mode as OpenCode keeps it (its rows then
    sit in the write-ahead log while a writer holds it open)."""
    import sqlite3

    path = tmp_path / "opencode" / "opencode.db"
    path.parent.mkdir(parents=True, exist_ok=True)
    db = sqlite3.connect(path)
    if wal:
        db.execute("PRAGMA journal_mode = WAL")
    db.executescript(DB_DUMP.read_text())
    db.close()
    return path


def test_a_database_is_read_session_by_session_with_the_plugins_notice_taken_off(tmp_path):
    """A run of the real OpenCode 1.18.33 that LoopLedger's plugin guarded (progress warned call 2
    and halted call 3): calls and answers as OpenCode stored them, the warning notice the plugin
    appended to call 2's result taken off again, the halted call an error with the refusal."""
    path = _database(tmp_path)
    assert sniff(path) == "opencode"
    items = list(read(path))
    (start,) = [i for i in items if isinstance(i, SessionStart)]
    assert start.info.key == "ses_dcc62c522ffe2RELm8Rp1Hdn7p" and start.info.model == "standin/loop-model"
    assert start.info.meta["version"] == "1.18.33"
    calls = [c for i in items if isinstance(i, Batch) for c in i.calls]
    assert [(c.id, c.name, c.args["command"]) for c in calls] == [(f"call_{n}", "bash", "cat missing.txt")
                                                                  for n in (1, 2, 3)]
    answers = [a for i in items if isinstance(i, Answers) for a in i.answers]
    missing = "cat: missing.txt: No such file or directory\n"
    assert [(a.text, a.is_error) for a in answers[:2]] == [(missing, True), (missing, True)]  # exit 1: failed
    assert answers[2].is_error and answers[2].text.startswith("LoopLedger halted the agent (progress)")
    import sqlite3

    stored = sqlite3.connect(path).execute("SELECT data FROM part WHERE data LIKE '%call_2%'").fetchone()[0]
    assert "<loopledger_notice>" in json.loads(stored)["state"]["output"]  # it is in OpenCode's storage


def test_a_database_changes_with_its_write_ahead_log(tmp_path):
    import sqlite3

    path = _database(tmp_path)
    writer = sqlite3.connect(path)  # OpenCode, still running: new rows stay in the WAL
    writer.execute("PRAGMA wal_autocheckpoint = 0")
    before = stamp(path)
    assert formats.members(path) == [path, path.with_name("opencode.db-wal")]
    writer.execute("INSERT INTO part (id, message_id, session_id, time_created, time_updated, data) "
                   "SELECT 'prt_zzz', message_id, session_id, time_created, time_updated, "
                   "replace(replace(data, 'call_3', 'call_4'), 'LoopLedger halted', 'x') FROM part WHERE data LIKE '%call_3%'")
    writer.commit()
    assert stamp(path) != before  # a change of the unit, though the .db file itself did not move
    calls = [c.id for i in read(path) if isinstance(i, Batch) for c in i.calls]
    assert calls[-1] == "call_4"
    writer.close()


def test_a_sqlite_file_that_is_not_opencodes_is_an_error_naming_it(tmp_path):
    import sqlite3

    path = tmp_path / "ledger.db"
    sqlite3.connect(path).execute("CREATE TABLE sessions (id)").connection.commit()
    assert sniff(path) == "opencode"  # an SQLite file: OpenCode's schema may still be in its WAL
    (err,) = list(read(path))
    assert isinstance(err, ReadError) and str(path) in str(err) and "not an OpenCode database" in str(err)


def test_an_export_of_a_session_without_messages_yet_is_still_opencode(tmp_path):
    path = tmp_path / "empty.json"
    info = json.loads(EXPORT.read_text())["info"]
    path.write_text(json.dumps({"info": info, "messages": [], "todos": []}, indent=2))
    assert sniff(path) == "opencode"
    items = list(read(path))
    assert [type(i).__name__ for i in items] == ["SessionStart"] and items[0].info.key == SID
