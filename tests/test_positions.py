"""What an event's `line` counts (loopledger.formats.positions), checked on every sample file the
real readers read: "line" only where the file has that many lines, "message"/"record" only where
the file is one JSON document (whose positions are indexes, pointing at no line)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from loopledger import formats
from loopledger.analysis import explain
from loopledger.events import ReadError, SessionStart
from loopledger.formats import positions

SAMPLE = Path(__file__).resolve().parent.parent / "sample_data"
FILES = sorted(formats.units(p for p in SAMPLE.rglob("*") if p.is_file() and p.suffix in (".json", ".jsonl", ".md")
                             and p.name != "README.md"))


@pytest.mark.parametrize("path", FILES, ids=lambda p: str(p.relative_to(SAMPLE)))
def test_the_word_matches_what_the_reader_gives(path):
    fmt = formats.sniff(path)
    lines = [it.line for it in formats.read(path, fmt) if not isinstance(it, SessionStart | ReadError)
             and getattr(it, "line", None) is not None]
    word = positions.word(fmt, str(path))
    if word == positions.LINE:
        n_lines = len(path.read_bytes().splitlines())
        assert lines and max(lines) <= n_lines, (fmt, max(lines), n_lines)
    else:
        json.loads(path.read_text("utf-8"))  # one JSON document: its positions are message/record indexes
        assert word in (positions.MESSAGE, positions.RECORD)


def test_call_refs_and_runs_read_one_way():
    assert explain.call_ref(12, 35, 4, positions.MESSAGE) == "call #12 (message 4)"
    assert explain.call_ref(12, 35, 37) == "call #12 (line 37)"
    assert [explain.run_ref(i) for i in (0, 2)] == ["run #1", "run #3"] and explain.run_ref(None) == "run #?"
    assert positions.word("openai-chat", "/x/a.jsonl") == "line" and positions.word("openai-chat", "/x/a.json") == "message"
    assert positions.word("cline", "/x/api_conversation_history.jsonl") == "message"  # always a document
    assert positions.word("a-plugin-format", "/x/y.json") == "line"  # unknown: as readers give by default
