"""loopledger.analysis.scoring by hand: every outcome, the per-policy counts, call positions, run spans."""

from __future__ import annotations

import pytest
from loopledger.analysis import scoring
from loopledger.analysis.scoring import (
    CAUGHT,
    CLEAN,
    EARLY,
    FALSE_HALT,
    LOOP,
    MISSED,
    NORMAL,
    UNCLEAR,
    Judged,
)
from loopledger.events import Answer, Answers, Batch, Call, Prose, UserTurn


@pytest.mark.parametrize(("label", "halt_at", "want"), [
    (LOOP, 5, CAUGHT), (LOOP, 8, CAUGHT), (LOOP, 6, CAUGHT),  # the loop is calls 5..8, both ends inside
    (LOOP, 4, EARLY), (LOOP, 1, EARLY),
    (LOOP, 9, MISSED), (LOOP, None, MISSED),
    (NORMAL, None, CLEAN), (NORMAL, 1, FALSE_HALT), (NORMAL, 40, FALSE_HALT),
    (UNCLEAR, 3, None), (UNCLEAR, None, None),
])
def test_outcome_of_a_first_halt(label, halt_at, want):
    first, last = (5, 8) if label == LOOP else (None, None)
    assert scoring.outcome(label, first, last, halt_at) == want


def test_scores_worked_by_hand():
    # Policy A on 4 loops (calls 3-6, 10-12, 2-2, 7-9), 3 normal, 1 unclear:
    #   caught at 4 (2 calls in) and at 2 (1 call in), early at 8 on 10-12, missed 7-9;
    #   one false halt; the unclear halt is ignored.  → loops 4, caught 2, early 1, missed 1,
    #   normal 3, false halts 1, halted 4 → precision 2/4, recall 2/4; calls saved inside loops:
    #   6 − 4 = 2 on 3-6, none on 2-2 (halted on its last call), none for the early halt or the
    #   miss → 2 of 4 + 3 + 1 + 3 = 11 loop calls (the ledger's saved counts, 5, 1, 7 and the
    #   unclear's 100, are not this figure); flagged inside: the catches at 4 and 2 → 2.
    # Policy B: halts only after the loops (missed) and never on normal: precision 0/1.
    a = [Judged("A", 1, LOOP, 3, 6, 4, 5), Judged("A", 2, LOOP, 10, 12, 8, 1), Judged("A", 3, LOOP, 2, 2, 2, 7),
         Judged("A", 4, LOOP, 7, 9, None, 0), Judged("A", 5, NORMAL, None, None, 3, 4),
         Judged("A", 6, NORMAL), Judged("A", 7, NORMAL), Judged("A", 8, UNCLEAR, None, None, 1, 100)]
    b = [Judged("B", 1, LOOP, 3, 6, 7, 2), Judged("B", 5, NORMAL)]
    sa, sb, sc = scoring.score(a + b, [("A", "policy a"), ("B", "policy b"), ("C", "never ran")])
    assert (sa.loops, sa.caught, sa.early, sa.missed, sa.normal, sa.false_halts) == (4, 2, 1, 1, 3, 1)
    assert (sa.precision, sa.recall, sa.saved, sa.loop_calls, sa.flagged) == (0.5, 0.5, 2, 11, 2)
    assert sorted(sa.into_loop) == [1, 2] and sa.into_loop_median == 1.5
    assert (sb.loops, sb.caught, sb.missed, sb.normal, sb.false_halts, sb.precision, sb.recall) == (1, 0, 1, 1, 0, 0.0, 0.0)
    assert (sc.loops, sc.normal, sc.precision, sc.recall, sc.policy) == (0, 0, None, None, "never ran")
    # precision first: A's false halt ranks it below B and C (neither halts a normal session);
    # B's halt after the loop saves none of it: B and C tie on everything and go by name
    assert [s.policy_id for s in scoring.rank([sb, sc, sa])] == ["C", "B", "A"]
    assert [s.policy_id for s in scoring.rank([sa, sb], "missed")] == ["A", "B"]  # 1 vs 1: A→Z
    assert [s.policy_id for s in scoring.rank([sa, sb, sc], "recall")] == ["A", "B", "C"]
    assert scoring.into_loop_text(sa.into_loop) == "1.5 (1, 2)" and scoring.into_loop_text([3]) == "3"
    with pytest.raises(ValueError, match="cannot sort"):
        scoring.rank([sa], "bogus")


def test_disagreements_are_the_sessions_whose_outcomes_differ():
    a = [Judged("A", 1, LOOP, 3, 6, 4), Judged("A", 2, NORMAL), Judged("A", 3, NORMAL, None, None, 2)]
    b = [Judged("B", 1, LOOP, 3, 6, 5), Judged("B", 2, NORMAL, None, None, 1), Judged("B", 3, NORMAL, None, None, 9)]
    pairs = scoring.disagreements(a, b)
    assert [(x.session_id, x.outcome, y.outcome) for x, y in pairs] == [(2, CLEAN, FALSE_HALT)]


def test_cells_name_the_outcomes_behind_each_number():
    assert scoring.cell_outcomes("loops") == (CAUGHT, EARLY, MISSED)
    assert scoring.cell_outcomes("false_halts") == (FALSE_HALT,)
    assert scoring.cell_outcomes(NORMAL) == (FALSE_HALT, CLEAN)


def _call(name: str, i: int) -> Call:
    return Call(f"c{i}", name, {"i": i})


EVENTS = [
    UserTurn("go"),                                            # seq 0
    Batch((_call("a", 1), _call("b", 2))),                     # seq 1: calls 1, 2
    Answers((Answer("c1", "x"), Answer("c2", "y"))),           # seq 2
    Prose("thinking"),                                         # seq 3: before call 3
    Batch((_call("c", 3),)),                                   # seq 4: call 3
    UserTurn("again"),                                         # seq 5
    Batch((_call("d", 4), _call("e", 5), _call("f", 6))),      # seq 6: calls 4, 5, 6
]


@pytest.mark.parametrize(("seq", "idx", "want"), [
    (1, 0, 1), (1, 1, 2), (1, -1, 1),   # a batch-level halt stands on the batch's first call
    (3, -1, 3),                          # a halt on a prose turn: the next call it stopped
    (4, 0, 3), (6, -1, 4), (6, 2, 6),
])
def test_call_position(seq, idx, want):
    assert scoring.call_position(EVENTS, seq, idx) == want


def test_judge_replay_places_the_first_halt():
    from loopledger.detectors.policy import Check
    from loopledger.replay import Step

    steps = [Step(s, 0 if s < 5 else 1, ev) for s, ev in enumerate(EVENTS)]
    steps[6] = steps[6]._replace(checks=(Check(0, "allow"), Check(1, "halt")))
    steps[4] = steps[4]._replace(checks=(Check(0, "warn"),))
    j = scoring.judge_replay("P", 9, LOOP, 4, 6, EVENTS, steps, saved=1)
    assert (j.halt_at, j.halt_run, j.halt_seq, j.outcome, j.into_loop, j.saved) == (5, 1, 6, CAUGHT, 2, 1)
    # six calls; the warning on call 3 is its first flag, before the loop (4-6): not flagged inside;
    # the halt on call 5 saves call 6 of the loop
    assert (j.calls, j.flag_at, j.loop_saved) == (6, 3, 1)
    assert not scoring.flagged_inside(j.first, j.last, j.first_flag)
    clean = scoring.judge_replay("P", 9, NORMAL, None, None, EVENTS, steps[:5], saved=0)
    assert (clean.halt_at, clean.outcome) == (None, CLEAN)


def test_run_spans():
    per_run = [2, 0, 3, 1]
    assert [scoring.run_span(per_run, r) for r in range(5)] == [(1, 2), None, (3, 5), (6, 6), None]


def test_labels_and_their_ranges_are_checked():
    assert scoring.normalize_label(" Loop ") == LOOP and scoring.normalize_label("not_loop") == NORMAL
    with pytest.raises(ValueError, match="unknown label"):
        scoring.normalize_label("maybe")
    scoring.check_label(LOOP, 2, 4, n_calls=4)
    for args, msg in (((LOOP, None, None), "needs the loop's calls"), ((NORMAL, 1, 2), "only a loop label"),
                      ((LOOP, 3, 9, 8), "past the session's 8 call")):
        with pytest.raises(ValueError, match=msg):
            scoring.check_label(*args)


def test_a_set_of_policies_halts_where_its_first_member_does():
    js = [Judged("A", 1, LOOP, 3, 6, 5, 2), Judged("B", 1, LOOP, 3, 6, 4, 3),
          Judged("A", 2, NORMAL), Judged("B", 2, NORMAL),
          Judged("A", 3, NORMAL, None, None, 2, 9)]  # B never judged session 3: the set did not either
    got = scoring.any_of(js, ["A", "B"], "A+B")
    assert [(j.session_id, j.halt_at, j.saved, j.outcome) for j in got] == [(1, 4, 3, CAUGHT), (2, None, 0, CLEAN)]


# ── Wilson 95% intervals, against values computed by hand ──────────────────────────────────────
# z = 1.959964, z² = 3.841459; bounds = (p + z²/2n ∓ z·√(p(1−p)/n + z²/4n²)) / (1 + z²/n).
#   11/11: p = 1 → the lower bound is n / (n + z²) = 11 / 14.841459 = 0.7412, the upper 1
#   2/4:   (0.980182 ∓ 0.686052) / 1.960365 = 0.1500, 0.8500
#   2/3:   (1.306910 ∓ 0.833345) / 2.280486 = 0.2077, 0.9385
#   0/5:   p = 0 → lower 0; upper = z²/n / (1 + z²/n) = 0.768292 / 1.768292 = 0.4345
#   7/10:  p 0.7, 1 + z²/n = 1.384146, p + z²/2n = 0.892073,
#          z·√(0.021 + 0.009604) = 0.342876 → 0.3968, 0.8922
@pytest.mark.parametrize(("k", "n", "low", "high"), [
    (11, 11, 0.7412, 1.0), (2, 4, 0.1500, 0.8500), (2, 3, 0.2077, 0.9385), (0, 5, 0.0, 0.4345),
    (7, 10, 0.3968, 0.8922),
])
def test_wilson_interval_matches_the_hand_computation(k, n, low, high):
    got = scoring.wilson(k, n)
    assert got == pytest.approx((low, high), abs=5e-5)


def test_wilson_without_labels_is_none_and_a_bad_count_is_refused():
    assert scoring.wilson(0, 0) is None
    with pytest.raises(ValueError):
        scoring.wilson(3, 2)
    assert scoring.interval_text(None) == "—" and scoring.interval_text(scoring.wilson(11, 11)) == "[0.74, 1.00]"


def test_a_policy_scores_intervals_over_its_own_denominators():
    # 11 loops all caught on the first call, 3 normal sessions untouched: recall 11/11, precision
    # 11/11 (it halted 11 sessions) → both [0.74, 1.00]; none halted → no precision interval.
    judged = [Judged("P", i, LOOP, 1, 3, 1) for i in range(11)] + [Judged("P", 100 + i, NORMAL) for i in range(3)]
    judged += [Judged("Q", 200, LOOP, 1, 3, None)]
    p, q = scoring.score(judged, [("P", "perfect"), ("Q", "idle")])
    assert scoring.interval_text(p.recall_interval) == "[0.74, 1.00]"
    assert scoring.interval_text(p.precision_interval) == "[0.74, 1.00]"
    assert q.precision_interval is None and q.recall_interval == pytest.approx((0.0, 0.7935), abs=5e-5)
    # Q: 0/1 → upper = z² / (1 + z²) = 3.841459 / 4.841459 = 0.7935


def test_label_next_is_the_sessions_the_top_policies_split_on():
    # session → who halts among A, B, C:  1: A only (1 vs 2) · 2: A, B (2 vs 1) · 3: all (no split)
    # · 4: none (no split) · 5: B only, C not judged (left out) · 6: C only (1 vs 2)
    halts = [(1, "A", True), (1, "B", False), (1, "C", False),
             (2, "A", True), (2, "B", True), (2, "C", False),
             (3, "A", True), (3, "B", True), (3, "C", True),
             (4, "A", False), (4, "B", False), (4, "C", False),
             (5, "A", False), (5, "B", True),
             (6, "A", False), (6, "B", False), (6, "C", True), (6, "Z", True)]
    got = scoring.label_next(halts, ["A", "B", "C"])
    assert [(x.session_id, x.halting, x.quiet) for x in got] == [
        (1, ("A",), ("B", "C")), (2, ("A", "B"), ("C",)), (6, ("C",), ("A", "B"))]
    # with two policies every split is 1 vs 1: session order; the limit cuts the list
    assert [x.session_id for x in scoring.label_next(halts, ["A", "B"], limit=2)] == [1, 5]


# ── rules pinned one by one (each found by a surviving mutant: make mutants, bench/mutants.py) ──


def test_wilson_ends_at_zero_and_n_successes_lie_exactly_on_the_boundary():
    for n in range(1, 61):
        assert scoring.wilson(0, n)[0] == 0.0 and scoring.wilson(n, n)[1] == 1.0
    with pytest.raises(ValueError, match=r"^3 successes out of 2$"):
        scoring.wilson(3, 2)


def test_unknown_labels_are_refused_naming_the_three_words():
    msg = r"^unknown label 'maybe'; expected one of loop, normal, unclear$"
    with pytest.raises(ValueError, match=msg):
        scoring.normalize_label("maybe")
    with pytest.raises(ValueError, match=msg):
        scoring.check_label("maybe", None, None)


@pytest.mark.parametrize(("text", "want"), [("1-3", (1, 3)), ("1", (1, 1)), ("1..1", (1, 1))])
def test_loop_calls_may_start_at_the_first_call(text, want):
    assert scoring.parse_loop_calls(text) == want


def test_format_loop_calls_is_first_dash_last_or_empty():
    assert scoring.format_loop_calls(3, 7) == "3-7"
    assert [scoring.format_loop_calls(*r) for r in ((None, None), (3, None), (None, 7))] == ["", "", ""]


@pytest.mark.parametrize(("args", "msg"), [
    ((LOOP, 2, None), r"^a loop label needs the loop's calls \(loop_calls FIRST-LAST\)$"),
    ((LOOP, None, 4), "needs the loop's calls"),
    ((LOOP, 0, 3), r"^loop calls 0-3: positions start at 1 and the last is not before the first$"),
    ((LOOP, 5, 3), "positions start at 1"),
    ((NORMAL, None, 3), r"^only a loop label has loop calls \(this one is 'normal'\)$"),
    ((UNCLEAR, 3, None), "only a loop label"),
])
def test_check_label_refuses(args, msg):
    with pytest.raises(ValueError, match=msg):
        scoring.check_label(*args)


@pytest.mark.parametrize("args", [(LOOP, 1, 1), (LOOP, 1, 3, 3), (LOOP, 4, 4, 4), (NORMAL, None, None, 2),
                                  (UNCLEAR, None, None)])
def test_check_label_accepts(args):
    scoring.check_label(*args)


def test_score_counts_every_early_miss_and_false_halt_and_skips_unknown_policies():
    js = [Judged("Z", 1, LOOP, 3, 6, 4),  # a policy not asked about, first in the rows
          Judged("A", 1, LOOP, 3, 6, 1), Judged("A", 2, LOOP, 3, 6, 2),  # early ×2
          Judged("A", 3, LOOP, 3, 6, None), Judged("A", 4, LOOP, 3, 6, 9),  # missed ×2
          Judged("A", 5, NORMAL, None, None, 1, 3, calls=10),  # false halts ×2: calls 2-10 lost (9) …
          Judged("A", 6, NORMAL, None, None, 2, 4, calls=5)]  # … and calls 3-5 (3)
    (a,) = scoring.score(js, {"A": "policy a"})  # policies as a mapping
    # no catch saves nothing of the 4 × 4 loop calls (the ledger's saved, 3 and 4, is another count)
    assert (a.policy_id, a.policy, a.loops, a.caught, a.early, a.missed, a.normal, a.false_halts, a.halted,
            a.saved, a.loop_calls, a.lost, a.flagged) == ("A", "policy a", 4, 0, 2, 2, 2, 2, 5, 0, 16, 12, 0)
    assert a.row() == {"policy_id": "A", "policy": "policy a", "loops": 4, "caught": 0, "early": 2, "missed": 2,
                       "normal": 2, "false_halts": 2, "precision": 0.0, "recall": 0.0, "saved": 0,
                       "loop_calls": 16, "lost": 12, "normal_calls": 15, "flagged": 0, "into_loop": []}


def test_a_rows_into_loop_is_sorted_and_ratios_print_two_places():
    s = scoring.PolicyScore("P", "p", loops=3, caught=3, halted=4, saved=2, into_loop=[3, 1, 2])
    assert (s.row()["into_loop"], s.row()["precision"], s.row()["recall"]) == ([1, 2, 3], 0.75, 1.0)
    assert (scoring.ratio(0.75), scoring.ratio(1.0), scoring.ratio(None)) == ("0.75", "1.00", "—")
    assert scoring.into_loop_text([]) == ""


def test_rank_by_policy_name_and_by_into_loop_soonest_first_none_last():
    mk = scoring.PolicyScore
    # the soonest (median 1.5) is named last: the order is the medians', the name only breaks ties
    a, b = mk("1", "zeta", caught=1, into_loop=[3]), mk("2", "zulu", caught=2, into_loop=[1, 2])
    c, d = mk("3", "beta"), mk("4", "gamma", caught=1, into_loop=[3])
    assert [s.policy for s in scoring.rank([a, b, c, d], "policy")] == ["beta", "gamma", "zeta", "zulu"]
    assert [s.policy for s in scoring.rank([c, a, d, b], "into_loop")] == ["zulu", "gamma", "zeta", "beta"]
    with pytest.raises(ValueError, match=r"^cannot sort by 'bogus'; expected one of rank, loops, caught, early, "
                                         r"missed, normal, false_halts, precision, recall, saved, into_loop, policy$"):
        scoring.rank([a], "bogus")


def test_label_next_puts_the_most_even_split_first_and_lists_twenty_by_default():
    # four policies: session 1 splits 1 vs 3, session 2 splits 2 vs 2 (tells more of them apart)
    halts = [(1, p, p == "A") for p in "ABCD"] + [(2, p, p in "AB") for p in "ABCD"]
    assert [x.session_id for x in scoring.label_next(halts, list("ABCD"))] == [2, 1]
    many = [(sid, p, p == "A") for sid in range(25) for p in "AB"]
    assert [x.session_id for x in scoring.label_next(many, ["A", "B"])] == list(range(20))


def test_judge_replay_keeps_the_session_and_the_label_with_or_without_a_halt():
    from loopledger.detectors.policy import Check
    from loopledger.replay import Step

    steps = [Step(s, 0 if s < 5 else 1, ev) for s, ev in enumerate(EVENTS)]
    steps[6] = steps[6]._replace(checks=(Check(1, "halt"),))
    assert (scoring.judge_replay("P", 9, LOOP, 4, 6, EVENTS, steps, saved=1)
            == Judged("P", 9, LOOP, 4, 6, 5, 1, 1, 6, 0, 6, 5))  # six calls; the halt is its first flag
    assert (scoring.judge_replay("P", 9, LOOP, 4, 6, EVENTS, steps[:6], saved=2)
            == Judged("P", 9, LOOP, 4, 6, None, 2, None, None, 0, 6, None))



def test_a_set_of_policies_takes_its_earliest_halt_with_where_it_stopped_and_what_it_saved():
    js = [Judged("A", 1, NORMAL),  # B never judged session 1: left out, and later sessions still count
          Judged("A", 2, LOOP, 3, 6, None, 4), Judged("B", 2, LOOP, 3, 6, None, 0),  # no halt: saved 0
          Judged("A", 3, LOOP, 3, 6, 5, 2, 0, 7), Judged("B", 3, LOOP, 3, 6, 4, 7, 1, 3)]
    assert scoring.any_of(js, ["A", "B"], "A|B") == [Judged("A|B", 2, LOOP, 3, 6, None, 0, None, None),
                                                     Judged("A|B", 3, LOOP, 3, 6, 4, 7, 1, 3)]
    # a set of one policy is that policy
    assert scoring.any_of(js, ["A"], "A") == [Judged("A", 1, NORMAL), Judged("A", 2, LOOP, 3, 6, None, 0),
                                              js[3]]
