"""Ingest benchmark: generated OpenAI-chat JSONL → readers → redaction → the default policies →
the SQLite ledger, against raw `sqlite3.executemany` of the very rows it wrote (same run).

Each ingest runs in a child process so its peak RSS is its own; two corpus sizes show whether
memory stays flat as the corpus grows (a quarter of the calls, then all of them). The full run
measures 1M calls (about 8 minutes with corpus generation), `--quick` 20k; `LOOPLEDGER_BENCH_CALLS`
overrides the size (anything under 1M is extrapolated linearly, and the table says so).
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
    from loopledger import worker
    from loopledger.ledger import migrate
    from loopledger.ledger.engine import make_engine

    engine = make_engine(f"sqlite:///{db}")
    migrate.upgrade(engine)
    t0 = time.perf_counter()
    if jobs == 0:  # the default, as `loopledger ingest` decides it
        jobs = worker.default_jobs(sum(f.stat().st_size for f in worker.discover([corpus])))
    totals = worker.ingest_paths(engine, [corpus], worker.Options(jobs=jobs))
    wall = time.perf_counter() - t0
    engine.dispose()
    me = resource.getrusage(resource.RUSAGE_SELF)
    kids = resource.getrusage(resource.RUSAGE_CHILDREN)  # the --jobs processes, reaped by now
    print(json.dumps({"wall": wall, "calls": totals.calls, "checks": totals.checks,
                      "cpu": me.ru_utime + me.ru_stime + kids.ru_utime + kids.ru_stime,
                      "rss_mb": _peak_rss_mb(), "child_rss_mb": kids.ru_maxrss / 1024,
                      "files": totals.files}))


def _profile_child(corpus: str, db: str, top: int) -> None:
    """One `--jobs 1` ingest of `corpus` under cProfile: the `top` frames by own time, as JSON."""
    import cProfile
    import pstats

    from loopledger import worker
    from loopledger.ledger import migrate
    from loopledger.ledger.engine import make_engine

    engine = make_engine(f"sqlite:///{db}")
    migrate.upgrade(engine)
    prof = cProfile.Profile()
    prof.enable()
    worker.ingest_paths(engine, [corpus], worker.Options(jobs=1))
    prof.disable()
    engine.dispose()
    stats = pstats.Stats(prof).stats  # type: ignore[attr-defined]
    total = sum(tt for _cc, _nc, tt, _ct, _callers in stats.values())
    rows = sorted(((tt, ct, nc, f"{Path(fn).name}:{line}({name})" if fn != "~" else name)
                   for (fn, line, name), (_cc, nc, tt, ct, _callers) in stats.items()), reverse=True)[:top]
    print(json.dumps({"total": total, "rows": rows}))


def profile_section(n_calls: int, work: Path, top: int = 15) -> list[str]:
    """Where an ingest's time goes: the top frames of a cProfile'd `--jobs 1` ingest of
    `n_calls` generated calls (profiling slows it; shares, not seconds, are the point)."""
    from bench.gen_chat import write_corpus

    corpus = work / f"corpus_profile_{n_calls}"
    write_corpus(corpus, max(1, n_calls // CALLS_PER_FILE), min(n_calls, CALLS_PER_FILE), seed=42)
    out = subprocess.run([sys.executable, "-m", "bench.bench_ingest", "--profile", str(corpus),
                          str(work / "profile.sqlite"), str(top)], capture_output=True, text=True, check=True,
                         cwd=Path(__file__).resolve().parent.parent)
    shutil.rmtree(corpus)
    prof = json.loads(out.stdout.strip().splitlines()[-1])
    lines = [f"Profile (cProfile, `--jobs 1`, {n_calls:,} calls; top {top} frames by own time, "
             f"{prof['total']:.1f} s profiled in all):", "",
             "| frame | own time | share | with callees | calls |", "|---|---:|---:|---:|---:|"]
    for tt, ct, nc, name in prof["rows"]:
        lines.append(f"| `{name}` | {tt:.2f} s | {100 * tt / prof['total']:.0f}% | {ct:.2f} s | {nc:,} |")
    return lines + [""]


def _peak_rss_mb() -> float:
    """This process's own peak RSS. Not ru_maxrss: on Linux that keeps the high-water mark of the
    parent it was forked from (the bench, holding rows from the raw baseline) across exec."""
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
    except OSError:
        pass
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


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


def _measure(n_calls: int, work: Path, jobs: tuple[int, ...], with_raw: bool) -> dict:
    """Generate a corpus once; ingest it once per job count (fresh ledger each); optionally time
    raw executemany of the rows the first ingest wrote."""
    from bench.gen_chat import write_corpus

    corpus = work / f"corpus_{n_calls}"
    t0 = time.perf_counter()
    files = write_corpus(corpus, max(1, n_calls // CALLS_PER_FILE), min(n_calls, CALLS_PER_FILE), seed=42)
    out: dict = {"gen_s": time.perf_counter() - t0, "corpus_mb": sum(f.stat().st_size for f in files) / 1e6}
    for i, j in enumerate(jobs):
        db = work / f"ledger_{n_calls}_{j}.sqlite"
        out[j] = _ingest(corpus, db, j)
        if with_raw and i == 0:
            raw_s, raw_cpu, rows = _raw_executemany(db, work / f"raw_{n_calls}.sqlite")
            out.update(raw_s=raw_s, raw_cpu=raw_cpu, rows=rows)
        for p in work.glob("*.sqlite*"):
            p.unlink()
    shutil.rmtree(corpus)
    return out


SMALL_FILES, SMALL_CALLS = 1_000, 200  # the shape of a ~/.claude/projects folder: many sessions of ~200 calls
PROJECTS = 40  # folders they are spread over, as Claude Code keeps one per project


def _measure_small(n_files: int, work: Path) -> dict:
    """`n_files` files of SMALL_CALLS calls in PROJECTS folders, ingested with `--jobs 1` and the
    default (`--jobs 0`: one per core when they add up to more than 32 MB), each into a fresh
    ledger; raw executemany of the rows the `--jobs 1` ingest wrote."""
    from bench.gen_chat import write_corpus

    corpus = work / "projects"
    per = max(1, n_files // PROJECTS)
    files = [f for k in range(0, n_files, per)
             for f in write_corpus(corpus / f"-home-dev-project-{k // per:02d}", min(per, n_files - k), SMALL_CALLS,
                                   seed=1000 + k)]
    out: dict = {"files": len(files), "corpus_mb": sum(f.stat().st_size for f in files) / 1e6}
    for j in (1, 0):
        db = work / f"small_{j}.sqlite"
        out[j] = _ingest(corpus, db, j)
        if j == 1:
            raw_s, raw_cpu, rows = _raw_executemany(db, work / "small_raw.sqlite")
            out.update(raw_s=raw_s, raw_cpu=raw_cpu, rows=rows)
        for p in work.glob("small_*.sqlite*"):
            p.unlink()
    shutil.rmtree(corpus)
    return out


def _small_lines(sm: dict) -> list[str]:
    lines = [
        "",
        f"Many small files, the shape of a `~/.claude/projects` folder: {sm['files']:,} files of ~{SMALL_CALLS} calls "
        f"in {PROJECTS} project folders ({sm[1]['calls']:,} calls, {sm['corpus_mb']:.0f} MB), the same generator and "
        "pipeline, `--jobs 1` and the default (`--jobs 0`: one process per core, at most 4, for files adding up to "
        "more than 32 MB; the jobs read and replay, the ingest process writes what they computed). Baseline: raw "
        "`executemany` of the rows the `--jobs 1` ingest wrote, same run.",
        "",
        "| figure | value | baseline (same run) | ratio | budget |",
        "|---|---:|---:|---:|---|",
        f"| raw executemany of {sm['rows']:,} rows | | {sm['raw_s']:.1f} s wall, {sm['raw_cpu']:.1f} CPU-s | | |",
    ]
    for j, name in ((1, "`--jobs 1`"), (0, "default `--jobs`")):
        r = sm[j]
        lines += [
            f"| {name}: wall time | {r['wall']:.1f} s ({r['calls'] / r['wall']:,.0f} calls/s) | {sm['raw_s']:.1f} s raw | "
            f"{r['wall'] / sm['raw_s']:.1f}× | ≤ {BUDGET_RATIO:.0f}× raw "
            f"{'✅' if r['wall'] <= BUDGET_RATIO * sm['raw_s'] else '❌'} |",
            f"| {name}: CPU time | {r['cpu']:.1f} CPU-s | {sm['raw_cpu']:.1f} CPU-s raw | "
            f"{r['cpu'] / sm['raw_cpu']:.1f}× | |",
        ]
    return lines


def run(quick: bool) -> str:
    large = int(os.environ.get("LOOPLEDGER_BENCH_CALLS", "20000" if quick else "1000000"))
    small = max(CALLS_PER_FILE, large // 4)
    cores = os.cpu_count() or 1
    jobs = (1, 2) if cores >= 2 else (1,)
    work = Path(tempfile.mkdtemp(prefix="ll_bench_ingest_"))
    try:
        big = _measure(large, work, jobs, with_raw=True)
        little = _measure(small, work, (1,), with_raw=False)
        many = _measure_small(100 if quick else SMALL_FILES, work)
        profile = profile_section(min(large, 20_000 if quick else 200_000), work)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    calls = big[1]["calls"]
    extrapolated = " (extrapolated linearly)" if calls < 1_000_000 else ""
    load = os.getloadavg()[0]
    lines = [
        "## Ingest",
        "",
        f"Generated OpenAI-chat JSONL ({CALLS_PER_FILE:,} calls per file, realistic argument and answer sizes, "
        f"loops mixed in: {calls:,} calls, {big['corpus_mb']:.0f} MB), ingested with the "
        f"{len(_default_specs())} default policies and redaction into a fresh SQLite ledger by `ingest_paths`, "
        "once in-process (`--jobs 1`) and once with two job processes that each read, replay and write whole "
        "files (the database serialises the writes). "
        "Baseline: raw `sqlite3.executemany` of exactly the rows the ingest wrote, into the same schema with the "
        "same pragmas, measured in the same run. CPU seconds include the job processes and do not depend on "
        f"what else the machine runs (load average at the end: {load:.1f} on {cores} cores; wall times do).",
        "",
        "| figure | value | baseline (same run) | ratio | budget |",
        "|---|---:|---:|---:|---|",
        f"| raw executemany of {big['rows']:,} rows | | {big['raw_s']:.1f} s wall, {big['raw_cpu']:.1f} CPU-s "
        "| | |",
    ]
    verdict_time = []
    for j in jobs:
        r = big[j]
        to_1m = r["wall"] * 1_000_000 / r["calls"]
        cpu_1m = r["cpu"] * 1_000_000 / r["calls"]
        verdict_time.append(to_1m)
        lines += [
            f"| `--jobs {j}`: wall time | {r['wall']:.1f} s ({r['calls'] / r['wall']:,.0f} calls/s) | "
            f"{big['raw_s']:.1f} s raw | {r['wall'] / big['raw_s']:.1f}× | ≤ {BUDGET_RATIO:.0f}× raw |",
            f"| `--jobs {j}`: CPU time | {r['cpu']:.1f} CPU-s ({r['calls'] / r['cpu']:,.0f} calls per CPU-s) | "
            f"{big['raw_cpu']:.1f} CPU-s raw | {r['cpu'] / big['raw_cpu']:.1f}× | |",
            f"| `--jobs {j}`: 1M calls | {to_1m:.0f} s wall{extrapolated}; {cpu_1m:.0f} CPU-s = "
            f"{cpu_1m / min(j + 1, cores) if j > 1 else cpu_1m:.0f} s if the CPU were idle | | | "
            f"≤ {BUDGET_S_1M:.0f} s on 2 cores |",
        ]
    lr, br = little[1], big[1]
    lines += [
        f"| checks written | {br['checks']:,} | | | |",
        f"| peak RSS, `--jobs 1`, {lr['calls']:,} calls | {lr['rss_mb']:.0f} MB | | | flat |",
        f"| peak RSS, `--jobs 1`, {br['calls']:,} calls | {br['rss_mb']:.0f} MB | | "
        f"{br['rss_mb'] / lr['rss_mb']:.2f}× for {br['calls'] / lr['calls']:.0f}× the calls | flat |",
    ]
    if 2 in big:
        lines.append(f"| peak RSS, `--jobs 2`, {big[2]['calls']:,} calls | {big[2]['rss_mb']:.0f} MB writer + "
                     f"{big[2]['child_rss_mb']:.0f} MB largest job (ru_maxrss) | | | |")
    best = min(verdict_time)
    ratio = min(big[j]["wall"] for j in jobs) / big["raw_s"]
    lines += [
        "",
        f"Verdict: 1M-call time budget {'met' if best <= BUDGET_S_1M else 'NOT met'} ({best:.0f} s); "
        f"ratio to raw {'met' if ratio <= BUDGET_RATIO else 'NOT met'} ({ratio:.1f}×); memory "
        f"{'flat' if br['rss_mb'] <= 1.25 * lr['rss_mb'] else 'NOT flat'}. "
        f"Corpus generation, not timed above: {big['gen_s']:.0f} s.",
        *_small_lines(many),
        "",
        *profile,
    ]
    return "\n".join(lines)


def _default_specs():
    from loopledger.detectors.policy import DEFAULT_SPECS

    return DEFAULT_SPECS


if __name__ == "__main__":
    if len(sys.argv) >= 2 and sys.argv[1] == "--child":
        _child(sys.argv[2], sys.argv[3], int(sys.argv[4]))
    elif len(sys.argv) >= 2 and sys.argv[1] == "--profile":
        _profile_child(sys.argv[2], sys.argv[3], int(sys.argv[4]))
    else:
        print(run(quick="--quick" in sys.argv))
