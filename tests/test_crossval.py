"""Grouped cross-validation (loopledger.analysis.crossval) on tables worked out by hand."""

from __future__ import annotations

import pytest
from loopledger.analysis.crossval import (
    Case,
    Tally,
    Verdicts,
    choose,
    cross_validate,
    fixed,
    group_of,
    tally,
)

# Four sessions in two groups; a loop's calls are 3-6.
CASES = [Case("a1", "a", "loop", 3, 6), Case("a2", "a", "normal"),
         Case("b1", "b", "loop", 3, 6), Case("b2", "b", "normal")]


def test_a_tally_counts_sessions_by_outcome_and_warnings_on_normal_ones():
    t = tally(CASES, {"a1": Verdicts(4), "a2": Verdicts(None, 3), "b1": Verdicts(2), "b2": Verdicts(7, 1)})
    assert (t.loops, t.caught, t.early, t.missed) == (2, 1, 1, 0)
    assert (t.normal, t.false_halts, t.normal_warned, t.warnings) == (2, 1, 2, 4)
    # Wilson 95%: 1/2 → [0.09, 0.91], 2/2 → [0.34, 1.00]
    assert t.cells() == ("1/2 [0.09, 0.91]", "1/2 [0.09, 0.91]", "2/2 [0.34, 1.00], 4 warnings")


def test_precision_comes_first_and_ties_go_to_the_candidate_listed_first():
    table = {"eager": {"a1": Verdicts(4), "b1": Verdicts(4), "a2": Verdicts(5)},  # 2 caught, 1 false halt
             "calm": {"a1": Verdicts(4)},  # 1 caught, none false
             "calm too": {"b1": Verdicts(4)}}  # the same score as calm, listed after it
    assert choose(["eager", "calm", "calm too"], CASES, table)[0] == "calm"
    assert choose(["calm too", "calm"], CASES, table)[0] == "calm too"


def test_with_a_margin_the_first_candidate_yields_only_to_a_clear_gain():
    table = {"default": {"a1": Verdicts(4)}, "one more": {"a1": Verdicts(4), "b1": Verdicts(5)},
             "fewer false": {"b2": Verdicts(None)}, "noisy default": {"a1": Verdicts(4), "a2": Verdicts(1)}}
    assert choose(["default", "one more"], CASES, table)[0] == "one more"  # plain: best wins
    assert choose(["default", "one more"], CASES, table, margin=2)[0] == "default"  # +1 loop is noise
    assert choose(["noisy default", "fewer false"], CASES, table, margin=2)[0] == "fewer false"


def test_each_group_is_scored_by_a_choice_made_on_the_others():
    # "fits a" halts a's loop and b's normal session; "fits b" the reverse; "never" nothing.
    table = {"fits a": {"a1": Verdicts(4), "b2": Verdicts(2)}, "fits b": {"b1": Verdicts(4), "a2": Verdicts(2)},
             "never": {}}
    cv = cross_validate(["fits a", "fits b", "never"], CASES, table)
    # in sample every candidate halts one normal session or catches nothing: "never" (0/0)
    assert cv.chosen == "never" and (cv.in_sample.caught, cv.in_sample.false_halts) == (0, 0)
    # hold out a, choose on b: "fits b" (1 caught, 0 false on b) → on a: its normal session halted
    # hold out b, choose on a: "fits a" → on b: b2 halted. Pooled: 0/2 caught, 2/2 false halts.
    assert [(f.group, f.chosen) for f in cv.folds] == [("a", "fits b"), ("b", "fits a")]
    assert (cv.held_out.caught, cv.held_out.loops, cv.held_out.false_halts, cv.held_out.normal) == (0, 2, 2, 2)
    assert not cv.stable


def test_a_fixed_setting_scores_alike_held_out_and_in_sample_and_one_group_holds_nothing_out():
    table = {"x": {"a1": Verdicts(4), "b2": Verdicts(1)}}
    cv = fixed("x", CASES, table)
    assert (cv.held_out.caught, cv.held_out.false_halts) == (cv.in_sample.caught, cv.in_sample.false_halts) == (1, 1)
    one = cross_validate(["x"], [Case("a1", "a", "loop", 3, 6)], table)
    assert one.folds == [] and one.held_out == Tally()
    with pytest.raises(ValueError):
        choose([], CASES, table)


@pytest.mark.parametrize(("path", "fmt", "by", "group"), [
    ("/home/me/.claude/projects/-srv-app/abc.jsonl", "claude-code", "folder", "/home/me/.claude/projects/-srv-app"),
    ("/work/main/../shared/corpus/x.json", "openai-chat", "folder", "/work/shared/corpus"),
    ("C:\\Users\\me\\runs\\a.traj", "swe-agent", "folder", "C:/Users/me/runs"),
    ("/runs/a.traj", "swe-agent", "agent", "swe-agent"),
    ("/runs/./a.traj", "swe-agent", "file", "/runs/a.traj"),
])
def test_sessions_are_grouped_by_folder_agent_or_file(path, fmt, by, group):
    assert group_of(path, fmt, by) == group


def test_an_unknown_grouping_is_refused():
    with pytest.raises(ValueError, match="expected one of folder, agent, file"):
        group_of("/a/b", None, "moon")
