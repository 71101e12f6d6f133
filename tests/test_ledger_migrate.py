"""Migrations: the alembic head creates exactly schema.py's tables, on SQLite and PostgreSQL."""

from __future__ import annotations

import shutil
import subprocess
import sys
import zipfile

from alembic.autogenerate import compare_metadata
from alembic.migration import MigrationContext
from loopledger.ledger import migrate
from loopledger.ledger.engine import make_engine
from loopledger.ledger.schema import metadata
from loopledger.live import db as live_db
from sqlalchemy import inspect, select


def test_upgrade_creates_exactly_the_schema(db_url):
    migrate.upgrade(db_url)
    eng = make_engine(db_url)
    try:
        with eng.connect() as conn:
            diffs = compare_metadata(MigrationContext.configure(conn), metadata)
            assert diffs == []
            assert migrate.current(conn) == migrate.head()
            names = set(inspect(conn).get_table_names())
        assert set(metadata.tables) <= names
    finally:
        eng.dispose()


def test_upgrade_is_idempotent_and_downgrade_removes_tables(db_url):
    eng = make_engine(db_url)
    try:
        migrate.upgrade(eng)
        migrate.upgrade(eng)  # a second run on a current ledger is a no-op, not an error
        with eng.begin() as conn:
            assert migrate.current(conn) == migrate.head() == live_db.head_revision() == "0013_member_identity"
        from alembic import command

        with eng.begin() as conn:
            command.downgrade(migrate._config(conn), "base")
        with eng.connect() as conn:
            assert not set(metadata.tables) & set(inspect(conn).get_table_names())
        migrate.upgrade(eng)
        with eng.connect() as conn:
            assert set(metadata.tables) <= set(inspect(conn).get_table_names())
    finally:
        eng.dispose()


def test_a_0001_ledger_upgrades_in_place_and_keeps_its_rows(db_url):
    """A ledger written at revision 0001 keeps its sources when brought to head, and then holds
    offsets past 2 GiB (PostgreSQL's INTEGER stopped at 2**31 - 1)."""
    from loopledger.ledger.schema import sources
    from sqlalchemy import select

    eng = make_engine(db_url)
    try:
        migrate.upgrade(eng, "0001")
        with eng.begin() as conn:
            conn.execute(sources.insert().values(path="/a.jsonl", size=10, byte_offset=10, status="ok"))
        migrate.upgrade(eng)
        big = 5 * 2**30
        with eng.begin() as conn:
            assert migrate.current(conn) == migrate.head()
            conn.execute(sources.insert().values(path="/big.jsonl", size=big, byte_offset=big, status="ok"))
            rows = dict(conn.execute(select(sources.c.path, sources.c.byte_offset)).all())
        assert rows == {"/a.jsonl": 10, "/big.jsonl": big}
    finally:
        eng.dispose()


def test_wheel_ships_the_migrations(tmp_path):
    # Build from a copy: a build in the shared work tree would leave build/ and *.egg-info behind.
    root = migrate.MIGRATIONS.parents[2]
    proj = tmp_path / "proj"
    proj.mkdir()
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(root / name, proj / name)
    for name in ("ingest", "app"):
        shutil.copytree(root / name, proj / name, ignore=shutil.ignore_patterns("__pycache__"))
    out = tmp_path / "dist"
    subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w", str(out), str(proj)],
                   check=True, capture_output=True)
    (wheel,) = out.glob("loopledger-*.whl")
    names = set(zipfile.ZipFile(wheel).namelist())
    assert "loopledger/ledger/migrations/env.py" in names
    assert "loopledger/ledger/migrations/versions/0001_initial.py" in names
    assert "loopledger/ledger/migrations/versions/0002_bigint_offsets.py" in names
    assert "loopledger/app/main.py" in names and "loopledger/app/views/replay.py" in names
    # Nothing generic at the top of site-packages: only loopledger/ and the dist-info.
    assert {n.split("/")[0] for n in names} - {"loopledger"} == {
        n.split("/")[0] for n in names if ".dist-info/" in n}


def test_a_plugin_named_by_import_path_fits_the_policies_table(db_url):
    """`mypkg.guards:make_guard` names are longer than the built-ins' 20 characters (0003)."""
    from loopledger.ledger import schema

    eng = make_engine(db_url)
    try:
        migrate.upgrade(eng)
        name = "some_company.agent_guards.loops:make_same_tool_guard"
        with eng.begin() as conn:
            conn.execute(schema.policies.insert().values(id="p" * 32, detector=name, params="{}",
                                                         label=name, is_default=False))
            assert conn.execute(select(schema.policies.c.detector)).scalar_one() == name
    finally:
        eng.dispose()
