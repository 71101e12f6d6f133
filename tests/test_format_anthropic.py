"""Anthropic Messages: tool_use / tool_result blocks, is_error, string or block content."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from loopledger.events import Answers, Batch, Prose, ReadError, UserTurn
from loopledger.formats import anthropic

FIX = Path(__file__).parent / "fixtures" / "formats" / "anthropic"


@pytest.mark.parametrize("name", ["request.json", "messages.jsonl"])
def test_conversation(name):
    items = list(anthropic.read(FIX / name))
    assert [type(i).__name__ for i in items] == [
        "SessionStart", "UserTurn", "Batch", "Answers", "Batch", "Answers", "Prose", "UserTurn"]
    assert items[0].info.title == "Why does `make test` fail?"
    assert items[0].info.model == ("claude-sonnet-4-5" if name == "request.json" else None)
    first = items[2]
    assert first.text == "I'll run it." and first.calls[0].args == {"command": "make test"}
    err = items[3].answers[0]
    assert err.is_error and err.call_id == "toolu_01" and "ImportError" in err.text
    assert [c.id for c in items[4].calls] == ["toolu_02", "toolu_03"]
    # a user message of only tool_result blocks answers calls; it is not a user turn
    assert [a.call_id for a in items[5].answers] == ["toolu_02", "toolu_03"]
    assert not any(a.is_error for a in items[5].answers)
    assert isinstance(items[6], Prose) and items[7].text == "Rename it back please."


def test_mixed_user_message_and_thinking(tmp_path):
    msgs = [
        {"role": "user", "content": "start"},
        {"role": "assistant", "content": [{"type": "thinking", "thinking": "hmm"},
                                          {"type": "tool_use", "id": "t1", "name": "ls", "input": {}}]},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t1", "content": "x"},
                                     {"type": "text", "text": "also check y"}]},
        {"role": "assistant", "content": [{"type": "thinking", "thinking": "only thinking"}]},
        {"role": "assistant", "content": 5},
        {"role": "tool", "content": "?"},
    ]
    path = tmp_path / "m.json"
    path.write_text(json.dumps(msgs))
    items = list(anthropic.read(path))
    assert isinstance(items[2], Batch) and items[2].text == ""
    assert isinstance(items[3], Answers) and isinstance(items[4], UserTurn)
    assert items[4].text == "also check y"
    errors = [i for i in items if isinstance(i, ReadError)]
    assert [e.line for e in errors] == [5, 6]
    assert "content must be a string or a list" in errors[0].message
    assert "unknown message role 'tool'" in errors[1].message
    assert len(items) == 7


def test_sniff_prefers_openai_when_tool_calls_present():
    assert anthropic.sniff((FIX / "request.json").read_bytes())
    assert not anthropic.sniff(b'[{"role": "assistant", "tool_calls": [], "content": [{"type": "tool_use"}]}]')
    assert not anthropic.sniff(b'[{"role": "user", "content": "plain"}]')
