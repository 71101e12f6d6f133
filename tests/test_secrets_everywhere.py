"""Point 3 of issue 17: the same secrets fed through every path that stores, logs or prints
(ingest, the Claude Code hook, `loopledger guard`, LiveGuard), then every column of every table
of the ledger (reflected from the database, so a table added later is grepped too; sealed
snapshots decompressed) and every byte logged or printed is searched for them.

The receiver's leg (`loopledger receive`: spans in, the spool and its tables grepped) belongs
here too: see RECEIVE LEG below."""

from __future__ import annotations

import json
import stat
import subprocess
import sys
import zlib
from pathlib import Path

import pytest
from loopledger.ledger import migrate
from loopledger.ledger.engine import make_engine
from sqlalchemy import MetaData, select

from tests.live_support import BIN, receive_spans, run_hook

# Realistic shapes: an Anthropic API key (sk-ant-api03-, 93 characters of body, ending AA) and an
# OpenAI project key (sk-proj-, a long url-safe body), as the providers issue them.
ANTHROPIC = "sk-ant-api03-" + "Xq7vR2mKp9LwZt4bN8cY1dF6gH3jS5aE0uI-oP_rT2yU7iO9pL4kJ6hG8fD1sA3zX5cV7bN9mQ2wE4rT6yU8iO0pLAA"
OPENAI = "sk-proj-" + "Tz8Kq3WmN5bV7cX9zL1aS3dF5gH7jK9lQ2wE4rT6yU8iO0pZxCvBnMaSdFgHjKl_-T3BlbkFJ" + "r4Nd0mK3y5"
SECRETS = (ANTHROPIC, OPENAI)
# Any 24-character run of a key's body found anywhere is a leak, not just the whole key.
FRAGMENTS = tuple(k[i:i + 24] for k in SECRETS for i in range(8, len(k) - 24, 12))
SESSION = "0b5e6c1a-9d2f-4e71-8a3b-5c6d7e8f9a01"
CURL = f'curl -s -H "Authorization: Bearer {ANTHROPIC}" https://api.anthropic.com/v1/models'
ENV_OUT = f"HOME=/home/dev\nOPENAI_API_KEY={OPENAI}\nPATH=/usr/bin"


def assert_clean(blob: bytes, where: str) -> None:
    for frag in FRAGMENTS:
        assert frag.encode() not in blob, f"a secret ({frag[:12]}…) is in {where}"


def ledger_bytes(url: str) -> bytes:
    """Every value of every column of every table the database holds, as bytes; blobs also
    decompressed when they are sealed snapshots (a MAC, then zlib)."""
    eng = make_engine(url)
    md = MetaData()
    md.reflect(eng)
    out: list[bytes] = []
    with eng.connect() as conn:
        for table in md.sorted_tables:
            for row in conn.execute(select(table)):
                for v in row:
                    if isinstance(v, bytes | memoryview):
                        v = bytes(v)
                        out.append(v)
                        for start in (0, 32):
                            try:
                                out.append(zlib.decompress(v[start:]))
                            except zlib.error:
                                pass
                    elif v is not None:
                        out.append(str(v).encode("utf-8", "surrogatepass"))
    eng.dispose()
    return b"\n".join(out)


def _ledger(url: str) -> str:
    eng = make_engine(url)
    migrate.upgrade(eng)
    eng.dispose()
    return url


def _transcript(folder: Path) -> Path:
    """A Claude Code session: the prompt pastes a key, a Bash call sends one, its result prints one."""
    path = folder / f"{SESSION}.jsonl"
    base = {"parentUuid": None, "isSidechain": False, "userType": "external", "cwd": "/home/dev/app",
            "sessionId": SESSION, "version": "2.1.40", "gitBranch": "main"}
    lines = [{**base, "uuid": "u-0", "timestamp": "2026-11-30T10:00:00Z", "type": "user",
              "message": {"role": "user", "content": f"my key is {OPENAI}, list the models"}}]
    for i in range(3):
        tid = f"toolu_01{i:04d}SeCrEt"
        lines.append({**base, "uuid": f"a-{i}", "timestamp": f"2026-11-30T10:00:{2 * i + 1:02d}Z",
                      "type": "assistant", "message": {
                          "model": "claude-sonnet-4-5", "id": f"msg_{i}", "type": "message", "role": "assistant",
                          "content": [{"type": "text", "text": f"Trying with Bearer {ANTHROPIC}"},
                                      {"type": "tool_use", "id": tid, "name": "Bash", "input": {"command": CURL}}],
                          "stop_reason": "tool_use", "usage": {"input_tokens": 10}}})
        lines.append({**base, "uuid": f"r-{i}", "timestamp": f"2026-11-30T10:00:{2 * i + 2:02d}Z", "type": "user",
                      "message": {"role": "user", "content": [{"tool_use_id": tid, "type": "tool_result",
                                                               "content": ENV_OUT, "is_error": False}]},
                      "toolUseResult": {"stdout": ENV_OUT, "stderr": "", "interrupted": False}})
    path.write_text("".join(json.dumps(r) + "\n" for r in lines), encoding="utf-8")
    return path


def _hook_events(transcript: Path) -> list[dict]:
    base = {"session_id": SESSION, "transcript_path": str(transcript), "cwd": "/home/dev/app",
            "permission_mode": "default"}
    events = [{**base, "hook_event_name": "SessionStart", "source": "startup"},
              {**base, "hook_event_name": "UserPromptSubmit", "prompt": f"my key is {OPENAI}, list the models"}]
    for i in range(3):
        tid = f"toolu_01{i:04d}SeCrEt"
        events.append({**base, "hook_event_name": "PreToolUse", "tool_name": "Bash", "tool_input": {"command": CURL},
                       "tool_use_id": tid})
        events.append({**base, "hook_event_name": "PostToolUse", "tool_name": "Bash", "tool_input": {"command": CURL},
                       "tool_use_id": tid,
                       "tool_response": {"stdout": ENV_OUT, "stderr": "", "interrupted": False}})
    return events


def _cli(*args: str, stdin: bytes = b"", cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run([str(BIN), *args], input=stdin, capture_output=True, timeout=120, cwd=cwd)


@pytest.fixture
def ledger(db_url):
    return _ledger(db_url)


def test_point_3_the_hook_stores_and_logs_no_secret(tmp_path, ledger):
    log = tmp_path / "state" / "hook.log"
    transcript = _transcript(tmp_path)
    printed = []
    for ev in _hook_events(transcript):
        proc = run_hook(ev, ledger, log=log)
        assert proc.returncode == 0, proc.stderr
        printed.append(proc.stdout + proc.stderr)
    # Events the hook cannot read are allowed and logged, the log line quoting the bad input;
    # the first key straddles the excerpt's 200-character cut.
    for raw in (b'{"session_id": "' + b"x" * 170 + b'", "tool_input": {"command": "' + CURL.encode(),
                json.dumps({"session_id": SESSION, "hook_event_name": "PreToolUse",
                            "tool_input": {"command": CURL}}).encode()):
        proc = run_hook(raw, ledger, log=log)
        assert proc.returncode == 0 and proc.stdout == b""
        printed.append(proc.stdout + proc.stderr)
    stored = ledger_bytes(ledger)
    assert_clean(stored, "the ledger")
    assert_clean(b"".join(printed), "the hook's output")
    logged = log.read_bytes()
    assert len(logged.splitlines()) == 2 and b"not JSON" in logged and b"without tool_name" in logged
    assert_clean(logged, "the hook log")
    assert stat.S_IMODE(log.stat().st_mode) == 0o600
    # Not vacuous: the calls and answers are stored, with the markers where the keys were.
    assert stored.count(b"Bearer [REDACTED:bearer-token]") >= 3
    assert stored.count(b"OPENAI_API_KEY=[REDACTED:openai-key]") >= 3
    # The transcript, ingested into the same ledger afterwards: still nothing in clear.
    ing = _cli("ingest", str(transcript), "--db", ledger, cwd=tmp_path)
    assert ing.returncode == 0, ing.stderr
    assert_clean(ing.stdout + ing.stderr, "ingest's output")
    stored = ledger_bytes(ledger)
    assert_clean(stored, "the ledger after ingest")
    assert stored.count(b"[REDACTED:openai-key]") > 3  # the transcript's prompt and answers too


def test_point_3_guard_json_lines_store_and_print_no_secret(tmp_path, ledger):
    lines = [{"session": "g1", "event": "user", "text": f"use {OPENAI}"}]
    for i in range(3):
        lines.append({"session": "g1", "event": "call", "id": f"c{i}", "tool": "Bash", "args": {"command": CURL}})
        lines.append({"session": "g1", "event": "answer", "id": f"c{i}", "text": ENV_OUT})
    lines.append({"session": "g1", "event": "answer", "id": "c9", "text": {"stdout": ENV_OUT, "code": 0}})
    feed = b"".join(json.dumps(x).encode() + b"\n" for x in lines)
    feed += b'{"session": "g1", "event": "call", "tool": "Bash", "args": {"command": "' + CURL.encode() + b'\n'
    feed += json.dumps({"session": "g1", "event": f"nope {OPENAI}"}).encode() + b"\n"
    proc = _cli("guard", "--db", ledger, stdin=feed, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    out = [json.loads(x) for x in proc.stdout.splitlines()]
    assert len(out) == 5 and sum("error" in o for o in out) == 2  # 3 verdicts, 2 unreadable lines
    assert_clean(proc.stdout + proc.stderr, "guard's output")
    stored = ledger_bytes(ledger)
    assert_clean(stored, "the ledger")
    assert stored.count(b"Bearer [REDACTED:bearer-token]") >= 3 and b"OPENAI_API_KEY=[REDACTED:openai-key]" in stored


def test_point_3_live_guard_stores_no_secret(tmp_path, ledger):
    from loopledger.guards import LiveGuard

    with LiveGuard("run-length", db=ledger, session="py1") as guard:
        guard.user(f"use {OPENAI}")
        for i in range(3):
            d = guard.call("Bash", {"command": CURL, "env": {"KEY": OPENAI}}, f"p{i}")
            assert_clean(json.dumps([d.reason, d.message(), d.tool]).encode(), "a decision")
            guard.answer(f"p{i}", {"stdout": ENV_OUT})
    stored = ledger_bytes(ledger)
    assert_clean(stored, "the ledger")
    assert stored.count(b"[REDACTED:bearer-token]") >= 3 and stored.count(b"[REDACTED:openai-key]") >= 6


def test_point_3_ingest_stores_prints_and_logs_no_secret(tmp_path, ledger):
    transcript = _transcript(tmp_path)
    # A line of a type the reader does not know is skipped and named in the log: its type is
    # transcript text, here a key.
    with open(transcript, "a") as fh:
        fh.write(json.dumps({"type": f"note-{OPENAI}", "sessionId": SESSION, "uuid": "n-1"}) + "\n")
    log = tmp_path / "ingest.log"
    ing = _cli("ingest", str(transcript), "--db", ledger, "--log-file", str(log), cwd=tmp_path)
    assert ing.returncode == 0, ing.stderr
    assert_clean(ing.stdout + ing.stderr, "ingest's output")
    logged = log.read_bytes()
    assert b"[REDACTED:openai-key]" in logged  # the line was logged, redacted
    assert_clean(logged, "ingest's log file")
    assert stat.S_IMODE(log.stat().st_mode) == 0o600
    stored = ledger_bytes(ledger)
    assert_clean(stored, "the ledger")
    assert stored.count(b"Bearer [REDACTED:bearer-token]") >= 3
    rep = _cli("replay", str(transcript), cwd=tmp_path)
    assert rep.returncode == 0, rep.stderr
    assert_clean(rep.stdout + rep.stderr, "replay's output")


def _copilot_events(wrapped: bool) -> str:
    """A GitHub Copilot CLI events.jsonl (tests/fixtures/formats/copilot_cli) whose user message,
    tool arguments, results and error carry the keys; `wrapped`: each event as tools keep them."""
    def ev(n: int, kind: str, data: dict) -> dict:
        return {"type": kind, "data": data, "id": f"00000000-0000-4000-8000-{n:012d}",
                "timestamp": f"2026-06-18T19:13:{n:02d}.000Z", "parentId": None}
    call = {"toolCallId": "call_1", "name": "bash", "arguments": {"command": CURL}, "type": "function"}
    events = [
        ev(1, "session.start", {"sessionId": SESSION, "version": 1, "producer": "copilot-agent",
                                "copilotVersion": "1.0.63", "startTime": "2026-06-18T19:13:01.000Z",
                                "context": {"cwd": "/home/dev"}}),
        ev(2, "user.message", {"content": f"my key is {OPENAI}, list the models", "interactionId": "i-1"}),
        ev(3, "assistant.message", {"content": "Listing them.", "toolRequests": [call]}),
        ev(4, "tool.execution_start", {"toolCallId": "call_1", "toolName": "bash", "arguments": {"command": CURL}}),
        ev(5, "tool.execution_complete", {"toolCallId": "call_1", "success": True,
                                          "result": {"content": ENV_OUT, "detailedContent": ENV_OUT}}),
        ev(6, "tool.execution_start", {"toolCallId": "call_2", "toolName": "bash", "arguments": {"command": CURL}}),
        ev(7, "tool.execution_complete", {"toolCallId": "call_2", "success": False,
                                          "error": {"message": f"401 for {ANTHROPIC}", "code": "failure"}}),
    ]
    if wrapped:
        events = [{"role": "", "content": "", "raw": e} for e in events]
    return "".join(json.dumps(e) + "\n" for e in events)


@pytest.mark.parametrize("wrapped", [False, True], ids=["plain", "wrapped"])
def test_point_3_a_copilot_cli_session_is_stored_without_its_secrets(tmp_path, ledger, wrapped):
    transcript = tmp_path / "events.jsonl"
    transcript.write_text(_copilot_events(wrapped), encoding="utf-8")
    ing = _cli("ingest", str(transcript), "--db", ledger, "--format", "copilot-cli", cwd=tmp_path)
    assert ing.returncode == 0, ing.stderr
    assert_clean(ing.stdout + ing.stderr, "ingest's output")
    stored = ledger_bytes(ledger)
    assert_clean(stored, "the ledger")
    # Read, not skipped: both calls, the user's message and the failure are there, redacted.
    assert stored.count(b"Bearer [REDACTED:bearer-token]") >= 2 and b"[REDACTED:openai-key]" in stored


# ── RECEIVE LEG ─────────────────────────────────────────────────────────────────────────────────

def test_point_2_receive_spools_stores_and_prints_no_secret(tmp_path, ledger):
    """`loopledger receive` on 127.0.0.1, its spool in tmp_path: an OTLP/JSON span carrying both keys
    (arguments, result, a plain attribute); the spool (0600 files, 0700 folder), every table and
    everything the receiver printed are grepped."""
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    spool = tmp_path / "spool"
    proc = subprocess.Popen([str(BIN), "receive", "--db", ledger, "--port", str(port), "--spool", str(spool)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd=tmp_path)
    attrs = {"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "Bash",
             "gen_ai.tool.call.id": "call_secret", "gen_ai.conversation.id": SESSION,
             "gen_ai.tool.call.arguments": json.dumps({"command": CURL}), "gen_ai.tool.call.result": ENV_OUT,
             "user.note": f"key {ANTHROPIC} and {OPENAI}"}
    span = {"traceId": "5b8efff798038103d269b633813fc60c", "spanId": "00f067aa0ba902b7", "name": "execute_tool Bash",
            "startTimeUnixNano": "1764500000000000000", "endTimeUnixNano": "1764500001000000000",
            "attributes": [{"key": k, "value": {"stringValue": v}} for k, v in attrs.items()]}
    body = json.dumps({"resourceSpans": [{"resource": {}, "scopeSpans": [{"spans": [span]}]}]}).encode()
    try:
        receive_spans(proc, port, body, 1, wait_s=60)
    finally:
        proc.terminate()
        out, err = proc.communicate(timeout=60)
    assert_clean(out + err, "receive's output")
    files = list(spool.iterdir())
    assert files and stat.S_IMODE(spool.stat().st_mode) == 0o700
    for f in files:
        assert stat.S_IMODE(f.stat().st_mode) == 0o600, f
        assert_clean(f.read_bytes(), f"the spool file {f.name}")
    stored = ledger_bytes(ledger)
    assert SESSION.encode() in stored and b"[REDACTED:bearer-token]" in stored and b"[REDACTED:openai-key]" in stored
    assert_clean(stored, "the ledger")


if __name__ == "__main__":  # pragma: no cover
    sys.exit(pytest.main([__file__, *sys.argv[1:]]))
