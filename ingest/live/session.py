"""Live enforcement: the enforced policy judging a running agent's calls, one event at a time,
and every decision written to the ledger as enforced (not replayed).

The hooks (loopledger.live.hooks), `loopledger guard` (loopledger.live.guard_server) and the Python API
(loopledger.guards.LiveGuard) all go through `LiveSession` for the deciding and `record_*` for
the ledger. Deciding is the replay engine's own walk (loopledger.replay.Driver), fed the events
the agent reports in arrival order: a tool call is a batch of one call, its result an Answers
event, a prompt a user turn. So a live session of single calls gets exactly the verdicts the
same policy's replay gives its transcript (parallel calls are judged one by one as they arrive).

Live semantics (design.md, "ladder"): warn lets the call run and adds a notice to its result;
block refuses the call and stands in a synthetic error result for it (one result per call id);
halt refuses it and stops the agent, history kept; calls after a halt in the same run are
refused the same way (`after_halt`) until the next user turn.

Redaction: everything an agent reports enters here (`call`, `answer`, `user`) and passes
loopledger.redact before it is judged, stored or answered, as ingest redacts a transcript: secrets
become `[REDACTED:<kind>]`, values nested past redact.MAX_DEPTH a marker. So the hooks, `guard`
and LiveGuard cannot store a key, and the live verdicts judge what a replay of the ledger judges.

State between processes (every hook event is a new process): the session's live events are
stored (`live_events`), and after each save the policy's state — the replay engine's driver —
is sealed into `live_states` with the same signed, versioned snapshots the worker resumes
appended transcripts from (loopledger.snapshots). A hook loads that snapshot when it is current
(its seq is the next live event's) and replays the stored live events only when it is absent,
stale or not ours; so an event costs the same on the 1,000th call as on the first. The write
lock (SQLite BEGIN IMMEDIATE, a PostgreSQL row lock on the session) is held from loading to
saving, so two hook processes of one session never lose or double-count a call.
"""

from __future__ import annotations

import os
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

import orjson
from loopledger import vocab
from loopledger.detectors.canonical import call_key, canonical_bytes, digest, remember_key
from loopledger.detectors.policy import PolicySpec
from loopledger.events import Answer, Answers, Batch, Call, Event, UserTurn, text_digest
from loopledger.ledger.caps import DEFAULT_MAX_TEXT, cap_text, is_capped
from loopledger.live.db import LiveDB, sql
from loopledger.live.enforce import enforced_or_default, ensure_policy
from loopledger.redact import redact_text, redact_value
from loopledger.replay import Driver, PolicySet
from loopledger.snapshots import seal, unseal, version_of

KIND_CALL, KIND_ANSWER, KIND_USER = "call", "answer", "user"
# Who asked for a live decision (enforced_checks.origin); not where an enforcement was set
# (loopledger.live.enforce.ENFORCED_FROM).
DECIDED_FOR = ("claude-code", "gemini-cli", "codex", "opencode", "guard", "python")
AGENT_ORIGINS = ("claude-code", "gemini-cli", "codex", "opencode")  # origins that are an agent's name
REFUSED = (vocab.BLOCK, vocab.HALT, vocab.AFTER_HALT)
ARGS_TRUNCATED_KEY = "$loopledger_truncated_args"  # as loopledger.ledger.store reads capped args
# The longest call id, tool name, session key or agent a team's receiver takes
# (loopledger.receive.forwarded.MAX_KEY is this): what the hooks store is within it, so a
# forwarded session is never refused for a value its own laptop stored.
MAX_ID = 512


def stored_id(value: str | None) -> str | None:
    """`value` as it is stored and forwarded: itself up to MAX_ID characters, else its start and
    a digest of the whole (so two long ids that share a start stay two)."""
    if value is None or len(value) <= MAX_ID:
        return value
    return value[:MAX_ID - 18] + "…#" + text_digest(value)[:16]


@dataclass(frozen=True, slots=True)
class Decision:
    """The enforced policy's verdict on one live call, and the words an agent shows for it."""

    verdict: str  # allow | warn | block | halt | after_halt
    tool: str = ""
    call_id: str | None = None
    reason: str = ""
    count: int | None = None
    threshold: int | None = None
    policy: str = ""  # the deciding policy's label (of a set: the member whose verdict it is)
    seq: int = -1  # the call's live event number in its session
    policy_id: str = ""  # the deciding policy's id (its enforced_checks row)

    @property
    def refused(self) -> bool:
        """The call must not run (block, halt, or a call after a halt)."""
        return self.verdict in REFUSED

    @property
    def stops(self) -> bool:
        """The agent must stop (halt, or a call after a halt in the same run)."""
        return self.verdict in (vocab.HALT, vocab.AFTER_HALT)

    def message(self) -> str:
        """What the model reads (block, warn) or the person sees (halt); "" for allow."""
        why = self.reason or f"{self.tool} repeated"
        policy = self.policy.split(" ", 1)[0]  # the detector: the full label is in the ledger
        if policy == "ladder" and self.verdict in (vocab.WARN, vocab.BLOCK):
            # Seed 002 fixes the words its runtime gives the model on these two rungs: keep them
            # verbatim after our prefix, so a port of its agent loop reads what it expects.
            from loopledger.detectors.ladder import BLOCK_MESSAGE, WARN_NOTICE
            if self.verdict == vocab.WARN:
                return f"LoopLedger warning ({policy}): {why}. {WARN_NOTICE}"
            return f"LoopLedger blocked this {self.tool} call ({policy}): {why}. {BLOCK_MESSAGE}"
        if self.verdict == vocab.WARN:
            return (f"LoopLedger warning ({policy}): {why}. This call keeps coming back; if its "
                    "result is not changing, try a different approach instead of repeating it.")
        if self.verdict == vocab.BLOCK:
            return (f"LoopLedger blocked this {self.tool} call ({policy}): {why}. It was not run. "
                    "Repeating the same call will not change its result; change the approach or ask the user.")
        if self.stops:
            return (f"LoopLedger halted the agent ({policy}): {why}. The {self.tool} call was not run; "
                    "the conversation is kept. Send a new message to continue.")
        return ""

    def as_json(self) -> dict[str, Any]:
        return {"verdict": self.verdict, "tool": self.tool, "id": self.call_id, "reason": self.reason,
                "message": self.message(), "count": self.count, "threshold": self.threshold,
                "policy": self.policy}


@dataclass(slots=True)
class _Row:
    kind: str
    at: float
    call_id: str | None = None
    tool: str | None = None
    args: str | None = None
    text: str | None = None
    text_hash: str | None = None
    is_error: bool | None = None
    decision: Decision | None = None
    elapsed_ms: float | None = None


def set_id(specs: Sequence[PolicySpec]) -> str:
    """The key a session's live state is stored under: the policy's id for one policy (as
    before sets existed), a digest of the members' ids, in order, for a set."""
    if len(specs) == 1:
        return specs[0].id
    return digest(canonical_bytes({"set": [sp.id for sp in specs]}))


def _version(policy: Any) -> str:
    if isinstance(policy, PolicySet):  # the code of every member, plugins too
        return digest(canonical_bytes([version_of(m.policy) for m in policy.members]))
    return version_of(policy)


@dataclass
class LiveSession:
    """One session's enforced policies (one, or a set) and the events fed to them so far.

    `call`, `answer` and `user` feed one event each; the rows they add wait in `unsaved` until
    `save` writes them (or forever, for a guard without a ledger). A set decides each call by
    its most severe member verdict (loopledger.replay.PolicySet); the decision names that member."""

    specs: tuple[PolicySpec, ...]
    seq: int = 0  # the next live event's number
    unsaved: list[tuple[int, _Row]] = field(default_factory=list)
    _driver: Any = None
    _step: int = 0  # events fed to the driver (its seq numbering)

    def __post_init__(self) -> None:
        if isinstance(self.specs, PolicySpec):
            self.specs = (self.specs,)
        self.specs = tuple(self.specs)
        self._driver = Driver(PolicySet.of(self.specs))

    @property
    def spec(self) -> PolicySpec:
        """The first (for one policy: the) enforced policy."""
        return self.specs[0]

    @property
    def key(self) -> str:
        return set_id(self.specs)

    def _decider(self, index: int) -> PolicySpec:
        policy = self._driver.policy
        if isinstance(policy, PolicySet) and index < len(policy.decided_by):
            return self.specs[policy.decided_by[index]]
        return self.specs[0]

    # ── feeding ─────────────────────────────────────────────────────────────────────────────

    def _feed(self, event: Event) -> Any:
        step = self._driver.feed(self._step, event)
        self._step += 1
        return step

    def _add(self, row: _Row) -> int:
        seq = self.seq
        self.unsaved.append((seq, row))
        self.seq += 1
        return seq

    def call(self, tool: str, args: Any, call_id: str | None = None, at: float | None = None,
             started: float | None = None) -> Decision:
        """Judge one tool call before it runs; a refused call gets its synthetic error result."""
        tool = stored_id(redact_text(str(tool or ""))) or ""
        stored = stored_id(call_id)  # the Decision keeps `call_id`: the caller matches its verdict by it
        c = Call(stored, tool, redact_value(args) if args is not None else {})
        at = time.time() if at is None else at
        step = self._feed(Batch((c,), ts=at))  # a wait is judged by the clock
        check = step.checks[0] if step.checks else None
        canon, digest = call_key(c)
        seq = self.seq
        decider = self._decider(0) if check else self.spec
        d = Decision(check.verdict if check else vocab.ALLOW, tool, call_id, (check.reason or "") if check else "",
                     check.count if check else None, check.threshold if check else None, decider.label, seq,
                     decider.id)
        elapsed = (time.perf_counter() - started) * 1000 if started is not None else None
        self._add(_Row(KIND_CALL, at, stored, tool, cap_text(canon.decode("utf-8", "surrogatepass"),
                                                             DEFAULT_MAX_TEXT, digest), None, digest,
                       None, d, elapsed))
        if d.refused:
            # The agent will not run it: its result is our refusal (design.md: one result per id).
            self.answer(call_id, d.message(), True, at)
        return d

    def answer(self, call_id: str | None, text: str, is_error: bool = False, at: float | None = None) -> None:
        """A call's result came back (result-aware policies judge it)."""
        text = redact_text(_text(text))
        call_id = stored_id(call_id)
        a = Answer(call_id, text, bool(is_error))
        self._feed(Answers((a,)))
        self._add(_Row(KIND_ANSWER, time.time() if at is None else at, call_id, None, None,
                       cap_text(text, DEFAULT_MAX_TEXT, a.digest), a.digest, bool(is_error)))

    def user(self, text: str = "", at: float | None = None) -> None:
        """The person spoke: a new run, every policy starts fresh."""
        text = redact_text(_text(text))
        self._feed(UserTurn(text))
        self._add(_Row(KIND_USER, time.time() if at is None else at, text=cap_text(text, DEFAULT_MAX_TEXT),
                       text_hash=text_digest(text)))

    # ── the seam to stored state ─────────────────────────────────────────────────────────────

    def replay(self, rows: Iterable[Sequence[Any]]) -> None:
        """Rebuild the state from stored live events (kind, call_id, tool, args, text, text_hash,
        is_error), oldest first, without adding rows."""
        for event in events_of(rows):
            if event is not None:
                self._feed(event)
            self.seq += 1


def events_of(rows: Iterable[Sequence[Any]]) -> Iterable[Event | None]:
    """The engine's events for stored live events (kind, call_id, tool, args, text, text_hash,
    is_error[, at]), one per row (None for a kind it does not know): a call is a batch of one
    call, an answer an Answers, a prompt a user turn; `at` (unix time), when given, their time.
    The live state replays these; the team's receiver builds a forwarded session from them
    (loopledger.receive.forwarded)."""
    for kind, call_id, tool, args, text, text_hash, is_error, *at in rows:
        ts = _iso(at[0]) if at and at[0] is not None else None
        if kind == KIND_CALL:
            call = Call(call_id, tool, _parse_args(args, text_hash))
            if args is not None and text_hash and not is_capped(args):
                remember_key(call, args.encode("utf-8", "surrogatepass"), text_hash)
            yield Batch((call,), ts=ts)
        elif kind == KIND_ANSWER:
            yield Answers((Answer(call_id, text or "", bool(is_error), ts, text_hash or ""),))
        elif kind == KIND_USER:
            yield UserTurn(text or "", ts=ts)
        else:
            yield None


def _iso(at: float) -> str:
    """A unix time as the readers write times (ISO 8601 UTC, milliseconds)."""
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(at)) + f".{int(at * 1000) % 1000:03d}Z"


def _parse_args(args: str | None, digest: str | None) -> Any:
    if args is None:
        return {}
    if is_capped(args):
        return {ARGS_TRUNCATED_KEY: digest}
    try:
        return orjson.loads(args)
    except orjson.JSONDecodeError:  # integers beyond 64 bits: valid JSON orjson refuses
        import json

        return json.loads(args)


def _text(value: Any) -> str:
    """A reported value as text (non-strings as sorted JSON), never deeper than redact.MAX_DEPTH:
    a deep value must cost that value, not the agent's call."""
    if value is None:
        return ""
    if isinstance(value, str):
        return value
    value = redact_value(value, secrets=False)  # the secrets go with the text, in the caller
    try:
        return orjson.dumps(value, option=orjson.OPT_SORT_KEYS).decode()
    except TypeError:
        return str(value)


# ── the ledger ───────────────────────────────────────────────────────────────────────────────


def source_path(origin: str, key: str, transcript_path: str | None) -> str:
    """The source a live session belongs to: its transcript file (as the worker names files:
    absolute, not resolved), or a `live:` name for an agent without one."""
    if transcript_path:
        return os.path.abspath(os.path.expanduser(transcript_path))
    return f"live:{origin}:{key}"


def attach(conn: Any, origin: str, key: str, transcript_path: str | None = None,
           fmt: str | None = None) -> int:
    """The ledger session of a live session: the one the transcript reader gives its file (same
    source path, same key), created empty if the file was not ingested yet; the worker fills
    it in when it reads the file. Returns the session id."""
    path = source_path(origin, key, transcript_path)
    conn.exec_driver_sql(sql(conn, "INSERT INTO sources (path, size, byte_offset, status) VALUES (?, 0, 0, 'new') "
                                   "ON CONFLICT (path) DO NOTHING"), (path,))
    source_id = conn.exec_driver_sql(sql(conn, "SELECT id FROM sources WHERE path = ?"), (path,)).fetchone()[0]
    conn.exec_driver_sql(sql(conn,
        "INSERT INTO sessions (source_id, key, format, title, agent, n_events, n_runs, n_calls, updated_at) "
        "VALUES (?, ?, ?, '', ?, 0, 0, 0, ?) ON CONFLICT (source_id, key) DO NOTHING"),
        (source_id, key, fmt or origin, origin if origin in AGENT_ORIGINS else None, time.time()))
    return conn.exec_driver_sql(sql(conn, "SELECT id FROM sessions WHERE source_id = ? AND key = ?"),
                                (source_id, key)).fetchone()[0]


def load(conn: Any, session_id: int, spec: PolicySpec | Sequence[PolicySpec] | None = None) -> LiveSession:
    """The session's live state under `spec` (one policy or a set; default: what is enforced,
    loopledger.live.enforce.enforced_or_default): its sealed snapshot when that is current, else
    a replay of its stored live events. Hold the write lock (LiveDB.begin_write +
    lock_session) until `save`. enforce.NotRegistered when an enforced stored policy's detector
    is not registered here (the callers allow the call)."""
    live = LiveSession(spec or enforced_or_default(conn))
    row = conn.exec_driver_sql(sql(conn, "SELECT seq, version, state FROM live_states "
                                         "WHERE session_id = ? AND policy_id = ?"), (session_id, live.key)).fetchone()
    if row is not None and row[0] == next_seq(conn, session_id):
        state = unseal(row[2], row[1]) if row[1] == _version(live._driver.policy) else None
        if state is not None:
            live._driver, live._step = state
            live.seq = row[0]
            return live
    live.replay(conn.exec_driver_sql(sql(conn,
        "SELECT kind, call_id, tool, args, text, text_hash, is_error, at FROM live_events "
        "WHERE session_id = ? ORDER BY seq"), (session_id,)))
    return live


def next_seq(conn: Any, session_id: int) -> int:
    row = conn.exec_driver_sql(sql(conn, "SELECT MAX(seq) FROM live_events WHERE session_id = ?"),
                               (session_id,)).fetchone()
    return 0 if row is None or row[0] is None else row[0] + 1


def save(conn: Any, session_id: int, live: LiveSession, origin: str) -> None:
    """Write the rows `live` added since the last save: events, and each call's decision as an
    enforced check of the live policy."""
    if not live.unsaved:
        return
    events, checks = [], []
    for seq, r in live.unsaved:
        events.append((session_id, seq, r.kind, r.at, r.call_id, r.tool, r.args, r.text, r.text_hash, r.is_error))
        d = r.decision
        if d is not None:
            checks.append((session_id, seq, d.policy_id or live.spec.id, origin, stored_id(d.call_id), d.tool, d.verdict,
                           d.count, d.threshold, d.reason or None, r.at, r.elapsed_ms))
    ev_sql = sql(conn, "INSERT INTO live_events (session_id, seq, kind, at, call_id, tool, args, text, text_hash, "
                       "is_error) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)")
    ck_sql = sql(conn, "INSERT INTO enforced_checks (session_id, seq, policy_id, origin, call_id, tool, verdict, "
                       "count, threshold, reason, at, elapsed_ms) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)")
    if checks:
        for spec in live.specs:
            ensure_policy(conn, spec)
    if isinstance(conn, LiveDB):  # the DB-API cursor's executemany
        cur = conn.raw.cursor()
        cur.executemany(ev_sql, events)
        if checks:
            cur.executemany(ck_sql, checks)
    else:  # a SQLAlchemy Connection: a list of tuples is an executemany there too
        conn.exec_driver_sql(ev_sql, events)
        if checks:
            conn.exec_driver_sql(ck_sql, checks)
    live.unsaved.clear()
    version = _version(live._driver.policy)
    blob = seal((live._driver, live._step), version)
    if blob is None:  # unpicklable state (e.g. arguments nested beyond pickle's reach): replay next time
        conn.exec_driver_sql(sql(conn, "DELETE FROM live_states WHERE session_id = ? AND policy_id = ?"),
                             (session_id, live.key))
        return
    conn.exec_driver_sql(sql(conn,
        "INSERT INTO live_states (session_id, policy_id, seq, version, state) VALUES (?, ?, ?, ?, ?) "
        "ON CONFLICT (session_id, policy_id) DO UPDATE SET seq = excluded.seq, version = excluded.version, "
        "state = excluded.state"), (session_id, live.key, live.seq, version, blob))


def recorded_since(conn: Any, session_id: int, since: float, kind: str, call_id: str | None, *,
                   tool: Any = None, args: Any = None, text: Any = None, is_error: bool = False) -> int | None:
    """The seq of this very event if it was stored at or after `since` (None: it was not). For
    a hook whose resident died after receiving the event (loopledger.live.hook_client): the
    resident may have committed it before dying, and then the hook must answer what it decided
    instead of recording the event a second time. Matched as `call` / `answer` would store it:
    the call id, and the call's canonical arguments or the result's text and error flag."""
    call_id = stored_id(call_id)
    if kind == KIND_CALL:
        c = Call(call_id, stored_id(redact_text(str(tool or ""))) or "", redact_value(args) if args is not None else {})
        digest, extra, params = call_key(c)[1], "", ()
    else:
        digest = Answer(call_id, redact_text(_text(text))).digest
        extra, params = " AND is_error = ?", (bool(is_error),)
    same_id = "call_id = ?" if call_id is not None else "call_id IS NULL"
    row = conn.exec_driver_sql(sql(conn,
        f"SELECT seq FROM live_events WHERE session_id = ? AND kind = ? AND at >= ? AND text_hash = ? AND {same_id}"
        f"{extra} ORDER BY seq DESC LIMIT 1"),
        (session_id, kind, since, digest, *((call_id,) if call_id is not None else ()), *params)).fetchone()
    return None if row is None else row[0]


def decision_at(conn: Any, session_id: int, seq: int) -> Decision | None:
    """The enforced decision on the call stored as live event `seq`."""
    return _decision(conn, "SELECT verdict, tool, call_id, reason, count, threshold, seq, policy_id FROM enforced_checks "
                           "WHERE session_id = ? AND seq = ?", (session_id, seq))


def decision_of(conn: Any, session_id: int, call_id: str | None, tool: str | None = None) -> Decision | None:
    """The enforced decision on a call, by its id (or, for agents without call ids, the newest
    decision on a call of `tool`)."""
    if call_id is not None:
        q, params = "SELECT verdict, tool, call_id, reason, count, threshold, seq, policy_id FROM enforced_checks " \
                    "WHERE session_id = ? AND call_id = ? ORDER BY seq DESC LIMIT 1", (session_id, stored_id(call_id))
    else:
        q, params = "SELECT verdict, tool, call_id, reason, count, threshold, seq, policy_id FROM enforced_checks " \
                    "WHERE session_id = ? AND tool = ? ORDER BY seq DESC LIMIT 1", (session_id, tool or "")
    return _decision(conn, q, params)


def _decision(conn: Any, q: str, params: tuple[Any, ...]) -> Decision | None:
    row = conn.exec_driver_sql(sql(conn, q), params).fetchone()
    if row is None:
        return None
    label = conn.exec_driver_sql(sql(conn, "SELECT label FROM policies WHERE id = ?"), (row[7],)).fetchone()
    return Decision(row[0], row[1], row[2], row[3] or "", row[4], row[5], label[0] if label else "", row[6])
