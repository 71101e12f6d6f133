"""The ingest worker: discover → read → redact → replay the policies (the default set, plus any
--policy / loopledger.toml ones) → write, one file at a time.

Split by responsibility; this module keeps the names other code imports:
    config.py        Options, loopledger.toml policies (load_config, policy_specs)
    discovery.py     which files are transcripts (discover, default_watch_paths)
    sessions.py      grouping a reader's items into sessions (shared with `replay`, golden)
    changes.py       change detection against the sources row (scan, decide; a file that shrank
                     is `truncated`: its sessions are kept, file_ingest._keep_truncated)
    file_ingest.py   one file: compute (read, redact, replay; resumed on appends), then one short
                     write transaction (claim, apply); busy-ledger retries
    jobs.py          many files, in --jobs processes (ingest_paths, Totals)
    watch.py         the watch loop and its signals
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from typing import Any

from loopledger.changes import STATUS_ERROR, STATUS_MISSING, STATUS_OK, STATUS_QUARANTINED
from loopledger.config import CONFIG_NAME, ConfigFileError, Options, load_config, policy_specs
from loopledger.discovery import (
    DEFAULT_WATCH_DIRS,
    NOT_TRANSCRIPTS,
    SKIP_DIRS,
    TRANSCRIPT_SUFFIXES,
    default_watch_paths,
    discover,
)
from loopledger.file_ingest import (
    BIG_FILE_BYTES,
    FLUSH_ROWS,
    Computed,
    FileReport,
    LedgerBusy,
    Prior,
    apply,
    claim,
    compute,
    count_verdicts,
    ingest_file,
    is_busy,
    load_prior,
    replay_session,
)
from loopledger.file_ingest import claim as _claim
from loopledger.jobs import (
    AUTO_JOBS_BYTES,
    Totals,
    default_jobs,
    ingest_file_optimistic,
    ingest_paths,
    register_sources,
)
from loopledger.ledger import store, team
from loopledger.watch import stop_on_signals, watch
from sqlalchemy.engine import Engine

__all__ = ["AUTO_JOBS_BYTES", "BIG_FILE_BYTES", "CONFIG_NAME", "DEFAULT_WATCH_DIRS", "FLUSH_ROWS", "NOT_TRANSCRIPTS", "SKIP_DIRS",
           "STATUS_ERROR", "STATUS_MISSING", "STATUS_OK", "STATUS_QUARANTINED", "TRANSCRIPT_SUFFIXES", "Computed",
           "ConfigFileError", "FileReport", "LedgerBusy", "Options", "Totals", "_claim", "apply", "claim", "compute",
           "count_verdicts", "default_jobs", "default_watch_paths", "discover", "ingest_file", "ingest_file_optimistic",
           "ingest_paths", "is_busy", "load_config", "load_prior", "Prior", "policy_specs", "register_sources", "replay_session", "judge_stored",
           "stop_on_signals", "watch"]


# (session id, its events, each policy's verdicts) after a session is stored
OnSession = Callable[[int, list[Any], list[store.PolicyVerdicts]], None]


def judge_stored(engine: Engine, specs: Sequence[Any], session_ids: Iterable[int] | None = None,
                 progress: Callable[[int, int, str], None] | None = None,
                 on_session: OnSession | None = None, actor: team.Actor | None = None) -> int:
    """Store each policy with its verdicts on every given session (default: all); returns the
    number of distinct policies. One transaction for the policies, then one per session.
    `actor` (the dashboard's signed-in user): each of those transactions first checks that their
    role may save policies (team.Forbidden; a role taken away mid-way stops the rest).

    The verdicts are the replay engine's on the ledger's own events, so a saved setting looks
    exactly like a policy the worker ran at ingest.

    Every write is a short transaction: each session is stored in its own, after its verdicts
    are computed outside any transaction. So the SQLite write lock is held for one session at a
    time, never for a whole ledger, and a running `watch` or `ingest` gets its turn between
    sessions."""
    specs = list({sp.id: sp for sp in specs}.values())
    with engine.begin() as conn:
        if actor is not None:
            team.require(conn, actor, team.SAVE_POLICIES)
        store.ensure_policies(conn, specs)
        ids = store.session_ids(conn) if session_ids is None else list(session_ids)
    for n, sid in enumerate(ids, 1):
        with engine.connect() as conn:  # a read: no write lock while loading
            events = store.load_events(conn, sid)
        _, verdicts = replay_session(events, specs)  # computed before the transaction opens
        with engine.begin() as conn:
            if actor is not None:
                team.require(conn, actor, team.SAVE_POLICIES)
            store.replace_verdicts(conn, sid, verdicts)
        if on_session is not None:
            on_session(sid, events, verdicts)
        if progress is not None:
            progress(n, len(ids), str(sid))
    return len(specs)
