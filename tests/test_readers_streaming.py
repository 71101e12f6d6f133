"""Memory stays flat: a JSONL file four times longer does not make a reader hold more.

Measured with tracemalloc (allocations, not time): the peak while draining read() over N and
4N calls must not grow with N. A reader that kept lines or events would grow about fourfold.
"""

from __future__ import annotations

import random
import tracemalloc
from pathlib import Path

import orjson
import pytest

from bench.bench_readers import FORMATS
from ingest.events import Batch
from ingest.formats import read

SMALL = 1500


def _write(path: Path, fmt: str, n: int) -> Path:
    with open(path, "wb") as fh:
        for rec in FORMATS[fmt](random.Random(3), n):
            fh.write(orjson.dumps(rec) + b"\n")
    return path


def _peak(path: Path, fmt: str) -> tuple[int, int]:
    tracemalloc.start()
    try:
        calls = sum(len(i.calls) for i in read(path, format=fmt) if isinstance(i, Batch))
        return tracemalloc.get_traced_memory()[1], calls
    finally:
        tracemalloc.stop()


@pytest.mark.parametrize("fmt", sorted(FORMATS))
def test_peak_memory_does_not_grow_with_the_file(fmt, tmp_path):
    small = _write(tmp_path / "small.jsonl", fmt, SMALL)
    big = _write(tmp_path / "big.jsonl", fmt, 4 * SMALL)
    peak_small, calls_small = _peak(small, fmt)
    peak_big, calls_big = _peak(big, fmt)
    assert (calls_small, calls_big) == (SMALL, 4 * SMALL)
    assert big.stat().st_size > 3 * small.stat().st_size
    # generous slack for allocator noise; holding the file would be ~4x
    assert peak_big < 1.5 * peak_small + 256 * 1024, (peak_small, peak_big)
