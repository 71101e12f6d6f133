"""Claude Code session JSONL: joined split messages, answers vs user turns, subagents."""

from __future__ import annotations

import json
from pathlib import Path

from loopledger.events import Answers, Batch, Prose, ReadError, SessionStart, UserTurn
from loopledger.formats import claude_code

FIX = Path(__file__).parent / "fixtures" / "formats" / "claude_code"


def _write(path: Path, recs: list) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in recs))
    return path


def test_main_session_events_in_order():
    items = list(claude_code.read(FIX / "session.jsonl"))
    kinds = [type(i).__name__ for i in items]
    assert kinds == ["SessionStart", "UserTurn", "Batch", "Answers", "Batch", "Answers", "Batch",
                     "Answers", "Prose", "UserTurn", "Batch", "Answers", "Prose"]
    info = items[0].info
    assert info.key == "5c1e0f3a-1111-4222-8333-944455556666"
    assert info.title == "Fix failing checkout test"  # the summary line wins over the prompt
    assert info.model == "claude-sonnet-4-5" and info.parent_key is None
    assert info.started_at == "2026-03-01T10:00:01Z" and info.meta == {"version": "2.1.40"}
    assert items[1].text == "The checkout test fails on main, please fix it" and items[1].line == 5


def test_split_message_is_one_batch_with_interleaved_results_held():
    items = list(claude_code.read(FIX / "session.jsonl"))
    batch, answers = items[2], items[3]
    assert isinstance(batch, Batch) and isinstance(answers, Answers)
    # msg_A came as thinking, text and two tool_use lines with a result line in between
    assert [c.id for c in batch.calls] == ["toolu_1", "toolu_2"]
    assert batch.text == "Let me look at the test and the module."
    # ts of the message's first line, line of its last: see test_readers_streaming (appends)
    assert batch.line == 10 and batch.ts == "2026-03-01T10:00:03Z"
    assert answers.line == 11
    assert [a.call_id for a in answers.answers] == ["toolu_1", "toolu_2"]
    assert answers.answers[1].text.endswith("return sum(xs) + 1")


def test_errors_meta_interrupts_and_system_lines():
    items = list(claude_code.read(FIX / "session.jsonl"))
    failing = items[7]
    assert isinstance(failing, Answers) and failing.answers[0].is_error
    assert "ModuleNotFoundError" in failing.answers[0].text
    turns = [i.text for i in items if isinstance(i, UserTurn)]
    # the isMeta caveat and "[Request interrupted by user]" are not the person speaking
    assert turns == ["The checkout test fails on main, please fix it", "Thanks. Now commit it."]
    assert not any(isinstance(i, ReadError) for i in items)


def test_subagent_file_is_its_own_session_linked_to_parent():
    items = list(claude_code.read(FIX / "agent-a7f3c21.jsonl"))
    info = items[0].info
    assert info.key == "a7f3c21" and info.parent_key == "5c1e0f3a-1111-4222-8333-944455556666"
    assert info.model == "claude-haiku-4-5" and info.title.startswith("Find every caller")
    batch = next(i for i in items if isinstance(i, Batch))
    assert [c.name for c in batch.calls] == ["Grep", "Glob"]
    answers = [a.call_id for i in items if isinstance(i, Answers) for a in i.answers]
    assert answers == ["toolu_s1", "toolu_s2"]
    assert isinstance(items[-1], Prose)


def test_inline_sidechain_lines_become_separate_sessions_not_interleaved(tmp_path):
    main = [json.loads(line) for line in (FIX / "session.jsonl").read_text().splitlines()]
    side = [json.loads(line) for line in (FIX / "agent-a7f3c21.jsonl").read_text().splitlines()]
    mixed = main[:8] + side[:3] + main[8:] + side[3:]
    items = list(claude_code.read(_write(tmp_path / "mixed.jsonl", mixed)))
    starts = [n for n, i in enumerate(items) if isinstance(i, SessionStart)]
    assert [items[n].info.key for n in starts] == ["5c1e0f3a-1111-4222-8333-944455556666", "a7f3c21"]
    main_calls = sum(len(i.calls) for i in items[:starts[1]] if isinstance(i, Batch))
    side_calls = sum(len(i.calls) for i in items[starts[1]:] if isinstance(i, Batch))
    assert (main_calls, side_calls) == (5, 2)


def test_new_user_turn_closes_an_open_message(tmp_path):
    base = {"sessionId": "s1", "isSidechain": False, "timestamp": "t"}
    recs = [
        {**base, "type": "user", "message": {"role": "user", "content": "go"}},
        {**base, "type": "assistant", "message": {"id": "m1", "role": "assistant", "content": [
            {"type": "tool_use", "id": "t1", "name": "Bash", "input": {"command": "ls"}}]}},
        {**base, "type": "user", "message": {"role": "user", "content": [
            {"type": "tool_result", "tool_use_id": "t1", "content": "a"},
            {"type": "text", "text": "stop, do it differently"}]}},
        {**base, "type": "assistant", "message": {"id": "m1", "role": "assistant", "content": [
            {"type": "tool_use", "id": "t2", "name": "Bash", "input": {"command": "ls -a"}}]}},
    ]
    items = list(claude_code.read(_write(tmp_path / "s.jsonl", recs)))
    kinds = [type(i).__name__ for i in items]
    assert kinds == ["SessionStart", "UserTurn", "Batch", "Answers", "UserTurn", "Batch"]
    assert items[4].text == "stop, do it differently"


def test_bad_lines_are_errors_and_reading_goes_on(tmp_path):
    good = (FIX / "session.jsonl").read_bytes().splitlines(keepends=True)
    path = tmp_path / "s.jsonl"
    path.write_bytes(b"".join(good[:6]) + b'{"type": "user", "mess\n' + b"[1, 2]\n"
                     + b'{"type":"assistant","sessionId":"x","message":{"content":7}}\n'
                     + b"".join(good[6:]))
    items = list(claude_code.read(path))
    errors = [i for i in items if isinstance(i, ReadError)]
    assert [e.line for e in errors] == [7, 8, 9]
    assert "invalid JSON" in errors[0].message
    assert "expected a JSON object, got list" in errors[1].message
    assert "content must be a string or a list" in errors[2].message
    assert sum(len(i.calls) for i in items if isinstance(i, Batch)) == 5


def test_sniff():
    head = (FIX / "session.jsonl").read_bytes()[:4096]
    assert claude_code.sniff(head)
    assert not claude_code.sniff(b'{"role": "user", "content": "hi"}\n')
    assert not claude_code.sniff(b'{"type": "session_meta", "payload": {}}\n')


def test_sniff_when_the_first_line_outgrows_the_head():
    line = json.dumps({"parentUuid": None, "isSidechain": False, "sessionId": "s", "type": "user",
                       "message": {"role": "user", "content": "x" * 100_000}}).encode()
    assert claude_code.sniff(line[:65536])
    assert not claude_code.sniff(b'{"role": "user", "content": "' + b"x" * 70_000)


def test_error_flagged_only_in_tool_use_result(tmp_path):
    base = {"sessionId": "s1", "isSidechain": False, "timestamp": "t"}
    recs = [
        {**base, "type": "user", "message": {"role": "user", "content": "go"}},
        {**base, "type": "assistant", "message": {"id": "m1", "role": "assistant", "content": [
            {"type": "tool_use", "id": "t1", "name": "Read", "input": {"file_path": "/nope"}}]}},
        {**base, "type": "user", "toolUseResult": "Error: File does not exist.",
         "message": {"role": "user", "content": [
             {"type": "tool_result", "tool_use_id": "t1", "content": "File does not exist."}]}},
    ]
    items = list(claude_code.read(_write(tmp_path / "s.jsonl", recs)))
    (answer,) = items[-1].answers
    assert answer.is_error and answer.call_id == "t1" and answer.text == "File does not exist."


def test_a_resumed_session_written_again_into_its_file_is_read_once(tmp_path):
    """Claude Code resuming a session writes the conversation so far into the file again (new
    uuids, the same message ids, tool_use ids and timestamps), then goes on: the copy is no
    second run of every call (it once read as 45 calls repeated, a loop to every guard)."""
    import uuid

    lines = [json.loads(line) for line in (FIX / "session.jsonl").read_text().splitlines() if line.strip()]
    copy = [{**r, "uuid": str(uuid.uuid4())} if r.get("type") in ("user", "assistant") else r for r in lines]
    more = {"parentUuid": None, "isSidechain": False, "sessionId": lines[-1].get("sessionId"), "type": "user",
            "timestamp": "2026-03-01T11:00:00Z", "uuid": str(uuid.uuid4()),
            "message": {"role": "user", "content": "and now the cart test, please"}}
    resumed = _write(tmp_path / "resumed.jsonl", lines + copy + [more])
    once = [i for i in claude_code.read(FIX / "session.jsonl") if not isinstance(i, SessionStart)]
    twice = [i for i in claude_code.read(resumed) if not isinstance(i, SessionStart)]
    assert [type(i).__name__ for i in twice] == [type(i).__name__ for i in once] + ["UserTurn"]
    calls = [c.id for i in twice if isinstance(i, Batch) for c in i.calls]
    assert len(calls) == len(set(calls)) == sum(len(i.calls) for i in once if isinstance(i, Batch))
    assert twice[-1].text == "and now the cart test, please"
