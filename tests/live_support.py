"""A Claude Code session that loops on `npm test`, as its transcript file and as the hook events
Claude Code sends for it (field names from the Claude Code hooks reference), and a way to run
the real `loopledger hook` process on one event."""

from __future__ import annotations

import json
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

BIN = Path(sys.executable).parent / "loopledger"
SESSION = "7f3c9b2e-5d41-4e8a-9c07-1b2d3e4f5a60"
CWD = "/home/dev/shop"
FAILING = ("> shop@1.4.0 test\n> jest\n\nFAIL src/cart.test.js\n  ● total › adds tax\n\n"
           "    expect(received).toBe(expected)\n    Expected: 10.8\n    Received: 10\n\n"
           "Tests: 1 failed, 11 passed, 12 total")
COMMAND = {"command": "npm test", "description": "Run the test suite"}


@dataclass(frozen=True)
class Loop:
    transcript: Path
    call_ids: list[str]
    events: list[dict]  # hook events, in the order Claude Code sends them (answers for every call)


def npm_test_loop(folder: Path, calls: int = 6, session: str = SESSION) -> Loop:
    """The transcript an unguarded agent writes (every call answered with the same failure),
    and the hook events for it."""
    path = folder / f"{session}.jsonl"
    lines: list[dict] = []
    base = {"parentUuid": None, "isSidechain": False, "userType": "external", "cwd": CWD, "sessionId": session,
            "version": "2.1.40", "gitBranch": "main"}
    prompt = "The cart tests fail, fix them"
    lines.append({**base, "uuid": "u-0", "timestamp": "2026-11-30T10:00:00Z", "type": "user",
                  "message": {"role": "user", "content": prompt}})
    hook_base = {"session_id": session, "transcript_path": str(path), "cwd": CWD, "permission_mode": "default"}
    events: list[dict] = [{**hook_base, "hook_event_name": "SessionStart", "source": "startup"},
                          {**hook_base, "hook_event_name": "UserPromptSubmit", "prompt": prompt}]
    ids = []
    for i in range(calls):
        tid = f"toolu_01{i:04d}AbCdEf"
        ids.append(tid)
        ts = f"2026-11-30T10:00:{2 * i + 1:02d}Z"
        lines.append({**base, "uuid": f"a-{i}", "timestamp": ts, "type": "assistant", "requestId": f"req_{i}",
                      "message": {"model": "claude-sonnet-4-5", "id": f"msg_{i}", "type": "message",
                                  "role": "assistant",
                                  "content": [{"type": "tool_use", "id": tid, "name": "Bash", "input": COMMAND}],
                                  "stop_reason": "tool_use", "usage": {"input_tokens": 10}}})
        lines.append({**base, "uuid": f"r-{i}", "timestamp": f"2026-11-30T10:00:{2 * i + 2:02d}Z", "type": "user",
                      "message": {"role": "user", "content": [{"tool_use_id": tid, "type": "tool_result",
                                                               "content": FAILING, "is_error": True}]},
                      "toolUseResult": {"stdout": FAILING, "stderr": "", "interrupted": False, "isImage": False}})
        events.append({**hook_base, "hook_event_name": "PreToolUse", "tool_name": "Bash", "tool_input": COMMAND,
                       "tool_use_id": tid})
        events.append({**hook_base, "hook_event_name": "PostToolUseFailure", "tool_name": "Bash",
                       "tool_input": COMMAND, "tool_use_id": tid, "error": FAILING, "is_interrupt": False})
    path.write_text("".join(json.dumps(rec) + "\n" for rec in lines), encoding="utf-8")
    return Loop(path, ids, events)


def run_hook(event: dict | bytes, db: str, agent: str = "claude-code", log: Path | None = None,
             env: dict | None = None) -> subprocess.CompletedProcess:
    """One hook process, as the agent starts it: the event on stdin, the answer on stdout."""
    raw = event if isinstance(event, bytes) else json.dumps(event).encode()
    cmd = [str(BIN), "hook", agent, "--db", db] + (["--log", str(log)] if log else [])
    return subprocess.run(cmd, input=raw, capture_output=True, timeout=120, env=env)


def output(proc: subprocess.CompletedProcess) -> dict | None:
    text = proc.stdout.decode().strip()
    return json.loads(text) if text else None


def receive_spans(proc: subprocess.Popen, port: int, body: bytes, spans: int, wait_s: float = 120) -> None:
    """Once the `loopledger receive` process `proc` answers on 127.0.0.1:`port`, post `body` (an
    OTLP/JSON request; acknowledged with 200) and wait until `spans` spans are in the ledger."""
    import time
    import urllib.request

    health = f"http://127.0.0.1:{port}/health"
    deadline = time.monotonic() + wait_s
    while True:
        try:
            urllib.request.urlopen(health, timeout=5).read()
            break
        except OSError:
            assert time.monotonic() < deadline and proc.poll() is None, "receive did not start"
            time.sleep(0.1)
    req = urllib.request.Request(f"http://127.0.0.1:{port}/v1/traces", data=body, method="POST",
                                 headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=60) as r:
        assert r.status == 200
    while json.loads(urllib.request.urlopen(health, timeout=10).read())["ingested_spans"] < spans:
        assert time.monotonic() < deadline, "the spans never reached the ledger"
        time.sleep(0.1)


def make_ledger(target: str | Path) -> None:
    """A current, empty ledger at `target` (a path or a SQLAlchemy URL): `enforce` and `hook
    install` choose in an existing ledger only, never creating one."""
    from loopledger.ledger import migrate
    from loopledger.ledger.engine import make_engine, sqlite_url

    text = str(target)
    engine = make_engine(text if "://" in text else sqlite_url(Path(text)))
    try:
        migrate.upgrade(engine)
    finally:
        engine.dispose()


def socket_count(pid: int) -> int:
    """The sockets process `pid` holds open (a resident: its listening socket, plus one per
    request it has accepted and not yet answered)."""
    import os

    n = 0
    for fd in Path(f"/proc/{pid}/fd").iterdir():
        try:
            n += os.readlink(fd).startswith("socket:")
        except OSError:
            pass
    return n


def wait_until(predicate, what: str, hang_s: float = 120) -> None:
    """Poll `predicate` until it holds; the bound only stops a hang (it fails the test as one)."""
    import time

    deadline = time.monotonic() + hang_s
    while not predicate():
        assert time.monotonic() < deadline, f"never: {what}"
        time.sleep(0.02)


def gone(pid: int) -> bool:
    """The process has exited (a zombie not yet reaped counts as exited)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] == "Z"
    except (FileNotFoundError, ProcessLookupError):
        return True

