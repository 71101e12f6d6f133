"""POST /v1/live: the live events and decisions a member's guard forwards (loopledger.live.forward),
written into the team ledger under that member, and the member told what the team enforces.

The token names the member (loopledger.ledger.team; the `Door` below); a request without a
member's token is refused. Everything in a batch is text from outside and passes the one
redaction point again before it is stored. Rows are inserted by (session, seq), ignoring what is
there already, so a batch sent twice (its answer lost) is stored once; the answer is given after
the commit (the forwarder moves its cursor only then), so an acknowledged batch is in the ledger.
Unlike spans, the answer waits on the ledger: the sender is the member's background forwarder,
never the agent.

Each session a batch touches is then rebuilt from all its stored live events (the same events a
live guard replays, loopledger.live.session.events_of) and judged by the receiver's policies,
as `ingest` judges a transcript: so a forwarded session has calls, runs, checks and stats on
every page, and its enforced decisions sit beside the replayed verdicts on the Session page.
The source is `team:MEMBER/AGENT/DIGEST` (a digest of the member's transcript path, never the
path); `sessions.member` is the member's email, what the Sessions page filters by.
"""

from __future__ import annotations

import hmac
import threading
import time
from typing import Any

import orjson
import sqlalchemy as sa
from loopledger import vocab, worker
from loopledger.detectors.canonical import canonical_bytes, digest
from loopledger.events import SessionInfo, text_digest
from loopledger.ledger import schema as t
from loopledger.ledger import store, team
from loopledger.live import enforce
from loopledger.live import session as live
from loopledger.redact import redact_text
from sqlalchemy.engine import Engine

DOOR_CACHE_S = 1.0  # how long "the ledger never held a token" (an open door) is believed before it is asked again
MAX_KEY = live.MAX_ID  # longest session key, agent, digest, call id or tool a batch may name (a laptop stores within it)
KINDS = (live.KIND_CALL, live.KIND_ANSWER, live.KIND_USER)
EVENT_FIELDS, CHECK_FIELDS = 9, 13


class BadBatch(ValueError):
    """The body is not a forwarded batch; the message says why (HTTP 400)."""


# ── the door ─────────────────────────────────────────────────────────────────────────────────


def bearer(header: str | None) -> str | None:
    scheme, _, given = (header or "").partition(" ")
    return given.strip() if scheme.lower() == "bearer" and given.strip() else None


class DoorUnchecked(Exception):
    """The ledger could not be asked who may send: the request is refused (HTTP 503, Retry-After),
    never let in on a guess."""


class Door:
    """Who may send: the receiver's own `--token` (no member), a member's token (their email),
    or — only while the door is open — anyone. It is open only on loopback, without `--token`,
    while the ledger has never held a member's token; it closes for the receiver's whole life
    the moment the ledger is seen holding one (a revoked one counts: revoking the last token, or
    removing the last member, leaves it closed), and starts closed when the receiver listens
    beyond loopback or the ledger held tokens at start (`closed=True`). Only "the ledger has never
    held a token" is believed for DOOR_CACHE_S; a closed door is never asked about again. A door
    the ledger cannot answer for refuses (DoorUnchecked); a member token that is unknown or
    revoked is refused."""

    def __init__(self, shared: str | None, reader: Engine, closed: bool = False) -> None:
        self.shared = shared
        self.reader = reader
        self._closed = bool(closed or shared)  # once True, never False again
        self._open_at = -1e9  # when the ledger last said it has never held a token
        self._lock = threading.Lock()

    def closed(self) -> bool:
        """Whether a token is needed; DoorUnchecked when the ledger cannot say (never "open")."""
        with self._lock:
            if self._closed:
                return True
            if time.monotonic() - self._open_at < DOOR_CACHE_S:
                return False
        try:
            with self.reader.connect() as conn:
                held = team.ever_token(conn)
        except sa.exc.SQLAlchemyError as exc:
            raise DoorUnchecked(f"the ledger cannot say who may send: {type(exc).__name__}") from None
        with self._lock:
            if held:
                self._closed = True
            else:
                self._open_at = time.monotonic()
            return self._closed

    def needs_ledger(self, header: str | None) -> bool:
        """Whether `check` may read the ledger (then run it off the event loop): a member's token
        to look up, or "is the door closed?" not asked for DOOR_CACHE_S."""
        given = bearer(header)
        if given is not None and given.startswith(team.TOKEN_PREFIX):
            return True
        with self._lock:
            return not self._closed and time.monotonic() - self._open_at >= DOOR_CACHE_S

    def check(self, header: str | None) -> tuple[bool, str | None]:
        """(allowed, the member's email or None); DoorUnchecked when the ledger cannot answer."""
        given = bearer(header)
        if given is not None and self.shared and hmac.compare_digest(given.encode(), self.shared.encode()):
            return True, None
        if given is not None and given.startswith(team.TOKEN_PREFIX):
            try:
                with self.reader.connect() as conn:
                    member = team.member_of_token(conn, given)
            except sa.exc.SQLAlchemyError as exc:
                raise DoorUnchecked(f"the ledger cannot say whose token this is: {type(exc).__name__}") from None
            if member is not None:
                with self._lock:
                    self._closed = True  # a live member token: the ledger holds tokens
            return (member is not None), member
        return (not self.closed()), None


# ── the batch ────────────────────────────────────────────────────────────────────────────────


def _text(value: Any, what: str, limit: int | None = None) -> str | None:
    if value is None:
        return None
    if not isinstance(value, str) or (limit is not None and len(value) > limit):
        raise BadBatch(f"{what} must be a string{f' of at most {limit} characters' if limit else ''}")
    # PostgreSQL's text cannot hold NUL (a binary file's `cat` has them): replaced on arrival, on
    # both backends, so a team ledger holds the same whichever it is and such a batch is stored,
    # not answered 503 for ever.
    return redact_text(value.replace("\x00", "\ufffd"))


def _num(value: Any, what: str, kind: type = float) -> Any:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float) or (kind is int and not isinstance(value, int)):
        raise BadBatch(f"{what} must be a number")
    return kind(value)


def _rehash(original: str | None, redacted: str | None, kept: Any) -> str | None:
    """The digest beside a text: the member's, unless redaction here changed the text."""
    if redacted is None or redacted == original:
        return kept if isinstance(kept, str) and len(kept) <= 64 else (text_digest(redacted) if redacted else None)
    return text_digest(redacted)


def event_row(sid: int, raw: Any, where: str) -> tuple:
    if not isinstance(raw, list) or len(raw) != EVENT_FIELDS:
        raise BadBatch(f"{where}: an event is a list of {EVENT_FIELDS} values")
    seq, kind, at, call_id, tool, args, text, text_hash, is_error = raw
    if kind not in KINDS:
        raise BadBatch(f"{where}: kind {kind!r} is not one of {', '.join(KINDS)}")
    seq = _num(seq, f"{where}: seq", int)
    if seq is None or seq < 0:
        raise BadBatch(f"{where}: seq must be a number ≥ 0")
    args_r, text_r = _text(args, f"{where}: args"), _text(text, f"{where}: text")
    if kind == live.KIND_CALL:  # a call's digest is its canonical arguments'
        digest_ = (digest(args_r.encode("utf-8", "surrogatepass")) if args_r is not None and args_r != args
                   else text_hash if isinstance(text_hash, str) and len(text_hash) <= 64 else None)
    else:
        digest_ = _rehash(text, text_r, text_hash)
    return (sid, seq, kind, _num(at, f"{where}: at") or 0.0, _text(call_id, f"{where}: call_id", MAX_KEY),
            _text(tool, f"{where}: tool", MAX_KEY), args_r, text_r, digest_,
            None if is_error is None else bool(is_error))


def _policy_id(conn: Any, detector: str, params: str, label: str) -> str:
    """The team ledger's id for a member's policy: the digest of its spec, computed here (a
    member cannot name an id that stands for another policy), stored if new."""
    try:
        spec = enforce.spec_of_row(detector, params)
    except ValueError as exc:  # not JSON (orjson's), or parameters the detector refuses (ConfigError)
        raise BadBatch(f"policy {label!r}: {exc}") from None
    except enforce.NotRegistered:  # a plugin not installed here: stored as the member named it
        value = orjson.loads(params)
        pid = digest(canonical_bytes({"detector": detector, "params": value}))
        store.insert_ignore(conn, t.policies, [{"id": pid, "detector": detector, "params": canonical_bytes(value).decode(),
                                                "label": label, "is_default": False, "created_at": time.time()}])
        return pid
    enforce.ensure_policy(conn, spec)
    return spec.id


def check_row(conn: Any, sid: int, raw: Any, where: str, policies: dict[tuple, str]) -> tuple:
    if not isinstance(raw, list) or len(raw) != CHECK_FIELDS:
        raise BadBatch(f"{where}: a decision is a list of {CHECK_FIELDS} values")
    seq, origin, call_id, tool, verdict, count, threshold, reason, at, elapsed, detector, params, label = raw
    if verdict not in vocab.VERDICTS:
        raise BadBatch(f"{where}: verdict {verdict!r} is not one of {', '.join(vocab.VERDICTS)}")
    key = (_text(detector, f"{where}: detector", 200), _text(params, f"{where}: params"),
           _text(label, f"{where}: label") or "")
    if key[0] is None or key[1] is None:
        raise BadBatch(f"{where}: a decision names its policy's detector and parameters")
    if key not in policies:
        policies[key] = _policy_id(conn, *key)
    origin = origin if origin in live.DECIDED_FOR else "forwarded"
    return (sid, _num(seq, f"{where}: seq", int), policies[key], origin, _text(call_id, f"{where}: call_id", MAX_KEY),
            _text(tool, f"{where}: tool", MAX_KEY) or "", verdict, _num(count, f"{where}: count", int),
            _num(threshold, f"{where}: threshold", int), _text(reason, f"{where}: reason"),
            _num(at, f"{where}: at") or 0.0, _num(elapsed, f"{where}: elapsed_ms"))


def parse(body: bytes) -> list[dict[str, Any]]:
    try:
        value = orjson.loads(body)
    except orjson.JSONDecodeError as exc:
        raise BadBatch(f"the body is not JSON ({exc})") from None
    if not isinstance(value, dict) or not isinstance(value.get("sessions"), list):
        raise BadBatch('a forwarded batch is a JSON object with a "sessions" list')
    for i, s in enumerate(value["sessions"]):
        if not isinstance(s, dict) or not isinstance(s.get("events"), list) or not isinstance(s.get("checks", []), list):
            raise BadBatch(f"sessions[{i}] needs an events list (and a checks list)")
        for name in ("key", "agent", "source"):
            if not isinstance(s.get(name), str) or not s[name] or len(s[name]) > MAX_KEY:
                raise BadBatch(f"sessions[{i}].{name} must be a non-empty string of at most {MAX_KEY} characters")
    return value["sessions"]


def _attach(conn: Any, member: str, s: dict[str, Any]) -> tuple[int, int, str, str]:
    """(source id, session id, key, agent) of a member's forwarded session, made if new."""
    agent, key = redact_text(s["agent"]), redact_text(s["key"])
    path = f"team:{member}/{agent}/{redact_text(s['source'])}"
    store.insert_ignore(conn, t.sources, [{"path": path, "format": agent, "size": 0, "byte_offset": 0,
                                           "status": "ok", "ingested_at": time.time()}])
    source_id = conn.execute(sa.select(t.sources.c.id).where(t.sources.c.path == path)).scalar_one()
    store.insert_ignore(conn, t.sessions, [{"source_id": source_id, "key": key, "format": agent, "title": "",
                                            "agent": agent, "member": member, "updated_at": time.time()}])
    sid = conn.execute(sa.select(t.sessions.c.id).where(t.sessions.c.source_id == source_id,
                                                        t.sessions.c.key == key)).scalar_one()
    return source_id, sid, key, agent


def _rebuild(conn: Any, source_id: int, sid: int, key: str, agent: str, member: str, opts: worker.Options) -> None:
    """The session's rows from all its live events, judged by the receiver's policies."""
    le = t.live_events.c
    rows = conn.execute(sa.select(le.kind, le.call_id, le.tool, le.args, le.text, le.text_hash, le.is_error, le.at)
                        .where(le.session_id == sid).order_by(le.seq)).all()
    events = [ev for ev in live.events_of(rows) if ev is not None]
    first_prompt = next((r.text for r in rows if r.kind == live.KIND_USER and r.text), "")
    title = (first_prompt.strip().splitlines() or [""])[0][:120] or f"{agent} session {key[:12]}"
    run_of, verdicts = worker.replay_session(events, opts.specs)
    store.ensure_policies(conn, opts.specs, opts.default_ids)
    store.write_session(conn, source_id, SessionInfo(key, agent, title, agent), events, run_of, verdicts,
                        max_text=opts.max_text)
    conn.execute(sa.update(t.sessions).where(t.sessions.c.id == sid).values(member=member))


def store_batch(engine: Engine, member: str, token: str, sessions: list[dict[str, Any]],
                opts: worker.Options) -> dict[str, Any]:
    """Write one member's batch in one transaction; the answer the forwarder reads. A value the
    ledger refuses (a DataError: the same every time) is the batch's fault, BadBatch (HTTP 400,
    so the member's forwarder holds that session), never a 503 retried for ever."""
    try:
        return _store(engine, member, token, sessions, opts)
    except sa.exc.DataError as exc:
        raise BadBatch(f"the team ledger refused a value of this batch ({exc.orig})") from None


def _store(engine: Engine, member: str, token: str, sessions: list[dict[str, Any]],
           opts: worker.Options) -> dict[str, Any]:
    accepted = []
    with engine.begin() as conn:
        policies: dict[tuple, str] = {}
        for i, s in enumerate(sessions):
            source_id, sid, key, agent = _attach(conn, member, s)
            events = [event_row(sid, e, f"sessions[{i}].events[{j}]") for j, e in enumerate(s["events"])]
            checks = [check_row(conn, sid, c, f"sessions[{i}].checks[{j}]", policies)
                      for j, c in enumerate(s.get("checks", []))]
            if events:
                store.insert_ignore(conn, t.live_events, [dict(zip(_LIVE_COLS, r, strict=True)) for r in events])
            if checks:
                store.insert_ignore(conn, t.enforced_checks, [dict(zip(_CHECK_COLS, r, strict=True)) for r in checks])
            if events or checks:
                _rebuild(conn, source_id, sid, key, agent, member, opts)
            accepted.append({"key": s["key"], "source": s["source"], "events": len(events)})
        team.used(conn, token)
        enforced = enforce.chosen_rows(conn)
    return {"member": member, "accepted": accepted, "enforced": enforced}


_LIVE_COLS = ("session_id", "seq", "kind", "at", "call_id", "tool", "args", "text", "text_hash", "is_error")
_CHECK_COLS = ("session_id", "seq", "policy_id", "origin", "call_id", "tool", "verdict", "count", "threshold",
               "reason", "at", "elapsed_ms")
