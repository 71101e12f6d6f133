"""Sniffing: every corpus file is recognised as its own format, and the Gemini / ATIF /
SWE-agent / OpenHands / Aider sniffers never claim a file of another format (so the order of
READER_MODULES is a tie-break, not what keeps them apart)."""

from __future__ import annotations

from pathlib import Path

import pytest
from loopledger.formats import SNIFF_BYTES, UnknownFormat, readers, sniff

OURS = ("gemini-cli", "atif", "swe-agent", "openhands", "aider")
FIXTURES = Path(__file__).parent / "fixtures" / "formats"
FIXTURE_FORMATS = {"gemini": "gemini-cli", "atif": "atif", "swe_agent": "swe-agent",
                   "openhands": "openhands", "aider": "aider"}
CORPUS_FORMATS = {
    "aider-chat-history-md": "aider",
    "claude-code-jsonl": "claude-code",
    "codex-rollout-jsonl": "codex",
    "openai-chat-tool-calls": "openai-chat",
    "openhands": "openhands",
    "swe-agent-traj": "swe-agent",
}


def head(path: Path) -> bytes:
    with open(path, "rb") as fh:
        return fh.read(SNIFF_BYTES)


def files_with_formats(root: Path, formats: dict[str, str]) -> list[tuple[Path, str]]:
    out = [(p, fmt) for folder, fmt in formats.items()
           for p in sorted((root / folder).glob("*")) + sorted((root / folder).glob(".*"))
           if p.is_file()]
    assert out
    return out


def claims(path: Path) -> set[str]:
    """Which of our sniffers say yes to this file."""
    mods = readers()
    return {name for name in OURS if name in mods and mods[name].sniff(head(path))}


def test_our_fixtures_sniff_as_their_format_and_only_that():
    for path, fmt in files_with_formats(FIXTURES, FIXTURE_FORMATS):
        assert sniff(path) == fmt, path
        assert claims(path) == {fmt}, path


def test_sample_data_of_our_formats_sniffs_and_reads_cleanly():
    sample = Path(__file__).parent.parent / "sample_data"
    present = {d: f for d, f in FIXTURE_FORMATS.items() if (sample / d).is_dir()}
    if not present:
        pytest.skip("no sample_data for these formats")
    from loopledger.events import ReadError
    from loopledger.formats import read

    for path, fmt in files_with_formats(sample, present):
        assert sniff(path) == fmt and claims(path) == {fmt}, path
        assert not [i for i in read(path) if isinstance(i, ReadError)], path


@pytest.mark.corpus
def test_corpus_files_sniff_as_their_format(corpus_dir):
    for path, fmt in files_with_formats(corpus_dir, CORPUS_FORMATS):
        assert sniff(path) == fmt, path


@pytest.mark.corpus
def test_our_sniffers_claim_only_their_own_corpus_files(corpus_dir):
    for path, fmt in files_with_formats(corpus_dir, CORPUS_FORMATS):
        assert claims(path) == ({fmt} & set(OURS)), path


def test_other_formats_fixtures_are_not_claimed_by_ours():
    """The other readers' fixtures (OpenAI chat lists, Anthropic, Claude Code, Codex, mini-swe-agent)."""
    others = [p for d in sorted(FIXTURES.iterdir()) if d.is_dir() and d.name not in FIXTURE_FORMATS
              for p in sorted(d.iterdir()) if p.is_file()]
    if not others:
        pytest.skip("no fixtures of the other formats yet")
    for path in others:
        assert claims(path) == set(), path


def test_look_alikes_are_told_apart():
    mods = readers()
    cases = {
        # mini-swe-agent trajectories belong to openai-chat, not SWE-agent
        b'{"info": {"exit_status": "Submitted"}, "messages": [{"role": "system", "content": "x"}],'
        b' "trajectory_format": "mini-swe-agent-1"}': set(),
        # an OpenAI message list whose text mentions actions is not an OpenHands event list
        b'[{"role": "user", "content": "\\"action\\": \\"run\\""}]': set(),
        b'[{"id": 0, "source": "user", "action": "message", "args": {"content": "hi"}}]': {"openhands"},
        b'{"schema_version": "ATIF-v1.5", "session_id": "s", "steps": []}': {"atif"},
        b'{"sessionId": "s", "projectHash": "p", "startTime": "t"}\n': {"gemini-cli"},
        b'{"environment": "swe_main", "trajectory": [{"action": "ls", "observation": ""}]}': {"swe-agent"},
        b"# aider chat started at 2025-01-01 10:00:00\n\n#### hi\n": {"aider"},
    }
    for data, expected in cases.items():
        got = {name for name in OURS if name in mods and mods[name].sniff(data)}
        assert got == expected, data


def test_unknown_content_names_what_was_seen(tmp_path):
    path = tmp_path / "notes.txt"
    path.write_text("just some notes, no transcript here\n")
    with pytest.raises(UnknownFormat, match="just some notes"):
        sniff(path)
