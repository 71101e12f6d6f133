"""What the Replay and Compare pages read from the ledger, and the pure helpers that shape it.

Reads are small and keyed by session: the pages never pull whole tables. Transcript text leaves
this module only as plain strings for st.text / st.code / st.dataframe.
"""

from __future__ import annotations

import bisect
import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlencode

import sqlalchemy as sa
from loopledger import vocab
from loopledger.analysis import explain, scoring
from loopledger.analysis.scoring import calls_before  # noqa: F401  (seq → calls before it, for call #N)
from loopledger.events import Batch, Event, Prose, Retry, UserTurn
from loopledger.ledger import schema as t
from sqlalchemy.engine import Connection

TEXT_LIMIT = 2_000  # characters of one message shown at the cursor; the ledger caps them anyway


# ── reads ──────────────────────────────────────────────────────────────────────────────────────


@dataclass(frozen=True, slots=True)
class SessionRow:
    id: int
    key: str
    title: str
    format: str
    n_events: int
    n_runs: int
    n_calls: int
    updated_at: float | None

    @property
    def name(self) -> str:
        return f"#{self.id} {self.title or self.key} ({self.format}, {self.n_calls} calls)"


def _session_row(r: Any) -> SessionRow:
    return SessionRow(r.id, r.key, r.title or "", r.format, r.n_events or 0, r.n_runs or 0, r.n_calls or 0,
                      r.updated_at)


_SESSION_COLS = (t.sessions.c.id, t.sessions.c.key, t.sessions.c.title, t.sessions.c.format,
                 t.sessions.c.n_events, t.sessions.c.n_runs, t.sessions.c.n_calls, t.sessions.c.updated_at)


def list_sessions(conn: Connection, limit: int = 500) -> list[SessionRow]:
    """The Replay page's session choices: the most recently updated first."""
    q = (sa.select(*_SESSION_COLS)
         .order_by(t.sessions.c.updated_at.desc().nulls_last(), t.sessions.c.id.desc()).limit(limit))
    return [_session_row(r) for r in conn.execute(q)]


def get_session(conn: Connection, session_id: int) -> SessionRow | None:
    r = conn.execute(sa.select(*_SESSION_COLS).where(t.sessions.c.id == session_id)).first()
    return _session_row(r) if r else None


def session_versions(conn: Connection, session_ids: Sequence[int]) -> list[tuple[int, float | None, int]]:
    """(id, updated_at, n_events) per session, in id order: what a sweep's cache depends on."""
    q = (sa.select(t.sessions.c.id, t.sessions.c.updated_at, t.sessions.c.n_events)
         .where(t.sessions.c.id.in_(list(session_ids))).order_by(t.sessions.c.id))
    return [(r.id, r.updated_at, r.n_events or 0) for r in conn.execute(q)]


def list_runs(conn: Connection, session_id: int) -> list[dict[str, Any]]:
    q = sa.select(t.runs).where(t.runs.c.session_id == session_id).order_by(t.runs.c.idx)
    return [dict(r._mapping) for r in conn.execute(q)]


def list_policies(conn: Connection) -> list[dict[str, Any]]:
    q = sa.select(t.policies).order_by(t.policies.c.detector, t.policies.c.is_default.desc(), t.policies.c.label)
    return [dict(r._mapping) for r in conn.execute(q)]


def stored_checks(conn: Connection, session_id: int, policy_id: str) -> list[dict[str, Any]]:
    c = t.checks
    q = (sa.select(c.c.seq, c.c.idx, c.c.verdict, c.c.count, c.c.total, c.c.threshold)
         .where(c.c.session_id == session_id, c.c.policy_id == policy_id).order_by(c.c.seq, c.c.idx))
    return [dict(r._mapping) for r in conn.execute(q)]


def stored_runs(conn: Connection, policy_id: str, session_ids: Sequence[int]) -> dict | None:
    """(session, run) → (outcome, halt_seq, saved) of a stored policy, or None if it is not stored."""
    if conn.execute(sa.select(t.policies.c.id).where(t.policies.c.id == policy_id)).first() is None:
        return None
    ro = t.run_outcomes.c
    q = sa.select(ro.session_id, ro.run_idx, ro.outcome, ro.halt_seq, ro.saved).where(
        ro.policy_id == policy_id, ro.session_id.in_(list(session_ids)))
    return {(r.session_id, r.run_idx): (r.outcome, r.halt_seq, r.saved) for r in conn.execute(q)}


def session_labels(conn: Connection, session_ids: Sequence[int]) -> dict[int, tuple[str, int | None, int | None]]:
    """session → (label, loop's first call, last call) for the given sessions: what Compare scores
    a setting against, per session, as the leaderboard does (unclear ones included: scoring
    leaves them out)."""
    lb = t.labels.c
    out: dict[int, tuple[str, int | None, int | None]] = {}
    ids = list(session_ids)
    for i in range(0, len(ids), 500):  # bounded IN lists
        q = (sa.select(lb.session_id, lb.label, lb.loop_first, lb.loop_last)
             .where(lb.session_id.in_(ids[i:i + 500])).order_by(lb.id))  # the newest label wins
        for r in conn.execute(q):
            out[int(r.session_id)] = (scoring.normalize_label(r.label), r.loop_first, r.loop_last)
    return out


# ── pure helpers ───────────────────────────────────────────────────────────────────────────────


def clip(text: str | None, limit: int = TEXT_LIMIT) -> str:
    text = text or ""
    return text if len(text) <= limit else text[:limit] + f"… [{len(text) - limit} more characters]"


def args_text(args: Any) -> str:
    """A call's arguments as indented JSON (a malformed raw string is shown as it came)."""
    if isinstance(args, str):
        return clip(args)
    try:
        return clip(json.dumps({} if args is None else args, indent=2, ensure_ascii=False, sort_keys=True))
    except (TypeError, ValueError):
        return clip(repr(args))


def verdict_index(steps: Sequence[Any]) -> dict[str, list[int]]:
    """Verdict → the sorted seqs of the steps carrying it (built once per session and policy)."""
    out: dict[str, list[int]] = {}
    for step in steps:
        for v in {c.verdict for c in step.checks}:
            out.setdefault(v, []).append(step.seq)
    return out


def next_seq_with(index: dict[str, list[int]], cursor: int, verdict: str, last: int | None = None) -> int | None:
    """The first step after `cursor` (up to `last`) where some check has `verdict`."""
    seqs = index.get(verdict, [])
    i = bisect.bisect_right(seqs, cursor)
    if i == len(seqs) or (last is not None and seqs[i] > last):
        return None
    return seqs[i]


def after_call(before: int | None) -> str:
    """Where an event that is not a call sits, in call numbers: "after call #4", "before the first call"."""
    if before is None:
        return ""
    return f"after call #{before}" if before > 0 else "before the first call"


def event_lines(seq: int, ev: Event, limit: int = 600, before: int | None = None) -> list[str]:
    """One event as plain lines for the transcript block (shown by st.code, never as markdown),
    each led by what it is — "call #12: …", "user (after call #11): …": calls by their one number.
    `before`: the calls the session made before this step, so each call reads as call #N (without
    it, a call is named by its place in its batch)."""
    at = f"({after_call(before)})" if before is not None else f"(step {seq})"
    if isinstance(ev, UserTurn):
        return [f"user {at}: {clip(ev.text, limit)}"]
    if isinstance(ev, Prose):
        return [f"assistant {at}: {clip(ev.text, limit)}"]
    if isinstance(ev, Retry):
        return [f"provider retry {at}: {clip(ev.text, limit)}"]
    if isinstance(ev, Batch):
        lines = [f"assistant {at}: {clip(ev.text, limit)}"] if ev.text else []
        for i, c in enumerate(ev.calls):
            args = args_text(c.args).replace("\n", " ")
            name = f"call #{before + i + 1}" if before is not None else f"call {i} (step {seq})"
            lines.append(f"{name}: {c.name} {clip(args, limit)}")
        return lines
    return [f"answer{' (error)' if a.is_error else ''} {at}: {clip(' '.join(a.text.split()), limit)}"
            for a in ev.answers]


def stops(events: Sequence[Event], steps: Sequence[Any]) -> list[int]:
    """The steps Replay's Forward and Back stop at: each batch of calls, and every other step a
    check judged (a prose turn, for stagnation) — never an answer or a user turn, where no guard
    says anything. Sorted seqs."""
    checked = {step.seq for step in steps if step.checks}
    return [seq for seq, ev in enumerate(events) if isinstance(ev, Batch) or seq in checked]


def next_stop(stop_seqs: Sequence[int], cursor: int, first: int, last: int, forward: bool = True) -> int | None:
    """The stop after (or before) `cursor` within [first, last], else None."""
    if forward:
        i = bisect.bisect_right(stop_seqs, cursor)
        return stop_seqs[i] if i < len(stop_seqs) and stop_seqs[i] <= last else None
    i = bisect.bisect_left(stop_seqs, cursor)
    return stop_seqs[i - 1] if i > 0 and stop_seqs[i - 1] >= first else None


def checks_table(step: Any, event: Event | None) -> list[dict[str, Any]]:
    """The checks at one step, with the tool name of the call each judges (its Why names a shell
    call by its command: explain.tool_words)."""
    names = [c.name for c in event.calls] if isinstance(event, Batch) else []
    words = [explain.tool_words(c.name, c.args) for c in event.calls] if isinstance(event, Batch) else []
    rows = []
    for c in step.checks:
        rows.append({
            "call": names[c.idx] if 0 <= c.idx < len(names) else ("batch" if names else "turn"),
            "verdict": c.verdict, "count": c.count, "total": c.total, "threshold": c.threshold,
            "reason": c.reason or "",
            # The tool(s) the check judged, for its Why sentence (a batch-level check: every call's).
            "tool": words[c.idx] if 0 <= c.idx < len(names) else ", ".join(dict.fromkeys(names)),
        })
    return rows


def call_word(idx: int) -> str:
    """A call index for people: "whole batch" for a batch-level verdict, never -1."""
    return "whole batch" if idx == -1 else str(idx)


def live_vs_stored(live_steps: Sequence[Any], stored: Sequence[dict[str, Any]],
                   first: int, last: int, before: Sequence[int]) -> list[dict[str, Any]]:
    """The calls of steps [first, last] where the live and the stored verdicts are not both plain
    allow, each named by its call number (`before`: calls before each step, as `call_ref` reads it)."""
    live: dict[tuple[int, int], str] = {}
    for step in live_steps:
        if first <= step.seq <= last:
            for c in step.checks:
                live[(step.seq, c.idx)] = c.verdict
    old = {(r["seq"], r["idx"]): r["verdict"] for r in stored if first <= r["seq"] <= last}
    rows = []
    for key in sorted(set(live) | set(old)):
        a, b = live.get(key, "—"), old.get(key, "—")
        if a == b == vocab.ALLOW:
            continue
        call = call_ref(before, key[0], key[1]) + (" (whole batch)" if key[1] == -1 else "")
        rows.append({"call": call, "live": a, "stored": b, "differs": a != b})
    return rows


def replay_link(session_id: int, run_idx: int | None = None, policy: str | None = None,
                step: int | None = None) -> str:
    """A relative deep link to the Replay page (what Compare's flipped-runs table links to)."""
    q: dict[str, Any] = {"session": session_id}
    if run_idx is not None:
        q["run"] = run_idx
    if policy:
        q["policy"] = policy
    if step is not None:
        q["step"] = step
    return "./replay?" + urlencode(q)


def halts_by_run(steps: Sequence[Any]) -> dict[int, int]:
    """run → the step of its first halt (runs without a halt are absent)."""
    out: dict[int, int] = {}
    for step in steps:
        if step.run not in out and any(c.verdict == vocab.HALT for c in step.checks):
            out[step.run] = step.seq
    return out


def halt_change(old: dict[int, int], new: dict[int, int], run: int,
                ref: Callable[[int], str] = lambda seq: f"step {seq}") -> str:
    """What Apply changed, said in one line: the halt of `run` before and after, and if the run
    no longer halts, where the next halt is ("no halt in this run any more; the next one is in run #13").
    `ref` words a halt's step (the page passes call_ref: "call #N (step S)")."""
    def nxt() -> str:
        later = sorted(r for r in new if r > run) or sorted(new)
        if not later:
            return "no run of this session halts under these parameters"
        r = later[0]
        return f"the next one is in {explain.run_ref(r)} ({ref(new[r])})"

    before, after = old.get(run), new.get(run)
    if before is not None and after is not None:
        line = (f"it still halts at {ref(after)}, the same call as before" if before == after
                else f"halt moved from {ref(before)} to {ref(after)}")
    elif before is not None:
        line = f"no halt in this run any more (it was at {ref(before)}); {nxt()}"
    elif after is not None:
        line = f"this run now halts at {ref(after)} (it did not before)"
    else:
        line = f"this run halts neither before nor after; {nxt()}"
    return f"{explain.run_ref(run).capitalize()}: {line}. Halted runs in this session: {len(old)} → {len(new)}."


def applied_already(label: str, halts: dict[int, int], run: int,
                    ref: Callable[[int], str] = lambda seq: f"step {seq}") -> str:
    """What Apply says when the parameters are those applied already (Enter in a parameter applies
    them; the Apply click after it changes nothing): what is applied and where it halts, never
    "unchanged" as if the edit had done nothing."""
    where = (f"{explain.run_ref(run)} halts at {ref(halts[run])}" if run in halts
             else f"{explain.run_ref(run)} does not halt")
    return f"Applied: {label}. {where[0].upper()}{where[1:]}; halted runs in this session: {len(halts)}."


def call_ref(before: Sequence[int], seq: int, idx: int = 0) -> str:
    """"call #N": N 1-based over the session, counted as labels and the leaderboard count
    (loopledger.analysis.scoring.call_position; a batch-level check is its batch's first call)."""
    n = before[seq] if 0 <= seq < len(before) else None
    return explain.call_ref(None if n is None else n + max(idx, 0) + 1, seq)


def call_at(before: Sequence[int], events: Sequence[Event], seq: int) -> int:
    """The call number the cursor at `seq` stands on: a batch's first call; any other event, the
    last call before it (the first call when there is none yet)."""
    return before[seq] + 1 if isinstance(events[seq], Batch) or before[seq] == 0 else before[seq]


def seq_of_call(before: Sequence[int], number: int) -> int:
    """The step (event) of the batch holding call #`number`: the event before the first step whose
    count of earlier calls reaches it (only a batch adds calls)."""
    return max(0, bisect.bisect_left(before, number) - 1)


def neighbour_halt(halt_seqs: Sequence[int], cursor: int, forward: bool = True) -> int | None:
    """The halt step after (or before) `cursor` anywhere in the session, across runs."""
    if forward:
        i = bisect.bisect_right(halt_seqs, cursor)
        return halt_seqs[i] if i < len(halt_seqs) else None
    i = bisect.bisect_left(halt_seqs, cursor)
    return halt_seqs[i - 1] if i > 0 else None


def spec_label(spec: Any) -> str:
    """A spec's label with the dashboard's one word for an unset limit."""
    return " ".join(part.replace("=none", f"={explain.NO_LIMIT}") for part in spec.label.split(" "))
