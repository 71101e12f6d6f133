"""One Replay-page step (forward, back, jump) on a 10,000-step session, per default policy.

The Replay page keeps a `Replayer` (ingest/replay.py): forward reuses the live detector state,
back and jumps restart from the nearest snapshot (one every 64 steps) and re-step. The baseline,
measured in the same run, is what a page without a cursor would do on every click: replay the
session from scratch up to the position (`replay()` over the whole session). Budget (design.md):
one replay step ≤ 100 ms.
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable

from loopledger.detectors import BUILTIN_SPECS
from loopledger.events import Answer, Answers, Batch, Call, Prose, UserTurn
from loopledger.replay import Replayer, replay

BUDGET_MS = 100.0
TOOLS = ("Read", "Bash", "Edit", "Grep", "browser_navigate")


def session(n_steps: int, seed: int = 5) -> list:
    """About n_steps events: batches of 1-3 calls with answers, prose, a user turn every ~400,
    and loops (repeats and A-B cycles) sprinkled in so the detectors have state to carry."""
    rng = random.Random(seed)
    events: list = [UserTurn("start")]
    cid = 0
    while len(events) < n_steps:
        r = rng.random()
        if r < 0.0025:
            events.append(UserTurn("next"))
        elif r < 0.05:
            events.append(Prose(rng.choice(["Let me check.", "Trying again.", "Done?"])))
        else:
            calls = []
            for _ in range(rng.choice((1, 1, 1, 2, 3))):
                cid += 1
                tool = rng.choice(TOOLS)
                args = {"path": f"src/m{rng.randrange(40)}.py", "n": rng.randrange(3)}
                calls.append(Call(f"c{cid}", tool, args))
            events.append(Batch(tuple(calls)))
            events.append(Answers(tuple(Answer(c.id, f"out {rng.randrange(4)}") for c in calls)))
    return events[:n_steps]


def _ms(fn: Callable[[], object]) -> float:
    t0 = time.perf_counter()
    fn()
    return (time.perf_counter() - t0) * 1000


def run(quick: bool) -> str:
    n = 10_000
    events = session(n)
    rng = random.Random(1)
    rows = []
    for spec in BUILTIN_SPECS:
        scratch = min(_ms(lambda s=spec: sum(1 for _ in replay(events, s))) for _ in range(2))
        build = _ms(lambda: None)
        t0 = time.perf_counter()
        rp = Replayer(events, spec)
        build = (time.perf_counter() - t0) * 1000
        first_jump = _ms(lambda r=rp: r.jump_to(n // 2))  # from 0: replays half the session
        forward = max(_ms(lambda r=rp: (r.forward(), r.current)) for _ in range(200))
        rp.jump_to(n)
        back = max(_ms(lambda r=rp: (r.back(), r.current)) for _ in range(100 if quick else 300))
        targets = [rng.randrange(n + 1) for _ in range(30 if quick else 100)]
        jumps = [_ms(lambda r=rp, t=t: (r.jump_to(t), r.current)) for t in targets]
        worst = max(forward, back, max(jumps))
        rows.append(f"| {spec.detector} | {build:.1f} | {first_jump:.1f} | {forward:.2f} | {back:.2f} | "
                    f"{sorted(jumps)[len(jumps) // 2]:.2f} / {max(jumps):.2f} | {scratch:.1f} | "
                    f"{worst / scratch:.3f}× | {'✅' if worst <= BUDGET_MS else '❌'} ≤ {BUDGET_MS:.0f} ms |")
    return "\n".join([
        "## Replay: one step of the Replay page on a 10,000-step session",
        "",
        f"A generated session of {n:,} events (batches of 1-3 calls with answers, prose, user turns, "
        "repeats and cycles). Times in ms, wall clock; forward/back/jump are the WORST of many "
        "steps (the state read included), jump = median / worst of random jumps after the whole "
        "session was visited (snapshots every 64 steps). Baseline, same run: replaying the session "
        "from scratch, what a page without a cursor pays per click; ratio = worst step / baseline. "
        "The first jump from position 0 replays half the session once and leaves its snapshots.",
        "",
        "| policy | build | first jump to 5,000 | forward (worst) | back (worst) | jump (median / worst) | "
        "scratch replay | ratio | budget |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---|",
        *rows,
        "",
    ])


if __name__ == "__main__":
    print(run(quick=True))
