"""The `loopledger` command. Each subcommand is thin: it parses flags and calls into the package."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Annotated, Optional

import typer

from ingest import __version__

app = typer.Typer(
    name="loopledger",
    help=(
        "Find loops in LLM agent transcripts. Reads Claude Code, Codex CLI, OpenAI/Anthropic message "
        "logs, Gemini CLI, SWE-agent, OpenHands and ATIF files, runs every loop guard over every step, "
        "and writes each check and result verdict to a ledger (SQLite by default, PostgreSQL by URL)."
    ),
    no_args_is_help=True,
    add_completion=False,
    rich_markup_mode="rich",
)

DbOption = Annotated[
    Optional[str],
    typer.Option(
        "--db",
        help="Ledger: a SQLite file path or a SQLAlchemy URL (postgresql://…). "
        "Default: $LOOPLEDGER_DATABASE_URL, else $LOOPLEDGER_DB, else ./ledger.sqlite.",
        show_default=False,
    ),
]


def _version(value: bool) -> None:
    if value:
        typer.echo(f"loopledger {__version__}")
        raise typer.Exit()


@app.callback()
def main(
    version: Annotated[
        bool, typer.Option("--version", callback=_version, is_eager=True, help="Print the version and exit.")
    ] = False,
) -> None:
    """LoopLedger: every loop guard's verdict on every step of your agents' sessions."""


@app.command()
def dashboard(
    db: DbOption = None,
    host: Annotated[str, typer.Option(help="Address to bind. Transcripts are private: loopback by default.")] = "127.0.0.1",
    port: Annotated[int, typer.Option(help="Port to serve on.")] = 8501,
) -> None:
    """Start the Streamlit dashboard on the ledger (http://127.0.0.1:8501 by default)."""
    from ingest.ledger.engine import resolve_url

    env = dict(os.environ, LOOPLEDGER_DATABASE_URL=resolve_url(db))
    main_py = Path(__file__).resolve().parent.parent / "app" / "main.py"
    cmd = [
        sys.executable, "-m", "streamlit", "run", str(main_py),
        "--server.address", host, "--server.port", str(port),
        "--server.headless", "true", "--browser.gatherUsageStats", "false",
    ]
    typer.echo(f"LoopLedger dashboard: http://{host}:{port}/  (ledger: {env['LOOPLEDGER_DATABASE_URL']})")
    raise typer.Exit(subprocess.call(cmd, env=env))


if __name__ == "__main__":
    app()
