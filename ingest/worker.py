"""The ingest worker: discover → read → redact → replay every policy → write, one file at a time.

Per file, everything happens in ONE transaction: the source row is claimed (a row lock on
PostgreSQL, the write lock on SQLite), the file is read, every changed session is replayed and
replaced, errors are quarantined, and the source row's offset/hash/status are updated. A worker
killed at any moment therefore leaves each file either fully as before or fully ingested, and a
restart redoes exactly the files that were not committed.

Incremental: a file whose size and mtime are unchanged is skipped without reading it. Otherwise
its bytes are hashed; when the bytes up to the stored offset hash to the stored hash the file
was appended to, and only the sessions with items past the old end are replayed again (the file
is re-read whole, so their checks are exactly those of ingesting the whole file at once).
Anything else is a rewrite and replaces all of the file's sessions.
"""

from __future__ import annotations

import dataclasses
import os
import signal
import socket
import threading
import time
import tomllib
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import xxhash
from loopledger import formats
from loopledger.detectors.policy import DEFAULT_SPECS, PolicySpec, make_policy
from loopledger.events import Batch, ReadError, SessionInfo, SessionStart
from loopledger.ledger import schema as s
from loopledger.ledger import store
from loopledger.redact import redact_event
from loopledger.replay import replay_many, tally
from sqlalchemy import delete, select, update
from sqlalchemy.engine import Connection, Engine

# Extensions transcripts come in; anything else inside a folder is not tried (files named on
# the command line always are).
TRANSCRIPT_SUFFIXES = {".jsonl", ".ndjson", ".json", ".traj", ".md"}
NOT_TRANSCRIPTS = ("readme", "changelog", "license", "contributing", "package.json", "package-lock.json",
                   "tsconfig.json", "settings.json", "projects.json")
SKIP_DIRS = {".git", ".hg", ".svn", "__pycache__", "node_modules", ".venv", "venv", ".mypy_cache",
             ".pytest_cache", ".ruff_cache"}
DEFAULT_WATCH_DIRS = ("~/.claude/projects", "~/.codex/sessions", "~/.gemini/tmp")
CONFIG_NAME = "loopledger.toml"
STATUS_OK, STATUS_QUARANTINED, STATUS_ERROR, STATUS_MISSING = "ok", "quarantined", "error", "missing"
_HASH_CHUNK = 1 << 20


class ConfigFileError(ValueError):
    """A loopledger.toml that cannot be used; the message names the file and the entry."""


# ── options and policies ─────────────────────────────────────────────────────────────────────


@dataclass
class Options:
    specs: Sequence[PolicySpec] = DEFAULT_SPECS
    default_ids: frozenset[str] = frozenset(sp.id for sp in DEFAULT_SPECS)
    format: str | None = None
    redact: bool = True
    max_text: int = store.DEFAULT_MAX_TEXT
    worker_id: str = field(default_factory=lambda: f"{socket.gethostname()}:{os.getpid()}")
    # Watch mode: a last line without its newline is still being written, not malformed.
    defer_partial_tail: bool = False
    # Processes reading and replaying files ahead of the (single) writer; 1 = all in-process.
    jobs: int = 1


def load_config(path: Path) -> list[PolicySpec]:
    """The [[policy]] entries of a loopledger.toml (detector = "…", params = {…})."""
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError) as exc:
        raise ConfigFileError(f"{path}: {exc}") from None
    entries = data.get("policy", [])
    if not isinstance(entries, list):
        raise ConfigFileError(f"{path}: 'policy' must be an array of tables ([[policy]])")
    out = []
    for i, entry in enumerate(entries, 1):
        if not isinstance(entry, dict) or "detector" not in entry:
            raise ConfigFileError(f"{path}: [[policy]] #{i} needs detector = \"…\"")
        params = entry.get("params", {})
        if not isinstance(params, dict):
            raise ConfigFileError(f"{path}: [[policy]] #{i}: params must be a table")
        try:
            out.append(PolicySpec(str(entry["detector"]), params))
        except ValueError as exc:
            raise ConfigFileError(f"{path}: [[policy]] #{i}: {exc}") from None
    return out


def policy_specs(spec_texts: Iterable[str] = (), config: Path | None = None,
                 cwd: Path | None = None) -> list[PolicySpec]:
    """Defaults, then loopledger.toml's policies (--config, else ./loopledger.toml), then --policy."""
    specs = list(DEFAULT_SPECS)
    if config is None:
        candidate = (cwd or Path.cwd()) / CONFIG_NAME
        config = candidate if candidate.is_file() else None
    if config is not None:
        specs += load_config(config)
    specs += [PolicySpec.parse(t) for t in spec_texts]
    seen: set[str] = set()
    return [sp for sp in specs if not (sp.id in seen or seen.add(sp.id))]


# ── discovery ────────────────────────────────────────────────────────────────────────────────


def _looks_like_transcript(p: Path) -> bool:
    name = p.name.lower()
    return p.suffix.lower() in TRANSCRIPT_SUFFIXES and not name.startswith(NOT_TRANSCRIPTS)


def discover(paths: Iterable[Path | str], unreadable: list[str] | None = None) -> list[Path]:
    """Files named, plus transcript-looking files under folders (recursive), sorted, absolute.

    What a folder holds but cannot be read (a folder without permission, a dangling link, a pipe
    or socket named like a transcript) is left out and, when `unreadable` is given, described
    there ("path: why"), so the caller can say so instead of skipping it without a word."""
    out: set[Path] = set()

    def skip(path: Path | str, why: str) -> None:
        if unreadable is not None:
            unreadable.append(f"{path}: {why}")

    for raw in paths:
        p = Path(raw).expanduser().absolute()
        if p.is_file():
            out.add(p)
        elif p.is_dir():
            for root, dirs, files in os.walk(p, onerror=lambda e: skip(e.filename, e.strerror or str(e))):
                dirs[:] = [d for d in dirs if d not in SKIP_DIRS]
                for f in files:
                    fp = Path(root, f)
                    if not _looks_like_transcript(fp):
                        continue
                    if not fp.is_file():
                        skip(fp, "a dangling link" if fp.is_symlink() and not fp.exists() else "not a regular file")
                    elif not os.access(fp, os.R_OK):
                        skip(fp, "permission denied")
                    else:
                        out.add(fp)
    return sorted(out)


# ── one file ─────────────────────────────────────────────────────────────────────────────────


@dataclass
class FileReport:
    path: str
    action: str = "skipped"  # new | appended | rewritten | unchanged | skipped | busy | error | missing
    format: str | None = None
    bytes: int = 0
    sessions: int = 0  # sessions (re)written
    runs: int = 0
    calls: int = 0
    checks: int = 0
    warnings: int = 0
    blocks: int = 0
    halts: int = 0
    quarantined: int = 0
    error: str | None = None


@dataclass(frozen=True)
class _Scan:
    size: int
    mtime: float
    full_hash: str
    prefix_hash: str | None  # hash of the first `old_offset` bytes (None when the file is shorter)
    prefix_lines: int  # newlines within those bytes: the old end, as a line number
    lines: int  # the number of the file's last line
    ends_with_newline: bool


def _scan(path: Path, old_offset: int) -> _Scan:
    st = path.stat()
    full = xxhash.xxh3_128()
    prefix_hash, prefix_lines, newlines, done, last = None, 0, 0, 0, b""
    with open(path, "rb") as fh:
        while chunk := fh.read(_HASH_CHUNK):
            if done < old_offset:
                part = chunk[: old_offset - done]
                prefix_lines += part.count(b"\n")
                full.update(part)
                if done + len(chunk) >= old_offset:
                    prefix_hash = full.hexdigest()
                full.update(chunk[len(part):])
            else:
                full.update(chunk)
            done += len(chunk)
            newlines += chunk.count(b"\n")
            last = chunk[-1:]
    if old_offset == 0:
        prefix_hash = xxhash.xxh3_128().hexdigest()
    ends = last == b"\n"
    return _Scan(done, st.st_mtime, full.hexdigest(), prefix_hash, prefix_lines,
                 newlines + (0 if ends or not done else 1), ends)


def _claim(conn: Connection, path: str, worker_id: str) -> dict[str, Any] | None:
    """Lock the file's source row for this transaction; None when another worker holds it."""
    now = time.time()
    store.insert_ignore(conn, s.sources, [{"path": path, "size": 0, "byte_offset": 0, "status": "new"}])
    if conn.dialect.name == "postgresql":
        row = conn.execute(select(s.sources).where(s.sources.c.path == path)
                           .with_for_update(skip_locked=True)).mappings().first()
        if row is None:
            return None
        conn.execute(update(s.sources).where(s.sources.c.id == row["id"])
                     .values(claimed_by=worker_id, claimed_at=now))
        return dict(row)
    # SQLite: writing first takes the database write lock (waiting out another writer), so the
    # row read next is current and nobody else can change it before this transaction ends.
    conn.execute(update(s.sources).where(s.sources.c.path == path).values(claimed_by=worker_id, claimed_at=now))
    return dict(conn.execute(select(s.sources).where(s.sources.c.path == path)).mappings().one())


def _unchanged(row: dict[str, Any] | None, size: int, mtime: float) -> bool:
    return (row is not None and row["status"] in (STATUS_OK, STATUS_QUARANTINED, STATUS_ERROR)
            and row["size"] == size and row["mtime"] == mtime)


def _sessions(items: Iterator[Any], path: Path) -> Iterator[tuple[SessionInfo, list, int | None, list]]:
    """Group a reader's stream into (info, events, max line or None if unknown, errors)."""
    info: SessionInfo | None = None
    events: list = []
    errors: list[ReadError] = []
    max_line: int | None = 0
    for item in items:
        if isinstance(item, ReadError):
            errors.append(item)
            continue
        if isinstance(item, SessionStart):
            if info is not None:
                yield info, events, max_line, errors
                errors = []
            info, events, max_line = item.info, [], item.line or 0
            continue
        if info is None:  # a reader that forgot its SessionStart: one session named after the file
            info, max_line = SessionInfo(key="0", format="unknown", title=path.name), 0
        events.append(item)
        if max_line is not None:
            line = item.line
            max_line = None if line is None else max(max_line, line)
    if info is not None:
        yield info, events, max_line, errors
    elif errors:
        yield None, [], None, errors  # type: ignore[misc]


def replay_session(events: Sequence[Any], specs: Sequence[PolicySpec]) -> tuple[list[int], list[store.PolicyVerdicts]]:
    """Every policy over one session's events: (run index per event, each policy's verdicts)."""
    per_event = list(replay_many(events, [make_policy(sp) for sp in specs]))
    run_of = [steps[0].run for steps in per_event] if specs else [0] * len(events)
    verdicts = []
    for i, sp in enumerate(specs):
        steps = [row[i] for row in per_event]
        verdicts.append(store.PolicyVerdicts(sp.id, steps, tally(steps)))
    return run_of, verdicts


def count_verdicts(report: FileReport, events: Sequence[Any], verdicts: Sequence[store.PolicyVerdicts]) -> None:
    """Add one session's counts (checks etc. summed over all policies) to a report."""
    report.sessions += 1
    report.runs += len(verdicts[0].summary.runs) if verdicts else 0
    report.calls += sum(len(ev.calls) for ev in events if isinstance(ev, Batch))
    for pv in verdicts:
        sm = pv.summary
        report.checks += sum(len(st.checks) for st in pv.steps)
        report.warnings += sm.warnings
        report.blocks += sm.blocks
        report.halts += sm.halts


def _decide(row: dict[str, Any], scan: _Scan) -> str:
    """What a file's bytes mean against its source row: unchanged, touched, appended, rewritten, new."""
    if _unchanged(row, scan.size, scan.mtime):
        return "unchanged"
    if not row["byte_offset"]:
        return "new"
    if row["status"] == STATUS_MISSING:
        return "rewritten"  # it came back: read it whole
    if scan.size == row["size"] and scan.full_hash == row["content_hash"]:
        return "touched"  # mtime moved, bytes did not
    if scan.size > row["byte_offset"] and scan.prefix_hash == row["content_hash"] and row["status"] != STATUS_ERROR:
        return "appended"
    return "rewritten"


@dataclass
class Computed:
    """A file read, redacted and replayed, ready to write: pure data (it can come from a child
    process). `sessions` is a list, or a generator the writer drains (inline, memory flat)."""

    action: str
    scan: _Scan
    format: str | None = None
    error: str | None = None
    sessions: Iterable[store.SessionRows] = ()
    seen: list[str] = field(default_factory=list)
    errors: list[ReadError] = field(default_factory=list)
    report: FileReport | None = None


def compute(path: Path, row: dict[str, Any], stored_keys: Iterable[str], opts: Options,
            materialize: bool = False) -> Computed:
    """Scan, read, redact and replay one file against its source row's state. No database."""
    report = FileReport(str(path))
    scan = _scan(path, row["byte_offset"])
    report.bytes = scan.size
    action = _decide(row, scan)
    report.action = action
    out = Computed(action, scan, report=report)
    if action in ("unchanged", "touched"):
        return out
    try:
        fmt = opts.format or formats.sniff(path)
        items = formats.read(path, fmt)
    except (formats.UnknownFormat, OSError, ValueError) as exc:
        out.action = report.action = "error"
        out.error = report.error = str(exc)
        return out
    out.format = report.format = fmt
    appended = action == "appended"
    stored = set(stored_keys)

    def sessions() -> Iterator[store.SessionRows]:
        repeats: dict[str, int] = {}
        for info, events, max_line, errs in _sessions(items, path):
            out.errors.extend(errs)
            if info is None:
                continue
            if info.key in repeats:
                # Two sessions under one key (a reader quirk or a concatenated file): keep both.
                repeats[info.key] += 1
                info = dataclasses.replace(info, key=f"{info.key}#{repeats[info.key]}")
            repeats.setdefault(info.key, 1)
            out.seen.append(info.key)
            if appended and info.key in stored and max_line is not None and max_line <= scan.prefix_lines:
                continue  # every item of this session lies in the part already stored
            if opts.redact:
                info = redact_event(info)
                events = [redact_event(ev) for ev in events]
            run_of, verdicts = replay_session(store.as_stored(events, opts.max_text), opts.specs)
            count_verdicts(report, events, verdicts)
            yield store.session_rows(info, events, run_of, verdicts, max_text=opts.max_text)
        if opts.defer_partial_tail and not scan.ends_with_newline:
            # The writer is mid-line: the next change completes it and re-reads this session.
            out.errors[:] = [e for e in out.errors if e.line != scan.lines]
        report.quarantined = len(out.errors)

    out.sessions = list(sessions()) if materialize else sessions()
    return out


FLUSH_ROWS = 50_000  # rows held before an executemany round: bounded memory, few round trips


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
    if c.action == "error":
        conn.execute(update(s.sources).where(src.id == source_id).values(
            size=c.scan.size, mtime=c.scan.mtime, content_hash=c.scan.full_hash, byte_offset=0,
            status=STATUS_ERROR, error=c.error, claimed_by=None, ingested_at=now))
        return
    store.ensure_policies(conn, opts.specs, opts.default_ids)
    batch: list[store.SessionRows] = []
    held = 0
    for rows in c.sessions:
        batch.append(rows)
        held += rows.size
        if held >= FLUSH_ROWS:
            store.write_rows(conn, source_id, batch)
            batch, held = [], 0
    store.write_rows(conn, source_id, batch)
    store.delete_sessions(conn, source_id, keep_keys=c.seen)
    conn.execute(delete(s.ingest_errors).where(s.ingest_errors.c.source_id == source_id))
    store.bulk_insert(conn, "ingest_errors", ("source_id", "line", "message", "excerpt", "created_at"),
                      [(source_id, e.line, e.message, e.excerpt, now) for e in c.errors])
    store.link_parents(conn, source_id)
    conn.execute(update(s.sources).where(src.id == source_id).values(
        format=c.format, size=c.scan.size, mtime=c.scan.mtime, content_hash=c.scan.full_hash,
        byte_offset=c.scan.size, status=STATUS_QUARANTINED if c.errors else STATUS_OK, error=None,
        claimed_by=None, ingested_at=now))


def _stored_keys(conn: Connection, source_id: int) -> list[str]:
    return list(conn.execute(select(s.sessions.c.key).where(s.sessions.c.source_id == source_id)).scalars())


def _missing(engine: Engine, key: str, report: FileReport) -> FileReport:
    with engine.begin() as conn:
        conn.execute(update(s.sources).where(s.sources.c.path == key, s.sources.c.status != STATUS_MISSING)
                     .values(status=STATUS_MISSING, error="the file is gone (its sessions are kept)"))
    report.action = "missing"
    return report


def _crashed(engine: Engine, key: str, exc: Exception) -> FileReport:
    """A reader or detector bug on one file: record it on the source, carry on with the others."""
    msg = f"{key}: could not be ingested ({type(exc).__name__}: {exc})"
    with engine.begin() as conn:
        conn.execute(update(s.sources).where(s.sources.c.path == key).values(
            status=STATUS_ERROR, error=msg, byte_offset=0, size=0, mtime=None, claimed_by=None))
    return FileReport(key, action="error", error=msg)


def _look(engine: Engine, path: Path) -> tuple[str, dict[str, Any] | None]:
    """The cheap look before any work: 'missing', 'unchanged' or 'changed', with the source row."""
    try:
        st = path.stat()
    except FileNotFoundError:
        return "missing", None
    with engine.connect() as conn:
        row = conn.execute(select(s.sources).where(s.sources.c.path == str(path))).mappings().first()
    row = dict(row) if row else None
    return ("unchanged" if _unchanged(row, st.st_size, st.st_mtime) else "changed"), row


def ingest_file(engine: Engine, path: Path | str, opts: Options, precomputed: Computed | None = None,
                snapshot: dict[str, Any] | None = None) -> FileReport:
    """Bring one file's rows in the ledger up to date, in one transaction.

    `precomputed` (from a child process) is used when the source row is still `snapshot`, the
    state it was computed against; otherwise the file is computed again here, under the claim."""
    path = Path(path).absolute()
    key = str(path)
    if precomputed is None:
        state, _ = _look(engine, path)
        if state != "changed":
            return _missing(engine, key, FileReport(key)) if state == "missing" else FileReport(key, "unchanged")
    try:
        with engine.begin() as conn:
            row = _claim(conn, key, opts.worker_id)
            if row is None:
                return FileReport(key, action="busy")
            c = precomputed
            if c is None or snapshot is None or _row_state(row) != _row_state(snapshot):
                c = compute(path, row, _stored_keys(conn, row["id"]), opts)
            apply(conn, row["id"], c, opts)
            assert c.report is not None
            return c.report
    except FileNotFoundError:
        return _missing(engine, key, FileReport(key))
    except Exception as exc:  # noqa: BLE001  (the transaction rolled back; nothing half-written)
        return _crashed(engine, key, exc)


def _row_state(row: dict[str, Any]) -> tuple:
    return (row["byte_offset"], row["content_hash"], row["status"], row["size"], row["mtime"])


def _recorded(engine: Engine, report: FileReport) -> None:
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


# ── many files ───────────────────────────────────────────────────────────────────────────────


@dataclass
class Totals:
    files: int = 0
    changed: int = 0  # files read this time (new, appended or rewritten)
    unchanged: int = 0
    errors: int = 0
    sessions: int = 0
    runs: int = 0
    calls: int = 0
    checks: int = 0
    warnings: int = 0
    blocks: int = 0
    halts: int = 0
    quarantined: int = 0
    error_messages: list[str] = field(default_factory=list)

    def add(self, r: FileReport) -> None:
        self.files += 1
        if r.action in ("new", "appended", "rewritten"):
            self.changed += 1
        elif r.action in ("unchanged", "busy", "skipped"):
            self.unchanged += 1
        if r.action == "error":
            self.errors += 1
            self.error_messages.append(r.error or r.path)
        for name in ("sessions", "runs", "calls", "checks", "warnings", "blocks", "halts", "quarantined"):
            setattr(self, name, getattr(self, name) + getattr(r, name))

    @property
    def exit_code(self) -> int:
        """0 clean · 1 some file could not be read · 3 finished, but lines were quarantined."""
        return 1 if self.errors else (3 if self.quarantined else 0)


def register_sources(engine: Engine, files: Sequence[Path]) -> None:
    """Create the missing source rows up front, committed: on PostgreSQL a worker can then skip a
    row another worker has locked instead of waiting on its uncommitted insert."""
    rows = [{"path": str(p), "size": 0, "byte_offset": 0, "status": "new"} for p in files]
    for i in range(0, len(rows), 1000):
        with engine.begin() as conn:
            store.insert_ignore(conn, s.sources, rows[i:i + 1000])


def ingest_paths(engine: Engine, paths: Iterable[Path | str], opts: Options,
                 on_file: Callable[[FileReport], None] | None = None) -> Totals:
    """Ingest every file under `paths`; `on_file` is told after each one (the progress bar).

    With `opts.jobs` > 1, that many processes take files from a queue; each computes a file before
    claiming it and re-checks the source row under the claim (see ingest_file_optimistic)."""
    totals = Totals()
    files = discover(paths)
    register_sources(engine, files)
    if files:
        # Several workers on one database start at different files instead of queueing behind
        # each other's locks on the same one.
        k = xxhash.xxh32_intdigest(opts.worker_id.encode()) % len(files)
        files = files[k:] + files[:k]

    def done(report: FileReport) -> None:
        if report.action == "unchanged":
            _recorded(engine, report)
        totals.add(report)
        if on_file is not None:
            on_file(report)

    if opts.jobs <= 1 or len(files) < 2:
        for p in files:
            done(ingest_file(engine, p, opts))
        return totals
    _ingest_parallel(engine, files, opts, done)
    return totals


BIG_FILE_BYTES = 32 * 1024 * 1024  # computed under the claim, streaming: a file's rows are not held whole


def ingest_file_optimistic(engine: Engine, path: Path, opts: Options) -> FileReport:
    """ingest_file, but the reading and replaying happen BEFORE the claim, so several processes
    overlap their computing and only queue for the (short) write. The write re-checks the source
    row under the claim and recomputes if anyone changed it meanwhile."""
    state, row = _look(engine, path)
    if state != "changed" or row is None or path.stat().st_size > BIG_FILE_BYTES:
        return ingest_file(engine, path, opts)
    with engine.connect() as conn:
        keys = _stored_keys(conn, row["id"])
    try:
        computed = compute(path, row, keys, opts, materialize=True)
    except Exception:  # noqa: BLE001  (recomputed under the claim, where the failure is recorded)
        computed = None
    return ingest_file(engine, path, opts, computed, row)


def _job_main(url: str, opts: Options, tasks, results) -> None:
    """One --jobs process: its own engine; takes paths until the None sentinel."""
    from loopledger.ledger.engine import make_engine

    parent = os.getppid()
    engine = make_engine(url)
    try:
        while (item := tasks.get()) is not None:
            if os.getppid() != parent:  # the ingest that started us is gone: stop, do not orphan-write
                return
            try:
                report = ingest_file_optimistic(engine, Path(item), opts)
            except Exception as exc:  # noqa: BLE001
                report = FileReport(item, action="error", error=f"{item}: {type(exc).__name__}: {exc}")
            results.put(report)
    finally:
        results.put(None)
        engine.dispose()


def _ingest_parallel(engine: Engine, files: Sequence[Path], opts: Options,
                     done: Callable[[FileReport], None]) -> None:
    """`opts.jobs` processes, each reading, replaying and writing whole files (one transaction per
    file, as always): the database serialises the writes, the computing overlaps. No rows cross
    process boundaries, only paths and reports."""
    import multiprocessing as mp
    import queue as queue_mod

    ctx = mp.get_context("spawn")  # not fork: a forked child would share this process's DB sockets
    tasks, results = ctx.Queue(), ctx.Queue()
    for p in files:
        tasks.put(str(p))
    for _ in range(opts.jobs):
        tasks.put(None)
    url = engine.url.render_as_string(hide_password=False)
    procs = [ctx.Process(target=_job_main, args=(url, opts, tasks, results), daemon=True)
             for _ in range(opts.jobs)]
    for proc in procs:
        proc.start()
    reported: set[str] = set()
    try:
        running = len(procs)
        while running:
            try:
                report = results.get(timeout=1.0)
            except queue_mod.Empty:
                if not any(proc.is_alive() for proc in procs):
                    break  # every job died without its sentinel (killed, or could not start)
                continue
            if report is None:
                running -= 1
            else:
                reported.add(report.path)
                done(report)
    finally:
        for proc in procs:
            proc.join(timeout=5)
            if proc.is_alive():
                proc.terminate()
    # Files no job reported on (a job died; its open transaction rolled back): do them here.
    for p in files:
        if str(p) not in reported:
            done(ingest_file(engine, p, opts))


# ── watch ────────────────────────────────────────────────────────────────────────────────────


def default_watch_paths() -> list[Path]:
    return [p for p in (Path(d).expanduser() for d in DEFAULT_WATCH_DIRS) if p.is_dir()]


def _start_observer(paths: Sequence[Path], dirty: set[Path], lock: threading.Lock):
    """A watchdog observer marking changed files dirty; None when it cannot start (polling then)."""
    try:
        from watchdog.events import FileSystemEventHandler
        from watchdog.observers import Observer
    except ImportError:
        return None

    class Handler(FileSystemEventHandler):
        def on_any_event(self, event) -> None:
            if event.is_directory:
                return
            with lock:
                for attr in ("src_path", "dest_path"):
                    p = getattr(event, attr, "")
                    if p:
                        dirty.add(Path(os.fsdecode(p)))

    observer = Observer()
    try:
        for p in paths:
            target = p if p.is_dir() else p.parent
            observer.schedule(Handler(), str(target), recursive=p.is_dir())
        observer.daemon = True
        observer.start()
    except OSError:  # e.g. inotify watch limit reached: fall back to polling
        return None
    return observer


def watch(engine: Engine, paths: Sequence[Path | str], opts: Options, stop: threading.Event, *,
          interval: float = 0.5, rescan: float = 10.0, on_file: Callable[[FileReport], None] | None = None,
          use_observer: bool = True) -> Totals:
    """Keep the ledger current with `paths` until `stop` is set.

    Watchdog events are handled every `interval`; every known file is also stat'ed at that pace
    (a polling fallback that also catches what the observer misses), and folders are walked for
    new files every `rescan` seconds (every `interval` without an observer). A file's work is one
    transaction, so stopping between files never leaves a half-ingested file."""
    roots = [Path(p).expanduser().absolute() for p in paths]
    dirty: set[Path] = set()
    lock = threading.Lock()
    observer = _start_observer(roots, dirty, lock) if use_observer else None
    seen: dict[Path, tuple[int, float]] = {}
    totals = Totals()
    last_walk = 0.0
    try:
        while not stop.is_set():
            now = time.monotonic()
            todo: set[Path] = set()
            if now - last_walk >= (rescan if observer is not None else interval):
                todo.update(discover(roots))
                last_walk = now
            with lock:
                todo.update(p for p in dirty if p in seen or _looks_like_transcript(p) or p in roots)
                dirty.clear()
            todo.update(seen)
            for p in sorted(todo):
                if stop.is_set():
                    break
                try:
                    st = p.stat()
                    sig = (st.st_size, st.st_mtime)
                except OSError:
                    sig = None
                if sig is not None and seen.get(p) == sig:
                    continue
                if sig is None and p not in seen:
                    continue
                try:
                    report = ingest_file(engine, p, opts)
                except Exception as exc:  # one bad file must not end a long-running watcher  # noqa: BLE001
                    report = FileReport(str(p), action="error", error=f"{p}: {type(exc).__name__}: {exc}")
                if sig is None or report.action == "missing":
                    seen.pop(p, None)
                elif report.action != "busy":
                    seen[p] = sig
                if report.action not in ("unchanged", "busy"):
                    totals.add(report)
                    if on_file is not None:
                        on_file(report)
            stop.wait(interval)
    finally:
        if observer is not None:
            observer.stop()
            observer.join(timeout=5)
    return totals


def stop_on_signals(stop: threading.Event) -> None:
    """SIGINT and SIGTERM end the watch loop after the file in hand is committed."""
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, lambda *_: stop.set())
