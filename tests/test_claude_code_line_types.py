"""Every line type Claude Code writes is read or skipped on purpose; unknown types are skipped
and counted, never fatal; files that open with metadata lines are still sniffed as Claude Code."""

from __future__ import annotations

import json
import logging
from collections import Counter
from pathlib import Path

import pytest
from loopledger.events import Batch, ReadError, Retry, SessionStart, UserTurn
from loopledger.formats import claude_code, sniff

FIX = Path(__file__).parent / "fixtures" / "formats" / "claude_code"
SID = "5c1e0f3a-1111-4222-8333-944455556666"
ENV = {"parentUuid": "u-02", "isSidechain": False, "userType": "external", "cwd": "/home/dev/shop",
       "sessionId": SID, "version": "2.1.90", "gitBranch": "main", "timestamp": "2026-03-01T10:00:02.500Z"}

# One realistic line per skipped type (shapes as recent Claude Code versions write them).
SKIPPED = {
    "summary": {"type": "summary", "summary": "Fix failing checkout test", "leafUuid": "u-99"},
    "custom-title": {"type": "custom-title", "customTitle": "checkout fix", "sessionId": SID},
    "ai-title": {"type": "ai-title", "aiTitle": "Checkout test repair", "sessionId": SID},
    "agent-name": {"type": "agent-name", "agentName": "shop-fixer", "sessionId": SID},
    "cost-state": {"type": "cost-state", "totalCostUSD": 0.42, "totalLinesAdded": 3, "sessionId": SID},
    "permission-mode": {"type": "permission-mode", "permissionMode": "acceptEdits", "sessionId": SID},
    "mode": {"type": "mode", "mode": "default", "sessionId": SID},
    "last-prompt": {"type": "last-prompt", "lastPrompt": "Thanks. Now commit it.", "sessionId": SID},
    "worktree-state": {"type": "worktree-state", "state": "active", "sessionId": SID},
    "pr-link": {"type": "pr-link", "url": "https://example.invalid/pr/7", "sessionId": SID},
    "tag": {"type": "tag", "tag": "checkout", "sessionId": SID},
    "file-history-snapshot": {"type": "file-history-snapshot", "messageId": "u-02",
                              "snapshot": {"messageId": "u-02", "trackedFileBackups": {}}, "isSnapshotUpdate": False},
    "queue-operation": {"type": "queue-operation", "operation": "enqueue", "sessionId": SID,
                        "timestamp": "2026-03-01T10:00:02Z", "content": "also run the linter"},
    "progress": {**ENV, "type": "progress", "uuid": "p-1", "data": {"type": "hook_progress", "hookEvent": "PostToolUse"}},
    "system": {**ENV, "type": "system", "subtype": "turn_duration", "durationMs": 5021, "uuid": "s-1"},
    "attachment": {**ENV, "type": "attachment", "uuid": "a-1",
                   "attachment": {"type": "hook_success", "hookName": "SessionStart:startup", "output": "ok"}},
}


def _lines() -> list[dict]:
    return [json.loads(line) for line in (FIX / "session.jsonl").read_text().splitlines()]


def _write(path: Path, recs: list[dict]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in recs))
    return path


def _events(items: list) -> list:
    return [i for i in items if not isinstance(i, SessionStart)]


def test_every_line_type_has_a_test_here():
    assert set(claude_code.LINE_TYPES) == set(SKIPPED) | {"user", "assistant"}


@pytest.mark.parametrize("kind", sorted(SKIPPED))
def test_skipped_type_changes_nothing_wherever_it_stands(kind, tmp_path):
    base = list(claude_code.read(_write(tmp_path / "base.jsonl", _lines())))
    for at in (0, 6, len(_lines())):
        recs = _lines()
        recs.insert(at, SKIPPED[kind])
        path = _write(tmp_path / f"with-{at}.jsonl", recs)
        assert sniff(path) == "claude-code", (kind, at)
        items = list(claude_code.read(path))
        assert not [i for i in items if isinstance(i, ReadError)]
        # the same events; their lines moved by one past the insertion
        assert [type(i) for i in _events(items)] == [type(i) for i in _events(base)], (kind, at)
        assert [getattr(i, "text", None) for i in _events(items)] == [getattr(i, "text", None) for i in _events(base)]


def test_api_error_retries_are_retry_events_not_calls(tmp_path):
    recs = _lines()
    retry = {**ENV, "type": "system", "subtype": "api_error", "level": "error", "uuid": "s-2",
             "error": {"status": 529, "message": "overloaded"}, "retryInMs": 550, "retryAttempt": 1, "maxRetries": 10}
    recs[6:6] = [retry, {**retry, "retryAttempt": 2}]
    items = list(claude_code.read(_write(tmp_path / "r.jsonl", recs)))
    retries = [i for i in items if isinstance(i, Retry)]
    assert [r.text for r in retries] == ["api_error 529 overloaded (attempt 1/10)", "api_error 529 overloaded (attempt 2/10)"]
    assert [r.line for r in retries] == [7, 8] and retries[0].ts == ENV["timestamp"]
    assert sum(len(i.calls) for i in items if isinstance(i, Batch)) == 5


def test_a_queued_prompt_is_the_person_speaking(tmp_path):
    recs = _lines()
    queued = {**ENV, "type": "attachment", "uuid": "a-2", "attachment": {
        "type": "queued_command", "prompt": "also run the linter", "commandMode": "prompt", "origin": {"kind": "human"}}}
    notice = {**ENV, "type": "attachment", "uuid": "a-3", "attachment": {
        "type": "queued_command", "prompt": "<task-notification>done</task-notification>",
        "commandMode": "task-notification", "origin": {"kind": "task-notification"}}}
    recs[8:8] = [queued, notice]
    items = list(claude_code.read(_write(tmp_path / "q.jsonl", recs)))
    turns = [i for i in items if isinstance(i, UserTurn)]
    assert [t.text for t in turns] == ["The checkout test fails on main, please fix it", "also run the linter",
                                       "Thanks. Now commit it."]
    assert turns[1].line == 9 and turns[1].ts == ENV["timestamp"]


def test_unknown_types_are_skipped_counted_and_logged(tmp_path, caplog):
    recs = _lines()
    recs[3:3] = [{**ENV, "type": "future-thing", "payload": {"x": 1}}] * 2 + [{**ENV, "type": "hologram"}]
    path = _write(tmp_path / "u.jsonl", recs)
    counts: Counter[str] = Counter()
    with caplog.at_level(logging.INFO, logger="loopledger.formats.claude_code"):
        items = list(claude_code.read(path, unknown_types=counts))
    assert counts == {"future-thing": 2, "hologram": 1}
    assert not [i for i in items if isinstance(i, ReadError)]
    assert sum(len(i.calls) for i in items if isinstance(i, Batch)) == 5
    assert "future-thing ×2" in caplog.text and str(path) in caplog.text


def test_title_prefers_the_persons_custom_title(tmp_path):
    recs = _lines()
    recs.insert(0, SKIPPED["ai-title"])
    recs.append(SKIPPED["custom-title"])
    info = next(iter(claude_code.read(_write(tmp_path / "t.jsonl", recs)))).info
    assert info.title == "checkout fix"
    recs = [r for r in _lines() if r.get("type") != "summary"]
    recs.insert(0, SKIPPED["ai-title"])
    info = next(iter(claude_code.read(_write(tmp_path / "t2.jsonl", recs)))).info
    assert info.title == "Checkout test repair"


def test_recent_file_opening_with_many_metadata_lines_sniffs_and_reads(tmp_path):
    """The shape that read as one error and zero calls: permission-mode first, then titles,
    snapshots, hooks and a long attachment before the first message."""
    head = [SKIPPED[k] for k in ("permission-mode", "custom-title", "ai-title", "agent-name", "file-history-snapshot",
                                 "queue-operation", "attachment", "progress", "mode", "cost-state")] * 3
    head.insert(5, {**ENV, "type": "attachment", "attachment": {"type": "todo_reminder", "content": "x" * 30_000}})
    path = _write(tmp_path / "recent.jsonl", head + _lines())
    assert sniff(path) == "claude-code"
    items = list(claude_code.read(path))
    assert items[0].info.key == SID
    assert sum(len(i.calls) for i in items if isinstance(i, Batch)) == 5


def test_metadata_only_file_is_claimed_but_has_no_session(tmp_path):
    path = _write(tmp_path / "ghost.jsonl", [SKIPPED["custom-title"], SKIPPED["permission-mode"]])
    assert sniff(path) == "claude-code"
    assert list(claude_code.read(path)) == []


def test_look_alikes_are_not_claude_code():
    for head in (
        b'{"type": "message", "role": "user", "content": [{"type": "input_text", "text": "hi"}]}\n',
        b'{"type": "session_meta", "payload": {"id": "x"}}\n{"type": "response_item"}\n',
        b'{"sessionId": "s", "projectHash": "p", "startTime": "t"}\n{"type": "user", "id": "u1", "content": []}\n',
        b'{"type": "user", "message": {"role": "user", "content": "hi"}}\n',  # no envelope
        b'{"type": "ai-title", "aiTitle": "x"}\n',  # nothing of Claude Code's own keys
    ):
        assert not claude_code.sniff(head), head
