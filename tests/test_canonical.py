"""Canonical arguments: the one definition of "same arguments" (design.md, "Detectors")."""

from __future__ import annotations

import json

import pytest
from loopledger.detectors import (
    answers_hash,
    args_hash,
    batch_signature,
    call_signature,
    canonical_json,
)
from loopledger.detectors.canonical import _walk, action_args, answer_key, command_core
from loopledger.events import Answer, Call


def nested(depth: int, leaf: object = 1, kind: str = "dict") -> object:
    value = leaf
    for _ in range(depth):
        value = {"k": value} if kind == "dict" else [value]
    return value


def test_keys_sorted_recursively_arrays_in_order_no_whitespace():
    args = {"b": 1, "a": {"d": [3, {"z": 1, "y": 2}], "c": "x y"}}
    assert canonical_json(args) == '{"a":{"c":"x y","d":[3,{"y":2,"z":1}]},"b":1}'


def test_key_order_never_matters():
    assert canonical_json({"a": 1, "b": {"c": 2, "d": 3}}) == canonical_json({"b": {"d": 3, "c": 2}, "a": 1})
    assert args_hash({"a": 1, "b": 2}) == args_hash({"b": 2, "a": 1})


def test_array_order_matters():
    assert canonical_json([1, 2]) != canonical_json([2, 1])


def test_missing_or_null_args_are_empty_object_but_nested_null_stays():
    assert canonical_json(None) == "{}" == canonical_json({})
    assert canonical_json({"a": None}) == '{"a":null}'
    assert call_signature("t", None) == call_signature("t", {})


def test_numbers_rule_int_and_float_are_different_like_serde_json():
    # The documented rule: numbers stay as the parser gave them; 1 and 1.0 are different.
    assert canonical_json({"n": 1}) == '{"n":1}'
    assert canonical_json({"n": 1.0}) == '{"n":1.0}'
    assert args_hash({"n": 1}) != args_hash({"n": 1.0})
    # ...and the rule is consistent with parsing JSON text: same text, same key.
    assert canonical_json(json.loads('{"n": 1.0}')) == canonical_json(json.loads('{"n":1.0}'))
    assert canonical_json(json.loads('{"n": 1e2}')) == '{"n":100.0}'
    assert canonical_json([1e20, 1e-7, -0.0]) == "[1e+20,1e-7,-0.0]"
    assert canonical_json([float("nan"), float("inf")]) == "[null,null]"
    assert canonical_json([True, False, None]) == "[true,false,null]"


def test_unicode_kept_and_keys_sorted_by_code_point():
    assert canonical_json({"é": 1, "z": 2, "Z": 3}) == '{"Z":3,"z":2,"é":1}'


def test_fallback_for_what_orjson_refuses_is_deterministic():
    assert canonical_json({1: "a", "b": 2}) == '{"1":"a","b":2}'
    assert canonical_json({"n": 2**70}) == '{"n":' + str(2**70) + '}'
    lone = canonical_json({"s": "\ud800x"})
    assert lone == canonical_json({"s": "\ud800x"}) and "\\ud800" in lone
    assert canonical_json((1, "a")) == '[1,"a"]'


def test_fallback_walk_prints_exactly_what_orjson_prints():
    value = {"b": [1, 2.5, None, True, {"y": "é\n", "x": -0.0}], "a": {"c": [], "d": {}}, "e": 1e300}
    import orjson

    assert _walk(value) == orjson.dumps(value, option=orjson.OPT_SORT_KEYS).decode()


@pytest.mark.parametrize("kind", ["dict", "list"])
def test_ten_thousand_deep_nesting_is_bounded_not_a_recursion_error(kind):
    deep = nested(10_000, kind=kind)
    text = canonical_json(deep)
    opener = '{"k":' if kind == "dict" else "["
    assert text.startswith(opener * 3)
    assert len(text) == 10_000 * (len(opener) + 1) + 1
    assert args_hash(deep) == args_hash(nested(10_000, kind=kind))
    assert args_hash(deep) != args_hash(nested(9_999, kind=kind))


def test_ten_megabyte_string_gives_a_plain_key():
    big = "x" * (10 * 1024 * 1024)
    text = canonical_json({"content": big})
    assert len(text) == len(big) + len('{"content":""}')
    assert args_hash({"content": big}) != args_hash({"content": big + "y"})


def test_call_signature_ignores_call_id_and_batch_signature_sorts_keeps_duplicates():
    a = Call("id1", "read", {"p": 1})
    a2 = Call("id2", "read", {"p": 1})
    b = Call("id3", "grep", {"q": "x"})
    assert batch_signature([a]) == batch_signature([a2])
    assert batch_signature([a, b]) == batch_signature([b, a2])
    assert batch_signature([a]) != batch_signature([a, a2])
    assert batch_signature([a, b]) == "|".join(sorted([call_signature("read", {"p": 1}),
                                                       call_signature("grep", {"q": "x"})]))
    assert call_signature("read", {"p": 1}).startswith("read:")
    assert batch_signature([("read", {"p": 1})]) == batch_signature([a])


def test_answers_hash_pairs_each_call_with_its_answer():
    a, b = Call("1", "read", {"p": 1}), Call("2", "read", {"p": 2})
    ra, rb = Answer("1", "A"), Answer("2", "B")
    assert answers_hash([a, b], [ra, rb]) == answers_hash([b, a], [rb, ra])
    assert answers_hash([a, b], [ra, rb]) != answers_hash([a, b], [rb, ra])
    assert answers_hash([a, b], [ra, None]) is None
    assert answers_hash([a], [Answer("1", "A", is_error=True)]) != answers_hash([a], [ra])
    assert answers_hash([a], ["A"]) == answers_hash([a], [Answer("1", "A")])
    with pytest.raises(ValueError, match="2 calls but 1 answers"):
        answers_hash([a, b], [ra])


def test_answer_key_uses_full_text_digest():
    assert answer_key(None) is None
    assert answer_key(Answer(None, "x" * 100_000)) != answer_key(Answer(None, "x" * 100_001))


def test_call_key_is_shared_by_identity_and_never_keeps_huge_arguments():
    from loopledger.detectors.canonical import _CALL_CACHE, call_key

    small = Call("1", "t", {"b": 1, "a": 2})
    assert call_key(small) == (b'{"a":2,"b":1}', args_hash({"a": 2, "b": 1}))
    assert _CALL_CACHE[id(small)][0] is small
    big = Call("2", "t", {"s": "x" * (1024 * 1024)})
    canon, h = call_key(big)
    assert h == args_hash(big.args) and id(big) not in _CALL_CACHE


# ── a shell command's decoration is not its action (progress keys on action_args) ─────────────


@pytest.mark.parametrize("decorated", [
    "docker compose down -v 2>&1 | tail -5",
    "cd C:/Users/me/repo && docker compose down -v 2>&1 | tail -10",
    'cd "/home/me/my repo" && docker compose down -v',
    'docker compose down -v; echo "exit: $?"',
    "docker compose down -v | head -n 20",
])
def test_a_command_line_without_its_decoration_is_the_same_action(decorated):
    assert command_core(decorated) == "docker compose down -v"
    assert action_args({"command": decorated, "description": "Tear down"}) == {"command": "docker compose down -v"}


@pytest.mark.parametrize("command", [
    "tail -5 /tmp/build.log; date",  # `date` is a second command, not decoration
    "make && make test",
    "cd repo",  # nothing left to run without the cd
    "grep -n foo x.py | tail -3 | sort",  # a cut in the middle is part of the pipeline
    "echo done",
])
def test_what_a_command_does_is_kept(command):
    assert command_core(command) == command
