"""Score policies and policy sets on labelled transcript folders, in memory (no ledger).

What docs/detection.md's tables are measured with: each labelled session read with
`loopledger.formats.read`, split with `replay_table.sessions_of` (keyed as the worker keys
them), replayed with `loopledger.replay.replay_many`, its first halt placed by
`loopledger.analysis.scoring.call_position` and scored by `scoring.outcome` — the same rules as
`loopledger score` and the leaderboard, without ingesting. Not a benchmark section (no timing).

    python -m bench.detection_scores [FOLDER ...] [--spec SPEC ...] [--set SPEC+SPEC ...] [--detail]

FOLDER holds a labels.csv (default ../shared/corpus). Without --spec/--set: every built-in at its
defaults, the default set, and progress's sensitivity rows.
"""

from __future__ import annotations

import argparse
import csv
from collections.abc import Sequence
from pathlib import Path

from loopledger.analysis import scoring
from loopledger.analysis.replay_table import sessions_of
from loopledger.detectors.policy import BUILTIN_SPECS, DEFAULT_SPECS, PolicySpec
from loopledger.formats import read
from loopledger.replay import replay_many

ROOT = Path(__file__).resolve().parent.parent
CORPUS = Path("/work/shared/corpus") if not (ROOT.parent / "shared").is_dir() else ROOT.parent / "shared" / "corpus"


def labelled_sessions(folder: Path) -> list[tuple[str, str, str, int | None, int | None, list]]:
    """(file, key, label, first, last, events) for every labelled session found in `folder`."""
    rows: dict[tuple[str, str], tuple[str, int | None, int | None]] = {}
    with open(folder / "labels.csv", newline="", encoding="utf-8") as f:
        for r in csv.DictReader(f):
            span = scoring.parse_loop_calls(r.get("loop_calls"))
            rows[(r["file"], r["session_key"])] = (scoring.normalize_label(r["label"]),
                                                   *(span or (None, None)))
    out = []
    for file in sorted({f for f, _ in rows}):
        path = folder / file
        if not path.exists():
            continue
        for info, events, _errors in sessions_of(read(path), path):
            key = getattr(info, "key", None) if info is not None else None
            if (file, key) in rows:
                label, first, last = rows[(file, key)]
                out.append((file, key, label, first, last, list(events)))
    return out


def first_halts(events: list, specs: Sequence[PolicySpec]) -> list[int | None]:
    """Each spec's first halt in the session, as a 1-based call position (None: never)."""
    halts: list[int | None] = [None] * len(specs)
    for steps in replay_many(events, list(specs)):
        for i, step in enumerate(steps):
            if halts[i] is None:
                for c in step.checks:
                    if c.verdict == "halt":
                        halts[i] = scoring.call_position(events, step.seq, c.idx)
                        break
    return halts


def score(sessions, groups: Sequence[Sequence[PolicySpec]]) -> list[dict]:
    """One row per group (a group halts where any of its specs first halts)."""
    specs = list(dict.fromkeys(s for g in groups for s in g))
    halts = {(f, k): dict(zip(specs, first_halts(ev, specs), strict=True)) for f, k, _l, _a, _b, ev in sessions}
    rows = []
    for g in groups:
        row = {"caught": 0, "early": 0, "late": 0, "missed": 0, "loops": 0, "normal": 0, "false": 0, "detail": []}
        for f, k, label, first, last, _ev in sessions:
            hs = [h for h in (halts[(f, k)][s] for s in g) if h is not None]
            h = min(hs) if hs else None
            out = scoring.outcome(label, first, last, h)
            if out is None:
                continue
            if label == "loop":
                row["loops"] += 1
                if out == "missed" and h is not None:
                    out = "late"  # scored as missed; shown apart
                row[out] += 1
            else:
                row["normal"] += 1
                row["false"] += out == scoring.FALSE_HALT
            if out not in ("caught", scoring.CLEAN):
                row["detail"].append(f"{out}: {f} {k} (loop {first}-{last}, halt {h})")
        rows.append(row)
    return rows


def sensitivity() -> list[list[PolicySpec]]:
    base = "progress"
    rows = [[PolicySpec.parse(base)]]
    for text in ("halt_at=4", "ok_halt_at=3", "ok_halt_at=5", "window=6", "window=10", "window=50",
                 "across_turns=none", "across_turns=all", "same_failure_at=3", "same_failure_at=5",
                 "same_failure_at=6", "poll_span=3", "poll_span=5", "poll_span=6",
                 "rerun_halt_at=3", "rerun_halt_at=5"):
        try:
            rows.append([PolicySpec.parse(f"{base}:{text}")])
        except Exception:  # noqa: BLE001 — a parameter this version lacks: skip the row
            continue
    return rows


def main(argv: Sequence[str] | None = None) -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("folders", nargs="*", type=Path)
    ap.add_argument("--spec", action="append", default=[])
    ap.add_argument("--set", action="append", default=[])
    ap.add_argument("--detail", action="store_true")
    ap.add_argument("--sensitivity", action="store_true")
    a = ap.parse_args(argv)
    groups: list[list[PolicySpec]] = [[PolicySpec.parse(s)] for s in a.spec]
    groups += [[PolicySpec.parse(p) for p in s.split("+")] for s in a.set]
    if a.sensitivity:
        groups += sensitivity()
    if not groups:
        groups = [[s] for s in BUILTIN_SPECS] + [list(DEFAULT_SPECS)]
    for folder in a.folders or [CORPUS]:
        sessions = labelled_sessions(folder)
        print(f"\n{folder}: {len(sessions)} labelled sessions\n")
        print("| policy | loops halted inside | early | late | missed | normal halted |")
        print("|---|---|---|---|---|---|")
        for g, row in zip(groups, score(sessions, groups), strict=True):
            name = " + ".join(s.label for s in g) if len(g) < 4 else "set: " + " + ".join(s.detector for s in g)
            print(f"| `{name}` | {row['caught']}/{row['loops']} | {row['early']} | {row['late']} | {row['missed']} | "
                  f"{row['false']}/{row['normal']} |")
            if a.detail:
                for d in row["detail"]:
                    print(f"    {d}")


if __name__ == "__main__":
    main()
