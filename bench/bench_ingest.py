"""Ingest benchmark: generated OpenAI-chat JSONL → readers → redaction → the default policies →
the SQLite ledger, against raw `sqlite3.executemany` of the very rows it wrote (same run).

Each ingest runs in a child process so its peak RSS is its own; two corpus sizes show whether
memory stays flat as the corpus grows. `LOOPLEDGER_BENCH_CALLS` overrides the large size (e.g.
1000000); by default the full run measures 200k calls and extrapolates 1M linearly, and says so.
"""

from __future__ import annotations

import json
import os
import resource
import shutil
import sqlite3
import subprocess
import sys
import tempfile
import time
from pathlib import Path

CALLS_PER_FILE = 2000
BUDGET_S_1M = 60.0
BUDGET_RATIO = 2.0
TABLES = ("sources", "sessions", "events", "calls", "runs", "policies", "checks", "results", "session_stats",
          "run_outcomes", "ingest_errors")


def _child(corpus: str, db: str, jobs: int) -> None:
    from ingest import worker
    from ingest.ledger import migrate
    from ingest.ledger.engine import make_engine

    engine = make_engine(f"sqlite:///{db}")
    migrate.upgrade(engine)
    t0 = time.perf_counter()
    totals = worker.ingest_paths(engine, [corpus], worker.Options(jobs=jobs))
    wall = time.perf_counter() - t0
    engine.dispose()
    me = resource.getrusage(resource.RUSAGE_SELF)
    kids = resource.getrusage(resource.RUSAGE_CHILDREN)  # the --jobs processes, reaped by now
    print(json.dumps({"wall": wall, "calls": totals.calls, "checks": totals.checks,
                      "cpu": me.ru_utime + me.ru_stime + kids.ru_utime + kids.ru_stime,
                      "rss_mb": me.ru_maxrss / 1024, "child_rss_mb": kids.ru_maxrss / 1024,
                      "files": totals.files}))


def _ingest(corpus: Path, db: Path, jobs: int) -> dict:
    out = subprocess.run([sys.executable, "-m", "bench.bench_ingest", "--child", str(corpus), str(db), str(jobs)],
                         capture_output=True, text=True, check=True, cwd=Path(__file__).resolve().parent.parent)
    return json.loads(out.stdout.strip().splitlines()[-1])


def _raw_executemany(ledger: Path, target: Path) -> tuple[float, float, int]:
    """Copy every row of the ledger into an empty database of the same schema with plain
    sqlite3.executemany (same pragmas, one transaction); time only the inserts and the commit."""
    src = sqlite3.connect(ledger)
    ddl = [r[0] for r in src.execute("SELECT sql FROM sqlite_master WHERE type IN ('table', 'index') "
                                     "AND sql IS NOT NULL AND name NOT LIKE 'sqlite_%'")]
    dst = sqlite3.connect(target, isolation_level=None)
    dst.execute("PRAGMA journal_mode = WAL")
    dst.execute("PRAGMA synchronous = NORMAL")
    dst.execute("PRAGMA foreign_keys = ON")
    for stmt in ddl:
        dst.execute(stmt)
    spent, cpu, rows = 0.0, 0.0, 0
    dst.execute("BEGIN")
    for table in TABLES:
        cur = src.execute(f"SELECT * FROM {table}")
        marks = ",".join("?" * len(cur.description))
        sql = f"INSERT INTO {table} VALUES ({marks})"
        while chunk := cur.fetchmany(100_000):
            t0, c0 = time.perf_counter(), time.process_time()
            dst.executemany(sql, chunk)
            spent += time.perf_counter() - t0
            cpu += time.process_time() - c0
            rows += len(chunk)
    t0, c0 = time.perf_counter(), time.process_time()
    dst.execute("COMMIT")
    spent += time.perf_counter() - t0
    cpu += time.process_time() - c0
    dst.close()
    src.close()
    return spent, cpu, rows


def _measure(n_calls: int, work: Path, jobs: int, with_raw: bool) -> dict:
    from bench.gen_chat import write_corpus

    corpus = work / f"corpus_{n_calls}"
    t0 = time.perf_counter()
    files = write_corpus(corpus, max(1, n_calls // CALLS_PER_FILE), min(n_calls, CALLS_PER_FILE), seed=42)
    gen_s = time.perf_counter() - t0
    size_mb = sum(f.stat().st_size for f in files) / 1e6
    db = work / f"ledger_{n_calls}.sqlite"
    res = _ingest(corpus, db, jobs)
    res.update(gen_s=gen_s, corpus_mb=size_mb, db_mb=db.stat().st_size / 1e6)
    if with_raw:
        raw_s, raw_cpu, rows = _raw_executemany(db, work / f"raw_{n_calls}.sqlite")
        res.update(raw_s=raw_s, raw_cpu=raw_cpu, rows=rows)
    shutil.rmtree(corpus)
    for p in work.glob("*.sqlite*"):
        p.unlink()
    return res


def run(quick: bool) -> str:
    large = int(os.environ.get("LOOPLEDGER_BENCH_CALLS", "20000" if quick else "200000"))
    small = max(CALLS_PER_FILE, large // 4)
    jobs = int(os.environ.get("LOOPLEDGER_BENCH_JOBS", str(min(2, os.cpu_count() or 1))))
    work = Path(tempfile.mkdtemp(prefix="ll_bench_ingest_"))
    try:
        big = _measure(large, work, jobs, with_raw=True)
        little = _measure(small, work, jobs, with_raw=False)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    rate = big["calls"] / big["wall"]
    to_1m = 1_000_000 / rate
    cpu_to_1m = big["cpu"] * 1_000_000 / big["calls"]
    ratio = big["wall"] / big["raw_s"]
    cpu_ratio = big["cpu"] / big["raw_cpu"]
    extrapolated = big["calls"] < 1_000_000
    load = os.getloadavg()[0]
    lines = [
        "## Ingest",
        "",
        f"Generated OpenAI-chat JSONL ({CALLS_PER_FILE:,} calls per file, realistic argument and answer sizes, "
        f"loops mixed in), ingested with the {len(_default_specs())} default policies, redaction on, into a fresh "
        f"SQLite ledger by `ingest_paths` with {jobs} job(s). Baseline: raw `sqlite3.executemany` of exactly the "
        "rows that ingest wrote, into the same schema with the same pragmas, in the same run. CPU seconds "
        "include the job processes; they do not depend on what else the machine runs "
        f"(load average at the end: {load:.1f} on {os.cpu_count()} cores).",
        "",
        "| figure | value | baseline (same run) | ratio | budget |",
        "|---|---:|---:|---:|---|",
        f"| wall time, {big['calls']:,} calls ({big['corpus_mb']:.0f} MB of JSONL) | {big['wall']:.1f} s | "
        f"{big['raw_s']:.1f} s raw executemany of {big['rows']:,} rows | {ratio:.1f}× | ≤ {BUDGET_RATIO:.0f}× raw |",
        f"| CPU time, same run | {big['cpu']:.1f} CPU-s | {big['raw_cpu']:.1f} CPU-s raw | {cpu_ratio:.1f}× | |",
        f"| throughput | {rate:,.0f} calls/s ({big['calls'] / big['cpu']:,.0f} calls per CPU-s) | "
        f"{big['rows'] / big['raw_s']:,.0f} rows/s raw | | |",
        f"| 1M calls, wall | {to_1m:.0f} s{' (extrapolated linearly)' if extrapolated else ''} | | | "
        f"≤ {BUDGET_S_1M:.0f} s on 2 cores |",
        f"| 1M calls, CPU | {cpu_to_1m:.0f} CPU-s{' (extrapolated)' if extrapolated else ''} = "
        f"{cpu_to_1m / 2:.0f} s on 2 idle cores at best | | | ≤ {BUDGET_S_1M:.0f} s on 2 cores |",
        f"| checks written | {big['checks']:,} | | | |",
        f"| peak RSS at {little['calls']:,} calls | {little['rss_mb']:.0f} MB (writer), "
        f"{little['child_rss_mb']:.0f} MB (largest job) | | | flat |",
        f"| peak RSS at {big['calls']:,} calls | {big['rss_mb']:.0f} MB (writer), "
        f"{big['child_rss_mb']:.0f} MB (largest job) | | "
        f"{big['rss_mb'] / little['rss_mb']:.2f}× for {big['calls'] / little['calls']:.0f}× the calls | flat |",
        "",
        f"Verdict: time budget {'met' if to_1m <= BUDGET_S_1M else 'NOT met'}; "
        f"ratio to raw {'met' if ratio <= BUDGET_RATIO else 'NOT met'}; memory "
        f"{'flat' if big['rss_mb'] <= 1.25 * little['rss_mb'] else 'NOT flat'}. "
        f"(Corpus generation, not timed above: {big['gen_s']:.0f} s.)",
        "",
    ]
    return "\n".join(lines)


def _default_specs():
    from ingest.detectors.policy import DEFAULT_SPECS

    return DEFAULT_SPECS


if __name__ == "__main__":
    if len(sys.argv) >= 2 and sys.argv[1] == "--child":
        _child(sys.argv[2], sys.argv[3], int(sys.argv[4]))
    else:
        print(run(quick="--quick" in sys.argv))
