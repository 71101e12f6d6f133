"""A locked ledger is not a broken file: bounded retries, then one line, a distinct exit status,
nothing recorded against the file, and the next run ingests it. A file that failed for a reason
outside itself (a bad --format) is never recorded as seen-and-unchanged. Real SQLite locks held
by a second connection; real subprocesses for the CLI."""

from __future__ import annotations

import logging
import os
import sqlite3
import subprocess
import sys
import threading
import time
from pathlib import Path

import orjson
import pytest
from loopledger import file_ingest, formats, worker
from loopledger.ledger import engine as engine_mod
from loopledger.ledger import migrate, schema
from loopledger.ledger.engine import make_engine
from sqlalchemy import select

ROOT = Path(__file__).resolve().parent.parent


def _chat(path: Path, n: int = 3) -> Path:
    lines = [orjson.dumps({"role": "user", "content": "go"})]
    for i in range(n):
        lines.append(orjson.dumps({"role": "assistant", "content": None, "tool_calls": [
            {"id": f"c{i}", "type": "function", "function": {"name": "bash", "arguments": '{"cmd": "make"}'}}]}))
        lines.append(orjson.dumps({"role": "tool", "tool_call_id": f"c{i}", "content": "FAILED"}))
    path.write_bytes(b"\n".join(lines) + b"\n")
    return path


@pytest.fixture
def fast_locks(monkeypatch):
    """Short waits so a held lock shows within a second (the real ones are 30 s and ~2 s)."""
    monkeypatch.setattr(engine_mod, "BUSY_TIMEOUT_MS", 100)
    monkeypatch.setattr(file_ingest, "BUSY_RETRY_DELAYS", (0.05, 0.1))


def _hold_write_lock(db: Path) -> sqlite3.Connection:
    con = sqlite3.connect(db, isolation_level=None, timeout=5, check_same_thread=False)
    con.execute("BEGIN IMMEDIATE")  # the database write lock, held until rollback
    return con


def _source(db: Path, path: Path):
    eng = make_engine(f"sqlite:///{db}")
    try:
        with eng.connect() as conn:
            return conn.execute(select(schema.sources.c.status, schema.sources.c.error, schema.sources.c.mtime)
                                .where(schema.sources.c.path == str(path))).first()
    finally:
        eng.dispose()


def test_a_locked_ledger_leaves_the_file_for_the_next_run(tmp_path, fast_locks, caplog):
    db = tmp_path / "ledger.sqlite"
    eng = make_engine(f"sqlite:///{db}")
    migrate.upgrade(eng)
    f = _chat(tmp_path / "s.jsonl")
    holder = _hold_write_lock(db)
    try:
        with caplog.at_level(logging.INFO, logger="loopledger"):
            report = worker.ingest_file(eng, f, worker.Options())
    finally:
        holder.rollback()
        holder.close()
    assert report.action == "locked"
    assert "the ledger is busy" in report.error and "\n" not in report.error
    assert "INSERT" not in report.error and "SELECT" not in report.error  # no SQL dump
    assert sum("retrying" in r.getMessage() for r in caplog.records) == 2  # bounded: two retries
    row = _source(db, f)
    assert row is None or row.status != "error"  # nothing blamed on the file
    again = worker.ingest_file(eng, f, worker.Options())
    assert again.action == "new" and again.calls == 3
    eng.dispose()


def test_a_lock_released_during_the_retries_is_waited_out(tmp_path, monkeypatch):
    monkeypatch.setattr(engine_mod, "BUSY_TIMEOUT_MS", 100)
    monkeypatch.setattr(file_ingest, "BUSY_RETRY_DELAYS", (0.3, 0.3, 0.3))
    db = tmp_path / "ledger.sqlite"
    eng = make_engine(f"sqlite:///{db}")
    migrate.upgrade(eng)
    f = _chat(tmp_path / "s.jsonl")
    holder = _hold_write_lock(db)
    release = threading.Timer(0.4, holder.rollback)
    release.start()
    try:
        report = worker.ingest_file(eng, f, worker.Options())
    finally:
        release.join()
        holder.close()
        eng.dispose()
    assert report.action == "new" and report.calls == 3


def test_the_cli_says_one_line_exits_4_and_logs_the_traceback(tmp_path):
    db = tmp_path / "ledger.sqlite"
    eng = make_engine(f"sqlite:///{db}")
    migrate.upgrade(eng)
    eng.dispose()
    f = _chat(tmp_path / "s.jsonl")
    log = tmp_path / "ingest.log"
    holder = _hold_write_lock(db)
    try:
        out = subprocess.run([sys.executable, "-m", "loopledger.cli.app", "ingest", str(f), "--db", str(db),
                              "--log-file", str(log)], capture_output=True, text=True, cwd=tmp_path, timeout=120,
                             env={**os.environ, "LOOPLEDGER_BUSY_TIMEOUT_MS": "100", "COLUMNS": "200"})
    finally:
        holder.rollback()
        holder.close()
    assert out.returncode == 4, out.stderr
    errors = [ln for ln in out.stderr.splitlines() if ln.startswith("error:")]
    assert len(errors) == 1 and "the ledger is busy" in errors[0], out.stderr
    assert "Traceback" not in out.stderr + out.stdout
    assert "database is locked" in log.read_text()
    row = _source(db, f)
    assert row is None or row.status != "error"
    ok = subprocess.run([sys.executable, "-m", "loopledger.cli.app", "ingest", str(f), "--db", str(db)],
                        capture_output=True, text=True, cwd=tmp_path, timeout=120)
    assert ok.returncode == 0, ok.stderr
    assert _source(db, f).status == "ok"


def test_a_bad_format_flag_does_not_mark_the_file_seen(tmp_path):
    db = tmp_path / "ledger.sqlite"
    eng = make_engine(f"sqlite:///{db}")
    migrate.upgrade(eng)
    f = _chat(tmp_path / "s.jsonl")
    wrong = worker.ingest_paths(eng, [f], worker.Options(format="claude"))
    assert wrong.errors == 1
    right = worker.ingest_paths(eng, [f], worker.Options())
    assert (right.errors, right.changed, right.calls) == (0, 1, 3)
    assert _source(db, f).status == "ok"
    eng.dispose()


def test_a_crash_is_recorded_in_one_line_and_retried_later(tmp_path, monkeypatch, caplog):
    db = tmp_path / "ledger.sqlite"
    eng = make_engine(f"sqlite:///{db}")
    migrate.upgrade(eng)
    f = _chat(tmp_path / "s.jsonl")

    def boom(*a, **k):
        raise RuntimeError("detector bug\nsecond line of detail")

    monkeypatch.setattr(file_ingest, "judge", boom)
    with caplog.at_level(logging.ERROR, logger="loopledger"):
        report = worker.ingest_file(eng, f, worker.Options())
    assert report.action == "error" and "\n" not in report.error and "detector bug" in report.error
    assert any(r.exc_info for r in caplog.records)  # the traceback goes to the log
    monkeypatch.undo()
    again = worker.ingest_file(eng, f, worker.Options())
    assert again.action == "new" and again.calls == 3
    eng.dispose()


def test_a_failing_sniffer_is_logged_not_swallowed(tmp_path, monkeypatch, caplog):
    f = _chat(tmp_path / "s.jsonl")
    mod = formats.readers()["claude-code"]

    def broken(head):
        raise ValueError("sniffer bug")

    monkeypatch.setattr(mod, "sniff", broken)
    with caplog.at_level(logging.WARNING, logger="loopledger"):
        assert formats.sniff(f) == "openai-chat"
    assert any("claude-code sniffer failed" in r.getMessage() and r.exc_info for r in caplog.records)


def test_watch_retries_a_file_the_locked_ledger_left(tmp_path, fast_locks):
    db = tmp_path / "ledger.sqlite"
    eng = make_engine(f"sqlite:///{db}")
    migrate.upgrade(eng)
    folder = tmp_path / "logs"
    folder.mkdir()
    f = _chat(folder / "s.jsonl")
    holder = _hold_write_lock(db)
    stop = threading.Event()
    reports: list = []
    t = threading.Thread(target=worker.watch, args=(eng, [folder], worker.Options(), stop),
                         kwargs={"interval": 0.1, "on_file": reports.append, "use_observer": False})
    t.start()
    try:
        deadline = time.monotonic() + 60
        while not any(r.action == "locked" for r in reports) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert any(r.action == "locked" for r in reports), reports
        holder.rollback()  # the other writer is done: the same, unchanged file must now go in
        while not any(r.action == "new" for r in reports) and time.monotonic() < deadline:
            time.sleep(0.05)
    finally:
        stop.set()
        t.join(timeout=30)
        holder.close()
    assert any(r.action == "new" and r.calls == 3 for r in reports), reports
    assert _source(db, f).status == "ok"
    eng.dispose()
