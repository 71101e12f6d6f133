"""Run every benchmark section and write BENCHMARKS.md.

Each module in SECTIONS exposes `run(quick: bool) -> str`, a Markdown section (a heading, a
table with the figure, the same-run baseline, their ratio and the budget). Timings never gate a
test; they are recorded here for people to read.
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
            "bench_live")
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
    try:
        rev = subprocess.check_output(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, text=True).strip()
    except (OSError, subprocess.CalledProcessError):
        rev = "?"
    return (f"- machine: {platform.machine()}, {os.cpu_count()} cores, {cpu}, {mem} RAM\n"
            f"- python {platform.python_version()} on {platform.platform()}\n"
            f"- commit {rev}, measured {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}\n")


def main() -> int:
    ap = argparse.ArgumentParser(prog="python -m bench", description=__doc__)
    ap.add_argument("--quick", action="store_true", help="smaller sizes, for a smoke run")
    ap.add_argument("--only", nargs="*", help="section module names to run")
    ap.add_argument("--out", default=str(ROOT / "BENCHMARKS.md"))
    args = ap.parse_args()
    parts = ["# LoopLedger benchmarks\n", "Written by `make bench`. Machines here are noisy (2 cores): "
             "every figure sits next to a baseline measured in the same run.\n", machine()]
    for name in args.only or SECTIONS:
        try:
            mod = importlib.import_module(f"bench.{name}")
        except ModuleNotFoundError as exc:
            if exc.name == f"bench.{name}":
                continue
            raise
        print(f"[bench] {name} …", file=sys.stderr, flush=True)
        t0 = time.perf_counter()
        parts.append(mod.run(quick=args.quick))
        print(f"[bench] {name} done in {time.perf_counter() - t0:.1f}s", file=sys.stderr, flush=True)
    Path(args.out).write_text("\n".join(parts))
    print(f"wrote {args.out}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
