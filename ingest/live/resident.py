"""The resident guard: one process per user and install that answers `loopledger hook` events
handed over by loopledger.live.hook_client, so a hook process does not import the policy,
orjson and the ledger code on every tool call. `python -P -m loopledger.live.resident`; the
client starts it (detached) when it finds none, and it exits after LOOPLEDGER_HOOK_RESIDENT_IDLE
seconds without a request (default 600).

Each request runs loopledger.live.hooks.run — the in-process path, the same code — on the
request's stdin bytes, argv, working folder and environment (hook_client.SENT_*), one request
at a time (so requests of a session, and os.environ / the working folder, are never shared by
two at once). Kept between requests: imports and the open SQLite ledgers (loopledger.live.db.keep_open;
reopened when the file is replaced or migrated; released, while idle, when it is removed or
replaced). While this member forwards to a team (loopledger.live.forward's settings file), a
thread of its own sends the new live events to the team's receiver after each answer, never
before it. The ledger stays the source of truth: each
event runs in its own write transaction, loads the session's sealed state and writes its
decision as a hook process does.

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
import stat
import sys
import time
from typing import Any

from loopledger.live import db as live_db
from loopledger.live import hook_client as wire
from loopledger.live.hooks import run

ENV_IDLE = "LOOPLEDGER_HOOK_RESIDENT_IDLE"
# Tests only (inert unless set in the resident's own environment): after each answer is computed (its
# ledger transaction committed) and before it is sent, create this file and wait to be killed,
# the one moment a resident's death makes a hook deliver its event twice.
ENV_TEST_HOLD = "LOOPLEDGER_HOOK_RESIDENT_TEST_HOLD"
REQUEST_TIMEOUT_S = 5.0  # a client sends its request at once; one that stalls is dropped
LEDGER_CHECK_S = 5.0  # idle, it looks this often for kept ledgers removed or replaced (db.release_gone)


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


@contextlib.contextmanager
def _as_requested(cwd: str, env: dict[str, str]):
    """os.environ's sent names and the working folder as the hook process has them."""
    saved = {k: v for k, v in os.environ.items() if k in wire.SENT_NAMES or k.startswith(wire.SENT_PREFIXES)}
    for k in saved:
        del os.environ[k]
    os.environ.update(env)
    try:
        os.chdir(cwd)
        yield
    finally:
        for k in [k for k in os.environ if k in wire.SENT_NAMES or k.startswith(wire.SENT_PREFIXES)]:
            del os.environ[k]
        os.environ.update(saved)
        os.chdir("/")


def _env(blob: bytes) -> dict[str, str]:
    out = {}
    for item in blob.split(b"\0") if blob else []:
        k, _, v = item.decode("utf-8", "surrogateescape").partition("=")
        if k in wire.SENT_NAMES or k.startswith(wire.SENT_PREFIXES):
            out[k] = v
    return out


def answer(request: bytes, ident: bytes) -> bytes:
    """The reply to one request: the in-process path's exit code, stdout and stderr."""
    fields = wire.unpack(request, 6)
    if fields is None or fields[0] != ident:
        return wire.pack(b"fallback", b"0", b"", b"")
    _, agent, argv, cwd, env, raw = fields
    agent_s = agent.decode()
    if agent_s not in ("claude-code", "gemini-cli"):
        return wire.pack(b"fallback", b"0", b"", b"")
    args = [a.decode("utf-8", "surrogateescape") for a in argv.split(b"\0")] if argv else []
    out, err = io.StringIO(), io.StringIO()
    with _as_requested(cwd.decode("utf-8", "surrogateescape"), _env(env)), contextlib.redirect_stderr(err):
        code = run(agent_s, args, stdin=io.BytesIO(raw), stdout=out)
    return wire.pack(b"ok", str(code).encode(), out.getvalue().encode(), err.getvalue().encode())


def _serve_one(conn: Any, ident: bytes, stamp: CodeStamp) -> None:
    if wire.peer_uid(conn) != os.getuid():
        return  # another user's process: not a word
    conn.settimeout(REQUEST_TIMEOUT_S)
    request = wire.read_all(conn)
    if stamp.changed():
        conn.sendall(wire.pack(b"fallback", b"0", b"", b""))
        raise _Stale
    reply = answer(request, ident)
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


def serve(ident: bytes | None = None) -> int:
    """Bind this install's socket and answer until idle; 0 also when another resident holds it."""
    ident = ident or wire.identity()
    folder = wire.socket_dir()
    os.makedirs(folder, mode=0o700, exist_ok=True)
    if not wire.private_dir(folder):
        return 1  # not ours, or open to others: clients would not use it anyway
    path = wire.socket_path(ident)
    lock = os.open(path + ".lock", os.O_RDWR | os.O_CREAT, 0o600)
    try:
        fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        os.close(lock)
        return 0  # one is running (or starting) already
    os.ftruncate(lock, 0)
    os.write(lock, f"{os.getpid()}\n".encode())
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
    ino = os.stat(path).st_ino
    sock.listen(64)
    idle = _idle_s()
    stamp = CodeStamp()
    live_db.keep_open()
    forwarding = _forwarding()
    forwarding.poke()
    last = time.monotonic()
    try:
        while True:
            left = idle - (time.monotonic() - last)
            if left <= 0:
                return 0
            sock.settimeout(min(left, LEDGER_CHECK_S))
            try:
                fd, _ = sock._accept()
            except TimeoutError:
                live_db.release_gone()
                continue
            conn = _socket.socket(fileno=fd)
            try:
                _serve_one(conn, ident, stamp)
            except _Stale:
                return 0
            except OSError:
                pass  # that client went away; the next one is served
            finally:
                conn.close()
                last = time.monotonic()
                forwarding.poke()  # after the answer is out: the new event goes to the team
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
