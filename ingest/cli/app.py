"""The `loopledger` command. Each subcommand is thin: it parses flags and calls into the package."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Annotated

import typer
from loopledger import __version__
from loopledger.detectors.policy import DETECTORS, default_set_words

app = typer.Typer(
    name="loopledger",
    help=(
        "Find loops in LLM agent transcripts. Reads Claude Code, Codex CLI, OpenAI/Anthropic message "
        "logs, Gemini CLI, SWE-agent, OpenHands, ATIF and Aider files, runs the default loop guards "
        f"({default_set_words()}; more with --policy) over every step, "
        "and writes each check and result verdict to a ledger (SQLite by default, PostgreSQL by URL)."
    ),
    no_args_is_help=True,
    add_completion=False,
    # Plain help (click's): flags read `--save / --no-save`, values carry their own metavar, and a
    # help text is shown as written ([[policy]] needs no escaping). Typer's rich panels print a
    # `<bool>` type beside every flag, --help included.
    rich_markup_mode=None,
)

DbOption = Annotated[
    str | None,
    typer.Option(
        "--db", metavar="PATH|URL",
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
        bool, typer.Option("--version", callback=_version, is_eager=True, metavar="", help="Print the version and exit.")
    ] = False,
) -> None:
    """LoopLedger: loop guards' verdicts on every step of your agents' sessions."""


@app.command()
def dashboard(
    db: DbOption = None,
    host: Annotated[str, typer.Option(help="Address to bind. Transcripts are private: loopback by default.")] = "127.0.0.1",
    port: Annotated[int, typer.Option(help="Port to serve on.")] = 8501,
    secrets: Annotated[Path | None, typer.Option(
        "--secrets", metavar="FILE", help="A secrets.toml with an [auth] section: every page then needs a signed-in "
        "user of the allow-list (default: .streamlit/secrets.toml if it has [auth]; see docs/team.md).",
        show_default=False)] = None,
) -> None:
    """Start the Streamlit dashboard on the ledger (http://127.0.0.1:8501 by default)."""
    from loopledger.cli.commands import refuse_missing_ledger, refuse_newer_ledger
    from loopledger.ledger.engine import display_url, resolve_url

    refuse_missing_ledger(db)  # the dashboard only reads: a mistyped --db is an error, not a new ledger
    refuse_newer_ledger(db)
    env = dict(os.environ, LOOPLEDGER_DATABASE_URL=resolve_url(db))
    import importlib.util

    # Found, not imported: the CLI sits beside the dashboard in the layers, and Streamlit runs it.
    main_py = Path(importlib.util.find_spec("loopledger.app").origin).resolve().parent / "main.py"
    root = main_py.parent.parent  # the checkout (with .streamlit/) or, installed, the package
    cmd = [
        sys.executable, "-m", "streamlit", "run", str(main_py),
        "--server.address", host, "--server.port", str(port),
        "--server.headless", "true", "--browser.gatherUsageStats", "false",
        # The same as .streamlit/config.toml, which Streamlit only reads from the current folder.
        "--client.toolbarMode", "minimal",
    ]
    if secrets is not None:
        import tomllib

        try:
            has_auth = "auth" in tomllib.loads(secrets.read_text(encoding="utf-8"))
        except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError) as exc:
            typer.echo(f"error: cannot read the secrets file {secrets}: {exc}", err=True)
            raise typer.Exit(2) from None
        if not has_auth:  # else the dashboard would serve without sign-in, wherever it is bound
            typer.echo(f"error: {secrets} has no [auth] section (docs/team.md shows one)", err=True)
            raise typer.Exit(2)
        cmd += ["--secrets.files", str(secrets.resolve())]
    typer.echo(f"LoopLedger dashboard: http://{host}:{port}/  (ledger: {display_url(env['LOOPLEDGER_DATABASE_URL'])})")
    if secrets is not None:
        typer.echo(f"sign-in: the [auth] settings of {secrets}")
    elif not _is_loopback(host):
        typer.echo(f"warning: --host {host} serves the dashboard beyond this machine, and it has no "
                   "authentication: anyone who reaches the port reads every transcript in the ledger.", err=True)
    # Run from the project folder: `python -m` puts the current folder first on sys.path, where a
    # stray click.py or pandas.py of the user's would shadow the real package; and Streamlit reads
    # .streamlit/config.toml from there. The ledger URL is already absolute.
    raise typer.Exit(_run_child(cmd, env=env, cwd=root))


def _is_loopback(host: str) -> bool:
    import ipaddress

    if host.lower() in ("localhost", "localhost."):
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False  # a host name: it may resolve to anything


def _run_child(cmd: list[str], **kw) -> int:
    """Run the server and pass SIGTERM / SIGINT / SIGHUP on to it: stopping `loopledger dashboard`
    stops the server (subprocess.call would leave it running, still answering on the port)."""
    import signal

    child = subprocess.Popen(cmd, **kw)
    forwarded: list[int] = []

    def forward(signum, _frame):
        forwarded.append(signum)
        if child.poll() is None:
            child.send_signal(signal.SIGTERM if signum == signal.SIGHUP else signum)

    old = {sig: signal.signal(sig, forward) for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP)}
    try:
        while True:
            try:
                code = child.wait(timeout=10 if forwarded else None)
                break
            except subprocess.TimeoutExpired:
                child.kill()  # it ignored the signal for 10 s
    finally:
        for sig, handler in old.items():
            signal.signal(sig, handler)
    # Stopped on request: exit as the signal's conventional status, not the child's.
    return 128 + forwarded[0] if forwarded else code


# ── ingest · watch · recheck · policies (implemented in ingest/commands.py) ────────────────────

PolicyOption = Annotated[
    list[str],
    typer.Option("--policy", metavar="SPEC", help="Extra policy, DETECTOR[:NAME=VALUE,...], e.g. window:window=10,threshold=4. "
                 f"Repeatable; added to the default set ({default_set_words()}).",
                 show_default=False),
]
ConfigOption = Annotated[
    Path | None,
    typer.Option("--config", metavar="FILE", help="A loopledger.toml with [[policy]] tables (default: ./loopledger.toml if present).",
                 show_default=False),
]
FormatOption = Annotated[
    str | None, typer.Option("--format", metavar="NAME", help="Force a reader instead of sniffing (e.g. claude-code).")
]
RedactOption = Annotated[
    bool, typer.Option("--redact/--no-redact", metavar="", help="Replace API keys, tokens, private keys and URL passwords "
                       "before anything is stored or judged.")
]
CreateOption = Annotated[
    bool, typer.Option("--create/--no-create", metavar="", help="Create the SQLite ledger's folder if it does not exist "
                       "(without it, a missing folder is an error: a typo should not scatter ledgers).")
]
LogFileOption = Annotated[
    Path | None, typer.Option("--log-file", metavar="FILE", help="Append warnings and errors, with tracebacks, to this file "
                              "(standard logging). The terminal gets one line per problem either way.",
                              show_default=False)
]
MaxTextOption = Annotated[
    int, typer.Option("--max-text", min=256, help="Store at most this many bytes of each text (answers, "
                      "arguments, prose); the full text's digest is kept, so equality stays exact.")
]


@app.command()
def ingest(
    paths: Annotated[list[Path], typer.Argument(help="Transcript files or folders (searched recursively).")],
    db: DbOption = None,
    policy: PolicyOption = [],  # noqa: B006 (typer reads the default; never mutated)
    config: ConfigOption = None,
    format: FormatOption = None,
    redact: RedactOption = True,
    max_text: MaxTextOption = 64 * 1024,
    jobs: Annotated[int, typer.Option("--jobs", min=0, help="Processes that each read and replay whole "
                                      "files; this one writes what they computed (a file over 4 MB is written "
                                      "by its own process; the ledger serialises the writes). 0 (the default): one "
                                      "per core, at most 4, when there are several files adding up to more "
                                      "than 32 MB, else 1 (starting a process costs more than it saves on "
                                      "less). A file is never split between processes: one big file is "
                                      "ingested by one.")] = 0,
    create: CreateOption = False,
    log_file: LogFileOption = None,
) -> None:
    """Read transcripts, run the default policies (and any --policy / --config ones) over every
    step, store each check in the ledger.

    Re-running adds nothing for unchanged files and only re-judges the sessions of appended ones.
    A file that shrank (emptied, rotated) is not an error: what the ledger read from it before is
    kept, under a source marked truncated, and the file is read anew.
    Exit status: 0 ok, 1 a file could not be read, 3 finished but malformed lines were quarantined,
    4 the ledger stayed locked by another writer for some file (left as it was; run again).
    """
    from loopledger.cli.commands import run_ingest, setup_logging

    setup_logging(log_file)
    raise typer.Exit(run_ingest(paths, db, policy, config, format, redact, max_text, jobs, create=create))


@app.command()
def watch(
    paths: Annotated[list[Path] | None, typer.Argument(
        help="Files or folders to follow. Default: ~/.claude/projects, ~/.codex/sessions, ~/.gemini/tmp, "
             "OpenCode's storage and database (~/.local/share/opencode/opencode.db) and the other tools' own "
             "folders (those that exist).", show_default=False)] = None,
    db: DbOption = None,
    policy: PolicyOption = [],  # noqa: B006
    config: ConfigOption = None,
    format: FormatOption = None,
    redact: RedactOption = True,
    max_text: MaxTextOption = 64 * 1024,
    interval: Annotated[float, typer.Option(help="Seconds between looks at the files.")] = 0.5,
    create: CreateOption = False,
    log_file: LogFileOption = None,
) -> None:
    """Keep the ledger current while agents write: new files and appended lines within seconds.

    Stops cleanly on Ctrl-C / SIGTERM; a restart resumes from the offsets stored in the ledger.
    Exit status (once stopped), as ingest's: 0 ok, 1 a file could not be read, 2 bad flags,
    3 some lines were quarantined.
    """
    from loopledger.cli.commands import run_watch, setup_logging

    setup_logging(log_file)
    raise typer.Exit(run_watch(paths or [], db, policy, config, format, redact, max_text, interval,
                              create=create))


@app.command()
def receive(
    db: DbOption = None,
    host: Annotated[str, typer.Option(help="Address to bind. Spans hold prompts and tool output: loopback "
                                      "by default.")] = "127.0.0.1",
    port: Annotated[int, typer.Option(help="Port (4318 is OTLP/HTTP's).")] = 4318,
    spool: Annotated[Path | None, typer.Option(
        help="Folder for the received spans (OTLP JSON, one file per UTC day). Default: beside a "
             "SQLite ledger (ledger.sqlite.otlp/), else ./loopledger-otlp.", show_default=False)] = None,
    max_body: Annotated[int, typer.Option("--max-body", min=1024, help="Largest request body in bytes, "
                                          "after gzip decompression (larger: HTTP 413).")] = 16 * 1024 * 1024,
    policy: PolicyOption = [],  # noqa: B006
    config: ConfigOption = None,
    redact: RedactOption = True,
    max_text: MaxTextOption = 64 * 1024,
    token: Annotated[str | None, typer.Option(
        envvar="LOOPLEDGER_RECEIVE_TOKEN", show_envvar=True,
        help="Require `Authorization: Bearer <token>` on every request (else HTTP 401). Exporters send it "
             "with OTEL_EXPORTER_OTLP_HEADERS=Authorization=Bearer%20<token>.", show_default=False)] = None,
    insecure: Annotated[bool, typer.Option(
        "--insecure", help="Serve beyond loopback without a token (refused otherwise: anyone who reaches "
                           "the port could write into the ledger).")] = False,
    keep_spool_days: Annotated[int, typer.Option(
        "--keep-spool-days", min=0, help="Delete spool files of days older than this many days once every "
                                         "span in them is in the ledger.")] = 1,
) -> None:
    """Receive OpenTelemetry traces over OTLP/HTTP (POST /v1/traces, protobuf or JSON, gzip) and write
    their tool calls and the policies' checks (the default set, plus --policy) into the ledger, as
    `ingest` does for files.

    Point an OTLP exporter at http://127.0.0.1:4318 (OTEL_EXPORTER_OTLP_ENDPOINT). Tool calls come
    from GenAI `execute_tool` spans and OpenInference TOOL spans. A request is answered once its
    spans are in the spool (redacted, fsync'd); they reach the ledger within about a second, exactly
    once, even across a busy ledger or a restart. Stops on Ctrl-C / SIGTERM.
    """
    from loopledger.cli.commands import run_receive

    raise typer.Exit(run_receive(db, host, port, spool, max_body, policy, config, redact, max_text,
                                 token=token, insecure=insecure, keep_days=keep_spool_days))


RecheckPolicyOption = Annotated[
    list[str],
    typer.Option("--policy", metavar="SPEC", help="A policy to judge every stored session with, DETECTOR[:NAME=VALUE,...], "
                 "e.g. window:window=10,threshold=4. Repeatable. (The defaults are not added: they "
                 "were judged at ingest.)", show_default=False),
]
RecheckConfigOption = Annotated[
    Path | None,
    typer.Option("--config", metavar="FILE", help="A loopledger.toml whose [[policy]] tables are rechecked "
                 "(default: ./loopledger.toml if present).", show_default=False),
]


@app.command()
def recheck(
    policy: RecheckPolicyOption = [],  # noqa: B006
    config: RecheckConfigOption = None,
    db: DbOption = None,
) -> None:
    """Judge every stored session with the policies given, from the ledger alone (no file is
    re-read): --policy, --config, or ./loopledger.toml's [[policy]] tables.

    Exit status: 0 ok, 1 the ledger cannot be opened, 2 no policy given or a bad one.
    """
    from loopledger.cli.commands import run_recheck

    raise typer.Exit(run_recheck(db, policy, config))


@app.command()
def policies(db: DbOption = None) -> None:
    """List the policies stored in the ledger, which one is enforced on live agents, and every
    detector a --policy may name (built-ins and installed plugins, with their parameters' defaults)."""
    from loopledger.cli.commands import run_policies

    raise typer.Exit(run_policies(db))


@app.command()
def replay(
    file: Annotated[Path, typer.Argument(help="One transcript file (any format LoopLedger reads).")],
    policy: Annotated[str, typer.Option(
        "--policy", help="DETECTOR[:NAME=VALUE,...]: any detector `loopledger policies` lists (" + ", ".join(DETECTORS)
        + ", plugins; a plugin by import path as module:factory), e.g. "
        "run-length:max_strikes=3,max_observation_steps=none,observation_tools=read|grep or "
        "window:window=10,threshold=4. Lists use |, none turns an optional limit off; unset "
        "parameters take their defaults.")] = "run-length",
    param: Annotated[list[str], typer.Option(
        "--param", help="NAME=VALUE added to the policy's parameters (repeatable).",
        show_default=False)] = [],  # noqa: B006
    format: FormatOption = None,
    session: Annotated[str | None, typer.Option(
        "--session", help="Only the session with this key (files such as tau-bench hold many).")] = None,
    redact: RedactOption = True,
) -> None:
    """Step one policy through a transcript and print every step: event, verdict, result, state.

    The text twin of the dashboard's Replay page. Exit status: 0 ok, 1 unreadable file or unknown
    session, 2 no such file or a bad policy spec, 3 printed but some lines were malformed.
    """
    from loopledger.analysis.replay_table import run_replay

    raise typer.Exit(run_replay(str(file), policy, param, format, session, redact=redact))


@app.command()
def sweep(
    detector: Annotated[str, typer.Option("--detector", metavar="NAME", help=", ".join(DETECTORS[:-1]) + f" or {DETECTORS[-1]} "
                                          "(or an installed plugin's name).")],
    param: Annotated[str, typer.Option("--param", metavar="NAME=RANGE", help="NAME=RANGE to sweep: threshold=2..6, halt_at=3..9:2, "
                                       "window=4,8,12.")],
    param2: Annotated[str | None, typer.Option("--param2", metavar="NAME=RANGE", help="A second NAME=RANGE (a grid).")] = None,
    fixed: Annotated[list[str], typer.Option("--set", metavar="NAME=VALUE", help="Hold NAME=VALUE fixed (default: the detector's "
                                             "default). Repeatable.", show_default=False)] = [],  # noqa: B006
    save: Annotated[bool, typer.Option("--save/--no-save", metavar="", help="Store every valid setting as a "
                                       "policy, with its verdicts on every session.")] = False,
    db: DbOption = None,
) -> None:
    """Replay every stored session under each setting of a parameter range; print halts, warnings,
    blocks and calls saved per setting (the Compare page, in the terminal)."""
    from loopledger.cli.sweep import run_sweep

    raise typer.Exit(run_sweep(db, detector, param, param2, fixed, save))


# ── labels · score (ingest/labels_command.py, ingest/score_command.py) ──────────────────────────

labels_app = typer.Typer(
    help="A person's judgement of sessions (loop / normal / unclear, where the loop is), in and out as CSV.",
    no_args_is_help=True, rich_markup_mode="rich")
app.add_typer(labels_app, name="labels")


@labels_app.command("import")
def labels_import(
    file: Annotated[Path, typer.Argument(help="A CSV with columns file, session_key, label, loop_calls, reason "
                                         "(the format of the corpus' labels.csv).")],
    db: DbOption = None,
) -> None:
    """Label sessions from a CSV: `file` is the tail of an ingested file's path, `session_key` the
    session's key in it, `label` loop, normal or unclear, `loop_calls` FIRST-LAST (1-based call
    positions; loop rows only), `reason` free text.

    A label replaces the session's earlier one. Exit status: 0 every row labelled a session,
    1 the file is not a labels CSV, 3 rows that match no session or are malformed were skipped
    (each named FILE:LINE on stderr; the other rows are stored)."""
    from loopledger.cli.labels import run_import

    raise typer.Exit(run_import(db, file))


@labels_app.command("export")
def labels_export(
    file: Annotated[Path | None, typer.Argument(help="Where to write the CSV (default: standard output).",
                                                show_default=False)] = None,
    db: DbOption = None,
    full_paths: Annotated[bool, typer.Option("--full-paths", help="Write each file's full path instead of its "
                                             "path under the folder all ingested files share.")] = False,
) -> None:
    """Write every label as CSV, in the format `labels import` reads (plus who labelled it and when)."""
    from loopledger.cli.labels import run_export

    raise typer.Exit(run_export(db, file, full_paths))


@app.command()
def score(
    db: DbOption = None,
    policy: Annotated[list[str], typer.Option(
        "--policy", help="Also score DETECTOR[:NAME=VALUE,...], replayed on the labelled sessions' stored events "
        "(nothing is stored). Repeatable.", show_default=False)] = [],  # noqa: B006
    sort: Annotated[str, typer.Option(
        "--sort", help="rank (most caught, fewest false halts), or a column: loops, caught, early, missed, normal, "
        "false_halts, precision, recall, saved, into_loop, policy.")] = "rank",
    format: Annotated[str, typer.Option("--format", help="table (for people), markdown or csv.")] = "table",
    cv: Annotated[bool, typer.Option(
        "--cv", help="Also score each choice this leaderboard offers (its top, the best setting of each detector, "
        "the default set) by grouped cross-validation: one group of sessions held out at a time, the choice made "
        "on the others. The held-out figure is what to expect on sessions nobody tuned on.")] = False,
    group_by: Annotated[str, typer.Option(
        "--group-by", help="What --cv holds out together: folder (a project's sessions), agent (a format), "
        "or file.")] = "folder",
) -> None:
    """The guard leaderboard: every stored policy scored against the labelled sessions.

    Per labelled session a policy's first halt is placed at a call: on a loop session inside the
    labelled loop it is caught, before it early (it stopped good work), after it or none missed;
    any halt on a normal session is a false halt; unclear sessions are left out. Precision and
    recall come with their Wilson 95% intervals: how much so few labels can tell. In calls: loops
    flagged inside (first warn, block or halt inside the loop), calls saved (inside labelled loops
    after the halt, of all calls spent inside them) and calls lost (after a false halt), then a
    table per family, coding agents and harnesses."""
    from loopledger.cli.score import run_score

    raise typer.Exit(run_score(db, policy, sort, format, cv, group_by))


@app.command()
def cost(db: DbOption = None) -> None:
    """What the loops cost: the stored sessions' spend (tokens, dollars at genai-prices' offline
    table, its version named) and, per stored policy, what its halts would have saved: the
    tokens, dollars and wall time spent after each halt in its run. Unknown usage or an unpriced
    model is shown as unknown, never 0."""
    from loopledger.cli.cost import run_cost

    raise typer.Exit(run_cost(db))


# ── live enforcement: enforce · hook · guard (ingest/enforce.py, hooks.py, guard_server.py) ──


@app.command()
def enforce(
    spec: Annotated[list[str] | None, typer.Argument(
        metavar="SPEC", help="DETECTOR[:NAME=VALUE,...] to enforce, e.g. ladder:halt_at=5; several enforce them as a set (each "
        "call: the most severe verdict of any of them). Omit it to see what is enforced.",
        show_default=False)] = None,
    default: Annotated[bool, typer.Option("--default", help="Go back to the default set (the one ingest judges "
                                          f"with: {default_set_words()}).")] = False,
    db: DbOption = None,
) -> None:
    """Choose the policy (or set) the hooks, `loopledger guard` and Policy.enforced(db) use on live
    agents (the Compare page's "Enforce on live agents" form does the same: it adds a setting to the
    enforced set, or replaces the set with it)."""
    from loopledger.cli.commands import run_enforce

    raise typer.Exit(run_enforce(db, spec, default))


hook_app = typer.Typer(
    name="hook", no_args_is_help=True, add_completion=False, rich_markup_mode="rich",
    help="Guard Claude Code, Gemini CLI, Codex CLI or OpenCode with the enforced policy: the hook commands "
         "(OpenCode: a plugin), and installing them.",
)
app.add_typer(hook_app)

INSTALLABLE = ("claude-code", "gemini-cli", "codex", "opencode")
AgentArg = Annotated[str, typer.Argument(help="claude-code, gemini-cli, codex or opencode.", show_default=False)]


def _agent(agent: str) -> str:
    if agent not in INSTALLABLE:
        typer.echo(f"error: unknown agent {agent!r}: {', '.join(INSTALLABLE)}", err=True)
        raise typer.Exit(2)
    return agent


def _hook_flags(db: str | None, log: str | None, agent_pid: str | None) -> list[str]:
    """The flags as the hook's own reader takes them (loopledger.live.hook_flags)."""
    return [*(["--db", db] if db else []), *(["--log", log] if log else []),
            *(["--agent-pid", agent_pid] if agent_pid else [])]


@hook_app.command("claude-code")
def hook_claude_code(
    db: DbOption = None,
    log: Annotated[str | None, typer.Option(help="Log file for events that could not be judged "
                                            "(default: $LOOPLEDGER_HOOK_LOG, else ~/.local/state/loopledger/hook.log).")] = None,
    agent_pid: Annotated[str | None, typer.Option("--agent-pid", hidden=True,
                                                  help="The agent's process (set by the hook's fast path).")] = None,
) -> None:
    """Claude Code's hook: one event as JSON on stdin (PreToolUse, PostToolUse, PostToolUseFailure,
    PostToolBatch, UserPromptSubmit, SessionStart); a refused call is answered with
    permissionDecision "deny"; after a halted call, PostToolBatch answers "continue": false, which
    ends the turn. Always exits 0: a problem allows the call and is logged."""
    from loopledger.live.hooks import run

    raise typer.Exit(run("claude-code", _hook_flags(db, log, agent_pid)))


@hook_app.command("gemini-cli")
def hook_gemini_cli(
    db: DbOption = None,
    log: Annotated[str | None, typer.Option(help="Log file for events that could not be judged.")] = None,
    agent_pid: Annotated[str | None, typer.Option("--agent-pid", hidden=True,
                                                  help="The agent's process (set by the hook's fast path).")] = None,
) -> None:
    """Gemini CLI's hook: one event as JSON on stdin (BeforeTool, AfterTool, BeforeAgent,
    SessionStart); a refused call is answered with "decision": "deny", a halt also with
    "continue": false. Always exits 0: a problem allows the call and is logged."""
    from loopledger.live.hooks import run

    raise typer.Exit(run("gemini-cli", _hook_flags(db, log, agent_pid)))


@hook_app.command("codex")
def hook_codex(
    db: DbOption = None,
    log: Annotated[str | None, typer.Option(help="Log file for events that could not be judged.")] = None,
    agent_pid: Annotated[str | None, typer.Option("--agent-pid", hidden=True,
                                                  help="The agent's process (set by the hook's fast path).")] = None,
) -> None:
    """Codex CLI's hook: one event as JSON on stdin (PreToolUse, PostToolUse, UserPromptSubmit,
    SessionStart); a refused call is answered with permissionDecision "deny"; a halt also
    interrupts a headless `codex exec` run. Always exits 0: a problem allows the call and is logged."""
    from loopledger.live.hooks import run

    raise typer.Exit(run("codex", _hook_flags(db, log, agent_pid)))


@hook_app.command("install")
def hook_install(
    agent: AgentArg,
    project: Annotated[Path | None, typer.Option(
        "--project", metavar="[DIR]",
        help="Install in DIR/.claude/settings.json (.gemini/settings.json, .codex/hooks.json, "
             ".opencode/plugins/loopledger.js); --project alone or no option: the current folder.")] = None,
    user: Annotated[bool, typer.Option("--user", help="Install for every project: ~/.claude/settings.json "
                                       "(~/.gemini/, $CODEX_HOME or ~/.codex/, ~/.config/opencode/plugins/).")] = False,
    db: DbOption = None,
) -> None:
    """Add LoopLedger's hook entries to the agent's settings file (OpenCode: its plugin file):
    merged with what is there, the rest of the file left byte for byte, the original kept until
    uninstall; running it again changes nothing. The hook writes to the ledger named here (--db,
    else the one `loopledger dashboard` would open from this folder; it must exist), printed with
    the command, and what the agent itself must allow (trusted folders, reviewed hooks)."""
    from loopledger.cli.commands import run_hook_install

    raise typer.Exit(run_hook_install(_agent(agent), project, user, db))


@hook_app.command("uninstall")
def hook_uninstall(
    agent: AgentArg,
    project: Annotated[Path | None, typer.Option(
        "--project", metavar="[DIR]",
        help="The project whose settings to clean; --project alone or no option: the current folder.")] = None,
    user: Annotated[bool, typer.Option("--user", help="Clean the user-wide file instead (~/.claude/settings.json, ...).")] = False,
) -> None:
    """Remove exactly LoopLedger's hook entries from the agent's settings file: the file comes back
    as it was before the install (deleted, if the install created it; OpenCode: the plugin file
    goes)."""
    from loopledger.cli.commands import run_hook_uninstall

    raise typer.Exit(run_hook_uninstall(_agent(agent), project, user))


@app.command()
def guard(
    db: DbOption = None,
    policy: Annotated[list[str], typer.Option("--policy", metavar="SPEC", help="Judge with this DETECTOR[:NAME=VALUE,...] "
                                              "instead of the enforced policy; repeat it for a set.",
                                              show_default=False)] = [],  # noqa: B006
    no_ledger: Annotated[bool, typer.Option("--no-ledger", help="Judge only; write nothing.")] = False,
    origin: Annotated[str, typer.Option(help="Who the decisions are recorded for (enforced_checks.origin): guard, "
                                        "or the agent a plugin speaks for (opencode).")] = "guard",
) -> None:
    """The enforced policy for any agent over JSON lines: one event per line on stdin
    ({"session", "event": "call"|"answer"|"user", ...}), one verdict line per call on stdout.
    See docs/live.md, "Guard any agent", for the protocol and a client."""
    from loopledger.cli.commands import run_guard
    from loopledger.live.session import DECIDED_FOR

    if origin not in DECIDED_FOR:
        typer.echo(f"error: unknown origin {origin!r}: {', '.join(DECIDED_FOR)}", err=True)
        raise typer.Exit(2)
    raise typer.Exit(run_guard(db, policy, no_ledger, origin))


# ── a team: members · tokens · team join · forward (ingest/cli/team.py) ─────────────────────

members_app = typer.Typer(
    help="Who is on the team ledger and with which role: viewer (browse, investigate, compare), labeller (also "
         "labels), owner (also enforces and manages members). Members may sign in to the dashboard; their tokens "
         "forward their guards' decisions.",
    no_args_is_help=True, rich_markup_mode="rich")
app.add_typer(members_app, name="members")
EmailArg = Annotated[str, typer.Argument(metavar="EMAIL", help="The member's email (as the sign-in provider gives it).",
                                         show_default=False)]


@members_app.command("add")
def members_add(
    email: EmailArg,
    role: Annotated[str, typer.Option("--role", help="viewer, labeller or owner.")] = "viewer",
    issuer: Annotated[str | None, typer.Option(
        "--issuer", help="The sign-in provider's issuer (the ID token's iss), with --subject: the member is "
        "matched on these, not on an email (docs/team.md).")] = None,
    subject: Annotated[str | None, typer.Option(
        "--subject", help="The member's subject at that issuer (the ID token's sub; the dashboard shows it to "
        "someone it refuses).")] = None,
    db: DbOption = None,
) -> None:
    """Add a member, or change a member's role (the change holds from their next action)."""
    from loopledger.cli.team import run_members_add

    raise typer.Exit(run_members_add(db, email, role, issuer, subject))


@members_app.command("list")
def members_list(db: DbOption = None) -> None:
    """Every member with their role, their live tokens, and when and by whom they were added."""
    from loopledger.cli.team import run_members_list

    raise typer.Exit(run_members_list(db))


@members_app.command("remove")
def members_remove(email: EmailArg, db: DbOption = None) -> None:
    """Remove a member and their tokens (the sessions they forwarded keep their name)."""
    from loopledger.cli.team import run_members_remove

    raise typer.Exit(run_members_remove(db, email))


tokens_app = typer.Typer(
    help="Members' tokens for forwarding to the team's `loopledger receive`; the ledger stores only their digest.",
    no_args_is_help=True, rich_markup_mode="rich")
app.add_typer(tokens_app, name="tokens")


@tokens_app.command("create")
def tokens_create(
    email: EmailArg,
    name: Annotated[str, typer.Option("--name", help="What the token is for (a laptop's name).")] = "laptop",
    db: DbOption = None,
) -> None:
    """Make a token for a member and print it once (on stdout; the ledger keeps only its SHA-256)."""
    from loopledger.cli.team import run_tokens_create

    raise typer.Exit(run_tokens_create(db, email, name))


@tokens_app.command("list")
def tokens_list(db: DbOption = None) -> None:
    """Every token: its id, member, name, first characters, when created, last used, revoked."""
    from loopledger.cli.team import run_tokens_list

    raise typer.Exit(run_tokens_list(db))


@tokens_app.command("revoke")
def tokens_revoke(
    token_id: Annotated[int, typer.Argument(metavar="ID", help="The token's id (`loopledger tokens list`).")],
    db: DbOption = None,
) -> None:
    """Revoke a token: the receiver refuses it (HTTP 401) from its next request."""
    from loopledger.cli.team import run_tokens_revoke

    raise typer.Exit(run_tokens_revoke(db, token_id))


team_app = typer.Typer(help="This laptop as a member of a team: its guards forward to the team's receiver.",
                       no_args_is_help=True, rich_markup_mode="rich")
app.add_typer(team_app, name="team")


@team_app.command("join")
def team_join(
    url: Annotated[str, typer.Argument(metavar="URL", help="The team's `loopledger receive`, e.g. http://ledger.internal:4318.",
                                       show_default=False)],
    token: Annotated[str, typer.Option("--token", envvar="LOOPLEDGER_TEAM_TOKEN", show_envvar=True,
                                       help="Your token (`loopledger tokens create` on the team ledger).",
                                       show_default=False)],
    agent: Annotated[str, typer.Option("--agent", help="claude-code or gemini-cli.")] = "claude-code",
    project: Annotated[Path | None, typer.Option(
        "--project", metavar="DIR", help="Install the hook in DIR's settings only (default: your user settings).")] = None,
    db: Annotated[str | None, typer.Option(
        "--db", metavar="PATH|URL", help="This laptop's ledger, made if missing (default: "
        "$XDG_DATA_HOME/loopledger/ledger.sqlite).", show_default=False)] = None,
) -> None:
    """Join a team in one line: the receiver checks the token, this laptop's ledger is made (it
    follows what the team enforces), the URL and token are kept in ~/.config/loopledger/team.json
    (0600), and the agent's hook is installed. The hook keeps deciding here, offline; the resident
    guard forwards its decisions in the background."""
    from loopledger.cli.team import run_team_join

    raise typer.Exit(run_team_join(url, token, db, _agent(agent), project, False))


@app.command()
def forward(
    once: Annotated[bool, typer.Option("--once", help="Send what is waiting now and exit (1 if the receiver "
                                       "cannot be reached; nothing is lost).")] = False,
) -> None:
    """Send this laptop's live events and decisions to the team's receiver (what the resident guard
    does in the background), batch by batch, until stopped; for setups without a resident."""
    from loopledger.cli.team import run_forward

    raise typer.Exit(run_forward(once))


# Options whose value may be left out (click cannot say so through typer): `--project` alone
# means the current folder, as its help says.
OPTIONAL_VALUES = {("hook", "install"): {"--project": "."}, ("hook", "uninstall"): {"--project": "."}}


def with_optional_values(argv: list[str]) -> list[str]:
    """`argv` with the default value put after an option of OPTIONAL_VALUES given alone (last,
    or followed by another option)."""
    defaults = OPTIONAL_VALUES.get(tuple(argv[:2]))  # type: ignore[arg-type]
    if not defaults:
        return argv
    out: list[str] = []
    for i, arg in enumerate(argv):
        out.append(arg)
        if arg in defaults and (i + 1 == len(argv) or argv[i + 1].startswith("-")):
            out.append(defaults[arg])
    return out


def _hook_command(args: list[str]) -> int:
    """`hook claude-code|gemini-cli` with flags the hook's fast path left to this parser: run as
    any command, except that a usage error (a typo such as `--dbx`) exits 1, not click's 2 —
    both agents refuse the tool call on a hook's status 2, and LoopLedger never refuses a call
    for its own reasons; 1 is a non-blocking hook error the agent shows — with one line in the
    hook log (loopledger.live.hooks)."""
    from loopledger.live.hooks import log

    try:  # the click that typer carries (typer >= 0.2x vendors it), else click itself
        from typer._click.exceptions import UsageError
    except ImportError:  # pragma: no cover
        from click import UsageError
    try:
        app(args=args, standalone_mode=False)
    except UsageError as exc:
        message = f"{exc.format_message()} (see `loopledger hook {args[1]} --help`)"
        log(None, args[1], f"allowed without judging: the hook command cannot be read: {message}")
        typer.echo(f"loopledger hook {args[1]}: error: {message}; the call is allowed, nothing judged", err=True)
        return 1
    except typer.Exit as exc:
        return exc.exit_code
    return 0


def run(argv: list[str] | None = None) -> None:
    """The CLI on `argv` (default: this process's arguments)."""
    args = with_optional_values(list(sys.argv[1:] if argv is None else argv))
    if args[:1] == ["hook"] and args[1:2] in (["claude-code"], ["gemini-cli"]) and not {"--help", "-h"} & set(args):
        raise SystemExit(_hook_command(args))
    app(args=args)


if __name__ == "__main__":
    run()
