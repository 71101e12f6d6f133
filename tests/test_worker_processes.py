"""The worker as real processes: SIGKILL and restart, two workers on one database, a dashboard
reader while the worker writes. Deadlines below only bound how long a test may hang; no
assertion depends on how fast anything ran."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from loopledger import worker
from loopledger.ledger import migrate, schema, store
from loopledger.ledger.engine import is_sqlite, make_engine
from sqlalchemy import func, select

from bench.gen_chat import write_corpus
from tests.test_worker import counts, dump

BIN = Path(sys.executable).parent / "loopledger"
HANG = 300  # seconds: only a bound on a hung subprocess


@pytest.fixture
def other(tmp_path):
    eng = make_engine(f"sqlite:///{tmp_path / 'other.sqlite'}")
    migrate.upgrade(eng)
    yield eng
    eng.dispose()


def _stored_files(url: str) -> int:
    eng = make_engine(url, readonly=True)
    try:
        with eng.connect() as conn:
            return conn.execute(select(func.count()).select_from(schema.sources)
                                .where(schema.sources.c.status == "ok")).scalar() or 0
    except Exception:  # the ledger may not exist yet in the first moments  # noqa: BLE001
        return 0
    finally:
        eng.dispose()


def test_sigkill_mid_ingest_then_restart_equals_uninterrupted(db_url, tmp_path, other):
    _kill_restart_compare(db_url, tmp_path, other, jobs=1)


def test_sigkill_with_jobs_then_restart_equals_uninterrupted(fresh_db, tmp_path, other):
    """With --jobs the killed ingest's job processes finish the file in hand and stop."""
    _kill_restart_compare(fresh_db, tmp_path, other, jobs=2)


def _kill_restart_compare(db_url: str, tmp_path: Path, other, jobs: int) -> None:
    corpus = tmp_path / "corpus"
    files = write_corpus(corpus, 40, 400, seed=11)
    migrate.upgrade(db_url)
    proc = subprocess.Popen([str(BIN), "ingest", str(corpus), "--db", db_url, "--jobs", str(jobs)],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + HANG
    while _stored_files(db_url) < 3 and proc.poll() is None and time.monotonic() < deadline:
        time.sleep(0.01)
    proc.send_signal(signal.SIGKILL)
    proc.wait(HANG)
    assert proc.returncode == -signal.SIGKILL
    stored_when_killed = _stored_files(db_url)
    assert 3 <= stored_when_killed < len(files)  # killed part-way, as intended

    rc = subprocess.run([str(BIN), "ingest", str(corpus), "--db", db_url], capture_output=True, timeout=HANG)
    assert rc.returncode == 0, rc.stderr.decode()
    worker.ingest_paths(other, [corpus], worker.Options())
    eng = make_engine(db_url)
    try:
        assert counts(eng) == counts(other)
        assert dump(eng) == dump(other)
        with eng.connect() as conn:
            assert conn.execute(select(func.count()).select_from(schema.sources)).scalar() == len(files)
    finally:
        eng.dispose()


_WORKER = """
import json, sys
from loopledger import worker
from loopledger.ledger.engine import make_engine
eng = make_engine(sys.argv[1])
reports = []
worker.ingest_paths(eng, [sys.argv[2]], worker.Options(worker_id=sys.argv[3]), on_file=reports.append)
print(json.dumps([[r.path, r.action] for r in reports]))
"""


def test_two_workers_never_ingest_the_same_source_twice(db_url, tmp_path, other):
    corpus = tmp_path / "corpus"
    files = write_corpus(corpus, 30, 200, seed=5)
    migrate.upgrade(db_url)
    procs = [subprocess.Popen([sys.executable, "-c", _WORKER, db_url, str(corpus), f"w{i}"],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE) for i in range(2)]
    outs = []
    for p in procs:
        out, err = p.communicate(timeout=HANG)
        assert p.returncode == 0, err.decode()
        outs.append(json.loads(out))
    done = [{path for path, action in o if action == "new"} for o in outs]
    assert not done[0] & done[1]
    assert done[0] | done[1] == {str(f) for f in files}
    worker.ingest_paths(other, [corpus], worker.Options())
    eng = make_engine(db_url)
    try:
        assert dump(eng) == dump(other)
    finally:
        eng.dispose()


def test_read_only_connection_reads_while_the_worker_writes(fresh_db, tmp_path):
    """SQLite WAL: the dashboard's reader sees the last commit while a write transaction is open,
    and never blocks it."""
    write_corpus(tmp_path / "a", 2, 50, seed=1)
    writer = make_engine(fresh_db)
    migrate.upgrade(writer)
    worker.ingest_paths(writer, [tmp_path / "a"], worker.Options())
    reader = make_engine(fresh_db, readonly=True)
    try:
        with reader.connect() as r:
            before = r.execute(select(func.count()).select_from(schema.checks)).scalar()
        assert before > 0
        (f,) = write_corpus(tmp_path / "b", 1, 50, seed=2)
        with writer.begin() as w:  # an open write transaction, mid-ingest
            row = worker._claim(w, str(f), "t")
            opts = worker.Options()
            worker.apply(w, row["id"], worker.compute(f, worker.load_prior(w, row, opts), opts), opts)
            with reader.connect() as r:
                assert r.execute(select(func.count()).select_from(schema.checks)).scalar() == before
                with pytest.raises(Exception, match="readonly|read-only|attempt to write"):
                    r.exec_driver_sql("DELETE FROM checks")
        with reader.connect() as r:
            after = r.execute(select(func.count()).select_from(schema.checks)).scalar()
        assert after > before
    finally:
        reader.dispose()
        writer.dispose()


def test_reader_polls_a_running_ingest_process(fresh_db, tmp_path):
    """A reader querying the whole time a real `loopledger ingest` writes: every query succeeds
    and the counts only grow."""
    corpus = tmp_path / "corpus"
    write_corpus(corpus, 15, 300, seed=9)
    migrate.upgrade(fresh_db)
    proc = subprocess.Popen([str(BIN), "ingest", str(corpus), "--db", fresh_db],
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    reader = make_engine(fresh_db, readonly=True)
    seen = []
    try:
        while proc.poll() is None:
            with reader.connect() as r:
                seen.append(r.execute(select(func.count()).select_from(schema.sessions)).scalar())
                if seen[-1]:
                    sid = r.execute(select(func.max(schema.sessions.c.id))).scalar()
                    assert store.load_events(r, sid)  # a committed session is always whole
            time.sleep(0.005)
        assert proc.wait(HANG) == 0, proc.stderr.read().decode()
        with reader.connect() as r:
            seen.append(r.execute(select(func.count()).select_from(schema.sessions)).scalar())
    finally:
        reader.dispose()
    assert seen == sorted(seen) and seen[-1] == 15


def test_pg_requires_its_leg_in_ci():
    """CI sets LOOPLEDGER_REQUIRE_PG=1: the PostgreSQL leg of these tests must have run there."""
    if os.environ.get("LOOPLEDGER_REQUIRE_PG") == "1":
        url = os.environ.get("LOOPLEDGER_TEST_PG_URL", "")
        assert url and not is_sqlite(url)


def test_jobs_that_cannot_start_fall_back_in_process(tmp_path, other):
    """A script read from stdin cannot be re-imported by spawned jobs, so they die at start: the
    ingest still stores every file, in-process."""
    files = write_corpus(tmp_path / "c", 4, 30, seed=2)
    db = f"sqlite:///{tmp_path / 'l.sqlite'}"
    script = ("from loopledger import worker\nfrom loopledger.ledger import migrate\n"
              "from loopledger.ledger.engine import make_engine\n"
              f"eng = make_engine({db!r}); migrate.upgrade(eng)\n"
              f"t = worker.ingest_paths(eng, [{str(tmp_path / 'c')!r}], worker.Options(jobs=2))\n"
              "print(t.changed, t.errors)\n")
    proc = subprocess.run([sys.executable, "-"], input=script, capture_output=True, text=True, timeout=HANG,
                          cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.split()[-2:] == [str(len(files)), "0"]
    worker.ingest_paths(other, [tmp_path / "c"], worker.Options())
    eng = make_engine(db)
    try:
        assert dump(eng) == dump(other)
    finally:
        eng.dispose()


def _running(pid: int) -> bool:
    """Whether `pid` runs (a zombie nobody reaped, as in a container without an init, does not)."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except (OSError, IndexError):
        return False


@pytest.mark.parametrize("case", ["waiting-for-a-path", "waiting-to-report", "flushing-a-big-report"])
def test_a_job_whose_ingest_was_killed_stops_instead_of_waiting_forever(tmp_path, case):
    """An ingest killed mid-run leaves its --jobs processes without the paths it had not sent
    yet, with a full results queue nobody reads, or with a report bigger than the pipe half
    written into it (the job's exit joins the queue's feeder thread, which waits for a reader):
    each job sees its ingest gone and exits, also when the ingest died before the job had started."""
    script = f"""
import multiprocessing as mp, os, time
from loopledger import jobs, worker
if __name__ == "__main__":
    ctx = mp.get_context("spawn")
    tasks, results = ctx.Queue(), ctx.Queue(maxsize=1)
    if {case!r} == "waiting-to-report":
        results.put("taken")  # the one place: the job's sentinel cannot be put
        tasks.put(None)
    if {case!r} == "flushing-a-big-report":
        tasks.put("x" * 300_000)  # no such file: its report names it, 300 kB, more than a pipe holds
        tasks.put(None)
    job = ctx.Process(target=jobs._job_main, args=({f"sqlite:///{tmp_path / 'l.sqlite'}"!r}, worker.Options(),
                                                 tasks, results, None, os.getpid()))
    job.start()
    open("job.pid", "w").write(str(job.pid))
    if {case!r} == "flushing-a-big-report":
        deadline = time.monotonic() + 60  # only a bound on a job that never takes its paths
        while not tasks.empty() and time.monotonic() < deadline:
            time.sleep(0.05)  # the job has the report in hand, its feeder writing it to nobody
    os._exit(0)  # killed, maybe before the job even started: no sentinel sent, nobody reads the results
"""
    # No pipes: the job would hold them open, and run() would wait for it.
    subprocess.run([sys.executable, "-c", script], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                   timeout=HANG, cwd=tmp_path, check=True)
    pid = int((tmp_path / "job.pid").read_text())
    deadline = time.monotonic() + 60  # only a bound on a job that never stops
    while _running(pid) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not _running(pid), f"job {pid} still runs after its ingest was killed"
