"""Append benchmark: one 20k-call session (generated OpenAI-chat JSONL), ingested by the real
`loopledger ingest` command, then the same command on the unchanged file (the command's fixed
cost: start-up, migrations check, stat), then after appending 2 lines, then after appending 2
lines to a Claude Code session of the same size. Meanwhile a second writer (sqlite3, BEGIN
IMMEDIATE / COMMIT every 5 ms) records how long it waited for the write lock.

Budget (design.md "live"): an append costs time proportional to the appended lines — here,
beyond the fixed cost, at most 1/20 of the first ingest.
"""

from __future__ import annotations

import random
import resource
import shutil
import sqlite3
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import orjson

ROOT = Path(__file__).resolve().parent.parent
N_CALLS = 20_000
GOAL_FRACTION = 1 / 20


class Writer(threading.Thread):
    """A concurrent writer: takes SQLite's write lock over and over, records its longest wait."""

    def __init__(self, db: Path) -> None:
        super().__init__(daemon=True)
        self.db = db
        self.stop = threading.Event()
        self.longest = 0.0
        self.failures = 0
        self.rounds = 0

    def run(self) -> None:
        con = sqlite3.connect(self.db, timeout=60, isolation_level=None)
        try:
            while not self.stop.is_set():
                t0 = time.perf_counter()
                try:
                    con.execute("BEGIN IMMEDIATE")
                    con.execute("COMMIT")
                except sqlite3.OperationalError:
                    self.failures += 1
                self.longest = max(self.longest, time.perf_counter() - t0)
                self.rounds += 1
                self.stop.wait(0.005)
        finally:
            con.close()


def _cpu_children() -> float:
    ru = resource.getrusage(resource.RUSAGE_CHILDREN)
    return ru.ru_utime + ru.ru_stime


def _cli(db: Path, path: Path, writer_db: Path | None = None) -> tuple[float, float, float]:
    """(wall, CPU seconds) of one `loopledger ingest` process; the concurrent writer's longest wait."""
    w = Writer(writer_db) if writer_db is not None else None
    if w is not None:
        w.start()
        time.sleep(0.05)
    c0 = _cpu_children()
    t0 = time.perf_counter()
    out = subprocess.run([sys.executable, "-m", "loopledger.cli.app", "ingest", str(path), "--db", str(db)],
                         capture_output=True, text=True, cwd=ROOT)
    wall = time.perf_counter() - t0
    cpu = _cpu_children() - c0
    wait = 0.0
    if w is not None:
        w.stop.set()
        w.join()
        wait = w.longest
    if out.returncode not in (0, 3):
        raise RuntimeError(f"ingest failed ({out.returncode}): {out.stderr[-2000:]}")
    return wall, cpu, wait


def _claude_lines(n_calls: int, rng: random.Random) -> list[bytes]:
    sid = "bench-0000-1111-2222-333344445555"
    out = [orjson.dumps({"type": "user", "sessionId": sid, "uuid": "u0", "parentUuid": None, "isSidechain": False,
                         "timestamp": "2026-01-01T00:00:00Z", "version": "2.1.0",
                         "message": {"role": "user", "content": "fix the failing test"}}) + b"\n"]
    for i in range(n_calls):
        out += _claude_call(sid, i, rng)
    return out


def _claude_call(sid: str, i: int, rng: random.Random) -> list[bytes]:
    cmd = rng.choice(["pytest -x", "make", "git status", "ls src"]) + f" {i % 37}"
    tool = {"type": "tool_use", "id": f"toolu_{i}", "name": "Bash", "input": {"command": cmd}}
    result = {"type": "tool_result", "tool_use_id": f"toolu_{i}", "content": f"output {i % 11} " * rng.randint(5, 60)}
    return [orjson.dumps({"type": "assistant", "sessionId": sid, "uuid": f"a{i}", "isSidechain": False,
                          "timestamp": "2026-01-01T00:00:01Z",
                          "message": {"id": f"msg_{i}", "role": "assistant", "model": "claude-sonnet-4-5",
                                      "content": [tool]}}) + b"\n",
            orjson.dumps({"type": "user", "sessionId": sid, "uuid": f"r{i}", "isSidechain": False,
                          "timestamp": "2026-01-01T00:00:02Z",
                          "message": {"role": "user", "content": [result]}}) + b"\n"]


def _measure(work: Path, name: str, lines: list[bytes], extra: list[bytes]) -> dict:
    db = work / f"{name}.sqlite"
    f = work / f"{name}.jsonl"
    f.write_bytes(b"".join(lines))
    first, first_cpu, first_wait = _cli(db, f, db)
    fixed = [_cli(db, f) for _ in range(3)]
    appends = []
    for k in range(3):  # three 2-line appends, each measured
        with open(f, "ab") as fh:
            fh.writelines(extra[2 * k: 2 * k + 2])
        appends.append(_cli(db, f, db))
    return {"first": first, "first_cpu": first_cpu, "first_wait": first_wait,
            "unchanged": min(w for w, _, _ in fixed), "unchanged_cpu": min(c for _, c, _ in fixed),
            "append": min(w for w, _, _ in appends), "append_cpu": min(c for _, c, _ in appends),
            "append_max": max(w for w, _, _ in appends), "append_wait": max(x for _, _, x in appends),
            "mb": f.stat().st_size / 1e6}


def run(quick: bool) -> str:
    from bench.gen_chat import session_lines

    n = N_CALLS // 4 if quick else N_CALLS
    rng = random.Random(7)
    work = Path(tempfile.mkdtemp(prefix="ll_bench_append_"))
    try:
        chat_all = session_lines(rng, n + 10, session=1)
        chat = _measure(work, "chat", chat_all[:-6], chat_all[-6:])
        cc_all = _claude_lines(n + 3, rng)
        cc = _measure(work, "claude", cc_all[:-6], cc_all[-6:])
    finally:
        shutil.rmtree(work, ignore_errors=True)
    lines = [
        "## Appends",
        "",
        f"One session of {n:,} calls in one file, through the real `loopledger ingest FILE` command, into a "
        "fresh SQLite ledger: the first ingest, the same command on the unchanged file (its fixed cost: start-up, "
        "migration check, stat; best of 3), then three appends of 2 lines (one call and its answer), each "
        "ingested (best of 3; worst wall beside it). CPU seconds of the command's process are the load-independent "
        "figure (this machine is shared; wall times vary with the load). Meanwhile a second writer takes the write "
        "lock every 5 ms and records its longest wait. Goal: an append's cost beyond the fixed cost ≤ 1/20 of the "
        "first ingest.",
        "",
        "| format | file | first ingest | unchanged (fixed cost) | append 2 lines | beyond fixed | goal: ≤ 1/20 "
        "of first | writer's longest wait: first ingest / appends |",
        "|---|---:|---:|---:|---:|---:|---:|---:|",
    ]
    verdicts = []
    for label, r in (("openai-chat JSONL", chat), ("claude-code JSONL", cc)):
        beyond = max(0.0, r["append_cpu"] - r["unchanged_cpu"])
        goal = r["first_cpu"] * GOAL_FRACTION
        verdicts.append(beyond <= goal)
        lines.append(f"| {label} | {r['mb']:.1f} MB | {r['first_cpu']:.2f} CPU-s ({r['first']:.1f} s wall) | "
                     f"{r['unchanged_cpu']:.2f} CPU-s ({r['unchanged']:.1f} s) | {r['append_cpu']:.2f} CPU-s "
                     f"({r['append']:.1f} s, worst {r['append_max']:.1f} s) | {beyond:.2f} CPU-s "
                     f"({'≈ 0' if beyond < 0.01 else '1/' + format(r['first_cpu'] / beyond, '.0f')} of first) | {goal:.2f} CPU-s: "
                     f"{'met' if beyond <= goal else 'NOT met'} | {r['first_wait'] * 1000:.0f} ms / "
                     f"{r['append_wait'] * 1000:.0f} ms |")
    lines += ["", f"Verdict: append goal {'met' if all(verdicts) else 'NOT met'} for "
              f"{sum(verdicts)} of {len(verdicts)} formats.", ""]
    return "\n".join(lines)


if __name__ == "__main__":
    print(run(quick="--quick" in sys.argv))
