"""OpenHands: output.jsonl (one instance per line), saved event lists, legacy flat events."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st
from loopledger.events import Answers, Batch, Prose, SessionStart, UserTurn
from loopledger.formats import openhands
from reader_checks_b import (
    JUNK_VALUES,
    assert_fuzz,
    assert_growth_shows_past_the_old_end,
    assert_survives,
    calls,
    errors,
    kinds,
    replace_node,
)

FIX = Path(__file__).parent / "fixtures" / "formats" / "openhands"
OUTPUT = FIX / "output.jsonl"
EVENTS = FIX / "trajectory.json"
LEGACY = FIX / "legacy-output.jsonl"

# the last Batch/Answers: the cause-less error observation (the controller ran nothing)
FIRST_INSTANCE = ["SessionStart", "UserTurn", "Batch", "Answers", "Batch", "Answers", "Prose",
                  "Batch", "Answers", "Batch", "Answers", "Prose"]


def test_output_jsonl_one_session_per_line():
    items = list(openhands.read(OUTPUT))
    assert not errors(items)
    starts = [i for i in items if isinstance(i, SessionStart)]
    assert [s.info.key for s in starts] == ["dateparse__dateparse-88", "acme__release-7"]
    assert [s.line for s in starts] == [1, 2]
    info = starts[0].info
    assert info.agent == "CodeActAgent" and info.model == "anthropic/claude-3-5-sonnet-20241022"
    assert info.meta["accumulated_cost"] == 0.12 and info.started_at == "2025-03-01T10:00:00"
    second = items[items.index(starts[1]):]
    assert kinds(second) == ["SessionStart", "UserTurn", "Batch", "Answers", "Prose"]
    assert second[4].text == "Done: version is 2.0.0."  # an agent message is prose


def test_events_become_calls_answers_and_prose():
    items = list(openhands.read(OUTPUT))
    first = items[: items.index(next(i for i in items[1:] if isinstance(i, SessionStart)))]
    # system/recall and their observations skipped; think and finish are prose; the
    # cause-less error observation is the harness refusing a reply: a harness_error call
    assert kinds(first) == FIRST_INSTANCE
    run = first[2].calls[0]
    assert run.id == "toolu_01" and run.name == "execute_bash"
    # the bookkeeping fields are gone; what the command does stays
    assert run.args == {"command": "cd /workspace/dateparse && python -m pytest -q",
                        "is_input": False, "blocking": False}
    assert first[2].text == "Run the tests first."
    assert first[3].answers[0].is_error  # exit code 1
    assert isinstance(first[6], Prose) and first[6].text.startswith("%W is not ISO week")
    assert first[8].answers[0].is_error and "did not appear verbatim" in first[8].answers[0].text
    assert first[9].calls[0].name == "harness_error" and first[10].answers[0].is_error
    assert first[10].answers[0].text == "The action has not been executed."
    assert first[11].text == "The parser now uses ISO week directives."


def test_actions_of_one_model_response_are_one_batch():
    items = list(openhands.read(OUTPUT))
    batch = items[4]
    assert isinstance(batch, Batch)
    assert [(c.id, c.name) for c in batch.calls] == [
        ("toolu_02", "str_replace_editor"), ("toolu_03", "str_replace_editor")]
    assert [a.call_id for a in items[5].answers] == ["toolu_02", "toolu_03"]


def test_saved_event_list_is_one_session_with_event_positions():
    items = list(openhands.read(EVENTS))
    assert kinds(items) == FIRST_INSTANCE
    assert items[0].info.model == "claude-3-5-sonnet-20241022"
    assert items[1].line == 2 and items[2].line == 5  # the event's index in the list
    assert [c.id for c in calls(items)] == ["toolu_01", "toolu_02", "toolu_03", "toolu_05", "error-14"]


def test_legacy_flat_events():
    items = list(openhands.read(LEGACY))
    assert not errors(items)
    assert kinds(items) == ["SessionStart", "UserTurn"] + ["Batch", "Answers"] * 3 + ["Prose"]
    assert items[0].info.key == "line-1" and items[0].info.title == "Add a robots.txt"
    cs = calls(items)
    assert [(c.name, c.args) for c in cs] == [
        ("run", {"command": "ls /workspace/public"}),
        ("run_ipython", {"code": "create_file('/workspace/public/robots.txt')"}),
        ("run", {"command": "cat /workspace/public/robots.txt"})]
    answers = [i.answers[0] for i in items if isinstance(i, Answers)]
    assert all(a.call_id is None for a in answers)  # no ids: paired in order by the engine
    assert [a.is_error for a in answers] == [False, False, True]
    assert items[1].text.startswith("Please fix the following issue")


def test_history_as_action_observation_pairs(tmp_path):
    h = json.loads(EVENTS.read_text())
    pairs = [[h[4], h[5]]]
    path = tmp_path / "pairs.json"
    path.write_text(json.dumps({"instance_id": "p-1", "history": pairs}, indent=1))
    items = list(openhands.read(path))
    assert kinds(items) == ["SessionStart", "Batch", "Answers"] and items[0].info.key == "p-1"


def test_user_typed_terminal_command_is_not_an_agent_call(tmp_path):
    path = tmp_path / "t.json"
    path.write_text(json.dumps([
        {"id": 1, "source": "user", "action": "message", "args": {"content": "hi"}},
        {"id": 2, "source": "user", "action": "run", "args": {"command": "ls"}},
        {"id": 3, "source": "user", "cause": 2, "observation": "run", "content": "a.txt"}]))
    assert kinds(list(openhands.read(path))) == ["SessionStart", "UserTurn"]


def test_bad_records_are_reported_and_reading_goes_on(tmp_path):
    lines = OUTPUT.read_text().splitlines()
    path = tmp_path / "output.jsonl"
    path.write_text("\n".join([
        lines[0][:500],                       # 1: truncated
        '{"instance_id": "x", "history": 3}',  # 2: history is not a list
        json.dumps({"instance_id": "y", "history": ["oops", {"id": 1, "foo": 2}]}),  # 3
        lines[1],                             # 4: fine
    ]) + "\n")
    items = list(openhands.read(path))
    errs = errors(items)
    assert [e.line for e in errs] == [1, 2, 3, 3] and all(e.path == str(path) for e in errs)
    assert "history" in errs[1].message and "event 1" in errs[2].message
    assert "neither an action nor an observation" in errs[3].message
    assert [i.info.key for i in items if isinstance(i, SessionStart)] == ["y", "acme__release-7"]
    assert [i.text for i in items if isinstance(i, UserTurn)] == ["Bump the version to 2.0.0"]


def test_truncated_event_list_names_the_line(tmp_path):
    path = tmp_path / "t.json"
    path.write_text(EVENTS.read_text()[:1500])
    (err,) = openhands.read(path)
    assert err.path == str(path) and err.line > 1


def test_sniff_when_a_huge_patch_fills_the_head():
    patch = "diff --git a/x b/x\\n" + "+line\\n" * 20000
    head = ('{"instance_id":"acme__x-1","test_result":{"git_patch":"' + patch).encode()[:65536]
    assert openhands.sniff(head)
    legacy = ('{"issue":{"owner":"acme","repo":"site","number":1,"title":"t","body":"b"},'
              '"issue_type":"issue","instruction":"fix","base_commit":"abc","git_patch":"' + patch)
    assert openhands.sniff(legacy.encode()[:65536])
    # a SWE-bench predictions line is not an OpenHands instance
    assert not openhands.sniff(b'{"instance_id": "x", "model_patch": "diff", "model_name_or_path": "m"}')


def test_sniff():
    for f in (OUTPUT, EVENTS, LEGACY):
        assert openhands.sniff(f.read_bytes()[:65536]), f
    chat = b'[{"role": "user", "content": "hi"}, {"role": "assistant", "content": "run"}]'
    assert not openhands.sniff(chat)
    swe = b'{"environment": "swe_main", "trajectory": [{"action": "run x"}], "history": [{"action": "run"}]}'
    assert not openhands.sniff(swe)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(cut=st.integers(0, 30000), pos=st.integers(0, 30000),
       junk=st.sampled_from([b"", b"\xff\n", b"[", b"\n{}\n", b'"cause": 4,', b"[" * 3000]))
@example(cut=10**7, pos=0, junk=b"")
def test_fuzz_never_raises(cut, pos, junk):
    for source, suffix in ((OUTPUT, ".jsonl"), (EVENTS, ".json"), (LEGACY, ".jsonl")):
        assert_fuzz(openhands, source.read_bytes(), cut, pos, junk, suffix)


@settings(max_examples=150, deadline=None)
@given(k=st.integers(0, 10_000), value=st.sampled_from(JUNK_VALUES))
def test_wrong_types_never_raise(k, value):
    events = replace_node(json.loads(EVENTS.read_text()), k, value)
    assert_survives(openhands, json.dumps(events, indent=1).encode())
    record = replace_node(json.loads(OUTPUT.read_text().splitlines()[0]), k, value)
    assert_survives(openhands, json.dumps(record).encode() + b"\n", ".jsonl")


def test_a_grown_file_shows_every_changed_session_past_the_old_end(tmp_path):
    assert_growth_shows_past_the_old_end(openhands, OUTPUT.read_bytes(), tmp_path, ".jsonl")


def test_an_editor_read_gets_back_the_view_command_the_model_sent(tmp_path):
    # OpenHands turns str_replace_editor {"command": "view", "path": …} into a `read` action
    # whose args drop the command (as in its multi-swe-bench output); a bare `read` stays as it is.
    tcm = {"function_name": "str_replace_editor", "tool_call_id": "t1",
           "model_response": {"id": "r1", "choices": [{"message": {"tool_calls": [{"function": {
               "name": "str_replace_editor",
               "arguments": '{"command": "view", "path": "/w/parser.c"}'}}]}}]}}
    path = tmp_path / "t.json"
    path.write_text(json.dumps([
        {"id": 1, "source": "user", "action": "message", "args": {"content": "fix it"}},
        {"id": 2, "source": "agent", "action": "read", "tool_call_metadata": tcm,
         "args": {"path": "/w/parser.c", "start": 0, "end": -1, "view_range": None, "thought": ""}},
        {"id": 3, "source": "agent", "cause": 2, "observation": "read", "content": "1\tDEF(x);"},
        {"id": 4, "source": "agent", "action": "read", "args": {"path": "/w/a.c"}},
        {"id": 5, "source": "agent", "cause": 4, "observation": "read", "content": "x"}]))
    got = calls(list(openhands.read(path)))
    assert got[0].name == "str_replace_editor"
    assert got[0].args == {"command": "view", "path": "/w/parser.c", "start": 0, "end": -1, "view_range": None}
    assert got[1].name == "read" and got[1].args == {"path": "/w/a.c"}


@pytest.mark.corpus
def test_an_error_observation_answering_no_action_is_a_harness_error(corpus_dir):
    """A real run (the shared corpus's OpenHands multi-swe-bench output, MIT): in
    ponylang__ponyc-4593 the controller could not turn one reply into an action (a
    str_replace_editor call with a bad `command`) and answered with an ErrorObservation that has
    no cause (event 29). That reply ran nothing: one harness_error call, answered by the error,
    between the calls around it. Counted by hand with jq over events 0-33:
      jq -r '.history[] | select((.action != null and .tool_call_metadata != null)
             or (.observation=="error" and .cause==null)) | .id' → 11 run (execute_bash),
      1 read (str_replace_editor, id 27), the error (id 29), 2 reads (ids 30, 32)."""
    path = corpus_dir / "openhands" / "multi-swe-bench-ponyc-output.jsonl"
    items = list(openhands.read(path))
    assert not errors(items)
    start = next(n for n, i in enumerate(items) if isinstance(i, SessionStart) and i.info.key == "ponylang__ponyc-4593")
    end = next((n for n, i in enumerate(items) if n > start and isinstance(i, SessionStart)), len(items))
    cs = [c for i in items[start:end] if isinstance(i, Batch) for c in i.calls][:15]
    assert [c.name for c in cs] == ["execute_bash"] * 11 + ["str_replace_editor", "harness_error"] + ["str_replace_editor"] * 2
    answers = {a.call_id: a for i in items[start:end] if isinstance(i, Answers) for a in i.answers}
    refused = answers[cs[12].id]
    assert cs[12].args == {"reason": "error_observation"} and refused.is_error
    assert refused.text.startswith("Parameter 'command' is expected to be one of ['view', 'create'")
