"""The writes made outside ingest, in one place: a person's label on a run, and stored sessions
judged by new policies (the dashboard's "Save as policies", `sweep --save`, `recheck`).

Every write is a short transaction: a label is one; judging stores each session in its own,
after computing its verdicts outside any transaction. So the SQLite write lock is held for one
session at a time, never for a whole ledger, and a running `watch` or `ingest` gets its turn
between sessions (recheck's habit, now everyone's).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from typing import Any

from loopledger.ledger import read, store
from sqlalchemy.engine import Engine

# (session id, its events, each policy's verdicts) after a session is stored
OnSession = Callable[[int, list[Any], list[store.PolicyVerdicts]], None]


def save_label(engine: Engine, session_id: int, run_idx: int, label: str, note: str = "",
               loop_first: int | None = None, loop_last: int | None = None) -> None:
    """A person's label on a session (the latest wins; see read.write_label), in its own transaction."""
    with engine.begin() as conn:
        read.write_label(conn, session_id, run_idx, label, note, loop_first, loop_last)


def judge_stored(engine: Engine, specs: Sequence[Any], session_ids: Iterable[int] | None = None,
                 progress: Callable[[int, int, str], None] | None = None,
                 on_session: OnSession | None = None) -> int:
    """Store each policy with its verdicts on every given session (default: all); returns the
    number of distinct policies. One transaction for the policies, then one per session.

    The verdicts are the replay engine's on the ledger's own events, so a saved setting looks
    exactly like a policy the worker ran at ingest."""
    from loopledger.worker import replay_session  # the one place policies meet a session's events

    specs = list({sp.id: sp for sp in specs}.values())
    with engine.begin() as conn:
        store.ensure_policies(conn, specs)
        ids = store.session_ids(conn) if session_ids is None else list(session_ids)
    for n, sid in enumerate(ids, 1):
        with engine.connect() as conn:  # a read: no write lock while loading
            events = store.load_events(conn, sid)
        _, verdicts = replay_session(events, specs)  # computed before the transaction opens
        with engine.begin() as conn:
            store.replace_verdicts(conn, sid, verdicts)
        if on_session is not None:
            on_session(sid, events, verdicts)
        if progress is not None:
            progress(n, len(ids), str(sid))
    return len(specs)
