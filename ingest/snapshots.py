"""Sealed snapshots: a detector's (or the replay engine's) state as signed bytes, and the code
fingerprint that says when such bytes are stale. One mechanism for every state LoopLedger keeps
between runs: the worker's resume points (loopledger.resume) and the live hook's enforced-policy
state (loopledger.live.session). Standard library only, so the hook's fast path can use it.

Trust: unpickling runs code chosen by whoever wrote the bytes. Every blob is signed with
HMAC-SHA256 under a key only this user's LoopLedger reads (`$LOOPLEDGER_STATE_KEY`, else
`$XDG_STATE_HOME/loopledger/resume.key` created 0600 on first use), and a blob whose signature
does not verify is never unpickled (treated as absent: the caller rebuilds the state).
"""

from __future__ import annotations

import contextlib
import hmac
import inspect
import os
import pickle
import time
import zlib
from collections.abc import Iterable
from hashlib import sha256
from typing import Any

from loopledger import folders

FORMAT = "loopledger-resume/1"
_MAC_BYTES = 32


def _sort_key(path: str) -> list[str]:
    return path.split(os.sep)  # pathlib's order (by parts), which the digests were made in


# ── code fingerprint and signing key ─────────────────────────────────────────────────────────


def file_digest(paths: Iterable[str | os.PathLike[str]]) -> str:
    """A digest of the files' names and contents. Reading and hashing every detector's source
    is most of a millisecond of each hook process, so the digest is kept in LoopLedger's cache
    under the files' stat stamps (device, inode, size, mtime and ctime in ns: stricter than the
    mtime-in-seconds and size Python itself trusts to reuse bytecode; and only for files unchanged
    for a while, _settled) and computed again when any of them differs."""
    files = sorted({os.fspath(p) for p in paths}, key=_sort_key)
    stamp = _stamp(files)
    cached = _cached_digest(stamp) if stamp is not None else None
    if cached is not None:
        return cached
    h = sha256(FORMAT.encode())
    for p in files:
        name = os.path.basename(p).encode()
        try:
            with open(p, "rb") as fh:
                h.update(name + b"\0" + fh.read())
        except OSError:
            h.update(name + b"\0?")
    digest = h.hexdigest()[:32]
    if stamp is not None and _settled(files):
        _keep_digest(stamp, digest)
    return digest


# A file changed this recently may change again within its clock's granularity (a few ms)
# without its stamp moving: its digest is not kept (git's "racily clean" rule).
_SETTLED_NS = 2_000_000_000


def _settled(files: list[str]) -> bool:
    now = time.time_ns()
    try:
        return all(now - max(st.st_mtime_ns, st.st_ctime_ns) > _SETTLED_NS for st in map(os.stat, files))
    except OSError:
        return False


def _stamp(files: list[str]) -> bytes | None:
    """What identifies these files' contents without reading them (None: one is missing)."""
    lines = [FORMAT]
    for p in files:
        try:
            st = os.stat(p)
        except OSError:
            return None
        lines.append(f"{p}\0{st.st_dev}\0{st.st_ino}\0{st.st_size}\0{st.st_mtime_ns}\0{st.st_ctime_ns}")
    return "\n".join(lines).encode("utf-8", "surrogateescape")


def _digest_file(stamp: bytes) -> str:
    return folders.cache_dir("digests", sha256(stamp).hexdigest()[:32])


def _cached_digest(stamp: bytes) -> str | None:
    try:
        with open(_digest_file(stamp), "rb") as fh:
            kept, sep, digest = fh.read().rpartition(b"\n=")
    except OSError:
        return None
    if not sep or kept != stamp or len(digest) != 32:
        return None  # another set of files under the same name, or a torn file: not ours
    return digest.decode("ascii", "replace")


def _keep_digest(stamp: bytes, digest: str) -> None:
    path = _digest_file(stamp)
    tmp = f"{path}.{os.getpid()}"
    try:
        os.makedirs(os.path.dirname(path), mode=0o700, exist_ok=True)
        with open(tmp, "wb") as fh:
            fh.write(stamp + b"\n=" + digest.encode())
        os.replace(tmp, path)  # whole or not at all, for a hook reading it meanwhile
    except OSError:
        with contextlib.suppress(OSError):
            os.unlink(tmp)


_versions: dict[Any, str] = {}


_HERE = os.path.dirname(os.path.realpath(__file__))


def _base_files() -> list[str]:
    detectors = os.path.join(_HERE, "detectors")
    try:
        names = sorted(n for n in os.listdir(detectors) if n.endswith(".py"))
    except OSError:
        names = []
    return [os.path.join(_HERE, n) for n in ("replay.py", "resume.py", "snapshots.py", "events.py")] + \
        [os.path.join(detectors, n) for n in names]


def version_of(policy: Any) -> str:
    """A digest of the code whose objects a snapshot of `policy` pickles: the engine and the
    built-in detectors, plus the policy's own module when it lives elsewhere (a plugin)."""
    cls = type(policy)
    v = _versions.get(cls)
    if v is None:
        base = _versions.get("base")
        if base is None:
            base = _versions["base"] = file_digest(_base_files())
        src = inspect.getsourcefile(cls)
        path = os.path.realpath(src) if src else None
        v = base if path is None or path in _base_files() else sha256(
            (base + file_digest([path])).encode()).hexdigest()[:32]
        _versions[cls] = v
    return v


def context_version() -> str:
    v = _versions.get("context")
    if v is None:
        v = _versions["context"] = file_digest([os.path.join(_HERE, "resume.py"), os.path.join(_HERE, "replay.py"),
                                                 os.path.join(_HERE, "events.py"),
                                                 os.path.join(_HERE, "ledger", "store.py")])
    return v


_key: bytes | None = None


def _state_key() -> bytes:
    """This user's signing key for snapshots (see the module docstring)."""
    global _key
    if _key is not None:
        return _key
    env = os.environ.get("LOOPLEDGER_STATE_KEY")
    if env:
        _key = sha256(env.encode()).digest()
        return _key
    base = folders.state_dir()
    path = os.path.join(base, "resume.key")
    try:
        _key = _read(path)
    except FileNotFoundError:
        os.makedirs(base, exist_ok=True)
        key = os.urandom(32)
        try:
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        except FileExistsError:  # another process made it meanwhile: use theirs
            _key = _read(path)
        else:
            with os.fdopen(fd, "wb") as fh:
                fh.write(key)
            _key = key
    if len(_key) < 16:
        raise RuntimeError(f"{path}: resume key file is too short; delete it to make a new one")
    return _key


def _read(path: str) -> bytes:
    with open(path, "rb") as fh:
        return fh.read()


def _mac(version: str, raw: bytes) -> bytes:
    return hmac.digest(_state_key(), version.encode() + b"\0" + raw, "sha256")


def seal(obj: Any, version: str) -> bytes | None:
    """Signed, compressed pickle of `obj`; None when it cannot be pickled (e.g. arguments nested
    deeper than pickle recurses): the caller then stores no snapshot and replays in full."""
    try:
        raw = zlib.compress(pickle.dumps(obj, protocol=5), 1)
    except (RecursionError, pickle.PicklingError, TypeError, AttributeError):
        return None
    return _mac(version, raw) + raw


def unseal(blob: bytes | None, version: str) -> Any | None:
    """The object `seal` stored, or None when the blob is absent, stale or not ours."""
    if not blob or len(blob) <= _MAC_BYTES:
        return None
    blob = bytes(blob)
    mac, raw = blob[:_MAC_BYTES], blob[_MAC_BYTES:]
    if not hmac.compare_digest(mac, _mac(version, raw)):
        return None
    try:
        return pickle.loads(zlib.decompress(raw))  # noqa: S301  (signed by us: see the docstring)
    except Exception:  # noqa: BLE001  (a snapshot is derived data: unreadable = rebuild)
        return None
