"""SWE-agent .traj: command-string actions and the function-calling history."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st
from loopledger.events import Answers, Batch, UserTurn
from loopledger.formats import swe_agent
from reader_checks_b import (
    JUNK_VALUES,
    assert_fuzz,
    assert_survives,
    calls,
    errors,
    kinds,
    replace_node,
)

from tests.conftest import CORPUS

FIX = Path(__file__).parent / "fixtures" / "formats" / "swe_agent"
COMMANDS = FIX / "acme__utils-17.traj"
FUNCTIONS = FIX / "fc-acme__config-3.traj"


def test_commands_tool_is_first_word_args_the_whole_command():
    items = list(swe_agent.read(COMMANDS))
    assert not errors(items)
    assert kinds(items) == ["SessionStart", "UserTurn"] + ["Batch", "Answers"] * 6
    cs = calls(items)
    assert [c.name for c in cs] == ["find_file", "open", "edit", "edit", "python", "submit"]
    assert cs[0].args == {"command": 'find_file "text.py" src'}  # trailing newline dropped
    assert cs[2].args == cs[3].args and cs[2].args["command"].endswith("end_of_edit")
    assert all(c.id is None for c in cs)
    answers = [i.answers[0] for i in items if isinstance(i, Answers)]
    assert all(a.call_id is None for a in answers)
    assert answers[2].digest == answers[3].digest and "F821" in answers[2].text
    assert items[2].text == "Let's find the file that defines slugify."


def test_user_turn_is_the_task_not_the_demo():
    items = list(swe_agent.read(COMMANDS))
    turns = [i for i in items if isinstance(i, UserTurn)]
    assert len(turns) == 1 and "slugify() drops non-ASCII" in turns[0].text
    info = items[0].info
    assert info.title == "slugify() drops non-ASCII letters"  # the issue, not the boilerplate
    assert info.meta["instance_id"] == "acme__utils-17"
    assert info.format == "swe-agent" and info.meta["exit_status"] == "submitted"
    assert info.meta["model_stats"]["api_calls"] == 6 and info.meta["environment"] == "swe_main"


def test_function_calling_history():
    items = list(swe_agent.read(FUNCTIONS))
    assert not errors(items)
    assert kinds(items) == ["SessionStart", "UserTurn"] + ["Batch", "Answers"] * 4
    cs = calls(items)
    assert [(c.id, c.name) for c in cs] == [
        ("call_a1", "bash"), ("call_a2", "open"), ("call_a3", "edit"), ("call_a4", "submit")]
    assert cs[1].args == {"path": "src/config.py", "line_number": 12}  # parsed, not a string
    answers = [i.answers[0] for i in items if isinstance(i, Answers)]
    assert [a.call_id for a in answers] == ["call_a1", "call_a2", "call_a3", "call_a4"]
    assert items[0].info.model == "gpt-4o-2024-08-06"
    assert items[0].info.title == "fc-acme__config-3"  # no ISSUE: marker: the instance


def test_bad_steps_are_reported_and_reading_goes_on(tmp_path):
    doc = json.loads(COMMANDS.read_text())
    doc["trajectory"][1] = "garbage"
    doc["trajectory"][3]["action"] = None  # (an empty action with a reply is a format error: below)
    path = tmp_path / "x.traj"
    path.write_text(json.dumps(doc))
    items = list(swe_agent.read(path))
    errs = errors(items)
    assert [e.line for e in errs] == [2, 4] and all(e.path == str(path) for e in errs)
    assert "no action" in errs[1].message
    assert len([i for i in items if isinstance(i, Batch)]) == 4


def test_bad_tool_call_in_function_history(tmp_path):
    doc = json.loads(FUNCTIONS.read_text())
    doc["history"][4]["tool_calls"].append({"id": "x", "function": {"arguments": "{}"}})
    path = tmp_path / "x.traj"
    path.write_text(json.dumps(doc))
    items = list(swe_agent.read(path))
    (err,) = errors(items)
    assert err.line == 5 and "function name" in err.message
    assert len(calls(items)) == 4


def test_truncated_file_names_the_line(tmp_path):
    path = tmp_path / "x.traj"
    path.write_text(COMMANDS.read_text()[:900])
    (err,) = swe_agent.read(path)
    assert err.path == str(path) and err.line > 1


def test_sniff():
    assert swe_agent.sniff(COMMANDS.read_bytes()) and swe_agent.sniff(FUNCTIONS.read_bytes())
    mini = b'{"info": {"exit_status": "Submitted"}, "messages": [], "trajectory_format": "mini-swe-agent-1"}'
    assert not swe_agent.sniff(mini)
    assert not swe_agent.sniff(b'[{"id": 1, "source": "agent", "action": "run"}]')


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(cut=st.integers(0, 9000), pos=st.integers(0, 9000),
       junk=st.sampled_from([b"", b"\xc3\x28", b"}", b'"action": 3,', b'"history": 1,', b"{" * 2000]))
@example(cut=10**7, pos=0, junk=b"")
def test_fuzz_never_raises(cut, pos, junk):
    for source in (COMMANDS, FUNCTIONS):
        assert_fuzz(swe_agent, source.read_bytes(), cut, pos, junk, ".traj")


@settings(max_examples=150, deadline=None)
@given(k=st.integers(0, 10_000), value=st.sampled_from(JUNK_VALUES))
def test_wrong_types_never_raise(k, value):
    for source in (COMMANDS, FUNCTIONS):
        doc = replace_node(json.loads(source.read_text()), k, value)
        assert_survives(swe_agent, json.dumps(doc).encode(), ".traj")


def test_a_step_swe_agent_could_not_parse_is_one_harness_error(tmp_path):
    """SWE-agent 1.x (sweagent/agent/agents.py: forward() fills `thought` with the reply when
    parsing found no action; forward_with_handling adds that step to the trajectory, runs
    nothing and requeries with tools.format_error_template, which the next step's `query`
    ends with). Built from that code, as no public trajectory at hand holds one."""
    doc = json.loads(COMMANDS.read_text())
    error = ("Your output was not formatted correctly. You must always include one discussion and one "
             "command as part of your response. Make sure you do not have multiple discussion/command tags.")
    reply = "I will now look at the file and then edit it, then run the tests."
    failed = {"action": "", "observation": "", "response": reply, "thought": reply, "state": "{}",
              "execution_time": 0.0, "query": [], "extra_info": {}}
    nxt = dict(doc["trajectory"][1])
    nxt["query"] = [{"role": "system", "content": "SETTING"}, {"role": "assistant", "content": reply},
                    {"role": "user", "content": error}]
    doc["trajectory"] = [doc["trajectory"][0], failed, nxt, *doc["trajectory"][2:]]
    path = tmp_path / "fmt.traj"
    path.write_text(json.dumps(doc, indent=2))
    items = list(swe_agent.read(path))
    assert not errors(items)  # not a malformed record
    cs = calls(items)
    assert [c.name for c in cs] == ["find_file", "harness_error", "open", "edit", "edit", "python", "submit"]
    assert cs[1].args == {"reason": "format_error"}
    refused = next(i for i in items if isinstance(i, Batch) and i.calls[0].name == "harness_error")
    assert refused.text == reply
    answer = next(a for i in items if isinstance(i, Answers) for a in i.answers if a.call_id == cs[1].id)
    assert answer.is_error and answer.text == error


# ── what ran: the harness's own refusals and failures ─────────────────────────────────────────

# The head of step 6's observation in ../shared/corpus/swe-agent-traj/gpt4-pydicom-1458.traj (MIT,
# SWE-agent's tests/test_data): the windowed editor's linter threw the edit away.
PYDICOM_LINT = ("Your proposed edit has introduced new syntax error(s). Please understand the fixes and retry "
                "your edit commmand.\n\nERRORS:\n- E999 SyntaxError: unmatched ']'\n\nThis is how your edit would "
                "have looked if applied\n-------------------------------------------------\n[File: "
                "/pydicom__pydicom/pydicom/pixel_data_handlers/numpy_handler.py (373 lines total)]\n")


def _traj(tmp_path, steps, config=None) -> list:
    doc = {"environment": "swe_main", "trajectory": [
        {"action": a, "observation": o, "thought": "t", "response": "r", "state": "{}"} for a, o in steps],
        "history": [], "info": {}}
    if config is not None:
        doc["replay_config"] = json.dumps(config)
    path = tmp_path / "x.traj"
    path.write_text(json.dumps(doc))
    return list(swe_agent.read(path))


def _answers(items) -> list:
    return [a for i in items if isinstance(i, Answers) for a in i.answers]


def test_an_edit_the_linter_threw_away_keeps_its_call_and_is_answered_by_a_failure(tmp_path):
    edit = "edit 287:295\n    required_elements = [\nend_of_edit\n"
    items = _traj(tmp_path, [(edit, PYDICOM_LINT), ("open numpy_handler.py 293\n", "[File: numpy_handler.py]")])
    assert [c.name for c in calls(items)] == ["edit", "open"]
    assert [a.is_error for a in _answers(items)] == [True, False]


def test_the_real_linter_rejections_are_failures_and_nothing_else_is():
    path = CORPUS / "swe-agent-traj" / "gpt4-pydicom-1458.traj"
    if not path.exists():
        pytest.skip("../shared/corpus is absent")
    items = list(swe_agent.read(path))
    # steps 6, 7 and 8 are the three edits its linter rejected (read in the file by hand)
    assert [n for n, a in enumerate(_answers(items), 1) if a.is_error] == [6, 7, 8]
    assert all(c.name == "edit" for c in calls(items)[5:8])


def test_a_command_on_the_blocklist_ran_nothing_one_harness_error(tmp_path):
    # the older default template, as marshmallow-1867's replay_config has it
    blocked = "Interactive operation 'vim src/app.py' is not supported by this environment."
    items = _traj(tmp_path, [("vim src/app.py\n", blocked), ("ls\n", "app.py")])
    cs = calls(items)
    assert [c.name for c in cs] == ["harness_error", "ls"]
    assert cs[0].args == {"reason": "blocked_command", "rejected": "vim src/app.py"}
    answers = _answers(items)
    assert answers[0].call_id == cs[0].id and answers[0].is_error and answers[0].text == blocked
    assert not answers[1].is_error


def test_a_command_failing_the_shell_syntax_check_ran_nothing(tmp_path):
    refusal = ("Your bash command contained syntax errors and was NOT executed. Please fix the syntax errors "
               "and try again. This can be the result of not adhering to the syntax for multi-line commands. "
               "Here is the output of `bash -n`:\nbash: line 1: syntax error near unexpected token `)'\n")
    items = _traj(tmp_path, [("echo (\n", refusal)])
    assert calls(items)[0].args == {"reason": "shell_syntax_error", "rejected": "echo ("}
    assert _answers(items)[0].is_error


def test_the_trajectorys_own_templates_decide(tmp_path):
    config = {"agent": {"tools": {"filter": {"blocklist_error_template": "Sorry, {{action}} is off limits here."}},
                        "templates": {"command_cancelled_timeout_template":
                                      "Killed {{command}} after {{timeout}}s of silence."}}}
    items = _traj(tmp_path, [("nano a\n", "Sorry, nano a is off limits here."),
                             ("make\n", "Killed 'make' after 30s of silence."),
                             ("echo Sorry\n", "Sorry")], config)
    assert [c.name for c in calls(items)] == ["harness_error", "make", "echo"]
    assert [a.is_error for a in _answers(items)] == [True, True, False]


def test_function_calling_refusals_keep_the_call_id_and_a_format_error_is_a_harness_error(tmp_path):
    fmt = "Your output could not be parsed properly.\nPlease make sure your output includes a thought."
    history = [
        {"role": "system", "content": "SETTING"},
        {"role": "user", "content": "fix the bug"},
        {"role": "assistant", "content": "open it", "tool_calls": [
            {"id": "c1", "type": "function", "function": {"name": "bash", "arguments": '{"command": "vim a.py"}'}}]},
        {"role": "tool", "content": "Operation 'vim a.py' is not supported by this environment.",
         "tool_call_ids": ["c1"]},
        {"role": "assistant", "content": "I think I should look at the file."},
        {"role": "user", "content": fmt},
        {"role": "assistant", "content": "view", "tool_calls": [
            {"id": "c2", "type": "function", "function": {"name": "bash", "arguments": '{"command": "cat a.py"}'}}]},
        {"role": "tool", "content": "print(1)", "tool_call_ids": ["c2"]},
    ]
    path = tmp_path / "fc.traj"
    path.write_text(json.dumps({"trajectory": [{"action": "x", "observation": "y"}], "history": history}))
    items = list(swe_agent.read(path))
    assert not errors(items)
    cs = calls(items)
    assert [(c.id, c.name) for c in cs] == [("c1", "harness_error"), ("swe-format-5", "harness_error"), ("c2", "bash")]
    assert cs[0].args == {"reason": "blocked_command", "rejected": "vim a.py"}
    assert cs[1].args == {"reason": "format_error"}
    answers = _answers(items)
    assert [(a.call_id, a.is_error) for a in answers] == [("c1", True), ("swe-format-5", True), ("c2", False)]
    assert answers[1].text == fmt
