"""Compare's sweeps past the first pass, finished in a background thread of the server.

The page answers with a bounded first pass (analysis.sweep.first_pass) and hands the rest of the
selection to a job here, which loads and replays it in chunks into the server's tally cache
(analysis.sweep.TallyCache: one tally per session version and setting). The page shows how far
the job is; once it is done the page draws the whole selection from the cache, without
replaying anything, and so does every later view of that sweep (or of any sweep sharing its
sessions and settings) until the sessions change.

One job per ledger, grid and set of sessions, shared by whoever asks for it; a browser session
that asks for another sweep cancels the job it asked for before (a person who moved on no
longer waits for it).
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from dataclasses import dataclass, field

import streamlit as st
from loopledger import gc_pause
from loopledger.analysis import sweep
from loopledger.ledger import store
from sqlalchemy.engine import Engine

CHUNK = 20  # sessions loaded and replayed between two looks at `cancel`
# Pairs (session version × setting) the server keeps: the default sweep of the default selection is
# 3,000; a tally is a few hundred bytes (its run rows), so this bounds the cache to tens of MB.
MAX_TALLIES = 100_000


@dataclass
class Job:
    total: int
    done: int = 0
    error: str | None = None
    cancel: threading.Event = field(default_factory=threading.Event)
    thread: threading.Thread | None = None

    @property
    def running(self) -> bool:
        return self.thread is not None and self.thread.is_alive()


@st.cache_resource(show_spinner=False)
def tallies(db_url: str) -> sweep.TallyCache:
    """The server's tally cache of a ledger (every page run and job on it shares it)."""
    return sweep.TallyCache(MAX_TALLIES)


@st.cache_resource(show_spinner=False)
def _registry() -> tuple[dict[tuple, Job], threading.Lock]:
    return {}, threading.Lock()


def key_of(db_url: str, grid: sweep.Grid, versions: Sequence[sweep.Version]) -> tuple:
    return (db_url, grid.key(), tuple(versions))


def start(engine: Engine, db_url: str, grid: sweep.Grid, whole: Sequence[sweep.Version],
          todo: Sequence[sweep.Version]) -> tuple[tuple, Job]:
    """The job that completes the sweep of `whole` (replaying `todo`, the sessions the cache
    lacks): the one already running or done for the same ledger, grid and sessions, else a new
    one, started."""
    key = key_of(db_url, grid, whole)
    jobs, lock = _registry()
    with lock:
        job = jobs.get(key)
        if job is None or job.cancel.is_set() or job.error is not None:
            job = Job(len(todo))
            job.thread = threading.Thread(target=_run, args=(engine, grid, list(todo), tallies(db_url), job),
                                          name="loopledger-sweep", daemon=True)
            jobs[key] = job
            job.thread.start()
        for k in [k for k, j in jobs.items() if k != key and not j.running]:
            del jobs[k]  # finished or cancelled: what they swept is in the cache
    return key, job


def get(key: tuple) -> Job | None:
    jobs, lock = _registry()
    with lock:
        return jobs.get(key)


def cancel(key: tuple) -> None:
    job = get(key)
    if job is not None:
        job.cancel.set()


def wait(key: tuple, timeout: float | None = None) -> Job | None:
    """The job for `key` once it has ended (or `timeout` passed): what a test or the bench waits on."""
    job = get(key)
    if job is not None and job.thread is not None:
        job.thread.join(timeout)
    return job


def stop_all() -> None:
    """Cancel every job and wait for them to end (the bench, between two measured views)."""
    jobs, lock = _registry()
    with lock:
        running = list(jobs.values())
    for job in running:
        job.cancel.set()
    for job in running:
        if job.thread is not None:
            job.thread.join()


def _run(engine: Engine, grid: sweep.Grid, versions: list[sweep.Version], cache: sweep.TallyCache, job: Job) -> None:
    try:
        for i in range(0, len(versions), CHUNK):
            if job.cancel.is_set():
                return
            part = versions[i:i + CHUNK]
            # Replay builds objects that live until the chunk is folded in: the cyclic collector
            # paused meanwhile, as in a page run (loopledger.gc_pause).
            with gc_pause.paused(), engine.connect() as conn:
                sessions = [sweep.SessionEvents(sid, store.load_events(conn, sid), updated) for sid, updated, _ in part]
                sweep.sweep(sessions, grid, cache=cache)
            job.done += len(part)
    except Exception as exc:  # noqa: BLE001 — said on the page; the first pass stays shown
        job.error = f"{type(exc).__name__}: {exc}"
