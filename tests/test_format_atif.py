"""ATIF (Harbor) trajectories: steps with tool_calls and observation.results."""

from __future__ import annotations

import json
from pathlib import Path

from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st
from loopledger.events import Answers, Batch, Prose, UserTurn
from loopledger.formats import atif
from reader_checks_b import (
    JUNK_VALUES,
    assert_fuzz,
    assert_survives,
    calls,
    errors,
    kinds,
    replace_node,
)

FIX = Path(__file__).parent / "fixtures" / "formats" / "atif" / "hello-world.trajectory.json"


def doc_with(steps: list) -> dict:
    doc = json.loads(FIX.read_text())
    doc["steps"] = steps
    return doc


def test_session_info():
    info = next(iter(atif.read(FIX))).info
    assert info.key == "3f9d2c1e-harbor-run-0042" and info.format == "atif"
    assert info.agent == "terminus-2" and info.model == "anthropic/claude-sonnet-4"
    assert info.meta["schema_version"] == "ATIF-v1.4" and info.meta["agent_version"] == "0.3.1"
    assert info.title.startswith("Create /app/hello.txt") and info.started_at == "2025-10-16T14:30:00Z"


def test_steps_become_events():
    items = list(atif.read(FIX))
    assert not errors(items)
    # system step: nothing; user → turn; agent with calls → batch + answers; final agent → prose
    assert kinds(items) == ["SessionStart", "UserTurn", "Batch", "Answers", "Batch", "Answers", "Prose"]
    first = items[2]
    assert isinstance(first, Batch) and first.text == "Creating the file and checking it."
    assert [(c.id, c.name) for c in first.calls] == [("call_1", "bash"), ("call_2", "bash")]
    assert first.calls[1].args == {"command": "cat /app/hello.txt"} and first.line == 3
    answers = items[3]
    assert isinstance(answers, Answers)
    assert [(a.call_id, a.text) for a in answers.answers] == [("call_1", ""), ("call_2", "Hello, world!\n")]
    assert items[5].answers[0].is_error  # is_error from the result's extra
    # the last step's result has no source_call_id and the step made no calls: it answers nothing
    assert isinstance(items[6], Prose) and items[6].text.startswith("The file exists")


def test_results_without_ids_pair_only_when_counts_agree(tmp_path):
    path = tmp_path / "t.json"
    path.write_text(json.dumps(doc_with([
        {"step_id": 1, "source": "user", "message": "go"},
        {"step_id": 2, "source": "agent", "message": "",
         "tool_calls": [{"tool_call_id": "c1", "function_name": "ls", "arguments": {}}],
         "observation": {"results": [{"content": "a.txt"}]}},
        {"step_id": 3, "source": "agent", "message": "",
         "tool_calls": [{"tool_call_id": "c2", "function_name": "ls", "arguments": {}}],
         "observation": {"results": [{"content": "x"}, {"content": "y"}]}},
    ])))
    items = list(atif.read(path))
    assert kinds(items) == ["SessionStart", "UserTurn", "Batch", "Answers", "Batch"]
    assert items[3].answers[0].call_id is None and items[3].answers[0].text == "a.txt"


def test_arguments_as_json_string(tmp_path):
    path = tmp_path / "t.json"
    path.write_text(json.dumps(doc_with([
        {"step_id": 1, "source": "agent", "message": "", "tool_calls": [
            {"tool_call_id": "c1", "function_name": "search", "arguments": '{"q": "x"}'},
            {"tool_call_id": "c2", "function_name": "search", "arguments": '{"q": '}]}])))
    first, second = calls(list(atif.read(path)))
    assert first.args == {"q": "x"} and not first.args_malformed
    assert second.args == '{"q": ' and second.args_malformed


def test_bad_steps_are_reported_and_reading_goes_on(tmp_path):
    path = tmp_path / "t.json"
    path.write_text(json.dumps(doc_with([
        {"step_id": 1, "source": "user", "message": "start"},
        "not a step",
        {"step_id": 3, "source": "robot", "message": "?"},
        {"step_id": 4, "source": "agent", "message": "", "tool_calls": [{"arguments": {}}]},
        {"step_id": 5, "source": "agent", "message": "", "tool_calls": "ls"},
        {"step_id": 6, "source": "user", "message": "still read"},
    ])))
    items = list(atif.read(path))
    errs = errors(items)
    assert [e.line for e in errs] == [2, 3, 4, 5] and all(e.path == str(path) for e in errs)
    assert "unknown source 'robot'" in errs[1].message and "function_name" in errs[2].message
    assert [i.text for i in items if isinstance(i, UserTurn)] == ["start", "still read"]


def test_not_a_trajectory(tmp_path):
    path = tmp_path / "t.json"
    path.write_text('{"schema_version": "ATIF-v1.4", "steps": {}}')
    (err,) = atif.read(path)
    assert err.path == str(path) and "steps" in err.message


def test_truncated_document_names_the_line(tmp_path):
    path = tmp_path / "t.json"
    path.write_text(FIX.read_text()[:700])
    (err,) = atif.read(path)
    assert err.path == str(path) and err.line > 1 and "JSON" in err.message


def test_sniff():
    assert atif.sniff(FIX.read_bytes())
    assert not atif.sniff(b'{"schema_version": "2", "steps": []}')
    assert not atif.sniff(b'[{"role": "user", "content": "ATIF-v1"}]')


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(cut=st.integers(0, 3000), pos=st.integers(0, 3000),
       junk=st.sampled_from([b"", b"\xff", b"{", b"null,", b'"steps": 5,', b"[" * 3000]))
@example(cut=10**7, pos=0, junk=b"")
def test_fuzz_never_raises(cut, pos, junk):
    assert_fuzz(atif, FIX.read_bytes(), cut, pos, junk)


@settings(max_examples=150, deadline=None)
@given(k=st.integers(0, 10_000), value=st.sampled_from(JUNK_VALUES))
def test_wrong_types_never_raise(k, value):
    doc = replace_node(json.loads(FIX.read_text()), k, value)
    assert_survives(atif, json.dumps(doc).encode())


def test_deeply_nested_content_never_raises(tmp_path):
    content = '"x"'
    for _ in range(1000):  # under orjson's 1024 levels, over Python's recursion limit
        content = '{"type": "tool_result", "content": ' + content + "}"
    path = tmp_path / "t.json"
    path.write_text('{"schema_version": "ATIF-v1.4", "session_id": "s", "agent": {}, "steps": ['
                    '{"step_id": 1, "source": "user", "message": ' + content + "},"
                    '{"step_id": 2, "source": "user", "message": "after"}]}')
    items = list(atif.read(path))
    assert [i.text for i in items if isinstance(i, UserTurn)][1] == "after"
    assert "nested too deeply" in items[1].text
