"""The hook's thin client: hand one `loopledger hook` event to the resident guard
(loopledger.live.resident) over a Unix socket, or run it in this process when there is none.

A hook process per tool call cannot be much faster than its interpreter while it imports the
policy, orjson and the ledger code each time; a resident that keeps them warm answers the same
event in a few ms. This module is what every hook process runs first, so it imports only what a
bare interpreter already holds (os, sys, io) and `_socket` (the C module: `socket` imports enum).

Never in the agent's way: no socket, a refused or timed-out connection, a socket not served by
this user, a resident of another version or environment, a resident that dies mid-request — all
run the in-process path (loopledger.live.hooks.run, exactly what the hook did before there was a
resident) on the same stdin bytes, then start a resident, detached, for the next calls.
LOOPLEDGER_HOOK_RESIDENT=0 turns both off.

Where: `$XDG_RUNTIME_DIR/loopledger/` (else `$XDG_CACHE_HOME/loopledger/run/`, default
~/.cache), a folder 0700 that must be this user's and closed to others, one socket (0600) per
install: its name hashes the package's location and version, the interpreter and the
environment read once per process (FIXED_ENV), and the resident checks the whole of that
identity on every request, so an upgraded install or another key never talks to an old one.

Within the deadline (loopledger.live.deadline): the hook's deadline is armed first thing, the
wait for the resident's reply ends FALLBACK_RESERVE_S before it (then this process answers
itself with what is left), and the request carries it, so the resident cuts its own waits to
it and drops a request that waited past it.

Wire format (both ways): MAGIC, then length-prefixed byte fields (4 bytes big-endian each).
Request: identity, agent, argv (NUL-joined), cwd, environment (k=v, NUL-joined), stdin,
deadline (time.time(), as text). Reply: status (b"ok" | b"fallback"), exit code, stdout, stderr.
"""

from __future__ import annotations

import _socket
import os
import sys
from time import time

from loopledger import folders
from loopledger.live import deadline as due

ENV_SWITCH = "LOOPLEDGER_HOOK_RESIDENT"
MAGIC = b"LLHOOK2\n"
# The environment the in-process path reads per event: the ledger (LOOPLEDGER_DB,
# LOOPLEDGER_DATABASE_URL), the log (LOOPLEDGER_HOOK_LOG, XDG_STATE_HOME), ~ (HOME), libpq (PG*).
SENT_PREFIXES = ("LOOPLEDGER_", "XDG_", "PG")
SENT_NAMES = ("HOME",)
# Read once per process (at import, or cached): a resident serves only requests that agree.
FIXED_ENV = ("HOME", "XDG_STATE_HOME", "XDG_CACHE_HOME", "XDG_CONFIG_HOME", "LOOPLEDGER_STATE_KEY", "LOOPLEDGER_HOOK_BUSY_TIMEOUT",
             "LOOPLEDGER_BUSY_TIMEOUT_MS", "LOOPLEDGER_QUERY_TIMEOUT", "PYTHONPATH", "PYTHONDONTWRITEBYTECODE",
             "PYTHONPYCACHEPREFIX")
CONNECT_TIMEOUT_S = 0.25  # a Unix socket connects at once or not at all; this only bounds a full backlog
SO_PEERCRED = getattr(_socket, "SO_PEERCRED", 17)


def enabled() -> bool:
    return os.environ.get(ENV_SWITCH, "1").strip().lower() not in ("0", "off", "no", "false")


def identity() -> bytes:
    """What a resident must share with a hook to answer for it."""
    from loopledger import __version__

    here = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    fixed = "\0".join(f"{k}={os.environ.get(k, '')}" for k in FIXED_ENV)
    return f"{__version__}\0{here}\0{sys.executable}\0{sys.version}\0{os.getuid()}\0{fixed}".encode(
        "utf-8", "surrogateescape")


def _fnv(data: bytes) -> str:
    """A short stable name for the identity (FNV-1a, 64 bits): hashlib costs an import; a
    collision only makes the resident answer `fallback`, since it checks the identity whole."""
    h = 0xcbf29ce484222325
    for b in data:
        h = ((h ^ b) * 0x100000001b3) & 0xFFFFFFFFFFFFFFFF
    return f"{h:016x}"


def socket_dir() -> str:
    runtime = os.environ.get("XDG_RUNTIME_DIR")
    if runtime:
        return os.path.join(runtime, "loopledger")
    return folders.cache_dir("run")


def socket_path(ident: bytes | None = None) -> str:
    return os.path.join(socket_dir(), f"hook-{_fnv(ident or identity())}.sock")


def address(path: str) -> tuple[str, int | None]:
    """The address to bind or connect to for a socket at `path`, and a folder fd to close after.
    AF_UNIX takes at most 107 bytes; a longer path (a deep HOME or XDG folder) is reached through
    the folder's descriptor, /proc/self/fd/N/name, which the kernel resolves like the path."""
    if len(os.fsencode(path)) < 100:
        return path, None
    folder, name = os.path.split(path)
    fd = os.open(folder, os.O_RDONLY | os.O_DIRECTORY)
    return f"/proc/self/fd/{fd}/{name}", fd


def private_dir(path: str) -> bool:
    """The folder is ours and closed to everyone else (a socket in a shared folder is not used)."""
    try:
        st = os.stat(path)
    except OSError:
        return False
    return (st.st_mode & 0o170000) == 0o040000 and st.st_uid == os.getuid() and not st.st_mode & 0o077


def peer_uid(sock: _socket.socket) -> int:
    """The uid of the process on the other end (SO_PEERCRED: pid, uid, gid as C ints)."""
    creds = sock.getsockopt(_socket.SOL_SOCKET, SO_PEERCRED, 12)
    return int.from_bytes(creds[4:8], sys.byteorder)


def pack(*fields: bytes) -> bytes:
    return MAGIC + b"".join(len(f).to_bytes(4, "big") + f for f in fields)


def unpack(data: bytes, n: int) -> list[bytes] | None:
    """The n fields of a message, or None when it is not one (cut short, other protocol)."""
    if not data.startswith(MAGIC):
        return None
    out, i = [], len(MAGIC)
    for _ in range(n):
        if i + 4 > len(data):
            return None
        size = int.from_bytes(data[i:i + 4], "big")
        i += 4
        if i + size > len(data):
            return None
        out.append(data[i:i + size])
        i += size
    return out if i == len(data) else None


def read_all(sock: _socket.socket) -> bytes:
    chunks = []
    while True:
        chunk = sock.recv(65536)
        if not chunk:
            return b"".join(chunks)
        chunks.append(chunk)


def sent_env() -> bytes:
    return b"\0".join(f"{k}={v}".encode("utf-8", "surrogateescape") for k, v in os.environ.items()
                      if k in SENT_NAMES or k.startswith(SENT_PREFIXES))


def _reply_timeout() -> float:
    """Long enough for the resident to wait out a busy ledger as the in-process path would."""
    try:
        busy = float(os.environ.get("LOOPLEDGER_HOOK_BUSY_TIMEOUT", "5"))
    except ValueError:
        busy = 5.0
    return busy + 5.0


def ask(agent: str, argv: list[str], raw: bytes,
        deadline: float) -> tuple[tuple[int, bytes, bytes] | None, bool, float | None]:
    """(exit code, stdout, stderr) from the resident, or None; whether to start one; and, when
    the resident got the whole request but died or hung before its reply, the time it was sent
    (the resident may have stored the event: loopledger.live.hooks.handle's redelivered_after).
    The reply is waited for the busy timeout + 5 s, and never past FALLBACK_RESERVE_S before
    `deadline`."""
    ident = identity()
    folder = socket_dir()
    if not os.path.isdir(folder):
        return None, True, None
    if not private_dir(folder):
        return None, False, None  # someone else's or open to others: never ours to use or to serve in
    sock = _socket.socket(_socket.AF_UNIX, _socket.SOCK_STREAM)
    sent = None
    try:
        sock.settimeout(CONNECT_TIMEOUT_S)
        fd = None
        try:
            addr, fd = address(os.path.join(folder, f"hook-{_fnv(ident)}.sock"))
            sock.connect(addr)
        except OSError:
            return None, True, None  # absent or dead (a stale socket file): start one
        finally:
            if fd is not None:
                os.close(fd)
        if peer_uid(sock) != os.getuid():
            return None, False, None
        sock.settimeout(max(due.MIN_WAIT_S, min(_reply_timeout(), deadline - time() - due.FALLBACK_RESERVE_S)))
        sent = time()
        sock.sendall(pack(ident, agent.encode(), "\0".join(argv).encode("utf-8", "surrogateescape"),
                          os.getcwd().encode("utf-8", "surrogateescape"), sent_env(), raw,
                          # the resident's own deadline: when this process stops waiting for it
                          repr(deadline - due.FALLBACK_RESERVE_S).encode()))
        sock.shutdown(_socket.SHUT_WR)
        reply = unpack(read_all(sock), 4)
    except OSError:
        # It died or hung mid-request: answer here (it restarts on a later call).
        return None, False, sent
    finally:
        sock.close()
    if reply is None:
        return None, False, sent  # it died before a whole reply: as above
    if reply[0] != b"ok":
        return None, True, None  # a resident that declined (stale) exits: start a fresh one
    return (int(reply[1]), reply[2], reply[3]), False, None


def _write(fd: int, data: bytes) -> None:
    while data:
        data = data[os.write(fd, data):]


def start_resident() -> None:
    """A resident for the next calls, detached (double fork, own session, no stdin/stdout), so
    the agent never waits for it. Started from `/` with -P: nothing in the agent's folder is on
    its import path."""
    try:
        pid = os.fork()
    except OSError:
        return
    if pid:
        try:
            os.waitpid(pid, 0)
        except OSError:
            pass
        return
    try:
        os.setsid()
        if os.fork():
            os._exit(0)
        os.chdir("/")
        null = os.open(os.devnull, os.O_RDWR)
        for fd in (0, 1, 2):
            os.dup2(null, fd)
        os.execv(sys.executable, [sys.executable, "-P", "-m", "loopledger.live.resident"])
    finally:
        os._exit(0)


def _in_process(agent: str, argv: list[str], exits: bool, deadline: float, stdin: object = None,
                redelivered_after: float | None = None) -> int:
    """The event decided in this process (loopledger.live.hooks.run), with the code dataclasses
    generates taken from the last hook's (loopledger.live.dataclass_code)."""
    from loopledger.live import dataclass_code

    dataclass_code.install()
    if exits:
        from loopledger.live import db

        db.leave_open_at_exit()
    from loopledger.live.hooks import run

    code = run(agent, argv, stdin=stdin, redelivered_after=redelivered_after, deadline=deadline)
    dataclass_code.save()
    return code


def _expired(agent: str, argv: list[str]) -> None:
    """SIGALRM at the deadline: allow, one line logged, and this process ends here."""
    try:
        from loopledger.live.hooks import expired

        expired(agent, argv)
    finally:
        os._exit(0)


def main(agent: str, argv: list[str], exits: bool = False) -> int:
    """One hook event: through the resident when it answers, else in this process. `exits`:
    the process ends with os._exit after this (the console script), so the in-process path
    leaves its SQLite ledger to the exit (loopledger.live.db.leave_open_at_exit). The process's
    deadline is armed first (loopledger.live.deadline: a stdin that never closes is bounded too)."""
    deadline = due.at()
    due.arm(deadline, lambda: _expired(agent, argv))
    if not enabled():
        return _in_process(agent, argv, exits, deadline)
    raw = sys.stdin.buffer.read()
    answer, start, sent = ask(agent, argv, raw, deadline)
    if answer is not None:
        due.disarm()
        code, out, err = answer
        _write(1, out)
        _write(2, err)
        return code
    import io

    code = _in_process(agent, argv, exits, deadline, stdin=io.BytesIO(raw), redelivered_after=sent)
    if start:
        sys.stdout.flush()
        sys.stderr.flush()
        start_resident()
    return code
