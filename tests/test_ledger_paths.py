"""Ledger locations: names with `#`, `%`, spaces and non-ASCII letters reach the database they
name, on both backends; a missing folder is an error unless the user asks to create it."""

from __future__ import annotations

import os
import subprocess
import sys
import uuid
from pathlib import Path

import pytest
import sqlalchemy as sa
from loopledger.ledger.engine import display_url, make_engine, resolve_url
from loopledger.ledger.migrate import upgrade
from sqlalchemy.engine import URL, make_url

BIN = Path(sys.executable).with_name("loopledger")
NAMES = ["a#b", "a%20b", "a b", "über", "q?mode=rw"]
SAMPLE = Path(__file__).resolve().parent.parent / "sample_data" / "anthropic"


def _roundtrip(url: str) -> None:
    """The writer creates a marker; a read-only reader on the same URL sees it and cannot write."""
    writer = make_engine(url)
    try:
        upgrade(writer)
        with writer.begin() as conn:
            conn.execute(sa.text("CREATE TABLE marker (v VARCHAR(20))"))
            conn.execute(sa.text("INSERT INTO marker VALUES ('here')"))
    finally:
        writer.dispose()
    reader = make_engine(url, readonly=True)
    try:
        with reader.connect() as conn:
            assert conn.execute(sa.text("SELECT v FROM marker")).scalar() == "here"
        with pytest.raises(sa.exc.DBAPIError, match="(?i)read-?only"), reader.begin() as conn:
            conn.execute(sa.text("INSERT INTO marker VALUES ('no')"))
    finally:
        reader.dispose()


@pytest.mark.parametrize("name", NAMES)
def test_sqlite_paths_with_special_characters(tmp_path, name):
    folder = tmp_path / f"dir {name}"
    folder.mkdir()
    path = folder / f"ledger {name}.sqlite"
    url = resolve_url(str(path))
    assert make_url(url).database == str(path)
    _roundtrip(url)
    assert sorted(os.listdir(folder))[0] == path.name  # the file named, nothing at a truncated path
    assert not [p for p in tmp_path.rglob("*") if p.is_file() and not p.is_relative_to(folder)]
    assert display_url(url) == str(path)


def test_a_reader_on_a_missing_file_creates_nothing(tmp_path):
    path = tmp_path / "a#b.sqlite"
    reader = make_engine(resolve_url(str(path)), readonly=True)
    try:
        with pytest.raises(sa.exc.OperationalError), reader.connect():
            pass
    finally:
        reader.dispose()
    assert list(tmp_path.iterdir()) == []  # neither a.sqlite (cut at #) nor the file itself


@pytest.mark.skipif(not os.environ.get("LOOPLEDGER_TEST_PG_URL"), reason="no PostgreSQL server configured")
@pytest.mark.parametrize("name", NAMES)
def test_postgresql_database_names_with_special_characters(name):
    admin_url = make_url(os.environ["LOOPLEDGER_TEST_PG_URL"])
    db = f"ll_test_{uuid.uuid4().hex[:6]} {name}"
    admin = sa.create_engine(admin_url, isolation_level="AUTOCOMMIT")
    with admin.connect() as conn:
        conn.execute(sa.text(f'CREATE DATABASE "{db}"'))
    try:
        url = URL.create(admin_url.drivername, username=admin_url.username, password=admin_url.password,
                         host=admin_url.host, port=admin_url.port, database=db).render_as_string(hide_password=False)
        assert resolve_url(url) == url
        _roundtrip(url)
        assert db in make_url(display_url(url)).database and "***" in display_url(url)
    finally:
        with admin.connect() as conn:
            conn.execute(sa.text(f'DROP DATABASE IF EXISTS "{db}" WITH (FORCE)'))
        admin.dispose()


def _run(*args, cwd):
    return subprocess.run([str(BIN), *args], capture_output=True, text=True, timeout=120, cwd=cwd,
                          env={k: v for k, v in os.environ.items() if not k.startswith("LOOPLEDGER_")})


def test_a_missing_folder_is_an_error_unless_asked_to_create_it(tmp_path):
    target = tmp_path / "no" / "such dir" / "x.sqlite"
    p = _run("ingest", str(SAMPLE), "--db", str(target), cwd=tmp_path)
    assert p.returncode == 1 and "the folder" in p.stderr and str(target.parent) in p.stderr and "--create" in p.stderr
    assert "Traceback" not in p.stderr and not (tmp_path / "no").exists()
    p = _run("ingest", str(SAMPLE), "--db", str(target), "--create", cwd=tmp_path)
    assert p.returncode == 0, p.stderr
    assert target.is_file()


def test_ingest_into_a_path_with_a_hash_is_read_back_by_the_dashboard_reader(tmp_path):
    target = tmp_path / "team #1 %20" / "ledger.sqlite"
    target.parent.mkdir()
    p = _run("ingest", str(SAMPLE), "--db", str(target), cwd=tmp_path)
    assert p.returncode == 0, p.stderr
    reader = make_engine(resolve_url(str(target)), readonly=True)
    try:
        with reader.connect() as conn:
            assert conn.execute(sa.text("SELECT count(*) FROM sessions")).scalar() > 0
    finally:
        reader.dispose()
    # Nothing created at a path cut at the `#` or decoded from the `%20`.
    assert {p.parent for p in tmp_path.rglob("*") if p.is_file()} == {target.parent}
