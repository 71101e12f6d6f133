"""A guard's score in the user's currency — calls saved inside loops, calls lost to false halts,
loops flagged inside — per family, in sample and held out, on sessions worked out by hand.

Five sessions in two source groups (positions are 1-based calls):

    case  group  family         label        calls  first flag  halt   outcome       figure
    a1    a      coding agents  loop 3-6     10     2 (warn)    4      caught        saves 6−4 = 2 of 4; flagged before the loop
    a2    a      coding agents  normal       8      5           5      false halt    loses 8−5 = 3 of 8
    b1    b      harnesses      loop 2-11    12     3 (halt)    3      caught        saves 11−3 = 8 of 10; flagged inside
    b2    b      harnesses      loop 5-6     9      2           2      early         saves 0 of 2
    b3    b      harnesses      normal       7      4 (warn)    never  clean, warned loses 0 of 7
"""

from __future__ import annotations

import pytest
from loopledger.analysis import families, scoring
from loopledger.analysis.crossval import Case, Tally, Verdicts, choose, cross_validate, tally

CODING, HARNESS = families.CODING, families.HARNESS
CASES = [Case("a1", "a", "loop", 3, 6, 10, CODING), Case("a2", "a", "normal", None, None, 8, CODING),
         Case("b1", "b", "loop", 2, 11, 12, HARNESS), Case("b2", "b", "loop", 5, 6, 9, HARNESS),
         Case("b3", "b", "normal", None, None, 7, HARNESS)]
X = {"a1": Verdicts(4, 1, 2), "a2": Verdicts(5), "b1": Verdicts(3), "b2": Verdicts(2), "b3": Verdicts(None, 1, 4)}


def test_the_counting_functions_on_one_session_each():
    assert scoring.calls_saved("loop", 3, 6, 4) == 2  # calls 5 and 6
    assert scoring.calls_saved("loop", 3, 6, 6) == 0  # halted on the loop's last call
    assert scoring.calls_saved("loop", 3, 6, 2) == 0  # early: stopped before the loop, saved none of it
    assert scoring.calls_saved("loop", 3, 6, 7) == 0 and scoring.calls_saved("loop", 3, 6, None) == 0
    assert scoring.calls_lost("normal", 5, 8) == 3 and scoring.calls_lost("normal", None, 8) == 0
    assert scoring.calls_lost("loop", 5, 8) == 0  # a loop session's halt is no loss of normal work
    assert scoring.loop_length(3, 6) == 4 and scoring.loop_length(None, None) == 0
    assert scoring.flagged_inside(3, 6, 3) and scoring.flagged_inside(3, 6, 6)
    assert not scoring.flagged_inside(3, 6, 2) and not scoring.flagged_inside(3, 6, None)


def test_a_tally_counts_calls_saved_lost_and_flagged_inside():
    t = tally(CASES, X)
    assert (t.loops, t.caught, t.early, t.missed, t.flagged) == (3, 2, 1, 0, 1)
    assert (t.saved, t.loop_calls) == (10, 16)  # 2 + 8 + 0 of 4 + 10 + 2
    assert (t.normal, t.false_halts, t.lost, t.normal_calls, t.normal_warned) == (2, 1, 3, 15, 1)


def test_the_figures_split_by_family_in_sample_and_held_out():
    # In sample, "x" (the table above) halts a normal session and "never" does not: "never" is chosen.
    # Hold out a, choose on b: x catches b1 with no false halt → x, scored on a: a1 caught (2 of 4
    # saved), a2 halted (3 of 8 lost). Hold out b, choose on a: x halts a2 → never, scored on b: nothing.
    cv = cross_validate(["x", "never"], CASES, {"x": X, "never": {}})
    assert cv.chosen == "never" and [(f.group, f.chosen) for f in cv.folds] == [("a", "x"), ("b", "never")]
    assert list(cv.held_out_by) == [CODING, HARNESS] and list(cv.in_sample_by) == [CODING, HARNESS]
    coding, harness = cv.held_out_by[CODING], cv.held_out_by[HARNESS]
    assert (coding.caught, coding.loops, coding.saved, coding.loop_calls) == (1, 1, 2, 4)
    assert (coding.false_halts, coding.normal, coding.lost, coding.normal_calls) == (1, 1, 3, 8)
    assert (harness.caught, harness.loops, harness.saved, harness.loop_calls) == (0, 2, 0, 12)
    assert (harness.false_halts, harness.normal, harness.lost, harness.normal_calls) == (0, 1, 0, 7)
    inside = cv.in_sample_by[HARNESS]
    assert (inside.caught, inside.saved, inside.loop_calls, inside.false_halts) == (0, 0, 12, 0)
    # Wilson 1/1 → [1/(1 + z²), 1] = [0.21, 1.00]; 0/1 → [0, z²/(1 + z²)] = [0.00, 0.79]; one
    # session resampled is always itself: the calls' interval is the point 2/4, 3/8.
    assert coding.currency_cells() == ("1/1 [0.21, 1.00]", "0/1 [0.00, 0.79]", "2/4 (50%) [0.50, 0.50]",
                                       "1/1 [0.21, 1.00]", "3/8 (38%) [0.38, 0.38]", "0/1 [0.00, 0.79]")


def test_among_equal_catches_the_choice_goes_to_the_setting_that_saves_more_calls():
    # both catch a1 and halt no normal session; "soon" halts at its 3rd call (saves 3), "late" at
    # its last (saves 0): "soon" is chosen though listed second.
    table = {"late": {"a1": Verdicts(6)}, "soon": {"a1": Verdicts(3)}}
    assert choose(["late", "soon"], CASES, table)[0] == "soon"


def test_calls_saved_get_a_session_bootstrap_interval_with_a_fixed_seed():
    # Two sessions, one saving none of its 10 loop calls, one all 10: a resample of two sessions
    # is 0/20, 10/20 or 20/20 (1 in 4, 2 in 4, 1 in 4), so the 95% interval runs from 0 to 1.
    assert scoring.bootstrap_ratio([(0, 10), (10, 10)]) == (0.0, 1.0)
    assert scoring.bootstrap_ratio([(0, 10), (10, 10)]) == scoring.bootstrap_ratio([(0, 10), (10, 10)])
    assert scoring.bootstrap_ratio([]) is None and scoring.bootstrap_ratio([(0, 0)]) is None
    assert scoring.share_text(500, 594) == "500/594 (84%)" and scoring.share_text(0, 0) == "0/0"
    assert Tally().currency_cells()[2] == "0/0"


@pytest.mark.parametrize(("fmt", "agent", "family"), [
    ("claude-code", "claude-code", CODING), ("claude-export", None, CODING), ("codex", "codex", CODING),
    ("aider", "aider", CODING), ("opencode", "opencode", CODING), ("gemini-cli", "gemini-cli", CODING),
    ("cline", None, CODING), ("otlp", "kilo-code", CODING), ("atif", "Claude Code", CODING),
    ("openai-chat", "GitHub-Copilot", CODING),
    ("openai-chat", "tau-bench", HARNESS), ("openai-chat", "mini-swe-agent", HARNESS), ("openai-chat", None, HARNESS),
    ("anthropic", None, HARNESS), ("tau2-bench", "tau2-bench", HARNESS), ("openhands", "CodeActAgent", HARNESS),
    ("swe-agent", "swe-agent", HARNESS), ("atif", "terminus-2", HARNESS),
    ("otlp", None, families.OTHER), ("otlp", "checkout-service", families.OTHER), (None, None, families.OTHER),
])
def test_a_sessions_family_is_told_by_its_agent_then_its_format(fmt, agent, family):
    assert families.family(fmt, agent) == family


def test_the_bench_prints_a_table_per_family_with_the_hand_counted_figures(tmp_path):
    """bench/detection_scores on score_support's folder (six tau-bench sessions: harnesses), its
    labels.csv beside them: the figures worked out in score_support, as the bench replays them."""
    from score_support import FILE, LABELS_CSV, LADDER, WINDOW, write_transcripts

    from bench.detection_scores import folder_report, labelled_sessions

    write_transcripts(tmp_path)
    (tmp_path / "labels.csv").write_text(LABELS_CSV, encoding="utf-8")
    sessions = labelled_sessions(tmp_path)
    assert {s.family for s in sessions} == {HARNESS} and {s.file for s in sessions} == {FILE}
    lines = folder_report(tmp_path, [[WINDOW], [LADDER]])
    assert "\nharnesses: 3 loop and 2 normal sessions, 13 calls inside the loops\n" in lines
    assert not any(line.startswith("coding agents") for line in lines)
    assert (f"| `{LADDER.label}` | 2/3 [0.21, 0.94] | 1/3 [0.06, 0.79] | 0/13 (0%) [0.00, 0.00] | 0/2 [0.00, 0.66] "
            "| 0/10 (0%) [0.00, 0.00] | 0/2 [0.00, 0.66] | 0 | 0 | 1 |") in lines
    window = next(line for line in lines if line.startswith(f"| `{WINDOW.label}`"))
    assert window.startswith(f"| `{WINDOW.label}` | 2/3 [0.21, 0.94] | 2/3 [0.21, 0.94] | 1/13 (8%) [0.00, ")
    assert window.endswith("| 1/2 [0.09, 0.91] | 0/10 (0%) [0.00, 0.00] | 0/2 [0.00, 0.66] | 1 | 0 | 0 |")


def test_a_message_log_of_a_desk_agents_tools_is_a_coding_agents_session():
    # Claude Code sessions their authors converted to OpenAI-style JSON: the reader cannot name the agent
    from loopledger.analysis.families import CODING, HARNESS, family
    assert family("openai-chat", None, ["Bash", "Read", "Edit", "Bash", "get_order"]) == CODING
    assert family("openai-chat", None, ["get_order_details", "think", "Bash"]) == HARNESS
    assert family("openai-chat", "mini-swe-agent", ["Bash", "Bash"]) == HARNESS  # the name decides first
    assert family("openai-chat", float("nan"), []) == HARNESS  # a ledger's missing agent through pandas
