"""Spool → ledger, incrementally: each flush reads only the spool bytes it has not read, and
writes only the sessions those spans belong to.

Per spool file the flusher keeps, in memory, an index of its spans (ids, parent, the session id
a span carries, start/end order, byte range: no attributes), which session each span falls in
(otlp.session_of: its own id, else its nearest ancestor's, else its trace), and for each session
it wrote: where its reading stopped (otlp.SessionRead, the last span's order, the events stored).
Spans in the ledger are frozen out of the index after each flush (Cold: byte ranges in arrays,
digests for their sessions and parents) and thawed back only for a rewrite or a move; resume
points stay warm for the last WARM_SNAPSHOTS sessions written (sealed; the newest LIVE_POINTS
also as live objects when the final judging left them untouched). Memory: tens of bytes a span.

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
   committed them, so nothing is read back (an evicted snapshot is loaded from the ledger); all continued sessions are written together by
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
from array import array
from collections import OrderedDict, deque
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
from loopledger.receive.digests import DigestIndex, digest
from loopledger.sessions import SessionGroup, SessionGrouper
from sqlalchemy import select, update
from sqlalchemy.engine import Engine

log = logging.getLogger("loopledger.receive")

# Sessions whose resume snapshot stays in memory between flushes (the most recently written);
# an older one's continuation loads its snapshot from the ledger instead (resume.load).
WARM_SNAPSHOTS = 256
# Of those, the newest sessions that keep their point as live objects (Known.live, never sealed
# while kept), at most: ~65 KB each with the default policies (measured: 50-call sessions), so this
# bounds that memory to ~17 MB. All of the warm LRU: a stream of a few hundred interleaved
# conversations continues every one of them from memory (bench_receive: flushes 40% cheaper
# than with half of them sealed and unsealed at every flush).
LIVE_POINTS = 256
# While the index is rebuilt at start, what it holds is frozen every this many lines.
FREEZE_EVERY = 4096
# Spool bytes one write takes at most (whole lines; a longer line alone): a backlog — a stream
# faster than the ledger, or a restart after one — is written in steps of this size, each its
# own transaction, so what a flush parses and holds at once does not grow with the backlog.
CHUNK_BYTES = 8 << 20
# Spool bytes whose decoded spans the writer may have handed to the flusher (Flusher.hand) and
# not yet taken: one step's worth, so the handoff holds no more than a step read from disk
# would; a write beyond it is not handed (the flush reads it from the spool).
HAND_BYTES = CHUNK_BYTES


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
    # ledger id and its resume point, so a continuation reads neither back from the ledger.
    sid: int | None = None
    # The warm resume point: for the newest LIVE_POINTS sessions of the warm LRU `live`, the
    # point as live objects (file_ingest.Judged.live: the final judging left it untouched), fed
    # as it is, never sealed nor unpickled while it stays warm; for the others `snap`, the sealed
    # snapshot the ledger holds too (unsealed by a continuation; that leaves it as it is). `live`
    # is taken (set None) by the one flush that feeds it: when that flush's write fails, the
    # next one rewrites the session (or unseals `snap`). A live point the flusher stops keeping
    # (out of the warm LRU, or past LIVE_POINTS) is sealed into the ledger then (`stored`).
    snap: resume.Snapshot | None = None
    live: resume.ResumePoint | None = None
    stored: bool = False  # the ledger holds this session's resume snapshot at `seq`

    @property
    def warm(self) -> bool:
        return self.snap is not None or self.live is not None


@dataclass(slots=True)
class Cold:
    """A session's spans that are in the ledger, frozen out of the index: only their byte
    ranges and line numbers (a few bytes a span, no object per span). Thawed back into Refs —
    by reading those lines again — only when the session must be rewritten whole or one of its
    spans moves to another session; a continuation does not need them."""

    idx: int  # its number in FileState.cold_keys (what cold_spans / cold_parents point to)
    offsets: array = field(default_factory=lambda: array("Q"))
    lengths: array = field(default_factory=lambda: array("I"))
    lines: array = field(default_factory=lambda: array("I"))


class _Owned:
    """What session_of walks to for a frozen parent: its session is its Cold's key."""

    __slots__ = ("own",)

    def __init__(self, own: str) -> None:
        self.own = own


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
    # Spans already in the ledger live here, not in refs/sessions/children (see Cold): their
    # session by digest(trace, span id), and the sessions holding children of a span by
    # digest(trace, parent id). An entry of a Cold thawed since is stale (its key is None).
    cold: dict[str, Cold] = field(default_factory=dict)
    cold_keys: list[str | None] = field(default_factory=list)
    cold_spans: DigestIndex = field(default_factory=DigestIndex)
    cold_parents: DigestIndex = field(default_factory=DigestIndex)
    n_cold: int = 0
    warm: OrderedDict[str, None] = field(default_factory=OrderedDict)  # sessions whose snapshot is kept

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
    sessions_continued_live: int = 0  # of those, from a live resume point (Known.live)
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
    lives: int = 0  # Known.live points this plan keeps (at most Flusher.live_points)


class Flusher:
    """Owns the index of the spool's files; `flush()` is called by one thread at a time."""

    def __init__(self, engine: Engine, folder: Path, opts: Options, warm_snapshots: int = WARM_SNAPSHOTS) -> None:
        self.engine, self.folder, self.opts = engine, Path(folder), opts
        self.warm_snapshots = warm_snapshots
        self.live_points = min(LIVE_POINTS, warm_snapshots)
        self.files: dict[Path, FileState] = {}
        self.stats = FlushStats()
        # Per file, (offset, [(line length, its spans)]) of each write the writer appended and
        # fsync'd, in file order, waiting for the next flush (the lines' bytes are not kept: they
        # are on disk); their line bytes add up to _handed_bytes <= HAND_BYTES.
        self._handed: dict[Path, deque[tuple[int, list[tuple[int, Any]]]]] = {}
        self._handed_bytes = 0
        self._handed_lock = threading.Lock()
        # Spans this process spooled per file (hand); only read for a file not in `files`: all
        # of such a file came from this process (a file there at start is started then), and
        # none of it is in the ledger yet.
        self._spooled: dict[Path, int] = {}
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
            while fs.indexed < fs.committed:
                was = fs.indexed
                self._index(fs, min(fs.committed, fs.indexed + CHUNK_BYTES), mark=False)
                if fs.indexed == was:
                    break  # a torn line
            fs.committed = fs.indexed  # a torn line cut since: the ledger holds what was whole
            self._freeze(fs)
        self.files[path] = fs
        return fs

    def hand(self, path: Path, start: int, pieces: list[Any]) -> None:
        """The writer's lines just appended (and fsync'd) to `path` at `start`, with their spans
        already decoded and redacted (spool.Piece): the next flush indexes them from memory
        instead of reading the spool back. Only what is on disk is handed, so this changes what
        a flush costs, never what it may write: what is not handed (a restart, a gap, more than
        HAND_BYTES waiting) is read from the file as before."""
        lines = [(len(p.line), p.spans) for p in pieces]
        size = sum(n for n, _ in lines)
        with self._handed_lock:
            # Counted whether handed or not: spans of a file not yet started (_start could not
            # read the ledger) are pending all the same, and /health says so.
            self._spooled[path.absolute()] = self._spooled.get(path.absolute(), 0) + sum(len(sp) for _, sp in lines)
            if self._handed_bytes + size > HAND_BYTES:
                return  # a backlog: its spans wait on disk only, read in CHUNK_BYTES steps
            self._handed_bytes += size
            self._handed.setdefault(path.absolute(), deque()).append((start, lines))

    def _take(self, fs: FileState, upto: int) -> None:
        """Index the handed lines of `fs` that continue exactly where its index stops, up to
        `upto` (the step's end); the rest of the step is then read from the file by _index.
        Lines already indexed (the file was read meanwhile) are dropped; at a gap (lines that
        were not handed) taking stops and the file is read from there."""
        while True:
            with self._handed_lock:
                queue = self._handed.get(fs.path)
                if not queue:
                    return
                start, lines = queue[0]
                end = start + sum(n for n, _ in lines)
                if start > fs.indexed or (start == fs.indexed and end > upto):
                    return  # a gap, or past this step: left for _index / the next step
                queue.popleft()
                self._handed_bytes -= end - start
            if start < fs.indexed:
                continue  # read from the file already (a restart's rebuild, or after a gap)
            for length, spans in lines:
                self.stats.spans_handed += len(spans)
                self.stats.last_spans_handed += len(spans)
                self.stats.bytes_handed += length
                self.stats.last_bytes_handed += length
                self._index_line(fs, fs.indexed, length, spans, True)
                fs.indexed += length

    def _index(self, fs: FileState, upto: int | None = None, mark: bool = True) -> None:
        with open(fs.path, "rb") as fh:
            fh.seek(fs.indexed)
            want = max(0, upto - fs.indexed) if upto is not None else -1
            data = fh.read(want)
            end = data.rfind(b"\n") + 1  # whole lines only: the writer may be mid-line
            if end == 0 and 0 < want == len(data):
                data += fh.readline()  # one line longer than the step: it alone
                end = data.rfind(b"\n") + 1
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
            if not mark and fs.lines % FREEZE_EVERY == 0:
                self._freeze(fs)  # all of it is in the ledger: the rebuild stays as small as the running index
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
        if ident in fs.refs or digest(*ident) in fs.cold_spans:
            return False  # first seen wins, as a whole-file read has it
        fs.refs[ident] = ref
        fs.children.setdefault((ref.trace_id, ref.parent_id), []).append(ref)
        ref.session = otlp.session_of(ref, _WithCold(fs))
        fs.sessions.setdefault(ref.session, {})[ident] = ref
        if mark:
            fs.new.setdefault(ref.session, []).append(ref)
        # Spans that arrived before this ancestor resolve through it now.
        self._thaw_children(fs, ident)
        todo = list(fs.children.get(ident, ()))
        visited = {ident}  # a parent chain may loop (a span its own parent): each span once
        while todo:
            d = todo.pop()
            if (d.trace_id, d.span_id) in visited:
                continue
            visited.add((d.trace_id, d.span_id))
            self._thaw_children(fs, (d.trace_id, d.span_id))
            todo.extend(fs.children.get((d.trace_id, d.span_id), ()))
            moved = otlp.session_of(d, _WithCold(fs))
            if moved == d.session:
                continue
            self._thaw(fs, d.session)  # it loses a span: all of it is needed (rewritten, or gone)
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

    # ── frozen spans (in the ledger) ────────────────────────────────────────────────────────

    def _freeze(self, fs: FileState) -> None:
        """Move every session's spans that are in the ledger (not waiting to be written) out of
        the index into its Cold. Only between flushes, or while the start rebuilds the index."""
        for key in [k for k in fs.sessions if k not in fs.new and k not in fs.rewrite]:
            refs = fs.sessions.pop(key)
            c = fs.cold.get(key)
            if c is None:
                c = fs.cold[key] = Cold(len(fs.cold_keys))
                fs.cold_keys.append(key)
            parents = set()
            for ident, r in refs.items():
                del fs.refs[ident]
                parents.add((r.trace_id, r.parent_id))
                c.offsets.append(r.offset)
                c.lengths.append(r.length)
                c.lines.append(r.line)
                fs.cold_spans.add(digest(*ident), c.idx)
                if r.parent_id:
                    fs.cold_parents.add(digest(r.trace_id, r.parent_id), c.idx)
            fs.n_cold += len(refs)
            for pk in parents:
                kept = [r for r in fs.children.get(pk, ()) if r.session != key]
                if kept:
                    fs.children[pk] = kept
                else:
                    fs.children.pop(pk, None)

    def _thaw(self, fs: FileState, key: str, keep: bool = False) -> None:
        """A Cold session back into the index, as it was before it froze (its spans re-read).
        `keep`: a rewrite's, whose spans are read next: they are kept parsed for it (fs.fresh,
        cleared when the step's plan is made), not read a second time."""
        c = fs.cold.pop(key, None)
        if c is None:
            return
        fs.cold_keys[c.idx] = None
        fs.n_cold -= len(c.offsets)
        place = fs.sessions.setdefault(key, {})
        with open(fs.path, "rb") as fh:
            for offset, length, line in sorted(set(zip(c.offsets, c.lengths, c.lines, strict=True))):
                fh.seek(offset)
                raw = fh.read(length)
                self.stats.bytes_read += len(raw)
                self.stats.last_bytes_read += len(raw)
                for sp in _spans_of_line(raw):
                    ident = (sp.trace_id, sp.span_id)
                    # An older spool's line holds other sessions' spans too.
                    if ident in fs.refs or c.idx not in fs.cold_spans.values(digest(*ident)):
                        continue
                    self.stats.spans_read += 1
                    self.stats.last_spans_read += 1
                    ref = Ref(sp.trace_id, sp.span_id, sp.parent_id, otlp.own_session(sp), otlp.sort_key(sp),
                              offset, length, line, key)
                    fs.refs[ident] = ref
                    fs.children.setdefault((ref.trace_id, ref.parent_id), []).append(ref)
                    place[ident] = ref
                    if keep:
                        sp.line = line
                        fs.fresh.setdefault(ident, sp)

    def _thaw_children(self, fs: FileState, ident: tuple[str, str]) -> None:
        for i in fs.cold_parents.values(digest(*ident)):
            key = fs.cold_keys[i]
            if key is not None:
                self._thaw(fs, key)

    def _live(self, plan: Plan, live: resume.ResumePoint | None) -> resume.ResumePoint | None:
        """A session's live point kept for the next flush, while this plan holds fewer than
        LIVE_POINTS: a flush touching a thousand sessions must not hold a thousand live points
        (~50 KB each) at once; the others keep only their sealed snapshot."""
        if live is None or plan.lives >= self.live_points:
            return None
        plan.lives += 1
        return live

    def _keep_snapshots(self, fs: FileState, keys: list[str]) -> None:
        """The latest written sessions keep their resume point warm (Known: live or sealed);
        the oldest beyond the bound drop it (a continuation then loads it from the ledger: the
        same point)."""
        # Those with a live point newest (stable: the rest in written order), so the live
        # points kept below are the ones this flush made.
        for k in sorted(keys, key=lambda k: (kn := fs.known.get(k)) is not None and kn.live is not None):
            fs.warm[k] = None
            fs.warm.move_to_end(k)
        retired: list[tuple[str, Known]] = []
        while len(fs.warm) > self.warm_snapshots:
            k, _ = fs.warm.popitem(last=False)
            if (kn := fs.known.get(k)) is not None:
                if kn.live is not None and not kn.stored:
                    retired.append((k, kn))
                else:
                    kn.snap = kn.live = None
        # Live points only for the newest LIVE_POINTS of the warm sessions (the rest unseal).
        lives = 0
        for k in reversed(fs.warm):
            if (kn := fs.known.get(k)) is not None and kn.live is not None:
                lives += 1
                if lives > self.live_points:
                    if kn.stored:
                        kn.live = None
                    else:
                        retired.append((k, kn))
        self._retire(fs, retired)

    def _retire(self, fs: FileState, retired: list[tuple[str, Known]]) -> None:
        """Live points the flusher stops keeping, sealed into the ledger (what a later
        continuation of their session loads), in one transaction. A write that fails costs those
        sessions a rewrite at their next spans, never a row."""
        if not retired:
            return
        try:
            with self.engine.begin() as conn:
                points = []
                for key, kn in retired:
                    sid = kn.sid or store.session_id_of(conn, self._source_id(conn, fs), key)
                    if sid is not None and kn.live is not None:
                        kn.sid = sid
                        points.append((sid, kn.live))
                resume.save_many(conn, points)
        except Exception as exc:  # noqa: BLE001 — derived data: without it the session is rewritten
            log.info("%s: resume snapshots not kept (%s); those sessions are rewritten at their next spans",
                     fs.path, file_ingest.one_line(exc))
        else:
            for _, kn in retired:
                kn.stored = kn.sid is not None
        for _, kn in retired:
            kn.snap = kn.live = None

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
        self._thaw(fs, key, keep=True)
        refs = sorted(fs.sessions[key].values(), key=lambda r: r.order)
        spans = self._read(fs, refs)
        st = otlp.SessionRead()
        groups = [g for g in SessionGrouper(fs.path).groups(otlp.session_items(key, spans, st)) if g.info is not None]
        for g in groups:
            g.cut = len(g.events)  # a snapshot after every event: the next spans continue from it
            # Kept live (plan.lives below the bound): not sealed now, only if the flusher drops it.
            rows, j = file_ingest.session_rows(g, self.opts, seal=plan.lives >= self.live_points)
            file_ingest.count_verdicts(plan.report, g.events, j.verdicts)
            plan.rows.append(rows)
            plan.known[key] = Known(st, refs[-1].order, len(g.events), None, rows.resume, self._live(plan, j.live),
                                    rows.resume is not None)
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
        live, known.live = known.live, None  # feeding advances it: fed once only
        if live is not None and live.seq == known.seq:
            point = live  # warm and live: what the last flush left, not even unpickled
            self.stats.sessions_continued_live += 1
        elif known.snap is not None and known.snap.seq == known.seq:
            point = resume.point_of(known.snap, self.opts.specs)  # warm: what the last flush saved
        else:
            point = resume.load(conn, sid, self.opts.specs, rebuild=False, seq=known.seq)
        ctx = point.context
        if not (point.complete and isinstance(ctx, dict) and ctx.get("seq") == known.seq):
            return False
        prior = file_ingest.Prior({}, session_id=sid, point=point)
        g = SessionGroup(SessionInfo(key, otlp.NAME), events=events, cut=len(events), resumed=True)
        tail, j = file_ingest.resumed_tail(prior, g, self.opts, seal=plan.lives >= self.live_points)
        file_ingest.count_verdicts(plan.report, events, j.verdicts)
        plan.tails.append(tail)
        plan.known[key] = Known(st, refs[-1].order, known.seq + len(events), sid, tail.rows.resume,
                               self._live(plan, j.live), tail.rows.resume is not None)
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
                store.delete_sessions(conn, sid, keep_keys=fs.sessions.keys() | fs.cold.keys())
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
            try:
                fs = self.files.get(path) or self._start(path)
                size = path.stat().st_size
            except FileNotFoundError:
                continue
            except Exception as exc:  # noqa: BLE001
                # A new file whose start could not read the ledger (down, unreachable): its spans
                # stay pending (counted by _count, so the flusher tries again), the other files
                # are still written.
                self._error(f"{path}: could not be started ({file_ingest.one_line(exc)}); "
                            "its spans stay in the spool and are written at the next flush")
                if not file_ingest.is_busy(exc):
                    log.error("%s: start failed", path, exc_info=exc)
                continue
            while (report := self._step(fs, size)) is not None:
                reports.append(report)
        self._count()
        return reports

    def _step(self, fs: FileState, size: int) -> file_ingest.FileReport | None:
        """Index up to CHUNK_BYTES more of the file (not past `size`, its size when the flush
        began) and write every pending session; None when nothing was written."""
        path = fs.path
        upto = min(size, fs.indexed + CHUNK_BYTES)
        self._take(fs, upto)  # what the writer handed over, from memory; the rest of the step from disk
        try:
            if upto > fs.indexed:
                self._index(fs, upto)
        except FileNotFoundError:
            return None
        if not fs.pending:
            return None
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
            return None
        fs.committed = upto
        fs.known.update(plan.known)
        self._keep_snapshots(fs, list(plan.known))
        fs.rewrite -= plan.done
        for k in plan.done:
            fs.new.pop(k, None)
        fs.gone = False
        self._freeze(fs)
        assert plan.report is not None
        return plan.report

    def _error(self, msg: str) -> None:
        self.stats.last_error = msg
        self.stats.errors = (self.stats.errors + [msg])[-20:]

    def _count(self) -> None:
        pending = ingested = 0
        for fs in self.files.values():
            waiting = sum(len(v) for v in fs.new.values()) + sum(len(fs.sessions.get(k, ())) for k in fs.rewrite
                                                                if k not in fs.new)
            pending += waiting
            ingested += len(fs.refs) + fs.n_cold - waiting
        with self._handed_lock:
            for path in list(self._spooled):
                if path in self.files:
                    del self._spooled[path]  # started: its own index counts it from here
                else:
                    pending += self._spooled[path]
        self.stats.pending, self.stats.ingested = pending, ingested

    def committed(self) -> dict[Path, int]:
        return {p: fs.committed for p, fs in self.files.items()}

    def forget(self, path: Path) -> None:
        self.files.pop(path.absolute(), None)
        with self._handed_lock:
            self._spooled.pop(path.absolute(), None)
            for _, lines in self._handed.pop(path.absolute(), ()):
                self._handed_bytes -= sum(n for n, _ in lines)


class _WithCold:
    """fs.refs as session_of reads it, a frozen span standing in as its session."""

    __slots__ = ("fs",)

    def __init__(self, fs: FileState) -> None:
        self.fs = fs

    def get(self, ident: tuple[str, str]) -> Any:
        got = self.fs.refs.get(ident)
        if got is None:
            for i in self.fs.cold_spans.values(digest(*ident)):
                if (key := self.fs.cold_keys[i]) is not None:
                    return _Owned(key)
        return got


def _spans_of_line(raw: bytes) -> Iterator[otlp.Span]:
    try:
        req = orjson.loads(raw)
        yield from otlp.spans_of_request(req)
    except (orjson.JSONDecodeError, ValueError, TypeError, AttributeError):
        return  # the spool only holds lines the receiver wrote; a foreign line is skipped
