"""Seed 003's sliding-window LoopGuard (design.md, "window"), porting the upstream tests' spirit."""

from __future__ import annotations

import pytest
from loopledger.detectors import ConfigError, LoopDetectedError, LoopGuard, default_key_fn


def test_third_identical_call_raises_with_structured_fields():
    g = LoopGuard(8, 3)
    g.record("search", {"q": "x"})
    g.record("search", {"q": "x"})
    with pytest.raises(LoopDetectedError) as info:
        g.record("search", {"q": "x"})
    e = info.value
    assert (e.tool_name, e.tool_args, e.count, e.window, e.threshold) == ("search", {"q": "x"}, 3, 8, 3)
    assert "search" in str(e)
    assert len(g) == 3  # the call stays recorded when it raises


def test_other_calls_in_between_still_count_within_the_window():
    g = LoopGuard(8, 3)
    for name in ("a", "b", "a", "c"):
        g.record(name, {})
    with pytest.raises(LoopDetectedError):
        g.record("a", {})


def test_oldest_is_evicted_before_counting():
    g = LoopGuard(3, 2)
    g.record("a", {})
    g.record("b", {})
    g.record("c", {})
    assert g.record("a", {}) == 1  # the old "a" left the window first
    assert g.recent_keys() == [("b", "{}"), ("c", "{}"), ("a", "{}")]


def test_would_raise_peeks_without_mutating():
    g = LoopGuard(8, 3)
    g.record("search", {"q": "x"})
    g.record("search", {"q": "x"})
    before = g.recent_keys()
    assert g.would_raise("search", {"q": "x"})
    assert not g.would_raise("search", {"q": "y"})
    assert g.recent_keys() == before and len(g) == 2


def test_would_raise_accounts_for_eviction():
    g = LoopGuard(2, 2)
    g.record("a", {})
    g.record("b", {})
    assert not g.would_raise("a", {})  # "a" would be evicted first
    assert g.would_raise("b", {})


def test_key_order_irrelevant():
    g = LoopGuard(8, 2)
    g.record("t", {"a": 1, "b": {"c": 1, "d": 2}})
    with pytest.raises(LoopDetectedError):
        g.record("t", {"b": {"d": 2, "c": 1}, "a": 1})


def test_custom_key_fn_ignoring_request_id():
    def stable(name, args):
        cleaned = {k: v for k, v in args.items() if k not in ("request_id", "ts")}
        return default_key_fn(name, cleaned)

    g = LoopGuard(10, 3, key_fn=stable)
    g.record("search", {"q": "x", "request_id": 1})
    g.record("search", {"q": "x", "request_id": 2})
    with pytest.raises(LoopDetectedError):
        g.record("search", {"q": "x", "request_id": 3, "ts": 9})
    plain = LoopGuard(10, 3)
    for i in range(3):
        plain.record("search", {"q": "x", "request_id": i})  # all different without the key_fn


def test_reset_len_and_recent_keys_oldest_first():
    g = LoopGuard(4, 4)
    for name in "abcde":
        g.record(name, None)
    assert len(g) == 4
    assert [k[0] for k in g.recent_keys()] == ["b", "c", "d", "e"]
    assert g.recent_keys()[0] == ("b", "{}")  # None ≡ {}
    g.reset()
    assert len(g) == 0 and g.recent_keys() == []


def test_default_key_fn_is_name_and_canonical_json():
    assert default_key_fn("t", {"b": 1, "a": 2}) == ("t", '{"a":2,"b":1}')


@pytest.mark.parametrize("window, threshold, rule", [
    (1, 2, "window >= 2"), (3, 1, "threshold >= 2"), (3, 4, "threshold <= window"),
])
def test_construction_errors_say_which_rule_broke(window, threshold, rule):
    with pytest.raises(ConfigError) as info:
        LoopGuard(window, threshold)
    assert info.value.rule == rule
    assert isinstance(info.value, ValueError)


def test_deep_args_in_error_message_do_not_recurse():
    deep: object = 1
    for _ in range(10_000):
        deep = {"k": deep}
    g = LoopGuard(2, 2)
    g.record("t", deep)
    with pytest.raises(LoopDetectedError) as info:
        g.record("t", deep)
    assert len(str(info.value)) < 400


def test_unhashable_custom_keys_are_counted_by_equality():
    g = LoopGuard(3, 2, key_fn=lambda name, args: [name, sorted(args)])
    g.record("a", {"x": 1})
    g.record("b", {})
    with pytest.raises(LoopDetectedError):
        g.record("a", {"x": 2})  # same key: only the argument names are compared
    g.record("c", {})
    assert g.record("d", {}) == 1


# ── rules pinned for mutation testing (make mutants): each test names the rule it holds ──────

def test_evicting_one_of_several_copies_keeps_the_others_counted():
    g = LoopGuard(4, 4)
    for name in ("a", "a", "a", "b"):
        g.record(name, {})
    assert g.record("c", {}) == 1  # evicts one "a": [a, a, b, c]
    assert g.record("a", {}) == 2  # evicts another: [a, b, c, a]
    assert g.record("a", {}) == 2  # evicts the last old one: [b, c, a, a]
    assert g.record("b", {}) == 1  # [c, a, a, b]: the old "b" left


def test_reset_forgets_the_counts_too():
    g = LoopGuard(8, 3)
    g.record("a", {})
    g.record("a", {})
    g.reset()
    assert g.record("a", {}) == 1
    assert g.record("a", {}) == 2


def test_would_raise_counts_a_copy_of_the_key_leaving_the_full_window():
    g = LoopGuard(3, 2)
    g.record("a", {})
    with pytest.raises(LoopDetectedError):
        g.record("a", {})
    g.record("b", {})  # [a, a, b]
    assert g.would_raise("a", {})  # one "a" leaves, one stays, the new one: 2
    assert g.count_if_recorded(("a", "{}")) == 2
    assert g.count_if_recorded(("b", "{}")) == 2
    assert g.count_if_recorded(("z", "{}")) == 1


def test_every_count_of_unhashable_keys_is_returned():
    g = LoopGuard(4, 3, key_fn=lambda name, args: [name])
    assert [g.record("a", {}), g.record("b", {}), g.record("a", {})] == [1, 1, 2]


def test_a_deep_copy_counts_on_by_itself():
    import copy

    g = LoopGuard(3, 3)
    g.record("a", {})
    twin = copy.deepcopy(g)
    assert (twin.window, twin.threshold, twin.key_fn) == (3, 3, default_key_fn)
    assert twin.record("a", {}) == 2
    assert twin.recent_keys() == [("a", "{}"), ("a", "{}")] and g.recent_keys() == [("a", "{}")]
    assert g.record("b", {}) == 1 and g.record("a", {}) == 2
    odd = LoopGuard(3, 3, key_fn=lambda name, args: [name])
    odd.record("a", {})
    odd.record("a", {})
    twin = copy.deepcopy(odd)
    with pytest.raises(LoopDetectedError):
        twin.record("a", {})
    assert len(odd) == 2


def test_error_message_shows_tool_canonical_args_count_window_and_threshold():
    g = LoopGuard(4, 2)
    g.record("t", {"b": 1, "a": 2})
    with pytest.raises(LoopDetectedError) as info:
        g.record("t", {"a": 2, "b": 1})
    assert str(info.value) == 'agent looping on t({"a":2,"b":1}): occurred 2 times in the last 4 calls (threshold 2)'


def test_error_message_shortens_args_past_200_characters():
    def message(args):
        return str(LoopDetectedError("t", args, 2, 4, 2))

    exact = {"k": "x" * 192}  # {"k":"…"} is 200 characters
    assert message(exact) == f'agent looping on t({{"k":"{"x" * 192}"}}): occurred 2 times in the last 4 calls (threshold 2)'
    longer = {"k": "x" * 193}
    shown = ('{"k":"' + "x" * 193 + '"}')[:200] + "…"
    assert message(longer) == f"agent looping on t({shown}): occurred 2 times in the last 4 calls (threshold 2)"


@pytest.mark.parametrize("window, threshold, field, rule, message", [
    ("8", 3, "window", "window is an integer", "window: must be an integer, got '8'"),
    (True, 2, "window", "window is an integer", "window: must be an integer, got True"),
    (8, 2.5, "threshold", "threshold is an integer", "threshold: must be an integer, got 2.5"),
    (8, False, "threshold", "threshold is an integer", "threshold: must be an integer, got False"),
    (1, 2, "window", "window >= 2", "window: must be >= 2, got 1"),
    (3, 1, "threshold", "threshold >= 2", "threshold: must be >= 2, got 1"),
    (3, 4, "threshold", "threshold <= window", "threshold: must be <= window (3), got 4"),
])
def test_construction_errors_name_the_field_the_rule_and_the_value(window, threshold, field, rule, message):
    with pytest.raises(ConfigError) as info:
        LoopGuard(window, threshold)
    assert (info.value.field, info.value.rule, str(info.value)) == (field, rule, message)


def test_policy_checks_each_call_and_halts_naming_tool_count_and_window():
    from loopledger.detectors import make_policy
    from loopledger.detectors.base import Check
    from loopledger.events import Batch, Call

    p = make_policy("window:window=5,threshold=3")
    a, b = Call("1", "a", {"x": 1}), Call("2", "b", {})
    assert p.check(Batch((a, b, a, b, a, b))) == [
        Check(0, "allow", 1, None, 3, ""), Check(1, "allow", 1, None, 3, ""),
        Check(2, "allow", 2, None, 3, ""), Check(3, "allow", 2, None, 3, ""),
        Check(4, "halt", 3, None, 3, "a 3 times in the last 5 calls"),
    ]
    p.user_turn()
    assert p.check(Batch((a,))) == [Check(0, "allow", 1, None, 3, "")]


def test_policy_defaults_are_window_8_threshold_3():
    from loopledger.detectors import make_policy
    from loopledger.events import Batch, Call

    p = make_policy("window")
    calls = [Call(str(i), "t", {"i": i % 3}) for i in range(7)]  # t0 t1 t2 t0 t1 t2 t0
    assert [c.verdict for c in p.check(Batch(tuple(calls)))] == ["allow"] * 6 + ["halt"]
    assert (p.state()["window"], p.state()["threshold"]) == (8, 3)


def test_policy_state_lists_the_buffer_with_args_shortened_to_80_and_counts():
    from loopledger.detectors import make_policy
    from loopledger.events import Batch, Call

    p = make_policy("window:window=3,threshold=3")
    long_args = {"k": "y" * 80}
    p.check(Batch((Call("1", "a", {}), Call("2", "b", long_args), Call("3", "a", None))))
    shown = ('{"k":"' + "y" * 80 + '"}')[:80] + "…"
    assert p.state() == {"window": 3, "threshold": 3, "buffer": [
        {"tool": "a", "args": "{}", "count": 2}, {"tool": "b", "args": shown, "count": 1},
        {"tool": "a", "args": "{}", "count": 2}]}
    p = make_policy("window:window=3,threshold=3")
    exact = {"k": "z" * 72}  # 80 characters of canonical text: shown whole
    p.check(Batch((Call("1", "a", exact),)))
    assert p.state()["buffer"][0]["args"] == '{"k":"' + "z" * 72 + '"}'


def test_policy_uses_its_own_threshold_and_keeps_its_spec():
    from loopledger.detectors import PolicySpec, make_policy
    from loopledger.events import Batch, Call

    spec = PolicySpec.parse("window:window=4,threshold=2")
    p = make_policy(spec)
    assert p.spec is spec
    a = Call("1", "a", {})
    assert [c.verdict for c in p.check(Batch((a, a)))] == ["allow", "halt"]


def test_policy_state_shortens_canonical_args_of_81_characters():
    from loopledger.detectors import make_policy
    from loopledger.events import Batch, Call

    p = make_policy("window")
    args = {"k": "w" * 73}  # '{"k":"' + 73 + '"}' = 81 characters
    p.check(Batch((Call("1", "a", args),)))
    assert p.state()["buffer"][0]["args"] == ('{"k":"' + "w" * 73 + '"}')[:80] + "…"


# ── Ported from seed 003's upstream, MukundaKatta/tool-loop-guard (tests/test_guard.py, the
# Python port of the crate; same API: record / would_raise / reset / len / recent_keys). ──────

def test_default_key_includes_tool_name():
    assert default_key_fn("search", {"q": "x"}) != default_key_fn("fetch", {"q": "x"})


def test_default_key_canonicalizes_arg_order():
    assert default_key_fn("t", {"a": 1, "b": 2}) == default_key_fn("t", {"b": 2, "a": 1})


def test_default_key_none_args_is_empty_dict():
    assert default_key_fn("t", None) == default_key_fn("t", {})


def test_default_key_falls_back_to_repr_on_unserializable():
    class _NotJson:
        def __repr__(self):
            return "NotJson()"

    assert "NotJson()" in default_key_fn("t", _NotJson())[1]


def test_records_under_threshold_does_not_raise():
    g = LoopGuard(window=4, threshold=3)
    g.record("search", {"q": "x"})
    g.record("search", {"q": "x"})
    assert len(g) == 2


def test_third_match_raises_loop_detected():
    g = LoopGuard(window=4, threshold=3)
    g.record("search", {"q": "x"})
    g.record("search", {"q": "x"})
    with pytest.raises(LoopDetectedError) as info:
        g.record("search", {"q": "x"})
    e = info.value
    assert (e.tool_name, e.count, e.window, e.threshold) == ("search", 3, 4, 3)


def test_different_args_do_not_count():
    g = LoopGuard(window=4, threshold=3)
    for q in "abc":
        g.record("search", {"q": q})


def test_different_tools_do_not_count():
    g = LoopGuard(window=4, threshold=3)
    for tool in ("search", "fetch", "write"):
        g.record(tool, {"q": "x"})


def test_eviction_keeps_unrelated_loops_safe():
    g = LoopGuard(window=4, threshold=3)
    g.record("search", {"q": "x"})
    for filler in ("fill_a", "fill_b", "fill_c"):
        g.record(filler, {})
    assert g.record("search", {"q": "x"}) == 1  # the first search was evicted first
    assert len(g) == 4  # the buffer stays at window size


def test_old_match_evicted_before_threshold():
    g = LoopGuard(window=3, threshold=2)
    g.record("search", {"q": "x"})
    g.record("filler", {"k": 1})
    g.record("filler", {"k": 2})
    assert g.record("search", {"q": "x"}) == 1  # would have been the 2nd: no raise
    assert len(g) == 3


def test_would_raise_predicts_next_record_outcome():
    g = LoopGuard(window=4, threshold=3)
    g.record("search", {"q": "x"})
    g.record("search", {"q": "x"})
    assert g.would_raise("search", {"q": "x"}) is True
    assert g.would_raise("search", {"q": "y"}) is False
    assert len(g) == 2  # would_raise must not mutate the buffer


def test_would_raise_accounts_for_full_window_eviction():
    g = LoopGuard(window=3, threshold=2)
    for tool in "abc":
        g.record(tool, None)
    assert g.would_raise("fresh", None) is False


def test_reset_clears_buffer():
    g = LoopGuard(window=4, threshold=3)
    g.record("search", {"q": "x"})
    g.record("search", {"q": "x"})
    g.reset()
    assert len(g) == 0
    g.record("search", {"q": "x"})
    assert g.record("search", {"q": "x"}) == 2  # still under the threshold


def test_recent_keys_returns_oldest_first():
    g = LoopGuard(window=4, threshold=4)
    for tool in "abc":
        g.record(tool, None)
    # The crate (seed 003) spells it recent_keys(); its Python port a property: both work.
    assert [k[0] for k in g.recent_keys] == ["a", "b", "c"]
    assert [k[0] for k in g.recent_keys()] == ["a", "b", "c"]


def test_custom_key_fn_can_ignore_noisy_field():
    def stable_key(tool_name, args):
        return default_key_fn(tool_name, {k: v for k, v in (args or {}).items() if k != "request_id"})

    g = LoopGuard(window=4, threshold=3, key_fn=stable_key)
    g.record("search", {"q": "x", "request_id": "r1"})
    g.record("search", {"q": "x", "request_id": "r2"})
    with pytest.raises(LoopDetectedError):
        g.record("search", {"q": "x", "request_id": "r3"})


@pytest.mark.parametrize("window", [-1, 0, 1])
def test_invalid_window_rejected(window):
    with pytest.raises(ValueError, match="window"):
        LoopGuard(window=window, threshold=2)


@pytest.mark.parametrize("threshold", [-1, 0, 1])
def test_invalid_threshold_rejected(threshold):
    with pytest.raises(ValueError, match="threshold"):
        LoopGuard(window=5, threshold=threshold)


def test_threshold_larger_than_window_rejected():
    with pytest.raises(ConfigError) as info:
        LoopGuard(window=3, threshold=4)
    assert info.value.rule == "threshold <= window"  # the crate's ThresholdExceedsWindow


def test_loop_detected_error_carries_full_context():
    g = LoopGuard(window=3, threshold=2)
    g.record("search", {"q": "x"})
    with pytest.raises(LoopDetectedError) as info:
        g.record("search", {"q": "x"})
    e = info.value
    assert e.tool_name == "search" and e.tool_args == {"q": "x"}
    assert (e.count, e.window, e.threshold) == (2, 3, 2)
    assert "search" in str(e)
    assert isinstance(e, RuntimeError)  # the Python port's base class


def test_record_and_would_raise_take_args_as_optional():
    g = LoopGuard(window=3, threshold=2)
    assert g.record("ls") == 1  # args default to None ≡ {}
    assert g.would_raise("ls") is True
    assert g.would_raise("ls", {}) is True


def test_window_and_threshold_are_readable():
    g = LoopGuard(window=5, threshold=3)
    assert (g.window, g.threshold) == (5, 3)


def test_the_crates_constructors_build_the_same_guard():
    # seed 003: LoopGuard::with_capacity(8, 3), ::try_new(3, 4) -> Err(ThresholdExceedsWindow),
    # ::with_key_fn(10, 3, stable_key)
    g = LoopGuard.with_capacity(8, 3)
    assert (g.window, g.threshold, g.key_fn) == (8, 3, default_key_fn)
    # a threshold other than the default (3) is the one kept
    assert LoopGuard.with_capacity(8, 5).threshold == 5
    with pytest.raises(ConfigError) as info:
        LoopGuard.try_new(3, 4)
    assert info.value.rule == "threshold <= window"
    with pytest.raises(ConfigError):
        LoopGuard.with_capacity(1, 2)

    def key(name, args):
        return name

    k = LoopGuard.with_key_fn(10, 3, key)
    assert (k.window, k.threshold, k.key_fn) == (10, 3, key)
    k.record("a", {"x": 1})
    k.record("a", {"x": 2})
    with pytest.raises(LoopDetectedError):
        k.record("a", {"x": 3})
