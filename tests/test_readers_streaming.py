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
from loopledger.events import Batch, SessionStart
from loopledger.formats import read

from bench.bench_readers import FORMATS

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


APPENDABLE = {
    "claude-code": ["claude_code/session.jsonl", "claude_code/agent-a7f3c21.jsonl"],
    "codex": ["codex/rollout-2025-12-02T09-00-00-019ad001-aaaa-7bbb-8ccc-123456789abc.jsonl"],
    "openai-chat": ["openai_chat/support.jsonl"],
    "openai-responses": ["openai_responses/weather.jsonl"],
    "anthropic": ["anthropic/messages.jsonl"],
}
FIX = Path(__file__).parent / "fixtures" / "formats"


def _sessions(path: Path, fmt: str) -> dict[str, tuple[list, int]]:
    """session key → (events, highest item line)."""
    out: dict[str, tuple[list, int]] = {}
    key = None
    for item in read(path, format=fmt):
        if isinstance(item, SessionStart):
            key = item.info.key
            out[key] = ([], item.line or 0)
        elif key is not None and hasattr(item, "line"):
            events, top = out[key]
            events.append(item)
            out[key] = (events, max(top, item.line or 0))
    return out


@pytest.mark.parametrize("fmt, rel", [(f, r) for f, rels in sorted(APPENDABLE.items()) for r in rels])
def test_an_appended_line_that_changes_a_session_shows_past_the_old_end(fmt, rel, tmp_path):
    """The worker re-judges only sessions with an item past the old end of an appended file;
    so whenever appending lines changes a session's events, one of its items must say so."""
    lines = (FIX / rel).read_bytes().splitlines(keepends=True)
    reads = {}
    for cut in range(1, len(lines) + 1):
        prefix = tmp_path / f"prefix-{cut}.jsonl"
        prefix.write_bytes(b"".join(lines[:cut]))
        reads[cut] = _sessions(prefix, fmt)
    for old in range(1, len(lines)):
        for new in range(old + 1, len(lines) + 1):
            for key, (events, _) in reads[old].items():
                new_events, top = reads[new][key]
                if new_events != events:
                    assert top > old, (f"{rel}: session {key} changed between line {old} and "
                                       f"{new} but none of its items is past line {old}")
