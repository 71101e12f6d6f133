"""The ingest of one file: compute (read, redact, replay, build rows: no writes), then one short
write transaction (claim the source row, check it is still what was computed against, apply).

A worker killed at any moment leaves each file either fully as before or fully ingested.

Compute happens BEFORE the claim in every path (files over BIG_FILE_BYTES excepted: they are
computed under the claim, streaming, so their rows are never held whole); under the claim the
source row is compared with the one the computing started from, and the file is computed again
if it moved. A write lock is therefore held only for the writing.

Appends: when the file's reader can resume (formats.read_from) and the ledger holds its reader
checkpoint and the open session's resume snapshot (loopledger.resume), only the bytes after the
checkpoint are read, only the new events are replayed (from the snapshot) and only rows from
the snapshot's seq on are replaced: the cost follows the appended lines, not the session. The
rows equal a whole-file ingest (tested on SQLite and PostgreSQL). Otherwise an append re-reads
the file and re-judges each session with items past the old end.
"""

from __future__ import annotations

import contextlib
import logging
import operator
import pickle
import tempfile
import time
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any

from loopledger import formats, resume, snapshots
from loopledger.changes import (
    STATUS_ERROR,
    STATUS_MISSING,
    STATUS_OK,
    STATUS_QUARANTINED,
    STATUS_TRUNCATED,
    Scan,
    decide,
    scan,
    stamp,
    unchanged,
)
from loopledger.config import Options
from loopledger.detectors.policy import PolicySpec
from loopledger.events import Batch, Checkpoint, Event, ReadError, SessionInfo
from loopledger.ledger import schema as s
from loopledger.ledger import store
from loopledger.redact import redact_event, redact_text, redact_value
from loopledger.replay import Step
from loopledger.sessions import SessionGroup, SessionGrouper
from sqlalchemy import bindparam, delete, func, select, update
from sqlalchemy.engine import Connection, Engine
from sqlalchemy.exc import DBAPIError, OperationalError

BIG_FILE_BYTES = 32 * 1024 * 1024  # computed under the claim, streaming: a file's rows are not held whole
FLUSH_ROWS = 50_000  # rows held before an executemany round: bounded memory, few round trips


@dataclass(kw_only=True)
class Counts:
    """What ingest counted: one file's report and a whole run's totals are both Counts."""

    sessions: int = 0  # sessions (re)written
    runs: int = 0
    calls: int = 0
    checks: int = 0
    warnings: int = 0
    blocks: int = 0
    halts: int = 0
    quarantined: int = 0

    def add_counts(self, other: Counts) -> None:
        for f in fields(Counts):
            setattr(self, f.name, getattr(self, f.name) + getattr(other, f.name))


@dataclass
class FileReport(Counts):
    path: str
    # new | appended | rewritten | truncated | empty | unchanged | skipped | error | missing; busy =
    # another worker holds it (PostgreSQL), locked = the ledger stayed locked through the retries
    # (nothing written). truncated: the file shrank; what the ledger held from it is kept (note).
    action: str = "skipped"
    format: str | None = None
    bytes: int = 0
    error: str | None = None
    resumed: bool = False  # an append read from the reader's checkpoint, replayed from snapshots
    note: str | None = None  # not an error: e.g. the file shrank and its earlier sessions were kept
    bad_lines: list[str] = field(default_factory=list)  # the first quarantined lines, "FILE:LINE: why"


# ── replaying one session ────────────────────────────────────────────────────────────────────


@dataclass
class Judged:
    """One session (or its new tail) judged: verdicts over the whole session's tallies, rows'
    builder, and the resume snapshot after `cut` events (None when not asked for)."""

    run_of: list[int]
    verdicts: list[store.PolicyVerdicts]
    builder: store.RowBuilder
    snapshot: resume.Snapshot | None
    start: int  # seq of the first event judged here
    pending: dict[str, int | None]  # per policy: the batch still waiting at `start`
    # The point the snapshot was taken of, as live objects, when the snapshot is at the end
    # (cut == every event) and no policy had a batch pending there: the final judging then
    # changed nothing in it, so it equals what unsealing the snapshot would give (with the
    # snapshot's context), without the unpickling. A caller that keeps it warm (the receiver's
    # flusher) must feed it once only: feeding advances it.
    live: resume.ResumePoint | None = None


def _untouched(point: resume.ResumePoint) -> bool:
    """No policy has a batch pending: the end-of-session judging will leave the point as it is."""
    return all(st is not None and st.driver.pending is None for st in point.states.values())


def judge(point: resume.ResumePoint, events: Sequence[Event], builder: store.RowBuilder,
          cut: int | None, cap: int | None = None, seal: bool = True) -> Judged:
    """Feed `events` (the session's events from point.seq on) to every policy and to the row
    builder; with `cut`, snapshot both after that many events (the reader's checkpoint: what
    follows is its end-of-file flush, which a resumed read yields again); then judge what is
    still pending, as the last step of a replay does. `cap`: the policies judge answers capped
    as the ledger stores them (`store.as_stored`), so a recheck from the ledger judges the same.
    `seal=False`, for a snapshot at the end (cut == every event) that the end-of-session judging
    leaves untouched: no snapshot is sealed, the point is returned live only (`Judged.live`;
    the receiver's flusher seals it when it stops keeping it)."""
    start = point.seq
    pending = {sp.id: resume.pending_seq(point, sp) for sp in point.specs}
    cols: list[list[Step]] = [[] for _ in point.specs]  # per policy: its steps
    run_of: list[int] = []
    snap = ctx = None

    def take(part: Sequence[Event]) -> None:
        at = point.seq
        got = resume.feed_columns(point, store.as_stored(part, cap) if cap is not None else part)
        for col, steps in zip(cols, got, strict=True):
            col.extend(steps)
        runs = [st.run for st in got[0]] if got else [0] * len(part)
        run_of.extend(runs)
        add = builder.add
        for i, ev in enumerate(part):
            add(at + i, ev, runs[i])

    lazy = False
    if cut is None:
        take(events)
    else:
        take(events[:cut])
        lazy = not seal and cut == len(events) and _untouched(point)
        if not lazy:
            snap = resume.snapshot(point, context=False)  # the builder's context replaces it below
        ctx = builder.context(point.seq)
        take(events[cut:])
    untouched = cut is not None and cut == len(events) and _untouched(point)
    extra = resume.finish(point)
    for col, more in zip(cols, extra, strict=True):
        if col and more:
            col[-1] = col[-1]._replace(results=col[-1].results + more)
    if ctx is not None:
        ctx["provisional"] = builder.provisional(ctx["seq"])
    if snap is not None and ctx is not None:
        snap = resume.with_context(snap, ctx)
    verdicts = [store.PolicyVerdicts(sp.id, col, point.tally(sp))
                for sp, col in zip(point.specs, cols, strict=True)]
    live = None
    # Only when every state was sealed: else unsealing would give an incomplete point (rebuilt).
    if untouched and (lazy or (snap is not None and all(sp.id in snap.blobs for sp in point.specs)
                               and resume.CONTEXT_ID in snap.blobs)):
        live = resume.ResumePoint(point.specs, point.seq, dict(point.states), ctx)
    return Judged(run_of, verdicts, builder, snap, start, pending, live)


def replay_session(events: Sequence[Any], specs: Sequence[PolicySpec]) -> tuple[list[int], list[store.PolicyVerdicts]]:
    """Every policy over one session's events: (run index per event, each policy's verdicts)."""
    j = judge(resume.fresh(specs), events, store.RowBuilder(), None)
    return j.run_of, j.verdicts


_CHECKS = operator.attrgetter("checks")


def count_verdicts(report: FileReport, events: Sequence[Any], verdicts: Sequence[store.PolicyVerdicts]) -> None:
    """Add one session's counts (checks etc. summed over all policies) to a report."""
    report.sessions += 1
    report.runs += len(verdicts[0].summary.runs) if verdicts else 0
    report.calls += sum(len(ev.calls) for ev in events if isinstance(ev, Batch))
    for pv in verdicts:
        sm = pv.summary
        report.checks += sum(map(len, map(_CHECKS, pv.steps)))
        report.warnings += sm.warnings
        report.blocks += sm.blocks
        report.halts += sm.halts


# ── what the ledger holds about a file ───────────────────────────────────────────────────────


_READER_VERSIONS: dict[str, str] = {}


def reader_version(fmt: str) -> str:
    """A digest of the code a reader checkpoint depends on: another version = read whole. Once
    per format and process: the code a process runs does not change under it."""
    v = _READER_VERSIONS.get(fmt)
    if v is None:
        v = _READER_VERSIONS[fmt] = _reader_version(fmt)
    return v


def _reader_version(fmt: str) -> str:
    here = Path(__file__).resolve().parent
    mod = formats.readers().get(fmt)
    files = [here / "formats" / "_common.py", here / "sessions.py", here / "events.py"]
    if mod is not None and getattr(mod, "__file__", None):
        files.append(Path(mod.__file__).resolve())
    return snapshots.file_digest(files)


@dataclass
class Prior:
    """What the ledger holds about a file, read before computing (no lock held)."""

    row: dict[str, Any]
    keys: list[str] = field(default_factory=list)
    reader: dict[str, Any] | None = None  # {"cp", "key", "repeats", "format", "seq"}
    session_id: int | None = None
    point: resume.ResumePoint | None = None  # the checkpoint session's, complete, with context


NEW_ROW = {"byte_offset": 0, "content_hash": None, "status": "new", "size": 0, "mtime": None}


def read_whole(row: dict[str, Any] | None) -> bool:
    """Whether any change of the file is read whole (changes.decide: never "appended" nor
    "truncated"): a file never read, or one that failed or went missing. Its prior is then the
    row alone: the stored keys, reader checkpoint and resume point serve appends only."""
    return (row is None or row.get("id") is None or not row["byte_offset"]
            or row["status"] in (STATUS_ERROR, STATUS_MISSING))


def load_prior(conn: Connection | None, row: dict[str, Any] | None, opts: Options) -> Prior:
    """What the ledger holds about the file; `conn` may be None when `read_whole(row)` (no query)."""
    if read_whole(row):
        return Prior(dict(row or NEW_ROW))
    assert conn is not None and row is not None
    prior = Prior(row, stored_keys(conn, row["id"]))
    if row["status"] not in (STATUS_OK, STATUS_QUARANTINED):
        return prior
    rs = conn.execute(select(s.reader_states).where(s.reader_states.c.source_id == row["id"])).mappings().first()
    if rs is None or rs["byte_offset"] != row["byte_offset"] or rs["version"] != reader_version(rs["format"]):
        return prior
    st = resume.unseal(rs["state"], rs["version"])
    if not (isinstance(st, dict) and isinstance(st.get("cp"), Checkpoint)):
        return prior
    sid = store.session_id_of(conn, row["id"], st["key"]) if st.get("key") is not None else None
    if sid is None:
        return prior
    point = resume.load(conn, sid, opts.specs, rebuild=False, seq=st["seq"])
    if point.complete and isinstance(point.context, dict) and point.context.get("seq") == st["seq"]:
        prior.reader, prior.session_id, prior.point = st, sid, point
    return prior


def stored_keys(conn: Connection, source_id: int) -> list[str]:
    return list(conn.execute(select(s.sessions.c.key).where(s.sessions.c.source_id == source_id)).scalars())


# ── compute: no writes ───────────────────────────────────────────────────────────────────────


@dataclass
class Tail:
    """The new end of a session resumed from its snapshot: rows from seq `start` on."""

    session_id: int
    key: str
    start: int
    first_run: int  # runs from here on are rewritten (run rows, run outcomes)
    pending: dict[str, int | None]  # per policy: its end-of-file results to replace
    provisional: dict[str, Any]  # answers the old flush joined onto earlier calls
    rows: store.SessionRows
    updates: list[tuple[int, int, tuple]]  # (seq, idx, answer values) of calls stored before
    late: list[tuple[str, int | None, tuple]]  # (call id, pending seq, answer values)
    first_ts: str | None


@dataclass
class Computed:
    """A file read, redacted and replayed, ready to write: pure data (it can come from a child
    process). `sessions` is a list, or a generator the writer drains (inline, memory flat)."""

    action: str
    scan: Scan
    format: str | None = None
    error: str | None = None
    sessions: Iterable[store.SessionRows] = ()
    seen: list[str] = field(default_factory=list)
    errors: list[ReadError] = field(default_factory=list)
    report: FileReport | None = None
    tail: Tail | None = None  # the open session's new end, when resumed
    resumed: bool = False  # read from the reader's checkpoint: only new bytes, new rows
    reader: dict[str, Any] | None = None  # the reader checkpoint to store (None: delete it)
    truncated_from: int | None = None  # the file shrank from this many bytes read: keep what they gave


BAD_LINES_SHOWN = 5  # quarantined lines a report names (all of them are in ingest_errors)


def compute(path: Path, prior: Prior, opts: Options, materialize: bool = False) -> Computed:
    """Scan, read, redact and replay one file against what the ledger holds. No database."""
    row = prior.row
    report = FileReport(str(path))
    sc = scan(path, row["byte_offset"])
    report.bytes = sc.size
    action = decide(row, sc)
    report.action = action
    out = Computed(action, sc, report=report)
    if action in ("unchanged", "touched"):
        return out
    if action == "truncated":
        # As a file that is gone: its sessions are kept (apply moves them aside, marked), and
        # what is in the file now is read as a new file's.
        out.truncated_from = row["byte_offset"]
        out.action = "new"  # the report still says truncated
    if sc.size == 0 or not _has_content(path, sc):
        # Nothing to read (a rotated log starts empty; an agent creates its file first): not an
        # error, and no reader is asked to guess the format of nothing.
        out.action = report.action = "empty" if out.truncated_from is None else "truncated"
        out.format = report.format = row.get("format")
        return out
    if (action == "appended" and prior.point is not None and prior.reader is not None
            and opts.format in (None, prior.reader["format"])):
        return _compute_tail(path, prior, opts, out)
    try:
        fmt = opts.format or formats.sniff(path)
        items = (formats.read_from(path, fmt) if formats.resumable(fmt) else formats.read(path, fmt))
    except (formats.UnknownFormat, OSError, ValueError) as exc:
        out.action = report.action = "error"
        out.error = report.error = redact_text(str(exc))  # stored and printed: it may quote the file
        return out
    out.format = report.format = fmt
    appended = action == "appended"
    stored = set(prior.keys)
    grouper = SessionGrouper(path)

    def sessions() -> Iterator[store.SessionRows]:
        cut_seq = None
        old_end = sc.prefix_lines if appended else 0
        for g in grouper.groups(items):
            out.errors.extend(g.errors)
            if g.info is None:
                continue
            out.seen.append(g.info.key)
            if appended and g.info.key in stored and g.max_line is not None and g.max_line <= old_end:
                continue  # every item of this session lies in the part already stored
            rows, j = session_rows(g, opts)
            count_verdicts(report, g.events, j.verdicts)
            if g.cut is not None:
                cut_seq = g.cut
            yield rows
        if opts.defer_partial_tail and not sc.ends_with_newline:
            # The writer is mid-line: the next change completes it and re-reads this session.
            out.errors[:] = [e for e in out.errors if e.line != sc.lines]
        report.quarantined = len(out.errors)
        report.bad_lines = [str(e) for e in out.errors[:BAD_LINES_SHOWN]]
        if grouper.checkpoint is not None and cut_seq is not None:
            out.reader = {"cp": _redacted_checkpoint(grouper.checkpoint, opts), "key": grouper.checkpoint_key, "repeats": grouper.repeats,
                          "format": fmt, "seq": cut_seq}

    out.sessions = list(sessions()) if materialize else sessions()
    return out


def _has_content(path: Path, sc: Scan) -> bool:
    """Whether a small file holds more than whitespace (a big one is assumed to)."""
    if sc.size > 4096:
        return True
    with open(path, "rb") as fh:
        return bool(fh.read(4096).strip())


def _redacted(info: SessionInfo | None, events: list[Event], opts: Options) -> tuple[Any, list[Event]]:
    # Always through redact_event: --no-redact keeps the secrets, never the depth (a value nested
    # past redact.MAX_DEPTH becomes a marker either way, so no consumer below meets it).
    secrets = opts.redact
    return ((redact_event(info, secrets=secrets) if info is not None else None),
            [redact_event(ev, secrets=secrets) for ev in events])


def _redacted_checkpoint(cp: Checkpoint, opts: Options) -> Checkpoint:
    """The reader's checkpoint as stored: its state holds raw content (a message waiting for more
    lines), so its secrets go as the events' do. Not depth-capped: a resumed reader must read on
    from exactly the state it left (a state too deep to pickle is simply not stored)."""
    state = redact_value(cp.state, secrets=opts.redact, max_depth=None)
    return cp if state is cp.state else Checkpoint(cp.offset, cp.line, state)


def session_rows(g: SessionGroup, opts: Options, seal: bool = True) -> tuple[store.SessionRows, Judged]:
    """One whole session redacted, replayed and turned into its ledger rows (a snapshot after
    `g.cut` events when set; `seal`: see judge)."""
    info, events = _redacted(g.info, g.events, opts)
    j = judge(resume.fresh(opts.specs), events, store.RowBuilder(opts.max_text), g.cut, opts.max_text, seal)
    rows = store.session_rows(info, events, j.run_of, j.verdicts, max_text=opts.max_text, builder=j.builder)
    rows.resume = j.snapshot
    return rows, j


def _compute_tail(path: Path, prior: Prior, opts: Options, out: Computed) -> Computed:
    """An append read from the reader's checkpoint; the open session resumed from its snapshot."""
    report = out.report
    assert report is not None and prior.reader is not None and prior.point is not None
    st = prior.reader
    fmt = st["format"]
    out.format = report.format = fmt
    out.resumed = report.resumed = True
    try:
        items = formats.read_from(path, fmt, st["cp"])
    except (OSError, ValueError) as exc:
        out.action = report.action = "error"
        out.error = report.error = redact_text(str(exc))  # stored and printed: it may quote the file
        return out
    current = SessionInfo(st["key"], fmt)
    grouper = SessionGrouper(path, repeats=st["repeats"], current=current)
    new: list[store.SessionRows] = []
    cut_seq = None
    for g in grouper.groups(items):
        out.errors.extend(g.errors)
        if g.info is None:
            continue
        if g.resumed:
            if g.cut is not None:
                cut_seq = prior.point.seq + g.cut
            if g.events:
                out.tail, j = resumed_tail(prior, g, opts)
                count_verdicts(report, g.events, j.verdicts)
            elif g.cut is not None:
                cut_seq = prior.point.seq  # nothing new in it: its stored snapshot still holds
            continue
        out.seen.append(g.info.key)
        rows, j = session_rows(g, opts)
        if g.cut is not None:
            cut_seq = g.cut
        count_verdicts(report, g.events, j.verdicts)
        new.append(rows)
    out.sessions = new
    if opts.defer_partial_tail and not out.scan.ends_with_newline:
        out.errors[:] = [e for e in out.errors if e.line != out.scan.lines]  # mid-line: read again later
    report.quarantined = len(out.errors)
    report.bad_lines = [str(e) for e in out.errors[:BAD_LINES_SHOWN]]
    if grouper.checkpoint is not None and cut_seq is not None:
        out.reader = {"cp": _redacted_checkpoint(grouper.checkpoint, opts), "key": grouper.checkpoint_key, "repeats": grouper.repeats,
                      "format": fmt, "seq": cut_seq}
    return out


def resumed_tail(prior: Prior, g: SessionGroup, opts: Options, seal: bool = True) -> tuple[Tail, Judged]:
    """A session's new events replayed on top of its stored resume point (`prior.point`): the
    rows from there on, to write with `apply_tails` (`seal`: see judge)."""
    point = prior.point
    assert point is not None and prior.session_id is not None and g.info is not None
    _, events = _redacted(None, g.events, opts)
    ctx = point.context
    first_run = min(ctx["runs"]) if ctx["runs"] else 0
    builder = store.RowBuilder(opts.max_text, ctx)
    j = judge(point, events, builder, g.cut, opts.max_text, seal)
    rows = store.SessionRows(g.info.key, {}, builder.ev_rows, builder.call_rows(), builder.run_rows(),
                             [], [], [], [], usage=builder.usage_rows)
    for pv in j.verdicts:
        store.verdict_rows(rows, pv)
    rows.outcomes = [r for r in rows.outcomes if r[0] >= first_run]
    rows.meta = {"n_events": j.start + len(events), "n_runs": max(j.run_of) + 1 if j.run_of else first_run + 1,
                 "n_calls": builder.n_calls, "ended_at": builder.last_ts}
    rows.resume = j.snapshot
    tail = Tail(prior.session_id, g.info.key, j.start, first_run, j.pending, ctx.get("provisional") or {}, rows,
                [(seq, idx, builder.answer_values(a, aseq)) for seq, idx, aseq, a in builder.updates],
                [(cid, pseq, builder.answer_values(a, aseq)) for cid, aseq, pseq, a in builder.late],
                builder.first_ts)
    return tail, j


# ── apply: the write transaction ─────────────────────────────────────────────────────────────


# The per-file write path's statements, built once (building one costs about as much as running it;
# a small file runs ~20): parameters named b_* bind the WHERE, the others are what they SET.
_SOURCE_BY_PATH = select(s.sources).where(s.sources.c.path == bindparam("b_path"))
_SOURCE_BY_PATH_LOCKED = _SOURCE_BY_PATH.with_for_update(skip_locked=True)
_SOURCE_BY_ID = update(s.sources).where(s.sources.c.id == bindparam("b_sid"))
_CLAIM_BY_PATH = update(s.sources).where(s.sources.c.path == bindparam("b_path"))
_DROP_READER = delete(s.reader_states).where(s.reader_states.c.source_id == bindparam("b_sid"))
_DROP_ERRORS = delete(s.ingest_errors).where(s.ingest_errors.c.source_id == bindparam("b_sid"))


def claim(conn: Connection, path: str, worker_id: str) -> dict[str, Any] | None:
    """Lock the file's source row for this transaction; None when another worker holds it."""
    now = time.time()
    new = [{"path": path, "size": 0, "byte_offset": 0, "status": "new"}]
    if conn.dialect.name == "postgresql":
        store.insert_ignore(conn, s.sources, new)
        row = conn.execute(_SOURCE_BY_PATH_LOCKED, {"b_path": path}).mappings().first()
        if row is None:
            return None
        conn.execute(_SOURCE_BY_ID, {"b_sid": row["id"], "claimed_by": worker_id, "claimed_at": now})
        return dict(row)
    # SQLite: writing first takes the database write lock (waiting out another writer), so the
    # row read next is current and nobody else can change it before this transaction ends. The
    # row is inserted only when the claim found none (register_sources made most rows already):
    # a write statement takes the lock whether or not it matches a row.
    claimed = {"b_path": path, "claimed_by": worker_id, "claimed_at": now}
    if conn.execute(_CLAIM_BY_PATH, claimed).rowcount == 0:
        store.insert_ignore(conn, s.sources, new)
        conn.execute(_CLAIM_BY_PATH, claimed)
    return dict(conn.execute(_SOURCE_BY_PATH, {"b_path": path}).mappings().one())


def _save_reader(conn: Connection, source_id: int, c: Computed) -> None:
    conn.execute(_DROP_READER, {"b_sid": source_id})
    if c.reader is None:
        return
    cp: Checkpoint = c.reader["cp"]
    if cp.offset != c.scan.size:
        return  # the file grew while it was read: bytes past the hashed ones are not vouched for
    v = reader_version(c.reader["format"])
    blob = resume.seal(c.reader, v)
    if blob is not None:
        conn.execute(s.reader_states.insert(), {"source_id": source_id, "format": c.reader["format"],
                                                "byte_offset": cp.offset, "line": cp.line, "version": v,
                                                "state": blob})


def write_sessions(conn: Connection, source_id: int, sessions: Iterable[store.SessionRows]) -> None:
    """Replace these sessions' rows (and resume snapshots) in batches of about FLUSH_ROWS rows."""
    batch: list[store.SessionRows] = []
    held = 0

    def flush() -> None:
        sids = store.write_rows(conn, source_id, batch)
        resume.save_many(conn, [(sid, rows.resume) for sid, rows in zip(sids, batch, strict=True)
                                if rows.resume is not None])

    for rows in sessions:
        batch.append(rows)
        held += rows.size
        if held >= FLUSH_ROWS:
            flush()
            batch, held = [], 0
    flush()


def apply_tail(conn: Connection, t: Tail) -> None:
    """Replace a resumed session's rows from seq `t.start` on (and its run rows from
    `t.first_run` on, its tallies) with the tail's; answers for earlier calls are updated."""
    apply_tails(conn, [t])


_NULL_ANSWER = {"answer": None, "answer_hash": None, "answer_len": None, "is_error": None, "answer_seq": None,
                "answer_ts": None}
_ANSWER_COLS = ("answer", "answer_hash", "answer_len", "is_error", "answer_seq", "answer_ts")


def _many(conn: Connection, stmt: Any, params: list[dict[str, Any]]) -> None:
    if params:
        conn.execute(stmt, params)


def apply_tails(conn: Connection, tails: Sequence[Tail]) -> None:
    """`apply_tail` for many sessions at once: each statement runs ONCE, as an executemany over
    every tail (what a receiver's flush of many continued sessions costs is then a fixed number
    of statements, not a dozen per session). Sessions are independent, so doing step by step
    across them writes what one-by-one would."""
    if not tails:
        return
    c = s.calls.c
    b = bindparam
    by = [{"b_sid": t.session_id, "b_start": t.start} for t in tails]
    for table in (s.events, s.calls, s.turn_usage):
        conn.execute(delete(table).where(table.c.session_id == b("b_sid"), table.c.seq >= b("b_start")), by)
    _many(conn, update(s.calls).where(c.session_id == b("b_sid"), c.seq == b("b_seq"), c.idx == b("b_idx"))
          .values(**_NULL_ANSWER),
          [{"b_sid": t.session_id, "b_seq": seq, "b_idx": idx} for t in tails
           for seq, idx in t.provisional.get("slots", ())])
    _many(conn, update(s.calls).where(c.session_id == b("b_sid"), c.call_id == b("b_cid"), c.answer_seq >= b("b_start"))
          .values(**_NULL_ANSWER),
          [{"b_sid": t.session_id, "b_cid": cid, "b_start": t.start} for t in tails
           for cid in t.provisional.get("ids", ())])
    stored: dict[int, set[str]] = {}
    for sid, pid in conn.execute(select(s.session_stats.c.session_id, s.session_stats.c.policy_id)
                                 .where(s.session_stats.c.session_id.in_([t.session_id for t in tails]))):
        stored.setdefault(sid, set()).add(pid)
    gone = [{"b_sid": t.session_id, "b_pid": pid} for t in tails
            for pid in sorted(stored.get(t.session_id, set()) - set(t.pending))]
    for table in (s.checks, s.results, s.run_outcomes):  # a whole-file ingest keeps only today's policies too
        _many(conn, delete(table).where(table.c.session_id == b("b_sid"), table.c.policy_id == b("b_pid")), gone)
    from_start = [{"b_sid": t.session_id, "b_pid": pid, "b_start": t.start} for t in tails for pid in t.pending]
    for table in (s.checks, s.results):
        _many(conn, delete(table).where(table.c.session_id == b("b_sid"), table.c.policy_id == b("b_pid"),
                                        table.c.seq >= b("b_start")), from_start)
    # Its end-of-file judging: the tail judges it now.
    _many(conn, delete(s.results).where(s.results.c.session_id == b("b_sid"), s.results.c.policy_id == b("b_pid"),
                                        s.results.c.seq == b("b_pseq")),
          [{"b_sid": t.session_id, "b_pid": pid, "b_pseq": pseq} for t in tails
           for pid, pseq in t.pending.items() if pseq is not None])
    runs = [{"b_sid": t.session_id, "b_run": t.first_run} for t in tails]
    conn.execute(delete(s.run_outcomes).where(s.run_outcomes.c.session_id == b("b_sid"),
                                              s.run_outcomes.c.run_idx >= b("b_run")), runs)
    conn.execute(delete(s.runs).where(s.runs.c.session_id == b("b_sid"), s.runs.c.idx >= b("b_run")), runs)
    conn.execute(delete(s.session_stats).where(s.session_stats.c.session_id == b("b_sid")),
                 [{"b_sid": t.session_id} for t in tails])
    store.insert_many_session_rows(conn, [(t.session_id, t.rows) for t in tails])
    answer = {col: b(f"b_{col}") for col in _ANSWER_COLS}
    _many(conn, update(s.calls).where(c.session_id == b("b_sid"), c.seq == b("b_seq"), c.idx == b("b_idx"))
          .values(**answer),
          [{"b_sid": t.session_id, "b_seq": seq, "b_idx": idx, **{f"b_{k}": v for k, v in zip(_ANSWER_COLS, values,
                                                                                             strict=True)}}
           for t in tails for seq, idx, values in t.updates])
    for t in tails:
        for cid, pseq, values in t.late:
            # The latest earlier call with that id, unless already answered or the pending batch's.
            hit = conn.execute(select(c.seq, c.idx, c.answer_seq).where(c.session_id == t.session_id,
                                                                        c.call_id == cid, c.seq < t.start)
                               .order_by(c.seq.desc(), c.idx.desc()).limit(1)).first()
            if hit is not None and hit.answer_seq is None and hit.seq != pseq:
                conn.execute(update(s.calls).where(c.session_id == t.session_id, c.seq == hit.seq, c.idx == hit.idx)
                             .values(dict(zip(_ANSWER_COLS, values, strict=True))))
    now = time.time()
    for keys in sorted({tuple(sorted(t.rows.meta)) for t in tails}):  # one statement per set of columns
        group = [t for t in tails if tuple(sorted(t.rows.meta)) == keys]
        conn.execute(update(s.sessions).where(s.sessions.c.id == b("b_sid")).values(
            updated_at=now, started_at=func.coalesce(s.sessions.c.started_at, b("b_first")),
            **{k: b(f"b_{k}") for k in keys}),
            [{"b_sid": t.session_id, "b_first": t.first_ts, **{f"b_{k}": t.rows.meta[k] for k in keys}}
             for t in group])
    resume.save_many(conn, [(t.session_id, t.rows.resume) for t in tails])


def apply(conn: Connection, source_id: int, c: Computed, opts: Options) -> None:
    """Write a computed file into the ledger (inside the caller's transaction, source claimed)."""
    now = time.time()
    src = s.sources.c
    if c.action == "unchanged":
        conn.execute(update(s.sources).where(src.id == source_id).values(claimed_by=None))
        return
    if c.action == "touched":
        conn.execute(update(s.sources).where(src.id == source_id).values(mtime=c.scan.mtime, claimed_by=None))
        return
    note = _keep_truncated(conn, source_id, c, now) if c.truncated_from is not None else None
    if c.action in ("empty", "truncated"):  # nothing in the file now: an empty source, not an error
        conn.execute(delete(s.reader_states).where(s.reader_states.c.source_id == source_id))
        conn.execute(update(s.sources).where(src.id == source_id).values(
            size=c.scan.size, mtime=c.scan.mtime, content_hash=c.scan.full_hash, byte_offset=c.scan.size,
            status=STATUS_OK, error=note, claimed_by=None, ingested_at=now))
        return
    if c.action == "error":
        # Not "seen": size and mtime are not recorded, so any later ingest tries the file again
        # (the failure may be a bad flag or a crash, not the file).
        conn.execute(update(s.sources).where(src.id == source_id).values(
            size=c.scan.size, mtime=None, content_hash=None, byte_offset=0,
            status=STATUS_ERROR, error=c.error, claimed_by=None, ingested_at=now))
        conn.execute(delete(s.reader_states).where(s.reader_states.c.source_id == source_id))
        return
    store.ensure_policies(conn, opts.specs, opts.default_ids)
    if c.tail is not None:
        apply_tail(conn, c.tail)
    write_sessions(conn, source_id, c.sessions)
    resumed = c.resumed
    if not resumed:  # a resumed append loses no session and keeps the errors already stored
        store.delete_sessions(conn, source_id, keep_keys=c.seen)
        conn.execute(_DROP_ERRORS, {"b_sid": source_id})
    store.bulk_insert(conn, "ingest_errors", ("source_id", "line", "message", "excerpt", "created_at"),
                      [(source_id, e.line, e.message, e.excerpt, now) for e in c.errors])
    store.link_parents(conn, source_id)
    _save_reader(conn, source_id, c)
    quarantined = bool(c.errors) or (resumed and conn.execute(
        select(s.ingest_errors.c.id).where(s.ingest_errors.c.source_id == source_id).limit(1)).first() is not None)
    conn.execute(_SOURCE_BY_ID, {
        "b_sid": source_id, "format": c.format, "size": c.scan.size, "mtime": c.scan.mtime,
        "content_hash": c.scan.full_hash, "byte_offset": c.scan.size,
        "status": STATUS_QUARANTINED if quarantined else STATUS_OK, "error": note, "claimed_by": None,
        "ingested_at": now})


def _keep_truncated(conn: Connection, source_id: int, c: Computed, now: float) -> str:
    """The file shrank below the bytes already read (emptied, rotated, cut): nothing recorded from
    them is lost. Its sessions (their calls, checks, labels, live events) and quarantined lines
    move to a source row of their own, status `truncated`, whose path names the file and when it
    shrank; the file itself is then read as new. Returns the note for the file's row."""
    src = s.sources.c
    old = conn.execute(select(s.sources).where(src.id == source_id)).mappings().one()
    n = conn.execute(select(func.count()).select_from(s.sessions)
                     .where(s.sessions.c.source_id == source_id)).scalar_one()
    assert c.report is not None
    stamp = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(now))
    if not n:
        note = f"the file shrank from {c.truncated_from} to {c.scan.size} bytes at {stamp}; nothing was kept from it"
        c.report.note = note
        return note
    kept = f"{old['path']} (before it shrank, {stamp})"
    while conn.execute(select(src.id).where(src.path == kept)).first() is not None:
        kept += "'"  # shrank twice within a second
    message = (f"{old['path']} shrank from {c.truncated_from} to {c.scan.size} bytes at {stamp} (emptied, "
               f"rotated or cut): the {n} session(s) read from it before are kept here")
    kept_id = conn.execute(s.sources.insert().values(
        path=kept, format=old["format"], size=old["size"], mtime=old["mtime"], content_hash=old["content_hash"],
        byte_offset=old["byte_offset"], status=STATUS_TRUNCATED, error=message,
        ingested_at=old["ingested_at"]).returning(src.id)).scalar_one()
    for table in (s.sessions, s.ingest_errors):
        conn.execute(update(table).where(table.c.source_id == source_id).values(source_id=kept_id))
    conn.execute(delete(s.reader_states).where(s.reader_states.c.source_id == source_id))
    note = (f"the file shrank from {c.truncated_from} to {c.scan.size} bytes at {stamp}; the {n} session(s) "
            f"read from it before are kept under {kept!r}")
    c.report.note = note
    return note


# ── one file, end to end ─────────────────────────────────────────────────────────────────────

log = logging.getLogger("loopledger.ingest")

# Bounded retry when the ledger is busy (another writer holds SQLite's lock past its busy
# timeout, or PostgreSQL aborts a transaction for a conflict): waits before each retry.
BUSY_RETRY_DELAYS = (0.2, 0.5, 1.0)
_PG_BUSY_STATES = {"40001", "40P01", "55P03"}  # serialization failure, deadlock, lock not available


class LedgerBusy(Exception):
    """The ledger stayed locked through every retry: the file was left as it was."""


def is_busy(exc: BaseException) -> bool:
    """A lock or serialization conflict in the database, not a fault of the file."""
    if isinstance(exc, LedgerBusy):
        return True
    if not isinstance(exc, DBAPIError):
        return False
    orig = exc.orig
    if getattr(orig, "sqlstate", None) in _PG_BUSY_STATES:
        return True
    text = str(orig).lower()
    return isinstance(exc, OperationalError) and ("database is locked" in text or "database is busy" in text
                                                  or "database table is locked" in text)


def one_line(exc: BaseException) -> str:
    """An exception as one short line: a driver's message without the SQL and parameters."""
    orig = getattr(exc, "orig", None)
    text = str(orig if orig is not None else exc).strip().splitlines()
    first = text[0] if text else ""
    return f"{type(orig if orig is not None else exc).__name__}: {first[:300]}"


def _missing(engine: Engine, key: str, report: FileReport) -> FileReport:
    with engine.begin() as conn:
        conn.execute(update(s.sources).where(s.sources.c.path == key, s.sources.c.status != STATUS_MISSING)
                     .values(status=STATUS_MISSING, error="the file is gone (its sessions are kept)"))
    report.action = "missing"
    return report


def _crashed(engine: Engine, key: str, exc: Exception) -> FileReport:
    """A reader or detector bug on one file: record it on the source (one line; the traceback
    goes to the log), carry on with the others. The file is not marked seen: tried again later."""
    msg = redact_text(f"{key}: could not be ingested ({one_line(exc)})")  # stored on the source row
    log.error("%s", msg, exc_info=exc)
    with engine.begin() as conn:
        conn.execute(update(s.sources).where(s.sources.c.path == key).values(
            status=STATUS_ERROR, error=msg, byte_offset=0, size=0, mtime=None, claimed_by=None))
    return FileReport(key, action="error", error=msg)


def busy_report(key: str, exc: BaseException) -> FileReport:
    msg = (f"{key}: the ledger is busy ({one_line(exc)}); nothing was written for this file, "
           "it is tried again on the next run")
    log.warning("%s", msg)
    return FileReport(key, action="locked", error=msg)


def look(engine: Engine, path: Path) -> tuple[str, dict[str, Any] | None]:
    """The cheap look before any work: 'missing', 'unchanged' or 'changed', with the source row."""
    try:
        size, mtime = stamp(path)
    except FileNotFoundError:
        return "missing", None
    with engine.connect() as conn:
        row = conn.execute(_SOURCE_BY_PATH, {"b_path": str(path)}).mappings().first()
    row = dict(row) if row else None
    return ("unchanged" if unchanged(row, size, mtime) else "changed"), row


def row_state(row: dict[str, Any]) -> tuple:
    return (row["byte_offset"], row["content_hash"], row["status"], row["size"], row["mtime"])


def precompute(engine: Engine, path: Path, row: dict[str, Any] | None, opts: Options) -> Computed | None:
    """Compute a file against the ledger's current view, before any lock; None when it is
    better done under the claim (a big file: streamed) or failed (redone there, and recorded)."""
    big = path.stat().st_size > BIG_FILE_BYTES
    if big and opts.jobs <= 1:
        return None
    if read_whole(row):  # a new file (most files of a first ingest): no read transaction at all
        prior = load_prior(None, row, opts)
    else:
        with engine.connect() as conn:
            prior = load_prior(conn, row, opts)
    try:
        if not big:
            return compute(path, prior, opts, materialize=True)
        # Several job processes: computed under the claim, a big file would hold the write lock
        # through its whole compute and the other jobs would wait on it. Spilled to disk instead.
        c = compute(path, prior, opts)
        c.sessions = SpilledRows(c.sessions)
        return c
    except Exception:  # noqa: BLE001  (recomputed under the claim, where the failure is recorded)
        log.debug("%s: precompute failed; computing under the claim", path, exc_info=True)
        return None


class SpilledRows:
    """A big file's session rows, computed before the claim and held in an anonymous temporary
    file (pickled one session at a time, so memory stays one session's) until they are written.
    Iterable again and again: a write retried after a busy ledger reads them from the start."""

    def __init__(self, sessions: Iterable[store.SessionRows]) -> None:
        self._fh = tempfile.TemporaryFile(prefix="loopledger-rows-")
        self._n = 0
        for rows in sessions:  # one pickle each, self-contained: nothing kept alive across sessions
            pickle.dump(rows, self._fh, protocol=pickle.HIGHEST_PROTOCOL)
            self._n += 1

    def __iter__(self) -> Iterator[store.SessionRows]:
        self._fh.seek(0)
        for _ in range(self._n):
            yield pickle.load(self._fh)


# The --jobs processes of one SQLite ledger take turns at writing with this lock (jobs.py sets it
# in each of them): the one writer SQLite allows is then handed on the moment it is free, instead of
# the others polling the busy lock in sleeps of up to 100 ms (busy_timeout), which for many small
# files cost more wall time than a second process saved (bench_ingest, small files).
WRITE_TURN: Any = None


def _write(engine: Engine, path: Path, opts: Options, c: Computed | None,
           basis: dict[str, Any] | None) -> FileReport:
    key = str(path)
    with WRITE_TURN if WRITE_TURN is not None else contextlib.nullcontext(), engine.begin() as conn:
        row = claim(conn, key, opts.worker_id)
        if row is None:
            return FileReport(key, action="busy")
        if c is None or row_state(row) != row_state(basis or NEW_ROW):
            c = compute(path, load_prior(conn, row, opts), opts)
        apply(conn, row["id"], c, opts)
        assert c.report is not None
        return c.report


def ingest_file(engine: Engine, path: Path | str, opts: Options, precomputed: Computed | None = None,
                snapshot: dict[str, Any] | None = None) -> FileReport:
    """Bring one file's rows in the ledger up to date: computed first, then one short write
    transaction. `precomputed` (e.g. from a child process) is used when the source row is still
    `snapshot`, the state it was computed against; otherwise the file is computed again under
    the claim. A busy ledger is retried (BUSY_RETRY_DELAYS), then reported as action `locked`
    with nothing recorded against the file."""
    path = Path(path).absolute()
    key = str(path)
    for attempt in range(len(BUSY_RETRY_DELAYS) + 1):
        try:
            if precomputed is None:
                state, row = look(engine, path)
                if state != "changed":
                    return _missing(engine, key, FileReport(key)) if state == "missing" else FileReport(key, "unchanged")
                precomputed, snapshot = precompute(engine, path, row, opts), row
            return _write(engine, path, opts, precomputed, snapshot)
        except FileNotFoundError:
            return _missing(engine, key, FileReport(key))
        except Exception as exc:  # noqa: BLE001  (the transaction rolled back; nothing half-written)
            if is_busy(exc):
                if attempt < len(BUSY_RETRY_DELAYS):
                    log.info("%s: ledger busy (%s), retrying in %.1f s", key, one_line(exc), BUSY_RETRY_DELAYS[attempt])
                    time.sleep(BUSY_RETRY_DELAYS[attempt])
                    continue
                return busy_report(key, exc)
            try:
                return _crashed(engine, key, exc)
            except Exception as exc2:  # noqa: BLE001  (could not even record it: say so, leave the row)
                if is_busy(exc2):
                    return busy_report(key, exc2)
                log.error("%s: could not record the failure", key, exc_info=exc2)
                return FileReport(key, action="error", error=f"{key}: could not be ingested ({one_line(exc)})")
    raise AssertionError("unreachable")


def recorded(engine: Engine, report: FileReport) -> None:
    """For a file left as it was: what the ledger holds about it (so exit codes do not depend on
    whether this run or an earlier one read it)."""
    with engine.connect() as conn:
        row = conn.execute(select(s.sources.c.id, s.sources.c.status, s.sources.c.error, s.sources.c.format)
                           .where(s.sources.c.path == report.path)).first()
        if row is None:
            return
        report.format = row.format
        if row.status == STATUS_ERROR:
            report.action, report.error = "error", row.error
        elif row.status == STATUS_QUARANTINED:
            report.quarantined = conn.execute(
                select(s.ingest_errors.c.id).where(s.ingest_errors.c.source_id == row.id)).all().__len__()
