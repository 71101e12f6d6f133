"""The resident guard: one process per user and install that answers `loopledger hook` events
handed over by loopledger.live.hook_client, so a hook process does not import the policy,
orjson and the ledger code on every tool call. `python -P -m loopledger.live.resident`; the
client starts it (detached) when it finds none, and it exits after LOOPLEDGER_HOOK_RESIDENT_IDLE
seconds without a request (default 600).

Each request runs loopledger.live.hooks.run — the in-process path, the same code — on the
request's stdin bytes, argv, working folder and environment (hook_client.SENT_*), on a thread of
its own, up to MAX_AT_ONCE at a time: parallel tool calls' hooks are decided together, so behind
a busy ledger each waits its own busy timeout, not one after another's. os.environ and the
working folder belong to the process, so requests run together only when they share them (see
Running). Each runs within the deadline its hook sent (loopledger.live.deadline): every wait is
cut to it; a request still waiting when its deadline has passed, or whose hook has gone (closed
its socket: it answered itself), is dropped unjudged; and one stuck past it ends the resident
(Running's watchdog), its hooks answering themselves. Kept between requests: imports and the
open SQLite ledgers (loopledger.live.db.keep_open, checked out by one request at a time;
reopened when the file is replaced or migrated; released, while idle, when it is removed or
replaced). While this member forwards to a team (loopledger.live.forward's settings file), a
thread of its own sends the new live events to the team's receiver after each answer, never
before it. The ledger stays the source of truth: each event runs in its own write transaction,
loads the session's sealed state and writes its decision as a hook process does.

Refused (the client then answers in its own process): a peer of another uid (SO_PEERCRED), a
request of another identity (version, location, interpreter, the environment read once per
process), and any request after the code it runs changed on disk (a loaded loopledger module,
a folder on sys.path — a new plugin), after which it exits so a fresh one takes over.
"""

from __future__ import annotations

import _socket
import contextlib
import fcntl
import io
import os
import select
import stat
import sys
import threading
import time
from typing import Any

from loopledger.live import db as live_db
from loopledger.live import deadline as due
from loopledger.live import hook_client as wire
from loopledger.live.hooks import AGENTS, run

ENV_IDLE = "LOOPLEDGER_HOOK_RESIDENT_IDLE"
# Tests only (inert unless set in the resident's own environment): after each answer is computed (its
# ledger transaction committed) and before it is sent, create this file and wait to be killed,
# the one moment a resident's death makes a hook deliver its event twice.
ENV_TEST_HOLD = "LOOPLEDGER_HOOK_RESIDENT_TEST_HOLD"
REQUEST_TIMEOUT_S = 5.0  # a client sends its request at once; one that stalls is dropped
MAX_AT_ONCE = 4  # requests decided at once (parallel tool calls of an agent, each one's hook)
LEDGER_CHECK_S = 5.0  # idle, it looks this often for kept ledgers removed or replaced (db.release_gone)
WAKE_S = 0.5  # the serving loop looks this often whether a request found the code changed (stale)
LOCK_TRIES = 20  # a new resident waits up to 2 WAKE_S for the lock of one that is exiting


class _Stale(Exception):
    pass


class CodeStamp:
    """The files this process's code came from, as they were when they were loaded."""

    def __init__(self) -> None:
        self._seen: dict[str, tuple[int, int] | None] = {}
        self.changed()

    @staticmethod
    def _stat(path: str) -> tuple[int, int] | None:
        try:
            st = os.stat(path)
        except OSError:
            return None
        return st.st_mtime_ns, st.st_size

    def _paths(self) -> list[str]:
        files = [getattr(m, "__file__", None) for name, m in list(sys.modules.items())
                 if name == "loopledger" or name.startswith("loopledger.")]
        return [f for f in files if f] + [p for p in sys.path if p]

    def changed(self) -> bool:
        for path in self._paths():
            now = self._stat(path)
            if path not in self._seen:
                self._seen[path] = now  # loaded since (a detector imported lazily): as it is now
            elif self._seen[path] != now:
                return True
        return False


def _apply(cwd: str, env: dict[str, str]) -> dict[str, str]:
    """os.environ's sent names and the working folder as the hook process has them; what was there."""
    saved = {k: v for k, v in os.environ.items() if k in wire.SENT_NAMES or k.startswith(wire.SENT_PREFIXES)}
    for k in saved:
        del os.environ[k]
    os.environ.update(env)
    os.chdir(cwd)
    return saved


def _restore(saved: dict[str, str]) -> None:
    for k in [k for k in os.environ if k in wire.SENT_NAMES or k.startswith(wire.SENT_PREFIXES)]:
        del os.environ[k]
    os.environ.update(saved)
    os.chdir("/")


class Running:
    """The requests being decided, at most MAX_AT_ONCE, on threads. os.environ and the working
    folder are the process's own, so requests run together only when they share them (the
    hooks of one agent do); one with another folder or environment waits for those to end,
    never past its deadline. A watchdog ends the process when one is stuck past its deadline
    (a server gone silent mid-query): its hook, and every other, answers itself."""

    def __init__(self) -> None:
        self.cond = threading.Condition()
        self.context: tuple | None = None
        self.saved: dict[str, str] = {}
        self.deadlines: dict[int, float] = {}
        self.last = time.monotonic()
        self.stale = False
        threading.Thread(target=self._watch, name="loopledger-resident-watchdog", daemon=True).start()

    def _watch(self) -> None:
        while True:
            time.sleep(0.25)
            with self.cond:
                late = [d for d in self.deadlines.values() if time.time() > d + due.BACKSTOP_S]
            if late:
                os._exit(3)

    def busy(self) -> bool:
        with self.cond:
            return bool(self.deadlines)

    def wait_idle(self) -> None:
        """Until the requests running are done (each ends by its deadline, or the watchdog)."""
        with self.cond:
            while self.deadlines:
                self.cond.wait(0.5)

    @contextlib.contextmanager
    def as_requested(self, cwd: str, env: dict[str, str], deadline: float):
        """Enter the request's folder and environment (shared with those running); False: its
        deadline came while others held another."""
        key = (cwd, tuple(sorted(env.items())))
        me = threading.get_ident()
        with self.cond:
            while self.deadlines and self.context != key:
                if due.left(deadline) <= due.MARGIN_S:
                    yield False
                    return
                self.cond.wait(due.left(deadline) - due.MARGIN_S)
            if not self.deadlines:
                self.saved, self.context = _apply(cwd, env), key
            self.deadlines[me] = deadline
        try:
            yield True
        finally:
            with self.cond:
                del self.deadlines[me]
                self.last = time.monotonic()
                if not self.deadlines:
                    _restore(self.saved)
                    self.context = None
                self.cond.notify_all()


def _env(blob: bytes) -> dict[str, str]:
    out = {}
    for item in blob.split(b"\0") if blob else []:
        k, _, v = item.decode("utf-8", "surrogateescape").partition("=")
        if k in wire.SENT_NAMES or k.startswith(wire.SENT_PREFIXES):
            out[k] = v
    return out


def _gone(conn: Any) -> bool:
    """The hook closed its end (it gave up waiting and answered itself)."""
    p = select.poll()
    p.register(conn.fileno(), select.POLLHUP)
    return any(ev & (select.POLLHUP | select.POLLERR) for _, ev in p.poll(0))


def answer(request: bytes, ident: bytes, conn: Any = None, running: Running | None = None) -> bytes | None:
    """The reply to one request: the in-process path's exit code, stdout and stderr; None: the
    request is dropped unjudged (its deadline passed, or its hook on `conn` has gone)."""
    fields = wire.unpack(request, 7)
    if fields is None or fields[0] != ident:
        return wire.pack(b"fallback", b"0", b"", b"")
    _, agent, argv, cwd, env, raw, when = fields
    agent_s = agent.decode()
    try:
        deadline = float(when)
    except ValueError:
        return wire.pack(b"fallback", b"0", b"", b"")
    if agent_s not in AGENTS:
        return wire.pack(b"fallback", b"0", b"", b"")
    if due.left(deadline) <= due.MARGIN_S or (conn is not None and _gone(conn)):
        return None
    args = [a.decode("utf-8", "surrogateescape") for a in argv.split(b"\0")] if argv else []
    out, err = io.StringIO(), io.StringIO()
    running = running or Running()
    with running.as_requested(cwd.decode("utf-8", "surrogateescape"), _env(env), deadline) as entered:
        if not entered or (conn is not None and _gone(conn)):
            return None
        code = run(agent_s, args, stdin=io.BytesIO(raw), stdout=out, deadline=deadline, stderr=err)
    return wire.pack(b"ok", str(code).encode(), out.getvalue().encode(), err.getvalue().encode())


def _serve_one(conn: Any, ident: bytes, stamp: CodeStamp, running: Running) -> None:
    if wire.peer_uid(conn) != os.getuid():
        return  # another user's process: not a word
    conn.settimeout(REQUEST_TIMEOUT_S)
    request = wire.read_all(conn)
    if running.stale or stamp.changed():
        conn.sendall(wire.pack(b"fallback", b"0", b"", b""))
        raise _Stale
    reply = answer(request, ident, conn, running)
    if reply is None:
        return  # dropped: its hook answers (or answered) itself
    hold = os.environ.get(ENV_TEST_HOLD)
    if hold and (wire.unpack(reply, 4) or [b""])[0] == b"ok":  # an event judged, not a probe declined
        with open(hold, "w"):
            pass
        while True:
            time.sleep(60)
    conn.sendall(reply)


def _idle_s() -> float:
    try:
        return max(0.1, float(os.environ.get(ENV_IDLE, "600")))
    except ValueError:
        return 600.0


def _lock(path: str) -> int | None:
    """This install's resident lock (its pid written in it), or None when another holds it."""
    lock = os.open(path + ".lock", os.O_RDWR | os.O_CREAT, 0o600)
    for attempt in range(LOCK_TRIES):
        try:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
            break
        except OSError:
            # One is running (or starting) already, or one that found its code changed is still
            # finishing its requests (its serving loop wakes every WAKE_S): tried a little longer.
            if attempt == LOCK_TRIES - 1:
                os.close(lock)
                return None
            time.sleep(WAKE_S / 5)
    os.ftruncate(lock, 0)
    os.write(lock, f"{os.getpid()}\n".encode())
    return lock


def _bind(path: str) -> tuple[Any, int]:
    """The listening socket at `path` (0600 from birth) and its inode (to remove only our own)."""
    with contextlib.suppress(FileNotFoundError):
        os.unlink(path)  # a dead resident's socket: we hold the lock, so no live one owns it
    sock = _socket.socket(_socket.AF_UNIX, _socket.SOCK_STREAM)
    old = os.umask(0o177)
    addr, fd = wire.address(path)
    try:
        sock.bind(addr)
    finally:
        os.umask(old)
        if fd is not None:
            os.close(fd)
    sock.listen(64)
    return sock, os.stat(path).st_ino


def serve(ident: bytes | None = None) -> int:
    """Bind this install's socket and answer until idle; 0 also when another resident holds it."""
    ident = ident or wire.identity()
    folder = wire.socket_dir()
    os.makedirs(folder, mode=0o700, exist_ok=True)
    if not wire.private_dir(folder):
        return 1  # not ours, or open to others: clients would not use it anyway
    path = wire.socket_path(ident)
    lock = _lock(path)
    if lock is None:
        return 0
    sock, ino = _bind(path)
    idle = _idle_s()
    stamp = CodeStamp()
    live_db.keep_open()
    running = Running()
    slots = threading.BoundedSemaphore(MAX_AT_ONCE)
    forwarding = _forwarding()
    forwarding.poke()

    def work(conn: Any) -> None:
        try:
            _serve_one(conn, ident, stamp, running)
        except _Stale:
            running.stale = True  # no more requests: the serving loop ends once these are done
        except OSError:
            pass  # that client went away; the next one is served
        finally:
            conn.close()
            slots.release()
            forwarding.poke()  # after the answer is out: the new event goes to the team

    checked = time.monotonic()
    try:
        while not running.stale:
            left = idle - (time.monotonic() - running.last)
            if left <= 0 and not running.busy():
                return 0
            if not slots.acquire(timeout=WAKE_S):
                continue  # all busy: new hooks wait in the backlog (each within its own deadline)
            sock.settimeout(max(0.05, min(left, WAKE_S)))
            try:
                fd, _ = sock._accept()
            except TimeoutError:
                slots.release()
                if not running.busy() and time.monotonic() - checked >= LEDGER_CHECK_S:
                    live_db.release_gone()
                    checked = time.monotonic()
                continue
            except OSError:
                slots.release()
                continue  # shut down (stale): the loop ends
            threading.Thread(target=work, args=(_socket.socket(fileno=fd),), daemon=True).start()
        running.wait_idle()
        return 0
    finally:
        forwarding.stop()
        with contextlib.suppress(OSError):
            if os.stat(path).st_ino == ino and stat.S_ISSOCK(os.stat(path).st_mode):
                os.unlink(path)
        sock.close()
        os.close(lock)


def _forwarding() -> Any:
    """The team forwarder (loopledger.live.forward.Background), its log lines in the hook log."""
    from loopledger.live import forward
    from loopledger.live.hooks import ENV_LOG, default_log, log

    path = os.environ.get(ENV_LOG) or default_log()  # read now: requests change os.environ
    return forward.Background(lambda message: log(path, "forward", message))


def main() -> None:
    os.chdir("/")
    sys.exit(serve())


if __name__ == "__main__":
    main()
