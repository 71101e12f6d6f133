"""Run every benchmark section and write BENCHMARKS.md.

Each module in SECTIONS exposes `run(quick: bool) -> str`, a Markdown section (a heading, a
table with the figure, the same-run baseline, their ratio and the budget). Timings never gate a
test; they are recorded here for people to read.

BENCHMARKS.md is only ever written whole, by one run of every section on one commit: its header
names the commit and the load before and after. A run of some sections (--only) or a --quick one
writes bench/.cache/BENCHMARKS.partial.md instead, so the file people read is never a patchwork.
A section that cannot run says so in its place.
"""

from __future__ import annotations

import argparse
import importlib
import os
import platform
import subprocess
import sys
import time
from pathlib import Path

SECTIONS = ("bench_detectors", "bench_readers", "bench_ingest", "bench_append", "bench_pages", "bench_replay",
            "bench_sweep", "bench_receive", "bench_scores",
            "bench_live", "bench_live_clients", "bench_hostile", "bench_forward", "bench_mutants")
ROOT = Path(__file__).resolve().parent.parent


def machine() -> str:
    cpu = platform.processor() or ""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    mem = ""
    try:
        kb = int(Path("/proc/meminfo").read_text().split()[1])
        mem = f"{kb / 1024 / 1024:.1f} GiB"
    except (OSError, ValueError, IndexError):
        pass
    return (f"- machine: {platform.machine()}, {os.cpu_count()} cores, {cpu}, {mem} RAM\n"
            f"- python {platform.python_version()} on {platform.platform()}\n")


def commit() -> str:
    """The commit measured, and whether the work tree differed from it."""
    try:
        rev = subprocess.check_output(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, text=True).strip()
        dirty = subprocess.check_output(["git", "status", "--porcelain", "--untracked-files=no"], cwd=ROOT,
                                        text=True).strip()
    except (OSError, subprocess.CalledProcessError):
        return "?"
    return rev + (" (with uncommitted changes)" if dirty else "")


def load() -> str:
    """The 1-, 5- and 15-minute load averages: how busy the machine was around the figures."""
    try:
        return " / ".join(Path("/proc/loadavg").read_text().split()[:3])
    except OSError:
        return "?"


def main() -> int:
    ap = argparse.ArgumentParser(prog="python -m bench", description=__doc__)
    ap.add_argument("--quick", action="store_true", help="smaller sizes, for a smoke run")
    ap.add_argument("--only", nargs="*", help="section module names to run")
    ap.add_argument("--out", help="where to write (default: BENCHMARKS.md for a whole run, "
                                  "bench/.cache/BENCHMARKS.partial.md otherwise)")
    args = ap.parse_args()
    whole = not args.only and not args.quick
    out = Path(args.out) if args.out else ROOT / ("BENCHMARKS.md" if whole else "bench/.cache/BENCHMARKS.partial.md")
    rev, load_before, started = commit(), load(), time.time()
    sections = []
    for name in args.only or SECTIONS:
        print(f"[bench] {name} …", file=sys.stderr, flush=True)
        t0 = time.perf_counter()
        try:
            sections.append(importlib.import_module(f"bench.{name}").run(quick=args.quick))
        except Exception as exc:  # one section that cannot run must not lose the others' figures
            sections.append(f"## {name}\n\nThis section could not run: {type(exc).__name__}: {exc}\n")
            print(f"[bench] {name} could not run: {exc!r}", file=sys.stderr, flush=True)
        print(f"[bench] {name} done in {time.perf_counter() - t0:.1f}s", file=sys.stderr, flush=True)
    head = ["# LoopLedger benchmarks\n",
            ("Written whole by one `make bench` run (never edited by hand)." if whole else
             f"A partial run ({'--quick' if args.quick else ''} {' '.join(args.only or [])}).".replace("( ", "(")) +
            " Machines here are noisy (2 cores): every figure sits next to a baseline measured in the same run.\n",
            machine() +
            f"- commit {rev}; measured {time.strftime('%Y-%m-%d %H:%M', time.gmtime(started))} UTC, "
            f"{(time.time() - started) / 60:.0f} min\n"
            f"- load average (1 / 5 / 15 min): {load_before} before, {load()} after\n"]
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text("\n".join(head + sections))
    args.out = str(out)
    print(f"wrote {args.out}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
