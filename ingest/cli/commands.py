"""What `loopledger ingest | watch | recheck | policies` do; ingest/cli.py only parses their flags.

Output: progress on stderr, the summary table on stdout. Exit codes (docs/architecture.md):
0 ok · 1 error · 2 usage · 3 finished but some lines were quarantined.
"""

from __future__ import annotations

import contextlib
import os
import shlex
import threading
from collections.abc import Sequence
from pathlib import Path

from loopledger import formats, worker
from loopledger.detectors import registry
from loopledger.detectors.policy import PolicySpec
from loopledger.ledger import migrate, store
from loopledger.ledger.engine import display_url, make_engine, resolve_url
from loopledger.ledger.urls import ENV_URL, has_password
from loopledger.live import enforce
from loopledger.printable import plain
from rich.console import Console
from rich.progress import BarColumn, DownloadColumn, Progress, TextColumn, TimeRemainingColumn
from rich.table import Table
from rich.text import Text

EXIT_OK, EXIT_ERROR, EXIT_USAGE, EXIT_QUARANTINED = 0, 1, 2, 3

out = Console(highlight=False, soft_wrap=True)
err = Console(stderr=True, highlight=False, soft_wrap=True)


def _options(policy: Sequence[str], config: Path | None, format: str | None, redact: bool,
             max_text: int) -> worker.Options:
    # A usage error, said before any file is touched (else every file would be recorded as
    # failed, and skipped as unchanged by the next, correct run).
    formats.check_name(format)
    specs = worker.policy_specs(policy, config)
    return worker.Options(specs=specs, format=format, redact=redact, max_text=max_text)


def open_ledger(db: str | None, create: bool = False):
    """The writer engine on an up-to-date ledger, or a one-line error and exit status 1.

    A ledger that cannot be opened (a folder that does not exist, no permission, a PostgreSQL
    server that does not answer, a URL for a driver that is not installed) is the user's to fix:
    say where and why, not a traceback."""
    import typer
    from sqlalchemy.exc import SQLAlchemyError

    url = resolve_url(db)
    where = display_url(url)
    try:
        engine = make_engine(url, create_dirs=create)
        migrate.upgrade(engine)
    except migrate.NewerLedger as exc:  # nothing to fix here but the install: one line, exit 2
        err.print(Text(f"error: {where}: {exc}", style="red"))
        raise typer.Exit(EXIT_USAGE) from None
    except (SQLAlchemyError, OSError) as exc:
        reason = getattr(exc, "orig", None) or exc
        err.print(Text(f"error: cannot open the ledger at {where}: {str(reason).splitlines()[0]}", style="red"))
        raise typer.Exit(EXIT_ERROR) from None
    return engine


def missing_ledger(db: str | None) -> str | None:
    """The SQLite file `db` names when there is none (None: it exists, it is not SQLite, or the
    path cannot be a file at all, under a file: `open_ledger` says why it cannot be opened)."""
    from loopledger.ledger.urls import sqlite_file

    path = sqlite_file(resolve_url(db))
    if path is None or os.path.exists(path):
        return None
    parent = os.path.dirname(path)
    while parent and not os.path.exists(parent) and parent != os.path.dirname(parent):
        parent = os.path.dirname(parent)
    return path if not parent or os.path.isdir(parent) else None


def refuse_missing_ledger(db: str | None) -> None:
    """For commands that work on what is stored (they read it, judge it again, or choose what it
    enforces): a mistyped --db is an error naming the path (exit 2), never a new empty ledger that
    then reads as "nothing here"."""
    import typer

    path = missing_ledger(db)
    if path is not None:
        err.print(Text(f"error: no ledger at {path}: the file does not exist (this command creates none; "
                       "check --db, or make one with `loopledger ingest`)", style="red"))
        raise typer.Exit(EXIT_USAGE)


def refuse_newer_ledger(db: str | None) -> None:
    """For a command that never writes (the dashboard): a ledger a newer LoopLedger wrote is
    one line and exit 2, as from every other command (open_ledger), read without migrating."""
    import typer
    from sqlalchemy.exc import SQLAlchemyError

    url = resolve_url(db)
    engine = make_engine(url, readonly=True)
    try:
        with engine.connect() as conn:
            migrate.check_known(migrate.current(conn))
    except migrate.NewerLedger as exc:
        err.print(Text(f"error: {display_url(url)}: {exc}", style="red"))
        raise typer.Exit(EXIT_USAGE) from None
    except SQLAlchemyError:
        pass  # not a ledger, or not reachable: the dashboard says so on its page
    finally:
        engine.dispose()


def open_existing_ledger(db: str | None):
    """`open_ledger` for a command on what is stored: the ledger must exist already."""
    refuse_missing_ledger(db)
    return open_ledger(db)


@contextlib.contextmanager
def reading(db: str | None):
    """A connection on an existing ledger for a read-only command; the engine is gone after."""
    engine = open_existing_ledger(db)
    try:
        with engine.connect() as conn:
            yield conn
    finally:
        engine.dispose()


def _with_enforced(engine, opts: worker.Options) -> None:
    """The enforced policy is replayed at ingest too, so the Session page can set its replayed
    verdicts beside what it enforced live on the same calls."""
    with engine.connect() as conn:
        try:
            chosen = enforce.enforced_specs(conn)
        except enforce.NotRegistered as exc:  # a stored policy never names code to import
            err.print(Text(f"note: {exc}; not replayed at ingest", style="yellow"))
            chosen = ()
    extra = [sp for sp in chosen if sp not in opts.specs]
    if extra:
        opts.specs = [*opts.specs, *extra]


def setup_logging(log_file: Path | None) -> None:
    """Warnings and errors with their tracebacks (a file that could not be ingested, a busy
    ledger, a sniffer that failed) go to `log_file` through standard logging; without one they
    are kept out of the terminal, where each problem already gets its one line."""
    import logging

    logger = logging.getLogger("loopledger")
    logger.setLevel(logging.INFO)
    logger.propagate = False
    if log_file is None:
        logger.addHandler(logging.NullHandler())
        return
    from loopledger.redact import redact_text

    class Redacting(logging.Formatter):
        """A log line (a traceback may quote a transcript) through the one redaction point."""

        def format(self, record: logging.LogRecord) -> str:
            return redact_text(super().format(record))

    # Created readable by its owner only, as the hook's log is; an existing file keeps its mode.
    os.close(os.open(log_file, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600))
    handler = logging.FileHandler(log_file, encoding="utf-8")
    handler.setFormatter(Redacting("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    logger.addHandler(handler)


def summary_table(t: worker.Totals, title: str = "Ingest summary", files: bool = True) -> Table:
    """The totals; `files=False` (recheck: no file is read) leaves the file rows out."""
    # One row per figure: it stays readable in an 80-column terminal and in CI logs.
    table = Table(title=title, title_justify="left")
    table.add_column("")
    table.add_column("count", justify="right")
    file_rows = (("files", t.files), ("  read this time", t.changed), ("  unchanged", t.unchanged))
    judged = (("sessions (re)judged", t.sessions), ("runs", t.runs), ("calls", t.calls),
              ("checks (all policies)", t.checks), ("warnings", t.warnings), ("blocks", t.blocks),
              ("halts", t.halts))
    rows = (file_rows + judged + (("quarantined lines", t.quarantined), ("files with errors", t.errors),
                                        ("files left: ledger busy", t.locked))
            if files else judged)
    for name, value in rows:
        table.add_row(name, f"{value:,}")
    return table


def _print_errors(t: worker.Totals) -> None:
    for msg in t.error_messages:
        # Text(), not markup: a file name or message may contain [brackets]; plain(): it may
        # quote raw bytes (escape sequences, binary) that must not reach the terminal as they are.
        err.print(Text(f"error: {plain(msg, 1000)}", style="red"))
    for note in t.notes:
        err.print(Text(f"note: {plain(note, 1000)}"))
    if t.quarantined:
        # Name the lines (the first few): a count alone sends the person hunting.
        err.print(Text(f"{t.quarantined} malformed line(s) quarantined; all are on the Ingest health page "
                       "and in the ingest_errors table:", style="yellow"))
        for where in t.bad_lines:
            err.print(Text(f"  {plain(where, 300)}", style="yellow"))
        if t.quarantined > len(t.bad_lines):
            err.print(Text(f"  … and {t.quarantined - len(t.bad_lines)} more", style="yellow"))


# Below this, starting job processes costs more than it saves: each job spends ~0.6 CPU-s
# importing before its first file (measured), and two jobs burn ~20% more CPU per call than one
# (BENCHMARKS.md, Ingest; two independent one-process ingests run side by side burn as much, so
# it is the two busy cores, not the shared ledger). On two idle cores that puts the break-even
# near 16 MB of transcripts (~20k generated calls); from 32 MB two jobs should be >= 20% faster.
AUTO_JOBS_BYTES = worker.AUTO_JOBS_BYTES


def run_ingest(paths: Sequence[Path], db: str | None, policy: Sequence[str], config: Path | None,
               format: str | None, redact: bool, max_text: int, jobs: int = 1, create: bool = False) -> int:
    try:
        opts = _options(policy, config, format, redact, max_text)
    except ValueError as exc:
        err.print(Text(f"error: {exc}", style="red"))
        return EXIT_USAGE
    missing = [p for p in paths if not p.exists()]
    if missing:
        err.print(Text(f"error: no such file or folder: {', '.join(map(str, missing))}", style="red"))
        return EXIT_USAGE
    refused = not_transcripts(paths, format)
    if refused:
        # Said alone, before the ledger is opened: no empty ledger file, no table of zeros.
        for msg in refused:
            err.print(Text(f"error: {plain(msg, 1000)}", style="red"))
        return EXIT_ERROR
    engine = open_ledger(db, create)
    _with_enforced(engine, opts)
    try:
        unreadable: list[str] = []
        skipped: list[str] = []
        files = worker.discover(paths, unreadable, skipped)
        if skipped:
            # One line, not an error: a folder's README.md or SOURCES.md is not a transcript.
            names = ", ".join(Path(s).name for s in skipped[:5]) + (f" and {len(skipped) - 5} more"
                                                                    if len(skipped) > 5 else "")
            err.print(Text(plain(f"skipped {len(skipped)} file(s) of the folder(s) that are not transcripts: {names}",
                                 1000)))
        sizes = {str(f): _size(f) for f in files}
        opts.jobs = jobs or worker.default_jobs(sum(sizes.values()))
        with Progress(TextColumn("[progress.description]{task.description}"), BarColumn(), DownloadColumn(),
                      TimeRemainingColumn(), console=err, transient=True) as progress:
            task = progress.add_task(f"ingesting {len(files)} file(s)", total=sum(sizes.values()) or 1)

            def advance(report: worker.FileReport) -> None:
                progress.advance(task, sizes.get(report.path, 0))

            totals = worker.ingest_paths(engine, files, opts, on_file=advance)
    finally:
        engine.dispose()
    totals.errors += len(unreadable)
    totals.error_messages += [f"cannot read {u}" for u in unreadable]
    out.print(summary_table(totals))
    _print_errors(totals)
    return totals.exit_code


def not_transcripts(paths: Sequence[Path], format: str | None) -> list[str]:
    """When every path named is a file and no reader recognises any of them: why, one line each
    (redacted: it quotes the file's first bytes). Empty otherwise — a folder, an empty file (not
    an error: an agent creates its file first), --format, or one transcript among them: then the
    worker reads and reports each file as usual."""
    from loopledger.redact import redact_text

    if format is not None or not paths or not all(p.is_file() for p in paths):
        return []
    why = []
    for p in paths:
        try:
            if p.stat().st_size == 0:
                return []
            formats.sniff(p)
            return []
        except formats.UnknownFormat as exc:
            why.append(redact_text(str(exc)))
        except OSError:
            return []  # unreadable: the worker names it as it does for every file
    return why


def _size(p: Path) -> int:
    try:
        return p.stat().st_size
    except OSError:
        return 0


def run_watch(paths: Sequence[Path], db: str | None, policy: Sequence[str], config: Path | None,
              format: str | None, redact: bool, max_text: int, interval: float, create: bool = False) -> int:
    try:
        opts = _options(policy, config, format, redact, max_text)
    except ValueError as exc:
        err.print(Text(f"error: {exc}", style="red"))
        return EXIT_USAGE
    opts.defer_partial_tail = True
    roots = list(paths) or worker.default_watch_paths()
    if not roots:
        err.print(Text("error: nothing to watch: none of " + ", ".join(worker.DEFAULT_WATCH_DIRS)
                       + " exists; name the folders to watch", style="red"))
        return EXIT_USAGE
    engine = open_ledger(db, create)
    _with_enforced(engine, opts)
    stop = threading.Event()
    worker.stop_on_signals(stop)
    err.print(Text(f"watching {', '.join(map(str, roots))} (ledger: {display_url(resolve_url(db))}); Ctrl-C to stop"))

    def report(r: worker.FileReport) -> None:
        line = f"{r.action:9} {r.path}: {r.sessions} session(s), {r.calls} call(s), {r.halts} halt(s)"
        if r.quarantined:
            line += f", {r.quarantined} quarantined (first: {r.bad_lines[0]})" if r.bad_lines else \
                f", {r.quarantined} quarantined"
        if r.error:
            line += f" — {r.error}"
        if r.note:
            line += f" — {r.note}"
        err.print(Text(plain(line, 1000)))

    try:
        totals = worker.watch(engine, roots, opts, stop, interval=interval, on_file=report)
    finally:
        engine.dispose()
    out.print(summary_table(totals, "Watch summary"))
    _print_errors(totals)
    # As ingest's: 1 if some file could not be read, 3 if lines were quarantined, else 0.
    return totals.exit_code


def run_receive(db: str | None, host: str, port: int, spool: Path | None, max_body: int,
                policy: Sequence[str], config: Path | None, redact: bool, max_text: int, *,
                token: str | None = None, insecure: bool = False, keep_days: int = 1) -> int:
    from loopledger import receive

    members = _has_member_tokens(db)  # members' tokens close the door as --token does, for good
    problem = receive.door_problem(host, token or members, insecure)
    if problem is not None:
        err.print(Text(f"error: {problem}", style="red"))
        return EXIT_USAGE
    try:
        opts = _options(policy, config, None, redact, max_text)
    except ValueError as exc:
        err.print(Text(f"error: {exc}", style="red"))
        return EXIT_USAGE
    engine = open_ledger(db)
    folder = spool or receive.default_spool(resolve_url(db))
    door = ("bearer token required" + (" (--token or a member's)" if token and members else
                                       " (a member's token)" if members else "")) if token or members else (
        "NO TOKEN: anyone who reaches the port can write into the ledger" if not receive.is_loopback(host)
        else "loopback only, no token")
    try:
        stats = receive.serve(engine, folder, opts, host, port, max_body, on_ready=lambda: err.print(Text(
            f"receiving OTLP/HTTP traces on http://{host}:{port}/v1/traces ({door}; spool: {folder}); "
            "Ctrl-C to stop")), token=token, keep_days=keep_days,
            # Tokens required for the receiver's whole life once the ledger held one, and beyond
            # loopback unless --insecure said otherwise out loud (forwarded.Door).
            closed=members or (not receive.is_loopback(host) and not insecure))
    except OSError as exc:
        err.print(Text(f"error: cannot serve on {host}:{port}: {exc}", style="red"))
        return EXIT_ERROR
    finally:
        engine.dispose()
    err.print(Text(f"received {stats.requests} OTLP request(s), {stats.spans} span(s) "
                   f"({stats.duplicates} already received); {stats.batches} forwarded batch(es), "
                   f"{stats.live_events} live event(s) of {stats.live_sessions} session(s) from "
                   f"{len(stats.members)} member(s); {stats.rejected} request(s) rejected"))
    return EXIT_OK


def _has_member_tokens(db: str | None) -> bool:
    """Whether an existing ledger holds a member's token, revoked or not (nothing is created)."""
    from loopledger.ledger import team
    from sqlalchemy.exc import SQLAlchemyError

    if missing_ledger(db) is not None:
        return False
    try:
        engine = make_engine(resolve_url(db), readonly=True)
        try:
            with engine.connect() as conn:
                return team.ever_token(conn)
        finally:
            engine.dispose()
    except SQLAlchemyError:  # not migrated yet (no such table), or not reachable: open_ledger says why
        return False


def run_recheck(db: str | None, policy: Sequence[str], config: Path | None) -> int:
    """Judge every stored session with new policies, from the ledger alone (no file is read)."""
    try:
        specs: list[PolicySpec] = [PolicySpec.parse(t, trusted=True) for t in policy]
        if config is None and (Path.cwd() / worker.CONFIG_NAME).is_file():
            config = Path.cwd() / worker.CONFIG_NAME  # as ingest and watch read it
        if config is not None:
            specs += worker.load_config(config)
    except ValueError as exc:
        err.print(Text(f"error: {exc}", style="red"))
        return EXIT_USAGE
    if not specs:
        err.print(Text(f"error: no policy to recheck: give --policy SPEC, --config FILE, or run next to a "
                       f"{worker.CONFIG_NAME} with [[policy]] tables", style="red"))
        return EXIT_USAGE
    # It judges what is stored: a mistyped --db is an error naming the path, never a new empty ledger.
    engine = open_existing_ledger(db)
    totals = worker.Totals()

    def count(sid: int, events, verdicts) -> None:
        r = worker.FileReport(str(sid))
        worker.count_verdicts(r, events, verdicts)
        totals.add(r)

    try:
        with engine.connect() as conn:
            ids = store.session_ids(conn)
        with Progress(TextColumn("{task.description}"), BarColumn(), TextColumn("{task.completed}/{task.total}"),
                      console=err, transient=True) as progress:
            task = progress.add_task("rechecking sessions", total=len(ids))
            worker.judge_stored(engine, specs, ids, on_session=count,
                                progress=lambda *_: progress.advance(task))
    finally:
        engine.dispose()
    table = summary_table(totals, f"Recheck: {len(specs)} polic{'y' if len(specs) == 1 else 'ies'}", files=False)
    out.print(table)
    return EXIT_OK


def run_policies(db: str | None) -> int:
    with reading(db) as conn:
        rows = store.stored_policies(conn)
        now = enforce.now(conn)
    enforced_ids = set(now["ids"])
    enforced_word = "enforced" if now["chosen"] else "enforced (the default set)"
    table = Table(title="Stored policies", title_justify="left")
    # No detector column: a label begins with its detector, and the width goes to the label
    # (a spec people copy into --policy).
    for name in ("id", "label", "default", "status"):
        table.add_column(name, min_width=32 if name == "label" else None)
    for r in rows:
        # Looked up, never imported: a stored policy cannot choose code this process runs.
        here = registry.is_registered(r["detector"])
        status = (enforced_word if r["id"] in enforced_ids else "") if here else "not registered here: allowed"
        if not here and r["id"] in enforced_ids:
            status = "enforced, not registered here: allowed"
        table.add_row(r["id"][:12], Text(r["label"]), "yes" if r["is_default"] else "", status)
    out.print(table)
    out.print(enforced_line(now))
    out.print(detectors_table())
    for name, why in sorted(registry.broken_plugins().items()):
        err.print(Text(f"plugin {name!r} (entry point group {registry.ENTRY_POINT_GROUP}) failed to load: {why}",
                       style="yellow"))
    return EXIT_OK


def detectors_table() -> Table:
    """Every detector a --policy may name: built-ins (run by default) and installed plugins."""
    table = Table(title="Detectors (--policy DETECTOR[:NAME=VALUE,...])", title_justify="left")
    for name in ("detector", "source", "parameters [defaults]", "what it catches"):
        table.add_column(name)
    builtin = set(registry.builtin_names())
    for name in registry.names():
        params = PolicySpec(name).text.partition(":")[2].replace(",", ", ")
        table.add_row(Text(name), "built-in" if name in builtin else "plugin", Text(params),
                      Text(registry.get(name).summary))
    return table


def run_enforce(db: str | None, spec: Sequence[str] | str | None, default: bool) -> int:
    texts = [spec] if isinstance(spec, str) else list(spec or ())
    if texts and default:
        err.print(Text("error: give SPEC... or --default, not both", style="red"))
        return EXIT_USAGE
    try:
        parsed = [PolicySpec.parse(t, trusted=True) for t in texts]
    except ValueError as exc:
        err.print(Text(f"error: {exc}", style="red"))
        return EXIT_USAGE
    # Live agents read the setting from the person's ledger: a mistyped --db is an error naming the
    # path, never an empty ledger nobody reads said to be "ENFORCED on live agents".
    engine = open_existing_ledger(db)
    try:
        if parsed or default:
            with engine.begin() as conn:
                enforce.set_enforced(conn, parsed or None, origin="cli")
        with engine.connect() as conn:
            now = enforce.now(conn)
            chosen = _enforced_here(conn)
    finally:
        engine.dispose()
    out.print(enforced_line(now))
    for sp in chosen:
        out.print(Text(f"spec: {sp.text}"))
    return EXIT_OK


def _enforced_here(conn) -> tuple[PolicySpec, ...]:
    """The enforced specs this process can build (a stored policy whose detector is not
    registered here is left out: `enforced_line` names it)."""
    try:
        return enforce.enforced_or_default(conn)
    except enforce.NotRegistered:
        return ()


def enforced_line(now: dict) -> Text:
    """`ENFORCED on live agents: …` with since when, for `policies` and `enforce`."""
    import datetime as dt

    labels = " + ".join(f"{label} (id {pid[:12]})" for label, pid in zip(now["labels"], now["ids"], strict=True))
    since = (f", since {dt.datetime.fromtimestamp(now['since'], dt.UTC):%Y-%m-%d %H:%M:%S} UTC"
             f" ({now['origin'] or 'unknown'}{', by ' + now['by'] if now.get('by') else ''})"
             if now["since"] is not None else "")
    if not now["chosen"]:
        head = (f"ENFORCED on live agents: the default set, {labels} (the set ingest judges with; choose "
                f"another with `loopledger enforce SPEC [SPEC...]` or Compare's \"Add it to the enforced set\"){since}")
    else:
        kind = "the set " if len(now["labels"]) > 1 else ""
        head = f"ENFORCED on live agents: {kind}{labels}{since}"
    if now["missing"]:
        head += (f"\n  not registered here: allowed: {', '.join(now['missing'])} (a stored policy never imports "
                 "code; install the plugin's package to enforce it)")
    return Text(head)


def _hook_file(agent: str, project: Path | None, user: bool) -> Path:
    """The file `hook install` writes for `agent`: its settings file, OpenCode's plugin."""
    from loopledger.live import hook_settings as hs
    from loopledger.live import opencode_plugin

    if agent == "opencode":
        return opencode_plugin.plugin_path(project, user)
    return hs.settings_path(agent, project, user)


def _write_hook(agent: str, path: Path, folder: Path | None, db: str | None):
    from loopledger.live import codex_settings, opencode_plugin
    from loopledger.live import hook_settings as hs

    if agent == "opencode":
        command = opencode_plugin.guard_command(hs.hook_command(agent, db))
        return opencode_plugin.install(path, opencode_plugin.render(command), shlex.join(command))
    if agent == "codex":
        codex_settings.configs(folder)  # a config.toml Codex cannot read: refused before anything is written
    return hs.install(agent, path, hs.agent_command(agent, db))


def _hook_notes(agent: str, path: Path, folder: Path | None) -> list[str]:
    """What the agent itself must allow before the hook runs (trusted folders, reviewed hooks)."""
    from loopledger.live import codex_settings
    from loopledger.live import hook_settings as hs

    if agent == "gemini-cli":
        return [hs.gemini_trust_note(folder)]
    if agent == "codex":
        return codex_settings.install_notes(path, folder, hs.is_our_command("codex"))
    if agent == "opencode":
        return [f"OpenCode loads plugins when it starts: start OpenCode{f' in {folder}' if folder else ''} again "
                "(a running OpenCode keeps the plugins it started with). The plugin runs the command above once "
                "per OpenCode process and asks it about every tool call."]
    return []


def run_hook_install(agent: str, project: Path | None, user: bool, db: str | None) -> int:
    from loopledger.ledger.urls import sqlite_file
    from loopledger.live import hook_settings as hs

    if project is not None and user:
        err.print(Text("error: give --project DIR or --user, not both", style="red"))
        return EXIT_USAGE
    if project is not None and not project.is_dir():
        err.print(Text(f"error: no such folder: {project}", style="red"))
        return EXIT_USAGE
    # The ledger the person uses (`--db`, else the one `loopledger dashboard` opens from here),
    # never a new one: a hook that writes to a fresh file beside the project enforces the
    # built-in default, not the setting enforced in the person's ledger.
    url = resolve_url(db)
    file = sqlite_file(url)
    if file is not None and not os.path.isfile(file):
        err.print(Text(f"error: no ledger at {file}: give --db the ledger you enforce in (or run "
                       "`loopledger ingest` there first); a hook install never creates one", style="red"))
        return EXIT_USAGE
    # A password never goes into a file or an argv: --db with one is refused; one that comes from
    # $LOOPLEDGER_DATABASE_URL stays there (hook_settings.hook_command then names no ledger).
    from_env = has_password(url)
    if from_env and db is not None:
        err.print(Text(f"error: {_password_refusal(display_url(url))}", style="red"))
        return EXIT_USAGE
    # The ledger must be current before the agent's first call (a hook never migrates it).
    open_ledger(db).dispose()
    path = _hook_file(agent, project, user)
    folder = None if user else (project or Path.cwd()).expanduser().absolute()
    try:
        change = _write_hook(agent, path, folder, db)
        notes = _hook_notes(agent, path, folder)
    except (hs.SettingsError, OSError) as exc:
        err.print(Text(f"error: {exc}", style="red"))
        return EXIT_ERROR
    if change.changed:
        out.print(Text(f"installed the {agent} hook in {path}" + (f" (original kept in {change.backup})"
                                                                  if change.backup else "")))
    else:
        out.print(Text(f"the {agent} hook is already installed in {path}; nothing changed"))
    out.print(Text(f"ledger: {display_url(url)}" + (f" (read from ${ENV_URL} where the hook runs: start the agent "
                                                     "with it set)" if from_env else "")))
    out.print(Text(f"command: {change.command}"))
    for note in hs.install_notes(change.command):
        out.print(Text(f"note: {note}"))
    for note in notes:
        out.print(Text(note))
    return EXIT_OK


def _password_refusal(where: str) -> str:
    """Why `hook install` will not write this URL, and what to do instead (never the password)."""
    return (f"the ledger URL {where} holds a password, and a hook install writes its --db into the agent's "
            "settings (a project's are usually committed) and into every hook process's command line. Keep "
            "the password out of both: put it in ~/.pgpass (or the file $PGPASSFILE names; libpq reads it) and "
            "give --db without it (postgresql://USER@HOST/DB), or export LOOPLEDGER_DATABASE_URL with the whole "
            "URL where the agent starts and run `loopledger hook install` without --db: the hook then reads it "
            "from its environment.")


def run_hook_uninstall(agent: str, project: Path | None, user: bool) -> int:
    from loopledger.live import hook_settings as hs

    if project is not None and user:
        err.print(Text("error: give --project DIR or --user, not both", style="red"))
        return EXIT_USAGE
    path = _hook_file(agent, project, user)
    try:
        if agent == "opencode":
            from loopledger.live import opencode_plugin

            change = opencode_plugin.uninstall(path)
        else:
            change = hs.uninstall(agent, path)
    except (hs.SettingsError, OSError) as exc:
        err.print(Text(f"error: {exc}", style="red"))
        return EXIT_ERROR
    if change.removed:
        out.print(Text(f"removed the {agent} hook: deleted {path}, which the install had created"))
    elif change.changed:
        out.print(Text(f"removed the {agent} hook from {path}" + (
            f"; other settings changed since the install, so the original stays in {change.backup}"
            if change.backup else "; the file is as it was before the install")))
    else:
        out.print(Text(f"no LoopLedger {agent} hook in {path}; nothing changed"))
    return EXIT_OK


def run_guard(db: str | None, policy: Sequence[str] | str | None, no_ledger: bool, origin: str = "guard") -> int:
    from loopledger.live import db as live_db
    from loopledger.live import guard_server

    try:
        return guard_server.run(db, policy, no_ledger, origin)
    except ValueError as exc:
        err.print(Text(f"error: {exc}", style="red"))
        return EXIT_USAGE
    except live_db.LedgerUnavailable as exc:
        err.print(Text(f"error: {exc}", style="red"))
        return EXIT_ERROR
