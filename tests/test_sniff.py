"""Sniffing names a format from content, never from the file name; unknown files say what was seen."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from loopledger.events import SessionStart
from loopledger.formats import UnknownFormat, read, readers, sniff

FIX = Path(__file__).parent / "fixtures" / "formats"
EXPECTED = {
    "claude_code/session.jsonl": "claude-code",
    "claude_code/agent-a7f3c21.jsonl": "claude-code",
    "codex/rollout-2025-12-02T09-00-00-019ad001-aaaa-7bbb-8ccc-123456789abc.jsonl": "codex",
    "codex/rollout-legacy.jsonl": "codex",
    "openai_chat/support.json": "openai-chat",
    "openai_chat/support.jsonl": "openai-chat",
    "openai_chat/acme__pages-42.traj.json": "openai-chat",
    "openai_chat/tau-bench-results.json": "openai-chat",
    "openai_responses/weather.json": "openai-responses",
    "openai_responses/weather.jsonl": "openai-responses",
    "anthropic/request.json": "anthropic",
    "anthropic/messages.jsonl": "anthropic",
    "opencode/ses_export.json": "opencode",
    "opencode/storage/session/b7e1f0c3a2d94e6f8a1b2c3d4e5f6a7b8c9d0e1f/ses_4f1c2b7a9ffeR2xQe8mT0aLkVd.json": "opencode",
}


@pytest.mark.parametrize("rel, fmt", sorted(EXPECTED.items()))
def test_sniff_by_content_whatever_the_name(rel, fmt, tmp_path):
    assert sniff(FIX / rel) == fmt
    disguised = tmp_path / "notes.txt"  # the extension says nothing
    shutil.copy(FIX / rel, disguised)
    assert sniff(disguised) == fmt
    first = next(iter(read(disguised)))
    assert isinstance(first, SessionStart) and first.info.format == fmt


@pytest.mark.parametrize("content, seen", [
    (b"", "an empty file"),
    (b"   \n\n", "an empty file"),
    (b"# My notes\nnothing to see here\n", "content starting '# My notes"),
    (b'{"hello": "world"}\n', "content starting '{\"hello\": \"world\"}"),
    (b"\x00\x01\x02binary", "content starting '\\x00\\x01\\x02binary'"),
])
def test_unknown_file_names_what_was_seen(content, seen, tmp_path):
    path = tmp_path / "mystery.jsonl"
    path.write_bytes(content)
    with pytest.raises(UnknownFormat) as info:
        sniff(path)
    msg = str(info.value)
    assert str(path) in msg and seen in msg and "--format" in msg
    assert "claude-code" in msg and "openai-chat" in msg  # the known formats are listed


def test_format_override_beats_sniffing():
    path = FIX / "anthropic" / "messages.jsonl"
    assert sniff(path) == "anthropic"
    first = next(iter(read(path, format="openai-chat")))
    assert first.info.format == "openai-chat"


def test_unknown_format_name(tmp_path):
    with pytest.raises(UnknownFormat, match="unknown format 'nope'"):
        read(FIX / "anthropic" / "messages.jsonl", format="nope")


def test_my_readers_are_registered_with_their_contract():
    mods = readers()
    for name in ("claude-code", "codex", "openai-chat", "openai-responses", "anthropic"):
        mod = mods[name]
        assert mod.NAME == name and mod.DESCRIPTION and callable(mod.sniff) and callable(mod.read)
        assert mod.sniff(b"") is False


def test_opencode_export_redirected_by_powershell_is_sniffed_through_its_utf16_bom(tmp_path):
    """PowerShell's `>` writes UTF-16LE with a BOM: every byte of ASCII is followed by a NUL, so
    no byte-pattern sniffer sees the export's keys; OpenCode's decodes first. A mini-swe-agent
    trajectory ({"info", "messages"}, no parts, no ses_ id) stays OpenAI chat."""
    ps = tmp_path / "out.json"
    ps.write_bytes((FIX / "opencode" / "ses_export.json").read_text(encoding="utf-8").encode("utf-16"))
    assert sniff(ps) == "opencode"
    mini = tmp_path / "acme__pages-42.traj.json"
    mini.write_text(json.dumps({"info": {"exit_status": "Submitted"}, "trajectory_format": "mini-swe-agent-1",
                                "messages": [{"role": "user", "content": "fix it"},
                                             {"role": "assistant", "content": "```bash\nls\n```"}]}, indent=2))
    assert sniff(mini) == "openai-chat"
