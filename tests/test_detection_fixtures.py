"""Real loop shapes and legitimate repeats beyond the corpus (tests/fixtures/detection/README.md):
`progress` and the default policy set halt inside the loops and leave the repeats alone."""

from __future__ import annotations

from pathlib import Path

import pytest
from loopledger.analysis.replay_table import sessions_of
from loopledger.detectors import PolicySpec
from loopledger.detectors.policy import DEFAULT_SPECS
from loopledger.events import Batch
from loopledger.formats import read
from loopledger.replay import replay_many

FIX = Path(__file__).parent / "fixtures" / "detection"


def session(name: str) -> list:
    """The events of the file's one session (it must hold exactly one)."""
    (only,) = sessions_of(read(FIX / name))
    return only[1]


def first_halts(name: str) -> dict[str, int | None]:
    """Each default policy's first halt in the file's one session, as a 1-based call position."""
    specs = list(DEFAULT_SPECS)
    halts: dict[str, int | None] = {s.detector: None for s in specs}
    position = 0
    for steps in replay_many(session(name), specs):
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
    assert [s.detector for s in DEFAULT_SPECS] == ["progress", "run-length", "stagnation", "cycle"]
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
