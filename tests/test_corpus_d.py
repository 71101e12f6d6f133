"""corpus_d/: a labelled set (docs/detection.md, "The labelled sessions"), read by the
real readers, checked against counts made without them, and scored against its labels.

The transcripts are not in git (the fetch tool's terms keep fetched data out of developers'
commits; corpus_d/README.md says where they come from): corpus_d/labels.csv and
corpus_d/SOURCES.md are. These tests run where the files are present (the worktree that
fetched them, or LOOPLEDGER_CORPUS_D_DATA pointing at a copy) and skip otherwise.

Where the counts come from (a throwaway script reading the JSON itself, no loopledger):
- mini-swe-agent v1 (Gemini 3 Pro): assistant replies answered by the next user message that
  the harness acted on (the reply has a ```bash block) or refused (that message opens with its
  format error "Please always provide EXACTLY ONE action");
- mini-swe-agent v2 (DeepSeek): `jq '[.messages[]|select(.role=="assistant")|(.tool_calls//[])|length]|add'`
  plus the messages whose `extra.interrupt_type` is "FormatError" (none in these files);
- Claude Code sessions: distinct `tool_use` ids in the lines' message content;
- SWE-agent .traj: `jq '.trajectory|length'` for command trajectories; the function-calling one
  (6e44b9, a `history` with `tool_calls`): its tool calls, 4 — its trajectory's 5th step, the
  `submit`, has no message in `history`, which is what the reader reads;
- tau-bench records: the same jq sum over each record's `traj`, keyed task-<id>.trial-<n>.
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

LABELS = ROOT / "corpus_d"
# ../shared/corpus_d (where CI has the files) first, then the repository's own folder
DATA = Path(os.environ.get("LOOPLEDGER_CORPUS_D_DATA") or next(
    (p for p in (ROOT.parent / "shared" / "corpus_d", LABELS) if (p / "labels.csv").is_file()
     and all((p / r["file"]).is_file() for r in csv.DictReader((p / "labels.csv").open(encoding="utf-8")))),
    LABELS))

GEM = "openai-chat-tool-calls/mini-swe-agent-gemini-3-pro-"
DS = "openai-chat-tool-calls/mini-swe-agent-deepseek-"
CC = "claude-code-jsonl/spotter-"
SWE = "swe-agent-traj/"
TAU = "openai-chat-tool-calls/tau-bench-grok-3-retail-faults-heldout-subset.json"


def _v1(instance: str, calls: int) -> tuple[str, tuple[str, dict[str, int]]]:
    return GEM + instance + ".traj.json", ("openai-chat", {instance: calls})


def _v2(run: str, instance: str, calls: int) -> tuple[str, tuple[str, dict[str, int]]]:
    return f"{DS}{run}-{instance}.traj.json", ("openai-chat", {instance: calls})


# file → (format, {session key: tool calls}), counted as the module docstring says.
EXPECTED: dict[str, tuple[str, dict[str, int]]] = dict([
    _v1("astropy__astropy-13398", 36), _v1("astropy__astropy-14365", 21), _v1("django__django-11299", 49),
    _v1("django__django-14155", 22), _v1("django__django-14349", 92), _v1("django__django-14351", 69),
    _v1("django__django-14999", 24), _v1("django__django-15380", 48), _v1("django__django-16100", 51),
    _v1("django__django-7530", 32), _v1("matplotlib__matplotlib-23314", 21), _v1("mwaskom__seaborn-3069", 57),
    _v1("pydata__xarray-4629", 18), _v1("pydata__xarray-4695", 70), _v1("sphinx-doc__sphinx-10466", 31),
    _v1("sphinx-doc__sphinx-7889", 23), _v1("sphinx-doc__sphinx-8595", 69), _v1("sphinx-doc__sphinx-8638", 62),
    _v1("sphinx-doc__sphinx-9258", 108), _v1("sphinx-doc__sphinx-9320", 43), _v1("sphinx-doc__sphinx-9367", 18),
    _v1("sympy__sympy-15976", 46),
    _v2("chat-dev", "pvlib__pvlib-python-1707", 95), _v2("chat-rerun", "marshmallow-code__marshmallow-1359", 93),
    _v2("chat-rerun", "sqlfluff__sqlfluff-1517", 92), _v2("chat-test", "django__django-11910", 138),
    _v2("chat-test", "django__django-11999", 59), _v2("chat-test", "django__django-12470", 131),
    _v2("chat-test", "django__django-13265", 156), _v2("lite-noparallel", "pvlib__pvlib-python-1606", 85),
    (CC + "4d5611e5-main-commit-hook-fixes.jsonl", ("claude-code", {"4d5611e5-241a-462a-8d15-5122611a9569": 150})),
    (CC + "8463c716-main-edit-test.jsonl", ("claude-code", {"8463c716-a2ea-4c14-9efa-87158ebd9f20": 177})),
    (CC + "subagent-plan-session.jsonl", ("claude-code", {"491e126e-1e71-469c-ade2-fcc8af567c74": 16})),
    (SWE + "ctf-forensics-flash.traj", ("swe-agent", {"0": 4})),
    (SWE + "ctf-misc-networking_1.traj", ("swe-agent", {"0": 4})),
    (SWE + "ctf-web-i_got_id_demo.traj", ("swe-agent", {"0": 21})),
    (SWE + "gpt4-swe-agent-test-repo-6e44b9.traj", ("swe-agent", {"0": 4})),
    (TAU, ("openai-chat", {"task-4.trial-0": 15, "task-69.trial-0": 11, "task-76.trial-0": 12, "task-79.trial-0": 10,
                           "task-83.trial-0": 9, "task-111.trial-0": 10, "task-112.trial-0": 10})),
])


@pytest.fixture(scope="module")
def data_dir() -> Path:
    if not all((DATA / f).is_file() for f in EXPECTED):
        pytest.skip(f"the fetched transcripts are not in {DATA} (they are not committed; see corpus_d/README.md)")
    return DATA


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
    assert counts == {"loop": 4, "normal": 38, "unclear": 2}, counts
    assert len(rows) == sum(len(s) for _, s in EXPECTED.values()) == 44
    for r in rows:
        assert None not in r and None not in r.values(), f"not 5 columns (quote with \"\" in CSV): {r}"
        assert r["reason"].strip(), r
        if r["label"] == "loop":
            first, _, last = r["loop_calls"].partition("-")
            assert 1 <= int(first) <= int(last) <= EXPECTED[r["file"]][1][r["session_key"]], r
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
