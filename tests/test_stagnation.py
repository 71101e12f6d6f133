"""StagnationDetector (seed 000's prose companion) and its policy."""

from __future__ import annotations

import pytest
from loopledger.detectors import StagnationDetected, StagnationDetector, make_policy
from loopledger.detectors.base import BATCH, Check
from loopledger.events import Batch, Call, Prose, UserTurn, text_digest
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


def test_state_counts_the_window_and_lists_the_five_most_repeated_by_count_then_digest():
    d = StagnationDetector()
    for t in ["a", "c", "a", "b", "c", "a", "d", "e", "f"]:
        d.record(t, False, max_steps=5)
    ones = sorted(text_digest(t) for t in "bdef")[:3]  # the ties, in digest order
    assert d.state() == {"recorded": 9, "top": [
        {"text_hash": text_digest("a")[:12], "count": 3}, {"text_hash": text_digest("c")[:12], "count": 2},
        *({"text_hash": h[:12], "count": 1} for h in ones)]}
    assert StagnationDetector().state() == {"recorded": 0, "top": []}


def test_error_message_names_count_window_max_and_the_reply_shortened_to_80():
    d = StagnationDetector()
    d.record("x" * 81, False, max_steps=1)
    with pytest.raises(StagnationDetected) as info:
        d.record("x" * 81, False, max_steps=1)
    assert str(info.value) == ("stagnation: the same reply 2 times in the last 4 prose turns (max 1): "
                               + repr("x" * 80 + "…"))
    assert info.value.text == "x" * 81
    with pytest.raises(StagnationDetected) as info:
        StagnationDetector().record("y" * 80, False, max_steps=0)
    assert str(info.value).endswith(repr("y" * 80))


def test_the_window_keeps_exactly_the_last_four_times_max_steps_turns():
    d = StagnationDetector()
    for t in "abcdefghij":
        d.record(t, False, max_steps=2)
    assert len(d.recent) == 8  # window 4 × 2


def test_policy_prose_checks_carry_count_and_max_steps_and_halt_says_why():
    p = make_policy("stagnation:max_steps=2")
    assert p.prose("") == []
    assert p.prose("same") == [Check(BATCH, "allow", 1, None, 2, "")]
    assert p.prose("same") == [Check(BATCH, "allow", 2, None, 2, "")]
    assert p.prose("same") == [Check(BATCH, "halt", 3, None, 2, "the same reply 3 times in the last 8 prose turns")]


def test_policy_state_has_max_steps_and_window():
    p = make_policy("stagnation:max_steps=3")
    p.prose("x")
    assert p.state() == {"recorded": 1, "top": [{"text_hash": text_digest("x")[:12], "count": 1}],
                         "max_steps": 3, "window": 12}
    assert make_policy("stagnation:max_steps=0").state()["window"] == 1
