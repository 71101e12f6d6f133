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
