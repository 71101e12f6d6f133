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
