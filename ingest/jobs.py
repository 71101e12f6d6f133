"""Many files: `ingest_paths` over discovered files, in this process or in `--jobs` processes.

With --jobs N, N spawned processes take paths from a queue; each computes a whole file before
claiming it (as every ingest does), then claims and writes: the database serialises the short
writes, the computing overlaps, only paths and reports cross processes.
"""

from __future__ import annotations

import gc
import os
import queue as queue_mod
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import xxhash
from loopledger import file_ingest
from loopledger.config import Options
from loopledger.detectors import registry
from loopledger.discovery import discover
from loopledger.file_ingest import (
    BAD_LINES_SHOWN,
    Counts,
    FileReport,
    ingest_file,
    is_busy,
    log,
    one_line,
    recorded,
)
from loopledger.ledger import schema as s
from loopledger.ledger import store
from sqlalchemy.engine import Engine


@dataclass
class Totals(Counts):
    files: int = 0
    changed: int = 0  # files read this time (new, appended, rewritten, truncated or empty)
    unchanged: int = 0
    errors: int = 0
    locked: int = 0  # files left as they were: the ledger stayed busy
    error_messages: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)  # not errors (a file shrank: its sessions kept)
    bad_lines: list[str] = field(default_factory=list)  # the first quarantined lines, "FILE:LINE: why"

    def add(self, r: FileReport) -> None:
        self.files += 1
        if r.action in ("new", "appended", "rewritten", "truncated", "empty"):
            self.changed += 1
        elif r.action in ("unchanged", "busy", "skipped"):
            self.unchanged += 1
        if r.action == "error":
            self.errors += 1
            self.error_messages.append(r.error or r.path)
        elif r.action == "locked":
            self.locked += 1
            self.error_messages.append(r.error or r.path)
        if r.note:
            self.notes.append(f"{r.path}: {r.note}")
        self.bad_lines.extend(r.bad_lines[: max(0, BAD_LINES_SHOWN - len(self.bad_lines))])
        self.add_counts(r)

    @property
    def exit_code(self) -> int:
        """0 clean · 1 some file could not be read · 4 the ledger was busy (locked) for some file,
        which is left for the next run · 3 finished, but lines were quarantined."""
        return 1 if self.errors else 4 if self.locked else (3 if self.quarantined else 0)


def register_sources(engine: Engine, files: Sequence[Path]) -> None:
    """Create the missing source rows up front, committed: on PostgreSQL a worker can then skip a
    row another worker has locked instead of waiting on its uncommitted insert. Best effort: on
    a ledger that stays busy, each file's own transaction creates its row instead."""
    rows = [{"path": str(p), "size": 0, "byte_offset": 0, "status": "new"} for p in files]
    for i in range(0, len(rows), 1000):
        for delay in (*file_ingest.BUSY_RETRY_DELAYS, None):
            try:
                with engine.begin() as conn:
                    store.insert_ignore(conn, s.sources, rows[i:i + 1000])
                break
            except Exception as exc:
                if not is_busy(exc):
                    raise
                if delay is None:
                    log.info("registering sources: ledger busy (%s); left to each file", one_line(exc))
                    return
                time.sleep(delay)


# Files adding up to more than this are ingested by one process per core (at most 4) when --jobs
# is not given: below it, starting the processes costs more than they save.
AUTO_JOBS_BYTES = 32 * 1024 * 1024


def default_jobs(total_bytes: int) -> int:
    """What `--jobs 0` (the default) means for files of `total_bytes` in all."""
    return min(os.cpu_count() or 1, 4) if total_bytes > AUTO_JOBS_BYTES else 1


# The cycle collector's first threshold while ingesting (CPython's default: 700 allocations).
INGEST_GC_THRESHOLD = 100_000


@contextmanager
def fewer_collections() -> Iterator[None]:
    """An ingest allocates millions of short-lived, acyclic objects (events, checks, rows): at
    the default threshold the cycle collector ran ~1,000 times per 20k calls, ~15% of the CPU
    (bench_ingest). It still runs, 140× less often, so memory stays flat."""
    old = gc.get_threshold()
    gc.set_threshold(INGEST_GC_THRESHOLD, *old[1:])
    try:
        yield
    finally:
        gc.set_threshold(*old)


def ingest_paths(engine: Engine, paths: Iterable[Path | str], opts: Options,
                 on_file: Callable[[FileReport], None] | None = None) -> Totals:
    """Ingest every file under `paths`; `on_file` is told after each one (the progress bar).

    With `opts.jobs` > 1, that many processes take files from a queue; each computes a file before
    claiming it and re-checks the source row under the claim (see ingest_file_optimistic)."""
    with fewer_collections():
        return _ingest_paths(engine, paths, opts, on_file)


def _ingest_paths(engine: Engine, paths: Iterable[Path | str], opts: Options,
                  on_file: Callable[[FileReport], None] | None) -> Totals:
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
            recorded(engine, report)
        totals.add(report)
        if on_file is not None:
            on_file(report)

    if opts.jobs <= 1 or len(files) < 2:
        for p in files:
            done(ingest_file(engine, p, opts))
        return totals
    _ingest_parallel(engine, files, opts, done)
    return totals


def ingest_file_optimistic(engine: Engine, path: Path, opts: Options) -> FileReport:
    """ingest_file: it always computes before claiming now (kept for callers of this name)."""
    return ingest_file(engine, path, opts)


def _job_main(url: str, opts: Options, tasks, results, write_turn=None, parent: int | None = None) -> None:
    """One --jobs process: its own engine; takes paths until the None sentinel. `write_turn`: the
    lock the jobs of a SQLite ledger share for their writes (file_ingest.WRITE_TURN). `parent`: the
    ingest's pid, given by it (a job that asked os.getppid() itself, after an ingest killed while
    the job started, would get its new parent and wait for it forever)."""
    from loopledger.ledger.engine import make_engine

    file_ingest.WRITE_TURN = write_turn

    parent = os.getppid() if parent is None else parent
    threading.Thread(target=_exit_when_gone, args=(parent,), daemon=True, name="parent-watch").start()
    # The parent's policies, as the person gave them: a `module:factory` one is imported here too
    # (a spawned process starts with only the built-ins and the entry points registered).
    for spec in opts.specs:
        if registry.is_factory_name(spec.detector):
            registry.import_factory(spec.detector)
    engine = make_engine(url)
    gc.set_threshold(INGEST_GC_THRESHOLD, *gc.get_threshold()[1:])  # see fewer_collections
    try:
        while (item := _take(tasks, parent)) is not None:
            try:
                report = _compute_or_ingest(engine, Path(item), opts)
            except Exception as exc:  # noqa: BLE001
                report = FileReport(item, action="error", error=f"{item}: {type(exc).__name__}: {exc}")
            if not _hand(results, report, parent):
                return
    finally:
        _hand(results, None, parent)
        engine.dispose()


# How often a job waiting on its queues looks whether the ingest that started it is still there.
PARENT_CHECK_S = 1.0


def _exit_when_gone(parent: int) -> None:
    """A job's watch: once the ingest that started it is gone, the job exits wherever it waits —
    on the SQLite write turn a killed ingest held, or at its own exit, where Python joins the
    results queue's feeder thread, blocked writing rows into a pipe nobody will read again. What
    the job had not handed over is redone by the next ingest (its transaction rolls back)."""
    while os.getppid() == parent:
        time.sleep(PARENT_CHECK_S)
    os._exit(0)


def _take(tasks: Any, parent: int) -> str | None:
    """The next path, or None: the sentinel, or the ingest that started us is gone (stop, do not
    orphan-write). Waits in steps: a killed ingest may leave its paths unsent and this job alone."""
    while os.getppid() == parent:
        try:
            return tasks.get(timeout=PARENT_CHECK_S)
        except queue_mod.Empty:
            continue
    return None


def _hand(results: Any, item: Any, parent: int) -> bool:
    """Put `item` for the ingest process; False once it is gone (nobody reads a full queue then)."""
    while os.getppid() == parent:
        try:
            results.put(item, timeout=PARENT_CHECK_S)
            return True
        except queue_mod.Full:
            continue
    return False


# A changed file up to this size is computed by a job and written by the ingest process (its rows
# cross the results queue, pickled); a bigger one is written by its job (spilled rows, SpilledRows).
HAND_OVER_BYTES = 4 << 20


def _compute_or_ingest(engine: Engine, path: Path, opts: Options) -> FileReport | tuple:
    """In a job: a small changed file computed here, for the ingest process to write — (path,
    Computed, the source row it was computed against) —, or anything else ingested here (an
    unchanged or missing file, a big one, one whose compute failed: recomputed under its claim)."""
    path = path.absolute()
    try:
        state, row = file_ingest.look(engine, path)
        if state == "changed" and path.stat().st_size <= HAND_OVER_BYTES:
            computed = file_ingest.precompute(engine, path, row, opts)
            if computed is not None:
                return str(path), computed, row
    except FileNotFoundError:
        pass  # ingest_file records it missing
    return ingest_file(engine, path, opts)


def _ingest_parallel(engine: Engine, files: Sequence[Path], opts: Options,
                     done: Callable[[FileReport], None]) -> None:
    """`opts.jobs` processes read and replay whole files; this process writes the small ones
    (one transaction per file, as always) while they compute the next: one writer with a warm
    page cache, where two writing processes made each other's small writes two to three times
    slower (SQLite drops a connection's cache when another one wrote). A big file is written by
    its own job. Writers of a SQLite ledger take turns (file_ingest.WRITE_TURN)."""
    import multiprocessing as mp

    ctx = mp.get_context("spawn")  # not fork: a forked child would share this process's DB sockets
    # Bounded: computed files wait here at most a few deep, so a writer slower than the jobs holds
    # the jobs back instead of their rows piling up in memory.
    tasks, results = ctx.Queue(), ctx.Queue(maxsize=2 * opts.jobs)
    for p in files:
        tasks.put(str(p))
    for _ in range(opts.jobs):
        tasks.put(None)
    url = engine.url.render_as_string(hide_password=False)
    # SQLite has one writer: the jobs take turns (PostgreSQL writes rows of different files at once).
    turn = ctx.Lock() if engine.dialect.name == "sqlite" else None
    procs = [ctx.Process(target=_job_main, args=(url, opts, tasks, results, turn, os.getpid()), daemon=True)
             for _ in range(opts.jobs)]
    for proc in procs:
        proc.start()
    reported: set[str] = set()
    was, file_ingest.WRITE_TURN = file_ingest.WRITE_TURN, turn
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
                continue
            if isinstance(report, tuple):  # computed by a job: written here
                path, computed, row = report
                report = ingest_file(engine, Path(path), opts, computed, row)
            reported.add(report.path)
            done(report)
    finally:
        file_ingest.WRITE_TURN = was
        for proc in procs:
            proc.join(timeout=5)
            if proc.is_alive():
                proc.terminate()
    # Files no job reported on (a job died; its open transaction rolled back): do them here.
    for p in files:
        if str(p) not in reported:
            done(ingest_file(engine, p, opts))


# ── watch ────────────────────────────────────────────────────────────────────────────────────
