"""OpenAI Responses API items: parallel calls grouped, outputs by call_id, reasoning skipped."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from loopledger.events import Answers, Batch, Prose, ReadError, UserTurn
from loopledger.formats import openai_responses

FIX = Path(__file__).parent / "fixtures" / "formats" / "openai_responses"


@pytest.mark.parametrize("name", ["weather.json", "weather.jsonl"])
def test_items(name):
    items = list(openai_responses.read(FIX / name))
    assert [type(i).__name__ for i in items] == [
        "SessionStart", "UserTurn", "Batch", "Answers", "Answers", "Batch", "Answers", "Prose"]
    assert items[0].info.title == "What is the weather in Paris and Rome?"
    assert items[0].info.model == ("gpt-4.1" if name == "weather.json" else None)
    parallel = items[2]
    assert [(c.id, c.args) for c in parallel.calls] == [("call_p", {"city": "Paris"}),
                                                       ("call_r", {"city": "Rome"})]
    assert [i.answers[0].call_id for i in items[3:5]] == ["call_r", "call_p"]
    malformed = items[5].calls[0]
    assert malformed.args_malformed and malformed.args == '{"city": '
    assert items[7].text == "Paris: 18C cloudy. Rome: 24C sunny."


def test_output_item_splits_batches_and_odd_items(tmp_path):
    items = [
        {"type": "function_call", "call_id": "a", "name": "f", "arguments": "{}"},
        {"type": "reasoning", "summary": []},
        {"type": "function_call", "call_id": "b", "name": "f", "arguments": "{\"x\":1}"},
        {"type": "function_call_output", "call_id": "a", "output": [{"type": "input_text", "text": "A"}]},
        {"type": "function_call", "call_id": "c", "name": "g", "arguments": ""},
        {"type": "function_call_output", "call_id": "c", "output": {"ok": True}, "status": "incomplete"},
        {"no_type": 1},
        7,
        {"type": "message", "role": "oracle", "content": "?"},
    ]
    path = tmp_path / "items.json"
    path.write_text(json.dumps({"output": items}))
    out = list(openai_responses.read(path))
    batches = [i for i in out if isinstance(i, Batch)]
    assert [[c.id for c in b.calls] for b in batches] == [["a", "b"], ["c"]]
    assert batches[1].calls[0].args is None
    answers = [a for i in out if isinstance(i, Answers) for a in i.answers]
    assert (answers[0].text, answers[1].text, answers[1].is_error) == ("A", '{"ok":true}', True)
    errors = [i for i in out if isinstance(i, ReadError)]
    assert [e.line for e in errors] == [7, 8, 9]
    assert not any(isinstance(i, (UserTurn, Prose)) for i in out)


def test_not_a_list(tmp_path):
    path = tmp_path / "x.json"
    path.write_text('"just a string"')
    (err,) = list(openai_responses.read(path))
    assert isinstance(err, ReadError) and "got str" in err.message


def test_sniff():
    assert openai_responses.sniff((FIX / "weather.json").read_bytes())
    assert not openai_responses.sniff(b'[{"role": "user", "content": "hi"}]')
