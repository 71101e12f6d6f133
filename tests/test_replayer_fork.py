"""Replayer.fork: the Replay page replays a session once (cached) and gives each viewer a cursor
of their own; a fork's state at any position must be what a replay from the start gives, and
moving one fork must not move another or the shared original."""

from __future__ import annotations

from loopledger.detectors.policy import DETECTORS, PolicySpec
from loopledger.replay import Replayer, replay
from test_sweep import SESSIONS


def test_forks_step_like_a_replay_from_the_start_and_share_nothing_they_change():
    for detector in DETECTORS:
        spec = PolicySpec(detector)
        for s in SESSIONS:
            events = s.events
            ref = [st.state for st in replay(events, spec, with_state=True)]
            full = Replayer(events, spec, snapshot_every=3)
            full.jump_to(len(full))
            assert full.steps == list(replay(events, spec))
            a, b = full.fork(), full.fork()
            for pos in (len(events), 1, len(events) // 2, 2):
                a.jump_to(pos)
                assert a.state() == ref[pos - 1], (detector, pos)
            b.jump_to(1)
            assert b.state() == ref[0]
            a.jump_to(len(events))
            assert b.position == 1 and full.position == len(events)
            assert full.state() == ref[-1]
