"""Bring a ledger to the newest schema through alembic, without an alembic.ini.

The worker and every CLI command that writes call `upgrade()` before use; it is idempotent and
cheap when the ledger is already current. Concurrent upgrades (two workers starting on one
PostgreSQL database) are serialised by an advisory lock.
"""

from __future__ import annotations

from pathlib import Path

from alembic import command
from alembic.config import Config
from alembic.runtime.migration import MigrationContext
from alembic.script import ScriptDirectory
from loopledger.ledger.engine import make_engine
from loopledger.ledger.revisions import NewerLedger, check_known  # noqa: F401 (re-exported)
from sqlalchemy import text
from sqlalchemy.engine import Connection, Engine

MIGRATIONS = Path(__file__).resolve().parent / "migrations"
# Any constant shared by all LoopLedger processes; pg_advisory_xact_lock takes a bigint.
PG_LOCK_KEY = 0x4C6F6F704C6564  # "LoopLed"


def _config(conn: Connection) -> Config:
    cfg = Config()
    cfg.set_main_option("script_location", str(MIGRATIONS))
    cfg.attributes["connection"] = conn
    return cfg


def head() -> str:
    return ScriptDirectory(str(MIGRATIONS)).get_current_head()


def current(conn: Connection) -> str | None:
    return MigrationContext.configure(conn).get_current_revision()


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
            if revision == "head" and now == head():
                return
            command.upgrade(_config(conn), revision)
    finally:
        if isinstance(engine_or_url, str):
            engine.dispose()
