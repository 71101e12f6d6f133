"""The peer ports as policies: `openhands`, `gemini-cli`, `roo` and `kilo` driven by the replay engine
over normalized transcript events, as ingest, Replay and Compare drive them."""

from __future__ import annotations

import copy
import json

import pytest
from loopledger import vocab
from loopledger.detectors.errors import ConfigError
from loopledger.detectors.policy import PolicySpec, make_policy
from loopledger.detectors.registry import names
from loopledger.events import Answer, Answers, Batch, Call, Prose, UserTurn
from loopledger.replay import Replayer, replay, tally

PEERS = ("openhands", "gemini-cli", "roo", "kilo")

_ids = iter(range(10**9))


def turn(name: str, args: dict, answer: str, *, error: bool = False, text: str = "") -> list:
    """One assistant message with one call, and its answer."""
    cid = f"c{next(_ids)}"
    return [Batch((Call(cid, name, args),), text), Answers((Answer(cid, answer, error),))]


def checks(steps) -> list[tuple[int, str]]:
    """(seq, verdict) of every check that is not allow."""
    return [(s.seq, c.verdict) for s in steps for c in s.checks if c.verdict != vocab.ALLOW]


def test_the_peers_are_registered_with_their_upstream_defaults():
    assert set(PEERS) <= set(names())
    assert PolicySpec("openhands").params == {"action_observation": 4, "action_error": 3,
                                              "monologue": 3, "alternating_pattern": 6}
    assert PolicySpec("gemini-cli").params == {"repeats": 5, "max_cycle": 5}
    assert PolicySpec("roo").params == {"limit": 3}
    assert PolicySpec("kilo").params == {"threshold": 3, "write_tools": ("edit", "multiedit", "write", "apply_patch")}


@pytest.mark.parametrize("spec,field", [
    ("openhands:action_observation=0", "action_observation"),
    ("openhands:monologue=x", "monologue"),
    ("openhands:alternating_pattern=none", "alternating_pattern"),
    ("gemini-cli:repeats=1", "repeats"),
    ("gemini-cli:max_cycle=0", "max_cycle"),
    ("roo:limit=-1", "limit"),
    ("roo:window=3", "window"),
    ("kilo:threshold=1", "threshold"),
    ("kilo:threshold=x", "threshold"),
    ("kilo:limit=3", "limit"),
])
def test_bad_specs_name_the_field(spec, field):
    with pytest.raises(ConfigError) as info:
        PolicySpec.parse(spec)
    assert info.value.field == field


@pytest.mark.parametrize("detector", PEERS)
def test_spec_text_round_trips_and_state_is_json(detector):
    spec = PolicySpec(detector)
    assert PolicySpec.parse(spec.text) == spec
    events = []
    for _ in range(6):
        events += turn("run", {"cmd": "make"}, "error: missing")
    r = Replayer(events, spec)
    r.jump_to(len(events))
    state = r.state()
    assert json.loads(json.dumps(state)) == state


# -- openhands ---------------------------------------------------------------------------------


def test_openhands_halts_the_step_after_four_identical_pairs():
    events = [UserTurn("please run ls")]
    for _ in range(6):
        events += turn("terminal", {"command": "ls"}, "file1.txt\nfile2.txt", text="I need to run ls")
    steps = list(replay(events, "openhands"))
    # seq 1,3,5,7 are the four pairs; the check before the 5th batch (seq 9) is stuck
    assert checks(steps) == [(9, vocab.HALT), (11, vocab.AFTER_HALT)]
    halt = next(c for s in steps for c in s.checks if c.verdict == vocab.HALT)
    assert halt.idx == -1 and halt.reason.startswith("repeating_action_observation")
    assert tally(steps).saved == 1


def test_openhands_three_repeats_then_different_is_never_stuck():
    events = [UserTurn("go")]
    for _ in range(3):
        events += turn("terminal", {"command": "ls"}, "same")
    events += turn("terminal", {"command": "pwd"}, "/home")
    events += turn("terminal", {"command": "ls"}, "same")
    assert checks(replay(events, "openhands")) == []


def test_openhands_nudges_then_halts_on_repeated_errors():
    events = [UserTurn("create /tmp/foo.py")]
    for i in range(5):
        events += turn("str_replace_editor", {"command": "create"}, f"file_text is required ({i})", error=True)
    # errors differ in text: only the action-error rule can fire; nudge before the 4th call,
    # stuck before the 5th
    assert checks(replay(events, "openhands")) == [(7, vocab.WARN), (9, vocab.HALT)]


def test_openhands_the_text_written_with_the_call_is_part_of_the_action():
    events = [UserTurn("go")]
    for i in range(5):
        events += turn("terminal", {"command": "ls"}, "same", text=f"attempt {i}")
    assert checks(replay(events, "openhands")) == []


def test_openhands_monologue_halts_the_third_consecutive_message_turn():
    events = [UserTurn("hello"), Prose("thinking 1"), Prose("thinking 2"), Prose("thinking 3"), Prose("thinking 4")]
    assert checks(replay(events, "openhands")) == [(4, vocab.HALT)]


def test_openhands_alternating_pattern_halts():
    events = [UserTurn("go")]
    for _ in range(4):
        events += turn("edit", {"f": "a.py"}, "edited")
        events += turn("run", {"c": "pytest"}, "1 failed")
    # six A-B actions and observations are complete after the 6th pair (seq 12): halt at seq 13
    assert checks(replay(events, "openhands")) == [(13, vocab.HALT), (15, vocab.AFTER_HALT)]


def test_openhands_a_user_message_starts_fresh():
    events = [UserTurn("go")]
    for _ in range(3):
        events += turn("terminal", {"command": "ls"}, "same")
    events.append(UserTurn("try again"))
    for _ in range(3):
        events += turn("terminal", {"command": "ls"}, "same")
    assert checks(replay(events, "openhands")) == []


def test_openhands_thresholds_are_swept_like_any_parameter():
    events = [UserTurn("go")]
    for _ in range(3):
        events += turn("terminal", {"command": "ls"}, "same")
    events += turn("terminal", {"command": "pwd"}, "x")
    assert checks(replay(events, "openhands:action_observation=3")) == [(7, vocab.HALT)]


# -- gemini-cli --------------------------------------------------------------------------------


def test_gemini_first_detection_warns_second_halts():
    events = [UserTurn("go")]
    for _ in range(7):
        events += turn("read_file", {"path": "a.txt"}, "contents")
    steps = list(replay(events, "gemini-cli"))
    assert checks(steps) == [(9, vocab.WARN), (11, vocab.HALT), (13, vocab.AFTER_HALT)]
    halt = next(c for s in steps for c in s.checks if c.verdict == vocab.HALT)
    assert (halt.count, halt.total, halt.threshold) == (6, 1, 5)


def test_gemini_a_cycle_of_two_repeated_five_times():
    events = [UserTurn("go")]
    for i in range(12):
        events += turn("read_file", {"path": "ab"[i % 2]}, "x")
    got = checks(replay(events, "gemini-cli"))
    assert got[0] == (19, vocab.WARN)  # the 10th call completes A-B ×5
    assert got[1] == (21, vocab.HALT)


def test_gemini_a_user_prompt_resets_history_and_strikes():
    events = [UserTurn("go")]
    for _ in range(5):
        events += turn("read_file", {"path": "a"}, "x")
    events.append(UserTurn("again"))
    for _ in range(5):
        events += turn("read_file", {"path": "a"}, "x")
    assert checks(replay(events, "gemini-cli")) == [(9, vocab.WARN), (20, vocab.WARN)]


def test_gemini_calls_in_one_message_are_checked_one_by_one():
    calls = tuple(Call(f"p{i}", "grep", {"q": "x"}) for i in range(6))
    steps = list(replay([Batch(calls)], "gemini-cli"))
    assert [c.verdict for c in steps[0].checks] == ["allow"] * 4 + ["warn", "halt"]


# -- roo ---------------------------------------------------------------------------------------


def test_roo_blocks_the_fourth_identical_call_and_goes_on():
    events = [UserTurn("go")]
    for _ in range(8):
        events += turn("execute_command", {"command": "npm test"}, "1 failing")
    steps = list(replay(events, "roo"))
    assert checks(steps) == [(7, vocab.BLOCK), (15, vocab.BLOCK)]
    t = tally(steps)
    assert (t.blocks, t.halts, t.saved) == (2, 0, 0)


def test_roo_does_not_reset_on_a_user_message():
    events = []
    for _ in range(2):
        events += turn("execute_command", {"command": "ls"}, "x")
    events.append(UserTurn("keep going"))
    for _ in range(2):
        events += turn("execute_command", {"command": "ls"}, "x")
    assert checks(replay(events, "roo")) == [(7, vocab.BLOCK)]


def test_roo_limit_zero_never_blocks():
    events = []
    for _ in range(10):
        events += turn("execute_command", {"command": "ls"}, "x")
    assert checks(replay(events, "roo:limit=0")) == []


# -- kilo --------------------------------------------------------------------------------------


def test_kilo_halts_the_third_identical_failing_call():
    events = [UserTurn("fix the test")]
    for _ in range(5):
        events += turn("bash", {"command": "pytest"}, "1 failed", error=True)
    steps = list(replay(events, "kilo"))
    assert checks(steps) == [(5, vocab.HALT), (7, vocab.AFTER_HALT), (9, vocab.AFTER_HALT)]
    halt = next(c for s in steps for c in s.checks if c.verdict == vocab.HALT)
    assert (halt.count, halt.threshold) == (3, 3)
    assert halt.reason.startswith('Loop detected: "bash" has been called 3 times with identical input')
    assert tally(steps).saved == 2  # the two calls after the halted one


def test_kilo_edit_then_test_cycles_are_not_loops():
    events = [UserTurn("make it pass")]
    for i in range(6):
        events += turn("edit", {"file": "a.py", "new": f"v{i}"}, "edited")
        events += turn("bash", {"command": "pytest"}, f"{5 - i} failed")
    assert checks(replay(events, "kilo")) == []


def test_kilo_write_tools_of_another_agent_reset_only_when_named():
    events = [UserTurn("go")]
    for i in range(3):
        events += turn("Edit", {"file_path": "a.py", "new_string": f"v{i}"}, "ok")
        events += turn("Bash", {"command": "pytest"}, "failed")
    assert checks(replay(events, "kilo")) == [(11, vocab.HALT)]  # "Edit" is not upstream's "edit"
    assert checks(replay(events, "kilo:write_tools=Edit|Write")) == []


def test_kilo_a_user_message_resets_nothing_and_a_calls_text_is_a_part():
    events = turn("read", {"path": "a"}, "x")
    events.append(UserTurn("try again"))
    events += turn("read", {"path": "a"}, "x", text="Reading it again.")
    events.append(Prose("Still the same."))
    events += turn("read", {"path": "a"}, "x")
    steps = list(replay(events, "kilo"))
    assert checks(steps) == [(6, vocab.HALT)]
    # parts: 3 per step with a call (step-start, tool, step-finish), +1 for its text, 1 per user
    # message, 3 per prose step; the halted step ends at its call (the stream breaks before its
    # step-finish): 3 + 1 + 4 + 3 + 2
    r = Replayer(events, PolicySpec("kilo"))
    r.jump_to(7)
    assert r.state()["parts_remembered"] == 13 and r.state()["identical_before"] == 2


def test_kilo_calls_of_one_batch_are_still_running_when_the_next_is_checked():
    call = {"command": "ls"}
    batch = Batch(tuple(Call(f"p{i}", "bash", call) for i in range(4)))
    assert checks(replay([UserTurn("go"), batch], "kilo")) == []


def test_kilo_an_unanswered_call_never_counts():
    events = [UserTurn("go")]
    for i in range(4):
        events.append(Batch((Call(f"u{i}", "bash", {"command": "make"}),)))
    assert checks(replay(events, "kilo")) == []


def test_kilo_a_snapshot_finds_its_own_parts_again():
    events = [UserTurn("go"), *turn("bash", {"command": "make"}, "error")]
    policy = make_policy("kilo")
    policy.check(events[1])
    twin = copy.deepcopy(policy)
    policy.answers(events[1], [events[2].answers[0]])
    assert policy.detector.parts[1][3] and not twin.detector.parts[1][3]
    twin.answers(events[1], [events[2].answers[0]])  # the copy finds its own part again
    assert twin.detector.parts[1][3]


# -- snapshots ---------------------------------------------------------------------------------


@pytest.mark.parametrize("detector", PEERS)
def test_stepping_back_gives_the_state_of_a_replay_from_scratch(detector):
    events = [UserTurn("go")]
    for i in range(9):
        events += turn("t", {"i": i % 2}, "same", error=i % 3 == 0)
        if i == 4:
            events.append(Prose("hmm"))
    r = Replayer(events, detector, snapshot_every=3)
    r.jump_to(len(events))
    for pos in (len(events) - 1, 7, 2, 11):
        r.jump_to(pos)
        fresh = Replayer(events, detector)
        fresh.jump_to(pos)
        assert r.state() == fresh.state()
    policy = make_policy(detector)
    assert copy.deepcopy(policy).state() == policy.state()
