"""The sample_data README tables, computed by the real pipeline (readers → replay → tally).

`python sample_data/generate.py --table` prints them; tests/test_sample_data.py recomputes them
and compares with the tables in sample_data/README.md, so the README stays the single statement
of what each default policy says about each sample session.

Notation of a policy cell: the first warn, block and halt of every run that has one, located by
call number within the session (`c12`, 1-based, in emission order; a per-batch policy names the
batch's first call) or, for checks on prose, by prose turn (`p6`), followed by the step as the
Session and Replay pages number it (`s27`: the event's 0-based index in the session). Runs are
named as on those pages, from 0 (`r3:`), when the session has more than one. `—` means every
check allowed. A session with more than MAX_RUNS_SHOWN flagged runs lists the first ones and
counts the rest.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

from loopledger import vocab
from loopledger.analysis.replay_table import sessions_of
from loopledger.detectors.policy import BUILTIN_SPECS, make_policy
from loopledger.discovery import SKIP_DIRS
from loopledger.events import Batch, Event, Prose, ReadError, SessionInfo
from loopledger.formats import read, sniff, units
from loopledger.replay import replay, tally

FLAGS = (vocab.WARN, vocab.BLOCK, vocab.HALT)
MAX_RUNS_SHOWN = 3
BEGIN, END = "<!-- golden:begin {} -->", "<!-- golden:end {} -->"
NOT_SAMPLES = {"README.md", "labels.csv"}  # besides the generator's own Python files; labels.csv is written by hand


@dataclass
class Row:
    file: str
    session: str
    format: str
    calls: int
    runs: int
    where: dict[str, str] = field(default_factory=dict)  # detector → cell
    counts: dict[str, str] = field(default_factory=dict)  # detector → "warn/block/halt/saved"


def all_files(root: Path) -> list[Path]:
    # Not the folders ingest skips: a __pycache__ holds, while Python writes it, a temporary
    # file named like no bytecode (`x.cpython-311.pyc.1400…`).
    return sorted(p for p in root.rglob("*")
                  if p.is_file() and p.name not in NOT_SAMPLES and p.suffix not in (".py", ".pyc")
                  and not SKIP_DIRS.intersection(p.relative_to(root).parts[:-1]))


def sample_files(root: Path) -> list[Path]:
    """The files ingest would take: a Cline task folder is one file (its ui_messages.json)."""
    return units(all_files(root))


def sessions(path: Path) -> Iterator[tuple[SessionInfo, list[Event], list[ReadError]]]:
    """A file's sessions as (info, events, read errors), grouped as `loopledger replay` does."""
    yield from sessions_of(read(path), path)


def where_cell(steps: list, n_runs: int) -> str:
    """First warn/block/halt per run, by call (or prose) number and step."""
    calls = prose = 0
    runs: dict[int, dict[str, str]] = {}
    for step in steps:
        ev = step.event
        base = calls
        if isinstance(ev, Batch):
            calls += len(ev.calls)
        elif isinstance(ev, Prose):
            prose += 1
        for chk in step.checks:
            if chk.verdict not in FLAGS:
                continue
            if isinstance(ev, Batch):
                loc = f"c{base + max(chk.idx, 0) + 1}"
            elif isinstance(ev, Prose):
                loc = f"p{prose}"
            else:
                loc = "-"
            runs.setdefault(step.run, {}).setdefault(chk.verdict, f"{loc} s{step.seq}")
    if not runs:
        return "—"
    parts = []
    for run in sorted(runs)[:MAX_RUNS_SHOWN]:
        found = runs[run]
        text = ", ".join(f"{v} {found[v]}" for v in FLAGS if v in found)
        parts.append(f"r{run}: {text}" if n_runs > 1 else text)
    if len(runs) > MAX_RUNS_SHOWN:
        parts.append(f"+{len(runs) - MAX_RUNS_SHOWN} more runs")
    return "; ".join(parts)


def counts_cell(t) -> str:
    return f"{t.warnings}/{t.blocks}/{t.halts}/{t.saved}"


def pipeline_rows(root: Path) -> list[Row]:
    rows: list[Row] = []
    for path in sample_files(root):
        fmt = sniff(path)
        for info, events, errors in sessions(path):
            if errors:
                raise AssertionError(f"{path}: reader errors: {[str(e) for e in errors]}")
            n_calls = sum(len(e.calls) for e in events if isinstance(e, Batch))
            row = Row(file=path.relative_to(root).as_posix(), session=info.key, format=fmt,
                      calls=n_calls, runs=0)
            for spec in BUILTIN_SPECS:
                steps = list(replay(events, make_policy(spec)))
                t = tally(steps)
                row.runs = t.n_runs
                row.where[spec.detector] = where_cell(steps, t.n_runs)
                row.counts[spec.detector] = counts_cell(t)
            rows.append(row)
    return rows


def detectors() -> list[str]:
    return [spec.detector for spec in BUILTIN_SPECS]


def render_tables(rows: list[Row], shows: dict[tuple[str, str], str]) -> str:
    dets = detectors()
    head = ["file", "session", "format", "shows", "calls", "runs", *dets]
    lines = [BEGIN.format("where"), "| " + " | ".join(head) + " |",
             "|" + "|".join("---" for _ in head) + "|"]
    for r in rows:
        cells = [f"`{r.file}`", f"`{r.session}`", r.format, shows.get((r.file, r.session), ""),
                 str(r.calls), str(r.runs), *(r.where[d] for d in dets)]
        lines.append("| " + " | ".join(cells) + " |")
    lines += [END.format("where"), "", BEGIN.format("counts"),
              "| file | session | " + " | ".join(dets) + " |",
              "|---|---|" + "|".join("---:" for _ in dets) + "|"]
    for r in rows:
        lines.append(f"| `{r.file}` | `{r.session}` | " + " | ".join(r.counts[d] for d in dets)
                     + " |")
    lines.append(END.format("counts"))
    return "\n".join(lines)


def parse_table(markdown: str, name: str) -> list[dict[str, str]]:
    """Rows of the README table between the golden markers, as header → cell text."""
    start = markdown.index(BEGIN.format(name)) + len(BEGIN.format(name))
    body = markdown[start:markdown.index(END.format(name))]
    lines = [ln.strip() for ln in body.strip().splitlines() if ln.strip().startswith("|")]
    header = [c.strip() for c in lines[0].strip("|").split("|")]
    rows = []
    for ln in lines[2:]:
        cells = [_unquote(c.strip()) for c in ln.strip("|").split("|")]
        rows.append(dict(zip(header, cells, strict=True)))
    return rows


def splice_tables(markdown: str, tables: str) -> str:
    """Replace each golden section of `markdown` with the same-named one from `tables`."""
    for name in ("where", "counts"):
        b, e = BEGIN.format(name), END.format(name)
        new = tables[tables.index(b):tables.index(e) + len(e)]
        markdown = markdown[:markdown.index(b)] + new + markdown[markdown.index(e) + len(e):]
    return markdown


def _unquote(cell: str) -> str:
    """`x` → x when the whole cell is one code span (file and session columns)."""
    if len(cell) >= 2 and cell[0] == cell[-1] == "`" and "`" not in cell[1:-1]:
        return cell[1:-1]
    return cell


_OUTCOME_OF = {vocab.WARN: vocab.WARNED, vocab.BLOCK: vocab.BLOCKED, vocab.HALT: vocab.HALTED}


def run_outcomes_of(cell: str) -> tuple[dict[int, str], int]:
    """A where-cell read back: {run: worst outcome} for the runs it lists, and how many more
    flagged runs it only counts."""
    listed: dict[int, str] = {}
    more = 0
    if cell == "—":
        return listed, more
    for part in cell.split("; "):
        if part.startswith("+"):
            more = int(part[1:].split()[0])
            continue
        run, _, verdicts = part.rpartition(": ")
        worst = [v.split()[0] for v in verdicts.split(", ")][-1]  # listed warn, block, halt
        listed[int(run[1:]) if run else 0] = _OUTCOME_OF[worst]
    return listed, more
