"""Agent logs seen in the wild: mini-swe-agent v1 text actions, {"messages", "meta"} conversions
keyed by their session id, Codex's process tools (exec_command / write_stdin polls) and
apply_patch as a custom tool call."""

from __future__ import annotations

import json
from pathlib import Path

from loopledger.detectors.policy import PolicySpec
from loopledger.events import Answers, Batch, SessionStart, UserTurn
from loopledger.formats import read, sniff
from loopledger.replay import replay, tally


def _write(path: Path, value) -> Path:
    path.write_text(json.dumps(value, indent=2))  # as mini-swe-agent and converters save them
    return path


def _answers(items: list) -> dict:
    return {a.call_id: a for i in items if isinstance(i, Answers) for a in i.answers}


MINI_V1 = {
    "info": {"exit_status": "Submitted", "config": {"model": {"model_name": "anthropic/claude-sonnet-4-5"}},
             "mini_version": "1.9.0"},
    "trajectory_format": "mini-swe-agent-1",
    "instance_id": "acme__pages-77",
    "messages": [
        {"role": "system", "content": "You are a helpful assistant that can interact with a computer."},
        {"role": "user", "content": "<pr_description>\nThe pager skips page 2.\n</pr_description>"},
        {"role": "assistant", "content": "THOUGHT: Let me find the pager.\n\n```bash\ngrep -rn 'def paginate' src\n```"},
        {"role": "user", "content": "<returncode>0</returncode>\n<output>\nsrc/pages.py:12:def paginate(items, size):\n</output>"},
        {"role": "assistant", "content": "THOUGHT: Run the reproduction.\n\n```bash\npython repro.py\n```"},
        {"role": "user", "content": "<returncode>1</returncode>\n<output>\nAssertionError: page 2 missing\n</output>"},
        {"role": "assistant", "content": "THOUGHT: Again to be sure.\n\n```bash\npython repro.py\n```"},
        {"role": "user", "content": "<returncode>1</returncode>\n<output>\nAssertionError: page 2 missing\n</output>"},
        {"role": "assistant", "content": "I think I need to look more carefully."},
        {"role": "user", "content": "Please always provide EXACTLY ONE action in triple backticks, found 0 actions."},
        {"role": "assistant", "content": "THOUGHT: Done.\n\n```bash\necho COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT\n```"},
        {"role": "exit", "content": ""},
    ],
}


def test_mini_swe_agent_v1_bash_blocks_are_calls_with_observations(tmp_path):
    path = _write(tmp_path / "acme__pages-77.traj.json", MINI_V1)
    assert sniff(path) == "openai-chat"
    items = list(read(path))
    assert items[0].info.key == "acme__pages-77" and items[0].info.agent == "mini-swe-agent"
    calls = [c for i in items if isinstance(i, Batch) for c in i.calls]
    # the reply without a block ran nothing: one harness_error call, answered by the format error
    assert [c.name for c in calls] == ["bash"] * 3 + ["harness_error", "bash"]
    assert [c.args["command"] for c in calls[:3]] == ["grep -rn 'def paginate' src", "python repro.py", "python repro.py"]
    got = _answers(items)
    assert not got[calls[0].id].is_error and got[calls[1].id].is_error  # returncode 1
    assert calls[3].args == {"reason": "format_error", "actions": 0} and got[calls[3].id].is_error
    assert got[calls[1].id].digest == got[calls[2].id].digest
    # only the task is the person; observations and the format-error nudge are not
    assert [i.text for i in items if isinstance(i, UserTurn)] == [MINI_V1["messages"][1]["content"]]
    # the repeated failing command is judged as a repeat (a strike) by run-length
    steps = list(replay([i for i in items if not isinstance(i, SessionStart)], PolicySpec.parse("run-length")))
    assert tally(steps).totals()["strikes"] >= 1


def test_mini_swe_agent_with_tool_calls_is_read_as_before(tmp_path):
    doc = {**MINI_V1, "messages": [
        {"role": "user", "content": "fix it"},
        {"role": "assistant", "content": "```bash\nls\n```", "tool_calls": [
            {"id": "c1", "type": "function", "function": {"name": "bash", "arguments": "{\"command\": \"ls\"}"}}]},
        {"role": "tool", "tool_call_id": "c1", "content": "a.py"}]}
    items = list(read(_write(tmp_path / "v2.traj.json", doc)))
    assert [(c.id, c.args) for i in items if isinstance(i, Batch) for c in i.calls] == [("c1", {"command": "ls"})]


def test_messages_meta_conversions_keyed_by_session_id(tmp_path):
    msgs = [{"role": "user", "content": "hi"},
            {"role": "assistant", "content": "", "tool_calls": [
                {"id": "t1", "type": "function", "function": {"name": "Read", "arguments": "{}"}}]},
            {"role": "tool", "tool_call_id": "t1", "content": "x"}]
    one = _write(tmp_path / "cc.json", {"messages": msgs, "meta": {"session_id": "5c1e0f3a-aaaa", "source": "claude-code"}})
    assert next(iter(read(one))).info.key == "5c1e0f3a-aaaa"
    two = _write(tmp_path / "codex.json", {"messages": msgs, "meta": {"session_meta": {"session_id": "0199c2a4-bbbb"}}})
    assert next(iter(read(two))).info.key == "0199c2a4-bbbb"
    lines = tmp_path / "many.jsonl"
    lines.write_text("".join(json.dumps({"messages": msgs, "meta": {"session_id": f"s-{n}"}}) + "\n" for n in range(3)))
    keys = [i.info.key for i in read(lines) if isinstance(i, SessionStart)]
    assert keys == ["s-0", "s-1", "s-2"]


def _codex(path: Path, items: list[dict]) -> Path:
    head = {"timestamp": "2026-03-07T13:22:10.000Z", "type": "session_meta",
            "payload": {"id": "0199c2a4-7e31-7b52-9d0e-5b8f2c1a6e47", "timestamp": "2026-03-07T13:22:10.000Z",
                        "cwd": "/home/sam/app", "cli_version": "0.63.0"}}
    rows = [head] + [{"timestamp": f"2026-03-07T13:22:{11 + n:02d}.000Z", "type": "response_item", "payload": p}
                     for n, p in enumerate(items)]
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def _fc(cid: str, name: str, args: dict) -> dict:
    return {"type": "function_call", "call_id": cid, "name": name, "arguments": json.dumps(args)}


def _out(cid: str, text: str) -> dict:
    return {"type": "function_call_output", "call_id": cid, "output": text}


def test_codex_quiet_poll_repeats_exactly(tmp_path):
    running = "Chunk ID: {c}\nWall time: {w} seconds\nProcess running with session ID 27299\nOriginal token count: 0\nOutput:\n"
    items = [{"type": "message", "role": "user", "content": [{"type": "input_text", "text": "build it"}]},
             _fc("x1", "exec_command", {"cmd": "npm run build", "yield_time_ms": 1000}),
             _out("x1", running.format(c="a1f", w="1.0017"))]
    for n in range(4):
        items += [_fc(f"p{n}", "write_stdin", {"session_id": 27299, "chars": "", "yield_time_ms": 1000 * (n + 1),
                                               "max_output_tokens": 2000}),
                  _out(f"p{n}", running.format(c=f"{n}e{n}", w=f"{n + 1}.00{n}"))]
    items += [_fc("w1", "write_stdin", {"session_id": 27299, "chars": "y\n", "yield_time_ms": 500}),
              _out("w1", "Chunk ID: zz\nWall time: 0.5 seconds\nProcess exited with code 0\nOutput:\ndone\n")]
    path = _codex(tmp_path / "rollout-2026-03-07T13-22-10-0199c2a4.jsonl", items)
    assert sniff(path) == "codex"
    got = list(read(path))
    calls = [c for i in got if isinstance(i, Batch) for c in i.calls]
    polls = [c for c in calls if c.id.startswith("p")]
    # the poll keeps its target and nothing that varies between polls
    assert {json.dumps(c.args, sort_keys=True) for c in polls} == {'{"chars": "", "session_id": 27299}'}
    write = next(c for c in calls if c.id == "w1")
    assert write.args == {"session_id": 27299, "chars": "y\n", "yield_time_ms": 500}  # a real write is kept whole
    answers = _answers(got)
    assert len({answers[c.id].digest for c in polls}) == 1
    assert answers["p0"].text.startswith("Process running with session ID 27299")
    assert "Chunk ID" not in answers["x1"].text
    steps = list(replay([i for i in got if not isinstance(i, SessionStart)], PolicySpec.parse("run-length")))
    assert tally(steps).totals()["strikes"] >= 2  # the guard sees the poll that never moves


def test_codex_apply_patch_is_a_call_on_the_raw_patch(tmp_path):
    patch = "*** Begin Patch\n*** Update File: src/app.py\n@@\n-a = 1\n+a = 2\n*** End Patch\n"
    path = _codex(tmp_path / "rollout.jsonl", [
        {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "bump a"}]},
        {"type": "custom_tool_call", "call_id": "ap1", "name": "apply_patch", "input": patch, "status": "completed"},
        {"type": "custom_tool_call_output", "call_id": "ap1",
         "output": json.dumps({"output": "Success. Updated the following files:\nM src/app.py\n",
                               "metadata": {"exit_code": 0, "duration_seconds": 0.0}})}])
    got = list(read(path))
    (call,) = [c for i in got if isinstance(i, Batch) for c in i.calls]
    assert (call.name, call.args) == ("apply_patch", {"input": patch})
    answer = _answers(got)["ap1"]
    assert answer.text.startswith("Success. Updated") and not answer.is_error
