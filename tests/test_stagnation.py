"""StagnationDetector (seed 000's prose companion) and its policy."""

from __future__ import annotations

import pytest
from loopledger.detectors import StagnationDetected, StagnationDetector, make_policy
from loopledger.detectors.base import BATCH, Check
from loopledger.events import Answer, Answers, Batch, Call, Prose, UserTurn, text_digest
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


# ── Ported from seed 000's upstream, mmogr/gglib: crates/gglib-core/src/domain/agent/stagnation/
# tests.rs (the detector) and crates/gglib-proxy/src/loop_guard_{stagnation,user_turn}_tests.rs
# (a replayed transcript; here through the replay engine). ───────────────────────────────────

def test_no_stagnation_for_varied_responses():
    d = StagnationDetector()
    for i in range(20):
        d.record(f"response {i}", False, 5)


def test_stagnation_triggers_at_limit():
    d = StagnationDetector()
    for _ in range(3):
        d.record("I cannot proceed further.", False, 3)
    with pytest.raises(StagnationDetected):
        d.record("I cannot proceed further.", False, 3)


def test_different_responses_accumulate_independently():
    d = StagnationDetector()
    for text in ("first response", "first response", "second response", "second response"):
        d.record(text, False, 2)
    with pytest.raises(StagnationDetected) as info:
        d.record("first response", False, 2)
    assert info.value.count == 3


def test_oscillation_abab_fires_stagnation():
    d = StagnationDetector()
    for text in ("response A", "response B", "response A", "response B"):
        d.record(text, False, 2)
    with pytest.raises(StagnationDetected) as info:
        d.record("response A", False, 2)
    assert info.value.count == 3


def test_stagnation_error_message_contains_count_and_limit():
    d = StagnationDetector()
    d.record("stuck", False, 1)
    with pytest.raises(StagnationDetected) as info:
        d.record("stuck", False, 1)
    assert (info.value.count, info.value.max_steps) == (2, 1)
    assert "2 times" in str(info.value)


def test_max_steps_zero_triggers_on_first_occurrence():
    with pytest.raises(StagnationDetected) as info:
        StagnationDetector().record("anything", False, 0)
    assert (info.value.count, info.value.max_steps) == (1, 0)


def test_a_turn_that_called_a_tool_is_never_recorded():
    d = StagnationDetector()
    for _ in range(50):
        d.record("Let me look at the file.", True, 5)
    for _ in range(5):  # and it left no trace: prose still gets its full budget
        d.record("Let me look at the file.", False, 5)
    with pytest.raises(StagnationDetected):
        d.record("Let me look at the file.", False, 5)


def test_the_window_forgets_a_repeat_that_has_aged_out():
    d = StagnationDetector()
    for i in range(6):
        d.record("Sure!", False, 5)
        for j in range(20):
            d.record(f"distinct {i}-{j}", False, 5)


def test_oscillation_still_trips_at_the_ceiling_threshold():
    d = StagnationDetector()
    with pytest.raises(StagnationDetected):
        for i in range(1000):
            d.record("plan A" if i % 2 == 0 else "plan B", False, 100)


def test_a_zero_threshold_fires_on_the_first_prose_turn():
    with pytest.raises(StagnationDetected):
        StagnationDetector().record("anything", False, 0)


def test_default_max_steps_is_five():
    d = StagnationDetector()
    for _ in range(5):
        d.record("Sure!", False)
    with pytest.raises(StagnationDetected):
        d.record("Sure!", False)


def _narrated_read(i: int, path: str) -> list:
    return [Batch((Call(f"c{i}", "read_file", {"path": path}),), text="Let me look at the file."),
            Answers((Answer(f"c{i}", "fn main() {}"),))]


def _halts(events, spec="stagnation") -> list[str]:
    return [c.verdict for s in replay(events, spec) for c in s.checks if c.verdict != "allow"]


def test_the_same_preamble_before_six_different_reads_is_not_stagnation():
    events = [x for i in range(6) for x in _narrated_read(i, f"src/{i}.rs")]
    assert _halts(events) == []


def test_narration_does_not_undercut_the_read_only_allowance():
    events = [x for i in range(6) for x in _narrated_read(i, "src/main.rs")]
    assert _halts(events) == []
    assert _halts(events, "run-length") == []  # 6 identical reads are inside M = 15


def test_six_identical_prose_turns_close_together_still_stagnate():
    steps = list(replay([Prose("Sure!")] * 6, "stagnation"))
    last = steps[-1].checks[0]
    assert (last.verdict, last.count, last.threshold) == ("halt", 6, 5)


def test_identical_prose_spread_beyond_the_window_is_not_stagnation():
    events = [x for i in range(6) for x in [Prose("Sure!"), *[Prose(f"a distinct answer {i}-{j}") for j in range(5)]]]
    assert _halts(events) == []


def test_oscillating_prose_still_trips_inside_the_window():
    events = [Prose("plan A" if i % 2 == 0 else "plan B") for i in range(12)]
    assert _halts(events) == ["halt", "after_halt"]  # the 11th turn is plan A's sixth


def test_prose_repeats_on_either_side_of_a_user_turn_do_not_accumulate():
    events = [Prose("I cannot proceed.")] * 3 + [UserTurn("try a different approach")] + [Prose("I cannot proceed.")] * 3
    assert _halts(events) == []


def test_six_adjacent_prose_repeats_still_stagnate_whatever_follows():
    events = [Prose("I cannot proceed.")] * 6 + [UserTurn("try a different approach"), Prose("Here is another way.")]
    assert _halts(events) == ["halt"]
