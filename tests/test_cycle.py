"""Our cycle detector (design.md, "cycle"): worked examples, answers, bounds, and a brute-force
reference that the hypothesis tests compare it with."""

from __future__ import annotations

import pytest
from loopledger.detectors import ConfigError, CycleDetector
from loopledger.events import Answer, Answers, Batch, Call, UserTurn
from loopledger.replay import replay


def reference(keys: list, answers: list, max_period: int = 6, warn: int = 3, halt: int = 4):
    """The definition, literally, over the whole unbounded history: (action, period, repeats)."""
    n = len(keys)
    best_k, best_p = 0, 0
    for p in range(2, max_period + 1):
        if n < p:
            continue
        pattern = keys[n - p:]
        if any(p % d == 0 and pattern == pattern[:d] * (p // d) for d in range(1, p)):
            continue
        k = 0
        for kk in range(1, n // p + 1):
            starts = [n - j * p for j in range(1, kk + 1)]
            if any(keys[s:s + p] != pattern for s in starts):
                break
            if any(len({answers[s + pos] for s in starts} - {None}) > 1 for pos in range(p)):
                break
            k = kk
        k = min(k, halt)
        if k >= 2 and k > best_k:
            best_k, best_p = k, p
    action = "halt" if best_k >= halt else "warn" if best_k >= warn else "allow"
    return action, best_p, best_k


def drive(names: str, answers: list | None = None, **kw) -> list:
    """Check each call (tool = the letter, args {}), recording answers[i] after it."""
    d = CycleDetector(**kw)
    out = []
    for i, name in enumerate(names):
        out.append(d.check(name, {}))
        if answers is not None and answers[i] is not None:
            d.record_answer(answers[i])
    return out


def first(verdicts, action: str) -> int:
    """1-based index of the first verdict with this action (0 if none)."""
    return next((i + 1 for i, v in enumerate(verdicts) if v.action == action), 0)


def test_ab_three_times_warns_on_the_sixth_call_and_halts_on_the_eighth():
    v = drive("ABABABAB")
    assert [x.action for x in v] == ["allow"] * 5 + ["warn", "warn", "halt"]
    assert (v[5].period, v[5].repeats, v[5].pattern) == (2, 3, ("A", "B"))


@pytest.mark.parametrize("pattern", ["ABC", "AAB"])
def test_period_three_patterns_warn_on_their_ninth(pattern):
    v = drive(pattern * 3)
    assert first(v, "warn") == 9
    assert (v[8].period, v[8].repeats) == (3, 3)


def test_longer_cycle_beats_a_shorter_one_with_fewer_repeats():
    v = drive("CABAB" * 3)
    assert first(v, "warn") == 15
    assert (v[14].period, v[14].repeats, v[14].pattern) == (5, 3, tuple("CABAB"))
    assert (v[9].period, v[9].repeats) == (2, 2)  # a tie at k=2 goes to the smaller period


def test_identical_calls_are_left_to_the_other_detectors():
    v = drive("A" * 8)
    assert all(x.action == "allow" and x.period == 0 for x in v)


def test_a_repetition_whose_answer_differs_is_progress():
    answers = [f"a{i}" if n == "A" else "b" for i, n in enumerate("AB" * 5)]
    assert all(x.action == "allow" for x in drive("AB" * 5, answers))


def test_unknown_answers_neither_break_nor_join():
    answers = ["x", "b", None, "b", "x", None, None, "b"]
    assert [x.action for x in drive("AB" * 4, answers)] == ["allow"] * 5 + ["warn", "warn", "halt"]


def test_record_answer_defaults_to_the_last_checked_call_and_ignores_old_positions():
    d = CycleDetector(max_period=2, warn_repeats=2, halt_repeats=2)
    v0 = d.check("A", {})
    d.record_answer("first")
    assert d.state()["history"][0][2] is not None
    for _ in range(10):
        d.check("B", {})
    d.record_answer("late", position=v0.position)  # left the 4-call history: ignored
    assert all(h[2] is None for h in d.state()["history"])


def test_error_flag_is_part_of_the_answer():
    answers = ["x", "b", "x", "b", "x"]
    d = CycleDetector()
    for i, name in enumerate("ABABA"):
        d.check(name, {})
        d.record_answer(answers[i], is_error=(i == 2))
    assert d.check("B", {}).action == "allow"  # A's answers differ by the error flag


def test_history_is_bounded():
    d = CycleDetector(max_period=3, halt_repeats=5, warn_repeats=2)
    for i in range(1000):
        d.check(f"t{i % 7}", {"i": i % 5})
    assert len(d.state()["history"]) == 15


def test_break_run_forgets():
    d = CycleDetector()
    for name in "ABABA":
        d.check(name, {})
    d.break_run()
    assert d.check("B", {}).period == 0


def test_args_are_part_of_the_key_in_canonical_form():
    d = CycleDetector()
    calls = [("A", {"x": 1, "y": 2}), ("B", {}), ("A", {"y": 2, "x": 1}), ("B", {}), ("A", {"x": 1, "y": 2}),
             ("B", None)]
    assert [d.check(n, a).action for n, a in calls][-1] == "warn"
    d = CycleDetector()
    calls = [("A", {"x": i}) if i % 2 == 0 else ("B", {}) for i in range(8)]
    assert all(d.check(n, a).action == "allow" for n, a in calls)


@pytest.mark.parametrize("kw, field", [
    (dict(max_period=1), "max_period"), (dict(max_period=65), "max_period"), (dict(warn_repeats=1), "warn_repeats"),
    (dict(warn_repeats=4, halt_repeats=3), "halt_repeats"), (dict(max_period="6"), "max_period"),
])
def test_bad_parameters_name_the_field(kw, field):
    with pytest.raises(ConfigError) as info:
        CycleDetector(**kw)
    assert info.value.field == field


@pytest.mark.parametrize("names", ["ABABABAB", "CABABCABABCABAB", "AABAABAAB", "ABCABCABCABC", "AAAAAAAA",
                                   "ABCDEFABCDEFABCDEF", "ABACABACABAC", "ABBABBABBABB"])
def test_matches_the_reference_on_examples(names):
    keys: list = []
    answers: list = []
    for v, name in zip(drive(names), names, strict=True):
        keys.append(name)
        answers.append(None)
        assert (v.action, v.period, v.repeats) == reference(keys, answers)


def test_policy_records_answers_per_call_position():
    a, b = Call("a", "A", {}), Call("b", "B", {})
    events = [UserTurn("go")]
    for i in range(4):  # batches [A, B] whose A answer changes each time: progress
        events += [Batch((a, b)), Answers((Answer("b", "same"), Answer("a", f"t{i}")))]
    steps = list(replay(events, "cycle"))
    assert all(c.verdict == "allow" for s in steps for c in s.checks)
    same = [UserTurn("go")] + [Batch((a, b)), Answers((Answer("a", "x"), Answer("b", "y")))] * 4
    verdicts = [c.verdict for s in replay(same, "cycle") for c in s.checks]
    assert verdicts == ["allow"] * 5 + ["warn", "warn", "halt"]
