"""The live paths' connection to the ledger: a hook runs once per tool call, so it must not pay
for importing SQLAlchemy (about a second on a loaded machine) just to write two rows.

A SQLite ledger is opened with the stdlib `sqlite3` and the same pragmas as the engine factory
(loopledger.ledger.engine); PostgreSQL goes through the engine factory and uses its psycopg
connection. Either way the caller gets a `LiveDB` that speaks the small part of SQLAlchemy's
Connection the live code needs (`exec_driver_sql`, `dialect.name`, `dialect.paramstyle`), so
loopledger.live.enforce and loopledger.live.session run unchanged on a SQLAlchemy Connection too.

SQL here is written with `?` placeholders; `sql()` turns them into `%s` for psycopg.
"""

from __future__ import annotations

import os
import sqlite3
from dataclasses import dataclass
from typing import Any

from loopledger.ledger.revisions import NewerLedger, check_known, head_revision  # noqa: F401 (re-exported)
from loopledger.ledger.urls import CONNECT_TIMEOUT_S, resolve_url, sqlite_file

# A hook waits this long for another writer (an ingest) before it gives up and allows the call:
# an agent must not hang behind a long ingest transaction (and never past its deadline:
# loopledger.live.deadline cuts every wait to what is left).
ENV_BUSY = "LOOPLEDGER_HOOK_BUSY_TIMEOUT"
HOOK_BUSY_TIMEOUT_S = float(os.environ.get(ENV_BUSY, "5"))
# A long-lived process (the resident guard, loopledger.live.resident) keeps its SQLite ledgers
# open between events (keep_open): closing a WAL database's last connection checkpoints it and
# its next commit restarts the WAL, together most of an event's time. None: each open_db is a
# fresh connection, closed by close() (a hook process). A kept connection (and engine) is
# checked out while an event uses it and back in at close(), so two events decided at once (the
# resident's threads) never share one; the second opens its own, released if none is needed.
_kept: dict[str, LiveDB] | None = None
_kept_engines: dict[str, Any] = {}  # and PostgreSQL engines (their pools), by URL
KEPT_MAX = 8
# A hook process that ends with os._exit (the console script, loopledger.entry) leaves its
# SQLite connections open to the exit (leave_open_at_exit): closing a WAL database's last
# connection checkpoints it (two fsyncs) and deletes the WAL, so the next hook's first commit
# creates it again, together 10-40 ms of a hook's 50 under load. Committed is committed either
# way; the WAL stays (as with any open ledger) and SQLite's autocheckpoint folds it in.
_left_open: list[LiveDB] | None = None


class LedgerUnavailable(Exception):
    """The ledger is missing, not a LoopLedger ledger, or cannot be reached."""


class LedgerTooNew(LedgerUnavailable):
    """A newer LoopLedger wrote the ledger (revisions.NewerLedger): only an upgrade mends it."""


class LedgerBusy(Exception):
    """Another writer held the ledger past the wait for it (or the wait was not made again)."""


def is_busy(exc: BaseException) -> bool:
    """`exc` is a wait for another writer's lock that ran out: SQLite's "database is locked"
    (busy_timeout), PostgreSQL's lock_not_available (lock_timeout, SQLSTATE 55P03)."""
    if isinstance(exc, sqlite3.OperationalError):
        text = str(exc)
        return "database is locked" in text or "database is busy" in text
    return getattr(exc, "sqlstate", None) == "55P03"


@dataclass(frozen=True, slots=True)
class Dialect:
    name: str  # sqlite | postgresql
    paramstyle: str  # qmark | format


def sql(conn: Any, text: str) -> str:
    """`text` with its `?` placeholders in the connection's paramstyle."""
    return text if conn.dialect.paramstyle == "qmark" else text.replace("?", "%s")


class LiveDB:
    """One DB-API connection with an explicit transaction per decision."""

    def __init__(self, raw: Any, dialect: Dialect, url: str, closer: Any = None, close_raw: bool = True) -> None:
        self.raw = raw
        self._close_raw = close_raw
        self.dialect = dialect
        self.url = url
        self._closer = closer
        self.file_id: tuple[int, int] | None = None  # (device, inode) of a kept SQLite ledger
        # PostgreSQL: how long a statement of a write transaction waits for a lock another
        # writer holds (SQLite's busy_timeout does this on the connection).
        self.lock_timeout_ms: int | None = None

    def exec_driver_sql(self, statement: str, params: Any = ()) -> Any:
        cur = self.raw.cursor()
        cur.execute(statement, params)
        return cur

    def busy_wait(self, seconds: float) -> None:
        """From the next transaction on, wait at most `seconds` for a lock another writer holds
        (0: try once): SQLite's busy_timeout, PostgreSQL's lock_timeout."""
        if self.dialect.name == "sqlite":
            self.raw.execute(f"PRAGMA busy_timeout = {int(seconds * 1000)}")
        else:
            self.lock_timeout_ms = max(1, int(seconds * 1000))

    def begin_write(self) -> None:
        """Start a transaction that holds the database write lock (SQLite) from its first
        statement, so two hook processes of one session run one after the other."""
        if self.dialect.name == "sqlite":
            self.raw.execute("BEGIN IMMEDIATE")
        elif self.lock_timeout_ms is not None:
            # Without it a session row another writer holds (FOR UPDATE) is waited for forever,
            # and the agent with it; with it the wait ends in LockNotAvailable: the call is
            # allowed and logged, as on a busy SQLite ledger. LOCAL: this transaction only.
            self.exec_driver_sql(f"SET LOCAL lock_timeout = {int(self.lock_timeout_ms)}")

    def lock_session(self, session_id: int) -> None:
        """PostgreSQL: the session row's lock serialises its hook processes (SQLite already holds
        the database write lock)."""
        if self.dialect.name == "postgresql":
            self.exec_driver_sql("SELECT id FROM sessions WHERE id = %s FOR UPDATE", (session_id,))

    def commit(self) -> None:
        self.raw.commit() if self.dialect.name != "sqlite" else self.raw.execute("COMMIT")

    def rollback(self) -> None:
        try:
            if self.dialect.name == "sqlite":
                if self.raw.in_transaction:
                    self.raw.execute("ROLLBACK")
            else:
                self.raw.rollback()
        except Exception:  # noqa: BLE001 (closing after a failure: nothing more to do)
            pass

    def close(self) -> None:
        if self.file_id is not None:  # kept open for the next event; nothing left pending
            self.rollback()
            _check_in(self)
            return
        if _left_open is not None and self.dialect.name == "sqlite":
            self.rollback()
            _left_open.append(self)  # closed by the process's exit (see _left_open)
            return
        self.release()

    def release(self) -> None:
        if self._close_raw:
            self.raw.close()
        if self._closer is not None:
            self._closer()

    def __enter__(self) -> LiveDB:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()


def leave_open_at_exit() -> None:
    """This process ends with os._exit right after its event: its SQLite connections are left
    to the exit instead of closed (see _left_open)."""
    global _left_open
    if _left_open is None:
        _left_open = []


def keep_open() -> None:
    """From now on this process keeps each SQLite ledger it opens open (see _kept), and each
    PostgreSQL engine with its pool."""
    global _kept
    if _kept is None:
        _kept = {}


def _check_in(live: LiveDB) -> None:
    """A kept SQLite connection back for the next event (released if one is kept already)."""
    path = sqlite_file(live.url)
    if _kept is None or path is None or path in _kept:
        live.file_id = None
        live.release()
        return
    while len(_kept) >= KEPT_MAX:
        _kept.pop(next(iter(_kept))).release()
    _kept[path] = live


def _kept_one(path: str, busy_timeout_s: float) -> LiveDB | None:
    """The kept connection to `path` if it is still that file, at the newest schema, waiting at
    most `busy_timeout_s` for another writer (each request its own: its deadline's)."""
    kept = _kept.pop(path, None) if _kept is not None else None
    if kept is None:
        return None
    try:
        st = os.stat(path)
        same = kept.file_id == (st.st_dev, st.st_ino)
        version = kept.raw.execute("SELECT version_num FROM alembic_version").fetchone() if same else None
    except (OSError, sqlite3.Error):
        version = None
    if version is None or version[0] != head_revision():
        kept.file_id = None
        kept.release()  # replaced, removed or migrated meanwhile: open it afresh
        return None
    kept.raw.execute(f"PRAGMA busy_timeout = {int(busy_timeout_s * 1000)}")
    return kept  # checked out: back in at close()


def release_gone() -> list[str]:
    """Close each kept SQLite ledger whose file was removed or replaced since it was opened (an
    idle resident must not hold a deleted ledger's space, nor its old inode, until it exits);
    the paths released. The next event on such a path opens whatever is there then."""
    gone = []
    for path, kept in list((_kept or {}).items()):
        try:
            st = os.stat(path)
            same = kept.file_id == (st.st_dev, st.st_ino)
        except OSError:
            same = False
        if not same:
            _kept.pop(path).release()
            gone.append(path)
    return gone


def _read_only(path: str) -> bool:
    """The hook cannot write `path`: the file, or its folder (SQLite writes its WAL beside it)."""
    return not os.access(path, os.W_OK) or not os.access(os.path.dirname(os.path.abspath(path)), os.W_OK)


def _open_sqlite(url: str, path: str, busy_timeout_s: float, upgrade: bool, keep: bool = True) -> LiveDB:
    kept = _kept_one(path, busy_timeout_s) if keep else None
    if kept is not None:
        return kept
    if not os.path.isfile(path):
        raise LedgerUnavailable(f"no ledger at {path} (create it with `loopledger ingest … --db {path}`)")
    raw = sqlite3.connect(path, timeout=busy_timeout_s, isolation_level=None, check_same_thread=False)
    try:  # a file of other bytes fails at its first statement, a pragma: all are checked
        # The engine factory's pragmas (see loopledger.ledger.engine for why each is set).
        raw.execute(f"PRAGMA busy_timeout = {int(busy_timeout_s * 1000)}")
        raw.execute("PRAGMA foreign_keys = ON")
        raw.execute("PRAGMA synchronous = NORMAL")
        version = raw.execute("SELECT version_num FROM alembic_version").fetchone()
    except sqlite3.DatabaseError as exc:
        raw.close()
        if _read_only(path) or "readonly" in str(exc):
            raise LedgerUnavailable(f"{path} is read-only: the hook writes every decision there "
                                    "(make the file and its folder writable by this user)") from None
        raise LedgerUnavailable(f"{path} is not a LoopLedger ledger ({exc})") from None
    if version is not None:
        try:
            check_known(version[0])
        except NewerLedger as exc:
            raw.close()
            raise LedgerTooNew(f"{path}: {exc}") from None
    if _read_only(path):
        raw.close()
        raise LedgerUnavailable(f"{path} is read-only: the hook writes every decision there "
                                "(make the file and its folder writable by this user)")
    if version is None or version[0] != head_revision():
        raw.close()
        if not upgrade:
            raise LedgerUnavailable(f"{path}: schema {version and version[0]} is not the newest")
        # Once per schema change: the slow path through alembic, then the fast path again.
        from loopledger.ledger import migrate

        migrate.upgrade(url)
        return _open_sqlite(url, path, busy_timeout_s, upgrade=False, keep=keep)
    live = LiveDB(raw, Dialect("sqlite", "qmark"), url)
    if _kept is not None and keep:
        st = os.stat(path)
        live.file_id = (st.st_dev, st.st_ino)  # kept from its close() on (_check_in)
    return live


def open_db(db: str | None = None, *, busy_timeout_s: float = HOOK_BUSY_TIMEOUT_S,
            upgrade: bool = True, connect_timeout_s: float = CONNECT_TIMEOUT_S, keep: bool = True) -> LiveDB:
    """The ledger named by `db` (a path or URL; default as for every command), migrated to the
    newest schema. A missing SQLite file is LedgerUnavailable: the live paths never create one;
    so is a read-only one, one a newer LoopLedger wrote, and a server that does not answer
    within `connect_timeout_s`. `keep=False`: a connection of its own, outside what keep_open
    keeps (another thread's)."""
    url = resolve_url(db)
    path = sqlite_file(url)
    if path is not None:
        return _open_sqlite(url, path, busy_timeout_s, upgrade, keep)
    if not keep:
        live = _open_postgresql(url, upgrade, None, connect_timeout_s, keep=False)
        live.lock_timeout_ms = max(1, int(busy_timeout_s * 1000))
        return live
    kept = _kept_engines.pop(url, None) if _kept is not None else None
    live = None
    if kept is not None:
        try:
            live = _open_postgresql(url, upgrade, kept, connect_timeout_s)
        except LedgerUnavailable:
            kept.dispose()  # its pooled connection died (a server restart): once more, afresh
    live = live or _open_postgresql(url, upgrade, None, connect_timeout_s)
    live.lock_timeout_ms = max(1, int(busy_timeout_s * 1000))
    return live


def _pg_version(raw: Any) -> str | None:
    """The ledger's alembic revision (None: no alembic_version table yet), read on `raw`."""
    try:
        with raw.cursor() as cur:
            cur.execute("SELECT version_num FROM alembic_version")
            row = cur.fetchone()
    except Exception:  # noqa: BLE001 (no table: a fresh database, migrated by the caller)
        raw.rollback()
        return None
    raw.rollback()  # nothing held: the decision's transaction starts afresh
    return row[0] if row else None


def _open_postgresql(url: str, upgrade: bool, engine: Any, connect_timeout_s: float = CONNECT_TIMEOUT_S,
                     keep: bool = True) -> LiveDB:
    from loopledger.ledger.engine import make_engine
    from sqlalchemy.exc import SQLAlchemyError

    where = url.split("@")[-1]
    try:
        engine = engine or make_engine(url, connect_timeout=connect_timeout_s)
    except SQLAlchemyError as exc:  # a driver that is not installed, a URL it cannot take
        raise LedgerUnavailable(f"cannot open the ledger at {where}: {exc}") from None
    # The pool hands the driver's own errors through (psycopg.OperationalError, ConnectionTimeout).
    driver_error = getattr(engine.dialect.loaded_dbapi, "Error", SQLAlchemyError)
    try:
        fairy = engine.raw_connection()
        version = _pg_version(fairy.driver_connection)
        check_known(version)  # a newer LoopLedger's ledger: the one line, before alembic is imported
        if upgrade and version != head_revision():
            fairy.close()
            from loopledger.ledger import migrate  # once per schema change: the slow path

            migrate.upgrade(engine)
            fairy = engine.raw_connection()
    except NewerLedger as exc:
        raise LedgerTooNew(f"{where}: {exc}") from None
    except (SQLAlchemyError, OSError, driver_error) as exc:
        raise LedgerUnavailable(f"cannot open the ledger at {where}: {getattr(exc, 'orig', None) or exc}") from None
    if _kept is None or not keep:
        return LiveDB(fairy.driver_connection, Dialect("postgresql", "format"), url, closer=engine.dispose)
    # Kept (the resident): the engine stays, its connection goes back to the pool (rolled back),
    # the engine back among the kept ones at close (checked out meanwhile: see _kept).
    def check_in() -> None:
        fairy.close()
        if url in _kept_engines:
            engine.dispose()
        else:
            _kept_engines[url] = engine

    return LiveDB(fairy.driver_connection, Dialect("postgresql", "format"), url, closer=check_in,
                  close_raw=False)
