"""The writes made outside ingest: a person's label on a run, in its own short transaction,
allowed only to a labeller or more (loopledger.ledger.team: the role is read in that transaction).

Stored sessions judged by new policies (the dashboard's "Save as policies", `sweep --save`,
`recheck`) are `loopledger.worker.judge_stored`: it runs the replay engine, which sits above the
ledger in the layers (pyproject.toml's import contracts).
"""

from __future__ import annotations

from loopledger.ledger import read, team
from sqlalchemy.engine import Engine


def save_label(engine: Engine, session_id: int, run_idx: int, label: str, note: str = "",
               loop_first: int | None = None, loop_last: int | None = None,
               actor: team.Actor | None = None) -> None:
    """A person's label on a session (the latest wins; see read.write_label), in its own
    transaction, recorded with who gave it. team.Forbidden when `actor` (default: the local
    user) may not label."""
    actor = actor or team.local_actor()
    with engine.begin() as conn:
        team.require(conn, actor, team.LABEL)
        read.write_label(conn, session_id, run_idx, label, note, loop_first, loop_last, by_user=actor.who)
