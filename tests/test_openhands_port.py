"""The `openhands` port: openhands-sdk 1.58.2's StuckDetector scenarios, as its unit tests
(tests/sdk/conversation/test_stuck_detector*.py, local/test_stuck_detector_nudge.py,
test_response_dispatch.py) build them, run against the port; then the same rules through the
replay engine on normalized transcript events.

Upstream builds `ActionEvent(tool_name="terminal", action=TerminalAction(command=...),
thought=[...])` + `ObservationEvent(...)` pairs after a user `MessageEvent`; here the same
sequence is fed to the port's history (`add_action` / `add_observation` / `user_message`)."""

from __future__ import annotations

import pytest
from loopledger import vocab
from loopledger.detectors import openhands as oh
from loopledger.detectors.canonical import canonical_bytes
from loopledger.detectors.errors import ConfigError
from loopledger.events import text_digest

LS_OUT = "file1.txt\nfile2.txt"


def action(d: oh.StuckDetector, command: str = "ls", thought: str = "I need to run ls command") -> None:
    d.add_action("terminal", canonical_bytes({"command": command}), thought)


def observation(d: oh.StuckDetector, text: str = LS_OUT) -> None:
    d.add_observation("terminal", text_digest(text))


def error(d: oh.StuckDetector, text: str = "Command 'invalid_command' not found") -> None:
    d.add_observation("terminal", text_digest(text), is_error=True)


def message(d: oh.StuckDetector, text: str) -> None:
    d.add_message(text_digest(text))


def loop_pairs(d: oh.StuckDetector, n: int) -> None:
    for _ in range(n):
        action(d)
        observation(d)


def is_stuck(d: oh.StuckDetector) -> bool:
    return d.stuck_rule() is not None


def rule(d: oh.StuckDetector) -> str | None:
    v = d.stuck_rule()
    return None if v is None else v.rule


# -- test_stuck_detector.py ------------------------------------------------------------------


def test_history_too_short():
    d = oh.StuckDetector()
    d.user_message()
    loop_pairs(d, 1)
    assert not is_stuck(d)


def test_uses_only_events_after_the_last_user_message_in_the_recent_window():
    # upstream: 50 old user messages, the last user message, 3 agent "ok" messages, 4 loops
    d = oh.StuckDetector()
    for _ in range(51):
        d.user_message()
    for _ in range(3):
        message(d, "ok")
    loop_pairs(d, 4)
    assert rule(d) == oh.REPEATING_ACTION_OBSERVATION


def test_without_a_user_message_the_whole_window_is_looked_at():
    d = oh.StuckDetector()
    for _ in range(12):
        message(d, "ok")
    loop_pairs(d, 4)  # 12 + 8 == 20
    assert rule(d) == oh.REPEATING_ACTION_OBSERVATION


def test_fewer_than_20_events_still_detect():
    d = oh.StuckDetector()
    loop_pairs(d, 4)
    assert is_stuck(d)


def test_only_the_last_20_events_are_kept():
    # 11 identical pairs would need 22 events: the 20-event window can never hold them
    d = oh.StuckDetector(action_observation=11, alternating_pattern=11)
    loop_pairs(d, 15)
    assert len(d.events) == oh.MAX_EVENTS
    assert rule(d) is None
    d10 = oh.StuckDetector(action_observation=10, alternating_pattern=11)
    loop_pairs(d10, 15)
    assert rule(d10) == oh.REPEATING_ACTION_OBSERVATION


def test_repeating_action_observation_not_stuck_less_than_4_repeats():
    d = oh.StuckDetector()
    d.user_message()
    loop_pairs(d, 3)
    assert not is_stuck(d)


def test_repeating_action_observation_stuck():
    d = oh.StuckDetector()
    d.user_message()
    loop_pairs(d, 4)
    assert rule(d) == oh.REPEATING_ACTION_OBSERVATION


def test_repeating_action_error_nudges_at_3_and_is_stuck_past_it():
    # 1.58.2: `_action_error_streak > action_error` is stuck; == action_error is the nudge
    d = oh.StuckDetector()
    d.user_message()
    for _ in range(2):
        action(d, "invalid_command", "I need to run invalid_command")
        error(d)
    assert not is_stuck(d) and d.nudge() is None
    action(d, "invalid_command", "I need to run invalid_command")
    error(d)
    assert not is_stuck(d)
    assert d.nudge() == 3
    assert d.nudge() is None  # once per streak: the same error event is not nudged twice
    action(d, "invalid_command", "I need to run invalid_command")
    error(d)
    # four identical errors are also four identical observations: that rule is checked first
    assert rule(d) == oh.REPEATING_ACTION_OBSERVATION


def test_action_error_streak_does_not_need_the_same_error_text():
    d = oh.StuckDetector()
    for i in range(4):
        action(d, "invalid_command")
        error(d, f"error number {i}")
    assert rule(d) == oh.REPEATING_ACTION_ERROR


def test_agent_monologue_stuck():
    d = oh.StuckDetector()
    d.user_message()
    for i in range(3):
        message(d, f"I'm thinking... {i}")  # different texts: still a monologue
    assert rule(d) == oh.MONOLOGUE


def test_monologue_is_broken_by_an_action():
    d = oh.StuckDetector()
    message(d, "a")
    message(d, "b")
    action(d)
    message(d, "c")
    assert not is_stuck(d)


def test_not_stuck_with_different_actions():
    d = oh.StuckDetector()
    d.user_message()
    for cmd in ("ls", "pwd", "whoami", "date"):
        action(d, cmd, f"I need to run {cmd} command")
        observation(d, f"output from {cmd}")
    assert not is_stuck(d)


def test_reset_after_user_message():
    d = oh.StuckDetector()
    d.user_message()
    loop_pairs(d, 4)
    assert is_stuck(d)
    d.user_message()
    assert not is_stuck(d)
    action(d, "pwd", "I'll try pwd command")
    observation(d, "/home/user")
    assert not is_stuck(d)


# -- test_stuck_detector typed reasons (SDK-2) ----------------------------------------------------


def test_reason_none_when_not_stuck():
    d = oh.StuckDetector()
    d.user_message()
    assert d.stuck_rule() is None


def test_reason_monologue_with_four_messages():
    d = oh.StuckDetector()
    d.user_message()
    for _ in range(4):
        message(d, "I will now do the thing.")
    assert rule(d) == oh.MONOLOGUE


# -- local/test_stuck_detector_nudge.py, through before_step (what runs before each step) ----------


def test_nudges_before_going_stuck_on_repeating_action_error():
    """4 identical failing calls: nudge after the 3rd, STUCK after the 4th."""
    d = oh.StuckDetector()
    d.user_message()
    verdicts = []
    for _ in range(4):
        verdicts.append(d.before_step().action)
        action(d, "create", "")
        error(d, "`file_text` is required for command: create.")
    final = d.before_step()
    assert verdicts == [vocab.ALLOW, vocab.ALLOW, vocab.ALLOW, vocab.WARN]
    assert final.action == vocab.HALT
    assert [e.kind for e in d.events].count(oh.NUDGE) == 1


def test_recovers_after_nudge_when_model_self_corrects():
    """3 identical failing calls then a plain answer: one nudge, never stuck."""
    d = oh.StuckDetector()
    d.user_message()
    for _ in range(3):
        assert d.before_step().action == vocab.ALLOW
        action(d, "create", "")
        error(d, "`file_text` is required for command: create.")
    assert d.before_step().action == vocab.WARN
    message(d, "I see the issue, stopping here.")
    assert d.before_step().action == vocab.ALLOW  # the frozen streak is not nudged again


def test_corrective_nudge_does_not_reset_the_window():
    """Framework feedback is not a user message: 4 identical pairs stay stuck after it."""
    d = oh.StuckDetector()
    d.user_message()
    loop_pairs(d, 4)
    d._add(oh.NUDGE, "", "nudge")  # an environment message, as upstream's empty-reply nudge
    assert rule(d) == oh.REPEATING_ACTION_OBSERVATION


def test_nudge_neither_counts_nor_breaks_a_monologue():
    d = oh.StuckDetector()
    message(d, "a")
    d._add(oh.NUDGE, "", "nudge")
    message(d, "b")
    assert not is_stuck(d)
    message(d, "c")
    assert rule(d) == oh.MONOLOGUE


# -- rules the upstream tests leave implicit ------------------------------------------------------


def test_alternating_pattern_a_b_a_b_a_b():
    d = oh.StuckDetector()
    for _ in range(2):
        action(d, "ls", "")
        observation(d, "A")
        action(d, "pwd", "")
        observation(d, "B")
    assert not is_stuck(d)  # 4 + 4: fewer than 6 actions
    action(d, "ls", "")
    observation(d, "A")
    action(d, "pwd", "")
    observation(d, "B")
    assert rule(d) == oh.ALTERNATING_PATTERN


def test_alternating_pattern_needs_the_observations_to_alternate_too():
    d = oh.StuckDetector()
    for i in range(3):
        action(d, "ls", "")
        observation(d, f"A{i}")  # the output changes: progress
        action(d, "pwd", "")
        observation(d, "B")
    assert not is_stuck(d)


def test_the_thought_is_part_of_the_action():
    d = oh.StuckDetector()
    for i in range(4):
        action(d, "ls", f"attempt {i}")
        observation(d)
    assert not is_stuck(d)


def test_an_observation_never_equals_an_error_with_the_same_text():
    d = oh.StuckDetector()
    for i in range(4):
        action(d)
        if i % 2:
            error(d, LS_OUT)
        else:
            observation(d, LS_OUT)
    assert rule(d) is None


def test_thresholds_are_parameters():
    d = oh.StuckDetector(action_observation=2)
    loop_pairs(d, 2)
    assert rule(d) == oh.REPEATING_ACTION_OBSERVATION
    m = oh.StuckDetector(monologue=5)
    for i in range(4):
        message(m, str(i))
    assert not is_stuck(m)


@pytest.mark.parametrize("field", oh.THRESHOLDS)
@pytest.mark.parametrize("bad", [0, -1, "4", True, None])
def test_bad_thresholds_name_the_field(field, bad):
    params = {name: 4 for name in oh.THRESHOLDS}
    params[field] = bad
    with pytest.raises(ConfigError) as info:
        oh.validate(params)
    assert info.value.field == field


def test_state_is_json_and_counts():
    import json

    d = oh.StuckDetector()
    loop_pairs(d, 2)
    s = d.state()
    assert json.loads(json.dumps(s)) == s
    assert (s["identical_actions"], s["identical_observations"]) == (2, 2)
    assert [e["kind"] for e in s["events"]] == ["action", "observation"] * 2
