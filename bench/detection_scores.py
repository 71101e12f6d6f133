"""Score policies and policy sets on labelled transcript folders, in memory (no ledger).

What docs/detection.md's tables are measured with: each labelled session read with
`loopledger.formats.read`, split with `replay_table.sessions_of` (keyed as the worker keys
them), replayed with `loopledger.replay.replay_many`, its first halt placed by
`loopledger.analysis.scoring.call_position` and scored by `scoring.outcome` — the same rules as
`loopledger score` and the leaderboard, without ingesting. Not a benchmark section (no timing).

    python -m bench.detection_scores [FOLDER ...] [--spec SPEC ...] [--set SPEC+SPEC ...] [--detail]
    python -m bench.detection_scores --cv [FOLDER ...] [--detail]

FOLDER holds a labels.csv (default: every labelled set found, ../shared/corpus* and the
repository's own corpus*/). Without --spec/--set: every built-in at its defaults and the default
set, per folder.

--cv pools every folder's sessions and scores by grouped cross-validation, one source
repository held out at a time (`loopledger.analysis.crossval`): the default set's parameters
are chosen from `GRID` inside the training folds only, each peer is scored at its upstream
defaults, and in-sample and held-out figures are printed side by side — loops halted inside,
normal sessions halted, normal sessions warned — with Wilson 95% intervals; then the same per
family of session (coding agents, harnesses: `loopledger.analysis.families`) in the user's
currency: loops halted inside, flagged inside, calls saved inside loops, normal sessions
halted, calls lost to them, normal sessions warned (calls with a session-bootstrap interval).
Per folder, without --cv, one such table per family.
"""

from __future__ import annotations

import argparse
import csv
import hashlib
import itertools
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

from loopledger.analysis import crossval, families, scoring
from loopledger.analysis.replay_table import sessions_of
from loopledger.detectors.policy import BUILTIN_SPECS, DEFAULT_SPECS, PolicySpec
from loopledger.events import Batch
from loopledger.formats import read
from loopledger.replay import replay_many

from bench import label_positions
from bench.restore_sources import table_rows

ROOT = Path(__file__).resolve().parent.parent
SHARED = ROOT.parent / "shared" if (ROOT.parent / "shared").is_dir() else Path("/work/shared")
CORPUS = SHARED / "corpus"


def default_folders() -> list[Path]:
    """Every labelled set here: ../shared/corpus*, the released ../shared/released/corpus*
    whose files are present, then the repository's corpus*/ whose files are present and not the
    same set as a shared one (same labels.csv)."""
    found = sorted(p.parent for p in SHARED.glob("corpus*/labels.csv"))
    found += sorted(p.parent for p in SHARED.glob("released/corpus*/labels.csv") if _has_data(p.parent))
    shared_labels = {(p / "labels.csv").read_bytes() for p in found}
    for p in sorted(ROOT.glob("corpus*/labels.csv")):
        if p.read_bytes() not in shared_labels and _has_data(p.parent):
            found.append(p.parent)
    return found


def _tools(events: Iterable) -> list[str]:
    return [c.name for e in events if isinstance(e, Batch) for c in e.calls]


def pooled(folders: Iterable[Path]) -> list[Labelled]:
    """Every labelled session of `folders`, a file present in two sets (the same bytes) counted
    once: where it was labelled first, in the folders' order."""
    out: list[Labelled] = []
    seen: set[tuple[str, str]] = set()
    digests: dict[Path, str] = {}
    for folder in folders:
        for s in labelled_sessions(folder):
            path = folder / s.file
            if path not in digests:
                digests[path] = hashlib.sha256(path.read_bytes()).hexdigest()
            key = (digests[path], str(s.key))
            if key not in seen:
                seen.add(key)
                out.append(s)
    return out


def _has_data(folder: Path) -> bool:
    with open(folder / "labels.csv", newline="", encoding="utf-8") as f:
        return any((folder / r["file"]).is_file() for r in csv.DictReader(f))


@dataclass(frozen=True, slots=True)
class Labelled:
    file: str
    key: str
    label: str
    first: int | None
    last: int | None
    events: list
    group: str  # the source repository (or agent) the session came from
    folder: str = ""
    family: str = families.OTHER  # coding agents, harnesses or other (loopledger.analysis.families)

    @property
    def calls(self) -> int:
        return scoring.n_calls(self.events)


_CELL = re.compile(r"`([^`]*)`")


def source_groups(folder: Path) -> dict[str, str]:
    """file → source repository, from the folder's sources table (SOURCES.md's `repository`
    column, or README.md's `source (repo : path)` column). A file not listed is its own group."""
    out: dict[str, str] = {}
    for name in ("SOURCES.md", "README.md"):
        path = folder / name
        if not path.is_file():
            continue
        for row in table_rows(path.read_text(encoding="utf-8")):
            file = _CELL.findall(row.get("file") or row.get("local name") or "")
            repo = row.get("repository") or row.get("source (repo : path)") or row.get("source") or ""
            repo = repo.split(" : ")[0].replace("`", "").split(" (")[0].strip()
            if file and repo:
                out.setdefault(file[0], repo)
    return out


def labelled_sessions(folder: Path) -> list[Labelled]:
    """Every labelled session found in `folder`, with its events and its source's group.

    A folder holding a stats.py (the released sets) gives its loop positions in that reader's
    call list: they are moved onto our reader's calls (`bench.label_positions.map_span`), and a
    label keyed as stats.py keys a single-session file ("0") names the one session our reader
    finds in it. The Labelled keeps the key labels.csv gives."""
    rows: dict[tuple[str, str], tuple[str, int | None, int | None]] = {}
    with open(folder / "labels.csv", newline="", encoding="utf-8") as f:
        for r in csv.DictReader(f):
            span = scoring.parse_loop_calls(r.get("loop_calls"))
            rows[(r["file"], r["session_key"])] = (scoring.normalize_label(r["label"]),
                                                   *(span or (None, None)))
    groups = source_groups(folder)
    stats = label_positions.load_stats(folder)
    out = []
    for file in sorted({f for f, _ in rows}):
        path = folder / file
        if not path.exists():
            continue
        sessions = [(str(getattr(info, "key", None)), info, events)
                    for info, events, _ in sessions_of(read(path), path)]
        ours = {key: events for key, _, events in sessions}
        theirs = label_positions.their_calls(stats, path) if stats is not None else None
        offset = label_positions.key_offset(theirs, ours)
        failed = label_positions.their_failed(stats, path) if theirs is not None else {}
        labelled = {label_positions.session_for(k, ours, offset) if stats else k: k for f, k in rows if f == file}
        for key, info, events in sessions:
            if key not in labelled:
                continue
            label_key = labelled[key]
            label, first, last = rows[(file, label_key)]
            if first is not None and last is not None and theirs is not None and label_key in theirs:
                their_keys, their_ids = theirs[label_key]
                mapped = label_positions.map_span(their_keys, label_positions.call_keys(events), first, last,
                                                  their_ids, label_positions.call_ids(events),
                                                  failed.get(label_key), label_positions.call_failed(events),
                                                  label_positions.call_batches(events))
                first, last = mapped or (first, last)
            out.append(Labelled(file, label_key, label, first, last, list(events), groups.get(file, file),
                                folder.name, families.family(info.format, info.agent, _tools(events))))
    return out


@dataclass(frozen=True, slots=True)
class Seen:
    """What one policy did to one session: its first halt, the calls it warned before it, and
    its first warn, block or halt."""

    halt_at: int | None
    warned: frozenset[int]
    flag_at: int | None = None


def replay_seen(events: list, specs: Sequence[PolicySpec]) -> list[Seen]:
    """Each spec's first halt (1-based call position, None: never) and warned call positions."""
    halts: list[int | None] = [None] * len(specs)
    flags: list[int | None] = [None] * len(specs)
    warned: list[set[int]] = [set() for _ in specs]
    for steps in replay_many(events, list(specs)):
        for i, step in enumerate(steps):
            if halts[i] is not None:
                continue
            for c in step.checks:
                if c.verdict in scoring.FLAGS and flags[i] is None:
                    flags[i] = scoring.call_position(events, step.seq, c.idx)
                if c.verdict == "halt":
                    halts[i] = scoring.call_position(events, step.seq, c.idx)
                    break
                if c.verdict == "warn":
                    warned[i].add(scoring.call_position(events, step.seq, c.idx))
    return [Seen(h, frozenset(w), f) for h, w, f in zip(halts, warned, flags, strict=True)]


def set_verdicts(seen: Iterable[Seen]) -> crossval.Verdicts:
    """A set of policies as one guard: halts where any first halts; warns the calls any warned
    before that (a call counts once, however many policies warned it)."""
    seen = list(seen)
    hs = [s.halt_at for s in seen if s.halt_at is not None]
    h = min(hs) if hs else None
    warned = set().union(*(s.warned for s in seen)) if seen else set()
    flags = [s.flag_at for s in seen if s.flag_at is not None]
    return crossval.Verdicts(h, sum(1 for p in warned if h is None or p < h), min(flags) if flags else None)


def replay_table(sessions: Sequence[Labelled], specs: Sequence[PolicySpec]) -> dict[PolicySpec, dict]:
    """spec → session (file, key) → Seen, every spec replayed over every session once."""
    specs = list(dict.fromkeys(specs))
    out: dict[PolicySpec, dict] = {s: {} for s in specs}
    for sess in sessions:
        for spec, seen in zip(specs, replay_seen(sess.events, specs), strict=True):
            out[spec][(sess.folder, sess.file, sess.key)] = seen
    return out


def case_of(s: Labelled) -> crossval.Case:
    return crossval.Case((s.folder, s.file, s.key), s.group, s.label, s.first, s.last, s.calls, s.family)


def score(sessions, groups: Sequence[Sequence[PolicySpec]], table: dict | None = None) -> list[dict]:
    """One row per group of specs (a group halts where any of its specs first halts); `tally`:
    its crossval.Tally (calls saved, lost, flagged inside). `table`: replay_table's, when the
    caller has it (scoring a subset of the sessions it was made on)."""
    table = table or replay_table(sessions, [s for g in groups for s in g])
    rows = []
    for g in groups:
        row = {"caught": 0, "early": 0, "late": 0, "missed": 0, "loops": 0, "normal": 0, "false": 0,
               "warned": 0, "warnings": 0, "detail": [], "tally": crossval.Tally()}
        for s in sessions:
            v = set_verdicts(table[spec][(s.folder, s.file, s.key)] for spec in g)
            h = v.halt_at
            out = scoring.outcome(s.label, s.first, s.last, h)
            if out is None:
                continue
            row["tally"].add(case_of(s), v)
            if s.label == "loop":
                row["loops"] += 1
                if out == "missed" and h is not None:
                    out = "late"  # scored as missed; shown apart
                row[out] += 1
            else:
                row["normal"] += 1
                row["false"] += out == scoring.FALSE_HALT
                row["warned"] += v.warnings > 0
                row["warnings"] += v.warnings
            if out not in ("caught", scoring.CLEAN):
                row["detail"].append(f"{out}: {s.file} {s.key} (loop {s.first}-{s.last}, halt {h})")
        rows.append(row)
    return rows


# ── cross-validation ──────────────────────────────────────────────────────────────────────────

# The default set's candidate settings: progress's thresholds (cycle and stagnation at their
# defaults). Every combination is a candidate; the defaults come first, so a tie keeps them.
GRID: dict[str, tuple] = {
    "halt_at": (3, 4),
    "ok_halt_at": (4, 3, 5),
    "same_failure_at": (5, 4, 6),
    "rerun_halt_at": (4, 3, 5),
    "window": (20, 10, 40),
}


MARGIN = 2  # how the project takes a change of default: fewer false halts, or 2 loops more (crossval.choose)


def grid_candidates(grid: dict[str, tuple] | None = None) -> list[tuple[PolicySpec, ...]]:
    """Each combination of GRID's values as a default set (its first value of each: the shipped
    default), skipping combinations the detector refuses."""
    grid = GRID if grid is None else grid
    base = {s.detector: s for s in DEFAULT_SPECS}
    out = []
    for values in itertools.product(*grid.values()):
        params = ",".join(f"{k}={v}" for k, v in zip(grid, values, strict=True))
        try:
            progress = PolicySpec.parse(f"progress:{params}")
        except Exception:  # noqa: BLE001 — a combination the detector refuses (e.g. ok_halt_at < warn_at)
            continue
        out.append(tuple(progress if d == "progress" else base[d] for d in base))
    return out


def cross_validated(sessions: Sequence[Labelled], candidates: Sequence[tuple[PolicySpec, ...]],
                    table: dict, margin: int = 0) -> crossval.CrossValidated:
    cases = [case_of(s) for s in sessions if s.label in ("loop", "normal")]
    verdicts = {c: {k: set_verdicts(table[spec][k] for spec in c) for k in table[c[0]]} for c in candidates}
    return crossval.cross_validate(list(candidates), cases, verdicts, margin)


def cv_report(sessions: Sequence[Labelled], detail: bool = False) -> str:
    candidates = grid_candidates()
    peers = [(s,) for s in BUILTIN_SPECS]
    table = replay_table(sessions, [s for c in candidates + peers for s in c])
    groups = sorted({s.group for s in sessions})
    loops = sum(s.label == "loop" for s in sessions)
    normal = sum(s.label == "normal" for s in sessions)
    lines = [f"{len(sessions)} labelled sessions ({loops} loop, {normal} normal) from {len(groups)} sources; "
             f"{len(candidates)} candidate settings of the default set\n",
             "| guard | in sample: loops halted inside | normal halted | normal warned "
             "| held out: loops halted inside | normal halted | normal warned |",
             "|---|---|---|---|---|---|---|"]
    rows = [("the default set, tuned in the training folds", cross_validated(sessions, candidates, table)),
            (f"… a change taken only for {MARGIN}+ loops more", cross_validated(sessions, candidates, table, MARGIN)),
            ("the default set as shipped (no tuning)", cross_validated(sessions, candidates[:1], table))]
    rows += [(f"`{p[0].label}`", cross_validated(sessions, [p], table)) for p in peers]
    for name, cv in rows:
        lines.append(f"| {name} | " + " | ".join(cv.in_sample.cells()) + " | " + " | ".join(cv.held_out.cells()) + " |")
    lines += family_tables(rows)
    tuned = rows[1][1]
    lines.append("")
    lines.append("chosen on every session: " + " + ".join(s.label for s in tuned.chosen))
    for f in tuned.folds:
        progress = next(s for s in f.chosen if s.detector == "progress")
        lines.append(f"- held out {f.group}: {f.held_out.caught}/{f.held_out.loops} inside, "
                     f"{f.held_out.false_halts}/{f.held_out.normal} normal halted, "
                     f"{f.held_out.normal_warned} warned — chose {progress.label}")
    if detail:
        shipped = candidates[0]
        lines.append("\nthe shipped default's misses, early halts and false halts:")
        for s in sessions:
            v = set_verdicts(table[spec][(s.folder, s.file, s.key)] for spec in shipped)
            out = scoring.outcome(s.label, s.first, s.last, v.halt_at)
            if out not in (None, "caught", scoring.CLEAN) or (s.label == "normal" and v.warnings):
                lines.append(f"- {out}: {s.folder}/{s.file} {s.key} (loop {s.first}-{s.last}, halt {v.halt_at}, "
                             f"warnings {v.warnings})")
    return "\n".join(lines)


def family_tables(rows: Sequence[tuple[str, crossval.CrossValidated]]) -> list[str]:
    """One Markdown table per family (coding agents, harnesses, other: those with sessions), each
    guard's figures in the user's currency in sample, then held out."""
    present = [f for f in families.FAMILIES if any(f in cv.in_sample_by for _, cv in rows)]
    lines = []
    heads = crossval.CURRENCY_HEADS
    for fam in present:
        first = rows[0][1].in_sample_by.get(fam, crossval.Tally())
        lines += ["", f"{fam}: {first.loops} loop and {first.normal} normal sessions, "
                      f"{first.loop_calls} calls spent inside the loops\n",
                  "| guard | " + " | ".join(f"in sample: {h}" for h in heads) + " | "
                  + " | ".join(f"held out: {h}" for h in heads) + " |",
                  "|---" * (1 + 2 * len(heads)) + "|"]
        for name, cv in rows:
            inside = cv.in_sample_by.get(fam, crossval.Tally())
            held = cv.held_out_by.get(fam, crossval.Tally())
            lines.append(f"| {name} | " + " | ".join(inside.currency_cells()) + " | "
                         + " | ".join(held.currency_cells()) + " |")
    return lines


def folder_report(folder: Path, groups: Sequence[Sequence[PolicySpec]], detail: bool = False) -> list[str]:
    """A folder's sessions, one table per family present: each group of specs in the user's currency."""
    sessions = labelled_sessions(folder)
    lines = [f"\n{folder}: {len(sessions)} labelled sessions"]
    table = replay_table(sessions, [s for g in groups for s in g])
    for fam in families.FAMILIES:
        mine = [s for s in sessions if s.family == fam]
        if not any(s.label in ("loop", "normal") for s in mine):
            continue
        rows = score(mine, groups, table)
        t = rows[0]["tally"]
        lines += [f"\n{fam}: {t.loops} loop and {t.normal} normal sessions, {t.loop_calls} calls inside the loops\n",
                  "| policy | " + " | ".join(crossval.CURRENCY_HEADS) + " | early | late | missed |",
                  "|---" * (4 + len(crossval.CURRENCY_HEADS)) + "|"]
        for g, row in zip(groups, rows, strict=True):
            name = " + ".join(s.label for s in g) if len(g) < 4 else "set: " + " + ".join(s.detector for s in g)
            cells = row["tally"].currency_cells()
            lines.append(f"| `{name}` | " + " | ".join(cells) + f" | {row['early']} | {row['late']} | {row['missed']} |")
            if detail:
                lines += [f"    {d}" for d in row["detail"]]
    return lines


def main(argv: Sequence[str] | None = None) -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("folders", nargs="*", type=Path)
    ap.add_argument("--spec", action="append", default=[])
    ap.add_argument("--set", action="append", default=[])
    ap.add_argument("--detail", action="store_true")
    ap.add_argument("--cv", action="store_true", help="pool the folders; grouped cross-validation")
    a = ap.parse_args(argv)
    folders = a.folders or default_folders()
    if a.cv:
        sessions = pooled(folders)
        print(cv_report(sessions, a.detail))
        return
    groups: list[list[PolicySpec]] = [[PolicySpec.parse(s)] for s in a.spec]
    groups += [[PolicySpec.parse(p) for p in s.split("+")] for s in a.set]
    if not groups:
        groups = [[s] for s in BUILTIN_SPECS] + [list(DEFAULT_SPECS)]
    for folder in folders:
        print("\n".join(folder_report(folder, groups, a.detail)))


if __name__ == "__main__":
    main()
