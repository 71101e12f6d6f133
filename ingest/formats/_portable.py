"""What every reader's output goes through on its way out of `formats.read`: the same values on
SQLite and PostgreSQL.

- Timestamps become ISO 8601 UTC (`_common.iso_utc`). Where the transcript said more than the
  UTC instant (an offset, a zone name such as Codex's "…+01:00[Europe/Berlin]"), the session's
  original start is kept in `SessionInfo.meta["started_at_original"]`.
- NUL characters (U+0000, legal in JSON strings) cannot be stored in a PostgreSQL text column
  at all; SQLite takes them. They are replaced by U+FFFD in every text, and the first one of a
  file is reported once as a ReadError naming the file and line, so a row PostgreSQL would
  refuse becomes one clear line instead of a failed file (and both backends store the same).
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Iterator
from pathlib import Path

from loopledger.events import (
    Answer,
    Answers,
    Batch,
    Call,
    Item,
    Prose,
    ReadError,
    Retry,
    SessionInfo,
    SessionStart,
    UserTurn,
)
from loopledger.formats._common import _CANON_TS, iso_utc

NUL = "\x00"
REPLACEMENT = "\ufffd"


def _ts(value: str | None) -> str | None:
    if value is None or _CANON_TS.match(value):
        return value
    return iso_utc(value)


def _clean(text: str) -> str:
    return text.replace(NUL, REPLACEMENT) if NUL in text else text


def _info(info: SessionInfo) -> SessionInfo:
    started = _ts(info.started_at)
    strings = [info.key, info.title, info.agent or "", info.model or "", info.parent_key or ""]
    if started == info.started_at and not any(NUL in s for s in strings):
        return info
    meta = dict(info.meta)
    if started != info.started_at and info.started_at is not None and _said_more(info.started_at):
        meta["started_at_original"] = info.started_at
    return SessionInfo(_clean(info.key), info.format, _clean(info.title),
                       _clean(info.agent) if info.agent else info.agent,
                       _clean(info.model) if info.model else info.model, started,
                       _clean(info.parent_key) if info.parent_key else info.parent_key, meta)


_OFFSET = re.compile(r"[+-]\d\d:?\d\d\Z")


def _said_more(original: str) -> bool:
    """A zone name or an offset other than UTC: what the UTC form does not carry."""
    text = original.strip()
    offset = _OFFSET.search(text)
    return "[" in text or (offset is not None and offset.group(0).lstrip("+-").replace(":", "") != "0000")


def _call(c: Call) -> Call:
    if (c.id is None or NUL not in c.id) and NUL not in c.name:
        return c
    return Call(_clean(c.id) if c.id else c.id, _clean(c.name), c.args, c.args_malformed)


def _event(item: Item) -> Item:
    """The item with its timestamps normalized and NUL characters replaced (the same object when
    nothing changes: the common case costs a regex match)."""
    if isinstance(item, Answers):
        for a in item.answers:  # the common case first: nothing to change, no tuple built
            if (a.ts is not None and not _CANON_TS.match(a.ts)) or NUL in a.text or (a.call_id and NUL in a.call_id):
                break
        else:
            return item
        answers = tuple(a if _ts(a.ts) == a.ts and NUL not in a.text and (a.call_id is None or NUL not in a.call_id)
                        else Answer(_clean(a.call_id) if a.call_id else a.call_id, _clean(a.text), a.is_error,
                                    _ts(a.ts), "" if NUL in a.text else a.digest)
                        for a in item.answers)
        changed = any(x is not y for x, y in zip(answers, item.answers, strict=True))
        return Answers(answers, item.line) if changed else item
    if isinstance(item, Batch):
        ts = _ts(item.ts)
        if ts == item.ts and NUL not in item.text:
            for c in item.calls:
                if NUL in c.name or (c.id is not None and NUL in c.id):
                    break
            else:
                return item
        calls = tuple(_call(c) for c in item.calls)
        if ts == item.ts and NUL not in item.text and all(x is y for x, y in zip(calls, item.calls, strict=True)):
            return item
        return Batch(calls, _clean(item.text), ts, item.line, item.usage)
    if isinstance(item, UserTurn | Prose | Retry):
        ts = _ts(item.ts)
        if ts == item.ts and NUL not in item.text:
            return item
        return dataclasses.replace(item, text=_clean(item.text), ts=ts)
    if isinstance(item, SessionStart):
        info = _info(item.info)
        return item if info is item.info else SessionStart(info, item.line)
    return item


def _has_nul(item: Item) -> bool:
    if isinstance(item, Answers):
        return any(NUL in a.text or (a.call_id and NUL in a.call_id) for a in item.answers)
    if isinstance(item, Batch):
        return NUL in item.text or any(NUL in c.name or (c.id and NUL in c.id) for c in item.calls)
    if isinstance(item, UserTurn | Prose | Retry):
        return NUL in item.text
    if isinstance(item, SessionStart):
        i = item.info
        return any(NUL in s for s in (i.key, i.title, i.agent or "", i.model or "", i.parent_key or ""))
    return False


def portable(items: Iterator[Item], path: Path) -> Iterator[Item]:
    reported = False
    for item in items:
        if isinstance(item, ReadError):
            yield item
            continue
        out = _event(item)
        # A NUL always changes the item (it is replaced), so an unchanged one needs no search.
        if not reported and out is not item and _has_nul(item):
            reported = True
            yield ReadError(str(path), getattr(item, "line", None),
                            "text holds NUL characters (\\u0000), which PostgreSQL cannot store: "
                            "replaced by U+FFFD (first of the file)")
        yield out
