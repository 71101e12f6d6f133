"""What the watch tests share: the ledger's sources and call count as a real `loopledger watch`
process writes them, polled read-only until they reach what the test waits for. Waiting is
bounded only so a broken watcher cannot hang the suite."""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from loopledger.ledger import schema
from loopledger.ledger.engine import make_engine
from sqlalchemy import func, select

HANG = 60.0


def ledger_state(url: str) -> tuple[list[str], int | None]:
    """The file names of the ledger's sources, and its calls in all."""
    eng = make_engine(url, readonly=True)
    try:
        with eng.connect() as conn:
            paths = [Path(p).name for p in conn.execute(select(schema.sources.c.path)).scalars()]
            calls = conn.execute(select(func.sum(schema.sessions.c.n_calls))).scalar()
        return paths, calls
    finally:
        eng.dispose()


def wait_for_state(url: str, predicate, what: str) -> tuple[list[str], int | None]:
    """Poll until predicate(paths, calls) holds; fail naming `what` after HANG seconds."""
    t0 = time.monotonic()
    while True:
        try:
            state = ledger_state(url)
            if predicate(*state):
                return state
        except Exception:  # the ledger may not be written yet  # noqa: BLE001
            pass
        if time.monotonic() - t0 > HANG:
            pytest.fail(f"watch never got to: {what}")
        time.sleep(0.1)
