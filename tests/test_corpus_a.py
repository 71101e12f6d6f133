"""Real transcripts (../shared/corpus) read by the Claude Code, Codex and OpenAI-chat readers,
checked against the independent counts in the corpus README's table.

Where a count of ours could differ by design it is said here: none of these files differs.
- Claude Code: an assistant message split over several lines is joined into one batch; that
  changes batch counts, never call counts, and the max run is counted per call, so it agrees.
- Subagent files (isSidechain) are one session each, linked by parent_key to the main session.
- tau-bench: one session per record (45), and runs are counted per session, as the README does.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from loopledger.events import Batch, ReadError, SessionStart
from loopledger.formats import read, sniff

pytestmark = pytest.mark.corpus

MINE = {"claude-code-jsonl": "claude-code", "codex-rollout-jsonl": "codex",
        "openai-chat-tool-calls": "openai-chat"}


def _canonical(args) -> str:
    # loopledger.detectors' canonical_json may replace this; until then the same rule, inline.
    return json.dumps({} if args is None else args, sort_keys=True, separators=(",", ":"))


def _table(corpus: Path) -> dict[str, dict[str, int]]:
    rows: dict[str, dict[str, int]] = {}
    for line in (corpus / "README.md").read_text().splitlines():
        m = re.match(r"\|\s*`([^`]+)`\s*\|.*\|\s*(\d+)\s*\|\s*(\d+)\s*\|\s*(\d+)\s*\|\s*(\d+)\s*\|\s*$", line)
        if m:
            rows[m.group(1)] = dict(zip(("episodes", "calls", "max_run", "abab"),
                                        map(int, m.groups()[1:]), strict=True))
    return rows


def _measure(path: Path) -> dict[str, int]:
    sessions = calls = max_run = abab = 0
    keys: list[tuple[str, str]] = []
    errors: list[ReadError] = []

    def close() -> None:
        nonlocal max_run, abab
        run = 0
        for i, key in enumerate(keys):
            run = run + 1 if i and key == keys[i - 1] else 1
            max_run = max(max_run, run)
            if i >= 2 and key == keys[i - 2] != keys[i - 1]:
                abab += 1
        keys.clear()

    for item in read(path):
        if isinstance(item, SessionStart):
            close()
            sessions += 1
        elif isinstance(item, Batch):
            calls += len(item.calls)
            keys.extend((c.name, _canonical(c.args)) for c in item.calls)
        elif isinstance(item, ReadError):
            errors.append(item)
    close()
    assert not errors, [str(e) for e in errors]
    return {"episodes": sessions, "calls": calls, "max_run": max_run, "abab": abab}


def _files(corpus: Path) -> list[Path]:
    return sorted(p for folder in MINE for p in (corpus / folder).glob("*") if p.is_file())


def test_every_corpus_file_of_these_formats_matches_the_readme(corpus_dir):
    table = _table(corpus_dir)
    files = _files(corpus_dir)
    assert len(files) >= 8, "the corpus lost files of these formats"
    for path in files:
        rel = f"{path.parent.name}/{path.name}"
        assert rel in table, f"{rel} is not in the corpus README's table"
        assert sniff(path) == MINE[path.parent.name], rel
        assert _measure(path) == table[rel], rel


def test_subagent_sessions_link_to_their_parent(corpus_dir):
    for path in (corpus_dir / "claude-code-jsonl").glob("*subagent*.jsonl"):
        start = next(iter(read(path)))
        assert isinstance(start, SessionStart)
        assert start.info.parent_key and start.info.parent_key[:8] in path.name
        assert start.info.key != start.info.parent_key


def test_tau_bench_records_are_separate_sessions_with_unique_keys(corpus_dir):
    path = corpus_dir / "openai-chat-tool-calls" / "tau-bench-gpt-4o-airline-subset.json"
    keys = [i.info.key for i in read(path) if isinstance(i, SessionStart)]
    assert len(keys) == len(set(keys)) == 45


def test_parallel_calls_with_interleaved_results_stay_one_batch(corpus_dir):
    """The subagent asked for nine files at once (one message.id); Claude Code wrote each Read
    and its result alternately. Closing the message at every tool-result line would split that
    one parallel batch into nine; held results keep it whole (and answered after it)."""
    path = corpus_dir / "claude-code-jsonl" / "spotter-4d5611e5-subagent-a2898e3.jsonl"
    items = list(read(path))
    batches = [i for i in items if isinstance(i, Batch)]
    big = max(batches, key=lambda b: len(b.calls))
    assert len(big.calls) == 9 and {c.name for c in big.calls} == {"Read"}
    after = items[items.index(big) + 1]
    assert sorted(a.call_id for a in after.answers) == sorted(c.id for c in big.calls)
