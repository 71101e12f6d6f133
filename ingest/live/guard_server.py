"""`loopledger guard`: the enforced policy for any agent, in any language, over JSON lines.

One event per line on stdin, one verdict line on stdout for every call (nothing for answers and
user turns), flushed at once, so an agent can write a call and read its verdict:

    in   {"session": "s1", "event": "call", "id": "c1", "tool": "Bash", "args": {"command": "npm test"}}
    out  {"session": "s1", "id": "c1", "verdict": "block", "message": "LoopLedger blocked …", …}
    in   {"session": "s1", "event": "answer", "id": "c1", "text": "1 failing", "error": true}
    in   {"session": "s1", "event": "user", "text": "try again"}

Verdicts: allow | warn (run it, show `message` with its result) | block (do not run it; give the
model `message` as its result) | halt and after_halt (do not run it; stop the agent, show
`message` to the person). A line that cannot be read gets `{"line": N, "error": …, "verdict":
"allow"}`: a caller waiting for a verdict is never left hanging, and never refused by our bug.
So does every call while the ledger is missing or not a ledger (tried again at each call), and
every call not decided within the deadline (loopledger.live.deadline, $LOOPLEDGER_HOOK_DEADLINE:
a PostgreSQL server gone silent, say); the ledger is then reopened at the next call.

Optional fields: `transcript` (the agent's transcript file: decisions land in the session the
transcript reader gives it) and `format` on any event of a session; `deadline` on a call (unix
time, seconds: when the caller stops waiting for its verdict). A call not decided by its
deadline is answered "allow" without being judged or stored (`"judged": false`): every wait is
cut to it, and a call read after it is not judged at all, so a call its caller let run is never
recorded as refused afterwards.

Behind a busy ledger a tool call costs its caller one wait at most: once its call waited the
busy timeout in vain, its answer is tried without waiting (it would otherwise hold up the next
call's verdict for as long again).

Sessions stay in memory while the process runs (a verdict costs no reload); each event is
written to the ledger in its own transaction, under the same lock the hooks take. A session
seen for the first time, or written meanwhile by another process, is rebuilt from the ledger.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable, Sequence
from typing import IO, Any

import orjson
from loopledger.detectors.policy import PolicySpec
from loopledger.live import db as live_db
from loopledger.live import deadline as due
from loopledger.live import session as live
from loopledger.live.enforce import LIVE_DEFAULT, enforced_or_default
from loopledger.redact import redact_text

ORIGIN = "guard"
WAITED_MAX = 4096


class Guard:
    """The JSON-lines loop's state: one LiveSession per session, the ledger (or None)."""

    def __init__(self, db: live_db.LiveDB | None, spec: PolicySpec | Sequence[PolicySpec] | None = None,
                 origin: str = ORIGIN, reopen: Callable[[], live_db.LiveDB] | None = None) -> None:
        self.db = db
        # A ledger that could not be opened (missing, not a ledger) or was dropped past a deadline:
        # tried again at each call, which is meanwhile allowed without judging (an error line).
        self.reopen = reopen
        self.fixed: tuple[PolicySpec, ...] | None = (
            None if spec is None else (spec,) if isinstance(spec, PolicySpec) else tuple(spec)) or None
        self.origin = origin
        self.sessions: dict[str, tuple[int | None, live.LiveSession]] = {}
        self.last: live.LiveSession | None = None
        # (session, call id) of calls that waited for a busy ledger in vain: their answers do not
        # wait again. Bounded: an answer takes its call out; the oldest go first past WAITED_MAX.
        self.waited: dict[tuple[str, str], None] = {}

    def _spec(self) -> tuple[PolicySpec, ...]:
        """`--policy`, else what the ledger enforces (read at every event: a choice made on the
        dashboard applies to the next call), else the live default set."""
        if self.fixed is not None:
            return self.fixed
        if self.db is None:
            return LIVE_DEFAULT
        return enforced_or_default(self.db)

    def event(self, msg: dict[str, Any], started: float, deadline: float | None = None,
              stored: Callable[[], None] | None = None) -> dict[str, Any] | None:
        """The verdict line for `msg` (None for an answer or a turn), decided by `deadline`
        (a time.time() value: every wait is cut to it); `stored()` is called once it is committed."""
        key = msg.get("session")
        kind = msg.get("event")
        if not isinstance(key, str) or not key:
            raise ValueError("'session' must be a non-empty string")
        if kind not in ("call", "answer", "user"):
            raise ValueError("'event' must be call, answer or user")
        call_id = msg.get("id")
        call_id = str(call_id) if call_id is not None else None
        if self.db is None and self.reopen is not None:
            try:
                self.db = self.reopen()
            except live_db.LedgerUnavailable:
                if kind != "call":
                    return None  # nothing is judged meanwhile: an answer or a turn has nothing to say
                raise
        if self.db is None:
            _, state = self.sessions.get(key) or (None, live.LiveSession(self._spec()))
            self.sessions[key] = (None, state)
            self.last = state
            return self._apply(state, kind, msg, call_id, started)
        db = self.db
        # An answer whose call waited for a busy ledger in vain is tried once, without waiting.
        waited = kind == "answer" and call_id is not None and self.waited.pop((key, call_id), 0) is None
        wait = 0.0 if waited else due.wait_s(deadline, live_db.HOOK_BUSY_TIMEOUT_S)
        db.busy_wait(wait)
        try:
            db.begin_write()
            transcript = msg.get("transcript") if isinstance(msg.get("transcript"), str) else None
            fmt = msg.get("format") if isinstance(msg.get("format"), str) else None
            known = self.sessions.get(key)
            sid = known[0] if known else live.attach(db, self.origin, key, transcript, fmt)
            db.lock_session(sid)  # type: ignore[arg-type]
            spec = self._spec()
            state = known[1] if known else None
            if state is None or state.specs != spec or live.next_seq(db, sid) != state.seq:  # type: ignore[arg-type]
                state = live.load(db, sid, spec)  # type: ignore[arg-type]
            out = self._apply(state, kind, msg, call_id, started)
            self.last = state
            live.save(db, sid, state, self.origin)  # type: ignore[arg-type]
            db.commit()
            if stored is not None:
                stored()
        except due.Expired:
            self.sessions.pop(key, None)
            self.db = None  # in an unknown state, maybe on a silent server: dropped, reopened next call
            db.release()
            raise
        except BaseException as exc:
            db.rollback()
            self.sessions.pop(key, None)  # rebuilt from the ledger next time
            if not live_db.is_busy(exc):
                raise
            if waited:
                raise live_db.LedgerBusy(f"the ledger is busy (another writer keeps it locked); call {call_id} already "
                                         "waited for it: its answer is not waited for again") from None
            if kind == "call" and call_id is not None:
                self.note_waited(key, call_id)
            raise live_db.LedgerBusy(f"the ledger is busy: another writer kept it locked past {wait:g} s "
                                     f"(${live_db.ENV_BUSY})") from None
        self.sessions[key] = (sid, state)
        return out

    def note_waited(self, session: str, call_id: str) -> None:
        """This call was allowed without being stored (a busy ledger, its deadline): its answer
        does not wait for the ledger."""
        self.waited[(session, call_id)] = None
        while len(self.waited) > WAITED_MAX:
            self.waited.pop(next(iter(self.waited)))

    @staticmethod
    def _apply(state: live.LiveSession, kind: str, msg: dict[str, Any], call_id: str | None,
               started: float) -> dict[str, Any] | None:
        if kind == "call":
            tool = msg.get("tool")
            if not isinstance(tool, str) or not tool:
                raise ValueError("a call needs 'tool' (the tool's name)")
            d = state.call(tool, msg.get("args"), call_id, started=started)
            return {"session": msg["session"], **d.as_json()}
        if kind == "answer":
            state.answer(call_id, live._text(msg.get("text")), bool(msg.get("error")))
        else:
            state.user(live._text(msg.get("text")))
        return None


def serve(guard: Guard, stdin: IO[bytes], stdout: IO[str], log: IO[str] | None = None,
          after: Callable[[], None] | None = None) -> int:
    """Read events until stdin closes; returns the number of lines that could not be read.
    `after()` is called once each line is answered (the team forwarder's wake-up)."""
    bad = 0
    for n, line in enumerate(stdin, 1):
        if not line.strip():
            continue
        started = time.perf_counter()
        msg: Any = None
        try:
            msg = orjson.loads(line)
            if not isinstance(msg, dict):
                raise ValueError(f"expected a JSON object, got {type(msg).__name__}")
            deadline = _deadline(msg)
            if deadline is not None and due.left(deadline) <= due.MARGIN_S:
                out = _unjudged(msg, "read after its caller stopped waiting for it")
                if isinstance(msg.get("session"), str) and msg.get("id") is not None:
                    guard.note_waited(msg["session"], str(msg["id"]))
                if log is not None:
                    print(f"loopledger guard: line {n}: {out['error']}", file=log, flush=True)
            else:
                with due.within(deadline or due.at()) as timer:
                    # Once stored, the verdict is answered whatever the clock says then.
                    out = guard.event(msg, started, deadline, timer.stop)
        except Exception as exc:  # noqa: BLE001  (one bad line must not end the agent's guard)
            bad += 1
            # The message may quote the line: redacted, as everything the live paths print or store.
            out = {"line": n, "error": redact_text(f"{type(exc).__name__}: {exc}"), "verdict": "allow"}
            if isinstance(msg, dict):
                out["session"] = msg.get("session")
                out["id"] = msg.get("id")
            if log is not None:
                print(f"loopledger guard: line {n}: {out['error']}", file=log, flush=True)
        if out is not None:
            stdout.write(orjson.dumps(out).decode() + "\n")
            stdout.flush()
        if after is not None:
            after()
    return bad


def _deadline(msg: dict[str, Any]) -> float | None:
    """A call's decision deadline: its caller's `deadline`, never past the guard's own."""
    if msg.get("event") != "call":
        return None
    own = due.at()
    theirs = msg.get("deadline")
    if isinstance(theirs, int | float) and not isinstance(theirs, bool):
        return min(own, float(theirs))
    return own


def _unjudged(msg: dict[str, Any], why: str) -> dict[str, Any]:
    """The verdict line of a call allowed without being judged or stored."""
    tool = msg.get("tool")
    return {"session": msg.get("session"), "id": msg.get("id"), "tool": tool if isinstance(tool, str) else None,
            "verdict": "allow", "judged": False, "error": redact_text(f"not judged: {why}")}


def run(db: str | None, policy: str | Sequence[str] | None, no_ledger: bool, origin: str = ORIGIN) -> int:
    """The `loopledger guard` command (`policy`: one spec or several, a set; `origin`: who the
    decisions are recorded for, e.g. the OpenCode plugin's "opencode")."""
    texts = [policy] if isinstance(policy, str) else list(policy or ())
    spec = tuple(PolicySpec.parse(t, trusted=True) for t in texts) or None
    def reopen() -> live_db.LiveDB:
        # The hook's bounded wait (LOOPLEDGER_HOOK_BUSY_TIMEOUT, 5 s): a caller waits for each
        # verdict, so a ledger busy past it allows that call (an error line) rather than stall;
        # a server is given what is left of the deadline to connect.
        return live_db.open_db(db, connect_timeout_s=due.wait_s(due.at(), live_db.CONNECT_TIMEOUT_S))

    conn = None
    try:
        conn = None if no_ledger else reopen()
    except live_db.LedgerTooNew as exc:  # no later call mends it: the one line, exit 2, as every command
        print(f"loopledger guard: {exc}", file=sys.stderr, flush=True)
        return 2
    except live_db.LedgerUnavailable as exc:
        # Never in the agent's way: a caller waiting for verdicts gets one per call ("allow",
        # the error saying why) rather than a guard that is gone.
        print(f"loopledger guard: {exc}; every call is allowed without judging until the ledger is there",
              file=sys.stderr, flush=True)
    guard = Guard(conn, spec, origin=origin, reopen=None if no_ledger else reopen)
    # A member of a team (`team join`, whatever the agent): this process forwards as the resident
    # guard does, in a thread of its own, woken after each answer (the OpenCode plugin's guard
    # lives as long as OpenCode; what it had not sent when it ends waits for the next one).
    forwarding = None if no_ledger else _forwarding()
    try:
        serve(guard, sys.stdin.buffer, sys.stdout, sys.stderr, forwarding.poke if forwarding else None)
    finally:
        if forwarding is not None:
            forwarding.stop()
        if guard.db is not None:
            guard.db.close()
    return 0


def _forwarding() -> Any:
    """The team forwarder (loopledger.live.forward.Background), its lines in the hook log."""
    import os

    from loopledger.live import forward
    from loopledger.live.hooks import ENV_LOG, default_log, log

    path = os.environ.get(ENV_LOG) or default_log()
    return forward.Background(lambda message: log(path, "forward", message))
