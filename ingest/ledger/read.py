"""The dashboard's read model: SQL aggregates over the ledger, small results only.

Every function takes a Connection and returns a small DataFrame, dict or list. Lists are paged
with LIMIT/OFFSET and narrowed with WHERE in SQL; nothing here pulls a whole table into pandas.
The Sessions page reads `session_stats` (kept current at ingest), never `checks`; the Session
page reads `checks`/`calls`/`events` of one session through their primary keys.
"""

from __future__ import annotations

import datetime as dt
import time
from dataclasses import dataclass

import pandas as pd
import sqlalchemy as sa
from loopledger import vocab
from loopledger.analysis import scoring
from loopledger.ledger import schema as t
from sqlalchemy.engine import Connection

MEASURES = ("strikes", "warnings", "blocks", "halts", "saved")
SORTABLE = ("halts", "warnings", "blocks", "strikes", "saved", "calls", "runs", "started_at", "id")
OUTCOME_FILTERS = ("halted", "warned", "clean")  # halted: some chosen policy halted; warned: warned
# or blocked but none halted; clean: no chosen policy said anything but allow
PROSE_TOOL = "(prose)"  # timeline lane for checks on prose turns (stagnation), which have no call


@dataclass(frozen=True)
class SessionFilter:
    """What the Sessions page narrows by. Empty fields do not filter."""

    policies: tuple[str, ...] = ()  # policy ids the counters are summed over; () = every policy
    formats: tuple[str, ...] = ()
    source: str = ""  # substring of the source file path
    date_from: dt.date | None = None
    date_to: dt.date | None = None  # inclusive
    outcome: str = ""  # one of OUTCOME_FILTERS
    tool: str = ""  # sessions that called this tool
    text: str = ""  # substring of title or path, case-insensitive
    member: str = ""  # the team member whose guard forwarded it (sessions.member)


# ── policies and filter choices ───────────────────────────────────────────────────────────────


def policies(conn: Connection) -> pd.DataFrame:
    q = sa.select(t.policies.c.id, t.policies.c.detector, t.policies.c.label, t.policies.c.is_default).order_by(
        t.policies.c.is_default.desc(), t.policies.c.detector, t.policies.c.label)
    return pd.DataFrame(conn.execute(q).mappings().all(), columns=["id", "detector", "label", "is_default"])


def formats(conn: Connection) -> list[str]:
    q = sa.select(t.sessions.c.format).group_by(t.sessions.c.format).order_by(t.sessions.c.format)
    return [r[0] for r in conn.execute(q)]


def tools(conn: Connection, limit: int = 200) -> list[str]:
    """Distinct tool names, alphabetical (the filter's choices).

    A loose index scan over ix_calls_tool (a recursive "next name after this one"), so it costs
    one index probe per distinct tool instead of a pass over every call.
    """
    c = t.calls.c
    walk = sa.select(sa.func.min(c.tool).label("tool")).cte("tool_walk", recursive=True)
    step = sa.select(sa.select(sa.func.min(c.tool)).where(c.tool > walk.c.tool).scalar_subquery())
    walk = walk.union_all(step.where(walk.c.tool.is_not(None)))
    q = sa.select(walk.c.tool).where(walk.c.tool.is_not(None)).limit(limit)
    return [r[0] for r in conn.execute(q)]


def session_members(conn: Connection, limit: int = 500) -> list[str]:
    """The members whose guards forwarded sessions (the Sessions page's member filter), by email."""
    m = t.sessions.c.member
    return [r[0] for r in conn.execute(sa.select(m).where(m.is_not(None)).group_by(m).order_by(m).limit(limit))]


def date_bounds(conn: Connection) -> tuple[dt.date | None, dt.date | None]:
    lo, hi = conn.execute(sa.select(sa.func.min(t.sessions.c.started_at), sa.func.max(t.sessions.c.started_at))).one()
    return _date(lo), _date(hi)


def _date(value: str | None) -> dt.date | None:
    if not value:
        return None
    try:
        return dt.date.fromisoformat(value[:10])
    except ValueError:
        return None


# ── the Sessions page ─────────────────────────────────────────────────────────────────────────


def _where(f: SessionFilter) -> list:
    """WHERE terms on sessions `s` joined to sources `src` (counters are handled by HAVING)."""
    s, src = t.sessions.c, t.sources.c
    terms = []
    if f.formats:
        terms.append(s.format.in_(f.formats))
    if f.source:
        terms.append(sa.func.lower(src.path).contains(f.source.lower(), autoescape=True))
    # started_at is ISO-8601 text: comparing its date prefix as a string is exact and index-friendly.
    if f.date_from:
        terms.append(s.started_at >= f.date_from.isoformat())
    if f.date_to:
        terms.append(s.started_at < (f.date_to + dt.timedelta(days=1)).isoformat())
    if f.tool:
        # Through ix_calls_tool: only the calls of that tool are read, not every call.
        terms.append(s.id.in_(sa.select(t.calls.c.session_id).where(t.calls.c.tool == f.tool).distinct()))
    if f.member:
        terms.append(s.member == f.member)
    if f.text:
        needle = f.text.lower()
        terms.append(sa.or_(sa.func.lower(s.title).contains(needle, autoescape=True),
                            sa.func.lower(src.path).contains(needle, autoescape=True)))
    return terms


COUNTED = ("strikes", "warnings", "blocks")  # summed over the chosen policies, each policy's its own
SET_MEASURES = ("halts", "saved")  # the chosen policies as one guard: what one setting delivers


def _set_runs(f: SessionFilter):
    """One row per run any chosen policy judged: whether the chosen policies, as one guard, halted
    it (a run two of them halted is one halted run) and the calls that guard saves in it — those
    after the earliest of their halts, up to the run's end (scoring.calls_after), which is the
    largest of their per-run `saved` counts since each counts the calls after its own halt.
    Grouping run_outcomes by its primary key's prefix (session, run) walks it in order."""
    ro = t.run_outcomes.c
    q = (sa.select(ro.session_id, ro.run_idx,
                   sa.func.max(sa.case((ro.outcome == vocab.HALTED, 1), else_=0)).label("halted"),
                   sa.func.max(ro.saved).label("saved"))
         .group_by(ro.session_id, ro.run_idx))
    if f.policies:
        q = q.where(ro.policy_id.in_(f.policies))
    return q.subquery("set_runs")


def _stats(f: SessionFilter):
    """Per session over the chosen policies: strikes, warnings and blocks summed (session_stats,
    walked in primary-key order), halts and calls saved as one guard (_set_runs)."""
    st = t.session_stats.c
    q = sa.select(st.session_id, *[sa.func.sum(getattr(st, m)).label(m) for m in COUNTED]).group_by(st.session_id)
    if f.policies:
        q = q.where(st.policy_id.in_(f.policies))
    counts = q.subquery("counts")
    runs = _set_runs(f)
    per_run = (sa.select(runs.c.session_id, sa.func.sum(runs.c.halted).label("halts"),
                         sa.func.sum(runs.c.saved).label("saved"))
               .group_by(runs.c.session_id).subquery("set_sessions"))
    return (sa.select(counts.c.session_id, *[counts.c[m] for m in COUNTED],
                      *[sa.func.coalesce(per_run.c[m], 0).label(m) for m in SET_MEASURES])
            .select_from(counts.outerjoin(per_run, per_run.c.session_id == counts.c.session_id))
            .subquery("stats"))


def _outcome(f: SessionFilter, sums: dict) -> list:
    if f.outcome == "halted":
        return [sums["halts"] > 0]
    if f.outcome == "warned":
        return [sums["halts"] == 0, (sums["warnings"] + sums["blocks"]) > 0]
    if f.outcome == "clean":
        return [(sums["halts"] + sums["warnings"] + sums["blocks"]) == 0]
    if f.outcome:
        raise ValueError(f"unknown outcome filter {f.outcome!r}; expected one of {OUTCOME_FILTERS}")
    return []


def _grouped(f: SessionFilter):
    """One narrow row per matching session (id, started_at, runs, calls, counters summed over the
    chosen policies). Aggregating session_stats alone (integers only) and joining that to
    sessions is several times faster than grouping joined wide rows; titles and paths are
    fetched afterwards for the one page shown."""
    s, src = t.sessions, t.sources
    stats = _stats(f)
    sums = {m: sa.func.coalesce(stats.c[m], 0) for m in MEASURES}
    return (sa.select(s.c.id, s.c.started_at, s.c.n_runs.label("runs"), s.c.n_calls.label("calls"),
                      *[v.label(k) for k, v in sums.items()])
            .select_from(s.join(src, src.c.id == s.c.source_id).outerjoin(stats, stats.c.session_id == s.c.id))
            .where(*_where(f), *_outcome(f, sums)))


def _matching_ids(f: SessionFilter):
    """A SELECT of the matching session ids, or None when every session matches (no IN needed)."""
    if f.outcome:
        return sa.select(_grouped(f).subquery().c.id)
    terms = _where(f)
    if not terms:
        return None
    s, src = t.sessions, t.sources
    return sa.select(s.c.id).select_from(s.join(src, src.c.id == s.c.source_id)).where(*terms)


def count_sessions(conn: Connection, f: SessionFilter) -> int:
    return conn.execute(sa.select(sa.func.count()).select_from(_grouped(f).subquery())).scalar_one()


def headline(conn: Connection, f: SessionFilter) -> dict[str, int]:
    """Sessions, runs, calls and the chosen policies' counters over every matching session:
    strikes, warnings and blocks summed over the policies; halts (halted runs) and calls saved
    as the chosen policies would deliver them together, as one guard — a run two of them halted
    counts once, and its calls saved are those after the earliest halt (_set_runs), never a sum
    over policies that no one setting could save.

    Three flat aggregates (sessions; session_stats; run_outcomes by run) instead of one
    per-session GROUP BY: the home page shows this on every view, so it must stay cheap on 10k sessions.
    """
    s, st = t.sessions.c, t.session_stats.c
    ids = _matching_ids(f)
    sess = sa.select(sa.func.count().label("sessions"), sa.func.coalesce(sa.func.sum(s.n_runs), 0).label("runs"),
                     sa.func.coalesce(sa.func.sum(s.n_calls), 0).label("calls"))
    stats = sa.select(*[sa.func.coalesce(sa.func.sum(getattr(st, m)), 0).label(m) for m in COUNTED])
    runs = _set_runs(f)
    as_one = sa.select(*[sa.func.coalesce(sa.func.sum(runs.c[m]), 0).label(h)
                         for m, h in (("halted", "halts"), ("saved", "saved"))])
    if ids is not None:
        sess = sess.where(s.id.in_(ids))
        stats = stats.where(st.session_id.in_(ids))
        as_one = as_one.where(runs.c.session_id.in_(ids))
    if f.policies:
        stats = stats.where(st.policy_id.in_(f.policies))
    out = (dict(conn.execute(sess).one()._mapping) | dict(conn.execute(stats).one()._mapping)
           | dict(conn.execute(as_one).one()._mapping))
    return {k: int(v) for k, v in out.items()}


def per_policy(conn: Connection, f: SessionFilter) -> pd.DataFrame:
    """Per chosen policy: sessions halted, halts, warnings, blocks, saved — over the matching sessions."""
    st, p = t.session_stats.c, t.policies.c
    q = (sa.select(p.id.label("policy_id"), p.label.label("policy"),
                   sa.func.count().filter(st.halts > 0).label("sessions_halted"),
                   *[sa.func.coalesce(sa.func.sum(getattr(st, m)), 0).label(m) for m in MEASURES])
         .select_from(t.session_stats.join(t.policies, p.id == st.policy_id))
         .group_by(p.id, p.label).order_by(p.label))
    ids = _matching_ids(f)
    if ids is not None:
        q = q.where(st.session_id.in_(ids))
    if f.policies:
        q = q.where(st.policy_id.in_(f.policies))
    return pd.DataFrame(conn.execute(q).mappings().all(),
                        columns=["policy_id", "policy", "sessions_halted", *MEASURES])


SESSION_COLUMNS = ["id", "title", "format", "path", "started_at", "runs", "calls", *MEASURES]


def sessions_page(conn: Connection, f: SessionFilter, sort: str = "halts", descending: bool = True,
                  limit: int | None = 50, offset: int = 0) -> pd.DataFrame:
    """One page of the session table, sorted in SQL (ties broken by id so pages are stable)."""
    if sort not in SORTABLE:
        raise ValueError(f"cannot sort sessions by {sort!r}; expected one of {SORTABLE}")
    g = _grouped(f).subquery()

    def order(cols):
        key, tie = cols[sort], cols["id"]
        return (key.desc(), tie.desc()) if descending else (key.asc(), tie.asc())

    # Sort and cut the narrow rows first; only the page's rows are widened with title and path.
    page = sa.select(g).order_by(*order(g.c)).limit(limit).offset(offset).subquery("page")
    s, src = t.sessions.c, t.sources.c
    wide = {"id": page.c.id, "title": s.title, "format": s.format, "path": src.path} | {
        c: page.c[c] for c in SESSION_COLUMNS if c not in ("id", "title", "format", "path")}
    q = (sa.select(*[wide[c].label(c) for c in SESSION_COLUMNS])
         .select_from(page.join(t.sessions, s.id == page.c.id).join(t.sources, src.id == s.source_id))
         .order_by(*order(page.c)))
    return pd.DataFrame(conn.execute(q).mappings().all(), columns=SESSION_COLUMNS)


def top_sessions(conn: Connection, f: SessionFilter, n: int = 20, by: str = "halts",
                 total: dict | None = None) -> pd.DataFrame:
    """The chart's rows: top n sessions by `by`, plus one "others" row summing the rest (if any).

    `total` is headline(conn, f) when the caller has it already (saves one aggregate).
    """
    top = sessions_page(conn, f, sort=by, limit=n)
    total = total or headline(conn, f)
    rest = total["sessions"] - len(top)
    rows = top[["id", "title", "started_at", "path", "runs", *MEASURES]].copy()  # day and project name a session
    rows["others"] = 0
    if rest > 0:
        other = {"id": None, "title": f"{rest} other session{'' if rest == 1 else 's'}", "others": rest}
        for c in ("runs", *MEASURES):
            other[c] = total[c] - int(top[c].sum())
        rows = pd.concat([rows, pd.DataFrame([other])], ignore_index=True)
    return rows


# ── the Session page ──────────────────────────────────────────────────────────────────────────


def session_header(conn: Connection, session_id: int) -> dict | None:
    s, src = t.sessions.c, t.sources.c
    q = (sa.select(s.id, s.key, s.title, s.format, s.agent, s.model, s.started_at, s.ended_at, s.n_runs, s.n_calls,
                   s.n_events, src.path, src.status, s.outcome, s.outcome_detail, s.outcome_run)
         .select_from(t.sessions.join(t.sources, src.id == s.source_id)).where(s.id == session_id))
    row = conn.execute(q).mappings().first()
    if row is None:
        return None
    out = dict(row)
    last_ts = conn.execute(sa.select(sa.func.max(t.events.c.ts)).where(t.events.c.session_id == session_id)).scalar()
    out["ended_at"] = out["ended_at"] or last_ts
    out["duration_s"] = _seconds_between(out["started_at"], out["ended_at"])
    return out


def _seconds_between(a: str | None, b: str | None) -> float | None:
    try:
        start = dt.datetime.fromisoformat(a.replace("Z", "+00:00"))
        end = dt.datetime.fromisoformat(b.replace("Z", "+00:00"))
    except (AttributeError, ValueError):
        return None
    if (start.tzinfo is None) != (end.tzinfo is None):
        return None  # one time says its zone and the other does not: how far apart is unknown
    return max(0.0, (end - start).total_seconds())


def run_outcomes(conn: Connection, session_id: int) -> pd.DataFrame:
    """Long form: one row per run × policy (run_idx, n_calls, user_text, policy, outcome, counters)."""
    ro, r, p = t.run_outcomes.c, t.runs.c, t.policies.c
    q = (sa.select(ro.run_idx, r.n_calls, r.user_text, ro.policy_id, p.label.label("policy"), ro.outcome,
                   ro.halt_seq, ro.halt_idx, ro.strikes, ro.warnings, ro.blocks, ro.saved)
         .select_from(t.run_outcomes.join(t.policies, p.id == ro.policy_id)
                      .outerjoin(t.runs, sa.and_(r.session_id == ro.session_id, r.idx == ro.run_idx)))
         .where(ro.session_id == session_id).order_by(ro.run_idx, p.label))
    cols = ["run_idx", "n_calls", "user_text", "policy_id", "policy", "outcome", "halt_seq", "halt_idx",
            "strikes", "warnings", "blocks", "saved"]
    return pd.DataFrame(conn.execute(q).mappings().all(), columns=cols)


def outcome_matrix(long: pd.DataFrame) -> pd.DataFrame:
    """Runs × policies, each cell the run's outcome under that policy (pure reshaping)."""
    if long.empty:
        return pd.DataFrame(columns=["run"])
    wide = long.pivot_table(index="run_idx", columns="policy", values="outcome", aggfunc="first")
    wide.columns.name = None
    wide = wide.reset_index().rename(columns={"run_idx": "run"})
    calls = long.groupby("run_idx")["n_calls"].first().fillna(0).astype(int).tolist()
    wide.insert(1, "calls", calls)
    return wide


def halts(conn: Connection, session_id: int, run_idx: int | None = None) -> pd.DataFrame:
    """Where each policy halted (run, seq, idx), earliest first."""
    ro, p = t.run_outcomes.c, t.policies.c
    q = (sa.select(ro.run_idx, ro.policy_id, p.label.label("policy"), ro.halt_seq, ro.halt_idx)
         .select_from(t.run_outcomes.join(t.policies, p.id == ro.policy_id))
         .where(ro.session_id == session_id, ro.outcome == vocab.HALTED, ro.halt_seq.is_not(None))
         .order_by(ro.halt_seq, p.label))
    if run_idx is not None:
        q = q.where(ro.run_idx == run_idx)
    return pd.DataFrame(conn.execute(q).mappings().all(), columns=["run_idx", "policy_id", "policy", "halt_seq", "halt_idx"])


TIMELINE_COLUMNS = ["seq", "idx", "run_idx", "tool", "args", "policy", "detector", "verdict", "count", "total",
                    "threshold", "reason"]


def timeline(conn: Connection, session_id: int, run_idx: int | None = None, limit: int = 6000,
             args_chars: int = 300) -> pd.DataFrame:
    """Every check of the session (or one run) with the call it judged; batch-level checks are
    spread over each call of their batch, prose checks sit in the PROSE_TOOL lane."""
    c, k, p = t.calls.c, t.checks.c, t.policies.c
    on = sa.and_(c.session_id == k.session_id, c.seq == k.seq, sa.or_(k.idx == t.BATCH_LEVEL, c.idx == k.idx))
    q = (sa.select(k.seq, sa.func.coalesce(c.idx, k.idx).label("idx"), k.run_idx,
                   sa.func.coalesce(c.tool, PROSE_TOOL).label("tool"),
                   sa.func.substr(c.args, 1, args_chars).label("args"), p.label.label("policy"), p.detector,
                   k.verdict, k.count, k.total, k.threshold, k.reason)
         .select_from(t.checks.join(t.policies, p.id == k.policy_id).outerjoin(t.calls, on))
         .where(k.session_id == session_id)
         .order_by(k.seq, sa.func.coalesce(c.idx, k.idx), p.label).limit(limit))
    if run_idx is not None:
        q = q.where(k.run_idx == run_idx)
    return pd.DataFrame(conn.execute(q).mappings().all(), columns=TIMELINE_COLUMNS)


TRANSCRIPT_COLUMNS = ["seq", "run_idx", "kind", "ts", "line", "idx", "tool", "args", "answer", "is_error", "text",
                      "args_hash", "answer_hash"]


def transcript(conn: Connection, session_id: int, first_seq: int, last_seq: int) -> pd.DataFrame:
    """Events with seq in [first_seq, last_seq], calls expanded (with their answers) under their batch."""
    e, c = t.events.c, t.calls.c
    ev = conn.execute(sa.select(e.seq, e.run_idx, e.kind, e.ts, e.line, e.text)
                      .where(e.session_id == session_id, e.seq.between(first_seq, last_seq))
                      .order_by(e.seq)).mappings().all()
    calls = conn.execute(sa.select(c.seq, c.idx, c.tool, c.args, c.answer, c.is_error, c.args_hash, c.answer_hash)
                         .where(c.session_id == session_id, c.seq.between(first_seq, last_seq))
                         .order_by(c.seq, c.idx)).mappings().all()
    by_seq: dict[int, list] = {}
    for row in calls:
        by_seq.setdefault(row["seq"], []).append(row)
    out = []
    for row in ev:
        base = {"seq": row["seq"], "run_idx": row["run_idx"], "kind": row["kind"], "ts": row["ts"], "line": row["line"],
                "idx": None, "tool": None, "args": None, "answer": None, "is_error": None, "text": row["text"],
                "args_hash": None, "answer_hash": None}
        if row["kind"] == vocab.KIND_BATCH and row["seq"] in by_seq:
            for call in by_seq[row["seq"]]:
                out.append(base | {"idx": call["idx"], "tool": call["tool"], "args": call["args"],
                                   "answer": call["answer"], "is_error": call["is_error"],
                                   "args_hash": call["args_hash"], "answer_hash": call["answer_hash"]})
        else:
            out.append(base)
    return pd.DataFrame(out, columns=TRANSCRIPT_COLUMNS)


HALT_DETAIL_COLUMNS = ["run_idx", "policy_id", "policy", "detector", "halt_seq", "halt_idx", "count", "total",
                       "threshold", "reason", "tool"]


def halt_details(conn: Connection, session_id: int, run_idx: int | None = None) -> pd.DataFrame:
    """Each halt of the session (per run and policy) with the halting check's own numbers and the
    tool(s) it judged (a batch-level check: the batch's tools, joined), earliest first."""
    ro, p, k = t.run_outcomes.c, t.policies.c, t.checks.c
    on = sa.and_(k.session_id == ro.session_id, k.policy_id == ro.policy_id, k.seq == ro.halt_seq,
                 k.idx == ro.halt_idx)
    q = (sa.select(ro.run_idx, ro.policy_id, p.label.label("policy"), p.detector, ro.halt_seq, ro.halt_idx,
                   k.count, k.total, k.threshold, k.reason)
         .select_from(t.run_outcomes.join(t.policies, p.id == ro.policy_id).outerjoin(t.checks, on))
         .where(ro.session_id == session_id, ro.outcome == vocab.HALTED, ro.halt_seq.is_not(None))
         .order_by(ro.run_idx, ro.halt_seq, p.label))
    if run_idx is not None:
        q = q.where(ro.run_idx == run_idx)
    rows = [dict(r) for r in conn.execute(q).mappings()]
    seqs = sorted({r["halt_seq"] for r in rows})
    tools: dict[tuple[int, int], str] = {}
    if seqs:
        c = t.calls.c
        for seq, idx, tool in conn.execute(sa.select(c.seq, c.idx, c.tool).where(
                c.session_id == session_id, c.seq.in_(seqs)).order_by(c.seq, c.idx)):
            tools[(seq, idx)] = tool
    for r in rows:
        if r["halt_idx"] == t.BATCH_LEVEL:
            names = [tool for (seq, _), tool in tools.items() if seq == r["halt_seq"]]
            r["tool"] = ", ".join(dict.fromkeys(names))
        else:
            r["tool"] = tools.get((r["halt_seq"], r["halt_idx"]), "")
    return pd.DataFrame(rows, columns=HALT_DETAIL_COLUMNS)


SESSION_CALL_COLUMNS = ["n", "seq", "idx", "run_idx", "tool", "args_hash", "answer_hash"]


def seq_of_call(conn: Connection, session_id: int, number: int) -> int | None:
    """The step of call #`number` (1-based over the session, as labels and every page count calls)."""
    c = t.calls.c
    return conn.execute(sa.select(c.seq).where(c.session_id == session_id).order_by(c.seq, c.idx)
                        .offset(max(0, int(number) - 1)).limit(1)).scalar()


def calls_upto(conn: Connection, session_id: int, last_seq: int, limit: int = 2_000) -> pd.DataFrame:
    """The session's last `limit` calls up to step `last_seq`, in every run, oldest first, each with
    `n`, its 1-based call number over the session (what labels and the leaderboard count): what a
    halt's "why" lists, since a multi-turn verdict rests on attempts in earlier runs."""
    c = t.calls.c
    upto = sa.and_(c.session_id == session_id, c.seq <= last_seq)
    total = conn.execute(sa.select(sa.func.count()).select_from(t.calls).where(upto)).scalar() or 0
    rows = conn.execute(sa.select(c.seq, c.idx, c.run_idx, c.tool, c.args_hash, c.answer_hash).where(upto)
                        .order_by(c.seq.desc(), c.idx.desc()).limit(limit)).mappings().all()
    out = [dict(r) | {"n": total - i} for i, r in enumerate(rows)]
    return pd.DataFrame(out[::-1], columns=SESSION_CALL_COLUMNS)


def calls_before(conn: Connection, session_id: int, seq: int) -> int:
    """How many calls the session made before step `seq` (call #N = this + the call's place + 1)."""
    c = t.calls.c
    return int(conn.execute(sa.select(sa.func.count()).select_from(t.calls)
                            .where(c.session_id == session_id, c.seq < seq)).scalar() or 0)


def neighbour_halted_session(conn: Connection, session_id: int, forward: bool = True) -> tuple[int, int] | None:
    """(session, its first halted run) of the halted session after (or before) `session_id` in the
    Sessions page's default order (halts summed over every policy, most first, then the higher id),
    or None at either end. The Session page's next/previous halted run goes on here."""
    st_ = t.session_stats.c
    ranked = (sa.select(st_.session_id, sa.func.sum(st_.halts).label("halts")).group_by(st_.session_id)
              .having(sa.func.sum(st_.halts) > 0).subquery())
    mine = conn.execute(sa.select(ranked.c.halts).where(ranked.c.session_id == session_id)).scalar() or 0
    key = sa.tuple_(ranked.c.halts, ranked.c.session_id)
    if forward:
        q = sa.select(ranked.c.session_id).where(key < sa.tuple_(mine, session_id)).order_by(
            ranked.c.halts.desc(), ranked.c.session_id.desc())
    else:
        q = sa.select(ranked.c.session_id).where(key > sa.tuple_(mine, session_id)).order_by(
            ranked.c.halts.asc(), ranked.c.session_id.asc())
    other = conn.execute(q.limit(1)).scalar()
    if other is None:
        return None
    ro = t.run_outcomes.c
    run = conn.execute(sa.select(sa.func.min(ro.run_idx)).where(ro.session_id == other,
                                                                 ro.outcome == vocab.HALTED)).scalar()
    return int(other), int(run if run is not None else 0)


def session_endings(conn: Connection, session_ids: list[int] | None = None) -> dict[int, tuple[str, str | None, int]]:
    """session → (outcome, detail, run) for the sessions whose transcript says how they ended."""
    s = t.sessions.c
    q = sa.select(s.id, s.outcome, s.outcome_detail, s.outcome_run).where(s.outcome.is_not(None))
    if session_ids is not None:
        q = q.where(s.id.in_(list(session_ids)))
    return {r.id: (r.outcome, r.outcome_detail, r.outcome_run) for r in conn.execute(q)}


def run_bounds(conn: Connection, session_id: int, run_idx: int) -> tuple[int, int] | None:
    r = t.runs.c
    row = conn.execute(sa.select(r.first_seq, r.last_seq).where(r.session_id == session_id, r.idx == run_idx)).first()
    return (row[0], row[1]) if row else None


LABEL_COLUMNS = ["run_idx", "label", "loop_first", "loop_last", "note", "labelled_by", "by_user", "created_at"]


def run_labels(conn: Connection, session_id: int) -> pd.DataFrame:
    """The session's label (one row at most; run_idx: the run it was given from, -1 the whole
    session); `who`: the person (by_user), else how it came (imported, dashboard)."""
    lb = t.labels.c
    q = (sa.select(*[lb[c] for c in LABEL_COLUMNS], sa.func.coalesce(lb.by_user, lb.labelled_by).label("who"))
         .where(lb.session_id == session_id).order_by(lb.run_idx))
    return pd.DataFrame(conn.execute(q).mappings().all(), columns=[*LABEL_COLUMNS, "who"])


LABELS = scoring.LABELS


def calls_per_run(conn: Connection, session_id: int) -> list[int]:
    """Each run's call count, in run order (what a run's 1-based call positions are computed from)."""
    r = t.runs.c
    return [int(n or 0) for (n,) in conn.execute(sa.select(r.n_calls).where(r.session_id == session_id)
                                                 .order_by(r.idx))]


def write_label(conn: Connection, session_id: int, run_idx: int, label: str, note: str = "",
                loop_first: int | None = None, loop_last: int | None = None,
                labelled_by: str = scoring.DASHBOARD, by_user: str | None = None) -> None:
    """A person's judgement of a session, replacing any earlier one (the latest wins); in the
    caller's transaction (the dashboard calls it through loopledger.ledger.writes.save_label).

    `run_idx` is the run it was given from (t.SESSION_LEVEL: the whole session). A loop label
    without its calls covers that run's calls. Raises ValueError for a label the session cannot
    carry (unknown word, a range past its calls). `by_user`: who (an email, a local user name).
    Whether they may is the caller's check (writes.save_label; the CLI's user may)."""
    label = scoring.normalize_label(label)
    if labelled_by not in scoring.LABELLED_BY:
        raise ValueError(f"labelled_by {labelled_by!r}: expected one of {scoring.LABELLED_BY}")
    per_run = calls_per_run(conn, session_id)
    if label == scoring.LOOP and loop_first is None and loop_last is None:
        span = scoring.run_span(per_run, run_idx)
        if span is None:
            raise ValueError(f"run {run_idx} has no calls: say which calls loop (FIRST-LAST)")
        loop_first, loop_last = span
    scoring.check_label(label, loop_first, loop_last, sum(per_run))
    lb = t.labels
    conn.execute(sa.delete(lb).where(lb.c.session_id == session_id))
    conn.execute(sa.insert(lb).values(session_id=session_id, run_idx=run_idx, label=label, note=note or None,
                                      loop_first=loop_first, loop_last=loop_last, labelled_by=labelled_by,
                                      by_user=by_user, created_at=time.time()))


# ── the guard leaderboard ─────────────────────────────────────────────────────────────────────


def label_totals(conn: Connection) -> dict[str, int]:
    """Labelled sessions per label and per who labelled them (`loop`, …, `imported`, `dashboard`)."""
    lb = t.labels.c
    out = dict.fromkeys((*scoring.LABELS, *scoring.LABELLED_BY), 0)
    for col in (lb.label, lb.labelled_by):
        for key, n in conn.execute(sa.select(col, sa.func.count()).group_by(col)):
            out[key] = int(n)
    return out


JUDGED_COLUMNS = ["policy_id", "session_id", "label", "loop_first", "loop_last", "halt_at", "saved", "halt_run",
                  "halt_seq", "warnings", "calls", "flag_at"]


def judged(conn: Connection, policy_ids: tuple[str, ...] = ()) -> pd.DataFrame:
    """One row per stored policy × session labelled loop or normal that the policy judged: the
    label, the 1-based call position of the policy's first halt (None: never halted), calls saved
    after its halts (the ledger's count), the session's calls, and the call position of its first
    warn, block or halt (`flag_at`).

    Labelled sessions are a person's work, so this is small; a call position is one count over
    the session's calls through their primary key. loopledger.analysis.scoring does the rest."""
    lb, st, ro, c, s = t.labels.c, t.session_stats.c, t.run_outcomes.c, t.calls.c, t.sessions.c

    def position(seq, idx):
        """1-based call position of a check at (seq, idx): the calls before it, plus one."""
        idx = sa.case((idx < 0, 0), else_=idx)
        before = (sa.select(sa.func.count()).select_from(t.calls)
                  .where(c.session_id == st.session_id, sa.or_(c.seq < seq, sa.and_(c.seq == seq, c.idx < idx)))
                  .scalar_subquery())
        return before + 1

    halt_at = sa.case((ro.halt_seq.is_(None), None), else_=position(ro.halt_seq, ro.halt_idx))
    fl, fl2 = t.checks.alias("first_flag"), t.checks.alias("first_flag_idx")
    flag_seq = (sa.select(sa.func.min(fl.c.seq))
                .where(fl.c.session_id == st.session_id, fl.c.policy_id == st.policy_id,
                       fl.c.verdict.in_(scoring.FLAGS)).correlate(t.session_stats).scalar_subquery())
    flag_idx = (sa.select(sa.func.min(fl2.c.idx))
                .where(fl2.c.session_id == st.session_id, fl2.c.policy_id == st.policy_id, fl2.c.seq == flag_seq,
                       fl2.c.verdict.in_(scoring.FLAGS)).correlate(t.session_stats).scalar_subquery())
    flag_at = sa.case((flag_seq.is_(None), None), else_=position(flag_seq, flag_idx))
    q = (sa.select(st.policy_id, st.session_id, lb.label, lb.loop_first, lb.loop_last, halt_at.label("halt_at"),
                   st.saved, ro.run_idx.label("halt_run"), ro.halt_seq, st.warnings, s.n_calls.label("calls"),
                   flag_at.label("flag_at"))
         .select_from(t.session_stats.join(t.labels, lb.session_id == st.session_id)
                      .join(t.sessions, s.id == st.session_id)
                      .outerjoin(t.run_outcomes, sa.and_(ro.session_id == st.session_id, ro.policy_id == st.policy_id,
                                                         ro.outcome == vocab.HALTED,
                                                         ro.halt_seq == st.first_halt_seq)))
         .where(lb.label.in_((scoring.LOOP, scoring.NORMAL)))
         .order_by(st.policy_id, st.session_id))
    if policy_ids:
        q = q.where(st.policy_id.in_(policy_ids))
    return pd.DataFrame(conn.execute(q).mappings().all(), columns=JUDGED_COLUMNS)


def judged_rows(frame: pd.DataFrame) -> list[scoring.Judged]:
    """judged()'s rows as scoring.Judged (pure)."""
    def opt(v):
        return None if v is None or pd.isna(v) else int(v)

    return [scoring.Judged(r.policy_id, int(r.session_id), r.label, opt(r.loop_first), opt(r.loop_last),
                           opt(r.halt_at), int(r.saved or 0), opt(r.halt_run), opt(r.halt_seq),
                           int(r.warnings or 0), opt(r.calls), opt(r.flag_at))
            for r in frame.itertuples(index=False)]


UNLABELLED_HALT_COLUMNS = ["session_id", "policy_id", "halted"]


def unlabelled_halts(conn: Connection, policy_ids: tuple[str, ...]) -> pd.DataFrame:
    """For each session with no label at all, whether each of `policy_ids` halted it (one row per
    policy × session it judged): what scoring.label_next reads to say which session to label."""
    st, lb = t.session_stats.c, t.labels.c
    if not policy_ids:
        return pd.DataFrame(columns=UNLABELLED_HALT_COLUMNS)
    labelled = sa.select(lb.session_id)
    q = (sa.select(st.session_id, st.policy_id, st.first_halt_seq.is_not(None).label("halted"))
         .where(st.policy_id.in_(policy_ids), st.session_id.not_in(labelled))
         .order_by(st.session_id, st.policy_id))
    return pd.DataFrame(conn.execute(q).mappings().all(), columns=UNLABELLED_HALT_COLUMNS)


BRIEF_COLUMNS = ["id", "key", "title", "path", "n_calls"]


def sessions_brief(conn: Connection, session_ids: list[int]) -> pd.DataFrame:
    """Id, key, title, source path and call count of the given sessions (a page of a run list)."""
    s, src = t.sessions.c, t.sources.c
    if not session_ids:
        return pd.DataFrame(columns=BRIEF_COLUMNS)
    q = (sa.select(s.id, s.key, s.title, src.path, s.n_calls)
         .select_from(t.sessions.join(t.sources, src.id == s.source_id))
         .where(s.id.in_([int(i) for i in session_ids])).order_by(s.id))
    return pd.DataFrame(conn.execute(q).mappings().all(), columns=BRIEF_COLUMNS)


LABEL_LIST_COLUMNS = ["session_id", "path", "key", "label", "loop_calls", "note", "labelled_by", "by_user",
                      "labelled_at"]


def label_list(conn: Connection, labelled_by: str = "", limit: int = 200, offset: int = 0) -> pd.DataFrame:
    """Who labelled what: every label with its session, newest first."""
    lb, s, src = t.labels.c, t.sessions.c, t.sources.c
    q = (sa.select(lb.session_id, src.path, s.key, lb.label, lb.loop_first, lb.loop_last, lb.note, lb.labelled_by,
                   lb.by_user, lb.created_at)
         .select_from(t.labels.join(t.sessions, s.id == lb.session_id).join(t.sources, src.id == s.source_id))
         .order_by(lb.created_at.desc().nulls_last(), lb.session_id).limit(limit).offset(offset))
    if labelled_by:
        q = q.where(lb.labelled_by == labelled_by)
    rows = [dict(r) | {"loop_calls": scoring.format_loop_calls(r["loop_first"], r["loop_last"]),
                       "labelled_at": r["created_at"]} for r in conn.execute(q).mappings()]
    df = pd.DataFrame(rows, columns=LABEL_LIST_COLUMNS)
    df["labelled_at"] = pd.to_datetime(df["labelled_at"], unit="s", utc=True)
    return df


# ── the Ingest health page ────────────────────────────────────────────────────────────────────


def source_status_counts(conn: Connection) -> dict[str, int]:
    src = t.sources.c
    return {r[0]: int(r[1]) for r in conn.execute(sa.select(src.status, sa.func.count()).group_by(src.status))}


def ingest_totals(conn: Connection) -> dict:
    src = t.sources.c
    row = conn.execute(sa.select(sa.func.count(), sa.func.max(src.ingested_at), sa.func.coalesce(sa.func.sum(src.size), 0))).one()
    errors = conn.execute(sa.select(sa.func.count()).select_from(t.ingest_errors)).scalar_one()
    return {"sources": int(row[0]), "last_ingest": row[1], "bytes": int(row[2]), "quarantined_lines": int(errors)}


SOURCE_COLUMNS = ["id", "path", "format", "status", "last_ingest", "size", "sessions", "calls", "errors", "error"]


def sources_page(conn: Connection, status: str = "", limit: int = 100, offset: int = 0) -> pd.DataFrame:
    """Sources with their counts, most recently ingested first."""
    src, s, ie = t.sources.c, t.sessions.c, t.ingest_errors.c
    sess = (sa.select(s.source_id, sa.func.count().label("sessions"), sa.func.sum(s.n_calls).label("calls"))
            .group_by(s.source_id).subquery())
    errs = sa.select(ie.source_id, sa.func.count().label("errors")).group_by(ie.source_id).subquery()
    q = (sa.select(src.id, src.path, src.format, src.status, src.ingested_at.label("last_ingest"), src.size,
                   sa.func.coalesce(sess.c.sessions, 0).label("sessions"), sa.func.coalesce(sess.c.calls, 0).label("calls"),
                   sa.func.coalesce(errs.c.errors, 0).label("errors"), src.error)
         .select_from(t.sources.outerjoin(sess, sess.c.source_id == src.id).outerjoin(errs, errs.c.source_id == src.id))
         .order_by(src.ingested_at.desc().nulls_last(), src.id.desc()).limit(limit).offset(offset))
    if status:
        q = q.where(src.status == status)
    df = pd.DataFrame(conn.execute(q).mappings().all(), columns=SOURCE_COLUMNS)
    df["last_ingest"] = pd.to_datetime(df["last_ingest"], unit="s", utc=True)
    return df


ERROR_COLUMNS = ["where", "message", "excerpt", "path", "line", "created_at"]


def ingest_errors(conn: Connection, limit: int = 200, offset: int = 0) -> pd.DataFrame:
    """Quarantined lines, newest first, each with `path:line`."""
    ie, src = t.ingest_errors.c, t.sources.c
    q = (sa.select(src.path, ie.line, ie.message, ie.excerpt, ie.created_at)
         .select_from(t.ingest_errors.join(t.sources, src.id == ie.source_id))
         .order_by(ie.created_at.desc().nulls_last(), ie.id.desc()).limit(limit).offset(offset))
    rows = [dict(r) | {"where": f"{r['path']}:{r['line']}" if r["line"] is not None else r["path"]}
            for r in conn.execute(q).mappings()]
    df = pd.DataFrame(rows, columns=ERROR_COLUMNS)
    df["created_at"] = pd.to_datetime(df["created_at"], unit="s", utc=True)
    return df


def labelled_sources(conn: Connection) -> pd.DataFrame:
    """Each session labelled loop or normal with its source file's path, its format and its agent:
    what cross-validation groups them by (loopledger.analysis.crossval.group_of) and what tells
    their family (loopledger.analysis.families.family)."""
    lb, s, src = t.labels.c, t.sessions.c, t.sources.c
    q = (sa.select(lb.session_id, src.path, s.format, s.agent)
         .select_from(t.labels.join(t.sessions, s.id == lb.session_id).join(t.sources, src.id == s.source_id))
         .where(lb.label.in_((scoring.LOOP, scoring.NORMAL))).order_by(lb.session_id))
    return pd.DataFrame(conn.execute(q).mappings().all(), columns=["session_id", "path", "format", "agent"])


def scored_labels(conn: Connection) -> pd.DataFrame:
    """The sessions a score counts (labelled loop or normal) with their loop's calls."""
    lb = t.labels.c
    q = (sa.select(lb.session_id, lb.label, lb.loop_first, lb.loop_last)
         .where(lb.label.in_((scoring.LOOP, scoring.NORMAL))).order_by(lb.session_id))
    return pd.DataFrame(conn.execute(q).mappings().all(), columns=["session_id", "label", "loop_first", "loop_last"])
