"""corpus_e/: a fifth labelled set, gathered from repositories no other set draws on (corpus_e/README.md),
read by the real readers and checked against counts made without them. No guard runs here: the lead
scores the set.

The transcripts are not in git (the fetch tool's terms keep fetched data out of developers'
commits): corpus_e/labels.csv and corpus_e/SOURCES.md are. The files are read from ../shared/corpus_e
when it holds them (where the lead places them, byte for byte from SOURCES.md), else from this
checkout's corpus_e/ (the worktree that fetched them), or LOOPLEDGER_CORPUS_E_DATA; the tests skip
where none of these holds the files.

Counts made without loopledger (this module's `_independent`, reading the files itself):
- Claude Code JSONL: the session is the file's `sessionId` (main sessions) or `agentId` (subagents);
  its calls are the distinct `tool_use` ids of the assistant lines. One file (the general-tool-calls
  fixture) holds 110 such blocks with only 65 distinct ids: Claude Code copied the conversation
  into the file again when the session was resumed; the reader reads the copy once.
- The session-share fixtures open with `//` comment lines (the fixture's source note), which are not
  JSON: the reader quarantines exactly those lines.
- Aider chat histories: one session per `# aider chat started at` line, keyed 1, 2, ...
"""

from __future__ import annotations

import csv
import functools
import hashlib
import json
import os
import re
from pathlib import Path

import pytest
from loopledger.analysis.replay_table import sessions_of
from loopledger.events import Batch
from loopledger.formats import read, sniff

from tests.conftest import ROOT

pytestmark = pytest.mark.corpus

LABELS = ROOT / "corpus_e"
CC = "claude-code-jsonl/"
AIDER = "aider-chat-history-md/"


def _pinned() -> dict[str, str]:
    """file → sha256 prefix, as SOURCES.md lists them."""
    return dict(re.findall(r"^\| `([^`]+)` \|.*\| `([0-9a-f]{16})` \|$",
                           (LABELS / "SOURCES.md").read_text(encoding="utf-8"), re.M))


def _holds_files(folder: Path) -> bool:
    return all((folder / f).is_file() for f in _pinned())


def _data_dir() -> Path | None:
    named = os.environ.get("LOOPLEDGER_CORPUS_E_DATA")
    candidates = [Path(named)] if named else [ROOT.parent / "shared" / "corpus_e", LABELS]
    return next((c for c in candidates if _holds_files(c)), None)


@pytest.fixture(scope="module")
def data_dir() -> Path:
    found = _data_dir()
    if found is None:
        pytest.skip("the fetched transcripts are in neither ../shared/corpus_e nor corpus_e/ (see corpus_e/README.md)")
    return found


def _labels() -> list[dict[str, str]]:
    with (LABELS / "labels.csv").open(encoding="utf-8", newline="") as fh:
        return list(csv.DictReader(fh))


@functools.cache
def _read(path: Path) -> tuple[dict[str, int], tuple[int, ...]]:
    """(session key → tool calls, line numbers of quarantined lines) as the sniffed reader yields them."""
    calls: dict[str, int] = {}
    bad: list[int] = []
    for info, events, errors in sessions_of(read(path), path):
        assert info.key not in calls, f"{path.name}: session key {info.key} twice"
        calls[info.key] = sum(len(e.calls) for e in events if isinstance(e, Batch))
        bad += [e.line for e in errors]
    return calls, tuple(sorted(bad))


def _independent(path: Path, rel: str) -> tuple[dict[str, int], tuple[int, ...]] | dict[str, None]:
    """What the file holds, counted without loopledger (the module docstring says how)."""
    text = path.read_text(encoding="utf-8")
    if rel.startswith(AIDER):
        starts = len(re.findall(r"(?m)^# aider chat started at", text))
        return {str(i): None for i in range(1, starts + 1)}
    key, uses, comments = None, set(), []
    for n, line in enumerate(text.splitlines(), 1):
        if line.startswith("//"):
            comments.append(n)
            continue
        d = json.loads(line)
        key = key or (d.get("agentId") if d.get("isSidechain") else d.get("sessionId"))
        msg = d.get("message") if isinstance(d.get("message"), dict) else {}
        if d.get("type") == "assistant" and isinstance(msg.get("content"), list):
            uses |= {b.get("id") for b in msg["content"] if isinstance(b, dict) and b.get("type") == "tool_use"}
    return {key: len(uses)}, tuple(comments)


def test_the_labels_cover_every_pinned_file_each_with_a_reason_and_no_loop_range_outside_loops():
    rows = _labels()
    assert {r["file"] for r in rows} == set(_pinned())
    assert [r["file"] for r in rows] == sorted(r["file"] for r in rows), "keep labels.csv sorted by file"
    for r in rows:
        assert None not in r and None not in r.values(), f"not 5 columns (quote with \"\" in CSV): {r}"
        assert r["label"] in ("loop", "normal", "unclear"), r
        assert r["reason"].strip(), r
        if r["label"] == "loop":
            first, _, last = r["loop_calls"].partition("-")
            assert 1 <= int(first) <= int(last), r
        else:
            assert r["loop_calls"] == "", r


def test_every_labelled_file_is_the_one_sources_md_pins(data_dir):
    for rel, digest in _pinned().items():
        assert hashlib.sha256((data_dir / rel).read_bytes()).hexdigest()[:16] == digest, rel


@pytest.mark.parametrize("rel", sorted(_pinned()))
def test_readers_see_the_sessions_and_calls_counted_without_them(data_dir, rel):
    path = data_dir / rel
    assert sniff(path) == ("aider" if rel.startswith(AIDER) else "claude-code")
    calls, bad = _read(path)
    if rel.startswith(AIDER):
        assert set(calls) == set(_independent(path, rel))
        # The only lines quarantined are edit blocks the chat never closed (the reply was cut off).
        assert all(re.search(r"^```|<<<<<<< SEARCH", path.read_text(encoding="utf-8").splitlines()[n - 1])
                   for n in bad), bad
    else:
        expected, comments = _independent(path, rel)
        assert (calls, bad) == (expected, comments)


def test_every_session_the_readers_see_has_exactly_one_label(data_dir):
    labelled = [(r["file"], r["session_key"]) for r in _labels()]
    assert len(labelled) == len(set(labelled))
    seen = [(rel, key) for rel in sorted(_pinned()) for key in _read(data_dir / rel)[0]]
    assert sorted(seen) == sorted(labelled)
