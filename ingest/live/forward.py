"""A member's guard reporting to the team: this laptop's live events and decisions, forwarded in
batches to the team's `loopledger receive` (POST /v1/live) with the member's token.

Deciding stays local and offline: the hook judges every call against this laptop's ledger as
before, and forwarding adds nothing to that path. The live events the hook stores ARE the
outbox: `forwarded` (migration 0012_team) holds, per session, the next live event the receiver
has not acknowledged. A `Forwarder` reads what lies past it, sends it, and moves it only once the
receiver answered 200, so a receiver that is down, slow or unreachable leaves everything queued on
disk, sent when it is back; what is sent twice (an answer lost on the way) is stored once there
(the receiver inserts by session and seq).

Every backlog drains (tests/test_forward_drains.py):
- A request holds at most BATCH_EVENTS events and BATCH_BYTES bytes, and never more than the
  receiver's body limit, which the receiver states on every answer (the LIMIT_HEADER header; a
  Forwarder asks with an empty batch before its first events). So a laptop back after a day
  offline sends its backlog in steps the receiver takes.
- A 413 is never "cannot reach": the batch is halved and sent again, down to one event; one
  event alone over the limit holds its session (below).
- A session the receiver refuses on its own (400: a value it does not take) is HELD: never sent
  again, said once (the round's notes, the hook log), while every other session keeps flowing.
  A batch of several sessions refused is sent again one session at a time to find which. The
  hook already stores within the receiver's field limits (loopledger.live.session.stored_id), so
  what is held is what this laptop could not know it would be refused.
- Only a refusal is final; an unreachable receiver, a 5xx, a revoked token (401) stop the round
  and it is tried again (the receiver's ledger down: 503, retried).

Who sends: the resident guard (loopledger.live.resident) runs a Forwarder in a thread of its own
while the settings file exists (`Background`), woken after each event it answers and every
POLL_S otherwise; `loopledger forward` runs one in the foreground (for setups without a
resident: LOOPLEDGER_HOOK_RESIDENT=0). The hook process itself never sends.

Each answer carries the team's enforced setting: a member's ledger follows it (an enforcement
with origin `team`, recorded with who chose it), so what an owner enforces on the dashboard
guards every member's agent from the round after. The policies are looked up among the
detectors registered here, never imported (as every ledger row: loopledger.live.enforce).

What leaves the laptop: the live events (tool name, arguments, result text, the person's
prompts — all as stored: redacted, capped at 64 KB) and the decisions, the session's key and
agent, and a digest of the local transcript path (never the path). Transcripts, prose, the
model's messages, the hook log and the sealed states stay.

Settings: `$XDG_CONFIG_HOME/loopledger/team.json` (default ~/.config/…), 0600 in a 0700 folder:
the receiver's URL, the token, and this laptop's ledger (`loopledger team join` writes it).
"""

from __future__ import annotations

import hashlib
import json
import os
import threading
import time
from dataclasses import dataclass, field
from typing import Any

from loopledger.live import db as live_db
from loopledger.live import enforce
from loopledger.live.db import sql
from loopledger.live.session import stored_id

CONFIG_NAME = "team.json"
PATH = "/v1/live"
BATCH_EVENTS = 2000  # live events per request, at most
BATCH_BYTES = 4 << 20  # body bytes per request, at most (and below the receiver's stated limit)
LIMIT_HEADER = "LoopLedger-Max-Body"  # the receiver's body limit, on every /v1/live answer
# A body the receiver's limit is unknown for and the connection broke while sending: a server
# that refused it by its length answers before reading it, and the client sees a reset. Past
# this size such a break is taken for "too large" (halved), never "cannot reach".
SUSPECT_BYTES = 1 << 20
TIMEOUT_S = 10.0  # one request; the agent never waits on it
POLL_S = 5.0  # idle: how often the team's enforced setting is asked for
BACKOFF_MAX_S = 30.0  # the receiver unreachable: retries 1, 2, 4 … s apart, up to this


class ForwardError(Exception):
    """The receiver could not be reached, refused the token, or answered something else."""


class Refused(ForwardError):
    """The receiver refused what the batch holds (HTTP 400): sending it again cannot help."""


class TooLarge(ForwardError):
    """The receiver refused the body's size (HTTP 413); `limit`: its stated limit, if it said."""

    def __init__(self, message: str, limit: int | None) -> None:
        super().__init__(message)
        self.limit = limit


def _limit(headers: Any) -> int | None:
    try:
        value = int((headers or {}).get(LIMIT_HEADER) or 0)
    except (TypeError, ValueError):
        return None
    return value if value > 0 else None


@dataclass(frozen=True)
class Config:
    url: str  # the team receiver's base URL (http://host:4318)
    token: str
    ledger: str  # this laptop's ledger (a path or URL)


def config_path() -> str:
    base = os.environ.get("XDG_CONFIG_HOME") or os.path.join(os.path.expanduser("~"), ".config")
    return os.path.join(base, "loopledger", CONFIG_NAME)


def load_config(path: str | None = None) -> Config | None:
    """The settings `team join` wrote, or None (absent, or not ours: then nothing is forwarded)."""
    try:
        with open(path or config_path(), encoding="utf-8") as fh:
            raw = json.load(fh)
        return Config(str(raw["url"]).rstrip("/"), str(raw["token"]), str(raw["ledger"]))
    except (OSError, ValueError, KeyError, TypeError):
        return None


def save_config(cfg: Config, path: str | None = None) -> str:
    path = path or config_path()
    os.makedirs(os.path.dirname(path), mode=0o700, exist_ok=True)
    tmp = f"{path}.{os.getpid()}.tmp"
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as fh:
        json.dump({"url": cfg.url, "token": cfg.token, "ledger": cfg.ledger}, fh)
    os.replace(tmp, path)
    return path


def local_ledger(db: str | None) -> str:
    """The member's own ledger: `db`, else `$XDG_DATA_HOME/loopledger/ledger.sqlite`."""
    if db:
        return os.path.abspath(os.path.expanduser(db)) if "://" not in db else db
    base = os.environ.get("XDG_DATA_HOME") or os.path.join(os.path.expanduser("~"), ".local", "share")
    return os.path.join(base, "loopledger", "ledger.sqlite")


# ── the wire ─────────────────────────────────────────────────────────────────────────────────


def encode(body: dict[str, Any]) -> bytes:
    """A batch as it goes on the wire (ASCII JSON, compact: what `pending_batch` measures)."""
    return json.dumps(body, separators=(",", ":")).encode()


def post(url: str, token: str, body: dict[str, Any] | bytes, timeout: float = TIMEOUT_S) -> dict[str, Any]:
    """POST a batch to the receiver; its JSON answer, with `max_body` (the receiver's stated body
    limit, or None). ForwardError for anything but a 200: TooLarge for a 413, Refused for a 400."""
    import urllib.error
    import urllib.request

    data = body if isinstance(body, bytes) else encode(body)
    req = urllib.request.Request(url.rstrip("/") + PATH, data=data, method="POST",
                                 headers={"Content-Type": "application/json", "Authorization": f"Bearer {token}"})
    try:
        with urllib.request.urlopen(req, timeout=timeout) as resp:
            answer = json.loads(resp.read() or b"{}")
            answer["max_body"] = _limit(resp.headers) or answer.get("max_body")
            return answer
    except urllib.error.HTTPError as exc:
        detail = exc.read()[:300].decode("utf-8", "replace")
        if exc.code == 401:
            raise ForwardError(f"{url} refused the token (HTTP 401): revoked, or not this team's") from None
        if exc.code == 413:
            raise TooLarge(f"{url} refused a body of {len(data)} bytes as too large (HTTP 413): {detail}",
                           _limit(exc.headers)) from None
        if exc.code == 400:
            raise Refused(f"{url} refused it (HTTP 400): {detail}") from None
        raise ForwardError(f"{url} answered HTTP {exc.code}: {detail}") from None
    except (urllib.error.URLError, OSError, ValueError) as exc:
        reason = getattr(exc, "reason", exc)
        if len(data) > SUSPECT_BYTES and isinstance(reason, ConnectionResetError | BrokenPipeError):
            raise TooLarge(f"{url} cut off a body of {len(data)} bytes ({reason}): taken for too large", None) from None
        raise ForwardError(f"cannot reach {url}: {reason}") from None


def source_digest(path: str) -> str:
    """What stands for the local transcript path on the team's side (the path stays here)."""
    return hashlib.sha256(path.encode("utf-8", "surrogateescape")).hexdigest()[:16]


# A session's `forwarded` row: the next seq to send, or — once the receiver refused the session
# (held) — minus one minus the seq it stopped at (never sent again; the held rows are listed by
# `held`). Kept in the one column, so a held session needs no table of its own.
_PENDING = ("SELECT l.session_id, s.key, COALESCE(s.agent, s.format), src.path, COALESCE(f.seq, 0), MAX(l.seq) + 1 "
            "FROM live_events l JOIN sessions s ON s.id = l.session_id JOIN sources src ON src.id = s.source_id "
            "LEFT JOIN forwarded f ON f.session_id = l.session_id WHERE f.seq IS NULL OR f.seq >= 0 "
            "GROUP BY l.session_id, s.key, s.agent, s.format, src.path, f.seq "
            "HAVING MAX(l.seq) + 1 > COALESCE(f.seq, 0) ORDER BY l.session_id")
_EVENTS = ("SELECT seq, kind, at, call_id, tool, args, text, text_hash, is_error FROM live_events "
           "WHERE session_id = ? AND seq >= ? ORDER BY seq LIMIT ?")
_CHECKS = ("SELECT c.seq, c.origin, c.call_id, c.tool, c.verdict, c.count, c.threshold, c.reason, c.at, "
           "c.elapsed_ms, p.detector, p.params, p.label FROM enforced_checks c JOIN policies p ON p.id = c.policy_id "
           "WHERE c.session_id = ? AND c.seq >= ? AND c.seq <= ? ORDER BY c.seq")
_HELD = ("SELECT s.key, -1 - f.seq FROM forwarded f JOIN sessions s ON s.id = f.session_id WHERE f.seq < 0 "
         "ORDER BY s.key")


def _size(value: Any) -> int:
    return len(encode(value))


@dataclass
class Batch:
    """One request's body, what to mark as sent once it is acknowledged, and its size."""

    body: dict[str, Any]
    marks: list[tuple[int, int]]  # (session id, the seq to store as sent)
    size: int
    full: bool  # stopped by a limit: more may be waiting
    keys: dict[int, str] = field(default_factory=dict)  # session id → its key (what a note names)

    @property
    def events(self) -> int:
        return sum(len(s["events"]) for s in self.body["sessions"])


def pending_batch(conn: Any, limit: int = BATCH_EVENTS, max_bytes: int = BATCH_BYTES, one_session: bool = False,
                  ) -> Batch:
    """The next request: every session with unsent live events (held ones aside), up to `limit`
    events and `max_bytes` bytes of body in all (yet never less than one event: what is too large
    alone is the receiver's to refuse), or only the first such session (`one_session`)."""
    sessions: list[dict[str, Any]] = []
    marks: list[tuple[int, int]] = []
    keys: dict[int, str] = {}
    room, size, full = limit, _size({"sessions": []}), False
    for sid, key, agent, path, sent, _upto in conn.exec_driver_sql(_PENDING).fetchall():
        if room <= 0 or size >= max_bytes or (one_session and sessions):
            full = True
            break
        events = conn.exec_driver_sql(sql(conn, _EVENTS), (sid, sent, room)).fetchall()
        if not events:
            continue
        rows = [list(e[:8]) + [None if e[8] is None else bool(e[8])] for e in events]
        checks = [list(c) for c in conn.exec_driver_sql(sql(conn, _CHECKS), (sid, sent, events[-1][0])).fetchall()]
        by_seq: dict[int, list[list[Any]]] = {}
        for c in checks:
            by_seq.setdefault(c[0], []).append(c)
        head = {"source": source_digest(path), "key": stored_id(str(key)), "agent": stored_id(str(agent)),
                "from": sent, "events": [], "checks": []}
        size += _size(head) + 1
        taken: list[list[Any]] = []
        kept_checks: list[list[Any]] = []
        for row in rows:
            cost = _size(row) + 1 + sum(_size(c) + 1 for c in by_seq.get(row[0], ()))
            if size + cost > max_bytes and (taken or sessions):
                full = True
                break
            taken.append(row)
            kept_checks.extend(by_seq.get(row[0], ()))
            size += cost
        if not taken:
            break
        full = full or len(taken) == room
        sessions.append(dict(head, events=taken, checks=kept_checks))
        marks.append((sid, taken[-1][0] + 1))
        keys[sid] = str(key)
        room -= len(taken)
        if full:
            break
    return Batch({"sessions": sessions}, marks, size, full, keys)


def mark_sent(conn: Any, marks: list[tuple[int, int]]) -> None:
    for sid, seq in marks:
        conn.exec_driver_sql(sql(conn, "INSERT INTO forwarded (session_id, seq) VALUES (?, ?) ON CONFLICT (session_id) "
                                       "DO UPDATE SET seq = excluded.seq"), (sid, seq))


def hold(conn: Any, sid: int, seq: int) -> None:
    """Never send this session again: the receiver refused it (see _PENDING for the encoding)."""
    mark_sent(conn, [(sid, -1 - seq)])


def held(conn: Any) -> list[tuple[str, int]]:
    """The sessions the receiver refused, and the seq each was held at (`loopledger forward --once`)."""
    return [(str(k), int(n)) for k, n in conn.exec_driver_sql(_HELD).fetchall()]


def follow_team(conn: Any, enforced: dict[str, Any] | None) -> str | None:
    """Make this ledger enforce what the team enforces (origin `team`); what changed, or None."""
    from loopledger.ledger.team import Actor

    if not isinstance(enforced, dict):
        return None
    rows = enforced.get("policies") or []
    try:
        specs = tuple(enforce.spec_of_row(str(d), str(p)) for d, p, *_ in rows)
    except (enforce.NotRegistered, ValueError, TypeError) as exc:
        return f"the team enforces a policy this laptop cannot build ({exc}): kept this ledger's setting"
    if tuple(sp.id for sp in specs) == enforce.enforced_ids(conn):
        return None
    enforce.set_enforced(conn, specs or None, origin="team", actor=Actor(str(enforced.get("by") or "team")))
    return "now enforcing the team's " + (" + ".join(sp.label for sp in specs) if specs else "default set")


# ── rounds ───────────────────────────────────────────────────────────────────────────────────


@dataclass
class Round:
    """What one round did: events and sessions acknowledged, the team's setting followed, why it stopped."""

    sent: int = 0
    sessions: int = 0
    followed: str | None = None
    error: str | None = None
    member: str | None = None
    notes: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return self.error is None

    def summary(self) -> str:
        head = (f"forwarded {self.sent} live event(s) of {self.sessions} session(s)"
                + (f" as {self.member}" if self.member else ""))
        tail = [*(self.notes), *([self.followed] if self.followed else []), *([self.error] if self.error else [])]
        return "; ".join([head, *tail])


class Forwarder:
    """Sends this laptop's unsent live events to the team's receiver, batch by batch."""

    def __init__(self, cfg: Config, timeout: float = TIMEOUT_S) -> None:
        self.cfg = cfg
        self.timeout = timeout
        self.limit: int | None = None  # the receiver's stated body limit (None: not said yet)
        self.asked = False  # whether the empty batch that asks for it was sent
        self.cap = BATCH_BYTES  # halved at each 413 without a stated limit

    def _open(self) -> Any:
        return live_db.open_db(self.cfg.ledger, keep=False)

    def budget(self) -> int:
        """Body bytes the next request may hold: BATCH_BYTES, under the receiver's limit."""
        return max(1, min(self.cap, int(self.limit * 0.9) if self.limit else self.cap))

    def _post(self, body: dict[str, Any] | bytes) -> dict[str, Any]:
        answer = post(self.cfg.url, self.cfg.token, body, self.timeout)
        self.asked = True
        if isinstance(answer.get("max_body"), int) and answer["max_body"] > 0:
            self.limit = answer["max_body"]
        return answer

    def _write(self, marks: list[tuple[int, int]], answer: dict[str, Any] | None,
               hold_at: tuple[int, int] | None = None) -> str | None:
        conn = self._open()
        try:
            conn.begin_write()
            mark_sent(conn, marks)
            if hold_at is not None:
                hold(conn, *hold_at)
            followed = follow_team(conn, answer.get("enforced")) if answer is not None else None
            conn.commit()
        except BaseException:
            conn.rollback()
            raise
        finally:
            conn.close()
        return followed

    def _hold(self, out: Round, batch: Batch, why: str) -> None:
        """The one session of `batch` is refused for good: held where it stands, said once."""
        (sid, _), = batch.marks
        self._write([], None, (sid, batch.body["sessions"][0]["from"]))
        out.notes.append(f"session {batch.keys.get(sid, sid)} is held (not forwarded; the other sessions go on): "
                         f"{why}")

    def round(self) -> Round:
        """Send everything waiting now, batch after batch, until none is left or a send fails."""
        out = Round()
        one_session = False  # after a refusal of several sessions: find the refused one alone
        if not self.asked:
            try:  # the receiver's limit (and the team's setting) before the first events go
                answer = self._post({"sessions": []})
            except ForwardError as exc:
                out.error = str(exc)
                return out
            out.member = answer.get("member") or out.member
        while True:
            try:
                conn = self._open()
            except live_db.LedgerUnavailable as exc:
                out.error = str(exc)
                return out
            try:
                batch = pending_batch(conn, max_bytes=self.budget(), one_session=one_session)
                conn.rollback()  # the read's snapshot; nothing was written
            finally:
                conn.close()
            if self.limit and batch.size > self.limit and batch.events == 1:
                # One event over the receiver's stated limit: it would be refused; never sent.
                self._hold(out, batch, f"one event of {batch.size} bytes is over the receiver's limit of "
                                       f"{self.limit} bytes")
                continue
            try:
                answer = self._post(encode(batch.body))
            except TooLarge as exc:
                self.limit = exc.limit or self.limit
                if not batch.marks:
                    out.error = str(exc)
                    return out
                if batch.events <= 1 and len(batch.marks) == 1:
                    self._hold(out, batch, str(exc))
                elif self.limit is None or batch.size <= self.budget():
                    self.cap = max(1, batch.size // 2)  # no limit said (or a proxy's): halve, and again
                continue
            except Refused as exc:
                if not batch.marks:  # an empty batch refused: not a session's fault
                    out.error = str(exc)
                    return out
                if len(batch.marks) == 1:
                    self._hold(out, batch, str(exc))
                else:
                    one_session = True
                continue
            except ForwardError as exc:
                out.error = str(exc)
                return out
            out.member = answer.get("member") or out.member
            out.followed = self._write(batch.marks, answer) or out.followed
            out.sent += batch.events
            out.sessions += len(batch.body["sessions"])
            if not batch.marks or not (batch.full or one_session):
                return out

    def run(self, stop: threading.Event, wake: threading.Event | None = None, log: Any = None) -> None:
        """Round after round until `stop`: at once when woken, every POLL_S while idle, backing
        off up to BACKOFF_MAX_S while the receiver cannot be reached. `log(message)` is told
        when sending starts failing and when it works again (not every retry)."""
        wake = wake or threading.Event()
        failures, said = 0, None
        while not stop.is_set():
            wake.clear()
            try:
                r = self.round()
            except Exception as exc:  # noqa: BLE001 (a bad row, a ledger error: said once, retried)
                r = Round(error=f"{type(exc).__name__}: {exc}")
            for note in r.notes:  # a held session: said once (it is never sent again)
                log and log(f"forwarding to {self.cfg.url}: {note}")
            if r.ok:
                failures = 0
                if said is not None or r.followed:
                    log and log(f"forwarding to {self.cfg.url} works: {r.summary()}")
                said = None
                delay = POLL_S
            else:
                failures += 1
                if r.error != said:
                    log and log(f"forwarding to {self.cfg.url} waits (queued on disk): {r.error}")
                said = r.error
                delay = min(BACKOFF_MAX_S, 2.0 ** (failures - 1))
            deadline = time.monotonic() + delay
            while not stop.is_set() and time.monotonic() < deadline:
                # Woken by a new event: send now, unless the receiver is failing (keep backing off).
                if wake.wait(min(0.5, max(0.0, deadline - time.monotonic()))) and failures == 0:
                    break


class Background:
    """The resident's forwarder thread: started once the settings file exists, woken after each
    event the resident answers, stopped when the resident exits (what it had not sent stays
    queued: the next resident, or `loopledger forward`, sends it)."""

    def __init__(self, log: Any = None) -> None:
        self._path = config_path()  # read here, in the resident's own environment
        self._log = log
        self._thread: threading.Thread | None = None
        self._stop = threading.Event()
        self._wake = threading.Event()

    def poke(self) -> None:
        if self._thread is None:
            cfg = load_config(self._path)
            if cfg is None:
                return
            fwd = Forwarder(cfg)
            self._thread = threading.Thread(target=fwd.run, args=(self._stop, self._wake, self._log),
                                            name="loopledger-forward", daemon=True)
            self._thread.start()
        self._wake.set()

    def stop(self, timeout: float = TIMEOUT_S) -> None:
        if self._thread is not None:
            self._stop.set()
            self._thread.join(timeout)


def join(url: str, token: str, ledger: str) -> dict[str, Any]:
    """`loopledger team join`: the receiver checks the token (an empty batch), this laptop's ledger
    is made or upgraded and follows the team's enforced setting, and the settings are saved."""
    from loopledger.ledger import migrate
    from loopledger.ledger.engine import make_engine
    from loopledger.ledger.urls import resolve_url

    url = url.rstrip("/")
    hello = post(url, token, {"sessions": []})
    if not hello.get("member"):
        raise ForwardError(f"{url} did not say which member the token is (is it a LoopLedger receiver?)")
    engine = make_engine(resolve_url(ledger), create_dirs=True)
    try:
        migrate.upgrade(engine)
    finally:
        engine.dispose()
    conn = live_db.open_db(ledger, keep=False)
    try:
        conn.begin_write()
        follow_team(conn, hello.get("enforced"))
        conn.commit()
    finally:
        conn.close()
    save_config(Config(url, token, ledger))
    return hello
