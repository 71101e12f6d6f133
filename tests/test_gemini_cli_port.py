"""The `gemini-cli` port: the tool-call scenarios of gemini-cli-core 0.61.0's
loopDetectionService.test.ts ("Tool Call Loop Detection", "Strike Management"), run against the
port's ToolCallLoopCheck; the policy's warn-then-halt and user-prompt reset are tested through
the replay engine in test_peer_policies.py."""

from __future__ import annotations

import json

import pytest
from loopledger.detectors import gemini_cli as gc
from loopledger.detectors.canonical import args_hash
from loopledger.detectors.errors import ConfigError

THRESHOLD = gc.DEFAULT_REPEATS  # TOOL_CALL_LOOP_THRESHOLD


def key(name: str, args: dict) -> str:
    return name + ":" + args_hash(args)


def add(check: gc.ToolCallLoopCheck, name: str, args: dict) -> bool:
    return check.add(key(name, args))[2]


def test_fewer_than_threshold_identical_calls_are_no_loop():
    c = gc.ToolCallLoopCheck()
    assert [add(c, "testTool", {"param": "value"}) for _ in range(THRESHOLD - 1)] == [False] * 4
    assert c.detections == 0


def test_the_threshold_th_identical_call_is_a_loop():
    c = gc.ToolCallLoopCheck()
    for _ in range(THRESHOLD - 1):
        add(c, "testTool", {"param": "value"})
    r, k, found = c.add(key("testTool", {"param": "value"}))
    assert (r, k, found, c.detections) == (5, 1, True, 1)


def test_different_tool_calls_are_no_loop():
    c = gc.ToolCallLoopCheck()
    for _ in range(THRESHOLD - 2):
        assert not add(c, "testTool", {"param": "value1"})
        assert not add(c, "testTool", {"param": "value2"})
        assert not add(c, "anotherTool", {"param": "value1"})


@pytest.mark.parametrize("period,calls", [(2, 15), (3, 20), (5, 30)])
def test_cycles_of_length_2_3_and_5_are_loops(period, calls):
    c = gc.ToolCallLoopCheck()
    first = None
    for i in range(calls):
        if add(c, "read_file", {"file_path": f"loop_{i % period}.txt"}) and first is None:
            first = i
    # found on the call that completes `period` × 5 calls, not before
    assert first == period * THRESHOLD - 1


def test_a_cycle_of_6_is_beyond_max_cycle_5():
    c = gc.ToolCallLoopCheck()
    assert not any(add(c, "t", {"id": i % 6}) for i in range(60))
    wide = gc.ToolCallLoopCheck(max_cycle=6)
    assert any(add(wide, "t", {"id": i % 6}) for i in range(60))


def test_alternating_sequences_that_vary_are_no_loop():
    c = gc.ToolCallLoopCheck()
    for i in range(4):
        assert not add(c, "read_file", {"file_path": "loop_a.txt" if i % 2 == 0 else "loop_b.txt"})
    assert not add(c, "read_file", {"file_path": "loop_c.txt"})
    for i in range(4):
        assert not add(c, "read_file", {"file_path": "loop_a.txt" if i % 2 == 0 else "loop_b.txt"})


def test_strikes_the_history_survives_a_detection():
    """Strike Management: after the first detection (and clearDetection), the next identical
    call is the second detection."""
    c = gc.ToolCallLoopCheck()
    for _ in range(THRESHOLD):
        add(c, "testTool", {"param": "value"})
    assert c.detections == 1
    assert add(c, "testTool", {"param": "value"})
    assert c.detections == 2


def test_reset_forgets_history_and_strikes():
    c = gc.ToolCallLoopCheck()
    for _ in range(THRESHOLD):
        add(c, "testTool", {"param": "value"})
    c.reset()
    assert c.detections == 0
    assert not any(add(c, "testTool", {"param": "value"}) for _ in range(THRESHOLD - 1))


def test_history_is_capped_at_max_cycle_times_repeats():
    c = gc.ToolCallLoopCheck()
    for i in range(100):
        add(c, "t", {"i": i})
    assert len(c.history) == 25


def test_repetitions_counts_back_to_back_copies_of_the_last_k():
    assert gc.repetitions(list("xabab"), 2) == 2
    assert gc.repetitions(list("aaaa"), 1) == 4
    assert gc.repetitions(list("aaaa"), 2) == 2
    assert gc.repetitions(list("abcabcab"), 3) == 2
    assert gc.repetitions(list("a"), 2) == 0


def test_parameters_change_the_rule():
    c = gc.ToolCallLoopCheck(repeats=3)
    assert [add(c, "t", {}) for _ in range(3)] == [False, False, True]


@pytest.mark.parametrize("field,params", [
    ("repeats", {"repeats": 1, "max_cycle": 5}),
    ("repeats", {"repeats": "5", "max_cycle": 5}),
    ("max_cycle", {"repeats": 5, "max_cycle": 0}),
    ("max_cycle", {"repeats": 5, "max_cycle": None}),
])
def test_bad_parameters_name_the_field(field, params):
    with pytest.raises(ConfigError) as info:
        gc.validate(params)
    assert info.value.field == field


def test_state_is_json():
    c = gc.ToolCallLoopCheck()
    for _ in range(3):
        add(c, "t", {})
    s = c.state()
    assert json.loads(json.dumps(s)) == s
    assert s["repetitions_by_cycle"]["1"] == 3 and s["detections"] == 0


def test_max_cycle_1_is_the_older_consecutive_only_rule():
    c = gc.ToolCallLoopCheck(max_cycle=1)
    assert not any(add(c, "read_file", {"p": "ab"[i % 2]}) for i in range(20))
    assert [add(c, "t", {}) for _ in range(5)] == [False] * 4 + [True]
