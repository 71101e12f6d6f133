"""A compact in-memory index of 64-bit digests, for what the receiver must remember per span
all day (that a span was spooled; which frozen session a span, or a span's parent, belongs to)
without a Python object per span.

Entries live in sorted arrays (`array('Q')` digests, `array('I')` values beside them: 12 bytes
an entry, invisible to the garbage collector), plus a small dict of recent additions merged in
once it holds more than an eighth of them (amortised O(log n) an addition; a lookup is a
bisect). A digest may carry several values (a multimap).

Digests come from Python's `hash` of the ids (randomised per process): the index is rebuilt at
start. Two different ids share a digest with odds about n²/2⁶⁵ (3·10⁻⁸ for a million spans).
"""

from __future__ import annotations

from array import array
from bisect import bisect_left
from collections.abc import Iterable

MASK64 = (1 << 64) - 1
MERGE_AT = 4096  # recent entries always allowed before a merge


def digest(*parts: str) -> int:
    """64 bits for a tuple of ids (Python's tuple hash: SipHash of each string, combined)."""
    return hash(parts) & MASK64


class DigestIndex:
    def __init__(self) -> None:
        self._keys = array("Q")
        self._vals = array("I")
        self._recent: dict[int, list[int]] = {}  # digest → values, not merged yet
        self._n_recent = 0
        self._valued = False  # some value is not 0 (else a merge sorts bare ints: the spool's set)

    def __len__(self) -> int:
        return len(self._keys) + self._n_recent

    def add(self, d: int, value: int = 0) -> None:
        self._recent.setdefault(d & MASK64, []).append(value)
        self._valued = self._valued or value != 0
        self._n_recent += 1
        if self._n_recent > max(MERGE_AT, len(self._keys) >> 3):
            self._merge()

    def update(self, ds: Iterable[int]) -> None:
        for d in ds:
            self.add(d)

    def _merge(self) -> None:
        if not self._valued:
            keys = [k for k, vs in self._recent.items() for _ in vs]
            keys.extend(self._keys)
            keys.sort()
            self._keys = array("Q", keys)
            self._vals = array("I", bytes(4 * len(keys)))
            self._recent, self._n_recent = {}, 0
            return
        pairs = [(k, v) for k, vs in self._recent.items() for v in vs]
        pairs.extend(zip(self._keys, self._vals, strict=True))
        pairs.sort()
        self._keys = array("Q", (k for k, _ in pairs))
        self._vals = array("I", (v for _, v in pairs))
        self._recent, self._n_recent = {}, 0

    def values(self, d: int) -> list[int]:
        """Every value added under `d`."""
        d &= MASK64
        out = list(self._recent.get(d, ()))
        i = bisect_left(self._keys, d)
        while i < len(self._keys) and self._keys[i] == d:
            out.append(self._vals[i])
            i += 1
        return out

    def __contains__(self, d: int) -> bool:
        d &= MASK64
        if d in self._recent:
            return True
        i = bisect_left(self._keys, d)
        return i < len(self._keys) and self._keys[i] == d

    def nbytes(self) -> int:
        """Bytes of the merged arrays (the recent dict holds at most an eighth as many entries, or MERGE_AT)."""
        return self._keys.itemsize * len(self._keys) + self._vals.itemsize * len(self._vals)
