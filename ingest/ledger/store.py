"""The ledger writer and `load_events`, in SQLAlchemy Core.

Writing: `write_session` replaces one session's rows (events, calls with their answers joined
on, runs, checks, results, run outcomes, session stats) inside the caller's transaction. The
session row itself is kept and updated, so labels a person put on its runs survive a re-ingest.
Rows go in with one executemany per table over plain tuples (no ORM, no per-row dicts): that is
most of the ingest budget.

Reading back: `load_events` rebuilds exactly the events the detectors saw at ingest (after
redaction), so recheck, Replay and Compare judge what the worker judged. Text is stored capped
(`max_text` bytes); a capped text ends in a marker holding the full text's digest, so two capped
texts are equal exactly when the full texts were, and answers carry the full digest.
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

import orjson
from loopledger import gc_pause, vocab
from loopledger.analysis import outcome, pricing
from loopledger.detectors.canonical import call_key
from loopledger.events import (  # TRUNCATED, is_capped: the cap's marker, defined beside the events
    TRUNCATED,  # noqa: F401 (re-exported: store.TRUNCATED)
    Answer,
    Answers,
    Batch,
    Call,
    Event,
    Prose,
    Retry,
    SessionInfo,
    UserTurn,
    is_capped,
    text_digest,
)
from loopledger.ledger import schema as s
from loopledger.ledger.caps import DEFAULT_MAX_TEXT, cap_text  # noqa: F401 (re-exported)
from loopledger.replay import PendingBatch, Step, Tally
from sqlalchemy import bindparam, delete, select, update
from sqlalchemy.dialects.postgresql import insert as pg_insert
from sqlalchemy.dialects.sqlite import insert as sqlite_insert
from sqlalchemy.engine import Connection

ARGS_TRUNCATED_KEY = "$loopledger_truncated_args"
NO_ID = "(no id)"  # the id load_events gives the answer of an id-less call in a batch with ids


def as_stored(events: Sequence[Event], max_text: int) -> list[Event]:
    """The events with every answer's text capped as the ledger stores it (its digest kept): what
    the detectors judge at ingest, so a recheck from the ledger judges exactly the same text
    (progress reads answers, not only their digests)."""
    out: list[Event] = []
    for ev in events:
        if isinstance(ev, Answers) and any(len(a.text) * 4 > max_text for a in ev.answers):
            ev = Answers(tuple(a if len(a.text) * 4 <= max_text else
                               Answer(a.call_id, cap_text(a.text, max_text, a.digest), a.is_error, a.ts, a.digest)
                               for a in ev.answers), ev.line)
        out.append(ev)
    return out


# ── bulk insert ──────────────────────────────────────────────────────────────────────────────


def _insert_sql(conn: Connection, table: str, columns: Sequence[str], session_id: int | None = None) -> str:
    """INSERT for executemany; with `session_id`, the first column is that integer literal."""
    mark = "?" if conn.dialect.paramstyle == "qmark" else "%s"
    cols = ", ".join(f'"{c}"' for c in columns)
    values = [mark] * len(columns)
    if session_id is not None:
        values[0] = str(int(session_id))
    return f'INSERT INTO {table} ({cols}) VALUES ({", ".join(values)})'


def bulk_insert(conn: Connection, table: str, columns: Sequence[str], rows: list[tuple]) -> None:
    """One DB-API executemany of plain tuples: the cheapest path through SQLAlchemy to the driver."""
    if rows:
        conn.exec_driver_sql(_insert_sql(conn, table, columns), rows)


_EVENT_COLS = ("session_id", "seq", "run_idx", "kind", "text", "text_hash", "ts", "line")
_CALL_COLS = ("session_id", "seq", "idx", "run_idx", "call_id", "tool", "args", "args_hash", "args_malformed",
              "answer", "answer_hash", "answer_len", "is_error", "answer_seq", "answer_ts")
_RUN_COLS = ("session_id", "idx", "first_seq", "last_seq", "n_calls", "started_at", "user_text")
_CHECK_COLS = ("session_id", "policy_id", "seq", "idx", "run_idx", "verdict", "count", "total", "threshold",
               "reason")
_RESULT_COLS = ("session_id", "policy_id", "seq", "idx", "outcome")
_STAT_COLS = ("session_id", "policy_id", "runs", "calls", "strikes", "warnings", "blocks", "halts", "saved",
              "halted_runs", "first_halt_seq")
_OUTCOME_COLS = ("session_id", "run_idx", "policy_id", "outcome", "halt_seq", "halt_idx", "strikes", "warnings",
                 "blocks", "saved")
_USAGE_COLS = ("session_id", "seq", "run_idx", "model", "input_tokens", "output_tokens", "cache_read_tokens",
               "cache_write_tokens", "usd", "priced_model", "priced_with", "price_note", "ts")
_CHILD_TABLES = (s.checks, s.results, s.run_outcomes, s.session_stats, s.calls, s.events, s.runs, s.resume_states,
                 s.turn_usage)


# ── policies ─────────────────────────────────────────────────────────────────────────────────


# Statements of the per-file write path, built once: building one costs about as much as running
# it (SQLAlchemy's coercions and cache key), and a file of a ~/.claude/projects folder runs ~20.
_IGNORING: dict[tuple[str, str], Any] = {}


def insert_ignore(conn: Connection, table, rows: list[dict]) -> None:
    """INSERT … ON CONFLICT DO NOTHING (SQLite and PostgreSQL): rows that exist are left alone."""
    if not rows:
        return
    key = (conn.dialect.name, table.name)
    ins = _IGNORING.get(key)
    if ins is None:
        ins = _IGNORING[key] = (pg_insert(table) if conn.dialect.name == "postgresql"
                                else sqlite_insert(table)).on_conflict_do_nothing()
    conn.execute(ins, rows)


def ensure_policies(conn: Connection, specs: Iterable[Any], default_ids: Iterable[str] = ()) -> None:
    """Insert the policies not stored yet (a policy's id is the digest of its spec: never updated)."""
    defaults = set(default_ids)
    now = time.time()
    rows = [{"id": sp.id, "detector": sp.detector, "params": sp.params_json,
             "label": sp.label, "is_default": sp.id in defaults, "created_at": now} for sp in specs]
    insert_ignore(conn, s.policies, rows)


def stored_policies(conn: Connection) -> list[dict[str, Any]]:
    rows = conn.execute(select(s.policies).order_by(s.policies.c.is_default.desc(), s.policies.c.detector,
                                                    s.policies.c.label)).mappings()
    return [dict(r) for r in rows]


# ── sessions ─────────────────────────────────────────────────────────────────────────────────


@dataclass(frozen=True, slots=True)
class PolicyVerdicts:
    """One policy's replay of one session: its steps and their tally (both from loopledger.replay)."""

    policy_id: str
    steps: Sequence[Step]
    summary: Tally


_SESSION_ID = select(s.sessions.c.id).where(s.sessions.c.source_id == bindparam("b_src"),
                                            s.sessions.c.key == bindparam("b_key"))
_CHILD_DELETES = [delete(t).where(t.c.session_id == bindparam("b_sid")) for t in _CHILD_TABLES]


def session_id_of(conn: Connection, source_id: int, key: str) -> int | None:
    return conn.execute(_SESSION_ID, {"b_src": source_id, "b_key": key}).scalar()


def delete_session_rows(conn: Connection, session_id: int) -> None:
    """Every row derived from the session's events (labels stay: they are a person's work)."""
    for stmt in _CHILD_DELETES:
        conn.execute(stmt, {"b_sid": session_id})


_SOURCE_SESSIONS_WITHOUT_LIVE = select(s.sessions.c.id, s.sessions.c.key).where(
    s.sessions.c.source_id == bindparam("b_src"),
    ~select(s.live_events.c.session_id).where(s.live_events.c.session_id == s.sessions.c.id).exists())


def delete_sessions(conn: Connection, source_id: int, keep_keys: Iterable[str] = ()) -> int:
    """Remove the source's sessions whose key is not in `keep_keys` (a rewritten file lost them).

    A session a live hook reported (live_events) stays: its transcript may simply not have
    written its first line yet, and what was enforced is not the file's to take away."""
    keep = set(keep_keys)
    rows = conn.execute(_SOURCE_SESSIONS_WITHOUT_LIVE, {"b_src": source_id})
    gone = [sid for sid, key in rows if key not in keep]
    for sid in gone:
        delete_session_rows(conn, sid)
        conn.execute(delete(s.labels).where(s.labels.c.session_id == sid))
        conn.execute(update(s.sessions).where(s.sessions.c.parent_id == sid).values(parent_id=None))
        conn.execute(delete(s.sessions).where(s.sessions.c.id == sid))
    return len(gone)


def _args_text(call: Call, max_text: int) -> tuple[str, str]:
    """(stored args text, args hash): canonical JSON, or the raw string when malformed."""
    raw, digest = call_key(call)  # the detectors' cached canonical form: serialized once per call
    if call.args_malformed and isinstance(call.args, str):
        text = call.args
    else:
        text = raw.decode("utf-8", "surrogatepass")
    return cap_text(text, max_text, digest), digest


@dataclass(slots=True)
class SessionRows:
    """Everything one session writes, as plain tuples without the session id (prefixed at insert).

    Built by `session_rows` (pure: it can run in another process) and written by `write_rows`."""

    key: str
    meta: dict[str, Any]
    events: list[tuple]
    calls: list[tuple]
    runs: list[tuple]
    checks: list[tuple]
    results: list[tuple]
    stats: list[tuple]
    outcomes: list[tuple]
    resume: Any = None  # the session's resume snapshot after writing (None: drop any stored)
    usage: list[tuple] = field(default_factory=list)  # turn_usage rows: tokens and price per model turn

    @property
    def size(self) -> int:
        return len(self.events) + len(self.calls) + len(self.checks) + len(self.results)


_WITH_USAGE = (Batch, Prose)  # the events that carry token usage


class RowBuilder:
    """One session's event/call/run rows, built event by event: a whole session, or (resumed
    from its `context()`) only the events after a resume snapshot.

    Answers are joined onto their call rows with the replay engine's own pairing
    (`PendingBatch`), so the answers stored on a call are the ones the detectors judged it with.
    An answer that came after its batch was superseded (the detectors never saw it) is still
    joined by call id, for people to read; on reload it sits in the same Answers event, where
    replay ignores it again. In a resumed build, answers for calls stored earlier come out as
    `updates` (the pending batch's calls) and `late` (by call id, resolved in the ledger)."""

    def __init__(self, max_text: int = DEFAULT_MAX_TEXT, context: dict[str, Any] | None = None) -> None:
        self.max_text = max_text
        ctx = context or {}
        self.pending: PendingBatch | None = ctx.get("pending")
        self.runs: dict[int, list] = {k: list(v) for k, v in ctx.get("runs", {}).items()}
        self.first_ts: str | None = ctx.get("first_ts")
        self.last_ts: str | None = ctx.get("last_ts")
        self.n_calls: int = ctx.get("n_calls", 0)
        self.start_seq: int = ctx.get("seq", 0)
        self.by_id: dict[str, tuple[int, int]] = {}  # calls of this build only
        self.out: dict[tuple[int, int], tuple[int, Answer]] = {}
        self.ev_rows: list[tuple] = []
        self.calls: list[tuple[int, int, int, Call]] = []
        self.updates: list[tuple[int, int, int, Answer]] = []  # (seq, idx, answers seq, answer)
        self.late: list[tuple[str, int, int | None, Answer]] = []  # (call id, answers seq, pending seq, answer)
        self.usage_rows: list[tuple] = []

    def context(self, seq: int) -> dict[str, Any]:
        """What a later build resuming after event `seq - 1` needs (small: the pending batch and
        the current run's row)."""
        last = max(self.runs) if self.runs else None
        return {"pending": self.pending, "runs": {last: list(self.runs[last])} if last is not None else {},
                "first_ts": self.first_ts, "last_ts": self.last_ts, "n_calls": self.n_calls, "seq": seq}

    def add(self, seq: int, ev: Event, run: int) -> None:
        # Once per event: the kind is told once, by exact type (events are final dataclasses),
        # isinstance only for what the readers never build.
        t = type(ev)
        is_answers = t is Answers or (t is not Batch and isinstance(ev, Answers))
        ts = _ts(ev) if is_answers else ev.ts
        if ts:
            self.first_ts = self.first_ts or ts
            self.last_ts = ts
        if not is_answers:
            u = ev.usage if isinstance(ev, _WITH_USAGE) else None
            if u is not None:
                p = pricing.price(u, ts or self.last_ts)
                self.usage_rows.append((seq, run, u.model, u.input_tokens, u.output_tokens, u.cache_read_tokens,
                                        u.cache_write_tokens, p.usd, p.model,
                                        pricing.PRICED_WITH if p.usd is not None else None, p.note or None, ts))
        r = self.runs.get(run)
        if r is None:
            r = self.runs[run] = [seq, seq, 0, ts, cap_text(ev.text, self.max_text) if isinstance(ev, UserTurn) else None]
        r[1] = seq
        if is_answers:
            self._answers(seq, ev)  # type: ignore[arg-type]
            self.ev_rows.append((seq, run, vocab.KIND_ANSWERS, None, None, ts, ev.line))
        elif t is Batch or isinstance(ev, Batch):
            calls = ev.calls  # type: ignore[union-attr]
            n = len(calls)
            self.n_calls += n
            r[2] += n
            if n:
                self.pending = PendingBatch(seq, ev)  # type: ignore[arg-type]
                append, by_id = self.calls.append, self.by_id
                for i, c in enumerate(calls):
                    append((seq, i, run, c))
                    if c.id is not None:
                        by_id[c.id] = (seq, i)
            text = ev.text
            self.ev_rows.append((seq, run, vocab.KIND_BATCH, cap_text(text, self.max_text) if text else None,
                                 text_digest(text) if text else None, ev.ts, ev.line))
        else:
            if isinstance(ev, UserTurn):
                self.pending = None
            kind = (vocab.KIND_USER if isinstance(ev, UserTurn)
                    else vocab.KIND_RETRY if isinstance(ev, Retry) else vocab.KIND_PROSE)
            digest = text_digest(ev.text)
            self.ev_rows.append((seq, run, kind, cap_text(ev.text, self.max_text, digest), digest, ev.ts, ev.line))

    def _answers(self, seq: int, ev: Answers) -> None:
        pending, out = self.pending, self.out
        for a in ev.answers:
            if pending is not None and pending.missing:
                missing = pending.missing
                pending.add(a)
                if pending.missing < missing:  # it took a slot: find which, by identity
                    for i, x in enumerate(pending.slots):
                        if x is a and (pending.seq, i) not in out:
                            if pending.seq < self.start_seq:
                                self.updates.append((pending.seq, i, seq, a))
                            out[(pending.seq, i)] = (seq, a)
                            break
                    continue
            if a.call_id is None:
                continue
            slot = self.by_id.get(a.call_id)
            if slot is None:
                if self.start_seq:  # maybe a call stored before: the ledger knows
                    self.late.append((a.call_id, seq, pending.seq if pending is not None else None, a))
            elif slot not in out and (pending is None or slot[0] != pending.seq):
                out[slot] = (seq, a)

    def provisional(self, cut: int) -> dict[str, list]:
        """Answers events from seq `cut` on joined onto calls before it: a resumed build from
        `cut` must take them off again (those events are read again)."""
        slots = [slot for slot, (aseq, _) in self.out.items() if slot[0] < cut <= aseq]
        slots += [(seq, i) for seq, i, aseq, _ in self.updates if aseq >= cut and (seq, i) not in slots]
        return {"slots": slots, "ids": [cid for cid, aseq, _, _ in self.late if aseq >= cut]}

    def answer_values(self, a: Answer, aseq: int) -> tuple:
        return (cap_text(a.text, self.max_text, a.digest), a.digest, len(a.text), a.is_error, aseq, a.ts)

    def call_rows(self) -> list[tuple]:
        rows = []
        out = self.out
        for seq, i, run, c in self.calls:
            args_text, a_hash = _args_text(c, self.max_text)
            paired = out.get((seq, i))
            if paired is None:
                rows.append((seq, i, run, c.id, c.name, args_text, a_hash, c.args_malformed,
                             None, None, None, None, None, None))
            else:
                aseq, a = paired
                rows.append((seq, i, run, c.id, c.name, args_text, a_hash, c.args_malformed,
                             *self.answer_values(a, aseq)))
        return rows

    def run_rows(self) -> list[tuple]:
        return [(idx, *r) for idx, r in sorted(self.runs.items())]


def session_rows(info: SessionInfo, events: Sequence[Event], run_of: Sequence[int],
                 verdicts: Sequence[PolicyVerdicts], *, max_text: int = DEFAULT_MAX_TEXT,
                 builder: RowBuilder | None = None) -> SessionRows:
    """The ledger rows of one session; `run_of[seq]` is event seq's run (as the replay engine
    numbers runs). `builder`: one already fed (the caller wanted its context midway)."""
    if builder is None:
        builder = RowBuilder(max_text)
        for seq, ev in enumerate(events):
            builder.add(seq, ev, run_of[seq])
    meta = {"format": info.format, "title": cap_text(info.title or "", 1024), "agent": info.agent,
            "model": info.model, "started_at": info.started_at or builder.first_ts, "ended_at": builder.last_ts,
            "started_at_original": info.meta.get("started_at_original") if info.meta else None,
            "parent_key": info.parent_key, "n_events": len(events), "n_runs": (max(run_of) + 1) if run_of else 0,
            "n_calls": builder.n_calls}
    ended = outcome.from_meta(info.meta)
    meta |= {"outcome": ended[0] if ended else None, "outcome_detail": ended[1] if ended else None,
             "outcome_run": (max(run_of) if run_of else 0) if ended else None}
    rows = SessionRows(info.key, meta, builder.ev_rows, builder.call_rows(), builder.run_rows(), [], [], [], [],
                       usage=builder.usage_rows)
    for pv in verdicts:
        verdict_rows(rows, pv)
    return rows


def verdict_rows(rows: SessionRows, pv: PolicyVerdicts) -> None:
    pid = pv.policy_id
    checks = rows.checks
    results = rows.results
    for step in pv.steps:
        for c in step.checks:
            checks.append((pid, step.seq, c.idx, step.run, c.verdict, c.count, c.total, c.threshold, c.reason or None))
        for r in step.results:
            results.append((pid, r.seq, r.idx, r.outcome))
    sm = pv.summary
    rows.stats.append((pid, len(sm.runs), sm.calls, sm.strikes, sm.warnings, sm.blocks, sm.halts, sm.saved,
                       sm.halted_runs, sm.first_halt_seq))
    rows.outcomes.extend((rt.run, pid, rt.outcome, rt.halt_seq, rt.halt_idx, rt.strikes, rt.warnings, rt.blocks,
                          rt.saved) for rt in sm.runs)


_ROW_TABLES = (("events", _EVENT_COLS), ("calls", _CALL_COLS), ("runs", _RUN_COLS), ("checks", _CHECK_COLS),
               ("results", _RESULT_COLS), ("session_stats", _STAT_COLS), ("run_outcomes", _OUTCOME_COLS),
               ("turn_usage", _USAGE_COLS))


_NEW_SESSION = s.sessions.insert().returning(s.sessions.c.id)  # the columns: those of the parameters
_SESSION_BY_ID = update(s.sessions).where(s.sessions.c.id == bindparam("b_sid"))  # SET: the other parameters


def write_rows(conn: Connection, source_id: int, sessions: Sequence[SessionRows]) -> list[int]:
    """Replace the rows of these sessions of one source (inside the caller's transaction): one
    executemany per table for all of them. Returns their session ids."""
    now = time.time()
    sids = []
    for rows in sessions:
        sid = session_id_of(conn, source_id, rows.key)
        if sid is None:
            sid = conn.execute(_NEW_SESSION, {"source_id": source_id, "key": rows.key, "updated_at": now,
                                              **rows.meta}).scalar_one()
        else:
            delete_session_rows(conn, sid)
            conn.execute(_SESSION_BY_ID, {"b_sid": sid, "updated_at": now, **rows.meta})
        sids.append(sid)
    insert_many_session_rows(conn, list(zip(sids, sessions, strict=True)))
    return sids


_PART = {"session_stats": "stats", "run_outcomes": "outcomes", "turn_usage": "usage"}  # SessionRows' names


def _insert_part(conn: Connection, table: str, cols: Sequence[str], sid: int, rows: SessionRows) -> None:
    part = getattr(rows, _PART.get(table, table))
    if part:
        # The session id goes into the statement as an integer literal (it is one: it came back
        # from the database), so the row tuples are passed as built, uncopied.
        conn.exec_driver_sql(_insert_sql(conn, table, cols, sid), part)


def insert_many_session_rows(conn: Connection, sessions: Sequence[tuple[int, SessionRows]]) -> None:
    """Insert the rows of many existing sessions: ONE executemany per table for all of them
    (a statement per session and table is what made a flush of many small sessions slow)."""
    if len(sessions) == 1:
        for table, cols in _ROW_TABLES:
            _insert_part(conn, table, cols, sessions[0][0], sessions[0][1])
        return
    for table, cols in _ROW_TABLES:
        attr = _PART.get(table, table)
        bulk_insert(conn, table, cols, [(sid, *r) for sid, rows in sessions for r in getattr(rows, attr)])


def write_session(
    conn: Connection,
    source_id: int,
    info: SessionInfo,
    events: Sequence[Event],
    run_of: Sequence[int],
    verdicts: Sequence[PolicyVerdicts],
    *,
    max_text: int = DEFAULT_MAX_TEXT,
) -> int:
    """Replace one session's rows (call inside a transaction); returns the session id."""
    return write_rows(conn, source_id, [session_rows(info, events, run_of, verdicts, max_text=max_text)])[0]


def replace_verdicts(conn: Connection, session_id: int, verdicts: Sequence[PolicyVerdicts]) -> None:
    """Replace one session's checks/results/stats for the given policies (recheck)."""
    for pv in verdicts:
        for t in (s.checks, s.results, s.run_outcomes, s.session_stats):
            conn.execute(delete(t).where(t.c.session_id == session_id, t.c.policy_id == pv.policy_id))
    rows = SessionRows("", {}, [], [], [], [], [], [], [])
    for pv in verdicts:
        verdict_rows(rows, pv)
    for table, cols, part in (("checks", _CHECK_COLS, rows.checks), ("results", _RESULT_COLS, rows.results),
                              ("session_stats", _STAT_COLS, rows.stats),
                              ("run_outcomes", _OUTCOME_COLS, rows.outcomes)):
        bulk_insert(conn, table, cols, [(session_id, *r) for r in part])


def _link_parents_statement() -> Any:
    parent = s.sessions.alias("parent")
    sub = (select(parent.c.id).where(parent.c.key == s.sessions.c.parent_key, parent.c.id != s.sessions.c.id)
           .order_by(parent.c.id).limit(1).scalar_subquery())
    here = select(s.sessions.c.key).where(s.sessions.c.source_id == bindparam("b_src"))
    return update(s.sessions).where(
        s.sessions.c.parent_key.is_not(None),
        (s.sessions.c.source_id == bindparam("b_src")) | s.sessions.c.parent_key.in_(here)).values(parent_id=sub)


_LINK_PARENTS = _link_parents_statement()


def link_parents(conn: Connection, source_id: int) -> None:
    """Point subagent sessions at their parent session: this source's children, and children stored
    earlier (in other files, e.g. Claude Code's subagents/ folder) whose parent is in this source."""
    conn.execute(_LINK_PARENTS, {"b_src": source_id})


def _ts(ev: Event) -> str | None:
    if isinstance(ev, Answers):
        for a in ev.answers:
            if a.ts:
                return a.ts
        return None
    return ev.ts


# ── reading back ─────────────────────────────────────────────────────────────────────────────


def _parse_args(text: str, malformed: bool, digest: str) -> Any:
    if is_capped(text):
        # The full arguments are gone; a placeholder unique to them keeps "same arguments" exact.
        return {ARGS_TRUNCATED_KEY: digest}
    if malformed:
        return text
    try:
        return orjson.loads(text)
    except orjson.JSONDecodeError:
        import json  # integers beyond 64 bits: valid JSON orjson refuses

        return json.loads(text)


def load_events(conn: Connection, session_id: int, from_seq: int = 0) -> list[Event]:
    """Rebuild a session's events, as the detectors saw them at ingest, from the ledger
    (`from_seq`: only the events from that seq on, e.g. those after a resume snapshot)."""
    with gc_pause.paused():  # every object built here lives on: see loopledger.gc_pause
        return _load_events(conn, session_id, from_seq)


def _load_events(conn: Connection, session_id: int, from_seq: int) -> list[Event]:
    ev = s.events.c
    c = s.calls.c
    call_rows = conn.execute(
        select(c.seq, c.idx, c.call_id, c.tool, c.args, c.args_hash, c.args_malformed, c.answer, c.answer_hash,
               c.is_error, c.answer_seq, c.answer_ts)
        .where(c.session_id == session_id, (c.seq >= from_seq) | (c.answer_seq >= from_seq))
        .order_by(c.seq, c.idx)).all()
    calls_of: dict[int, list[Call]] = {}
    answers_of: dict[int, list[Answer]] = {}
    # In a batch where some calls have ids, an answer without one would go to the first free call
    # of any kind; the answer an id-less call got at ingest must go to the first free id-less call
    # (how it was paired: PendingBatch), so it carries an id that batch does not know.
    with_ids = {row[0] for row in call_rows if row[2] is not None}
    older = {row[0] for row in call_rows if row[0] < from_seq}
    if older:  # batches before from_seq whose answers come later: their other calls were not read
        with_ids |= set(conn.execute(select(c.seq).where(c.session_id == session_id, c.seq.in_(older),
                                                         c.call_id.is_not(None)).distinct()).scalars())
    # The loops below build every event of a session (tens of thousands on the Replay page): locals
    # and a sort only where a step has several answers.
    calls_get, answers_get = calls_of.get, answers_of.get
    for (seq, idx, call_id, tool, args, a_hash, malformed, answer, answer_hash, is_error, answer_seq,
         answer_ts) in call_rows:
        if seq >= from_seq:
            call = Call(call_id, tool, _parse_args(args, bool(malformed), a_hash), bool(malformed))
            got = calls_get(seq)
            if got is None:
                calls_of[seq] = [call]
            else:
                got.append(call)
        if answer_seq is not None and answer_seq >= from_seq:
            answer_id = NO_ID if call_id is None and seq in with_ids else call_id
            item = (seq, idx, Answer(answer_id, answer or "", bool(is_error), answer_ts, answer_hash))
            got = answers_get(answer_seq)
            if got is None:
                answers_of[answer_seq] = [item]
            else:
                got.append(item)
    out: list[Event] = []
    append = out.append
    pending_seq = -1  # the last batch with calls: the one an Answers event answers
    for seq, kind, text, ts, line in conn.execute(
            select(ev.seq, ev.kind, ev.text, ev.ts, ev.line)
            .where(ev.session_id == session_id, ev.seq >= from_seq).order_by(ev.seq)):
        if kind == vocab.KIND_BATCH:
            calls = calls_get(seq)
            append(Batch(tuple(calls) if calls else (), text or "", ts, line))
            if calls or seq < from_seq:
                pending_seq = seq
        elif kind == vocab.KIND_ANSWERS:
            # The pending batch's answers first, in call order; answers joined by id to an older,
            # superseded batch last. At ingest such a late answer found no free call in the
            # pending batch (else the pairing would have joined it there), and calls only fill
            # up, so putting it last pairs every answer exactly as the ingest did.
            got = answers_get(seq, ())
            if len(got) > 1:
                got = sorted(got, key=lambda a: (a[0] != pending_seq, a[0], a[1]))
            append(Answers(tuple(a for _, _, a in got), line))
        elif kind == vocab.KIND_USER:
            append(UserTurn(text or "", ts, line))
        elif kind == vocab.KIND_RETRY:
            append(Retry(text or "", ts, line))
        else:
            append(Prose(text or "", ts, line))
    return out


def session_ids(conn: Connection) -> list[int]:
    return list(conn.execute(select(s.sessions.c.id).order_by(s.sessions.c.id)).scalars())
