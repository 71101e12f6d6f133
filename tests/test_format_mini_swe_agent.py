"""mini-swe-agent v1 (text actions) on real trajectories: the reader says what the harness ran.

The harness (minisweagent/agents/default.py, DefaultAgent.parse_action) executes a reply only
when its action regex finds exactly one ```bash block; otherwise it runs nothing and answers
with its format_error_template. Such a reply is one `harness_error` call answered by an error,
not one call per block. Expected counts come from jq / grep over the real files (SOURCE.md).

The real files are fetched data, which is not committed: the tests that read them run where the
excerpts are present (tests/fixtures/formats/mini_swe_agent_v1/, git-ignored, or the folder
LOOPLEDGER_MINI_V1_DATA names) and skip otherwise; the rest are built by hand from the harness's
source."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from loopledger.events import Answers, Batch, UserTurn
from loopledger.formats import read, sniff

FIX = Path(os.environ.get("LOOPLEDGER_MINI_V1_DATA")
           or Path(__file__).parent / "fixtures" / "formats" / "mini_swe_agent_v1")
F15103 = FIX / "django__django-15103.excerpt.traj.json"
F14349 = FIX / "django__django-14349.excerpt.traj.json"
real = pytest.mark.skipif(not (F15103.is_file() and F14349.is_file()),
                          reason="the fetched mini-swe-agent excerpts are not here (not committed; SOURCE.md)")


def _calls_and_answers(path: Path):
    items = list(read(path))
    calls = [c for i in items if isinstance(i, Batch) for c in i.calls]
    answers = {a.call_id: a for i in items if isinstance(i, Answers) for a in i.answers}
    return items, calls, answers


@real
def test_each_reply_is_one_call_and_refused_replies_are_harness_errors():
    assert sniff(F15103) == "openai-chat"
    items, calls, answers = _calls_and_answers(F15103)
    # 14 replies (jq), each one call: 12 ran bash, 2 were refused (4 and 2 blocks)
    assert len(calls) == 14
    assert [c.name for c in calls].count("bash") == 12
    refused = [c for c in calls if c.name == "harness_error"]
    assert [c.args for c in refused] == [{"reason": "format_error", "actions": 4},
                                         {"reason": "format_error", "actions": 2}]
    for c in refused:
        assert answers[c.id].is_error
        assert answers[c.id].text.startswith("Please always provide EXACTLY ONE action in triple backticks")
    # of the 12 observations, one has <returncode>2 (grep): the only failing bash call
    assert sum(answers[c.id].is_error for c in calls if c.name == "bash") == 1
    assert all(c.id in answers for c in calls)
    assert len([i for i in items if isinstance(i, UserTurn)]) == 1  # only the task is the person


@real
def test_nine_refusals_in_a_row_are_nine_harness_error_calls_answered_by_the_harness():
    _, calls, answers = _calls_and_answers(F14349)
    assert [c.name for c in calls] == ["bash"] + ["harness_error"] * 9 + ["bash"]
    assert [c.args["actions"] for c in calls[1:-1]] == [4, 2, 6, 2, 2, 3, 4, 2, 3]
    # the harness's answer differs only in the count it names: one text per count (2, 3, 4, 6)
    assert len({answers[c.id].digest for c in calls[1:-1]}) == 4
    assert [answers[c.id].is_error for c in calls] == [False] + [True] * 9 + [False]


def test_a_custom_format_error_template_is_recognised_from_the_trajectorys_config(tmp_path):
    """A run configured with its own format_error_template: the refusal is its text, not the
    default's; the count is what the harness's action regex found (two ```bash blocks)."""
    custom = "Your reply must hold ONE ```bash block (you sent {{actions|length}})."
    doc = {"trajectory_format": "mini-swe-agent-1", "instance_id": "acme__cli-9",
           "info": {"exit_status": "Submitted", "config": {"agent": {"format_error_template": custom}}},
           "messages": [
               {"role": "system", "content": "You are a helpful assistant."},
               {"role": "user", "content": "<pr_description>--verbose is ignored</pr_description>"},
               {"role": "assistant", "content": "THOUGHT: look.\n\n```bash\nls\n```\n\nthen\n\n```bash\ncat cli.py\n```"},
               {"role": "user", "content": "Your reply must hold ONE ```bash block (you sent 2)."},
               {"role": "assistant", "content": "THOUGHT: one at a time.\n\n```bash\nls\n```"},
               {"role": "user", "content": "<returncode>0</returncode>\n<output>\ncli.py\n</output>"}]}
    path = tmp_path / "custom.traj.json"
    path.write_text(json.dumps(doc, indent=2))  # as mini-swe-agent saves them
    _, calls, answers = _calls_and_answers(path)
    assert [(c.name, c.args) for c in calls] == [("harness_error", {"reason": "format_error", "actions": 2}),
                                                 ("bash", {"command": "ls"})]
    assert answers[calls[0].id].is_error and not answers[calls[1].id].is_error


def test_a_timed_out_command_ran_and_failed(tmp_path):
    doc = {"trajectory_format": "mini-swe-agent-1", "info": {"exit_status": "Submitted"}, "messages": [
        {"role": "user", "content": "fix it"},
        {"role": "assistant", "content": "THOUGHT: serve.\n\n```bash\npython -m http.server\n```"},
        {"role": "user", "content": "The last command <command>python -m http.server</command> timed out "
                                    "and has been killed.\nThe output of the command was:\n <output>\n\n</output>"}]}
    path = tmp_path / "t.traj.json"
    path.write_text(json.dumps(doc, indent=2))  # as mini-swe-agent saves them
    _, calls, answers = _calls_and_answers(path)
    assert [(c.name, c.args) for c in calls] == [("bash", {"command": "python -m http.server"})]
    assert answers[calls[0].id].is_error


def test_v2_format_error_is_a_harness_error_not_a_user_turn(tmp_path):
    """mini-swe-agent v2 (minisweagent/models/utils/actions_toolcall.py, parse_toolcall_actions)
    adds no assistant message for an unparsable reply, only a user message marked
    extra.interrupt_type "FormatError"; it is the harness speaking, not the person."""
    err = {"role": "user", "content": "Tool call error:\n\n<error>\nNo tool calls found in the response.\n</error>",
           "extra": {"interrupt_type": "FormatError"}}
    doc = {"trajectory_format": "mini-swe-agent-1.1", "info": {"exit_status": "Submitted"}, "messages": [
        {"role": "user", "content": "fix it"},
        {"role": "assistant", "content": "", "tool_calls": [
            {"id": "c1", "type": "function", "function": {"name": "bash", "arguments": "{\"command\": \"ls\"}"}}]},
        {"role": "tool", "tool_call_id": "c1", "content": "<returncode>0</returncode>"},
        err, err]}
    path = tmp_path / "v2.traj.json"
    path.write_text(json.dumps(doc, indent=2))
    items, calls, answers = _calls_and_answers(path)
    assert [c.name for c in calls] == ["bash", "harness_error", "harness_error"]
    assert calls[1].args == {"reason": "format_error"} and answers[calls[1].id].is_error
    assert len({calls[1].id, calls[2].id}) == 2
    assert len([i for i in items if isinstance(i, UserTurn)]) == 1  # only "fix it"
