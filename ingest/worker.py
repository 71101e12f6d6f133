"""The ingest worker: discover → read → redact → replay every policy → write, one file at a time.

Split by responsibility; this module keeps the names other code imports:
    config.py        Options, loopledger.toml policies (load_config, policy_specs)
    discovery.py     which files are transcripts (discover, default_watch_paths)
    sessions.py      grouping a reader's items into sessions (shared with `replay`, golden)
    changes.py       change detection against the sources row (scan, decide)
    file_ingest.py   one file: compute (read, redact, replay; resumed on appends), then one short
                     write transaction (claim, apply); busy-ledger retries
    jobs.py          many files, in --jobs processes (ingest_paths, Totals)
    watch.py         the watch loop and its signals
"""

from __future__ import annotations

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
from loopledger.jobs import Totals, ingest_file_optimistic, ingest_paths, register_sources
from loopledger.watch import stop_on_signals, watch

__all__ = ["BIG_FILE_BYTES", "CONFIG_NAME", "DEFAULT_WATCH_DIRS", "FLUSH_ROWS", "NOT_TRANSCRIPTS", "SKIP_DIRS",
           "STATUS_ERROR", "STATUS_MISSING", "STATUS_OK", "STATUS_QUARANTINED", "TRANSCRIPT_SUFFIXES", "Computed",
           "ConfigFileError", "FileReport", "LedgerBusy", "Options", "Totals", "_claim", "apply", "claim", "compute",
           "count_verdicts", "default_watch_paths", "discover", "ingest_file", "ingest_file_optimistic",
           "ingest_paths", "is_busy", "load_config", "load_prior", "Prior", "policy_specs", "register_sources", "replay_session",
           "stop_on_signals", "watch"]
