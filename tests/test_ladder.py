"""Seed 002's graded ladder (design.md, "ladder")."""

from __future__ import annotations

import pytest
from loopledger.detectors import ConfigError, LadderGuard, PolicySpec, Thresholds
from loopledger.events import Batch, Call, UserTurn
from loopledger.replay import replay


def actions(guard: LadderGuard, calls) -> list[str]:
    return [guard.check(name, args).action for name, args in calls]


def test_default_ladder_warn_block_halt_at_2_3_4():
    g = LadderGuard()
    assert actions(g, [("write_file", {"p": 1})] * 5) == ["allow", "warn", "block", "halt", "halt"]


def test_halt_carries_reason_tool_canonical_args_and_count():
    g = LadderGuard()
    for _ in range(3):
        g.check("write_file", {"b": 2, "a": 1})
    v = g.check("write_file", {"a": 1, "b": 2})
    assert (v.action, v.reason, v.tool, v.args, v.count) == ("halt", "repeated_tool_calls", "write_file",
                                                             '{"a":1,"b":2}', 4)
    assert g.check("x", {}).reason == ""


def test_different_key_restarts_and_key_order_is_irrelevant():
    g = LadderGuard()
    seq = [("edit", {"a": 1, "b": 2}), ("edit", {"b": 2, "a": 1}), ("edit", {"a": 2}), ("edit", {"a": 2})]
    assert [g.check(n, a).count for n, a in seq] == [1, 2, 1, 2]


def test_blocked_calls_count_and_break_run_resets():
    g = LadderGuard()
    assert actions(g, [("rm", {})] * 3) == ["allow", "warn", "block"]
    g.break_run()
    assert actions(g, [("rm", {})] * 2) == ["allow", "warn"]


def test_read_only_thresholds_are_separate_and_unknown_tools_are_mutating():
    g = LadderGuard(read_only=Thresholds(3, 5, 7))
    assert actions(g, [("Read", {"f": 1})] * 7) == ["allow", "allow", "warn", "warn", "block", "block", "halt"]
    g.break_run()
    assert g.check("frobnicate", {}).tool_class == "mutating"
    assert g.check("get_issue", {}).tool_class == "read_only"
    assert g.check("thread_post", {}).tool_class == "mutating"  # names are not substrings


def test_classifier_from_names_or_callable():
    g = LadderGuard(read_only=Thresholds(5, 6, 7), read_only_tools=["Frob"])
    assert g.check("frob", {}).tool_class == "read_only"
    assert g.check("read", {}).tool_class == "mutating"  # an explicit list replaces the defaults
    g = LadderGuard(read_only_tools=lambda name: name.startswith("q"))
    assert g.check("query", {}).tool_class == "read_only"


@pytest.mark.parametrize("kwargs, field", [
    (dict(mutating=Thresholds(1, 3, 4)), "warn_at"),
    (dict(mutating=Thresholds(3, 3, 4)), "block_at"),
    (dict(mutating=Thresholds(2, 4, 4)), "halt_at"),
    (dict(read_only=Thresholds(2, 3, 3)), "read_only_halt_at"),
    (dict(read_only=Thresholds(2, 1, 4)), "read_only_block_at"),
])
def test_bad_thresholds_name_the_field(kwargs, field):
    with pytest.raises(ConfigError) as info:
        LadderGuard(**kwargs)
    assert info.value.field == field
    assert field in str(info.value)


def test_policy_checks_each_call_of_a_batch_in_emission_order():
    w = Call("1", "write", {"p": 1})
    events = [UserTurn("go"), Batch((w, w, Call("2", "ls", {}), w, w, w, Call("3", "x", {}))),
              Batch((w,)), UserTurn("again"), Batch((w,))]
    steps = list(replay(events, PolicySpec("ladder")))
    assert [c.verdict for c in steps[1].checks] == ["allow", "warn", "allow", "allow", "warn", "block",
                                                    "allow"]
    assert [c.idx for c in steps[1].checks] == list(range(7))
    assert [c.verdict for c in steps[2].checks] == ["allow"]
    assert [c.verdict for c in steps[4].checks] == ["allow"]


def test_policy_halt_mid_batch_marks_the_rest_after_halt():
    w = Call("1", "write", {"p": 1})
    steps = list(replay([Batch((w, w, w, w, w, Call("2", "y", {}))), Batch((w,))], "ladder"))
    assert [c.verdict for c in steps[0].checks] == ["allow", "warn", "block", "halt", "after_halt",
                                                    "after_halt"]
    assert [c.verdict for c in steps[1].checks] == ["after_halt"]


def test_large_thresholds_are_honoured_past_the_lookup_table():
    g = LadderGuard(mutating=Thresholds(2, 100, 10**9))
    got = [g.check("w", {}).action for _ in range(150)]
    assert got[:2] == ["allow", "warn"] and got[98] == "warn" and got[99] == "block" and got[149] == "block"
    g = LadderGuard(mutating=Thresholds(2, 3, 70))
    got = [g.check("w", {}).action for _ in range(70)]
    assert got[68] == "block" and got[69] == "halt"


# ── rules pinned for mutation testing (make mutants): each test names the rule it holds ──────

def test_each_verdict_carries_the_rung_it_reached_and_allow_carries_warn_at():
    g = LadderGuard()
    got = [(v.action, v.threshold, v.reason) for v in (g.check("w", {}) for _ in range(5))]
    assert got == [("allow", 2, ""), ("warn", 2, "repeated_tool_calls"), ("block", 3, "repeated_tool_calls"),
                   ("halt", 4, "repeated_tool_calls"), ("halt", 4, "repeated_tool_calls")]


def test_rungs_past_the_lookup_table_are_the_thresholds_reached():
    g = LadderGuard(mutating=Thresholds(2, 66, 67))
    got = [g.check("w", {}) for _ in range(68)]
    assert [(v.action, v.threshold) for v in got[64:]] == [("warn", 2), ("block", 66), ("halt", 67), ("halt", 67)]


def test_read_only_thresholds_hold_past_the_lookup_table():
    g = LadderGuard(read_only=Thresholds(2, 70, 80))
    got = [g.check("read_file", {}).action for _ in range(80)]
    assert got[68] == "warn" and got[69] == "block" and got[78] == "block" and got[79] == "halt"


def test_a_different_tool_with_the_same_args_restarts_the_count():
    g = LadderGuard()
    assert [g.check(n, {"p": 1}).count for n in ("a", "a", "b", "a")] == [1, 2, 1, 1]


def test_args_none_are_empty_args():
    g = LadderGuard()
    v = g.check("t", None)
    assert v.args == "{}"
    assert g.check("t", {}).count == 2


def test_args_the_fast_encoder_refuses_are_still_canonical():
    g = LadderGuard()
    v = g.check("t", {"n": 2**70, "a": 1})
    assert v.args == '{"a":1,"n":1180591620717411303424}'
    assert g.check("t", {"a": 1, "n": 2**70}).count == 2
    assert g.check("t", {"a": 1, "n": 2**70 + 1}).count == 1


def test_args_with_a_lone_surrogate_are_written_with_an_escape():
    v = LadderGuard().check("t", {"s": "\ud800"})
    assert v.args == '{"s":"\\ud800"}'


def test_args_shown_are_those_of_the_current_run():
    g = LadderGuard()
    g.check("t", {"a": 1})
    assert g.check("u", {"b": 2}).args == '{"b":2}'


def test_a_fresh_or_broken_run_has_count_zero_and_no_args():
    g = LadderGuard()
    assert (g.key, g.args, g.count) == (None, "", 0)
    g.check("t", {"a": 1})
    g.break_run()
    assert (g.key, g.args, g.count) == (None, "", 0)
    assert g.check("t", {"a": 1}).count == 1


def test_state_shows_the_run_its_class_thresholds_and_the_next_action():
    g = LadderGuard(read_only=Thresholds(3, 5, 7))
    assert g.state() == {"tool": None, "args_hash": None, "count": 0, "class": None}
    g.check("Read", {"f": 1})
    g.check("Read", {"f": 1})
    s = g.state()
    assert len(s["args_hash"]) == 32 and s["args_hash"] == g.key[1]
    del s["args_hash"]
    assert s == {"tool": "Read", "count": 2, "class": "read_only", "warn_at": 3, "block_at": 5,
                 "halt_at": 7, "next": "warn"}
    g.check("edit", {})
    s = g.state()
    assert (s["class"], s["warn_at"], s["block_at"], s["halt_at"], s["next"]) == ("mutating", 2, 3, 4, "warn")


def test_tool_class_is_stable_across_calls():
    g = LadderGuard()
    assert [g.tool_class("get_x") for _ in range(3)] == ["read_only"] * 3
    assert [g.tool_class("put_x") for _ in range(3)] == ["mutating"] * 3
    g = LadderGuard(read_only_tools=lambda name: "yes" if name == "q" else "")  # truthy answers count
    assert (g.tool_class("q"), g.tool_class("r")) == ("read_only", "mutating")


@pytest.mark.parametrize("value", ["3", 2.5, None, True])
def test_a_threshold_that_is_no_integer_of_at_least_2_is_refused(value):
    with pytest.raises(ConfigError) as info:
        Thresholds(value, 10, 11).validate()
    assert (info.value.field, info.value.rule) == ("warn_at", "warn_at >= 2")
    assert str(info.value) == f"warn_at: must be an integer >= 2, got {value!r}"


def test_threshold_errors_name_the_rule_and_say_what_was_given():
    with pytest.raises(ConfigError) as info:
        Thresholds(3, 3, 4).validate("read_only_")
    assert (info.value.field, info.value.rule) == ("read_only_block_at", "warn_at < block_at")
    assert str(info.value) == "read_only_block_at: must be greater than warn_at (3), got 3"
    with pytest.raises(ConfigError) as info:
        Thresholds(2, 5, 4).validate()
    assert (info.value.field, info.value.rule) == ("halt_at", "block_at < halt_at")
    assert str(info.value) == "halt_at: must be greater than block_at (5), got 4"


def test_policy_checks_carry_index_count_rung_and_a_reason_naming_tool_and_class():
    from loopledger.detectors import make_policy
    from loopledger.detectors.base import Check

    w = Call("1", "write", {"p": 1})
    p = make_policy("ladder")
    assert p.check(Batch((w, w, w, w, w))) == [
        Check(0, "allow", 1, None, 2, ""),
        Check(1, "warn", 2, None, 2, "repeated_tool_calls: write ×2 (mutating)"),
        Check(2, "block", 3, None, 3, "repeated_tool_calls: write ×3 (mutating)"),
        Check(3, "halt", 4, None, 4, "repeated_tool_calls: write ×4 (mutating)"),
    ]
    r = Call("2", "read_file", {})
    assert make_policy("ladder").check(Batch((r, r)))[1].reason == "repeated_tool_calls: read_file ×2 (read_only)"


def test_policy_honours_every_threshold_and_the_tool_list():
    from loopledger.detectors import make_policy

    spec = PolicySpec.parse("ladder:warn_at=3,block_at=4,halt_at=6,read_only_warn_at=4,read_only_block_at=5,"
                            "read_only_halt_at=7,read_only_tools=frob")
    p = make_policy(spec)
    assert p.spec is spec
    w, f, r = Call("1", "write", {}), Call("2", "frob", {}), Call("3", "read_file", {})
    assert [c.verdict for c in p.check(Batch((w,) * 6))] == ["allow", "allow", "warn", "block", "block", "halt"]
    p.user_turn()
    assert [c.verdict for c in p.check(Batch((f,) * 7))] == ["allow"] * 3 + ["warn", "block", "block", "halt"]
    p.user_turn()
    assert [c.verdict for c in p.check(Batch((r,) * 3))][-1] == "warn"  # read_file: not in the list
    p = make_policy("ladder")  # the empty list: the default classifier
    assert p.check(Batch((r,)))[0].reason == "" and p.state()["class"] == "read_only"


# ── Seed 002's scenarios, one by one (the article names no public test suite; these follow its
# text and design.md's "ladder" rules). ──────────────────────────────────────────────────────

def test_grep_search_dispatched_four_times_with_nothing_found_climbs_every_rung():
    # "a regex finds nothing, the model might dispatch the exact same grep_search three or four times"
    g = LadderGuard()
    call = ("grep_search", {"query": "fooBar(", "path": "src"})
    assert actions(g, [call] * 4) == ["allow", "warn", "block", "halt"]


def test_view_file_on_a_missing_path_repeated_is_judged_the_same_way():
    g = LadderGuard()
    assert actions(g, [("view_file", {"AbsolutePath": "/no/such/file"})] * 4) == ["allow", "warn", "block", "halt"]


def test_the_second_identical_call_warns_the_third_blocks_the_fourth_halts():
    # Tier 1 "appears for the second time"; Tier 2 "a third time"; Tier 3 "HALT_AFTER = 4".
    g = LadderGuard()
    verdicts = [g.check("write_to_file", {"TargetFile": "a.py", "CodeContent": "x"}) for _ in range(4)]
    assert [(v.count, v.action, v.threshold) for v in verdicts] == [
        (1, "allow", 2), (2, "warn", 2), (3, "block", 3), (4, "halt", 4)]


def test_sequential_duplicate_count_restarts_on_any_other_call():
    g = LadderGuard()
    seq = [("grep_search", {"q": "a"}), ("grep_search", {"q": "a"}), ("view_file", {"p": "x"}),
           ("grep_search", {"q": "a"}), ("grep_search", {"q": "a"}), ("grep_search", {"q": "a"})]
    assert actions(g, seq) == ["allow", "warn", "allow", "allow", "warn", "block"]


def test_nested_key_order_yields_identical_fingerprints():
    # "the guard sorts JSON object keys recursively before computing canonical_args_hash"
    g = LadderGuard()
    a = g.check("search", {"a": 1, "b": {"y": [1, {"q": 2, "p": 3}], "x": None}})
    b = g.check("search", {"b": {"x": None, "y": [1, {"p": 3, "q": 2}]}, "a": 1})
    assert (a.count, b.count) == (1, 2)
    assert b.args == '{"a":1,"b":{"x":null,"y":[1,{"p":3,"q":2}]}}'  # canonical: no whitespace


def test_array_order_and_number_type_are_part_of_the_arguments():
    g = LadderGuard()
    assert [g.check("t", a).count for a in ({"v": [1, 2]}, {"v": [2, 1]}, {"v": 1}, {"v": 1.0})] == [1, 1, 1, 1]


def test_mutating_tools_can_be_held_tighter_than_read_only_ones():
    g = LadderGuard(mutating=Thresholds(2, 3, 4), read_only=Thresholds(3, 5, 8))
    assert actions(g, [("view_file", {"p": "a"})] * 8)[-1] == "halt"
    assert actions(g, [("view_file", {"p": "b"})] * 7)[-1] == "block"
    g.break_run()
    assert actions(g, [("write_to_file", {"p": "a"})] * 4) == ["allow", "warn", "block", "halt"]


def test_default_thresholds_are_2_3_4_for_both_classes():
    g = LadderGuard()
    assert (g.mutating, g.read_only) == (Thresholds(2, 3, 4), Thresholds(2, 3, 4))
    assert actions(g, [("grep_search", {})] * 4) == actions(LadderGuard(), [("run_command", {})] * 4)


def test_a_halt_names_the_offending_tool_and_arguments():
    g = LadderGuard()
    for _ in range(3):
        g.check("grep_search", {"query": "x", "path": "src"})
    v = g.check("grep_search", {"path": "src", "query": "x"})
    assert v.action == "halt" and v.reason == "repeated_tool_calls"
    assert (v.tool, v.args) == ("grep_search", '{"path":"src","query":"x"}')


def test_a_user_turn_lets_the_person_guide_the_agent_afresh():
    # "Prior session history remains intact ... allowing the user to guide the agent with a
    # follow-up prompt": after a halt the next user turn starts the ladder over.
    call = Batch((Call("1", "grep_search", {"q": "x"}),))
    steps = list(replay([UserTurn("find it"), call, call, call, call, call, UserTurn("try src/"), call],
                        PolicySpec("ladder")))
    assert [[c.verdict for c in s.checks] for s in steps if s.checks] == [
        ["allow"], ["warn"], ["block"], ["halt"], ["after_halt"], ["allow"]]


def test_the_actions_are_the_four_words_of_the_seeds_enum():
    from loopledger.detectors import ladder
    assert (ladder.ALLOW, ladder.WARN, ladder.BLOCK, ladder.HALT) == ("allow", "warn", "block", "halt")
    assert ladder.WARN_NOTICE.startswith("[System Notice] You have executed this tool repeatedly with "
                                         "identical arguments without progress.")
