"""StagnationDetector (seed 000's prose companion) and its policy."""

from __future__ import annotations

import pytest
from loopledger.detectors import StagnationDetected, StagnationDetector, make_policy
from loopledger.events import Batch, Call, Prose, UserTurn
from loopledger.replay import replay


def test_errors_when_count_exceeds_max_steps():
    d = StagnationDetector()
    for i in range(1, 6):
        assert d.record("I'm stuck", False, max_steps=5) == i
    with pytest.raises(StagnationDetected) as info:
        d.record("I'm stuck", False, max_steps=5)
    assert (info.value.count, info.value.max_steps, info.value.window) == (6, 5, 20)


def test_turn_that_called_a_tool_is_not_recorded():
    d = StagnationDetector()
    for _ in range(50):
        assert d.record("same", True, max_steps=1) == 0
    assert d.record("same", False, max_steps=1) == 1


def test_empty_text_is_ignored():
    d = StagnationDetector()
    for _ in range(10):
        assert d.record("", False, max_steps=1) == 0
    assert d.recent == []


def test_window_is_four_times_max_steps_current_included():
    d = StagnationDetector()
    d.record("x", False, max_steps=1)
    for t in ("a", "b", "c"):
        d.record(t, False, max_steps=1)
    # window 4 = [a, b, c, x]: the first "x" has left it
    assert d.record("x", False, max_steps=1) == 1
    d.record("a", False, max_steps=1)
    d.record("b", False, max_steps=1)
    with pytest.raises(StagnationDetected):
        d.record("x", False, max_steps=1)  # [x, a, b, x]: two > one


def test_max_steps_zero_has_window_one_and_errors_on_first():
    with pytest.raises(StagnationDetected) as info:
        StagnationDetector().record("hello", False, max_steps=0)
    assert info.value.window == 1


def test_break_run_clears():
    d = StagnationDetector()
    for _ in range(5):
        d.record("x", False, max_steps=5)
    d.break_run()
    assert d.record("x", False, max_steps=5) == 1


def test_policy_checks_prose_only_and_user_turn_clears():
    events = [UserTurn("go")]
    events += [Prose("thinking"), Batch((Call("1", "ls", {}),), text="thinking")] * 3
    events += [UserTurn("again"), Prose("thinking"), Prose("thinking")]
    steps = list(replay(events, "stagnation:max_steps=3"))
    prose = [s for s in steps if isinstance(s.event, Prose)]
    assert [c.verdict for s in prose for c in s.checks] == ["allow"] * 5
    assert [s.checks[0].count for s in prose] == [1, 2, 3, 1, 2]
    assert all(not s.checks for s in steps if isinstance(s.event, Batch))


def test_policy_halts_and_later_prose_and_batches_are_after_halt():
    events = [UserTurn("go")] + [Prose("again")] * 3 + [Batch((Call("1", "ls", {}),)), Prose("again")]
    steps = list(replay(events, "stagnation:max_steps=2"))
    verdicts = [[c.verdict for c in s.checks] for s in steps]
    assert verdicts == [[], ["allow"], ["allow"], ["halt"], ["after_halt"], ["after_halt"]]
    assert make_policy("stagnation").per_call is False
