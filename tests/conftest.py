"""Shared fixtures. Real parts only: real SQLite files, a real PostgreSQL server when configured."""

from __future__ import annotations

import os
import uuid
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
SAMPLE_DATA = ROOT / "sample_data"
# ../shared/corpus beside the clone; LOOPLEDGER_CORPUS names it from a worktree elsewhere.
CORPUS = Path(os.environ.get("LOOPLEDGER_CORPUS") or ROOT.parent / "shared" / "corpus")
ARTIFACTS = ROOT / "test-artifacts"

PG_URL = os.environ.get("LOOPLEDGER_TEST_PG_URL")
REQUIRE_PG = os.environ.get("LOOPLEDGER_REQUIRE_PG") == "1"
# The hook processes tests start answer in their own process (the path every existing test
# pins) unless a test asks for the resident guard (tests/test_hook_resident.py): otherwise a
# resident started by one test would answer the next test's hooks and outlive the run.
os.environ.setdefault("LOOPLEDGER_HOOK_RESIDENT", "0")


@pytest.fixture
def fresh_db(tmp_path) -> str:
    """A URL for a brand-new SQLite ledger file."""
    return f"sqlite:///{tmp_path / 'fresh.sqlite'}"


def _pg_database() -> str:
    """Create a throwaway database on the test server and return its URL."""
    from sqlalchemy import create_engine, text
    from sqlalchemy.engine import make_url

    name = "ll_test_" + uuid.uuid4().hex[:12]
    admin = create_engine(PG_URL, isolation_level="AUTOCOMMIT")
    with admin.connect() as conn:
        conn.execute(text(f'CREATE DATABASE "{name}"'))
    admin.dispose()
    return make_url(PG_URL).set(database=name).render_as_string(hide_password=False)


def _pg_drop(url: str) -> None:
    """Drop a throwaway database, closing whatever connections a test left open on it."""
    from sqlalchemy import create_engine, text
    from sqlalchemy.engine import make_url

    name = make_url(url).database
    admin = create_engine(PG_URL, isolation_level="AUTOCOMMIT")
    with admin.connect() as conn:
        conn.execute(text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
    admin.dispose()


@pytest.fixture(params=["sqlite", "postgresql"])
def db_url(request, tmp_path):
    """Every ledger test runs on both backends; the PostgreSQL leg is mandatory in CI."""
    if request.param == "sqlite":
        yield f"sqlite:///{tmp_path / 'ledger.sqlite'}"
        return
    if not PG_URL:
        if REQUIRE_PG:
            pytest.fail("LOOPLEDGER_REQUIRE_PG=1 but LOOPLEDGER_TEST_PG_URL is not set")
        pytest.skip("no PostgreSQL server configured (set LOOPLEDGER_TEST_PG_URL)")
    url = _pg_database()
    yield url
    _pg_drop(url)


@pytest.fixture
def corpus_dir() -> Path:
    if not CORPUS.is_dir():
        pytest.skip("../shared/corpus is absent (fresh clone without shared/)")
    return CORPUS


@pytest.fixture(scope="session")
def artifacts_dir() -> Path:
    ARTIFACTS.mkdir(exist_ok=True)
    return ARTIFACTS
