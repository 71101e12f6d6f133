"""Issue 27, point 3, end to end: every kind of secret LoopLedger redacts, in every form it
travels in (plain, JSON-escaped, after `\\uXXXX` and `\\n`, nested JSON-in-JSON, quoted and
escaped-quoted labels, odd letter case: bench/gen_hostile.py), sent through ingest, the Claude
Code hook (with its resident), `loopledger guard` and `loopledger receive`; then every file on
disk the four wrote (the ledger, the spool, the logs, the caches: everything under the test's
HOME and work folder) and every column of every table are searched for any 16 characters of any
of the secrets."""

from __future__ import annotations

import json
import os
import socket
import subprocess
from pathlib import Path

import pytest

from bench.gen_hostile import SECRETS, every_form, leaks
from tests.live_support import BIN, receive_spans, run_hook
from tests.test_secrets_everywhere import ledger_bytes

SESSION = "5ec7e7f0-27aa-4b1c-9d3e-0f1e2d3c4b5a"
FORMS = every_form()
BY_KIND = {kind: [text for k, _, _, text in FORMS if k == kind] for kind in SECRETS}


def _transcript(path: Path) -> None:
    """A Claude Code session: per kind, a call whose arguments hold every form, its result too."""
    base = {"parentUuid": None, "isSidechain": False, "userType": "external", "cwd": "/home/dev/app",
            "sessionId": SESSION, "version": "2.1.40", "gitBranch": "main"}
    lines = [{**base, "uuid": "u-0", "timestamp": "2026-12-01T10:00:00Z", "type": "user",
              "message": {"role": "user", "content": "\n".join(t for texts in BY_KIND.values() for t in texts)}}]
    for i, texts in enumerate(BY_KIND.values()):
        tid = f"toolu_01{i:04d}FoRmS"
        lines.append({**base, "uuid": f"a-{i}", "timestamp": f"2026-12-01T10:00:{2 * i + 1:02d}Z", "type": "assistant",
                      "message": {"model": "claude-sonnet-4-5", "id": f"msg_{i}", "type": "message", "role": "assistant",
                                  "content": [{"type": "tool_use", "id": tid, "name": "Bash",
                                               "input": {"command": texts[0], "forms": texts}}],
                                  "stop_reason": "tool_use", "usage": {"input_tokens": 10}}})
        lines.append({**base, "uuid": f"r-{i}", "timestamp": f"2026-12-01T10:00:{2 * i + 2:02d}Z", "type": "user",
                      "message": {"role": "user", "content": [{"tool_use_id": tid, "type": "tool_result",
                                                               "content": "\n".join(texts), "is_error": False}]}})
    path.write_text("".join(json.dumps(r) + "\n" for r in lines), encoding="utf-8")


def _hook_events(transcript: Path) -> list[dict | bytes]:
    base = {"session_id": SESSION + "-hook", "transcript_path": str(transcript), "cwd": "/home/dev/app"}
    events: list[dict | bytes] = [{**base, "hook_event_name": "UserPromptSubmit",
                                   "prompt": "\n".join(t for texts in BY_KIND.values() for t in texts)}]
    for i, texts in enumerate(BY_KIND.values()):
        call = {**base, "tool_name": "Bash", "tool_input": {"command": texts[0], "forms": texts},
                "tool_use_id": f"toolu_h{i:04d}"}
        events.append({**call, "hook_event_name": "PreToolUse"})
        events.append({**call, "hook_event_name": "PostToolUse",
                       "tool_response": {"stdout": "\n".join(texts), "stderr": texts[-1], "interrupted": False}})
        # An event the hook cannot read: its log line quotes the bad bytes.
        events.append(b'{"session_id": "x", "tool_input": "' + texts[1].encode() + b'"')
    return events


def _guard_feed() -> bytes:
    lines = []
    for i, texts in enumerate(BY_KIND.values()):
        lines.append(json.dumps({"session": "forms", "event": "call", "id": f"g{i}", "tool": "Bash",
                                 "args": {"command": texts[0], "forms": texts}}))
        lines.append(json.dumps({"session": "forms", "event": "answer", "id": f"g{i}", "text": "\n".join(texts)}))
        lines.append(json.dumps({"session": "forms", "event": f"nope {texts[2]}"}))  # a bad line, quoted back
    return ("\n".join(lines) + "\n").encode()


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _receive(ledger: str, work: Path, env: dict) -> None:
    port = _free_port()
    proc = subprocess.Popen([str(BIN), "receive", "--db", ledger, "--port", str(port), "--spool", str(work / "spool")],
                            stdout=open(work / "receive.out", "wb"), stderr=subprocess.STDOUT, cwd=work, env=env)
    spans = []
    for i, texts in enumerate(BY_KIND.values()):
        for j, text in enumerate(texts):
            attrs = {"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "Bash",
                     "gen_ai.tool.call.id": f"call_{i}_{j}", "gen_ai.conversation.id": SESSION + "-otlp",
                     "gen_ai.tool.call.arguments": json.dumps({"command": text}), "gen_ai.tool.call.result": text,
                     "user.note": text}
            spans.append({"traceId": f"{i + 1:032x}", "spanId": f"{i * 100 + j + 1:016x}", "name": "execute_tool Bash",
                          "startTimeUnixNano": str(1_764_500_000_000_000_000 + (i * 100 + j) * 10**9),
                          "endTimeUnixNano": str(1_764_500_000_500_000_000 + (i * 100 + j) * 10**9),
                          "attributes": [{"key": k, "value": {"stringValue": v}} for k, v in attrs.items()]})
    body = json.dumps({"resourceSpans": [{"resource": {}, "scopeSpans": [{"spans": spans}]}]}).encode()
    try:
        receive_spans(proc, port, body, len(spans))
    finally:
        proc.terminate()
        proc.wait(timeout=60)


def _every_file(folder: Path) -> dict[Path, bytes]:
    return {p: p.read_bytes() for p in folder.rglob("*") if p.is_file() and not p.is_symlink()}


@pytest.mark.timeout(900)
def test_point_3_every_kind_of_secret_in_every_form_reaches_no_file_and_no_table_on_any_path(tmp_path, db_url):
    given, work = tmp_path / "given", tmp_path / "work"  # what we send stays in `given`, never searched
    given.mkdir()
    work.mkdir()
    # The resident's socket under HOME's ~/.cache (no XDG_RUNTIME_DIR), where stop_residents looks.
    env = {k: v for k, v in os.environ.items() if k not in ("XDG_RUNTIME_DIR", "XDG_CACHE_HOME")}
    env.update(HOME=str(work), XDG_STATE_HOME=str(work / "state"), LOOPLEDGER_HOOK_RESIDENT_IDLE="5")
    ledger = db_url if not db_url.startswith("sqlite") else f"sqlite:///{work / 'ledger.sqlite'}"
    transcript = given / f"{SESSION}.jsonl"
    _transcript(transcript)
    printed: list[bytes] = []
    ing = subprocess.run([str(BIN), "ingest", str(transcript), "--db", ledger, "--log-file", str(work / "ingest.log")],
                         capture_output=True, timeout=300, env=env, cwd=work)
    assert ing.returncode == 0, ing.stderr
    printed.append(ing.stdout + ing.stderr)
    hook_log = work / "state" / "loopledger" / "hook.log"
    from tests.real_clients import resident_pids, stop_residents

    try:
        for ev in _hook_events(transcript):
            proc = run_hook(ev, ledger, log=hook_log, env=env)
            assert proc.returncode == 0, proc.stderr
            printed.append(proc.stdout + proc.stderr)
    finally:
        stop_residents(work)
    assert resident_pids(work) == []
    guard = subprocess.run([str(BIN), "guard", "--db", ledger], input=_guard_feed(), capture_output=True, timeout=300,
                           env=env, cwd=work)
    assert guard.returncode == 0, guard.stderr
    verdicts = [json.loads(line) for line in guard.stdout.splitlines()]
    assert len(verdicts) == 2 * len(SECRETS)  # a verdict per call, an error line per bad line
    printed.append(guard.stdout + guard.stderr)
    _receive(ledger, work, env)

    files = _every_file(work)
    assert hook_log in files and work / "ingest.log" in files and any("spool" in p.parts for p in files)
    stored = ledger_bytes(ledger)
    for kind, secret in SECRETS.items():
        frags = [f.encode() for f in leaks(secret)]
        for path, blob in files.items():
            assert not any(f in blob for f in frags), f"{kind} in {path}"
        assert not any(f in stored for f in frags), f"{kind} in the ledger"
        assert not any(f in out for out in printed for f in frags), f"{kind} printed"
        # Not vacuous: each kind was stored, as its marker, by the paths that store text.
        assert stored.count(f"[REDACTED:{kind}]".encode()) >= 4 * len(BY_KIND[kind]), kind
    assert b"[REDACTED:" in hook_log.read_bytes()
