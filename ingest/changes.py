"""Change detection: what a file's bytes mean against its `sources` row.

unchanged (size and mtime as stored: not even read) · touched (same bytes) · appended (the bytes
up to the stored offset hash to the stored hash) · truncated (shorter than the bytes already read:
emptied by `: > f`, rotated, cut) · rewritten · new. A file recorded with status
`error` is never "unchanged": the failure may have come from outside it (a bad flag, a crash), so
every later ingest tries it again.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import xxhash
from loopledger import formats

STATUS_OK, STATUS_QUARANTINED, STATUS_ERROR, STATUS_MISSING = "ok", "quarantined", "error", "missing"
# The sessions a file held before it shrank, kept under a source row of their own (file_ingest).
STATUS_TRUNCATED = "truncated"
_HASH_CHUNK = 1 << 20


@dataclass(frozen=True)
class Scan:
    path: Path
    size: int
    mtime: float
    full_hash: str
    prefix_hash: str | None  # hash of the first `old_offset` bytes (None when the file is shorter)
    old_offset: int
    ends_with_newline: bool

    @property
    def prefix_lines(self) -> int:
        """Newlines within the first `old_offset` bytes: the old end, as a line number (counted
        when asked: an append resumed from a checkpoint never needs it)."""
        return count_newlines(self.path, self.old_offset)

    @property
    def lines(self) -> int:
        """The number of the file's last line (counted when asked)."""
        n = count_newlines(self.path, self.size)
        return n + (0 if self.ends_with_newline or not self.size else 1)


def count_newlines(path: Path, upto: int) -> int:
    n = done = 0
    with open(path, "rb") as fh:
        while done < upto and (chunk := fh.read(min(_HASH_CHUNK, upto - done))):
            n += chunk.count(b"\n")
            done += len(chunk)
    return n


def stamp(path: Path) -> tuple[int, float]:
    """Size and mtime of what `path` stands for: the file's own, or, for a unit whose session
    is spread over member files (OpenCode storage), their total size and newest mtime, so a new
    or rewritten member is a change of the unit. Raises FileNotFoundError like stat()."""
    st = path.stat()
    parts = formats.members(path)
    if len(parts) == 1:
        return st.st_size, st.st_mtime
    size, mtime = st.st_size, st.st_mtime
    for p in parts[1:]:
        try:
            m = p.stat()
        except OSError:
            continue  # removed while we looked: the next look sees the new set
        size, mtime = size + m.st_size, max(mtime, m.st_mtime)
    return size, mtime


def _scan_members(path: Path, parts: list[Path]) -> Scan:
    """A multi-file unit is never "appended" (its bytes are not one stream): its hash covers
    every member's name and bytes, so any change reads it whole."""
    size, mtime = stamp(path)
    full = xxhash.xxh3_128()
    for p in parts:
        full.update(p.name.encode() + b"\0")
        try:
            with open(p, "rb") as fh:
                while chunk := fh.read(_HASH_CHUNK):
                    full.update(chunk)
        except OSError:
            continue
    return Scan(path, size, mtime, full.hexdigest(), None, 0, True)


def scan(path: Path, old_offset: int) -> Scan:
    """Size, mtime, the hash of all bytes and of the first `old_offset` (one pass, no parsing)."""
    parts = formats.members(path)
    if len(parts) > 1:
        return _scan_members(path, parts)
    st = path.stat()
    full = xxhash.xxh3_128()
    prefix_hash, done, last = None, 0, b""
    with open(path, "rb") as fh:
        while chunk := fh.read(_HASH_CHUNK):
            if done < old_offset:
                part = chunk[: old_offset - done]
                full.update(part)
                if done + len(chunk) >= old_offset:
                    prefix_hash = full.hexdigest()
                full.update(chunk[len(part):])
            else:
                full.update(chunk)
            done += len(chunk)
            last = chunk[-1:]
    if old_offset == 0:
        prefix_hash = xxhash.xxh3_128().hexdigest()
    return Scan(path, done, st.st_mtime, full.hexdigest(), prefix_hash, old_offset, last == b"\n")


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
    if sc.size < row["byte_offset"]:
        return "truncated"  # bytes already read are gone: what the ledger holds from them is kept
    return "rewritten"
