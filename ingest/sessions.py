"""THE grouping of a reader's item stream into sessions: the worker, `loopledger replay` and
sample_data/golden.py all use it, so a session key the dashboard shows (`inst-1#2`) is the key
`replay --session` finds.

Rules: a `SessionStart` opens a session; events before any (a reader that forgot it) form one
session keyed "0" named after the file; read errors belong to the session they occur in (before
the first session: to the first); a key seen again in the same file becomes `key#2`, `key#3`, …
(two sessions under one key: a reader quirk or a concatenated file; both are kept). A reader's
`Checkpoint` (formats.read_from) is noted with the session open at it and how many of its events
came before it; a resumed read starts inside session `current`.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from loopledger.events import Checkpoint, Event, ReadError, SessionInfo, SessionStart


@dataclass
class SessionGroup:
    info: SessionInfo | None  # None only for a file with read errors and no session
    events: list[Event] = field(default_factory=list)
    errors: list[ReadError] = field(default_factory=list)
    max_line: int | None = 0  # the last source line its items came from (None: some unknown)
    cut: int | None = None  # events before the reader's Checkpoint, if it fell in this session
    resumed: bool = False  # the session a resumed read continues (no SessionStart of its own)


class SessionGrouper:
    """Groups items; after iterating, `.checkpoint` and `.checkpoint_key` tell where a later
    read can resume and in which session (its final key); `.repeats` is the key counter."""

    def __init__(self, path: Path | str = "", *, repeats: dict[str, int] | None = None,
                 current: SessionInfo | None = None) -> None:
        self.path = Path(path)
        self.repeats: dict[str, int] = dict(repeats or {})
        self.current = current
        self.checkpoint: Checkpoint | None = None
        self.checkpoint_key: str | None = None

    def _key(self, info: SessionInfo) -> SessionInfo:
        n = self.repeats.get(info.key)
        if n is not None:
            self.repeats[info.key] = n + 1
            return dataclasses.replace(info, key=f"{info.key}#{n + 1}")
        self.repeats[info.key] = 1
        return info

    def groups(self, items: Iterable[Any]) -> Iterator[SessionGroup]:
        g: SessionGroup | None = None
        if self.current is not None:
            g = SessionGroup(self.current, resumed=True)
        orphan_errors: list[ReadError] = []
        for item in items:
            if isinstance(item, ReadError):
                (g.errors if g is not None else orphan_errors).append(item)
                continue
            if isinstance(item, SessionStart):
                if g is not None:
                    yield g
                g = SessionGroup(self._key(item.info), [], orphan_errors, item.line or 0)
                orphan_errors = []
                continue
            if isinstance(item, Checkpoint):
                self.checkpoint = item
                self.checkpoint_key = g.info.key if g is not None and g.info is not None else None
                if g is not None:
                    g.cut = len(g.events)
                continue
            if g is None:  # a reader that forgot its SessionStart: one session named after the file
                g = SessionGroup(self._key(SessionInfo(key="0", format="unknown", title=self.path.name)),
                                 [], orphan_errors, 0)
                orphan_errors = []
            g.events.append(item)
            if g.max_line is not None:
                line = item.line
                g.max_line = None if line is None else max(g.max_line, line)
        if g is not None:
            yield g
        elif orphan_errors:
            yield SessionGroup(None, [], orphan_errors, None)


def group_sessions(items: Iterable[Any], path: Path | str = "") -> Iterator[SessionGroup]:
    """A reader's items as sessions (see the module docstring)."""
    return SessionGrouper(path).groups(items)
