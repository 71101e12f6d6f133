"""Cached, read-only access to the ledger for the pages.

One read-only engine per ledger URL (st.cache_resource) and one cached call per read-model query
(st.cache_data with a short ttl: the live pages refresh every REFRESH_S and must see new rows).
All SQL lives in ingest/ledger/read.py; this module only adds caching. The dashboard writes two
things, both through loopledger.ledger.writes in short transactions on its own writer engine: a
person's label on a run, and "Save as policies" on Compare (each session judged and stored in its
own transaction, so a running watcher is never locked out for long).
"""

from __future__ import annotations

from typing import Any

import sqlalchemy as sa
import streamlit as st
from loopledger.ledger import read, read_cost, writes
from loopledger.ledger.engine import display_url, make_engine, resolve_url

REFRESH_S = 5  # how often the live pages (Sessions, Ingest health) re-read the ledger
TTL_S = REFRESH_S  # a cached read never outlives one refresh


def url() -> str:
    return resolve_url()


@st.cache_resource(show_spinner=False)
def reader(db_url: str):
    """The cached read-only engine for a ledger URL (one per URL per server)."""
    return make_engine(db_url, readonly=True)


def connect():
    """A read-only connection to the current ledger (use it as a context manager)."""
    return reader(url()).connect()


@st.cache_resource(show_spinner=False)
def _writer(db_url: str):
    # Labels and saved policies go through it (see save_label / save_policies); the ingest worker
    # stays the ledger's main writer.
    return make_engine(db_url)


@st.cache_data(ttl=TTL_S, show_spinner=False, max_entries=256)
def _query(db_url: str, name: str, *args: Any, **kwargs: Any) -> Any:
    with reader(db_url).connect() as conn:
        return getattr(read, name)(conn, *args, **kwargs)


def q(name: str, *args: Any, **kwargs: Any) -> Any:
    """Run read.<name>(conn, *args, **kwargs) on the current ledger, cached for TTL_S seconds."""
    return _query(url(), name, *args, **kwargs)


def fresh(name: str, *args: Any, **kwargs: Any) -> Any:
    """The same, uncached: for what a person just changed (labels)."""
    with reader(url()).connect() as conn:
        return getattr(read, name)(conn, *args, **kwargs)


def problem() -> str | None:
    """Why the ledger cannot be shown (missing file, no tables), or None when it can."""
    try:
        with reader(url()).connect() as conn:
            conn.execute(sa.text("SELECT 1 FROM sessions LIMIT 1")).all()
    except sa.exc.SQLAlchemyError as exc:
        where = display_url(url())
        return (f"Cannot read the ledger at {where}: {exc.orig if getattr(exc, 'orig', None) else exc}. "
                "Ingest transcripts first: `loopledger ingest PATH --db LEDGER`.")
    return None


def save_label(session_id: int, run_idx: int, label: str, note: str, loop_first: int | None = None,
               loop_last: int | None = None) -> None:
    """A person's label on a session from the dashboard (ValueError: a label it cannot carry)."""
    writes.save_label(_writer(url()), session_id, run_idx, label, note, loop_first, loop_last)


def save_policies(specs, session_ids, progress=None) -> int:
    """Store settings as policies with their verdicts on the given sessions (one transaction each)."""
    from loopledger import worker  # the replay engine's pipeline: imported when a setting is saved

    return worker.judge_stored(_writer(url()), specs, session_ids, progress=progress)


def sessions_csv(f: read.SessionFilter, sort: str = "halts") -> str:
    """Every session matching `f` as CSV (the Sessions page's download: all filtered rows, not
    the page shown). Read only when the button is pressed."""
    with connect() as conn:
        return read.sessions_page(conn, f, sort, True, None).to_csv(index=False)


@st.cache_data(ttl=TTL_S, show_spinner=False, max_entries=256)
def _cost_query(db_url: str, name: str, *args: Any, **kwargs: Any) -> Any:
    with reader(db_url).connect() as conn:
        return getattr(read_cost, name)(conn, *args, **kwargs)


def cost(name: str, *args: Any, **kwargs: Any) -> Any:
    """Run read_cost.<name>(conn, ...) (what loops cost) on the current ledger, cached like `q`."""
    return _cost_query(url(), name, *args, **kwargs)
