"""corpus_g/: real coding-agent session files (Claude Code JSONL, OpenCode exports, Codex CLI
rollouts) labelled by hand for issue 26 point 5, read by the real readers and checked against
counts made without them.

The transcripts are not in git (the fetch tool's terms keep fetched data out of developers'
commits; corpus_g/README.md says where they come from): corpus_g/labels.csv and
corpus_g/SOURCES.md are. The data is read from `LOOPLEDGER_CORPUS_G_DATA` if set, else from
`../shared/corpus_g` when that holds the files, else from the worktree's own corpus_g; the tests
skip when none holds them. No guard or detector runs here: these tests pin the files, the
readers' view of them and the labels' shape, nothing about detection.

Where the counts come from (a throwaway script reading the files itself, no loopledger):
- Claude Code JSONL: distinct `tool_use` ids in the content of `assistant` lines, per session:
  lines without `isSidechain` are the main session (key: its `sessionId`, which for a resumed
  file is the id on its first line); `isSidechain` lines with an `agentId` are that subagent
  (key: the agentId); `isSidechain` lines without one (2025 files that write sidechains inline)
  are one session keyed `<sessionId>#2`;
- OpenCode exports: `parts` of `type` "tool" over all `messages` (key: `info.id`);
- Codex CLI rollouts: distinct `call_id`s of `response_item` lines whose payload `type` is
  "function_call" or "custom_tool_call" (key: the `session_meta` payload's `id`).
"""

from __future__ import annotations

import csv
import functools
import hashlib
import os
import re
from pathlib import Path

import pytest
from loopledger.analysis.replay_table import sessions_of
from loopledger.events import Batch
from loopledger.formats import read, sniff

from tests.conftest import ROOT

pytestmark = pytest.mark.corpus

LABELS = ROOT / "corpus_g"
CC = "claude-code-jsonl/"
OC = "opencode-export-json/"
CX = "codex-rollout-jsonl/"


def _cc(name: str, sessions: dict[str, int]) -> tuple[str, tuple[str, dict[str, int]]]:
    return CC + name, ("claude-code", sessions)


def _oc(slug: str, key: str, calls: int) -> tuple[str, tuple[str, dict[str, int]]]:
    return f"{OC}dark-factory-{slug}.json", ("opencode", {key: calls})


def _cx(stamp: str, key: str, calls: int) -> tuple[str, tuple[str, dict[str, int]]]:
    return f"{CX}localpush-{stamp}-{key[:13]}.jsonl", ("codex", {key: calls})


# file → (format, {session key: tool calls}), counted as the module docstring says.
EXPECTED: dict[str, tuple[str, dict[str, int]]] = dict([
    _cc("ccv-1af7fc5e-init-empty-dir.jsonl", {"1af7fc5e-8455-4414-9ccd-011d40f70b2a": 12}),
    _cc("ccv-5c0375b4-orchestrator-claude-md.jsonl",
        {"5c0375b4-57a5-4f26-b12d-d022ee4e51b7": 13, "5c0375b4-57a5-4f26-b12d-d022ee4e51b7#2": 8}),
    _cc("ccv-fe5e1c67-orchestrator-todo-app.jsonl",
        {"fe5e1c67-53e7-4862-81ae-d0e013e3270b": 11, "fe5e1c67-53e7-4862-81ae-d0e013e3270b#2": 156}),
    _cc("claude-backups-05305169-wrapper-modules.jsonl", {"b260c379-397e-497e-aa65-5836b15a62c1": 80}),
    _cc("claude-backups-0c45b0a6-agents-glob.jsonl",
        {"0c45b0a6-b564-4223-9f39-bc05598a4122": 369, "0c45b0a6-b564-4223-9f39-bc05598a4122#2": 0}),
    _cc("claude-backups-2490f156-apt-sources.jsonl", {"2490f156-0c94-424d-b23b-085c9f82ab8f": 26}),
    _cc("claude-backups-595c4b49-bashrc-git-remote.jsonl",
        {"595c4b49-fa25-4c07-9adc-d4ea82b26cff": 77, "595c4b49-fa25-4c07-9adc-d4ea82b26cff#2": 1}),
    _cc("claude-backups-5f2d5220-learning-system-db.jsonl", {"5f2d5220-e018-4795-8fcb-23e42b068058": 220}),
    _cc("claude-backups-69d6710c-agents-bridge.jsonl", {"69d6710c-4ed8-485a-b8ff-cd0b4eac729c": 212}),
    _cc("claude-backups-86f87fad-wrapper-debugger.jsonl",
        {"86f87fad-a317-4a18-89b3-d1e33de12a4a": 119, "86f87fad-a317-4a18-89b3-d1e33de12a4a#2": 42}),
    _cc("claude-backups-b85b84ca-blank-lines.jsonl", {"b85b84ca-6826-497f-84a3-ec7ecfbf7d29": 149}),
    _cc("claude-backups-d887688e-postgres-agents.jsonl", {"d887688e-067b-4f0f-8cff-15492c0b7b8b": 100}),
    _cc("claude-backups-e95a823a-zfs-build-polls.jsonl", {"e95a823a-0ad2-4d3a-83fb-a78e48ba5db6": 204}),
    _cc("claude-backups-fb4f7a6e-bridge-rebuilds.jsonl",
        {"fb4f7a6e-9d92-4292-8743-3a43a187bb1b": 152, "fb4f7a6e-9d92-4292-8743-3a43a187bb1b#2": 10}),
    _cc("claude-history-simple-agent-aae161c.jsonl", {"aae161c": 22}),
    _cc("claude-history-simple-main-967e501d.jsonl", {"967e501d-aa48-4eab-a21f-b17058bd78f0": 90}),
    _cc("claude-history-subagents-agent-a00c619.jsonl", {"a00c619": 43}),
    _cc("claude-history-subagents-agent-a52c2b7.jsonl", {"a52c2b7": 36}),
    _cc("claude-history-subagents-agent-aabf2dd.jsonl", {"aabf2dd": 119}),
    _cc("claude-history-subagents-agent-abae753.jsonl", {"abae753": 69}),
    _oc("clever-cabin", "ses_39b5bd57fffeoHgocdtybSVa3d", 16),
    _oc("crisp-garden", "ses_39bc72f63ffeQb8egYBpyTrCNr", 39),
    _oc("curious-harbor", "ses_39b4b4b3bffeXCkbhNdUgsq5wv", 43),
    _oc("curious-sailor", "ses_39b7f9e89ffe7J0WzLzYrUt4eW", 47),
    _oc("hidden-moon", "ses_39b583141ffe5xDtTd3Mc1wh0o", 146),
    _oc("hidden-river", "ses_39b709b7fffea1aT6PAuEvX6Zq", 55),
    _oc("jolly-eagle", "ses_39b5d713cffeRgAoxPIwS3Plus", 2),
    _oc("kind-meadow", "ses_39b9a333bffeVNXMK6bSZru9Uq", 87),
    _oc("kind-wizard", "ses_39b2f9630ffewQksq2Ld8n4axU", 46),
    _oc("lucky-cabin", "ses_39b430a8affeJ8s45wKs0BBaz9", 44),
    _oc("neon-river", "ses_39b623ce7ffeILPe9UgDcyGicH", 15),
    _oc("nimble-pixel", "ses_39b4c1891ffezxPVc5OPmcqF33", 4),
    _oc("playful-falcon", "ses_39b569d9bffepYd1SOgyi0Fp1f", 24),
    _oc("quick-falcon", "ses_39b807128ffeskZYgLLXdO7p7M", 83),
    _oc("quiet-meadow", "ses_39c0a3da8ffeFQWvKTGUJWivpv", 37),
    _oc("shiny-nebula", "ses_39b5e5180ffeUO9pt25DSY2L3f", 18),
    _oc("silent-nebula", "ses_39b2e52e8ffeokU5mBDCeUvc8t", 25),
    _oc("silent-panda", "ses_39b3d0892ffeaCoiaHPszzRI8d", 102),
    _cx("12-40-23", "019c8a4c-ed82-79a1-aa28-7738fc5ab61a", 104),
    _cx("12-41-04", "019c8a4d-8f45-7010-8b5d-7fad920aa6f9", 118),
    _cx("12-47-42", "019c8a53-a0dd-7130-bcd7-95445d84846a", 144),
    _cx("12-54-34", "019c8a59-e9dd-71f0-9ae3-4079fe9726a9", 365),
    _cx("13-19-38", "019c8a70-dda7-7f33-98ea-f30553347322", 1),
    _cx("20-34-25", "019c8bfe-ec25-79e0-97d7-bda6a9c575ff", 5),
])
LABEL_COUNTS = {"loop": 4, "normal": 44, "unclear": 2}
# Read errors the files really have (file → reader messages): this one was committed while its
# last line was still being written, so that line is cut off mid-JSON.
READ_ERRORS = {
    CC + "claude-backups-fb4f7a6e-bridge-rebuilds.jsonl": [(445, "invalid JSON")],
}


def _holds_all(folder: Path) -> bool:
    return all((folder / f).is_file() for f in EXPECTED)


@pytest.fixture(scope="module")
def data_dir() -> Path:
    named = os.environ.get("LOOPLEDGER_CORPUS_G_DATA")
    candidates = [Path(named)] if named else [ROOT.parent / "shared" / "corpus_g", LABELS]
    for folder in candidates:
        if _holds_all(folder):
            return folder
    pytest.skip(f"the fetched transcripts are in none of {[str(c) for c in candidates]} "
                "(they are not committed; see corpus_g/README.md)")


def _labels() -> list[dict[str, str]]:
    with (LABELS / "labels.csv").open(encoding="utf-8", newline="") as fh:
        return list(csv.DictReader(fh))


@functools.cache
def _read(path: Path) -> dict[str, int]:
    """Session key → tool calls, grouped and keyed as the ledger and bench/detection_scores.py
    see them (`sessions_of`: a file's second session under one sessionId is `<id>#2`)."""
    calls: dict[str, int] = {}
    expected = READ_ERRORS.get(f"{path.parent.name}/{path.name}", [])
    seen = []
    for info, events, errors in sessions_of(read(path), path):
        for err in errors:
            if not any(err.line == line and err.message.startswith(msg) for line, msg in expected):
                pytest.fail(f"{path.name}:{err.line}: {err.message}")
            seen.append(err.line)
        assert info.key not in calls, f"{path.name}: session key {info.key} twice"
        calls[info.key] = sum(len(e.calls) for e in events if isinstance(e, Batch))
    assert sorted(seen) == sorted(line for line, _ in expected), f"{path.name}: read errors {seen}"
    return calls


def test_the_labels_cover_every_file_each_with_a_reason_and_a_loop_range_inside_its_session():
    rows = _labels()
    assert {r["file"] for r in rows} == set(EXPECTED)
    assert [(r["file"], r["session_key"]) for r in rows] == sorted((r["file"], r["session_key"]) for r in rows), \
        "keep labels.csv sorted by file, then session key"
    counts = {lab: sum(r["label"] == lab for r in rows) for lab in ("loop", "normal", "unclear")}
    assert counts == LABEL_COUNTS, counts
    assert len(rows) == sum(len(s) for _, s in EXPECTED.values()) == sum(LABEL_COUNTS.values())
    for r in rows:
        assert None not in r and None not in r.values(), f"not 5 columns (quote with \"\" in CSV): {r}"
        assert r["reason"].strip(), r
        if r["label"] == "loop":
            first, _, last = r["loop_calls"].partition("-")
            assert 1 <= int(first) < int(last) <= EXPECTED[r["file"]][1][r["session_key"]], r
        else:
            assert r["loop_calls"] == "", r


def test_every_labelled_file_is_the_one_sources_md_pins(data_dir):
    pinned = dict(re.findall(r"^\| `([^`]+)` \|.*\| (\d+) \| `[0-9a-f]{16}` \|$",
                             (LABELS / "SOURCES.md").read_text(encoding="utf-8"), re.M))
    digests = dict(re.findall(r"^\| `([^`]+)` \|.*\| `([0-9a-f]{16})` \|$",
                              (LABELS / "SOURCES.md").read_text(encoding="utf-8"), re.M))
    assert set(pinned) == set(digests) == set(EXPECTED)
    for rel, digest in digests.items():
        data = (data_dir / rel).read_bytes()
        assert len(data) == int(pinned[rel]), rel
        assert hashlib.sha256(data).hexdigest()[:16] == digest, rel


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
