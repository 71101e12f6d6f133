"""The engine factory: read-only readers with a time limit per statement, on both backends."""

from __future__ import annotations

import pytest
import sqlalchemy as sa
from loopledger.ledger.engine import make_engine
from loopledger.ledger.migrate import upgrade
from sqlalchemy.exc import OperationalError

# Counts to ten billion: minutes of work, far past any limit below.
RUNAWAY = ("WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 10000000000) "
           "SELECT count(*) FROM n")


def test_a_runaway_read_is_interrupted_and_the_connection_stays_usable(db_url):
    upgrade(db_url)
    reader = make_engine(db_url, readonly=True, query_timeout=0.3)
    try:
        with reader.connect() as conn:
            with pytest.raises(OperationalError) as err:
                conn.execute(sa.text(RUNAWAY)).scalar()
            assert any(w in str(err.value).lower() for w in ("interrupt", "statement timeout", "canceling"))
        with reader.connect() as conn:  # the pool hands out a working connection again
            assert conn.execute(sa.text("SELECT count(*) FROM sessions")).scalar() == 0
    finally:
        reader.dispose()


def test_reads_that_finish_in_time_are_untouched(db_url):
    upgrade(db_url)
    reader = make_engine(db_url, readonly=True, query_timeout=5)
    try:
        with reader.connect() as conn:
            q = "WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 10000) SELECT count(*) FROM n"
            assert conn.execute(sa.text(q)).scalar() == 10000
    finally:
        reader.dispose()


def test_readers_cannot_write(db_url):
    upgrade(db_url)
    # A write that is valid on its own (no foreign key, no constraint): the writer may make it.
    write = "INSERT INTO alembic_version (version_num) VALUES ('probe')"
    writer = make_engine(db_url)
    try:
        with writer.connect() as conn:
            conn.execute(sa.text(write))
            conn.rollback()
    finally:
        writer.dispose()
    reader = make_engine(db_url, readonly=True)
    try:
        # It fails on the reader for being a write, not for anything else.
        with pytest.raises(sa.exc.DBAPIError, match="(?i)read-?only"), reader.begin() as conn:
            conn.execute(sa.text(write))
    finally:
        reader.dispose()


def test_the_writer_pool_holds_exactly_one_connection(fresh_db):
    writer = make_engine(fresh_db)
    try:
        assert writer.pool.size() == 1
        with writer.connect() as conn:
            assert conn.exec_driver_sql("PRAGMA journal_mode").scalar() == "wal"
            assert conn.exec_driver_sql("PRAGMA foreign_keys").scalar() == 1
    finally:
        writer.dispose()
