"""Compare's sweep (20 settings × 1,000 sessions) and one Replay-page click on a 10k-step session.

Sweep: `loopledger.analysis.sweep.sweep` over 1,000 generated sessions (about 60 events each) with 20 window
thresholds (best of 2 alternating rounds). Baselines measured in the same run: the same
20 × 1,000 replays done bare (`tally(replay(...))` in a loop, no sweep bookkeeping), and the raw
cost of iterating the events 20 times. Budget (design.md): a 20-setting sweep over 1,000
sessions ≤ 10 s.

Page: the Replay page's server time for one "Forward" click (an AppTest rerun of the whole page:
the Replayer step, transcript, state panel and the counters chart) on a ledger holding one
10,000-step run, against the same harness clicking a one-button page (and, for scale, the bare
Replayer.forward()). In a browser the click reruns only the cursor fragment, so this is an upper
bound. Budget: one replay step ≤ 100 ms.
"""

from __future__ import annotations

import os
import statistics
import tempfile
import time
from pathlib import Path

from loopledger.analysis import sweep
from loopledger.detectors.policy import PolicySpec
from loopledger.events import UserTurn
from loopledger.replay import Replayer, replay, tally

from bench.bench_replay import session

SWEEP_BUDGET_S = 10.0
STEP_BUDGET_MS = 100.0
ROOT = Path(__file__).resolve().parent.parent


def _sessions(n: int, size: int) -> list[sweep.SessionEvents]:
    return [sweep.SessionEvents(i, session(size, seed=i)) for i in range(n)]


def _sweep_rows(quick: bool) -> list[str]:
    n = 200 if quick else 1_000
    sessions = _sessions(n, 60)
    grid = sweep.make_grid("window", [sweep.Axis("threshold", tuple(range(2, 22)))], {"window": 24})
    specs = [sweep.spec_for(grid, v) for v in sweep.grid_points(grid)]

    def raw_loop() -> None:
        for _ in specs:
            for s in sessions:
                for _ev in s.events:
                    pass

    def bare_loop() -> None:
        for spec in specs:
            for s in sessions:
                tally(replay(s.events, spec))

    # Rounds alternate the three and keep each one's best: a 2-core machine shared with other
    # work drifts by tens of percent within a minute, which would bias whichever ran later.
    best = {"raw": float("inf"), "bare": float("inf"), "sweep": float("inf")}
    result = None
    for _ in range(1 if quick else 2):
        for name, fn in (("raw", raw_loop), ("bare", bare_loop), ("sweep", lambda: sweep.sweep(sessions, grid))):
            t0 = time.perf_counter()
            out = fn()
            best[name] = min(best[name], time.perf_counter() - t0)
            if name == "sweep":
                result = out
    raw, bare, took = best["raw"], best["bare"], best["sweep"]
    assert len(result.settings) == 20 and all(s.error is None for s in result.settings)
    calls = result.settings[0].totals["calls"]
    return [
        f"| sweep: 20 window thresholds × {n:,} sessions ({calls:,} calls each setting) | {took:.2f} s "
        f"| bare replay+tally loop {bare:.2f} s; raw event iteration {raw:.3f} s | {took / bare:.2f}× bare "
        f"| ≤ {SWEEP_BUDGET_S:.0f} s{'' if took <= SWEEP_BUDGET_S else ' **over**'} |",
    ]


def _ledger_with_one_session(path: Path, events: list) -> str:
    from loopledger.events import SessionInfo
    from loopledger.ledger import schema as t
    from loopledger.ledger import store
    from loopledger.ledger.engine import make_engine
    from loopledger.ledger.migrate import upgrade
    from loopledger.worker import replay_session

    url = f"sqlite:///{path}"
    eng = make_engine(url)
    upgrade(eng)
    with eng.begin() as conn:
        src = conn.execute(t.sources.insert().values(path="bench-10k.jsonl", size=0)
                           .returning(t.sources.c.id)).scalar()
        run_of, verdicts = replay_session(events, [PolicySpec("window")])
        store.ensure_policies(conn, [PolicySpec("window")])
        store.write_session(conn, src, SessionInfo("10k", "openai-chat", "10k steps"), events, run_of, verdicts)
    eng.dispose()
    return url


def _page_rows(quick: bool) -> list[str]:
    from streamlit.testing.v1 import AppTest

    n = 10_000
    # One run of 10k steps: the worst case for the page (its slider and chart cover the whole run).
    generated = session(n + 100)
    events = [generated[0], *(e for e in generated[1:] if not isinstance(e, UserTurn))][:n]
    spec = PolicySpec("window")
    clicks = 5 if quick else 20
    with tempfile.TemporaryDirectory() as tmp:
        url = _ledger_with_one_session(Path(tmp) / "ledger.sqlite", events)
        old = os.environ.get("LOOPLEDGER_DATABASE_URL")
        os.environ["LOOPLEDGER_DATABASE_URL"] = url
        try:
            at = AppTest.from_file(str(ROOT / "app" / "main.py"), default_timeout=120).run()
            at.query_params.update(session="1", run="0", policy=spec.text, step="5000")
            at.switch_page("views/replay.py").run()
            assert not at.exception, at.exception
            times, cpu = [], []
            for _ in range(clicks):
                t0, c0 = time.perf_counter(), time.process_time()
                at.button(key="rp_fwd").click().run()
                times.append((time.perf_counter() - t0) * 1000)
                cpu.append((time.process_time() - c0) * 1000)
                assert not at.exception, at.exception
            trivial = _trivial_click_ms(Path(tmp), clicks)
        finally:
            if old is None:
                os.environ.pop("LOOPLEDGER_DATABASE_URL", None)
            else:
                os.environ["LOOPLEDGER_DATABASE_URL"] = old
    rp = Replayer(events, spec)
    rp.jump_to(5_000)
    t0 = time.perf_counter()
    for _ in range(clicks):
        rp.forward()
    bare = (time.perf_counter() - t0) * 1000 / clicks
    med = statistics.median(times)
    return [
        f"| Replay page: one Forward click on a {n:,}-step run (median of {clicks}; wall, CPU "
        f"{statistics.median(cpu):.0f} ms) | {med:.0f} ms | the same click on a one-button page "
        f"{trivial:.0f} ms; bare Replayer.forward() {bare:.3f} ms | {med / max(trivial, 1e-3):.0f}× the one-button page "
        f"| ≤ {STEP_BUDGET_MS:.0f} ms{'' if med <= STEP_BUDGET_MS else ' **over**'} |",
    ]


def _trivial_click_ms(tmp: Path, clicks: int) -> float:
    """The AppTest harness's own cost for a click: a page with one button and one text."""
    from streamlit.testing.v1 import AppTest

    page = tmp / "one_button.py"
    page.write_text("import streamlit as st\nst.button('x', key='b')\nst.text('hello')\n")
    at = AppTest.from_file(str(page)).run()
    times = []
    for _ in range(clicks):
        t0 = time.perf_counter()
        at.button(key="b").click().run()
        times.append((time.perf_counter() - t0) * 1000)
    return statistics.median(times)


def run(quick: bool) -> str:
    rows = _sweep_rows(quick) + _page_rows(quick)
    return "\n".join([
        "## Compare sweep and Replay page step\n",
        "| what | figure | baseline (same run) | ratio | budget |",
        "|---|---:|---|---:|---|",
        *rows,
        "",
    ])


if __name__ == "__main__":
    print(run(quick=False))
