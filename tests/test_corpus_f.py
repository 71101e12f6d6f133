"""corpus_f/: labelled agent-evaluation outputs (issue 26 point 5), read by the real readers and
checked against counts made without them. No guard or detector runs here: the labels were made
by reading the transcripts, and scoring them is the lead's (bench/detection_scores.py).

The transcripts are not in git (the fetch tool's terms keep fetched data out of developers'
commits; corpus_f/README.md says where they come from): corpus_f/labels.csv and
corpus_f/SOURCES.md are. These tests read ../shared/corpus_f when it holds the files, else the
worktree's corpus_f/ (or LOOPLEDGER_CORPUS_F_DATA pointing at a copy), and skip where neither does.

Where the counts come from (jq on the files themselves, no loopledger):
- tau-bench result lists (avaljotsingh/tau-bench), one session per record keyed
  task-<task_id>.trial-<trial>:
  `jq -c '[.[] | {("task-\\(.task_id).trial-\\(.trial)"): ([.traj[] | select(.role=="assistant")
  | (.tool_calls // []) | length] | add // 0)}] | add' FILE`;
- OpenHands output.jsonl (nunu0404/Python_OpenHands), one session per line keyed by instance id:
  `jq -c '{(.instance_id): ([.history[] | select(.source=="agent" and .action != null and
  .tool_call_metadata != null and .action != "finish")] | length)}' FILE` (the agent's tool-call
  actions: 13 run, 3 read, 3 edit; its `finish` ends the session and is not a call).
"""

from __future__ import annotations

import csv
import functools
import hashlib
import os
import re
from pathlib import Path

import pytest
from loopledger.events import Batch, ReadError, SessionStart
from loopledger.formats import read, sniff

from tests.conftest import ROOT

pytestmark = pytest.mark.corpus

LABELS = ROOT / "corpus_f"

TAU = "openai-chat-tool-calls/tau-bench-avaljotsingh-"
OH = "openhands/nunu0404-python-openhands-fastjson2-2775-output.jsonl"


def _tau(name: str, counts: dict[int, int]) -> tuple[str, tuple[str, dict[str, int]]]:
    return TAU + name, ("openai-chat", {f"task-{t}.trial-{t}": n for t, n in counts.items()})


# file → (format, {session key: tool calls}), counted as the module docstring says.
EXPECTED: dict[str, tuple[str, dict[str, int]]] = dict([
    _tau("assertions-agent-0618-subset.json",
         {0: 6, 10: 6, 20: 8, 32: 13, 33: 6, 40: 6, 60: 0, 77: 7, 80: 5, 86: 11, 91: 9}),
    _tau("assertions-agent-0620-no-postcondition-subset.json",
         {0: 7, 10: 0, 20: 9, 25: 8, 30: 13, 38: 14, 40: 5, 60: 6, 80: 5}),
    _tau("tool-calling-0623-subset.json",
         {0: 8, 10: 5, 20: 23, 40: 4, 54: 15, 55: 13, 60: 7, 67: 5, 80: 5}),
    _tau("tool-calling-preconditions-0626-subset.json",
         {0: 8, 10: 5, 20: 24, 40: 7, 54: 21, 60: 7, 62: 18, 67: 5, 80: 4}),
    _tau("tool-calling-preconditions-python-0627143046.json", {2: 10}),
    _tau("tool-calling-preconditions-python-0627144318.json", {2: 56}),
    (OH, ("openhands", {"alibaba__fastjson2-2775": 19})),
])


def _data_dir() -> Path | None:
    candidates = [Path(p) for p in (os.environ.get("LOOPLEDGER_CORPUS_F_DATA"),) if p]
    candidates += [ROOT.parent / "shared" / "corpus_f", LABELS]
    for folder in candidates:
        if all((folder / f).is_file() for f in EXPECTED):
            return folder
    return None


@pytest.fixture(scope="module")
def data_dir() -> Path:
    folder = _data_dir()
    if folder is None:
        pytest.skip("the fetched transcripts are in neither ../shared/corpus_f nor corpus_f/ "
                    "(they are not committed; see corpus_f/README.md)")
    return folder


def _labels() -> list[dict[str, str]]:
    with (LABELS / "labels.csv").open(encoding="utf-8", newline="") as fh:
        return list(csv.DictReader(fh))


@functools.cache
def _read(path: Path) -> dict[str, int]:
    """Session key → tool calls, as the sniffed reader yields them (read once per file)."""
    calls: dict[str, int] = {}
    key = None
    for item in read(path):
        if isinstance(item, SessionStart):
            key = item.info.key
            assert key not in calls, f"{path.name}: session key {key} twice"
            calls[key] = 0
        elif isinstance(item, Batch):
            calls[key] += len(item.calls)
        elif isinstance(item, ReadError):
            pytest.fail(f"{path.name}:{item.line}: {item.message}")
    return calls


def test_the_labels_cover_every_file_each_with_a_reason_and_a_loop_range_inside_its_session():
    rows = _labels()
    assert {r["file"] for r in rows} == set(EXPECTED)
    assert [r["file"] for r in rows] == sorted(r["file"] for r in rows), "keep labels.csv sorted by file"
    counts = {lab: sum(r["label"] == lab for r in rows) for lab in ("loop", "normal", "unclear")}
    assert counts == {"loop": 5, "normal": 36, "unclear": 0}, counts
    assert len(rows) == sum(len(s) for _, s in EXPECTED.values()) == 41
    for r in rows:
        assert None not in r and None not in r.values(), f"not 5 columns (quote with \"\" in CSV): {r}"
        assert r["reason"].strip(), r
        if r["label"] == "loop":
            first, _, last = r["loop_calls"].partition("-")
            assert 1 <= int(first) < int(last) <= EXPECTED[r["file"]][1][r["session_key"]], r
        else:
            assert r["loop_calls"] == "", r


def test_every_labelled_file_is_the_one_sources_md_pins(data_dir):
    pinned = dict(re.findall(r"^\| `([^`]+)` \|.*\| `([0-9a-f]{16})` \|$",
                             (LABELS / "SOURCES.md").read_text(encoding="utf-8"), re.M))
    assert set(pinned) == set(EXPECTED)
    for rel, digest in pinned.items():
        assert hashlib.sha256((data_dir / rel).read_bytes()).hexdigest()[:16] == digest, rel


@pytest.mark.parametrize("rel", sorted(EXPECTED))
def test_readers_see_the_sessions_and_calls_counted_without_them(data_dir, rel):
    fmt, sessions = EXPECTED[rel]
    assert sniff(data_dir / rel) == fmt
    assert _read(data_dir / rel) == sessions


def test_every_session_the_readers_see_has_exactly_one_label(data_dir):
    labelled = [(r["file"], r["session_key"]) for r in _labels()]
    assert len(labelled) == len(set(labelled))
    seen = [(rel, key) for rel in sorted(EXPECTED) for key in _read(data_dir / rel)]
    assert sorted(seen) == sorted(labelled)
