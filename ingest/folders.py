"""Where LoopLedger keeps its own files, per the XDG base directory rules: the one place these
folders are computed. Standard library only and nothing else imported, so the hook's fast path
(loopledger.entry, before anything else) can use it."""

from __future__ import annotations

import os


def cache_dir(*parts: str) -> str:
    """`$XDG_CACHE_HOME/loopledger/…` (default ~/.cache): bytecode, code digests, the resident's
    sockets when there is no runtime folder. Anything here can be deleted; it is rebuilt."""
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(base, "loopledger", *parts)


def state_dir(*parts: str) -> str:
    """`$XDG_STATE_HOME/loopledger/…` (default ~/.local/state): the snapshot signing key, the hook log."""
    base = os.environ.get("XDG_STATE_HOME") or os.path.join(os.path.expanduser("~"), ".local", "state")
    return os.path.join(base, "loopledger", *parts)
