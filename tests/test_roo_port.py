"""The `roo` port: Roo Code's ToolRepetitionDetector.spec.ts scenarios, run against the port's
ToolRepetitionDetector (`check` → (allowed, repeats))."""

from __future__ import annotations

import json

import pytest
from loopledger.detectors import roo
from loopledger.detectors.canonical import args_hash
from loopledger.detectors.errors import ConfigError


def check(d: roo.ToolRepetitionDetector, name: str, params: dict | None = None) -> bool:
    params = params or {}
    return d.check(name, params, name + ":" + args_hash(params))[0]


def test_default_limit_3_refuses_the_4th_identical_call():
    d = roo.ToolRepetitionDetector()
    assert [check(d, "test-tool") for _ in range(4)] == [True, True, True, False]


def test_custom_limit_2_refuses_the_3rd():
    d = roo.ToolRepetitionDetector(2)
    assert [check(d, "test-tool") for _ in range(3)] == [True, True, False]


def test_different_calls_are_allowed_and_reset_the_counter():
    d = roo.ToolRepetitionDetector(2)
    assert check(d, "first-tool") and check(d, "second-tool") and check(d, "third-tool")
    d = roo.ToolRepetitionDetector(2)
    check(d, "same-tool")
    check(d, "different-tool")
    assert check(d, "same-tool")


def test_state_is_reset_after_a_refusal():
    d = roo.ToolRepetitionDetector(2)
    assert [check(d, "repeat-tool") for _ in range(3)] == [True, True, False]
    assert check(d, "new-tool")
    d = roo.ToolRepetitionDetector(2)
    assert [check(d, "problem-tool") for _ in range(3)] == [True, True, False]
    assert check(d, "problem-tool")  # the same call runs again right after the refusal


def test_the_limit_must_be_reached_again_after_a_reset():
    d = roo.ToolRepetitionDetector(2)
    assert [check(d, "repeat-tool") for _ in range(6)] == [True, True, False, True, True, False]


def test_empty_tool_call():
    d = roo.ToolRepetitionDetector(2)
    assert [check(d, "empty-tool") for _ in range(3)] == [True, True, False]


def test_parameter_order_is_irrelevant():
    d = roo.ToolRepetitionDetector(2)
    check(d, "same-tool", {"a": "1", "b": "2", "c": "3"})
    check(d, "same-tool", {"c": "3", "a": "1", "b": "2"})
    assert not check(d, "same-tool", {"b": "2", "c": "3", "a": "1"})


@pytest.mark.parametrize("limit,allowed_first", [(1, 1), (2, 2), (3, 3), (5, 5)])
def test_nth_call_refusal(limit, allowed_first):
    d = roo.ToolRepetitionDetector(limit)
    results = [check(d, "tool-name") for _ in range(allowed_first + 1)]
    assert results == [True] * allowed_first + [False]


def test_limit_0_never_refuses():
    d = roo.ToolRepetitionDetector(0)
    assert all(check(d, "tool-name") for _ in range(10))


def test_negative_limit_is_a_config_error():
    # upstream treats it as 0; a sweep asking for it is a mistake here (see the module docstring)
    with pytest.raises(ConfigError) as info:
        roo.ToolRepetitionDetector(-1)
    assert info.value.field == "limit"


@pytest.mark.parametrize("bad", ["3", None, 2.5, True])
def test_non_integer_limit_names_the_field(bad):
    with pytest.raises(ConfigError) as info:
        roo.validate({"limit": bad})
    assert info.value.field == "limit"


@pytest.mark.parametrize("action", ["scroll_down", "scroll_up"])
def test_browser_scrolls_are_never_counted(action):
    d = roo.ToolRepetitionDetector(2)
    assert all(check(d, "browser_action", {"action": action}) for _ in range(10))


def test_alternating_scrolls_are_allowed():
    d = roo.ToolRepetitionDetector(2)
    for _ in range(5):
        assert check(d, "browser_action", {"action": "scroll_down"})
        assert check(d, "browser_action", {"action": "scroll_up"})


def test_other_browser_actions_are_counted():
    d = roo.ToolRepetitionDetector(2)
    click = {"action": "click", "coordinate": "[100, 200]"}
    assert [check(d, "browser_action", click) for _ in range(3)] == [True, True, False]
    d = roo.ToolRepetitionDetector(2)
    assert [check(d, "browser_action", {}) for _ in range(3)] == [True, True, False]


def test_scrolls_in_between_do_not_reset_the_counter():
    d = roo.ToolRepetitionDetector(2)
    ls = {"command": "ls"}
    scroll = {"action": "scroll_down"}
    assert check(d, "execute_command", ls)
    assert check(d, "browser_action", scroll) and check(d, "browser_action", scroll)
    assert check(d, "execute_command", ls)
    assert check(d, "browser_action", scroll)
    assert not check(d, "execute_command", ls)


def test_different_arguments_are_different_calls():
    # upstream's nativeArgs cases: different files / cwd differ, list order matters
    d = roo.ToolRepetitionDetector(2)
    assert check(d, "read_file", {"files": [{"path": "file1.ts"}]})
    assert check(d, "read_file", {"files": [{"path": "file2.ts"}]})
    assert check(d, "read_file", {"files": [{"path": "file1.ts"}]})
    d = roo.ToolRepetitionDetector(1)
    assert check(d, "read_file", {"files": [{"path": "a.ts"}, {"path": "b.ts"}]})
    assert check(d, "read_file", {"files": [{"path": "b.ts"}, {"path": "a.ts"}]})
    d = roo.ToolRepetitionDetector(1)
    assert check(d, "execute_command", {"command": "ls", "cwd": "/home/user"})
    assert check(d, "execute_command", {"command": "ls", "cwd": "/home/admin"})


def test_state_is_json():
    d = roo.ToolRepetitionDetector()
    check(d, "t", {"x": 1})
    check(d, "t", {"x": 1})
    s = d.state()
    assert json.loads(json.dumps(s)) == s
    assert s == {"repeats": 1, "limit": 3, "previous_call": "t"}
