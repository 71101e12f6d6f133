"""Mutation testing, as last run: the kill rate per module from mutants/<module>.txt (written by
`make mutants`, which is too slow to run inside `make bench`: minutes per module on two cores).

Each figure is only as good as the code it was measured on, so each row says whether the module
changed after the commit that wrote its report (git, not timestamps): a stale row is shown as
stale, never passed off as current.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

from bench import mutants

ROOT = Path(__file__).resolve().parent.parent
GOAL = 0.90


def _git(*args: str) -> str:
    return subprocess.run(["git", *args], cwd=ROOT, capture_output=True, text=True).stdout.strip()


def freshness(module: str) -> str:
    """'current' when ingest/<module> is unchanged since the commit of its report, else 'stale (…)'."""
    report = mutants.report_path(module).relative_to(ROOT)
    written = _git("log", "-1", "--format=%h", "--", str(report))
    if not written:
        return "not committed"
    changed = _git("log", "--format=%h", f"{written}..HEAD", "--", f"ingest/{module}")
    dirty = _git("status", "--porcelain", "--", f"ingest/{module}")
    if changed or dirty:
        n = len(changed.split()) if changed else 0
        return f"stale: the module changed after {written} ({n} commit{'s' if n != 1 else ''}" \
               f"{', and uncommitted edits' if dirty else ''})"
    return f"current (report of {written})"


def rows() -> list[tuple[str, int, int, int, int, str]]:
    out = []
    for module in mutants.MODULES:
        p = mutants.report_path(module)
        if not p.exists():
            out.append((module, 0, 0, 0, "never run"))
            continue
        head = p.read_text(encoding="utf-8").split("\n", 1)[0]
        # "## detectors/cycle.py: 347/363 killed (95.6%), 16 survived"
        frac = head.split(": ", 1)[1].split(" ", 1)[0]
        killed, total = (int(x) for x in frac.split("/"))
        text = p.read_text(encoding="utf-8")
        unread = text.count("[not classified")
        # a survivor read as a real change left untested says so in its reason
        real = sum(1 for ln in text.splitlines() if ln.startswith("loopledger.") and "NOT equivalent" in ln)
        out.append((module, killed, total, unread, real, freshness(module)))
    return out


def run(quick: bool = False) -> str:
    lines = ["## Mutation testing (`make mutants`, as last run)\n",
             "mutmut 3.8.1 over each module against the tests that pin it (bench/mutants.py MODULES); a "
             "timeout counts as killed. Survivors, each with why it changes no verdict, in "
             "mutants/<module>.txt (a person's readings in mutants/<module>.why, each kept for the change "
             "it read: a fingerprint of the mutant's diff). Not rerun by "
             "`make bench` (minutes per module): each row says whether the module changed since.\n",
             f"| module | killed | mutants | rate | ≥ {GOAL:.0%} | survivors without a reason | read as real, left untested | measured on |",
             "|---|---:|---:|---:|---|---:|---:|---|"]
    for module, killed, total, unread, real, fresh in rows():
        if not total:
            lines.append(f"| {module} | | | | | | | {fresh} |")
            continue
        rate = killed / total
        lines.append(f"| {module} | {killed:,} | {total:,} | {rate:.1%} | {'✅' if rate >= GOAL else '❌'} | "
                     f"{unread} | {real} | {fresh} |")
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    print(run())
