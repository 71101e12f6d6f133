"""Plain-text rows for a replay (the `loopledger replay` table): pure functions, no I/O.

Transcript text is untrusted: every cell goes through `plain`, which shows control characters
(ANSI escapes included) as visible escapes and caps the length, and the CLI prints cells as
rich `Text` (never parsed as markup).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

from loopledger.analysis.explain import run_ref
from loopledger.analysis.scoring import calls_before, first_halt
from loopledger.detectors.canonical import canonical_json
from loopledger.events import Answers, Batch, Event, Prose, Retry, UserTurn
from loopledger.printable import plain
from loopledger.replay import Step, tally

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


def call_numbers(event: Event, before: int) -> str:
    """The calls a step makes by the one number people use (1-based over the session, as the
    dashboard, the labels and the leaderboard count them): "#5", or "#5–#7" for a batch of three;
    "" for a step that makes none."""
    n = len(event.calls) if isinstance(event, Batch) else 0
    if not n:
        return ""
    return f"#{before + 1}" if n == 1 else f"#{before + 1}–#{before + n}"


def results_text(step: Step, calls_before: Sequence[int]) -> str:
    """What the policy made of each judged call's answers, the call named by its number as in
    the call column: "repeated #2"."""
    return ", ".join(f"{r.outcome} #{calls_before[r.seq] + max(r.idx, 0) + 1}" if 0 <= r.seq < len(calls_before)
                     else r.outcome for r in step.results)


def _scalars(s: dict[str, Any]) -> str:
    """A detector this table has no words for (a plugin's): its plain fields as name=value."""
    return ", ".join(f"{k}={v}" for k, v in s.items()
                     if k not in ("run", "halted") and isinstance(v, str | int | float | bool) and v is not None)


def state_summary(detector: str, state: dict[str, Any] | None) -> str:
    """The few numbers of a policy's state that explain its next verdict (every built-in
    detector; a plugin's plain fields as they are)."""
    if not state:
        return ""
    s = state
    g = s.get
    if detector == "run-length":
        if not g("signature"):
            text = "no run"
        else:
            text = (f"count {g('count')}/{g('effective_max')} total {g('total')}/{g('ceiling')}"
                    + (" exempt" if g("exempt") else "") + (" costly" if g("costly") else "")
                    + "".join(f" read-only via '{p}' inside {n}" for n, p in (g("inside_word") or {}).items()))
    elif detector == "ladder":
        text = f"{g('tool')} ×{g('count')} ({g('class')})" if g("tool") else "no key"
    elif detector == "window":
        buf = g("buffer") or []
        top = max((b.get("count", 0) for b in buf), default=0)
        text = f"buffer {len(buf)}/{g('window')}, max count {top}/{g('threshold')}"
    elif detector == "cycle":
        text = (f"period {g('period')} ×{g('repeats')}: {'→'.join(g('pattern') or [])}" if g("period")
                else f"history {len(g('history') or [])}")
    elif detector == "progress":
        calls = g("calls") or []
        text = (f"tracking {len(calls)}/{g('window')} calls"
                + (f", last: {g('rule')} ×{g('count')}" if g("rule") else ""))
    elif detector == "stagnation":
        top = g("top") or [{"count": 0}]
        text = f"recorded {g('recorded')}, max count {top[0].get('count', 0)}/{g('max_steps')}"
    elif detector == "openhands":
        text = (f"identical actions {g('identical_actions')}/{g('action_observation')}, "
                f"error streak {g('action_error_streak')}/{g('action_error')}, "
                f"monologue {g('agent_messages_in_a_row')}/{g('monologue')}, "
                f"alternating {g('alternating')}/{g('alternating_pattern')}")
    elif detector == "gemini-cli":
        reps = g("repetitions_by_cycle") or {}
        top = max(reps.values(), default=0)
        text = (f"remembered {g('calls_remembered')} calls, most repeats {top}/{g('repeats')}"
                f" (cycles up to {g('max_cycle')}), detections {g('detections')}")
    elif detector == "roo":
        text = f"{g('previous_call')} repeated {g('repeats')}/{g('limit')}" if g("previous_call") else "no call yet"
    elif detector == "kilo":
        text = f"identical before {g('identical_before')}/{g('threshold')}, parts {g('parts_remembered')}/{g('scan_parts')}"
    else:
        text = _scalars(s)
    return plain(("HALTED · " if g("halted") else "") + text, 160)


COLUMNS = ("call", "run", "event", "what", "verdict", "results", "state")


def rows(steps: Iterable[Step], detector: str, events: Sequence[Event]) -> list[tuple[str, ...]]:
    """(call, run, event, what, verdict, results, state) per step of `events`' replay: calls by
    their number and runs from 1, as the dashboard shows them."""
    before = calls_before(events)
    return [(call_numbers(s.event, before[s.seq]), run_ref(s.run).removeprefix("run "), event_kind(s.event),
             event_summary(s.event), verdict_text(s), results_text(s, before), state_summary(detector, s.state))
            for s in steps]


def totals_text(steps: Sequence[Step], events: Sequence[Event]) -> str:
    """The session's counts as the ledger keeps them, its first halt named by its call number."""
    totals = tally(steps).totals()
    del totals["first_halt_seq"]  # a step: said below as the call it stopped
    text = "totals: " + ", ".join(f"{k} {v}" for k, v in totals.items() if v is not None)
    halt = first_halt(steps)
    if halt is not None:
        run, seq, idx = halt
        text += f"; first halt at call #{calls_before(events)[seq] + max(idx, 0) + 1} ({run_ref(run)})"
    return text


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
    from loopledger.replay import replay
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
    for number, (info, events, _) in enumerate(groups, start=1):
        # As ingest does: the same text judged (a secret that differs between two answers must
        # not make them differ here when the ledger saw them equal), no secret printed, and no
        # value deeper than the ledger keeps (--no-redact keeps only the secrets).
        info = redact_event(info, secrets=redact) if info is not None else None
        events = [redact_event(ev, secrets=redact) for ev in events]
        steps = list(replay(events, spec, with_state=True))
        # Sessions counted from 1 in the file, as runs and calls are; the key is what --session takes.
        title = (f"session {number} of {len(groups)}" if len(groups) > 1 else "session") + (
            (f" · {info.key}" + (f" · {info.title}" if info.title else "")) if info else "")
        table = Table(title=Text(plain(title, 100)), show_lines=False)
        for col in COLUMNS:
            table.add_column(col, overflow="fold")
        for step, row in zip(steps, rows(steps, spec.detector, events), strict=True):
            verdicts = {c.verdict for c in step.checks}
            style = next((st for v, st in _STYLES if v in verdicts), "")
            table.add_row(*(Text(cell) for cell in row), style=style)
        console.print(table)
        console.print(Text(totals_text(steps, events)))
    return 3 if read_errors else 0
