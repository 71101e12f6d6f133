"""The `kilo` port: Kilo Code's LoopDetector.checkToolCall (packages/opencode/src/session/
loop-detection.ts at 9b65079630d7). Upstream has no test of it; each test here is one clause of
that source, driven on the port's LoopDetector (parts in, `run` out) and, through the policy, on
transcript events."""

from __future__ import annotations

import copy
import json

import pytest
from loopledger import vocab
from loopledger.detectors import kilo
from loopledger.detectors.errors import ConfigError
from loopledger.detectors.policy import PolicySpec
from loopledger.events import Answer, Answers, Batch, Call, Prose, UserTurn
from loopledger.replay import Replayer, replay, tally


def done(d: kilo.LoopDetector, tool: str, key: str = "{}") -> None:
    """A finished call (completed or error), as the scan sees it."""
    d.finish(d.start_call(tool, key))


def scan(d: kilo.LoopDetector, tool: str, key: str = "{}") -> int:
    """What checkToolCall computes for a new call (its own part stored first, running)."""
    d.start_call(tool, key)
    return d.check_tool_call(tool, key)


def test_the_third_identical_call_is_flagged():
    # run counts the earlier finished identical parts; run >= TOOL_THRESHOLD - 1 asks the user
    d = kilo.LoopDetector()
    runs = []
    for _ in range(3):
        d.start_call("bash", '{"command":"pytest"}')
        runs.append(d.check_tool_call("bash", '{"command":"pytest"}'))
        d.finish(d.stored - 1)
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
    runs = []
    for _ in range(6):
        d.start_call("edit", '{"file":"x"}')
        runs.append(d.check_tool_call("edit", '{"file":"x"}'))
        d.finish(d.stored - 1)
    assert not any(d.flagged(r) for r in runs)


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


# -- through the replay engine ------------------------------------------------------------------

_ids = iter(range(10**9))


def turn(name: str, args: dict, answer: str, *, error: bool = False, text: str = "") -> list:
    cid = f"k{next(_ids)}"
    return [Batch((Call(cid, name, args),), text), Answers((Answer(cid, answer, error),))]


def verdicts(steps) -> list[tuple[int, str]]:
    return [(s.seq, c.verdict) for s in steps for c in s.checks if c.verdict != vocab.ALLOW]


def test_an_identical_failing_call_halts_on_the_third():
    events = [UserTurn("fix the test")]
    for _ in range(5):
        events += turn("bash", {"command": "pytest"}, "1 failed", error=True)
    steps = list(replay(events, "kilo"))
    assert verdicts(steps) == [(5, vocab.HALT), (7, vocab.AFTER_HALT), (9, vocab.AFTER_HALT)]
    halt = next(c for s in steps for c in s.checks if c.verdict == vocab.HALT)
    assert (halt.count, halt.threshold) == (3, 3)
    assert halt.reason.startswith('Loop detected: "bash" has been called 3 times with identical input')
    assert tally(steps).saved == 2  # the two calls after the halted one


def test_edit_then_test_cycles_are_not_loops():
    events = [UserTurn("make it pass")]
    for i in range(6):
        events += turn("edit", {"file": "a.py", "new": f"v{i}"}, "edited")
        events += turn("bash", {"command": "pytest"}, f"{5 - i} failed")
    assert verdicts(replay(events, "kilo")) == []


def test_agent_write_tools_of_another_name_reset_only_when_named():
    events = [UserTurn("go")]
    for i in range(3):
        events += turn("Edit", {"file_path": "a.py", "new_string": f"v{i}"}, "ok")
        events += turn("Bash", {"command": "pytest"}, "failed")
    assert verdicts(replay(events, "kilo")) == [(11, vocab.HALT)]  # "Edit" is not upstream's "edit"
    assert verdicts(replay(events, "kilo:write_tools=Edit|Write")) == []


def test_a_user_message_resets_nothing_and_a_calls_text_is_a_part():
    events = turn("read", {"path": "a"}, "x")
    events.append(UserTurn("try again"))
    events += turn("read", {"path": "a"}, "x", text="Reading it again.")
    events.append(Prose("Still the same."))
    events += turn("read", {"path": "a"}, "x")
    steps = list(replay(events, "kilo"))
    assert verdicts(steps) == [(6, vocab.HALT)]
    # parts: 3 per step with a call (step-start, tool, step-finish), +1 for its text, 1 per user
    # message, 3 per prose step; the halted step ends at its call (the stream breaks before its
    # step-finish): 3 + 1 + 4 + 3 + 2
    r = Replayer(events, PolicySpec("kilo"))
    r.jump_to(7)
    assert r.state()["parts_remembered"] == 13 and r.state()["identical_before"] == 2


def test_calls_of_one_batch_are_still_running_when_the_next_is_checked():
    call = {"command": "ls"}
    batch = Batch(tuple(Call(f"p{i}", "bash", call) for i in range(4)))
    assert verdicts(replay([UserTurn("go"), batch], "kilo")) == []


def test_an_unanswered_call_never_counts():
    events = [UserTurn("go")]
    for i in range(4):
        events.append(Batch((Call(f"u{i}", "bash", {"command": "make"}),)))
    assert verdicts(replay(events, "kilo")) == []


def test_state_is_json_and_a_snapshot_is_independent():
    events = [UserTurn("go")]
    for _ in range(2):
        events += turn("bash", {"command": "make"}, "error")
    r = Replayer(events, PolicySpec("kilo"))
    r.jump_to(len(events))
    state = r.state()
    assert json.loads(json.dumps(state)) == state
    policy = kilo.KiloPolicy(PolicySpec("kilo"))
    policy.check(events[1])
    twin = copy.deepcopy(policy)
    policy.answers(events[1], [events[2].answers[0]])
    assert policy.detector.parts[1][3] and not twin.detector.parts[1][3]
    twin.answers(events[1], [events[2].answers[0]])  # the copy finds its own part again
    assert twin.detector.parts[1][3]
