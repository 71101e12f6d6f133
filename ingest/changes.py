"""Change detection: what a file's bytes mean against its `sources` row.

unchanged (size and mtime as stored: not even read) · touched (same bytes) · appended (the bytes
up to the stored offset hash to the stored hash) · rewritten · new. A file recorded with status
`error` is never "unchanged": the failure may have come from outside it (a bad flag, a crash), so
every later ingest tries it again.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import xxhash

STATUS_OK, STATUS_QUARANTINED, STATUS_ERROR, STATUS_MISSING = "ok", "quarantined", "error", "missing"
_HASH_CHUNK = 1 << 20


@dataclass(frozen=True)
class Scan:
    size: int
    mtime: float
    full_hash: str
    prefix_hash: str | None  # hash of the first `old_offset` bytes (None when the file is shorter)
    prefix_lines: int  # newlines within those bytes: the old end, as a line number
    lines: int  # the number of the file's last line
    ends_with_newline: bool


def scan(path: Path, old_offset: int) -> Scan:
    st = path.stat()
    full = xxhash.xxh3_128()
    prefix_hash, prefix_lines, newlines, done, last = None, 0, 0, 0, b""
    with open(path, "rb") as fh:
        while chunk := fh.read(_HASH_CHUNK):
            if done < old_offset:
                part = chunk[: old_offset - done]
                prefix_lines += part.count(b"\n")
                full.update(part)
                if done + len(chunk) >= old_offset:
                    prefix_hash = full.hexdigest()
                full.update(chunk[len(part):])
            else:
                full.update(chunk)
            done += len(chunk)
            newlines += chunk.count(b"\n")
            last = chunk[-1:]
    if old_offset == 0:
        prefix_hash = xxhash.xxh3_128().hexdigest()
    ends = last == b"\n"
    return Scan(done, st.st_mtime, full.hexdigest(), prefix_hash, prefix_lines,
                newlines + (0 if ends or not done else 1), ends)


def unchanged(row: dict[str, Any] | None, size: int, mtime: float) -> bool:
    return (row is not None and row["status"] in (STATUS_OK, STATUS_QUARANTINED)
            and row["size"] == size and row["mtime"] == mtime)


def decide(row: dict[str, Any], sc: Scan) -> str:
    """unchanged, touched, appended, rewritten or new."""
    if unchanged(row, sc.size, sc.mtime):
        return "unchanged"
    if not row["byte_offset"] or row["status"] == STATUS_ERROR:
        return "new"  # an errored file is read whole, as if never seen
    if row["status"] == STATUS_MISSING:
        return "rewritten"  # it came back: read it whole
    if sc.size == row["size"] and sc.full_hash == row["content_hash"]:
        return "touched"  # mtime moved, bytes did not
    if sc.size > row["byte_offset"] and sc.prefix_hash == row["content_hash"]:
        return "appended"
    return "rewritten"
