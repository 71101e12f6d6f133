"""OpenAI Chat Completions: every container shape, tool_calls, malformed arguments, roles."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from loopledger.events import Answers, Batch, Prose, ReadError, SessionStart, UserTurn
from loopledger.formats import openai_chat

FIX = Path(__file__).parent / "fixtures" / "formats" / "openai_chat"


def _kinds(items) -> list[str]:
    return [type(i).__name__ for i in items]


SUPPORT = ["SessionStart", "UserTurn", "Batch", "Answers", "Batch", "Answers", "Answers", "Prose",
           "UserTurn"]


@pytest.mark.parametrize("name", ["support.json", "support.jsonl"])
def test_list_and_jsonl_read_alike(name):
    items = list(openai_chat.read(FIX / name))
    assert _kinds(items) == SUPPORT  # the system message is not a user turn
    assert items[0].info.title == "I need to change my flight ABC123 to tomorrow."
    assert items[1].line == 2  # file line (JSONL) or message index (JSON): both 1-based
    assert items[8].text == "Yes please."  # block content read as text


def test_tool_calls_arguments_and_malformed_flag():
    items = list(openai_chat.read(FIX / "support.json"))
    first, second = items[2], items[4]
    assert first.calls[0].args == {"reservation_id": "ABC123"} and first.text == ""
    assert second.text == "Let me check tomorrow's flights."
    good, broken = second.calls
    assert good.args == {"origin": "JFK", "destination": "SEA", "date": "2024-05-17"}
    assert not good.args_malformed
    assert broken.args_malformed and broken.args == '{"origin": "JFK", "destination": '
    assert broken.id == "call_3" and broken.name == "search_direct_flight"
    assert [a.call_id for i in items if isinstance(i, Answers) for a in i.answers] == [
        "call_1", "call_2", "call_3"]
    assert isinstance(items[7], Prose) and items[7].text.startswith("There are no direct flights")


def test_request_body_shape(tmp_path):
    doc = {"model": "gpt-4o", "messages": json.loads((FIX / "support.json").read_text())}
    path = tmp_path / "request.json"
    path.write_text(json.dumps(doc))
    assert _kinds(openai_chat.read(path)) == SUPPORT


def test_mini_swe_agent_trajectory():
    items = list(openai_chat.read(FIX / "acme__pages-42.traj.json"))
    info = items[0].info
    assert (info.key, info.agent, info.model) == ("acme__pages-42", "mini-swe-agent", "openai/gpt-4.1")
    assert info.title == "Fix the off-by-one in paginate()"
    # role "exit" ends the trajectory without an event
    assert _kinds(items) == ["SessionStart", "UserTurn", "Batch", "Answers", "Batch", "Answers"]


def test_tau_bench_one_session_per_record_with_stable_keys(tmp_path):
    items = list(openai_chat.read(FIX / "tau-bench-results.json"))
    starts = [i for i in items if isinstance(i, SessionStart)]
    assert [s.info.key for s in starts] == ["task-7.trial-0", "task-7.trial-1"]
    assert starts[1].info.meta == {"task_id": 7, "trial": 1, "reward": 0.0}
    assert starts[1].line == 2 and starts[1].info.agent == "tau-bench"
    recs = json.loads((FIX / "tau-bench-results.json").read_text())
    recs.append(recs[1])
    recs.append({"task_id": 9, "reward": 0})  # no traj
    path = tmp_path / "results.json"
    path.write_text(json.dumps(recs))
    items = list(openai_chat.read(path))
    keys = [i.info.key for i in items if isinstance(i, SessionStart)]
    assert keys == ["task-7.trial-0", "task-7.trial-1", "task-7.trial-1.record-3"]
    errors = [i for i in items if isinstance(i, ReadError)]
    assert len(errors) == 1 and errors[0].line == 4 and "traj" in errors[0].message


def test_legacy_function_call_and_bad_messages(tmp_path):
    msgs = [
        {"role": "user", "content": "weather?"},
        {"role": "assistant", "content": None,
         "function_call": {"name": "get_weather", "arguments": "{\"city\": \"Oslo\"}"}},
        {"role": "function", "name": "get_weather", "content": "-3C"},
        "not a message",
        {"role": "narrator", "content": "?"},
        {"role": "assistant", "tool_calls": [{"id": "x", "function": {"arguments": "{}"}}]},
        {"role": "assistant", "tool_calls": "nope"},
        {"role": "developer", "content": "be brief"},
        {"role": "assistant", "content": "   "},
    ]
    path = tmp_path / "legacy.json"
    path.write_text(json.dumps(msgs))
    items = list(openai_chat.read(path))
    batch = items[2]
    assert isinstance(batch, Batch) and batch.calls[0].id is None
    assert batch.calls[0].args == {"city": "Oslo"}
    assert items[3].answers[0].call_id is None and items[3].answers[0].text == "-3C"
    errors = [i for i in items if isinstance(i, ReadError)]
    assert [e.line for e in errors] == [4, 5, 6, 7]
    assert "expected a message object, got str" in errors[0].message
    assert "unknown message role 'narrator'" in errors[1].message
    assert "no function name" in errors[2].message
    assert "tool_calls must be a list" in errors[3].message
    assert len(items) == 4 + len(errors)  # developer and blank assistant messages: no events


def test_wrong_top_level_and_broken_document(tmp_path):
    path = tmp_path / "x.json"
    path.write_text('{"hello": 1}')
    (err,) = list(openai_chat.read(path))
    assert isinstance(err, ReadError) and "got dict" in err.message
    path.write_text('[{"role": "user", "content": "hi"},\n {"role": ')
    (err,) = list(openai_chat.read(path))
    assert isinstance(err, ReadError) and err.line == 2 and err.message.startswith("invalid JSON")


def test_jsonl_bad_line_keeps_reading(tmp_path):
    lines = (FIX / "support.jsonl").read_bytes().splitlines(keepends=True)
    path = tmp_path / "s.jsonl"
    path.write_bytes(b"".join(lines[:3]) + b"\xff\xfe garbage\n" + b"".join(lines[3:]))
    items = list(openai_chat.read(path))
    errors = [i for i in items if isinstance(i, ReadError)]
    assert len(errors) == 1 and errors[0].line == 4 and "not valid UTF-8" in errors[0].message
    assert sum(isinstance(i, UserTurn) for i in items) == 2


def test_jsonl_of_conversations_one_session_per_line(tmp_path):
    chat = json.loads((FIX / "support.json").read_text())
    path = tmp_path / "conversations.jsonl"
    path.write_text(json.dumps({"messages": chat}) + "\n" + json.dumps({"messages": chat[:4]}) + "\n"
                    + json.dumps({"role": "user", "content": "stray"}) + "\n")
    items = list(openai_chat.read(path))
    starts = [i for i in items if isinstance(i, SessionStart)]
    assert [s.info.key for s in starts] == ["line-1", "line-2"]
    assert starts[0].info.title == "I need to change my flight ABC123 to tomorrow."
    assert sum(len(i.calls) for i in items if isinstance(i, Batch)) == 3 + 1
    assert {i.line for i in items if isinstance(i, Batch)} == {1, 2}  # the file line
    (err,) = [i for i in items if isinstance(i, ReadError)]
    assert err.line == 3 and "as on the first" in err.message
