"""Real loop shapes and legitimate repeats beyond the corpus (tests/fixtures/detection/README.md):
`progress` and the default policy set halt inside the loops and leave the repeats alone."""

from __future__ import annotations

from pathlib import Path

import pytest
from loopledger.analysis.replay_table import sessions_of
from loopledger.detectors import PolicySpec
from loopledger.detectors.policy import DEFAULT_SPECS
from loopledger.events import Answer, Answers, Batch, Call, UserTurn
from loopledger.formats import read
from loopledger.replay import replay_many

FIX = Path(__file__).parent / "fixtures" / "detection"


def session(name: str) -> list:
    """The events of the file's one session (it must hold exactly one)."""
    (only,) = sessions_of(read(FIX / name))
    return only[1]


def first_halts(name: str | list, specs=DEFAULT_SPECS) -> dict[str, int | None]:
    """Each policy's first halt in the file's one session (or in these events), as a 1-based call
    position (the default set's policies unless told)."""
    specs = list(specs)
    halts: dict[str, int | None] = {s.detector: None for s in specs}
    position = 0
    for steps in replay_many(session(name) if isinstance(name, str) else name, specs):
        event = steps[0].event
        if not isinstance(event, Batch):
            continue
        for spec, step in zip(specs, steps, strict=True):
            if halts[spec.detector] is None:
                halts[spec.detector] = next((position + max(c.idx, 0) + 1 for c in step.checks
                                             if c.verdict == "halt"), None)
        position += len(event.calls)
    return halts


def test_the_default_set_is_what_these_fixtures_are_judged_by():
    assert [s.detector for s in DEFAULT_SPECS] == ["progress", "stagnation", "cycle"]
    assert all(s == PolicySpec(s.detector) for s in DEFAULT_SPECS)


def test_a_file_viewed_three_times_with_only_greps_between_is_halted_at_the_third_view():
    # views at calls 2, 4, 6 (the loop); the 7th call views other lines
    halts = first_halts("openhands-view-loop.json")
    assert halts["progress"] == 6
    assert min(h for h in halts.values() if h) == 6


def test_a_reread_after_each_fix_script_is_left_alone():
    # sed -n at calls 1, 3, 5 with a fix script between; unchanged twice, then changed
    assert set(first_halts("mini-swe-agent-reread-after-edits.traj.json").values()) == {None}


def test_a_failing_build_rerun_unchanged_is_halted_at_its_third_run():
    # cargo build at 1, 3, 4, a read at 2; the answers differ only in their wall time
    halts = first_halts("codex-build-rerun.jsonl")
    assert halts["progress"] == 4


@pytest.mark.parametrize("across_turns", ["none", "errors", "all"])
def test_a_poll_whose_answer_moves_is_never_halted(across_turns):
    spec = PolicySpec.parse(f"progress:across_turns={across_turns}")
    verdicts = [c.verdict for steps in replay_many(session("codex-ci-poll.jsonl"), [spec])
                for c in steps[0].checks]
    assert len(verdicts) == 7 and "halt" not in verdicts
    assert set(first_halts("codex-ci-poll.jsonl").values()) == {None}


def set_halt(name: str | list) -> int | None:
    """The default set's first halt (any policy): what `ingest` and the live default would do."""
    return min((h for h in first_halts(name).values() if h), default=None)


# ── issue 18: shapes beyond the shared corpus (each fails on the code before it) ─────────────


def test_a_log_tail_polled_without_waiting_is_halted_by_its_count_not_the_clock():
    # 20 polls of `tail; date`, the log saying "waiting for worker 2" each time, the same answer
    # once the clock is removed: a wait that asks for no wait of its own. Each poll is a model
    # turn: halted at the 6th (wait_halt_at), whether the polls came a second or a minute apart.
    assert set_halt("codex-log-tail-clock-poll.jsonl") == 6
    minute = _spread(session("codex-log-tail-clock-poll.jsonl"), 60)
    assert set_halt(minute) == 6


def _spread(events: list, seconds: int) -> list:
    """The events with each batch's time `seconds` after the previous batch's."""
    import dataclasses
    import datetime as dt

    start, out, k = dt.datetime(2025, 11, 21, 8, 0, tzinfo=dt.UTC), [], 0
    for ev in events:
        if isinstance(ev, Batch):
            ev = dataclasses.replace(ev, ts=(start + dt.timedelta(seconds=seconds * k)).isoformat())
            k += 1
        out.append(ev)
    return out


def test_a_build_log_poll_that_moves_over_its_run_is_never_halted_by_the_default_set():
    # 16 polls; answers stall for two (calls 2-3) and three (5-7, 12-14) polls, then move again:
    # a log that moves by itself is watched, and its stalls are waits a few seconds long.
    assert set(first_halts("codex-build-log-poll.jsonl").values()) == {None}
    # run-length with the seed's semantics halts it at the 4th poll (two equal answers in a row
    # after call 2's change: count 3 > max_strikes 2) — why it left the default set.
    assert first_halts("codex-build-log-poll.jsonl", [PolicySpec("run-length")])["run-length"] == 4


def test_progress_elsewhere_does_not_hide_a_failing_call_on_the_same_tool():
    # npm start & / ps (its pid moves) / curl failing identically, ten rounds: the 3rd curl
    # (call 9) is the 3rd identical failure. A moving answer rescues successes, never a failure.
    assert first_halts("codex-server-curl-loop.jsonl")["progress"] == 9
    assert set_halt("codex-server-curl-loop.jsonl") == 9


def test_tests_rerun_after_each_edit_get_rerun_halt_at_not_halt_at():
    # pytest at calls 1, 3, 5, 7 failing the same way, a `sed -i` (a write) between each: the 3rd
    # pytest (call 5) runs; the 4th (call 7) is halted at rerun_halt_at = 4.
    assert first_halts("codex-pytest-after-edits.jsonl")["progress"] == 7
    assert set_halt("codex-pytest-after-edits.jsonl") == 7


def test_a_step_counter_under_a_tmp_folder_is_not_a_temp_path():
    # `/srv/job/tmp/step-1200`, 1300, …: every answer differs; nothing halts.
    assert set(first_halts("codex-training-step-poll.jsonl").values()) == {None}


def test_ids_guessed_one_after_another_failing_the_same_way_are_halted_at_the_fifth():
    # get_order_details #W0000100, …01, …: "order <id> not found" each time, no success and no
    # user turn between: the 5th guess is the 5th step of one failure (same_failure_at = 5).
    assert first_halts("tau-order-id-enumeration.json")["progress"] == 5
    assert set_halt("tau-order-id-enumeration.json") == 5


def test_payment_methods_each_asked_for_by_the_user_are_not_a_run_of_one_failure():
    # four methods, the same error, a user turn before each: no run spans a user turn.
    assert set(first_halts("tau-payment-methods-asked-by-user.json").values()) == {None}


def harness_errors(n: int) -> list:
    """A text-action agent whose replies hold 0 or several actions: the reader makes each reply
    one `harness_error` call answered by the harness's message, flagged as a failure."""
    events: list = [UserTurn("Fix the bug in parse.py")]
    for i in range(n):
        cid = f"h{i}"
        events.append(Batch((Call(cid, "harness_error", {"reply": f"THOUGHT: try {i}\n```bash\nls {i}\n```"}),)))
        found = (3, 2, 0)[i % 3]
        events.append(Answers((Answer(cid, "Please always provide EXACTLY ONE action in triple backticks, "
                                           f"found {found} actions.", is_error=True),)))
    return events


def test_the_same_harness_format_error_in_a_row_is_halted_at_the_fifth_reply():
    # the message differs only in its count of actions (3, 2, 0): the same failure, five steps
    assert first_halts(harness_errors(9))["progress"] == 5
    assert set_halt(harness_errors(9)) == 5
    assert set(first_halts(harness_errors(4)).values()) == {None}  # four: not yet


def _command(cid: str) -> list:
    return [Batch((Call(cid, "bash", {"command": f"cat {cid}.py"}),)), Answers((Answer(cid, "print(1)"),))]


def test_one_command_slipping_through_between_refusals_does_not_end_being_stuck():
    # Four replies refused, one that ran, then refused again: the 5th refusal among the last 7
    # replies (call 6) is halted — as a person labelled sphinx-10466 (4 refused, 2 ran, 3 refused).
    events = harness_errors(4) + _command("ok") + harness_errors(4)[1:]
    assert first_halts(events)["progress"] == 6


def test_a_refusal_now_and_then_between_commands_that_run_is_never_halted():
    events = harness_errors(1)
    for i in range(8):
        events += _command(f"c{i}") + harness_errors(1)[1:]
    assert set(first_halts(events).values()) == {None}
