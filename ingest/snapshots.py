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

import hashlib
import hmac
import inspect
import os
import pickle
import zlib
from collections.abc import Iterable
from pathlib import Path
from typing import Any

FORMAT = "loopledger-resume/1"
_MAC_BYTES = 32


# ── code fingerprint and signing key ─────────────────────────────────────────────────────────


def file_digest(paths: Iterable[Path]) -> str:
    h = hashlib.sha256(FORMAT.encode())
    for p in sorted(set(paths)):
        try:
            h.update(p.name.encode() + b"\0" + p.read_bytes())
        except OSError:
            h.update(p.name.encode() + b"\0?")
    return h.hexdigest()[:32]


_versions: dict[Any, str] = {}


def _base_files() -> list[Path]:
    here = Path(__file__).resolve().parent
    return [here / "replay.py", here / "resume.py", here / "snapshots.py", here / "events.py", *(here / "detectors").glob("*.py")]


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
        path = Path(src).resolve() if src else None
        v = base if path is None or path in _base_files() else hashlib.sha256(
            (base + file_digest([path])).encode()).hexdigest()[:32]
        _versions[cls] = v
    return v


def context_version() -> str:
    v = _versions.get("context")
    if v is None:
        here = Path(__file__).resolve().parent
        v = _versions["context"] = file_digest([here / "resume.py", here / "replay.py", here / "events.py",
                                                 here / "ledger" / "store.py"])
    return v


_key: bytes | None = None


def _state_key() -> bytes:
    """This user's signing key for snapshots (see the module docstring)."""
    global _key
    if _key is not None:
        return _key
    env = os.environ.get("LOOPLEDGER_STATE_KEY")
    if env:
        _key = hashlib.sha256(env.encode()).digest()
        return _key
    base = Path(os.environ.get("XDG_STATE_HOME") or Path.home() / ".local" / "state") / "loopledger"
    path = base / "resume.key"
    try:
        _key = path.read_bytes()
    except FileNotFoundError:
        base.mkdir(parents=True, exist_ok=True)
        key = os.urandom(32)
        try:
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        except FileExistsError:  # another process made it meanwhile: use theirs
            _key = path.read_bytes()
        else:
            with os.fdopen(fd, "wb") as fh:
                fh.write(key)
            _key = key
    if len(_key) < 16:
        raise RuntimeError(f"{path}: resume key file is too short; delete it to make a new one")
    return _key


def seal(obj: Any, version: str) -> bytes | None:
    """Signed, compressed pickle of `obj`; None when it cannot be pickled (e.g. arguments nested
    deeper than pickle recurses): the caller then stores no snapshot and replays in full."""
    try:
        raw = zlib.compress(pickle.dumps(obj, protocol=5), 1)
    except (RecursionError, pickle.PicklingError, TypeError, AttributeError):
        return None
    mac = hmac.new(_state_key(), version.encode() + b"\0" + raw, hashlib.sha256).digest()
    return mac + raw


def unseal(blob: bytes | None, version: str) -> Any | None:
    """The object `seal` stored, or None when the blob is absent, stale or not ours."""
    if not blob or len(blob) <= _MAC_BYTES:
        return None
    blob = bytes(blob)
    mac, raw = blob[:_MAC_BYTES], blob[_MAC_BYTES:]
    want = hmac.new(_state_key(), version.encode() + b"\0" + raw, hashlib.sha256).digest()
    if not hmac.compare_digest(mac, want):
        return None
    try:
        return pickle.loads(zlib.decompress(raw))  # noqa: S301  (signed by us: see the docstring)
    except Exception:  # noqa: BLE001  (a snapshot is derived data: unreadable = rebuild)
        return None
