"""Policy specs (parse, defaults, id, label, errors) and the Policy interface."""

from __future__ import annotations

import json

import pytest
from loopledger.detectors import (
    BUILTIN_SPECS,
    DEFAULT_SPECS,
    DETECTORS,
    PARAMS,
    ConfigError,
    PolicySpec,
    make_policy,
)
from loopledger.events import Answer, Batch, Call


def test_builtin_specs_one_per_detector_with_complete_params():
    assert [s.detector for s in BUILTIN_SPECS] == list(DETECTORS)
    assert set(DETECTORS) == {"run-length", "stagnation", "ladder", "window", "cycle", "progress",
                              "openhands", "gemini-cli", "roo", "kilo"}
    for spec in BUILTIN_SPECS:
        assert set(spec.params) == {p.name for p in PARAMS[spec.detector]}
        assert spec == PolicySpec(spec.detector)  # each at its own defaults
    assert len({s.id for s in BUILTIN_SPECS}) == len(BUILTIN_SPECS)


def test_default_set_is_the_measured_choice_each_at_its_defaults():
    # docs/detection.md: progress and cycle (they read answers) plus stagnation; ladder and window
    # (which judge keys only) and run-length (it halts a poll whose output grows once it stalls)
    # are left out of the default set but stay available at the seeds' defaults.
    assert [s.detector for s in DEFAULT_SPECS] == ["progress", "stagnation", "cycle"]
    assert PolicySpec("run-length").params["max_strikes"] == 2
    assert all(s == PolicySpec(s.detector) for s in DEFAULT_SPECS)
    assert PolicySpec("window").params == {"window": 8, "threshold": 3}
    assert PolicySpec("ladder").params["halt_at"] == 4


def test_params_are_completed_and_stored_as_canonical_json():
    spec = PolicySpec("window", {"threshold": 4})
    assert spec.params == {"window": 8, "threshold": 4}
    assert spec.params_json == '{"threshold":4,"window":8}'
    assert len(spec.id) == 32


def test_equal_specs_have_equal_ids_however_written():
    a = PolicySpec.parse("window:threshold=3,window=8")
    b = PolicySpec.parse("window")
    c = PolicySpec("window", {"window": 8, "threshold": 3})
    assert a.id == b.id == c.id and a == b == c and len({a, b, c}) == 1
    assert PolicySpec.parse("window:threshold=4").id != b.id
    assert PolicySpec("cycle").id != PolicySpec("window").id


def test_parse_syntax_none_and_lists():
    spec = PolicySpec.parse("run-length:max_strikes=3,max_observation_steps=none,observation_tools=read|grep")
    assert spec.params == {"max_strikes": 3, "max_observation_steps": None,
                           "observation_tools": ("read", "grep"), "match": "substring"}
    assert spec.label == "run-length max_strikes=3 max_observation_steps=none observation_tools=read|grep"
    empty = PolicySpec.parse("run-length:observation_tools=")
    assert empty.params["observation_tools"] == ()
    extra = PolicySpec.parse("window", ["threshold=5", "window=9"])
    assert extra.params == {"window": 9, "threshold": 5}


@pytest.mark.parametrize("spec", [*BUILTIN_SPECS, PolicySpec.parse("run-length:max_observation_steps=none"),
                                  PolicySpec.parse("ladder:read_only_tools=Read|Grep,read_only_halt_at=9")])
def test_text_round_trips(spec):
    assert PolicySpec.parse(spec.text) == spec


def test_label_is_readable():
    assert PolicySpec("window").label == "window window=8 threshold=3"
    assert PolicySpec("run-length").label == "run-length max_strikes=2 max_observation_steps=15"


@pytest.mark.parametrize("text, field", [
    ("windows", "detector"),
    ("window:size=3", "size"),
    ("window:threshold=three", "threshold"),
    ("window:threshold=9", "threshold"),
    ("window:window=1,threshold=1", "window"),
    ("window:threshold", "threshold"),
    ("ladder:block_at=2", "block_at"),
    ("ladder:read_only_halt_at=3", "read_only_halt_at"),
    ("ladder:warn_at=1", "warn_at"),
    ("cycle:warn_repeats=5", "halt_repeats"),
    ("run-length:max_strikes=none", "max_strikes"),
    ("run-length:max_strikes=-1", "max_strikes"),
    ("stagnation:max_steps=x", "max_steps"),
])
def test_errors_name_the_field(text, field):
    with pytest.raises(ConfigError) as info:
        PolicySpec.parse(text)
    assert info.value.field == field
    assert field in str(info.value)


def test_python_values_are_validated_too():
    with pytest.raises(ConfigError):
        PolicySpec("window", {"window": True})
    with pytest.raises(ConfigError):
        PolicySpec("run-length", {"observation_tools": 5})
    assert PolicySpec("run-length", {"observation_tools": "a|b"}).params["observation_tools"] == ("a", "b")
    assert PolicySpec("run-length", {"observation_tools": ["read"]}).params["observation_tools"] == ("read",)


def test_make_policy_gives_fresh_state_and_flags():
    a, b = make_policy("window"), make_policy(PolicySpec("window"))
    call = Batch((Call("1", "t", {}),))
    a.check(call)
    assert len(a.state()["buffer"]) == 1 and b.state()["buffer"] == []
    assert {d: make_policy(d).per_call for d in DETECTORS} == {
        "run-length": False, "stagnation": False, "ladder": True, "window": True, "cycle": True,
        "progress": True, "openhands": False, "gemini-cli": True, "roo": True, "kilo": True}


@pytest.mark.parametrize("spec", BUILTIN_SPECS, ids=lambda s: s.detector)
def test_state_is_json_serializable_through_a_loop(spec):
    p = make_policy(spec)
    batch = Batch((Call("1", "edit", {"a": [1, {"b": None}]}), Call("2", "read", None)))
    for _ in range(6):
        p.check(batch)
        p.answers(batch, [Answer("1", "ok"), None])
        p.prose("same words")
        json.dumps(p.state())
    p.user_turn()
    json.dumps(p.state())


def test_run_length_policy_results_speak_the_shared_words():
    p = make_policy("run-length:max_strikes=5")
    b = Batch((Call("1", "edit", {"x": 1}),))
    outcomes = []
    for text in ["a", "a", "b", None]:
        p.check(b)
        outcomes += [r.outcome for r in p.answers(b, [Answer("1", text) if text else None])]
    assert outcomes == ["not_comparable", "repeated", "changed", "not_comparable"]
    other = Batch((Call("2", "read", {}),))
    p.check(other)
    assert [r.outcome for r in p.answers(b, [Answer("1", "a")])] == ["not_current"]


def test_readme_guard_examples_run():
    import re
    from pathlib import Path

    readme = (Path(__file__).resolve().parent.parent / "docs" / "guards.md").read_text()
    start = readme.find("# The guards in your own agent loop")
    assert start >= 0
    end = readme.find("\n## ", start + 1)
    section = readme[start:end if end > 0 else None]
    blocks = re.findall(r"```python\n(.*?)```", section, re.S)
    assert len(blocks) == 5
    for block in blocks:
        scope: dict = {}
        exec(compile(block, "docs/guards.md", "exec"), scope)  # noqa: S102 — our own documentation
        if "ProgressDetector" in scope:  # the progress example halts the 3rd retry, as it says
            assert (scope["v"].action, scope["v"].rule, scope["v"].count, scope["attempt"]) == ("halt", "retry", 3, 2)
    from loopledger.detectors import CycleDetector

    cycle = CycleDetector()
    for name in "ABABAB":
        v = cycle.check(name, {})
        cycle.record_answer("no change")
    assert (v.action, v.period, v.repeats, v.pattern) == ("warn", 2, 3, ("A", "B"))
