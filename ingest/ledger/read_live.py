"""What was enforced on a live agent, for the dashboard: one session's enforced decisions with
the step of the transcript call they were made on and the same policy's replayed verdict there.

Read uncached by the Session page every LIVE_REFRESH_S (a decision must show within 2 s), so
it reads one session's rows through enforced_checks' primary key and the calls' call ids.
"""

from __future__ import annotations

import datetime as dt

import pandas as pd
import sqlalchemy as sa
from loopledger.detectors import registry
from loopledger.ledger import schema as t
from sqlalchemy.engine import Connection

COLUMNS = ["when", "call", "tool", "enforced", "replayed", "step", "count", "reason", "policy", "by",
           "decided in (ms)"]


def enforced(conn: Connection, session_id: int, limit: int = 500) -> pd.DataFrame:
    """Newest first: when (UTC), the agent's call id, tool, the enforced verdict, the replayed
    verdict of the same policy on the same call (once the transcript is ingested), its step."""
    e, p, c, ch = t.enforced_checks.c, t.policies.c, t.calls.c, t.checks.c
    call = sa.and_(c.session_id == e.session_id, c.call_id == e.call_id)
    replayed = (sa.select(ch.verdict).where(ch.session_id == e.session_id, ch.policy_id == e.policy_id,
                                            ch.seq == c.seq, ch.idx.in_([c.idx, -1]))
                .limit(1).scalar_subquery())
    q = (sa.select(e.at, e.call_id, e.tool, e.verdict, replayed.label("replayed"), c.seq, e.count, e.reason,
                   p.label, e.origin, e.elapsed_ms)
         .select_from(t.enforced_checks.join(t.policies, p.id == e.policy_id).outerjoin(t.calls, call))
         .where(e.session_id == session_id).order_by(e.seq.desc()).limit(limit))
    rows = conn.execute(q).all()
    df = pd.DataFrame([(dt.datetime.fromtimestamp(r[0], dt.UTC).strftime("%Y-%m-%d %H:%M:%S"), *r[1:])
                       for r in rows], columns=COLUMNS)
    return df


def enforced_label(conn: Connection) -> str | None:
    """What is enforced now, as one line: the policy's label (a set's labels joined by " + "),
    since when, from where and by whom, and any policy whose detector is not registered in this process
    (looked up, never imported: the live paths allow every call while it is enforced). None:
    none chosen, the default set applies."""
    e = t.enforcements.c
    newest = conn.execute(sa.select(e.id, e.policy_id, e.set_at, e.origin, e.by_user)
                          .order_by(e.id.desc()).limit(1)).first()
    if newest is None or newest.policy_id is None:
        return None
    m, p = t.enforcement_policies.c, t.policies.c
    rows = conn.execute(sa.select(p.label, p.detector).select_from(t.enforcement_policies.join(
        t.policies, p.id == m.policy_id)).where(m.enforcement_id == newest.id).order_by(m.position)).all()
    if not rows:  # chosen before sets existed: the one policy
        rows = conn.execute(sa.select(p.label, p.detector).where(p.id == newest.policy_id)).all()
    when = dt.datetime.fromtimestamp(newest.set_at, dt.UTC).strftime("%Y-%m-%d %H:%M")  # the dashboard's one format
    by = f", by {newest.by_user}" if newest.by_user else ""
    text = " + ".join(r.label for r in rows) + f" (since {when} UTC, from {newest.origin or 'unknown'}{by})"
    missing = [r.label for r in rows if not registry.is_registered(r.detector)]
    if missing:
        text += f"; not registered here: allowed: {', '.join(missing)}"
    return text


HISTORY_COLUMNS = ["when", "enforced", "from", "by"]


def enforcement_history(conn: Connection, limit: int = 20) -> pd.DataFrame:
    """Every change of the enforced setting, newest first: when (UTC), what (a set's labels
    joined by " + "; "the default set" for a return to it), from where, by whom."""
    e, m, p = t.enforcements.c, t.enforcement_policies.c, t.policies.c
    newest = conn.execute(sa.select(e.id, e.policy_id, e.set_at, e.origin, e.by_user)
                          .order_by(e.id.desc()).limit(limit)).all()
    names: dict[int, list[str]] = {}
    if newest:
        for eid, label in conn.execute(sa.select(m.enforcement_id, p.label).select_from(
                t.enforcement_policies.join(t.policies, p.id == m.policy_id))
                .where(m.enforcement_id.in_([r.id for r in newest])).order_by(m.enforcement_id, m.position)):
            names.setdefault(eid, []).append(label)
        single = {r.policy_id for r in newest if r.policy_id and r.id not in names}
        labels = dict(conn.execute(sa.select(p.id, p.label).where(p.id.in_(single)))) if single else {}
    rows = [(dt.datetime.fromtimestamp(r.set_at, dt.UTC).strftime("%Y-%m-%d %H:%M:%S"),
             " + ".join(names.get(r.id) or ([labels.get(r.policy_id, r.policy_id)] if r.policy_id else
                                            ["the default set"])),
             r.origin or "unknown", r.by_user or "unknown") for r in newest]
    return pd.DataFrame(rows, columns=HISTORY_COLUMNS)
