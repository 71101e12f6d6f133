"""GitHub Copilot CLI session events, as the CLI writes them (events.jsonl) and as tools that keep
them wrap each event ({"role": "", "content": "", "raw": {event}}).

The fixtures are written from the event schema of Copilot CLI 1.0.x (session.start {sessionId,
producer "copilot-agent", copilotVersion, startTime, context.cwd}; assistant.message {content,
toolRequests [{toolCallId, name, arguments, type}]}; tool.execution_start {toolCallId, toolName,
arguments}; tool.execution_complete {toolCallId, success, result {content, detailedContent},
error {message, code}}), as the Copilot SDK's session-events.schema.json (its generated types)
defines them and real events.jsonl lines quoted in public repositories show them; no licensed
real session file was found to copy. wrapped-events.jsonl is events.jsonl with each
line wrapped."""

from __future__ import annotations

import json
from pathlib import Path

from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st
from loopledger.analysis.replay_table import sessions_of
from loopledger.events import Answers, Batch, Prose, ReadError, SessionStart, UserTurn
from loopledger.formats import copilot_cli, read, sniff
from reader_checks_b import assert_fuzz, calls, errors, kinds

FIX = Path(__file__).parent / "fixtures" / "formats" / "copilot_cli"
PLAIN, WRAPPED = FIX / "events.jsonl", FIX / "wrapped-events.jsonl"


def _answers(items: list) -> dict:
    return {a.call_id: a for i in items if isinstance(i, Answers) for a in i.answers}


def test_both_forms_sniff_as_copilot_cli_and_read_alike():
    assert sniff(PLAIN) == sniff(WRAPPED) == "copilot-cli"
    plain, wrapped = list(read(PLAIN)), list(read(WRAPPED))
    assert not errors(plain) and not errors(wrapped)
    assert plain == wrapped
    # every line of the wrapped file is an event: none quarantined (812 such lines were, as a
    # file no reader knew), and each call is one
    assert len(calls(wrapped)) == 6


def test_session_turns_calls_and_answers():
    items = list(copilot_cli.read(PLAIN))
    assert kinds(items) == ["SessionStart", "UserTurn", "Batch", "Answers", "Answers"] + [
        "Batch", "Answers"] * 4 + ["Prose"]
    start = items[0]
    assert isinstance(start, SessionStart)
    info = start.info
    assert (info.key, info.format, info.agent, info.model, info.started_at) == (
        "5b0f7c2e-1d4a-4e8b-9c3f-2a6d8e1f4b70", "copilot-cli", "copilot-cli", "gpt-5.4", "2026-06-18T19:13:41.562Z")
    assert info.title == "wait for the CI run of my branch and tell me if it passed"
    assert info.meta["cwd"] == "/home/dev/shop"
    turn = items[1]
    assert isinstance(turn, UserTurn) and turn.text.startswith("wait for the CI run")  # not transformedContent
    # two calls the reply requested together are one batch; their starts are not calls again
    first = items[2]
    assert [(c.id, c.name) for c in first.calls] == [("call_a1", "bash"), ("call_a2", "view")]
    assert first.text == "Looking up the branch and its latest run." and first.ts == "2026-06-18T19:13:46.300Z"
    assert first.line == 7
    got = _answers(items)
    assert (got["call_a1"].text, got["call_a1"].is_error, got["call_a1"].ts) == (
        "fix-cart-total\n<exited with exit code 0>", False, "2026-06-18T19:13:46.500Z")
    assert got["call_a2"].text == "1. name: ci\n2. on: [push]"  # content, what the model read
    assert isinstance(items[-1], Prose) and items[-1].text.startswith("The run is still in progress")


def test_a_poll_repeated_is_the_same_call_answered_alike():
    cs = calls(list(read(PLAIN)))
    polls = [c for c in cs if c.id.startswith("call_p")]
    assert len(polls) == 3 and len({json.dumps(c.args, sort_keys=True) for c in polls}) == 1
    got = _answers(list(read(PLAIN)))
    assert len({got[c.id].text for c in polls}) == 1


def test_a_failed_execution_is_a_failed_answer_and_an_unrequested_start_a_call():
    items = list(read(PLAIN))
    (denied,) = [c for c in calls(items) if c.id == "call_s1"]
    assert denied.args == {"command": "gh run cancel 42", "description": "cancel run"}
    answer = _answers(items)["call_s1"]
    assert answer.is_error and answer.text == "Denied by preToolUse hook: cancelling CI is not allowed (denied)"


def _events(tmp_path: Path, lines: list[dict], name: str = "events.jsonl") -> Path:
    folder = tmp_path / "abc-session"
    folder.mkdir(exist_ok=True)
    path = folder / name
    path.write_text("".join(json.dumps(d) + "\n" for d in lines))
    return path


def test_each_session_start_is_a_session_and_a_file_without_one_is_keyed_by_its_folder(tmp_path):
    start = {"type": "session.start", "data": {"sessionId": "s-2", "startTime": "2026-01-01T00:00:00Z"}}
    call = {"type": "tool.execution_start", "data": {"toolCallId": "c1", "toolName": "view", "arguments": '{"path": "a"}'},
            "timestamp": "2026-01-01T00:00:01Z"}
    done = {"type": "tool.execution_complete", "data": {"toolCallId": "c1", "success": True, "result": {"content": "x"}}}
    path = _events(tmp_path, [call, done, start, {**call, "data": {**call["data"], "toolCallId": "c2"}}])
    got = [(info.key, [c.id for e in events if isinstance(e, Batch) for c in e.calls])
           for info, events, _ in sessions_of(read(path), path)]
    assert got == [("abc-session", ["c1"]), ("s-2", ["c2"])]
    # arguments given as JSON text are parsed
    assert calls(list(read(path)))[0].args == {"path": "a"}


def test_a_completion_without_its_start_still_shows_its_call(tmp_path):
    """Logs that keep only completions (SDK event logs) still ran the call."""
    path = _events(tmp_path, [
        {"type": "user.message", "data": {"content": "go"}},
        {"type": "tool.execution_complete", "data": {"toolCallId": "c9", "toolName": "grep", "success": False,
                                                     "error": {"message": "rg: no such file"}}}])
    items = list(read(path))
    assert [(c.id, c.name) for c in calls(items)] == [("c9", "grep")]
    assert _answers(items)["c9"].is_error and _answers(items)["c9"].text == "rg: no such file"


def test_bad_lines_are_reported_with_their_line_and_reading_goes_on(tmp_path):
    path = _events(tmp_path, [{"type": "session.start", "data": {"sessionId": "s"}}, {"hello": 1},
                              {"type": "user.message", "data": {"content": "hi"}}])
    with path.open("a") as fh:
        fh.write("{not json\n")
    items = list(read(path))
    bad = [i for i in items if isinstance(i, ReadError)]
    assert [b.line for b in bad] == [2, 4]
    assert "not a Copilot CLI event" in bad[0].message
    assert [i.text for i in items if isinstance(i, UserTurn)] == ["hi"]


def test_other_jsonl_is_not_copilot_cli():
    assert not copilot_cli.sniff(b'{"role": "user", "content": "hi"}\n{"role": "assistant", "content": "yo"}\n')
    assert not copilot_cli.sniff(b'{"type": "user", "message": {"role": "user", "content": "hi"}}\n')
    assert not copilot_cli.sniff(b'{"role": "", "content": "", "raw": {"kind": "x"}}\n')
    assert copilot_cli.sniff(b'{"role": "", "content": "", "raw": "{\\"type\\": \\"user.message\\", \\"data\\": {}}"}\n')


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(cut=st.integers(0, 12000), pos=st.integers(0, 12000),
       junk=st.sampled_from([b"", b"\xff\xfe", b"\n{}\n", b'"raw": ', b'{"type": "session.start", "data": 1}\n',
                             b"x" * 100_000]))
@example(cut=10**7, pos=0, junk=b"")
def test_fuzz_never_raises(cut, pos, junk):
    assert_fuzz(copilot_cli, WRAPPED.read_bytes(), cut, pos, junk, ".jsonl")
