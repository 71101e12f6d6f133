"""Engine factory: SQLite by default, PostgreSQL by URL.

One writer, many readers (the datasette / phoenix habit): the worker writes through an engine
whose pool holds exactly one connection, the dashboard reads through read-only connections.
"""

from __future__ import annotations

import os
import re
import time
import urllib.parse
from pathlib import Path

from loopledger.ledger.urls import (  # noqa: F401 (re-exported)
    CONNECT_TIMEOUT_S,
    DEFAULT_SQLITE_PATH,
    ENV_PATH,
    ENV_URL,
    resolve_url,
    sqlite_url,
)
from sqlalchemy import create_engine, event
from sqlalchemy.engine import URL, Engine, make_url
from sqlalchemy.pool import QueuePool

BUSY_TIMEOUT_MS = int(os.environ.get("LOOPLEDGER_BUSY_TIMEOUT_MS", "30000"))  # SQLite waits this long for the write lock
# A dashboard query that runs longer than this is cut off (datasette's habit): one runaway
# aggregate must not pin a server thread. Override with $LOOPLEDGER_QUERY_TIMEOUT (seconds).
READ_QUERY_TIMEOUT_S = float(os.environ.get("LOOPLEDGER_QUERY_TIMEOUT", "10"))
PROGRESS_STEPS = 20_000  # SQLite VM instructions between deadline checks (~1 ms of work)


def display_url(url: str) -> str:
    """The ledger URL for people (stdout, logs, the dashboard): never a password.

    The one place that hides it: the userinfo password and any query parameter naming one
    (`?password=`, `sslpassword=`) become `***`. The URL given to the engine is unchanged."""
    try:
        u = make_url(url)
    except Exception:  # noqa: BLE001 (unparseable: hide everything between :// and @)
        return re.sub(r"://[^/@]*@", "://***@", url)
    if u.get_backend_name() == "sqlite" and u.database and u.database != ":memory:":
        return u.database  # a SQLite ledger is a file: its path, unquoted, is what --db takes
    hidden = {k: "***" for k in u.query if "password" in k.lower() or k.lower() in ("pass", "pwd")}
    if hidden:
        u = u.update_query_dict(hidden)
    return u.render_as_string(hide_password=True)


def is_sqlite(url: str) -> bool:
    return make_url(url).get_backend_name() == "sqlite"


def sqlite_path(url: str) -> Path | None:
    u = make_url(url)
    if u.get_backend_name() != "sqlite" or not u.database or u.database == ":memory:":
        return None
    return Path(u.database)


def _sqlite_pragmas(readonly: bool):
    def on_connect(dbapi_conn, _record):
        # Python's sqlite3 opens implicit transactions; let SQLAlchemy's BEGIN be the only one.
        dbapi_conn.isolation_level = None
        cur = dbapi_conn.cursor()
        # Wait for the writer instead of failing with "database is locked" under contention.
        cur.execute(f"PRAGMA busy_timeout = {BUSY_TIMEOUT_MS}")
        # Enforce the schema's ON DELETE CASCADE: re-ingesting a session replaces it whole.
        cur.execute("PRAGMA foreign_keys = ON")
        if readonly:
            # Belt and braces on top of mode=ro: a dashboard bug can never write the ledger.
            cur.execute("PRAGMA query_only = ON")
        else:
            # WAL: readers (the dashboard) never block the writer and never see a half-written batch.
            cur.execute("PRAGMA journal_mode = WAL")
            # NORMAL is durable across application crashes in WAL mode (only an OS crash can lose
            # the last commits), and it makes bulk ingest several times faster than FULL.
            cur.execute("PRAGMA synchronous = NORMAL")
        # Sorting and temp b-trees in memory: the read model's GROUP BYs stay off the disk.
        cur.execute("PRAGMA temp_store = MEMORY")
        # 64 MiB page cache per connection: the hot indexes of a 1M-call ledger fit.
        cur.execute("PRAGMA cache_size = -65536")
        cur.close()

    return on_connect


def _sqlite_time_limit(eng: Engine, seconds: float) -> None:
    """Interrupt any statement on this engine's connections that runs longer than `seconds`.

    SQLite has no statement timeout; a progress handler polled every PROGRESS_STEPS VM steps
    aborts the statement ("interrupted") once the deadline armed before it has passed. Results
    are fetched lazily, so the deadline stays armed through the fetch and is cleared on check-in.
    """

    @event.listens_for(eng, "connect")
    def _install(dbapi_conn, record):
        deadline = record.info["ll_deadline"] = [None]

        def handler() -> int:
            d = deadline[0]
            return 1 if d is not None and time.monotonic() > d else 0

        dbapi_conn.set_progress_handler(handler, PROGRESS_STEPS)

    @event.listens_for(eng, "before_cursor_execute")
    def _arm(conn, cursor, statement, parameters, context, executemany):
        slot = conn.info.get("ll_deadline")
        if slot is not None:
            slot[0] = time.monotonic() + seconds

    @event.listens_for(eng, "checkin")
    def _disarm(dbapi_conn, record):
        slot = record.info.get("ll_deadline")
        if slot is not None:
            slot[0] = None


class LedgerFolderMissing(FileNotFoundError):
    """A SQLite ledger's folder does not exist (a typo is far likelier than a wish to create it)."""


def make_engine(url: str, *, readonly: bool = False, query_timeout: float | None = None,
                create_dirs: bool = False, connect_timeout: float | None = None) -> Engine:
    """A writer engine (pool of exactly one connection) or a read-only reader engine.

    Readers get a time limit per statement (`query_timeout`, default READ_QUERY_TIMEOUT_S):
    PostgreSQL's statement_timeout, or a progress-handler deadline on SQLite. A writer on a SQLite
    file whose folder is missing raises LedgerFolderMissing unless `create_dirs`. A PostgreSQL
    server is given `connect_timeout` seconds (default CONNECT_TIMEOUT_S) to connect: one that
    takes the TCP connection and never answers must not hang a command, nor a hook, forever."""
    timeout = READ_QUERY_TIMEOUT_S if query_timeout is None else query_timeout
    if is_sqlite(url):
        path = sqlite_path(url)
        if readonly and path is not None:
            # A read-only URI connection: the dashboard cannot take the write lock at all. The path
            # is percent-quoted inside the file: URI (a `#` would end it, a `%20` be decoded) and
            # the URL is built from parts, never parsed from a string.
            ro_url = URL.create("sqlite", database="file:" + urllib.parse.quote(str(path)),
                                query={"mode": "ro", "uri": "true"})
            eng = create_engine(ro_url, poolclass=QueuePool, pool_size=4, max_overflow=4)
        elif path is not None:
            if create_dirs:
                path.parent.mkdir(parents=True, exist_ok=True)
            elif not path.parent.is_dir():
                raise LedgerFolderMissing(f"the folder {path.parent} does not exist "
                                          "(create it, or pass --create to have it made)")
            # One writer: a pool of exactly one connection, so writes queue instead of colliding.
            eng = create_engine(url, poolclass=QueuePool, pool_size=1, max_overflow=0, pool_timeout=60)
        else:
            eng = create_engine(url)
        event.listen(eng, "connect", _sqlite_pragmas(readonly))
        if readonly:
            _sqlite_time_limit(eng, timeout)
        # Python's sqlite3 would otherwise start its own transactions; SQLAlchemy emits BEGIN.
        event.listen(eng, "begin", lambda conn: conn.exec_driver_sql("BEGIN"))
        return eng
    connect = {"connect_timeout": max(2, int(CONNECT_TIMEOUT_S if connect_timeout is None else connect_timeout))}
    if readonly:
        eng = create_engine(
            url,
            pool_pre_ping=True,
            connect_args={**connect, "options": f"-c default_transaction_read_only=on "
                          f"-c statement_timeout={int(timeout * 1000)}"},
        )
    else:
        eng = create_engine(url, pool_pre_ping=True, pool_size=1, max_overflow=0, connect_args=connect)
    return eng
