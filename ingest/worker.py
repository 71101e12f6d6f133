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
from sqlalchemy import delete, select, update
from sqlalchemy.engine import Connection, Engine

from ingest import formats, vocab
from ingest.detectors.policy import DEFAULT_SPECS, PolicySpec, make_policy
from ingest.events import Batch, ReadError, SessionInfo, SessionStart
from ingest.ledger import schema as s
from ingest.ledger import store
from ingest.redact import redact_event
from ingest.replay import replay_many, tally

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


def discover(paths: Iterable[Path | str]) -> list[Path]:
    """Files named, plus transcript-looking files under folders (recursive), sorted, absolute."""
    out: set[Path] = set()
    for raw in paths:
        p = Path(raw).expanduser().absolute()
        if p.is_file():
            out.add(p)
        elif p.is_dir():
            for root, dirs, files in os.walk(p):
                dirs[:] = [d for d in dirs if d not in SKIP_DIRS]
                for f in files:
                    fp = Path(root, f)
                    if _looks_like_transcript(fp):
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
        for st in pv.steps:
            for c in st.checks:
                report.checks += 1
                if c.verdict == vocab.WARN:
                    report.warnings += 1
                elif c.verdict == vocab.BLOCK:
                    report.blocks += 1
                elif c.verdict == vocab.HALT:
                    report.halts += 1


def ingest_file(engine: Engine, path: Path | str, opts: Options) -> FileReport:
    """Bring one file's rows in the ledger up to date (one transaction)."""
    path = Path(path).absolute()
    key = str(path)
    report = FileReport(key)
    try:
        st = path.stat()
    except FileNotFoundError:
        with engine.begin() as conn:
            conn.execute(update(s.sources).where(s.sources.c.path == key, s.sources.c.status != STATUS_MISSING)
                         .values(status=STATUS_MISSING, error="the file is gone (its sessions are kept)"))
        report.action = "missing"
        return report
    with engine.connect() as conn:  # cheap look first: most files in a re-run are unchanged
        row = conn.execute(select(s.sources).where(s.sources.c.path == key)).mappings().first()
    if _unchanged(dict(row) if row else None, st.st_size, st.st_mtime):
        report.action = "unchanged"
        return report

    with engine.begin() as conn:
        row = _claim(conn, key, opts.worker_id)
        if row is None:
            report.action = "busy"
            return report
        try:
            scan = _scan(path, row["byte_offset"])
        except FileNotFoundError:
            report.action = "missing"
            return report
        report.bytes = scan.size
        if _unchanged(row, scan.size, scan.mtime):
            report.action = "unchanged"
            conn.execute(update(s.sources).where(s.sources.c.id == row["id"]).values(claimed_by=None))
            return report
        if (row["byte_offset"] and scan.size == row["size"] and scan.full_hash == row["content_hash"]
                and row["status"] != STATUS_MISSING):
            report.action = "unchanged"  # touched, not changed
            conn.execute(update(s.sources).where(s.sources.c.id == row["id"]).values(mtime=scan.mtime))
            return report
        appended = (row["byte_offset"] > 0 and scan.size > row["byte_offset"]
                    and scan.prefix_hash == row["content_hash"] and row["status"] != STATUS_ERROR)
        report.action = "appended" if appended else ("rewritten" if row["byte_offset"] else "new")
        _ingest_into(conn, row["id"], path, scan, appended, opts, report)
    return report


def _ingest_into(conn: Connection, source_id: int, path: Path, scan: _Scan, appended: bool, opts: Options,
                 report: FileReport) -> None:
    stored = dict(conn.execute(select(s.sessions.c.key, s.sessions.c.id)
                               .where(s.sessions.c.source_id == source_id)).all())
    now = time.time()
    try:
        fmt = opts.format or formats.sniff(path)
        items = formats.read(path, fmt)
    except (formats.UnknownFormat, OSError, ValueError) as exc:
        report.action, report.error = "error", str(exc)
        conn.execute(update(s.sources).where(s.sources.c.id == source_id).values(
            size=scan.size, mtime=scan.mtime, content_hash=scan.full_hash, byte_offset=0, status=STATUS_ERROR,
            error=str(exc), claimed_by=None, ingested_at=now))
        return
    report.format = fmt
    store.ensure_policies(conn, opts.specs, opts.default_ids)
    errors: list[ReadError] = []
    seen: list[str] = []
    for info, events, max_line, errs in _sessions(items, path):
        errors += errs
        if info is None:
            continue
        seen.append(info.key)
        if appended and info.key in stored and max_line is not None and max_line <= scan.prefix_lines:
            continue  # every item of this session lies in the part already stored
        if opts.redact:
            info = redact_event(info)
            events = [redact_event(ev) for ev in events]
        run_of, verdicts = replay_session(events, opts.specs)
        store.write_session(conn, source_id, info, events, run_of, verdicts, max_text=opts.max_text)
        count_verdicts(report, events, verdicts)
    store.delete_sessions(conn, source_id, keep_keys=seen)
    if opts.defer_partial_tail and not scan.ends_with_newline:
        # The writer is mid-line: the next change completes it and re-reads this session.
        errors = [e for e in errors if e.line != scan.lines]
    conn.execute(delete(s.ingest_errors).where(s.ingest_errors.c.source_id == source_id))
    store.bulk_insert(conn, "ingest_errors", ("source_id", "line", "message", "excerpt", "created_at"),
                      [(source_id, e.line, e.message, e.excerpt, now) for e in errors])
    report.quarantined = len(errors)
    store.link_parents(conn, source_id)
    conn.execute(update(s.sources).where(s.sources.c.id == source_id).values(
        format=fmt, size=scan.size, mtime=scan.mtime, content_hash=scan.full_hash, byte_offset=scan.size,
        status=STATUS_QUARANTINED if errors else STATUS_OK, error=None, claimed_by=None, ingested_at=now))


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
    """Ingest every file under `paths`; `on_file` is told after each one (the progress bar)."""
    totals = Totals()
    files = discover(paths)
    register_sources(engine, files)
    if files:
        # Several workers on one database start at different files instead of queueing behind
        # each other's locks on the same one.
        k = xxhash.xxh32_intdigest(opts.worker_id.encode()) % len(files)
        files = files[k:] + files[:k]
    for p in files:
        report = ingest_file(engine, p, opts)
        if report.action == "unchanged":
            _recorded(engine, report)
        totals.add(report)
        if on_file is not None:
            on_file(report)
    return totals


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
