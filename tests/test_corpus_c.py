"""The fetched, labelled transcripts of corpus/ (issue 18: "more labelled real sessions you can
see"), read by the real readers and checked against counts made without them.

The transcripts themselves are not in git (the fetch tool's terms keep fetched data out of
developers' commits; corpus/README.md says why and where they come from): corpus/labels.csv and
corpus/SOURCES.md are. These tests run where the files are present (the worktree that fetched
them, or LOOPLEDGER_CORPUS_C_DATA pointing at a copy) and skip otherwise.

Where the counts come from (none from loopledger):
- SWE-agent .traj: `jq '.trajectory|length'` (one call per trajectory step, exit_cost included);
- mini-swe-agent v2: `jq '[.messages[]|select(.role=="assistant")|(.tool_calls//[])|length]|add'`,
  plus one harness_error call per format error the harness answered (v2 keeps no assistant
  message for a reply it could not parse): `jq '[.messages[]|select(.extra.interrupt_type=="FormatError")]|length'`;
- tau-bench records: the same jq sum over each record's `traj`, keyed task-<id>.trial-<n>;
- Claude Code sessions and subagents: distinct `tool_use` ids in assistant lines (jq | sort -u | wc -l);
- OpenHands basic.json: agent events with an action other than message/finish (jq);
- Aider: distinct (user turn, file) pairs that carry a SEARCH/REPLACE block (awk), which is how
  aider applies one edit per file per reply.
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

LABELS = ROOT / "corpus"
# ../shared/corpus_c (where CI has the files) first, then the repository's own folder
DATA = Path(os.environ.get("LOOPLEDGER_CORPUS_C_DATA") or next(
    (p for p in (ROOT.parent / "shared" / "corpus_c", LABELS) if (p / "labels.csv").is_file()
     and all((p / r["file"]).is_file() for r in csv.DictReader((p / "labels.csv").open(encoding="utf-8")))),
    LABELS))

SWE = "swe-agent-traj/"
MSA = "openai-chat-tool-calls/mini-swe-agent-deepseek-"
TAU = "openai-chat-tool-calls/tau-bench-grok-3-retail-faults-subset.json"
CC = "claude-code-jsonl/spotter-"
AIDER = "aider-chat-history-md/aider-website-example-"

# file → (format, {session key: tool calls}), counted as the module docstring says.
EXPECTED: dict[str, tuple[str, dict[str, int]]] = {
    AIDER + "census.md": ("aider", {"1": 5}),
    AIDER + "hello-world-flask.md": ("aider", {"1": 4}),
    AIDER + "no-color.md": ("aider", {"1": 2}),
    AIDER + "pong.md": ("aider", {"1": 5}),
    CC + "258c7280-main-edit-test-cycle.jsonl": ("claude-code", {"258c7280-ae70-4798-800f-63464d01a85d": 186}),
    CC + "8463c716-subagent-a7be2f0.jsonl": ("claude-code", {"a7be2f0": 19}),
    CC + "ae4a77f8-subagent-aac57f5.jsonl": ("claude-code", {"aac57f5": 12}),
    CC + "fa812bfe-main-background-test-poll.jsonl": ("claude-code", {"fa812bfe-b295-4cca-9c2f-fdf01028cb46": 197}),
    CC + "fa812bfe-subagent-a93ccab.jsonl": ("claude-code", {"a93ccab": 25}),
    CC + "fa812bfe-subagent-aa84377.jsonl": ("claude-code", {"aa84377": 21}),
    MSA + "django-13964.traj.json": ("openai-chat", {"django__django-13964": 165 + 1}),  # 1 FormatError
    MSA + "lite-astroid-1196.traj.json": ("openai-chat", {"pylint-dev__astroid-1196": 92}),
    MSA + "lite-marshmallow-1343.traj.json": ("openai-chat", {"marshmallow-code__marshmallow-1343": 189}),
    MSA + "reasoner-sqlfluff-1517.traj.json": ("openai-chat", {"sqlfluff__sqlfluff-1517": 107}),
    MSA + "rerun-marshmallow-1343.traj.json": ("openai-chat", {"marshmallow-code__marshmallow-1343": 115}),
    MSA + "rerun-pyvista-4315.traj.json": ("openai-chat", {"pyvista__pyvista-4315": 77}),
    TAU: ("openai-chat", {"task-5.trial-0": 6, "task-6.trial-0": 6, "task-7.trial-0": 6,
                          "task-12.trial-0": 9, "task-21.trial-0": 13, "task-35.trial-0": 11,
                          "task-39.trial-0": 7, "task-54.trial-0": 20, "task-55.trial-0": 5,
                          "task-63.trial-0": 10, "task-80.trial-0": 7, "task-114.trial-0": 11}),
    "openhands/runtime-trajs-basic.json": ("openhands", {"0": 1}),
    SWE + "ctf-crypto-BabyTimeCapsule.traj": ("swe-agent", {"0": 9}),
    SWE + "ctf-crypto-katy.traj": ("swe-agent", {"0": 18}),
    SWE + "ctf-pwn-warmup.traj": ("swe-agent", {"0": 7}),
    SWE + "ctf-rev-rock.traj": ("swe-agent", {"0": 12}),
    SWE + "gpt4-swe-agent-test-repo-i1.traj": ("swe-agent", {"0": 5}),
    SWE + "msb-java-deepseek-chat-v2-fasterxml__jackson-dataformat-xml-590.traj": ("swe-agent", {"0": 16}),
    SWE + "msb-java-deepseek-coder-v2-fasterxml__jackson-core-1182.traj": ("swe-agent", {"0": 54}),
    SWE + "msb-java-deepseek-coder-v2-fasterxml__jackson-databind-4072.traj": ("swe-agent", {"0": 37}),
    SWE + "msb-java-deepseek-coder-v2-fasterxml__jackson-databind-4132.traj": ("swe-agent", {"0": 42}),
    SWE + "msb-java-deepseek-coder-v2-fasterxml__jackson-databind-4249.traj": ("swe-agent", {"0": 60}),
    SWE + "msb-java-deepseek-coder-v2-fasterxml__jackson-databind-4360.traj": ("swe-agent", {"0": 51}),
    SWE + "msb-java-doubao-pro-128k-fasterxml__jackson-databind-4048.traj": ("swe-agent", {"0": 30}),
    SWE + "msb-java-gpt-4o-fasterxml__jackson-core-1142.traj": ("swe-agent", {"0": 12}),
    SWE + "msb-java-gpt-4o-fasterxml__jackson-databind-3860.traj": ("swe-agent", {"0": 11}),
    SWE + "msb-java-gpt-4o-fasterxml__jackson-databind-4015.traj": ("swe-agent", {"0": 11}),
    SWE + "msb-java-gpt-4o-mini-googlecontainertools__jib-4144.traj": ("swe-agent", {"0": 24}),
    SWE + "swe-smith-fc-pandas-pr_53856.traj": ("swe-agent", {"0": 17}),
    SWE + "swe-smith-fc-pydantic-pr_8316.traj": ("swe-agent", {"0": 22}),
}


@pytest.fixture(scope="module")
def data_dir() -> Path:
    if not all((DATA / f).is_file() for f in EXPECTED):
        pytest.skip(f"the fetched transcripts are not in {DATA} (they are not committed; see corpus/README.md)")
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
    assert counts == {"loop": 11, "normal": 29, "unclear": 7}, counts
    assert len(rows) == sum(len(s) for _, s in EXPECTED.values()) == 47
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
