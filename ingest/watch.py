"""`loopledger watch`: keep the ledger current with folders as agents write to them."""

from __future__ import annotations

import os
import signal
import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path

from loopledger import formats
from loopledger.changes import stamp
from loopledger.config import Options
from loopledger.discovery import _looks_like_transcript, default_watch_paths, discover
from loopledger.file_ingest import FileReport, ingest_file
from loopledger.jobs import Totals
from sqlalchemy.engine import Engine

__all__ = ["default_watch_paths", "stop_on_signals", "watch"]


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
                todo.update(formats.unit_of(p) for p in dirty
                            if p in seen or _looks_like_transcript(p) or p in roots)
                dirty.clear()
            todo.update(seen)
            for p in sorted(todo):
                if stop.is_set():
                    break
                try:
                    sig = stamp(p)  # a multi-file unit (OpenCode storage) changes with any member
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
                elif report.action not in ("busy", "locked"):
                    seen[p] = sig  # a locked ledger is not the file's fault: tried again next round
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
