"""The `kilo` port: Kilo Code's LoopDetector.checkToolCall (packages/opencode/src/session/
loop-detection.ts at 9b65079630d7). Upstream has no test of it; each test here is one clause of
that source, driven on the port's LoopDetector (parts in, `run` out); tests/test_peer_policies.py
drives the policy over transcript events."""

from __future__ import annotations

import pytest
from loopledger.detectors import kilo
from loopledger.detectors.errors import ConfigError


def done(d: kilo.LoopDetector, tool: str, key: str = "{}") -> None:
    """A finished call (completed or error), as the scan sees it."""
    d.finish(d.start_call(tool, key))


def scan(d: kilo.LoopDetector, tool: str, key: str = "{}") -> int:
    """What checkToolCall computes for a new call (its own part stored first, running)."""
    d.start_call(tool, key)
    return d.check_tool_call(tool, key)


def repeated(d: kilo.LoopDetector, tool: str, key: str, n: int) -> list[int]:
    """`run` for each of n identical calls, each finished before the next."""
    runs = []
    for _ in range(n):
        runs.append(scan(d, tool, key))
        d.finish(d.stored - 1)
    return runs


def test_the_third_identical_call_is_flagged():
    # run counts the earlier finished identical parts; run >= TOOL_THRESHOLD - 1 asks the user
    d = kilo.LoopDetector()
    runs = repeated(d, "bash", '{"command":"pytest"}', 3)
    assert runs == [0, 1, 2]
    assert [d.flagged(r) for r in runs] == [False, False, True]


def test_a_running_call_does_not_count():
    # only parts whose state is completed or error are compared
    d = kilo.LoopDetector()
    d.start_call("bash", "{}")
    d.start_call("bash", "{}")
    assert scan(d, "bash") == 0


def test_other_tools_and_text_in_between_do_not_reset():
    d = kilo.LoopDetector()
    done(d, "read", '{"path":"a"}')
    done(d, "grep", '{"q":"x"}')
    d.other(3)
    done(d, "read", '{"path":"a"}')
    done(d, "glob", '{"p":"*"}')
    assert scan(d, "read", '{"path":"a"}') == 2


def test_a_write_between_identical_calls_resets_the_run():
    # "If one of these appears between two identical tool calls, the run is reset"
    for write in kilo.WRITE_TOOLS:
        d = kilo.LoopDetector()
        done(d, "bash", "{}")
        done(d, write, '{"file":"x"}')
        done(d, "bash", "{}")
        assert scan(d, "bash") == 1, write


def test_a_write_before_any_match_resets_nothing():
    # the reset needs lastMatchIdx !== -1
    d = kilo.LoopDetector()
    done(d, "edit", '{"file":"x"}')
    done(d, "bash", "{}")
    done(d, "bash", "{}")
    assert scan(d, "bash") == 2


def test_the_same_tool_with_new_input_resets_the_run():
    d = kilo.LoopDetector()
    done(d, "bash", '{"command":"pytest"}')
    done(d, "bash", '{"command":"pytest -x"}')
    done(d, "bash", '{"command":"pytest"}')
    assert scan(d, "bash", '{"command":"pytest"}') == 1


def test_the_same_tool_with_new_input_still_running_resets_nothing():
    # partInputStr is null for a part that has not finished
    d = kilo.LoopDetector()
    done(d, "bash", '{"command":"pytest"}')
    d.start_call("bash", '{"command":"pytest -x"}')
    done(d, "bash", '{"command":"pytest"}')
    assert scan(d, "bash", '{"command":"pytest"}') == 2


def test_a_write_tool_is_never_flagged():
    # its own part, a write tool, resets the run before the check ends
    d = kilo.LoopDetector()
    assert not any(d.flagged(r) for r in repeated(d, "edit", '{"file":"x"}', 6))


def test_the_scan_reads_the_last_thirty_parts():
    # TOOL_SCAN_LIMIT = TOOL_THRESHOLD * 10 parts, oldest first
    d = kilo.LoopDetector()
    done(d, "bash")
    done(d, "bash")
    d.other(27)  # the two calls, 27 other parts, and the new call's own part: 30
    assert scan(d, "bash") == 2
    d = kilo.LoopDetector()
    done(d, "bash")
    done(d, "bash")
    d.other(28)  # one more pushes the first call out
    assert scan(d, "bash") == 1


def test_threshold_scales_the_scan_as_upstream_defines_it():
    d = kilo.LoopDetector(threshold=4)
    assert d.parts.maxlen == 40
    for _ in range(2):
        done(d, "bash")
    assert not d.flagged(scan(d, "bash"))
    d.finish(d.stored - 1)
    assert d.flagged(scan(d, "bash"))


@pytest.mark.parametrize("bad", [1, 0, -3, "3", None, True])
def test_bad_thresholds_name_the_field(bad):
    with pytest.raises(ConfigError) as info:
        kilo.validate({"threshold": bad})
    assert info.value.field == "threshold"
