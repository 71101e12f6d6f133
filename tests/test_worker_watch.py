"""`loopledger watch` as a real process on real files: new files, appended lines, truncation,
a vanished file, SIGTERM / SIGINT, and a restart that resumes from the stored offsets.

Waiting is bounded by HANG only so a broken watcher cannot hang the suite; the latencies seen are
printed (pytest -s), never asserted."""

from __future__ import annotations

import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from loopledger import worker
from loopledger.ledger import migrate, schema
from loopledger.ledger.engine import make_engine
from sqlalchemy import exc as sa_exc
from sqlalchemy import select

from bench.gen_chat import session_lines
from tests.test_worker import dump

BIN = Path(sys.executable).parent / "loopledger"
HANG = 60.0


def _wait(url: str, predicate, what: str) -> float:
    """Poll the ledger read-only until predicate(conn) holds; returns the seconds it took."""
    eng = make_engine(url, readonly=True)
    t0 = time.monotonic()
    try:
        while True:
            try:
                with eng.connect() as conn:
                    if predicate(conn):
                        return time.monotonic() - t0
            except sa_exc.OperationalError:  # the ledger file or its tables may not exist yet
                pass
            if time.monotonic() - t0 > HANG:
                pytest.fail(f"watch never got to: {what}")
            time.sleep(0.05)
    finally:
        eng.dispose()


def _events_of(conn, name: str) -> int | None:
    return conn.execute(select(schema.sessions.c.n_events).join(schema.sources)
                        .where(schema.sources.c.path.like(f"%{name}"))).scalar()


def _status(conn, name: str) -> str | None:
    return conn.execute(select(schema.sources.c.status).where(schema.sources.c.path.like(f"%{name}"))).scalar()


def _start(folder: Path, url: str) -> subprocess.Popen:
    return subprocess.Popen([str(BIN), "watch", str(folder), "--db", url, "--interval", "0.2"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def test_watch_follows_files_and_resumes(tmp_path, fresh_db):
    folder = tmp_path / "projects" / "p1"
    folder.mkdir(parents=True)
    rng = random.Random(4)
    a_lines = session_lines(rng, 60, session=1)
    b_lines = session_lines(rng, 40, session=2)
    a, b = folder / "a.jsonl", folder / "b.jsonl"
    a.write_bytes(b"".join(a_lines[:30]))
    migrate.upgrade(fresh_db)
    latencies = {}
    proc = _start(tmp_path / "projects", fresh_db)
    try:
        latencies["existing file"] = _wait(fresh_db, lambda c: _events_of(c, "a.jsonl"), "a.jsonl stored")

        b.write_bytes(b"".join(b_lines))
        latencies["new file"] = _wait(fresh_db, lambda c: _events_of(c, "b.jsonl"), "b.jsonl picked up")

        with engine_for(fresh_db) as conn:
            before = _events_of(conn, "a.jsonl")
        with open(a, "ab") as fh:
            fh.writelines(a_lines[30:])
        latencies["appended lines"] = _wait(
            fresh_db, lambda c: (_events_of(c, "a.jsonl") or 0) > before, "appended lines of a.jsonl")

        b.write_bytes(b"".join(b_lines[:10]))  # truncated: read anew, what was read before kept
        latencies["truncated file"] = _wait(
            fresh_db, lambda c: _status(c, "b.jsonl") == "ok" and _ingested_size(c, "b.jsonl") == b.stat().st_size,
            "truncated b.jsonl re-read")

        a_copy = a.read_bytes()
        a.unlink()
        latencies["vanished file"] = _wait(fresh_db, lambda c: _status(c, "a.jsonl") == "missing", "a.jsonl missing")
        assert proc.poll() is None  # survived all of it

        proc.send_signal(signal.SIGTERM)
        out, err = proc.communicate(timeout=HANG)
        assert proc.returncode == 0, err
        assert "Watch summary" in out
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()

    # While stopped: a comes back with more lines, b grows. A restart resumes from stored offsets.
    a.write_bytes(a_copy)
    with open(b, "ab") as fh:
        fh.writelines(b_lines[10:])
    proc = _start(tmp_path / "projects", fresh_db)
    try:
        latencies["after restart"] = _wait(
            fresh_db, lambda c: _ingested_size(c, "b.jsonl") == b.stat().st_size and _status(c, "a.jsonl") == "ok",
            "changes made while stopped")
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=HANG)
        assert proc.returncode == 0, err
        assert "appended" in err  # b.jsonl was read as an append, not from scratch
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()

    # The ledger equals one built from the final files in one go.
    other = make_engine(f"sqlite:///{tmp_path / 'other.sqlite'}")
    migrate.upgrade(other)
    worker.ingest_paths(other, [tmp_path / "projects"], worker.Options())
    mine = make_engine(fresh_db)
    try:
        # b.jsonl's session as it was before it shrank is kept, under a source of its own; the rest
        # equals a ledger built from the final files in one go.
        with mine.begin() as conn:
            kept = conn.execute(select(schema.sources.c.id, schema.sources.c.path)
                                .where(schema.sources.c.status == "truncated")).all()
            assert len(kept) == 1 and kept[0].path.startswith(str(b))
            assert conn.execute(select(schema.sessions.c.n_events)
                                .where(schema.sessions.c.source_id == kept[0].id)).scalar() > 0
            conn.execute(schema.sources.delete().where(schema.sources.c.id == kept[0].id))
        assert dump(mine) == dump(other)
    finally:
        mine.dispose()
        other.dispose()
    print("watch latencies (s):", {k: round(v, 2) for k, v in latencies.items()})


def _ingested_size(conn, name: str) -> int | None:
    return conn.execute(select(schema.sources.c.byte_offset).where(schema.sources.c.path.like(f"%{name}"))).scalar()


class engine_for:  # noqa: N801 (a context manager used like a function)
    def __init__(self, url: str) -> None:
        self.eng = make_engine(url, readonly=True)

    def __enter__(self):
        self.conn = self.eng.connect()
        return self.conn

    def __exit__(self, *exc) -> None:
        self.conn.close()
        self.eng.dispose()


def test_partial_last_line_waits_for_its_newline(tmp_path, fresh_db):
    """Watch mode: a line still being written is not quarantined; once complete it is stored."""
    eng = make_engine(fresh_db)
    migrate.upgrade(eng)
    lines = session_lines(random.Random(8), 10, session=3)
    f = tmp_path / "live.jsonl"
    half = lines[-1][: len(lines[-1]) // 2]
    f.write_bytes(b"".join(lines[:-1]) + half)
    opts = worker.Options(defer_partial_tail=True)
    r1 = worker.ingest_file(eng, f, opts)
    assert r1.quarantined == 0
    with open(f, "ab") as fh:
        fh.write(lines[-1][len(half):])
    r2 = worker.ingest_file(eng, f, opts)
    assert r2.action == "appended" and r2.quarantined == 0
    other = make_engine(f"sqlite:///{tmp_path / 'other.sqlite'}")
    migrate.upgrade(other)
    worker.ingest_file(other, f, worker.Options())
    assert dump(eng) == dump(other)
    # A one-shot ingest of a file cut mid-line does quarantine it: nobody will finish that line.
    g = tmp_path / "cut.jsonl"
    g.write_bytes(b"".join(lines[:-1]) + half)
    assert worker.ingest_file(other, g, worker.Options()).quarantined == 1
    eng.dispose()
    other.dispose()
