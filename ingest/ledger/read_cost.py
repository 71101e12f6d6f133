"""What loops cost, from the ledger's turn_usage rows (one per model turn the transcript gave
usage for, priced at ingest by loopledger.analysis.pricing).

Spend after a halt = the turns of a halted run after the halting batch (seq > the run's
halt_seq, same run): what the agent spent after the guard would have stopped it — the money
and tokens beside the calls `saved` counts. A halt ends its run only; the person's next prompt
starts fresh, so later runs are not counted. Every total says how many turns it could not price
(`unpriced`) and `usd` is None when none could be priced: unknown, never 0. Sessions without
usage rows (formats that do not report it) count in `no_usage`.
"""

from __future__ import annotations

import datetime as dt

import pandas as pd
import sqlalchemy as sa
from loopledger import vocab
from loopledger.analysis import pricing, scoring
from loopledger.ledger import schema as t
from loopledger.ledger.read import SessionFilter, _matching_ids
from sqlalchemy.engine import Connection

SPEND = ["turns", "input_tokens", "output_tokens", "cache_read_tokens", "cache_write_tokens", "tokens", "usd",
         "unpriced"]


def _sums(u):
    """Aggregate columns over turn_usage rows `u`: usd is NULL when no turn was priced."""
    f = sa.func
    return [f.count().label("turns"),
            *[f.coalesce(f.sum(getattr(u, k)), 0).label(k) for k in
              ("input_tokens", "output_tokens", "cache_read_tokens", "cache_write_tokens")],
            (f.coalesce(f.sum(u.input_tokens), 0) + f.coalesce(f.sum(u.output_tokens), 0)).label("tokens"),
            f.sum(u.usd).label("usd"),
            f.count().filter(u.usd.is_(None)).label("unpriced")]


def _clean(row: dict) -> dict:
    out = {k: int(row[k] or 0) for k in SPEND if k != "usd"}
    out["usd"] = None if row["usd"] is None else float(row["usd"])
    return out


def total_spend(conn: Connection, f: SessionFilter | None = None) -> dict:
    """Spend over the matching sessions: turns, tokens, usd (None: nothing priced), unpriced
    turns, sessions with usage and without it, and the price table versions used."""
    u, s = t.turn_usage.c, t.sessions.c
    ids = _matching_ids(f) if f is not None else None
    q = sa.select(*_sums(u), sa.func.count(sa.distinct(u.session_id)).label("sessions"))
    n = sa.select(sa.func.count()).select_from(t.sessions)
    v = sa.select(u.priced_with).where(u.priced_with.is_not(None)).distinct()
    if ids is not None:
        q, n, v = q.where(u.session_id.in_(ids)), n.where(s.id.in_(ids)), v.where(u.session_id.in_(ids))
    row = dict(conn.execute(q).one()._mapping)
    out = _clean(row)
    out["sessions"] = int(row["sessions"])
    out["no_usage"] = int(conn.execute(n).scalar_one()) - out["sessions"]
    out["priced_with"] = sorted(conn.execute(v).scalars())
    return out


def _after_halt(policy_ids: tuple[str, ...] = (), ids=None, session_id: int | None = None):
    """turn_usage rows after each halted run's halt, with the run's policy."""
    u, ro = t.turn_usage.c, t.run_outcomes.c
    j = t.turn_usage.join(t.run_outcomes, sa.and_(ro.session_id == u.session_id, ro.run_idx == u.run_idx,
                                                  ro.outcome == vocab.HALTED, ro.halt_seq.is_not(None),
                                                  u.seq > ro.halt_seq))
    terms = []
    if policy_ids:
        terms.append(ro.policy_id.in_(policy_ids))
    if ids is not None:
        terms.append(u.session_id.in_(ids))
    if session_id is not None:
        terms.append(u.session_id == session_id)
    return j, terms


def saved_by_policy(conn: Connection, f: SessionFilter | None = None, session_id: int | None = None,
                    ids=None) -> pd.DataFrame:
    """Per policy: halted runs, calls saved, and the spend after their halts (turns, tokens, usd,
    unpriced) over the matching sessions (or one session); `halted_runs_no_usage`: halted runs
    in sessions whose transcript reported no usage (their share is unknown: see `saved_text`). `loop_seconds`: wall time from each halt to its run's last timestamp, summed
    where the transcript has both."""
    p, ro = t.policies.c, t.run_outcomes.c
    if ids is None:  # `ids`: a SELECT of session ids (e.g. the labelled ones a score counts)
        ids = _matching_ids(f) if f is not None else None
    pols = tuple(f.policies) if f is not None else ()
    j, terms = _after_halt(pols, ids, session_id)
    q = (sa.select(ro.policy_id, *_sums(t.turn_usage.c)).select_from(j).where(*terms).group_by(ro.policy_id))
    spent = {r["policy_id"]: _clean(dict(r)) for r in conn.execute(q).mappings()}
    # In the join's ON, so a policy without a halted run here still gets its row (of zeros).
    on = ([ro.session_id.in_(ids)] if ids is not None else []) + (
        [ro.session_id == session_id] if session_id is not None else [])
    no_usage = ~sa.exists().where(t.turn_usage.c.session_id == ro.session_id)
    halted = ro.outcome == vocab.HALTED
    hq = (sa.select(p.id.label("policy_id"), p.label.label("policy"),
                    sa.func.count(ro.session_id).filter(halted).label("halted_runs"),
                    sa.func.coalesce(sa.func.sum(ro.saved), 0).label("calls_saved"),
                    sa.func.count(ro.session_id).filter(halted, no_usage).label("halted_runs_no_usage"))
          .select_from(t.policies.outerjoin(t.run_outcomes, sa.and_(ro.policy_id == p.id, *on)))
          .group_by(p.id, p.label).order_by(p.label))
    if pols:
        hq = hq.where(p.id.in_(pols))
    seconds = loop_seconds(conn, pols, ids, session_id)
    rows = []
    for r in conn.execute(hq).mappings():
        sp = spent.get(r["policy_id"]) or {k: (None if k == "usd" else 0) for k in SPEND}
        rows.append({"policy_id": r["policy_id"], "policy": r["policy"], "halted_runs": int(r["halted_runs"]),
                     "calls_saved": int(r["calls_saved"]), "halted_runs_no_usage": int(r["halted_runs_no_usage"]),
                     **{f"{k}_saved": v for k, v in sp.items()}, "loop_seconds": seconds.get(r["policy_id"])})
    cols = ["policy_id", "policy", "halted_runs", "calls_saved", "halted_runs_no_usage",
            *[f"{k}_saved" for k in SPEND], "loop_seconds"]
    return pd.DataFrame(rows, columns=cols)


def labelled_ids():
    """The sessions `loopledger score` counts (labelled loop or normal), as a SELECT."""
    lb = t.labels.c
    return sa.select(lb.session_id).where(lb.label.in_((scoring.LOOP, scoring.NORMAL)))


def saved_on_labelled(conn: Connection) -> pd.DataFrame:
    """saved_by_policy over the labelled sessions a score counts (the leaderboard's)."""
    return saved_by_policy(conn, ids=labelled_ids())


def _seconds(a: str | None, b: str | None) -> float | None:
    try:
        return max(0.0, (dt.datetime.fromisoformat(b.replace("Z", "+00:00"))
                         - dt.datetime.fromisoformat(a.replace("Z", "+00:00"))).total_seconds())
    except (AttributeError, ValueError, TypeError):
        return None


def loop_seconds(conn: Connection, policy_ids: tuple[str, ...] = (), ids=None,
                 session_id: int | None = None) -> dict[str, float]:
    """Per policy: seconds from each halt (its batch's timestamp) to the last timestamp of its
    run, summed over the halted runs that have both; a policy with none is absent."""
    ro, e = t.run_outcomes.c, t.events.c
    halt_ts = (sa.select(e.ts).where(e.session_id == ro.session_id, e.seq == ro.halt_seq)
               .scalar_subquery())
    last_ts = (sa.select(sa.func.max(e.ts)).where(e.session_id == ro.session_id, e.run_idx == ro.run_idx,
                                                  e.seq > ro.halt_seq).scalar_subquery())
    q = sa.select(ro.policy_id, halt_ts.label("a"), last_ts.label("b")).where(
        ro.outcome == vocab.HALTED, ro.halt_seq.is_not(None))
    if policy_ids:
        q = q.where(ro.policy_id.in_(policy_ids))
    if ids is not None:
        q = q.where(ro.session_id.in_(ids))
    if session_id is not None:
        q = q.where(ro.session_id == session_id)
    out: dict[str, float] = {}
    for pid, a, b in conn.execute(q):
        sec = _seconds(a, b)
        if sec is not None:
            out[pid] = out.get(pid, 0.0) + sec
    return out


def run_spend(conn: Connection, session_id: int) -> pd.DataFrame:
    """Per run of one session: turns, tokens, usd (None: nothing priced), unpriced turns."""
    u = t.turn_usage.c
    q = (sa.select(u.run_idx, *_sums(u)).where(u.session_id == session_id).group_by(u.run_idx)
         .order_by(u.run_idx))
    rows = [{"run_idx": int(r["run_idx"]), **_clean(dict(r))} for r in conn.execute(q).mappings()]
    return pd.DataFrame(rows, columns=["run_idx", *SPEND])


def turn_spend(conn: Connection, session_id: int) -> pd.DataFrame:
    """Every model turn of one session with usage: seq, run, model, tokens, usd, price table, and
    the 1-based number of the session's first call it made (None for a prose turn)."""
    u, c = t.turn_usage.c, t.calls.c
    first_call = (sa.select(sa.func.count()).where(c.session_id == u.session_id, c.seq < u.seq)
                  .scalar_subquery())
    has_calls = sa.exists().where(c.session_id == u.session_id, c.seq == u.seq)
    q = (sa.select(u.seq, u.run_idx, u.model, u.input_tokens, u.output_tokens, u.cache_read_tokens,
                   u.cache_write_tokens, u.usd, u.priced_with, u.price_note, u.ts,
                   sa.case((has_calls, first_call + 1), else_=None).label("call"))
         .where(u.session_id == session_id).order_by(u.seq))
    cols = ["seq", "run_idx", "model", "input_tokens", "output_tokens", "cache_read_tokens", "cache_write_tokens",
            "usd", "priced_with", "price_note", "ts", "call"]
    return pd.DataFrame(conn.execute(q).mappings().all(), columns=cols)


def saved_text(row) -> tuple[str, str]:
    """(tokens saved, $ saved) of one saved_by_policy row for people: "unknown" when the
    halted runs' sessions reported no usage at all, "≥ …" when only some did or some turns were
    unpriced, exact otherwise (0 when nothing was halted)."""
    usd = row["usd_saved"]
    return pricing.saved_texts(pricing.Saved(
        int(row["tokens_saved"]), None if usd is None or usd != usd else float(usd), int(row["turns_saved"]),
        int(row["unpriced_saved"]), int(row["halted_runs_no_usage"]), int(row["halted_runs"])))


def turns_of(conn: Connection, session_ids: tuple[int, ...]) -> tuple[tuple[tuple[int, int, int, int, float | None],
                                                                         ...], frozenset[int]]:
    """(session, run, seq, tokens, usd) of every model turn of these sessions, and the sessions
    among them that reported usage: what pricing.spend_after reads for replayed halts."""
    u = t.turn_usage.c
    rows = tuple((int(a), int(b), int(c), int(d or 0) + int(e or 0), f) for a, b, c, d, e, f in conn.execute(
        sa.select(u.session_id, u.run_idx, u.seq, u.input_tokens, u.output_tokens, u.usd)
        .where(u.session_id.in_(session_ids)).order_by(u.session_id, u.seq)))
    return rows, frozenset(r[0] for r in rows)
