"""Every sniffer against every format's files: each file sniffs as its own format, and no
format-specific sniffer claims another format's file. Only the general readers at the end of
READER_MODULES (Anthropic / OpenAI message lists and Responses items) may also say yes to a
file a more specific reader takes first: that is what the order is for."""

from __future__ import annotations

from pathlib import Path

import pytest
from loopledger.formats import SNIFF_BYTES, readers, sniff

ROOT = Path(__file__).parent.parent
GENERAL = ("openai-responses", "anthropic", "openai-chat")
FOLDERS = {"aider": "aider", "anthropic": "anthropic", "atif": "atif", "claude_code": "claude-code",
           "copilot_cli": "copilot-cli", "cline": "cline", "codex": "codex", "gemini": "gemini-cli", "openai_chat": "openai-chat",
           "openai_responses": "openai-responses", "openhands": "openhands", "swe_agent": "swe-agent",
           "claude_export": "claude-export", "openhands_v1": "openhands-v1", "otlp": "otlp",
           "opencode": "opencode", "mini_swe_agent_v1": "openai-chat", "tau2": "tau2-bench"}
CORPUS = {"aider-chat-history-md": "aider", "claude-code-jsonl": "claude-code", "codex-rollout-jsonl": "codex",
          "openai-chat-tool-calls": "openai-chat", "openhands": "openhands", "swe-agent-traj": "swe-agent"}
NOT_TRANSCRIPTS = (".gitignore", "README.md", "SOURCE.md", "task_metadata.json", "generate.py", "golden.py")


def _member(p: Path) -> bool:
    """An OpenCode storage file that is part of a session, not one (message, part, project):
    its session file is what is sniffed."""
    return "storage" in p.parts and p.parent.parent.name != "session"


def _files(root: Path, folders: dict[str, str]) -> list[tuple[Path, str]]:
    out = []
    for folder, fmt in folders.items():
        base = root / folder
        if base.is_dir():
            out += [(p, fmt) for p in sorted(base.rglob("*")) if p.is_file() and p.name not in NOT_TRANSCRIPTS and not _member(p)]
    return out


def _claims(path: Path) -> set[str]:
    with open(path, "rb") as fh:
        head = fh.read(SNIFF_BYTES)
    return {name for name, mod in readers().items() if mod.sniff(head)}


def _check(files: list[tuple[Path, str]]) -> None:
    assert files
    specific = set(readers()) - set(GENERAL)
    for path, fmt in files:
        assert sniff(path) == fmt, path
        claims = _claims(path)
        assert fmt in claims, path
        assert claims & specific <= {fmt}, (path, claims)


def test_fixtures_of_every_format():
    _check(_files(ROOT / "tests" / "fixtures" / "formats", FOLDERS))


def test_sample_data_of_every_format():
    _check(_files(ROOT / "sample_data", FOLDERS))


@pytest.mark.corpus
def test_corpus_of_every_format(corpus_dir):
    _check(_files(corpus_dir, CORPUS))


def test_every_reader_has_files_here():
    have = {fmt for _, fmt in _files(ROOT / "tests" / "fixtures" / "formats", FOLDERS)}
    have |= {fmt for _, fmt in _files(ROOT / "sample_data", FOLDERS)}
    assert set(readers()) <= have, set(readers()) - have
