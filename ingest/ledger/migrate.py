"""Bring a ledger to the newest schema through alembic, without an alembic.ini.

The worker and every CLI command that writes call `upgrade()` before use; it is idempotent and
cheap when the ledger is already current: the revision is read with one SELECT and alembic is
imported only when there is something to migrate (importing it costs about as much as a small
ingest, on every command). Concurrent upgrades (two workers starting on one PostgreSQL database)
are serialised by an advisory lock.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from loopledger.ledger.engine import make_engine
from loopledger.ledger.revisions import NewerLedger, check_known, head_revision  # noqa: F401 (re-exported)
from sqlalchemy import inspect, text
from sqlalchemy.engine import Connection, Engine

if TYPE_CHECKING:
    from alembic.config import Config

MIGRATIONS = Path(__file__).resolve().parent / "migrations"
# Any constant shared by all LoopLedger processes; pg_advisory_xact_lock takes a bigint.
PG_LOCK_KEY = 0x4C6F6F704C6564  # "LoopLed"


def _config(conn: Connection) -> Config:
    from alembic.config import Config

    cfg = Config()
    cfg.set_main_option("script_location", str(MIGRATIONS))
    cfg.attributes["connection"] = conn
    return cfg


def head() -> str:
    """The newest revision, as alembic reads the migration scripts."""
    from alembic.script import ScriptDirectory

    return ScriptDirectory(str(MIGRATIONS)).get_current_head()


def current(conn: Connection) -> str | None:
    """The ledger's revision (None: not a ledger yet). The table alembic keeps, read directly."""
    if not inspect(conn).has_table("alembic_version"):
        return None
    return conn.execute(text("SELECT version_num FROM alembic_version")).scalar()


def upgrade(engine_or_url: Engine | str, revision: str = "head") -> None:
    """Migrate the ledger to `revision` (default: newest). Accepts an Engine or a URL."""
    engine = make_engine(engine_or_url) if isinstance(engine_or_url, str) else engine_or_url
    try:
        with engine.begin() as conn:
            if conn.dialect.name == "postgresql":
                # Held until this transaction ends: a second worker waits, then finds nothing to do.
                conn.execute(text("SELECT pg_advisory_xact_lock(:k)"), {"k": PG_LOCK_KEY})
            now = current(conn)
            check_known(now)  # a newer LoopLedger's ledger: never migrated, the one line instead
            if revision == "head" and now == head_revision():
                return
            from alembic import command

            command.upgrade(_config(conn), revision)
    finally:
        if isinstance(engine_or_url, str):
            engine.dispose()
