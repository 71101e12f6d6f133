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


# ── rules pinned one by one (each found by a surviving mutant: make mutants, bench/mutants.py) ──


@pytest.mark.parametrize("kw, field, rule, message", [
    (dict(max_period=1), "max_period", "max_period >= 2", "max_period: must be >= 2, got 1"),
    (dict(max_period=65), "max_period", "max_period <= 64", "max_period: must be <= 64, got 65"),
    (dict(warn_repeats=1), "warn_repeats", "warn_repeats >= 2", "warn_repeats: must be >= 2, got 1"),
    (dict(warn_repeats=4, halt_repeats=3), "halt_repeats", "halt_repeats >= warn_repeats",
     "halt_repeats: must be >= warn_repeats (4), got 3"),
    (dict(max_period="6"), "max_period", "max_period is an integer", "max_period: must be an integer, got '6'"),
    (dict(warn_repeats=3.0), "warn_repeats", "warn_repeats is an integer",
     "warn_repeats: must be an integer, got 3.0"),
    (dict(halt_repeats=True), "halt_repeats", "halt_repeats is an integer",
     "halt_repeats: must be an integer, got True"),
])
def test_bad_parameters_name_the_field_the_rule_and_the_value(kw, field, rule, message):
    with pytest.raises(ConfigError) as info:
        CycleDetector(**kw)
    assert (info.value.field, info.value.rule, str(info.value)) == (field, rule, message)


@pytest.mark.parametrize("kw", [dict(max_period=2), dict(max_period=64), dict(warn_repeats=2),
                                dict(warn_repeats=4, halt_repeats=4)])
def test_parameters_on_their_bounds_are_accepted(kw):
    CycleDetector(**kw)


def test_repeats_are_counted_up_to_halt_repeats():
    v = drive("AB" * 6)  # six repetitions, counted up to 4
    assert [(x.action, x.repeats) for x in v[7:]] == [("halt", 4)] * 5


def test_a_call_seen_once_before_is_no_pattern():
    # D at call 4 was seen at call 1: within max_period, but (B, C, D)... never repeats back to back
    v = drive("DBCD")
    assert [(x.action, x.period, x.repeats, x.pattern) for x in v] == [("allow", 0, 0, ())] * 4


def test_positions_count_calls_from_zero():
    assert [x.position for x in drive("ABAB")] == [0, 1, 2, 3]


def test_an_older_repetition_whose_later_answer_differs_breaks_the_cycle():
    # calls A B A B A B: B answered b0 in the first repetition, b1 in the second, the third's
    # B is unknown: at position B the known answers differ → k = 2 < warn 3, allow
    answers = ["x", "b0", "x", "b1", "x", None]
    assert [x.action for x in drive("ABABAB", answers)] == ["allow"] * 6


def test_an_answer_without_the_error_flag_is_not_an_error():
    d = CycleDetector()
    for i, name in enumerate("ABABAB"):
        v = d.check(name, {})
        if i < 2:
            d.record_answer("same")  # the default, in the first repetition only
        else:
            d.record_answer("same", is_error=False)
    assert v.action == "warn"


def test_different_errors_are_different_answers():
    d = CycleDetector()
    for i, name in enumerate("ABABAB"):
        v = d.check(name, {})
        d.record_answer(f"error {i}" if name == "A" else "ok", is_error=(name == "A"))
    assert v.action == "allow"


def test_a_string_error_equals_an_answer_object_error_with_the_same_text():
    d = CycleDetector()
    for i, name in enumerate("ABABAB"):
        v = d.check(name, {})
        if name == "A":
            d.record_answer("boom", is_error=True) if i == 2 else d.record_answer(Answer("c", "boom", True))
    assert v.action == "warn"


def test_an_answer_for_a_call_not_yet_checked_is_ignored():
    d = CycleDetector()
    d.check("A", {})
    d.record_answer("early", position=1)  # position 1 has not been checked
    assert [h[2] for h in d.state()["history"]] == [None]


def test_args_that_json_cannot_hold_are_keyed_by_their_canonical_form():
    d = CycleDetector()
    # integer dict keys: orjson refuses them, the canonical walk reads them; A's args change each time
    assert all(d.check("A", {1: i}).action == "allow" and d.check("B", {}).action == "allow" for i in range(4))
    d = CycleDetector()
    assert [d.check(n, {1: "x"} if n == "A" else {}).action for n in "ABABAB"][-1] == "warn"


def test_a_cycle_right_after_the_key_index_was_pruned_is_caught():
    # max_period 2, halt 2: a 4-call history; the index of keys' last positions is rebuilt when it
    # holds more than 16 keys (at the 17th distinct key, here B); then A, B repeat at distance 2.
    d = CycleDetector(max_period=2, warn_repeats=2, halt_repeats=2)
    verdicts = [d.check(f"t{i}", {}).action for i in range(15)]
    verdicts += [d.check(n, {}).action for n in "ABAB"]
    assert verdicts == ["allow"] * 18 + ["halt"]


def test_the_last_verdict_is_none_before_any_check_and_after_a_break():
    d = CycleDetector()
    assert d.last is None
    v = d.check("A", {})
    assert d.last == v
    d.break_run()
    assert d.last is None


def test_state_shows_the_history_and_the_last_verdict():
    import xxhash

    d = CycleDetector(warn_repeats=2, halt_repeats=5)
    empty = {"history": [], "period": 0, "repeats": 0, "pattern": [], "warn_repeats": 2, "halt_repeats": 5}
    assert d.state() == empty
    for name in "ABAB":
        d.check(name, {})
        d.record_answer(None if name == "B" else "text")
    args8, text8 = xxhash.xxh3_128_hexdigest(b"{}")[:8], xxhash.xxh3_128_hexdigest(b"text")[:8]
    assert d.state() == {"history": [["A", args8, text8], ["B", args8, None]] * 2, "period": 2, "repeats": 2,
                         "pattern": ["A", "B"], "warn_repeats": 2, "halt_repeats": 5}
    d.break_run()
    assert d.state() == empty


def test_a_deep_copy_continues_alone():
    import copy

    d = CycleDetector(max_period=3, warn_repeats=2, halt_repeats=3)
    for name in "ABCAB":
        d.check(name, {})
        d.record_answer("same")
    c = copy.deepcopy(d)
    assert c.state() == d.state() and (c.max_period, c.warn_repeats, c.halt_repeats) == (3, 2, 3)
    assert c.last == d.last
    v = c.check("C", {})  # the copy sees ABC twice: warn, at the next position
    assert (v.action, v.period, v.repeats, v.position) == ("warn", 3, 2, 5)
    assert len(d.state()["history"]) == 5 and d.last.position == 4  # the original did not move
    d.break_run()
    assert c.check("A", {}).repeats == 2 and len(c.state()["history"]) == 7


def test_policy_checks_carry_repeats_period_threshold_and_reason():
    from loopledger.detectors.policy import PolicySpec, make_policy

    spec = PolicySpec.parse("cycle:halt_repeats=5")
    policy = make_policy(spec)
    assert policy.spec == spec
    a, b = Call("a", "A", {"x": 1}), Call("b", "B", {})
    checks = [c for s in replay([UserTurn("go")] + [Batch((a, b))] * 5, policy) for c in s.checks]
    assert [(c.idx, c.verdict, c.count, c.total, c.threshold, c.reason) for c in checks] == [
        (0, "allow", 0, 0, 3, ""), (1, "allow", 0, 0, 3, ""),
        (0, "allow", 0, 0, 3, ""), (1, "allow", 2, 2, 3, ""),  # 3 calls hold no two repetitions
        (0, "allow", 2, 2, 3, ""), (1, "warn", 3, 2, 3, "A → B: the same 2 calls 3 times in a row, answered the same each time"),
        (0, "warn", 3, 2, 3, "B → A: the same 2 calls 3 times in a row, answered the same each time"), (1, "warn", 4, 2, 3, "A → B: the same 2 calls 4 times in a row, answered the same each time"),
        (0, "warn", 4, 2, 3, "B → A: the same 2 calls 4 times in a row, answered the same each time"), (1, "halt", 5, 2, 5, "A → B: the same 2 calls 5 times in a row, answered the same each time"),
    ]
