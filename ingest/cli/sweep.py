"""What `loopledger sweep` does; ingest/cli.py only parses its flags.

Sweeps every session in the ledger (events rebuilt from the ledger, no file re-read), prints one
row per setting, and with --save stores the settings as policies with their verdicts on every
session. Progress on stderr, the table on stdout.
"""

from __future__ import annotations

from collections.abc import Sequence

from loopledger.analysis import sweep
from loopledger.cli.commands import open_existing_ledger
from loopledger.ledger import store
from rich.console import Console
from rich.table import Table
from rich.text import Text
from sqlalchemy.exc import SQLAlchemyError

EXIT_OK, EXIT_ERROR, EXIT_USAGE = 0, 1, 2
COLUMNS = ("warnings", "blocks", "halts", "halted_runs", "saved", "strikes")

out = Console(highlight=False, soft_wrap=True)
err = Console(stderr=True, highlight=False, soft_wrap=True)


def table_of(result: sweep.SweepResult) -> Table:
    """One row per setting; runs and calls are the same for every setting, so they go in the title."""
    valid = next((s for s in result.settings if s.error is None), None)
    size = f", {valid.totals['runs']} runs, {valid.totals['calls']} calls" if valid else ""
    table = Table(title=f"{result.grid.detector} over {len(result.session_ids)} session(s){size}",
                  title_justify="left")
    params = [a.param for a in result.grid.axes]
    for name in (*params, *COLUMNS):
        table.add_column(name.replace("_", " "), justify="right", no_wrap=True)
    for row in sweep.totals_rows(result):
        cells = ["none" if row[p] is None else str(row[p]) for p in params]
        cells += ["—" if row[c] is None else str(row[c]) for c in COLUMNS]
        table.add_row(*cells)
    return table


def invalid_lines(result: sweep.SweepResult) -> list[str]:
    names = [a.param for a in result.grid.axes]
    return [", ".join(f"{n}={v}" for n, v in zip(names, s.values, strict=True)) + f": skipped, {s.error}"
            for s in result.settings if s.error]


def _progress(done: int, total: int, _label: str) -> None:
    if done % 100 == 0 or done == total:
        err.print(f"  {done}/{total} sessions replayed under every setting")


def run_sweep(db: str | None, detector: str, param: str, param2: str | None,
              fixed: Sequence[str] = (), save: bool = False) -> int:
    try:
        axes = [sweep.parse_axis(param)] + ([sweep.parse_axis(param2)] if param2 else [])
        base = {}
        for item in fixed:
            name, eq, value = item.partition("=")
            if not eq:
                raise sweep.SweepError(f"--set {item!r}: expected NAME=VALUE")
            base[name.strip()] = sweep.parse_values(value)[0]
        grid = sweep.make_grid(detector, axes, base)
    except ValueError as exc:
        err.print(Text(f"loopledger sweep: {exc}"))
        return EXIT_USAGE
    engine = open_existing_ledger(db)
    try:
        with engine.connect() as conn:
            ids = store.session_ids(conn)
            sessions = [sweep.SessionEvents(sid, store.load_events(conn, sid)) for sid in ids]
        err.print(f"sweeping {len(sweep.grid_points(grid))} setting(s) over {len(sessions)} session(s)…")
        result = sweep.sweep(sessions, grid, progress=_progress)
        out.print(table_of(result))
        for line in invalid_lines(result):
            out.print(Text(line))
        if save:
            specs = [s.spec for s in result.settings if s.spec is not None]
            from loopledger import worker

            n = worker.judge_stored(engine, specs, ids)
            out.print(Text(f"stored {n} polic{'y' if n == 1 else 'ies'} with their verdicts on {len(ids)} session(s)"))
    except (SQLAlchemyError, OSError) as exc:  # the ledger cannot be read or written: one clear line
        err.print(Text(f"loopledger sweep: {exc}"))
        return EXIT_ERROR
    finally:
        engine.dispose()
    return EXIT_OK
