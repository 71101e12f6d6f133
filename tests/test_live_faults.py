"""Fault injection on the live paths (the hooks, `loopledger guard`, LiveGuard, `loopledger
receive`), each test named for the rule of /work/shared/design.md it pins ("Live paths" and "Bad
input and faults"): real processes, real SQLite files, real PostgreSQL where parametrized, a real
full or read-only file system (tmpfs) under the receiver's spool."""

from __future__ import annotations

import contextlib
import json
import os
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest
from loopledger.detectors.policy import PolicySpec
from loopledger.ledger import migrate
from loopledger.ledger.engine import make_engine
from loopledger.live import enforce

from tests.live_support import BIN, npm_test_loop, output, run_hook
from tests.test_receive import ReceiverProcess, call_counts, hold_ledger, many_spans, post, request, wait_for

NO_RESIDENT = {**os.environ, "LOOPLEDGER_HOOK_RESIDENT": "0"}


def _ledger(url: str, spec: PolicySpec | None = None) -> str:
    eng = make_engine(url)
    migrate.upgrade(eng)
    if spec is not None:
        with eng.begin() as conn:
            enforce.set_enforced(conn, spec, origin="cli")
    eng.dispose()
    return url


def _pre(tmp_path: Path) -> dict:
    loop = npm_test_loop(tmp_path, calls=1)
    return next(ev for ev in loop.events if ev["hook_event_name"] == "PreToolUse")


def _enforced_rows(url: str) -> list[tuple]:
    eng = make_engine(url)
    try:
        with eng.connect() as conn:
            return [tuple(r) for r in conn.exec_driver_sql(
                "SELECT call_id, verdict, count FROM enforced_checks ORDER BY seq").fetchall()]
    finally:
        eng.dispose()


# ── a tmpfs under the spool: a real full disk, a real read-only file system ─────────────────

@contextlib.contextmanager
def tmpfs(where: Path, size: str):
    where.mkdir(parents=True, exist_ok=True)
    done = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size},mode=0700", "tmpfs", str(where)],
                          capture_output=True)
    if done.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {done.stderr.decode().strip()}")
    try:
        yield where
    finally:
        subprocess.run(["mount", "-o", "remount,rw", str(where)], capture_output=True)
        subprocess.run(["umount", "-l", str(where)], capture_output=True)


def _fill(folder: Path, leave: int) -> Path:
    """Fill the file system `folder` is on, then free about `leave` bytes (its pages)."""
    filler = folder / "filler"
    fd = os.open(filler, os.O_WRONLY | os.O_CREAT, 0o600)
    try:
        chunk = b"\0" * 4096
        with contextlib.suppress(OSError):
            while os.write(fd, chunk):
                pass
    finally:
        os.close(fd)
    os.truncate(filler, max(0, filler.stat().st_size - leave))
    return filler


def test_full_disk_under_the_spool_is_not_acknowledged_and_the_retry_is_stored_once(tmp_path):
    """(c) A full disk: the request gets 503 (not acknowledged, the exporter retries); the retry
    once there is room is stored, exactly once, and the half-written line the full disk left does
    not glue onto the next span."""
    spool = tmp_path / "spool"
    with tmpfs(spool, "1m"):
        rp = ReceiverProcess(tmp_path, 300, "--spool", str(spool)).start()
        try:
            assert post(rp.url, request(many_spans("before", 2)), "application/json")[0] == 200
            assert wait_for(lambda: len(call_counts(rp.db)) == 2, 30)
            filler = _fill(spool, 4096)  # room for a part of the request: a torn write
            body = request(many_spans("full", 30))
            status, answer = post(rp.url, body, "application/json")
            assert status == 503, (status, answer)
            assert "spool" in answer["message"]
            filler.unlink()
            status, _ = post(rp.url, body, "application/json")  # the exporter's retry
            assert status == 200
            assert post(rp.url, request(many_spans("after", 2)), "application/json")[0] == 200
            assert wait_for(lambda: len(call_counts(rp.db)) == 34, 30), call_counts(rp.db)
        finally:
            rp.stop()
        want = {**{f"call_before_{i}": 1 for i in range(2)}, **{f"call_full_{i}": 1 for i in range(30)},
                **{f"call_after_{i}": 1 for i in range(2)}}
        assert call_counts(rp.db) == want
        rp.start()  # a restart reads the spool whole again: nothing twice, nothing quarantined
        try:
            time.sleep(1.0)
            assert call_counts(rp.db) == want
        finally:
            rp.stop()
        with sqlite3.connect(rp.db) as conn:
            assert conn.execute("SELECT COUNT(*) FROM ingest_errors").fetchone()[0] == 0


def test_a_read_only_spool_is_not_acknowledged_and_the_retry_is_stored_once(tmp_path):
    """(c) The spool's file system turned read-only under a running receiver: 503, and once it
    is writable again the retry is stored exactly once."""
    spool = tmp_path / "spool"
    with tmpfs(spool, "4m"):
        rp = ReceiverProcess(tmp_path, 300, "--spool", str(spool)).start()
        try:
            # Before the day's first span (the file is not open yet, so the remount is allowed).
            subprocess.run(["mount", "-o", "remount,ro", str(spool)], check=True)
            body = request(many_spans("ro", 3))
            status, answer = post(rp.url, body, "application/json")
            assert status == 503, (status, answer)
            assert "Read-only file system" in answer["message"]
            subprocess.run(["mount", "-o", "remount,rw", str(spool)], check=True)
            assert post(rp.url, body, "application/json")[0] == 200  # the exporter's retry
            assert post(rp.url, request(many_spans("rw", 2)), "application/json")[0] == 200
            assert wait_for(lambda: len(call_counts(rp.db)) == 5, 30), call_counts(rp.db)
        finally:
            rp.stop()
        assert call_counts(rp.db) == {**{f"call_rw_{i}": 1 for i in range(2)}, **{f"call_ro_{i}": 1 for i in range(3)}}


def test_a_span_acknowledged_then_killed_before_its_flush_with_a_torn_last_line_is_stored_once(tmp_path):
    """(c) kill -9 right after the acknowledgement and before the flush (held off by another
    writer), then a torn last line (a later write the kill cut short): the restart stores every
    acknowledged span exactly once and appends the next span cleanly after the cut."""
    rp = ReceiverProcess(tmp_path, busy_ms=20_000).start()
    try:
        holder = hold_ledger(rp.db)  # the flush cannot write: what is acknowledged is only spooled
        try:
            assert post(rp.url, request(many_spans("acked", 4)), "application/json")[0] == 200
            rp.kill()
        finally:
            holder.execute("ROLLBACK")
            holder.close()
        assert call_counts(rp.db) == {}
        day = next((tmp_path / "ledger.sqlite.otlp").glob("otlp-*.jsonl"))
        whole = day.read_bytes()
        with open(day, "ab") as fh:  # a line that was being written, never acknowledged
            fh.write(whole.splitlines(keepends=True)[0][:57])
        rp.start()
        assert wait_for(lambda: len(call_counts(rp.db)) == 4, 30)
        assert post(rp.url, request(many_spans("next", 2)), "application/json")[0] == 200
        assert wait_for(lambda: len(call_counts(rp.db)) == 6, 30)
    finally:
        rp.stop()
    assert call_counts(rp.db) == {**{f"call_acked_{i}": 1 for i in range(4)}, **{f"call_next_{i}": 1 for i in range(2)}}
    with sqlite3.connect(rp.db) as conn:
        assert conn.execute("SELECT COUNT(*) FROM ingest_errors").fetchone()[0] == 0
    assert all(json.loads(line) for line in day.read_bytes().splitlines())  # no glued line


# ── the ledger locked by another writer while a hook runs ───────────────────────────────────

def _hook_proc(event: dict, db: str, log: Path, env: dict) -> subprocess.CompletedProcess:
    return subprocess.run([str(BIN), "hook", "claude-code", "--db", db, "--log", str(log)],
                          input=json.dumps(event).encode(), capture_output=True, timeout=60, env=env)


@pytest.mark.parametrize("resident", ["0", "1"])
def test_a_ledger_locked_by_another_writer_allows_the_call_after_the_bounded_wait_and_logs_one_line(
        tmp_path, db_url, resident):
    """design.md: a busy ledger allows the call, fast, and logs one line (fail-open) — after
    LOOPLEDGER_HOOK_BUSY_TIMEOUT, not forever; on PostgreSQL too (another writer holding the
    session's row). Once the writer is gone the next call is judged and stored."""
    spec = PolicySpec.parse("ladder:warn_at=2,block_at=3,halt_at=4")
    _ledger(db_url, spec)
    pre = _pre(tmp_path)
    log = tmp_path / "hook.log"
    env = {**os.environ, "LOOPLEDGER_HOOK_BUSY_TIMEOUT": "1", "LOOPLEDGER_HOOK_RESIDENT": resident,
           "XDG_RUNTIME_DIR": str(tmp_path / "run"), "LOOPLEDGER_HOOK_RESIDENT_IDLE": "5"}
    (tmp_path / "run").mkdir(mode=0o700)
    first = _hook_proc({**pre, "tool_use_id": "toolu_first"}, db_url, log, env)  # the session exists now
    assert first.returncode == 0 and first.stdout == b""
    if db_url.startswith("sqlite"):
        holder = sqlite3.connect(db_url.removeprefix("sqlite:///"), isolation_level=None)
        holder.execute("BEGIN IMMEDIATE")
        release = lambda: (holder.execute("ROLLBACK"), holder.close())  # noqa: E731
    else:
        import psycopg

        holder = psycopg.connect(db_url.replace("postgresql+psycopg://", "postgresql://"))
        holder.execute("SELECT id FROM sessions WHERE key = %s FOR UPDATE", (pre["session_id"],))
        release = lambda: (holder.rollback(), holder.close())  # noqa: E731
    try:
        held = _hook_proc({**pre, "tool_use_id": "toolu_held"}, db_url, log, env)
    finally:
        release()
    assert held.returncode == 0 and held.stdout == b"" and held.stderr == b""  # allowed
    lines = log.read_text().splitlines()
    assert len(lines) == 1 and "allowed without judging" in lines[0]
    assert "lock" in lines[0].lower(), lines[0]
    after = _hook_proc({**pre, "tool_use_id": "toolu_after"}, db_url, log, env)
    assert after.returncode == 0
    assert [r[0] for r in _enforced_rows(db_url)] == ["toolu_first", "toolu_after"]
    assert [r[2] for r in _enforced_rows(db_url)] == [1, 2]  # the held call was never counted
