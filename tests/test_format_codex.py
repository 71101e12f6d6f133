"""Codex CLI rollouts: current envelope and legacy bare items; shell output unwrapped."""

from __future__ import annotations

import json
from pathlib import Path

from loopledger.events import Answers, Batch, ReadError, SessionStart, UserTurn
from loopledger.formats import codex

FIX = Path(__file__).parent / "fixtures" / "formats" / "codex"
CURRENT = FIX / "rollout-2025-12-02T09-00-00-019ad001-aaaa-7bbb-8ccc-123456789abc.jsonl"


def test_current_envelope():
    items = list(codex.read(CURRENT))
    assert [type(i).__name__ for i in items] == [
        "SessionStart", "UserTurn", "Batch", "Answers", "Batch", "Answers", "Batch", "Answers",
        "Batch", "Answers", "Prose"]
    info = items[0].info
    assert info.key == "019ad001-aaaa-7bbb-8ccc-123456789abc" and info.model == "gpt-5.1-codex"
    assert info.meta["cli_version"] == "0.63.0" and info.started_at == "2025-12-02T09:00:00.000Z"
    # the injected <environment_context> message and the event_msg duplicate are not turns
    assert info.title == "make the flaky integration test pass"
    assert [i.text for i in items if isinstance(i, UserTurn)] == ["make the flaky integration test pass"]


def test_calls_and_outputs():
    items = list(codex.read(CURRENT))
    batches = [i for i in items if isinstance(i, Batch)]
    # one call per batch: a rollout does not say which calls were parallel
    assert [len(b.calls) for b in batches] == [1, 1, 1, 1]
    shell, _, patch, local = (b.calls[0] for b in batches)
    assert shell.name == "shell" and shell.args["command"] == ["bash", "-lc", "pytest -q tests/integration"]
    assert patch.name == "apply_patch" and patch.args["input"].startswith("*** Begin Patch")
    assert local.name == "local_shell" and local.args["command"] == ["pytest", "-q", "tests/integration"]
    answers = [i.answers[0] for i in items if isinstance(i, Answers)]
    assert [(a.call_id, a.is_error) for a in answers] == [
        ("call_1", True), ("call_2", True), ("call_3", False), ("call_4", False)]
    assert answers[0].text == "F.\n1 failed, 1 passed"  # unwrapped from {"output", "metadata"}
    assert answers[0].digest == answers[1].digest
    assert answers[3].text == "..\n2 passed"  # list output
    assert answers[0].ts == "2025-12-02T09:00:05.000Z"


def test_legacy_bare_items():
    items = list(codex.read(FIX / "rollout-legacy.jsonl"))
    assert [type(i).__name__ for i in items] == ["SessionStart", "UserTurn", "Batch", "Answers", "Prose"]
    info = items[0].info
    assert info.key == "6f1c2d3e-0000-4000-8000-000000000001" and info.title == "list the files"
    assert items[2].calls[0].args == {"command": ["ls"]}
    assert items[3].answers[0].text == "README.md\nsrc\n"


def test_bad_lines(tmp_path):
    lines = CURRENT.read_bytes().splitlines(keepends=True)
    path = tmp_path / "rollout.jsonl"
    path.write_bytes(b"".join(lines[:6]) + b'{"timestamp": "x", "type": "response_item", "payl\n'
                     + b'"a string"\n{"weird": true}\n' + b"".join(lines[6:]))
    items = list(codex.read(path))
    errors = [i for i in items if isinstance(i, ReadError)]
    assert [e.line for e in errors] == [7, 8, 9]
    assert "neither a rollout envelope nor a Responses item" in errors[2].message
    assert sum(isinstance(i, Batch) for i in items) == 4
    assert sum(isinstance(i, SessionStart) for i in items) == 1


def test_sniff():
    assert codex.sniff(CURRENT.read_bytes()[:2000])
    assert codex.sniff((FIX / "rollout-legacy.jsonl").read_bytes())
    assert not codex.sniff(json.dumps({"type": "function_call", "name": "f"}).encode() + b"\n")
    assert not codex.sniff(b'{"type": "summary", "summary": "x", "leafUuid": "u"}\n')


def test_sniff_when_session_meta_outgrows_the_head():
    meta = {"timestamp": "2025-12-02T09:00:00.000Z", "type": "session_meta",
            "payload": {"id": "x", "instructions": "y" * 100_000}}
    assert codex.sniff(json.dumps(meta).encode()[:65536])


def test_plain_text_exit_code_output(tmp_path):
    def env(payload):
        return {"timestamp": "t", "type": "response_item", "payload": payload}
    recs = [
        {"timestamp": "t", "type": "session_meta", "payload": {"id": "s"}},
        env({"type": "message", "role": "user", "content": [{"type": "input_text", "text": "run"}]}),
        env({"type": "function_call", "name": "shell_command", "arguments": "{\"command\": \"false\"}",
             "call_id": "c1"}),
        env({"type": "function_call_output", "call_id": "c1",
             "output": "Exit code: 1\nWall time: 0.1 seconds\nOutput:\n"}),
        env({"type": "function_call", "name": "shell_command", "arguments": "{\"command\": \"true\"}",
             "call_id": "c2"}),
        env({"type": "function_call_output", "call_id": "c2", "output": "Exit code: 0\nOutput:\nok"}),
    ]
    path = tmp_path / "r.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in recs))
    answers = [i.answers[0] for i in codex.read(path) if isinstance(i, Answers)]
    assert [(a.call_id, a.is_error) for a in answers] == [("c1", True), ("c2", False)]
