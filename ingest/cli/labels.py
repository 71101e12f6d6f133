"""What `loopledger labels import | export` do; ingest/cli.py only parses their flags."""

from __future__ import annotations

import sys
from pathlib import Path

from loopledger.cli.commands import (
    EXIT_ERROR,
    EXIT_OK,
    EXIT_QUARANTINED,
    EXIT_USAGE,
    open_ledger,
    reading,
)
from loopledger.ledger import labels, team
from rich.console import Console
from rich.text import Text

out = Console(highlight=False, soft_wrap=True)
err = Console(stderr=True, highlight=False, soft_wrap=True)


def run_import(db: str | None, file: Path) -> int:
    """Exit 0: every row labelled a session; 3: the rest were stored, some rows skipped (listed)."""
    if not file.is_file():
        err.print(Text(f"error: no such file: {file}", style="red"))
        return EXIT_USAGE
    engine = open_ledger(db)
    try:
        with engine.begin() as conn:
            report = labels.import_file(conn, file, by_user=team.local_actor().who)
    except labels.LabelFileError as exc:
        err.print(Text(f"error: {exc}", style="red"))
        return EXIT_ERROR
    finally:
        engine.dispose()
    line = f"{report.labelled} session(s) labelled from {report.rows} row(s) of {file}"
    if report.replaced_dashboard:
        line += f"; {report.replaced_dashboard} label(s) set in the dashboard were replaced"
    out.print(Text(line))
    for msg in report.messages:
        err.print(Text(f"skipped {msg}", style="yellow"))
    if report.problems:
        err.print(Text(f"{len(report.problems)} row(s) skipped: nothing else was changed for them", style="yellow"))
        return EXIT_QUARANTINED
    return EXIT_OK


def run_export(db: str | None, file: Path | None, full_paths: bool) -> int:
    with reading(db) as conn:
        rows = labels.export_rows(conn, full_paths)
    if file is None:
        labels.write_csv(rows, sys.stdout)
    else:
        try:
            with open(file, "w", encoding="utf-8", newline="") as fh:
                labels.write_csv(rows, fh)
        except OSError as exc:
            err.print(Text(f"error: cannot write {file}: {exc.strerror or exc}", style="red"))
            return EXIT_ERROR
        err.print(Text(f"{len(rows)} label(s) written to {file}"))
    return EXIT_OK
