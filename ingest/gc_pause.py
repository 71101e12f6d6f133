"""Pause Python's cyclic garbage collector while a bulk of long-lived objects is built.

Rebuilding a long session (tens of thousands of events, each a few small objects) or replaying it
(a Step per event) allocates objects that all stay alive; every few hundred allocations the
collector scans them, and its full collections scan the whole heap (in the dashboard's server: every
cached session). Measured on the Replay page's 37,597-event session: half of `load_events`' time.
Nothing built in such a bulk is garbage, so pausing the collector changes no result; reference
counting still frees everything else at once, and any cycle left behind is collected on the next
collection after the pause. Thread-safe and nestable: the collector comes back when the last
concurrent pause ends (and only if it was on before the first).
"""

from __future__ import annotations

import gc
import threading
from collections.abc import Iterator
from contextlib import contextmanager

_lock = threading.Lock()
_depth = 0
_was_enabled = False


@contextmanager
def paused() -> Iterator[None]:
    global _depth, _was_enabled
    with _lock:
        if _depth == 0:
            _was_enabled = gc.isenabled()
            gc.disable()
        _depth += 1
    try:
        yield
    finally:
        with _lock:
            _depth -= 1
            if _depth == 0 and _was_enabled:
                gc.enable()
