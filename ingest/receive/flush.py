"""Spool → ledger, incrementally: each flush reads only the spool bytes it has not read, and
writes only the sessions those spans belong to.

Per spool file the flusher keeps, in memory, an index of its spans (ids, parent, the session id
a span carries, start/end order, byte range: no attributes), which session each span falls in
(otlp.session_of: its own id, else its nearest ancestor's, else its trace), and for each session
it wrote: where its reading stopped (otlp.SessionRead, the last span's order, the events stored).

A flush:
1. indexes the spans the writer handed over in memory (`hand`: the lines it just fsync'd, their
   spans already decoded and redacted), then reads whatever follows on disk that was not handed
   (after a restart: everything after the ledger's offset; only whole lines) and indexes it too;
   a span whose descendants arrived before it (an agent span ends after its tool spans) moves
   them to its session: both sessions are rewritten;
2. for each session that got spans: when they all sort after its last span and say nothing that
   changes its header (model, agent, title), the session is CONTINUED from its stored resume
   snapshot (file_ingest's append path: only the new events replayed, only rows from there on
   replaced; the snapshot and the session's ledger id are kept in memory from the flush that
   committed them, so nothing is read back; all continued sessions are written together by
   file_ingest.apply_tails, one executemany per statement); otherwise it is rewritten whole from
   its spans' byte ranges. Either way the rows
   equal `loopledger ingest` of the spool file (tested);
3. writes all of it, and the spool offset reached (the file's `sources.byte_offset`), in ONE
   transaction. So the ledger's offset always says exactly which spans it holds: a killed
   receiver, a busy ledger or a failed write leaves the offset and the rows as before, the
   spans stay pending (never dropped) and the next flush — or the next start, which re-reads
   the spool from that offset — writes them. Rewrites and continuations replace rows by
   session and seq, so writing a span twice cannot store it twice.

Work per flush follows what arrived (bytes read = new bytes; spans re-read = the touched
sessions' when rewritten, the new ones when continued), not the day. At start the index is
rebuilt by one read of the day's files (the price of a restart).
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import orjson
from loopledger import file_ingest, resume
from loopledger.changes import STATUS_OK, STATUS_QUARANTINED
from loopledger.config import Options
from loopledger.events import SessionInfo
from loopledger.formats import otlp
from loopledger.ledger import schema as s
from loopledger.ledger import store
from loopledger.sessions import SessionGroup, SessionGrouper
from sqlalchemy import select, update
from sqlalchemy.engine import Engine

log = logging.getLogger("loopledger.receive")
# Live resume points kept between flushes (Known.live), at most: each costs ~50 KB with the
# default policies, so this bounds that memory (~13 MB); sessions beyond it continue from their
# sealed snapshot, as without live points.
MAX_LIVE = 256


@dataclass(slots=True)
class Ref:
    """A spooled span, as the index holds it."""

    trace_id: str
    span_id: str
    parent_id: str
    own: str | None  # the session id it carries itself
    order: tuple[int, int, str]  # otlp.sort_key
    offset: int
    length: int
    line: int
    session: str = ""


@dataclass(slots=True)
class Known:
    """A session as the ledger holds it after this process wrote it."""

    read: otlp.SessionRead
    last: tuple[int, int, str]
    seq: int  # events stored
    # Kept warm between flushes (what the ledger holds, as this process committed it): its
    # ledger id and its resume snapshot, so a continuation reads neither back from the ledger.
    sid: int | None = None
    snap: resume.Snapshot | None = None
    # `snap` as live objects (file_ingest.Judged.live), when there is such: the next
    # continuation feeds it instead of unsealing `snap`. Taken (set None) by the one flush that
    # feeds it, so a flush whose write fails leaves the next one `snap` to unseal.
    live: resume.ResumePoint | None = None


@dataclass
class FileState:
    path: Path
    committed: int = 0  # bytes whose spans are in the ledger
    source_id: int | None = None  # its sources row, once written
    indexed: int = 0  # bytes read into the index
    lines: int = 0
    refs: dict[tuple[str, str], Ref] = field(default_factory=dict)
    children: dict[tuple[str, str], list[Ref]] = field(default_factory=dict)
    sessions: dict[str, dict[tuple[str, str], Ref]] = field(default_factory=dict)
    known: dict[str, Known] = field(default_factory=dict)
    rewrite: set[str] = field(default_factory=set)  # sessions to write whole
    new: dict[str, list[Ref]] = field(default_factory=dict)  # sessions' spans not yet written
    gone: bool = False  # some session lost all its spans to another
    fresh: dict[tuple[str, str], otlp.Span] = field(default_factory=dict)  # parsed this flush: not read twice

    @property
    def pending(self) -> bool:
        return bool(self.rewrite or self.new or self.gone or self.committed < self.indexed)


@dataclass
class FlushStats:
    flushes: int = 0
    bytes_read: int = 0  # spool bytes read (index + rewrites)
    spans_read: int = 0  # spans parsed from the spool (index + rewrites)
    last_bytes_read: int = 0
    last_spans_read: int = 0
    # Spans (and their line bytes) the writer handed over in memory (Flusher.hand): indexed
    # without reading or decoding the spool.
    spans_handed: int = 0
    bytes_handed: int = 0
    last_spans_handed: int = 0
    last_bytes_handed: int = 0
    sessions_rewritten: int = 0
    sessions_continued: int = 0
    busy: int = 0  # flushes the ledger refused (locked): retried
    ingested: int = 0  # spans in the ledger
    pending: int = 0  # spans spooled, not yet in the ledger
    last_error: str = ""
    errors: list[str] = field(default_factory=list)


@dataclass
class Plan:
    rows: list[store.SessionRows] = field(default_factory=list)
    tails: list[file_ingest.Tail] = field(default_factory=list)
    known: dict[str, Known] = field(default_factory=dict)
    done: set[str] = field(default_factory=set)
    report: file_ingest.FileReport | None = None


class Flusher:
    """Owns the index of the spool's files; `flush()` is called by one thread at a time."""

    def __init__(self, engine: Engine, folder: Path, opts: Options) -> None:
        self.engine, self.folder, self.opts = engine, Path(folder), opts
        self.files: dict[Path, FileState] = {}
        self.stats = FlushStats()
        # (file, offset, [(line length, its spans)]) the writer appended and fsync'd, waiting for
        # the next flush (the lines' bytes are not kept: they are on disk).
        self._handed: list[tuple[Path, int, list[tuple[int, Any]]]] = []
        self._handed_lock = threading.Lock()
        for path in sorted(self.folder.glob("otlp-*.jsonl")):
            self._start(path.absolute())

    # ── the index ───────────────────────────────────────────────────────────────────────────

    def _start(self, path: Path) -> FileState:
        """A file met for the first time: what the ledger already holds of it is indexed
        without being marked; what follows is pending."""
        fs = FileState(path)
        with self.engine.connect() as conn:
            row = conn.execute(select(s.sources.c.byte_offset, s.sources.c.status, s.sources.c.size)
                               .where(s.sources.c.path == str(path))).first()
        size = path.stat().st_size
        if row is not None and row.status in (STATUS_OK, STATUS_QUARANTINED) and 0 < row.byte_offset <= size:
            fs.committed = row.byte_offset
            self._index(fs, fs.committed, mark=False)
            fs.committed = fs.indexed  # a torn line cut since: the ledger holds what was whole
        self.files[path] = fs
        return fs

    def hand(self, path: Path, start: int, pieces: list[Any]) -> None:
        """The writer's lines just appended (and fsync'd) to `path` at `start`, with their spans
        already decoded and redacted (spool.Piece): the next flush indexes them from memory
        instead of reading the spool back. Only what is on disk is handed, so this changes what
        a flush costs, never what it may write: what is not handed (a restart, a gap) is read
        from the file as before."""
        lines = [(len(p.line), p.spans) for p in pieces]
        with self._handed_lock:
            self._handed.append((path.absolute(), start, lines))

    def _take(self, fs: FileState) -> None:
        """Index the handed lines of `fs` that continue exactly where its index stops; the
        rest of the file (if any) is then read by _index. Lines already indexed (the file
        was read meanwhile) are skipped; after a gap nothing more is taken from memory."""
        with self._handed_lock:
            mine = [h for h in self._handed if h[0] == fs.path]
            self._handed = [h for h in self._handed if h[0] != fs.path]
        for _, offset, lines in sorted(mine, key=lambda h: h[1]):
            for length, spans in lines:
                if offset > fs.indexed:
                    return  # a gap (a failed write's bytes): the file is read from here
                if offset == fs.indexed:
                    self.stats.spans_handed += len(spans)
                    self.stats.last_spans_handed += len(spans)
                    self.stats.bytes_handed += length
                    self.stats.last_bytes_handed += length
                    self._index_line(fs, offset, length, spans, True)
                    fs.indexed += length
                offset += length

    def _index(self, fs: FileState, upto: int | None = None, mark: bool = True) -> None:
        with open(fs.path, "rb") as fh:
            fh.seek(fs.indexed)
            data = fh.read() if upto is None else fh.read(max(0, upto - fs.indexed))
        end = data.rfind(b"\n") + 1  # whole lines only: the writer may be mid-line
        data = data[:end]
        self.stats.bytes_read += len(data)
        self.stats.last_bytes_read += len(data)
        pos = 0
        while pos < end:
            nl = data.index(b"\n", pos)
            spans = list(_spans_of_line(data[pos:nl]))
            self.stats.spans_read += len(spans)
            self.stats.last_spans_read += len(spans)
            self._index_line(fs, fs.indexed + pos, nl + 1 - pos, spans, mark)
            pos = nl + 1
        fs.indexed += end

    def _index_line(self, fs: FileState, offset: int, length: int, spans: Any, mark: bool) -> None:
        """One spool line's spans into the index (read from the file or handed in memory)."""
        fs.lines += 1
        for sp in spans:
            ref = Ref(sp.trace_id, sp.span_id, sp.parent_id, otlp.own_session(sp), otlp.sort_key(sp),
                      offset, length, fs.lines)
            if self._add(fs, ref, mark) and mark:
                sp.line = ref.line
                fs.fresh.setdefault((sp.trace_id, sp.span_id), sp)

    def _add(self, fs: FileState, ref: Ref, mark: bool) -> bool:
        ident = (ref.trace_id, ref.span_id)
        if ident in fs.refs:
            return False  # first seen wins, as a whole-file read has it
        fs.refs[ident] = ref
        fs.children.setdefault((ref.trace_id, ref.parent_id), []).append(ref)
        ref.session = otlp.session_of(ref, fs.refs)
        fs.sessions.setdefault(ref.session, {})[ident] = ref
        if mark:
            fs.new.setdefault(ref.session, []).append(ref)
        # Spans that arrived before this ancestor resolve through it now.
        todo = list(fs.children.get(ident, ()))
        visited = {ident}  # a parent chain may loop (a span its own parent): each span once
        while todo:
            d = todo.pop()
            if (d.trace_id, d.span_id) in visited:
                continue
            visited.add((d.trace_id, d.span_id))
            todo.extend(fs.children.get((d.trace_id, d.span_id), ()))
            moved = otlp.session_of(d, fs.refs)
            if moved == d.session:
                continue
            old = fs.sessions[d.session]
            del old[(d.trace_id, d.span_id)]
            if mark:
                fs.rewrite.add(d.session)
            if not old:
                del fs.sessions[d.session]
                fs.known.pop(d.session, None)
                fs.gone = True
            d.session = moved
            fs.sessions.setdefault(moved, {})[(d.trace_id, d.span_id)] = d
            if mark:
                fs.rewrite.add(moved)
        return True

    def _read(self, fs: FileState, refs: list[Ref]) -> list[otlp.Span]:
        """The spans of `refs` read back by their byte ranges, in `refs`' order."""
        want = {(r.trace_id, r.span_id): r for r in refs}
        got = {i: fs.fresh[i] for i in want if i in fs.fresh}
        with open(fs.path, "rb") as fh:
            for r in sorted((r for i, r in want.items() if i not in got), key=lambda r: r.offset):
                fh.seek(r.offset)
                raw = fh.read(r.length)
                self.stats.bytes_read += len(raw)
                self.stats.last_bytes_read += len(raw)
                for sp in _spans_of_line(raw):
                    self.stats.spans_read += 1
                    self.stats.last_spans_read += 1
                    ident = (sp.trace_id, sp.span_id)
                    if ident in want and ident not in got:
                        sp.line = want[ident].line
                        got[ident] = sp
        return [got[(r.trace_id, r.span_id)] for r in refs if (r.trace_id, r.span_id) in got]

    # ── compute (no writes) ─────────────────────────────────────────────────────────────────

    def _whole(self, fs: FileState, key: str, plan: Plan) -> None:
        refs = sorted(fs.sessions[key].values(), key=lambda r: r.order)
        spans = self._read(fs, refs)
        st = otlp.SessionRead()
        groups = [g for g in SessionGrouper(fs.path).groups(otlp.session_items(key, spans, st)) if g.info is not None]
        for g in groups:
            g.cut = len(g.events)  # a snapshot after every event: the next spans continue from it
            rows, j = file_ingest.session_rows(g, self.opts)
            file_ingest.count_verdicts(plan.report, g.events, j.verdicts)
            plan.rows.append(rows)
            plan.known[key] = Known(st, refs[-1].order, len(g.events), None, rows.resume, j.live)
        self.stats.sessions_rewritten += 1

    def _continue(self, fs: FileState, key: str, refs: list[Ref], conn: Any, plan: Plan) -> bool:
        """The session's new spans on top of its stored snapshot; False when it must be
        rewritten whole instead."""
        known = fs.known.get(key)
        refs = sorted(refs, key=lambda r: r.order)
        if known is None or refs[0].order <= known.last:
            return False
        spans = self._read(fs, refs)
        st = replace(known.read)
        events = [ev for sp in spans for ev in otlp.span_items(sp, st)]
        if (st.title, st.model, st.agent) != (known.read.title, known.read.model, known.read.agent):
            return False  # the session's header changes: rewrite it
        if not events:
            plan.known[key] = replace(known, read=st, last=refs[-1].order)
            return True
        sid = known.sid or store.session_id_of(conn, self._source_id(conn, fs), key)
        if sid is None:
            return False
        live, known.live = known.live, None
        if live is not None and live.seq == known.seq:
            point = live  # warm and live: what the last flush saved, not even unpickled
        elif known.snap is not None and known.snap.seq == known.seq:
            point = resume.point_of(known.snap, self.opts.specs)  # warm: what the last flush saved
        else:
            point = resume.load(conn, sid, self.opts.specs, rebuild=False, seq=known.seq)
        ctx = point.context
        if not (point.complete and isinstance(ctx, dict) and ctx.get("seq") == known.seq):
            return False
        prior = file_ingest.Prior({}, session_id=sid, point=point)
        g = SessionGroup(SessionInfo(key, otlp.NAME), events=events, cut=len(events), resumed=True)
        tail, j = file_ingest.resumed_tail(prior, g, self.opts)
        file_ingest.count_verdicts(plan.report, events, j.verdicts)
        plan.tails.append(tail)
        plan.known[key] = Known(st, refs[-1].order, known.seq + len(events), sid, tail.rows.resume, j.live)
        self.stats.sessions_continued += 1
        return True

    def _source_id(self, conn: Any, fs: FileState) -> int:
        if fs.source_id is None:
            fs.source_id = conn.execute(select(s.sources.c.id).where(s.sources.c.path == str(fs.path))).scalar()
        return fs.source_id or -1

    def _plan(self, fs: FileState) -> Plan:
        plan = Plan(report=file_ingest.FileReport(str(fs.path), action="appended", format=otlp.NAME))
        todo = set(fs.rewrite) | set(fs.new)
        with self.engine.connect() as conn:
            for key in sorted(todo):
                try:
                    if key not in fs.sessions:
                        pass  # it lost every span to another session: deleted below
                    elif key in fs.rewrite or not self._continue(fs, key, fs.new[key], conn, plan):
                        self._whole(fs, key, plan)
                except Exception as exc:  # noqa: BLE001 — one session's fault must not hold back the rest
                    msg = f"{fs.path}: session {key!r} could not be ingested ({file_ingest.one_line(exc)})"
                    log.error("%s", msg, exc_info=exc)
                    self._error(msg)
                    plan.known.pop(key, None)
                    fs.known.pop(key, None)
                plan.done.add(key)
        return plan

    # ── write ───────────────────────────────────────────────────────────────────────────────

    def _write(self, fs: FileState, plan: Plan, upto: int) -> None:
        key = str(fs.path)
        with self.engine.begin() as conn:
            row = file_ingest.claim(conn, key, self.opts.worker_id)
            if row is None:
                raise file_ingest.LedgerBusy(f"{key} is claimed by another worker")
            sid = fs.source_id = row["id"]
            store.ensure_policies(conn, self.opts.specs, self.opts.default_ids)
            if fs.gone:
                store.delete_sessions(conn, sid, keep_keys=fs.sessions.keys())
            file_ingest.write_sessions(conn, sid, plan.rows)
            file_ingest.apply_tails(conn, plan.tails)  # every continued session in one set of statements
            conn.execute(update(s.sources).where(s.sources.c.id == sid).values(
                format=otlp.NAME, size=upto, mtime=None, content_hash=None, byte_offset=upto,
                status=STATUS_OK if row["status"] != STATUS_QUARANTINED else STATUS_QUARANTINED,
                error=None, claimed_by=None, ingested_at=time.time()))

    def flush(self) -> list[file_ingest.FileReport]:
        """Index what was appended, then write every pending session, file by file."""
        self.stats.flushes += 1
        self.stats.last_bytes_read = self.stats.last_spans_read = 0
        self.stats.last_bytes_handed = self.stats.last_spans_handed = 0
        reports = []
        for path in sorted(self.folder.glob("otlp-*.jsonl")):
            path = path.absolute()
            fs = self.files.get(path) or self._start(path)
            self._take(fs)
            try:
                if path.stat().st_size > fs.indexed:
                    self._index(fs)
            except FileNotFoundError:
                continue
            if not fs.pending:
                continue
            upto = fs.indexed
            plan = self._plan(fs)
            fs.fresh.clear()
            try:
                self._write(fs, plan, upto)
            except Exception as exc:  # noqa: BLE001
                # Nothing of it was written (one transaction): every span stays pending.
                if file_ingest.is_busy(exc):
                    self.stats.busy += 1
                    self._error(f"{path}: the ledger is busy ({file_ingest.one_line(exc)}); "
                                "its spans stay in the spool and are written at the next flush")
                else:
                    log.error("%s: write failed", path, exc_info=exc)
                    self._error(f"{path}: could not be written ({file_ingest.one_line(exc)}); "
                                "its spans stay in the spool and are written at the next flush")
                continue
            fs.committed = upto
            fs.known.update(plan.known)
            # Live points cost memory: kept only for the sessions this flush wrote (the ones a
            # stream is adding to), MAX_LIVE of them; the others continue from their sealed
            # snapshot when they get spans again.
            kept = 0
            for k, known in fs.known.items():
                if known.live is not None:
                    if k in plan.known and kept < MAX_LIVE:
                        kept += 1
                    else:
                        known.live = None
            fs.rewrite -= plan.done
            for k in plan.done:
                fs.new.pop(k, None)
            fs.gone = False
            assert plan.report is not None
            reports.append(plan.report)
        self._count()
        return reports

    def _error(self, msg: str) -> None:
        self.stats.last_error = msg
        self.stats.errors = (self.stats.errors + [msg])[-20:]

    def _count(self) -> None:
        pending = ingested = 0
        for fs in self.files.values():
            waiting = sum(len(v) for v in fs.new.values()) + sum(len(fs.sessions.get(k, ())) for k in fs.rewrite
                                                                if k not in fs.new)
            pending += waiting
            ingested += len(fs.refs) - waiting
        self.stats.pending, self.stats.ingested = pending, ingested

    def committed(self) -> dict[Path, int]:
        return {p: fs.committed for p, fs in self.files.items()}

    def forget(self, path: Path) -> None:
        self.files.pop(path.absolute(), None)
        with self._handed_lock:
            self._handed = [h for h in self._handed if h[0] != path.absolute()]


def _spans_of_line(raw: bytes) -> Iterator[otlp.Span]:
    try:
        req = orjson.loads(raw)
        yield from otlp.spans_of_request(req)
    except (orjson.JSONDecodeError, ValueError, TypeError, AttributeError):
        return  # the spool only holds lines the receiver wrote; a foreign line is skipped
