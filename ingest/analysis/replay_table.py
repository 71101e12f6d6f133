"""Plain-text rows for a replay (the `loopledger replay` table): pure functions, no I/O.

Transcript text is untrusted: every cell goes through `plain`, which shows control characters
(ANSI escapes included) as visible escapes and caps the length, and the CLI prints cells as
rich `Text` (never parsed as markup).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from loopledger.detectors.canonical import canonical_json
from loopledger.events import Answers, Batch, Event, Prose, Retry, UserTurn
from loopledger.printable import plain
from loopledger.replay import Step

CELL = 70


def event_kind(event: Event) -> str:
    return {UserTurn: "user", Prose: "prose", Batch: "batch", Answers: "answers", Retry: "retry"}[type(event)]


def event_summary(event: Event) -> str:
    if isinstance(event, UserTurn | Prose | Retry):
        return plain(event.text)
    if isinstance(event, Batch):
        if not event.calls:
            return plain(event.text)
        return plain("; ".join(f"{c.name}({canonical_json(c.args)[:40]})" for c in event.calls))
    return plain("; ".join(f"{a.call_id or '?'}{' ERR' if a.is_error else ''}: {a.text[:30]}"
                           for a in event.answers))


def verdict_text(step: Step) -> str:
    """`halt` for a batch-level check; per-call checks as `allow,warn,…` (collapsed when equal)."""
    verdicts = [c.verdict for c in step.checks]
    if not verdicts:
        return ""
    if len(set(verdicts)) == 1:
        return verdicts[0] if len(verdicts) == 1 else f"{verdicts[0]}×{len(verdicts)}"
    return ",".join(verdicts)


def results_text(step: Step) -> str:
    return ", ".join(f"{r.outcome}@{r.seq}" for r in step.results)


def state_summary(detector: str, state: dict[str, Any] | None) -> str:
    """The few numbers of a policy's state that explain its next verdict."""
    if not state:
        return ""
    s = state
    if detector == "run-length":
        if not s.get("signature"):
            text = "no run"
        else:
            text = (f"count {s['count']}/{s.get('effective_max')} total {s['total']}/{s.get('ceiling')}"
                    + (" exempt" if s.get("exempt") else "") + (" costly" if s.get("costly") else "")
                    + "".join(f" read-only via '{p}' inside {n}" for n, p in (s.get("inside_word") or {}).items()))
    elif detector == "ladder":
        text = f"{s['tool']} ×{s['count']} ({s['class']})" if s.get("tool") else "no key"
    elif detector == "window":
        buf = s.get("buffer", [])
        top = max((b["count"] for b in buf), default=0)
        text = f"buffer {len(buf)}/{s['window']}, max count {top}/{s['threshold']}"
    elif detector == "cycle":
        text = (f"period {s['period']} ×{s['repeats']}: {'→'.join(s['pattern'])}" if s.get("period")
                else f"history {len(s.get('history', []))}")
    elif detector == "progress":
        calls = s.get("calls", [])
        top = max((c["stale"] for c in calls), default=0)
        text = (f"window {len(calls)}/{s['window']}, max stale {top}"
                + (f", last: {s['rule']} ×{s['count']}" if s.get("rule") else ""))
    elif detector == "stagnation":
        top = s.get("top") or [{"count": 0}]
        text = f"recorded {s['recorded']}, max count {top[0]['count']}/{s['max_steps']}"
    else:
        text = ""
    return plain(("HALTED · " if s.get("halted") else "") + text)


def rows(steps: Iterable[Step], detector: str) -> list[tuple[str, ...]]:
    """(step, run, event, what, verdict, results, state) per step."""
    return [(str(s.seq), str(s.run), event_kind(s.event), event_summary(s.event), verdict_text(s),
             results_text(s), state_summary(detector, s.state)) for s in steps]


def sessions_of(items: Iterable[Any], path: Any = "") -> Iterable[tuple[Any, list[Event], list[Any]]]:
    """(SessionInfo | None, events, read errors) per session, grouped and keyed exactly as the
    worker stores them (loopledger.sessions), so `--session` takes the keys the dashboard shows."""
    from loopledger.sessions import group_sessions

    for g in group_sessions(items, path):
        yield g.info, g.events, g.errors


_STYLES = (("halt", "bold red"), ("block", "red"), ("warn", "yellow"), ("after_halt", "dim"))


def run_replay(path: str, spec_text: str, params: list[str], format: str | None,
               session: str | None, console: Any = None, redact: bool = True) -> int:
    """`loopledger replay`: print the step table for each session of FILE. Exit codes as the CLI's."""
    from loopledger.detectors import ConfigError, PolicySpec
    from loopledger.formats import UnknownFormat, check_name, read
    from loopledger.redact import redact_event
    from loopledger.replay import replay, tally
    from rich.console import Console
    from rich.table import Table
    from rich.text import Text

    console = console or Console()
    err = Console(stderr=True)
    try:
        spec = PolicySpec.parse(spec_text, params, trusted=True)
    except ConfigError as e:
        err.print(Text(f"error: --policy {spec_text!r}: {e}"))
        return 2
    try:
        check_name(format)
    except UnknownFormat as e:
        err.print(Text(f"error: {e}"))
        return 2
    import os

    if not os.path.isfile(path):
        # A usage error, said in words (not "[Errno 2]"): nothing was read.
        what = "is a folder, not a transcript file" if os.path.isdir(path) else "no such file"
        err.print(Text(f"error: {plain(path, 1000)}: {what}"))
        return 2
    try:
        groups = list(sessions_of(read(path, format), path))
    except OSError as e:
        err.print(Text(f"error: {plain(path, 1000)}: cannot read it ({plain(e.strerror or str(e), 300)})"))
        return 1
    except (UnknownFormat, KeyError, ValueError) as e:
        err.print(Text(f"error: {plain(str(e), 1000)}"))
        return 1
    read_errors = [e for _, _, errs in groups for e in errs]
    for e in read_errors:
        err.print(Text(f"warning: {plain(str(e), 300)}"))
    if session is not None:
        keys = [info.key if info else "" for info, _, _ in groups]
        groups = [g for g in groups if g[0] is not None and g[0].key == session]
        if not groups:
            err.print(Text(f"error: {path}: no session {session!r}; sessions: {', '.join(keys)[:500]}"))
            return 1
    console.print(Text(f"policy: {spec.label}  (id {spec.id[:12]})"))
    for info, events, _ in groups:
        # As ingest does: the same text judged (a secret that differs between two answers must
        # not make them differ here when the ledger saw them equal), no secret printed, and no
        # value deeper than the ledger keeps (--no-redact keeps only the secrets).
        info = redact_event(info, secrets=redact) if info is not None else None
        events = [redact_event(ev, secrets=redact) for ev in events]
        steps = list(replay(events, spec, with_state=True))
        title = f"session {info.key}" + (f" · {info.title}" if info and info.title else "") if info else "session"
        table = Table(title=Text(plain(title, 100)), show_lines=False)
        for col in ("step", "run", "event", "what", "verdict", "results", "state"):
            table.add_column(col, overflow="fold")
        for step, row in zip(steps, rows(steps, spec.detector), strict=True):
            verdicts = {c.verdict for c in step.checks}
            style = next((st for v, st in _STYLES if v in verdicts), "")
            table.add_row(*(Text(cell) for cell in row), style=style)
        console.print(table)
        t = tally(steps).totals()
        console.print(Text("totals: " + ", ".join(f"{k} {v}" for k, v in t.items() if v is not None)))
    return 3 if read_errors else 0
