"""Cline-family task folders (Cline, Roo Code, Kilo Code): one session per folder, calls from the
API history (XML tags and native blocks), the ui messages where the history is missing, retries
as Retry events, and discovery handing the worker one file per folder."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from loopledger import formats
from loopledger.events import Answers, Batch, Prose, ReadError, Retry, SessionStart, UserTurn
from loopledger.formats import cline, sniff
from loopledger.worker import default_watch_paths, discover

FIX = Path(__file__).parent / "fixtures" / "formats" / "cline"
CLINE = FIX / "saoudrizwan.claude-dev" / "tasks" / "1772614800000"
ROO = FIX / "rooveterinaryinc.roo-cline" / "tasks" / "0b9e6c1a-5f1e-4c55-9a3e-7d2c1b0a9f88"
KILO = FIX / "kilocode.kilo-code" / "tasks" / "1772800000000"


def items_of(path: Path) -> list:
    return list(formats.read(path))


def test_cline_xml_tools_answers_and_person_turns():
    items = items_of(CLINE / "ui_messages.json")
    assert not [i for i in items if isinstance(i, ReadError)]
    info = items[0].info
    assert (info.key, info.format, info.agent, info.model) == ("1772614800000", "cline", "cline", "claude-sonnet-4-5")
    assert info.title == "The cart total is wrong when a coupon is applied. Fix it."
    assert info.started_at == "2026-03-04T09:00:00.000Z"  # ts 1772614800000 ms, in UTC
    calls = [c for i in items if isinstance(i, Batch) for c in i.calls]
    assert [c.name for c in calls] == ["read_file", "replace_in_file", "execute_command", "execute_command",
                                       "attempt_completion"]
    assert calls[0].args == {"path": "src/cart.ts"}
    assert calls[2].args == calls[3].args == {"command": "npm test -- cart", "requires_approval": "false"}
    # the tags are the call: the batch's text is what is left (the thinking), never the XML
    first = next(i for i in items if isinstance(i, Batch))
    assert "<read_file>" not in first.text and "look at the cart module" in first.text
    answers = {a.call_id: a for i in items if isinstance(i, Answers) for a in i.answers}
    assert answers[calls[0].id].text.startswith("export function total")
    assert "<environment_details>" not in answers[calls[0].id].text
    assert answers[calls[1].id].text == "The content was successfully saved to src/cart.ts." and not answers[calls[1].id].is_error
    assert answers[calls[3].id].is_error  # the person denied the second run
    assert calls[4].id not in answers  # the completion was never answered
    turns = [i.text for i in items if isinstance(i, UserTurn)]
    assert turns == ["The cart total is wrong when a coupon is applied. Fix it.",
                     "Round to cents instead of re-running the tests."]


def test_ui_timestamps_reach_api_messages_and_retries_are_events():
    items = items_of(CLINE / "api_conversation_history.json")  # either file reads the folder
    retries = [i for i in items if isinstance(i, Retry)]
    assert [r.text for r in retries] == ["api_req_retried"]
    assert retries[0].ts == "2026-03-04T09:00:02.100Z"
    batches = [i for i in items if isinstance(i, Batch)]
    # message 2 came after the ui message said while message 1 (index 0) was the last one
    assert batches[0].ts == "2026-03-04T09:00:04.000Z" and batches[0].line == 2
    assert all(c.name != "api_req_retried" for b in batches for c in b.calls)


def test_roo_native_blocks_with_ts_errors_and_resumption():
    items = items_of(ROO)  # the folder itself
    info = items[0].info
    assert info.agent == "roo-code" and info.key == ROO.name
    batches = [i for i in items if isinstance(i, Batch)]
    assert [(c.id, c.name) for b in batches for c in b.calls] == [("toolu_01A", "execute_command"),
                                                                  ("toolu_01B", "read_file")]
    assert batches[0].ts == "2026-03-05T08:40:03.000Z"
    failed = [a for i in items if isinstance(i, Answers) for a in i.answers if a.call_id == "toolu_01B"]
    assert failed[0].is_error
    turns = [i.text for i in items if isinstance(i, UserTurn)]
    # the resumption notice is the harness; the person's words are its user_message
    assert turns == ["Why does `make lint` fail on CI?", "OK, wrap that line and re-run lint."]
    retries = [i for i in items if isinstance(i, Retry)]
    assert len(retries) == 2 and all(r.text.startswith("error_retry: ") for r in retries)
    assert any(isinstance(i, Prose) for i in items)


def test_ui_messages_alone_give_calls_answers_and_turns():
    items = items_of(KILO / "ui_messages.json")
    assert items[0].info.agent == "kilo-code"
    batches = [i for i in items if isinstance(i, Batch)]
    assert [c.name for b in batches for c in b.calls] == ["execute_command", "mcp:github:get_secret_names",
                                                          "searchFiles"]
    assert batches[0].calls[0].args == {"command": "./deploy.sh --dry-run"}
    answers = [a.text for i in items if isinstance(i, Answers) for a in i.answers]
    assert answers == ["error: DEPLOY_TOKEN not set", '["DEPLOY_TOKEN_PROD"]',
                       "scripts/deploy.sh:3: : ${DEPLOY_TOKEN:?}"]
    assert [i.text for i in items if isinstance(i, UserTurn)] == [
        "Check that the deploy script still works.", "Use DEPLOY_TOKEN_PROD."]
    assert [i.text for i in items if isinstance(i, Retry)] == ["api_req_retried"]


def test_sniffed_by_content_under_any_name(tmp_path):
    for src in (CLINE / "api_conversation_history.json", CLINE / "ui_messages.json",
                KILO / "ui_messages.json", ROO / "api_conversation_history.json"):
        copy = tmp_path / f"{src.parent.name}-{src.name}.txt"
        shutil.copy(src, copy)
        assert sniff(copy) == "cline", src
        items = list(formats.read(copy))
        assert isinstance(items[0], SessionStart) and items[0].info.format == "cline"
        assert any(isinstance(i, Batch) for i in items)  # a renamed file is read alone


def test_plain_anthropic_lists_are_not_cline():
    anthropic = Path(__file__).parent / "fixtures" / "formats" / "anthropic"
    for p in anthropic.iterdir():
        assert not cline.sniff(p.read_bytes()[:65536]), p
    assert not cline.sniff(b'[{"role": "user", "content": "hi"}]')
    assert not cline.sniff(b'[{"type": "say", "text": "no ts"}]')


def test_discovery_yields_one_file_per_task_folder(tmp_path):
    root = tmp_path / "globalStorage"
    shutil.copytree(FIX, root)
    found = discover([root])
    assert found == sorted([root / "kilocode.kilo-code/tasks/1772800000000/ui_messages.json",
                            root / "rooveterinaryinc.roo-cline/tasks" / ROO.name / "ui_messages.json",
                            root / "saoudrizwan.claude-dev/tasks/1772614800000/ui_messages.json"])
    # a member named on the command line is the same unit
    member = root / "saoudrizwan.claude-dev/tasks/1772614800000/api_conversation_history.json"
    assert discover([member]) == [member.parent / "ui_messages.json"]
    # without a ui file the history stands for the folder
    (member.parent / "ui_messages.json").unlink()
    assert discover([member.parent]) == [member]


def test_watch_defaults_include_the_extension_folders(tmp_path, monkeypatch):
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.setenv("APPDATA", str(tmp_path / "AppData" / "Roaming"))
    wanted = [tmp_path / ".config/Code/User/globalStorage/saoudrizwan.claude-dev/tasks",
              tmp_path / "Library/Application Support/Code/User/globalStorage/rooveterinaryinc.roo-cline/tasks",
              tmp_path / "AppData/Roaming/Code/User/globalStorage/kilocode.kilo-code/tasks"]
    for w in wanted:
        w.mkdir(parents=True)
    got = default_watch_paths()
    assert all(w in got for w in wanted), got


def test_broken_files_are_errors_naming_the_file(tmp_path):
    task = tmp_path / "tasks" / "1"
    shutil.copytree(CLINE, task)
    (task / "api_conversation_history.json").write_text('[{"role": "user", "content": [')
    items = list(formats.read(task / "ui_messages.json"))
    errors = [i for i in items if isinstance(i, ReadError)]
    assert len(errors) == 1 and errors[0].path.endswith("api_conversation_history.json") and errors[0].line == 1
    # the ui messages stand in: the session is still read
    calls = [c.name for i in items if isinstance(i, Batch) for c in i.calls]
    assert calls == ["readFile", "editedExistingFile", "execute_command", "execute_command"]
    (task / "ui_messages.json").write_text(json.dumps([{"ts": 1, "type": "say", "say": "task", "text": "x"}, 7]))
    items = list(formats.read(task / "ui_messages.json", format="cline"))
    assert sorted((Path(e.path).name, e.line) for e in items if isinstance(e, ReadError)) == [
        ("api_conversation_history.json", 1), ("ui_messages.json", 2)]
