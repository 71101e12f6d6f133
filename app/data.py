"""Cached, read-only access to the ledger for the pages.

One read-only engine per ledger URL (st.cache_resource) and one cached call per read-model query
(st.cache_data with a short ttl: the live pages refresh every REFRESH_S and must see new rows).
All SQL lives in ingest/ledger/read.py; this module only adds caching. The dashboard writes, in
short transactions on its own writer engine: a person's label on a run (loopledger.ledger.writes),
"Save as policies" on Compare (each session judged and stored in its own transaction, so a running
watcher is never locked out for long), the enforced setting, and members (the Members page). Each
write that a role governs is made as the signed-in user (app/signin.py; without sign-in, the
local user) and refused by the write itself when their role may not (loopledger.ledger.team).
"""

from __future__ import annotations

from typing import Any

import sqlalchemy as sa
import streamlit as st
from loopledger.app import signin
from loopledger.ledger import read, read_cost, team, writes
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
    """A person's label on a session from the dashboard, recorded with who gave it (ValueError: a
    label it cannot carry, or team.Forbidden, one: their role may not label)."""
    writes.save_label(_writer(url()), session_id, run_idx, label, note, loop_first, loop_last,
                      actor=signin.actor())


def enforce(spec: Any = None, policy_id: str | None = None, origin: str = "compare") -> Any:
    """Enforce a setting (specs) or a stored policy (its id) from the dashboard, recorded with who
    chose it; team.Forbidden unless they are an owner (checked in the writing transaction)."""
    from loopledger.live import enforce as live_enforce

    with _writer(url()).begin() as conn:
        if policy_id is not None:
            return live_enforce.set_enforced_id(conn, policy_id, origin=origin, actor=signin.actor())
        return live_enforce.set_enforced(conn, spec, origin=origin, actor=signin.actor())


def fresh_team(name: str, *args: Any) -> Any:
    """loopledger.ledger.team.<name>(conn, *args) uncached: roles change while people work."""
    with reader(url()).connect() as conn:
        return getattr(team, name)(conn, *args)


def save_member(email: str, role: str | None, subject: str = "") -> None:
    """Add a member, change their role (role None: remove them); an owner's (team.Forbidden). With
    `subject` (the team names its issuer), the member is keyed on the issuer and that subject."""
    with _writer(url()).begin() as conn:
        if role is None:
            team.remove_member(conn, email, by=signin.actor())
        elif subject.strip():
            team.set_member(conn, email, role, by=signin.actor(), issuer=signin.issuer(), subject=subject)
        else:
            team.set_member(conn, email, role, by=signin.actor())


def save_policies(specs, session_ids, progress=None) -> int:
    """Store settings as policies with their verdicts on the given sessions (one transaction each),
    as the signed-in user: team.Forbidden unless a labeller or more (checked in each transaction)."""
    from loopledger import worker  # the replay engine's pipeline: imported when a setting is saved

    return worker.judge_stored(_writer(url()), specs, session_ids, progress=progress, actor=signin.actor())


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
