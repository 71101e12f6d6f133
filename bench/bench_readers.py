"""Read throughput per format (MB/s, calls/s) against plain `orjson.loads` over the same lines.

Each format gets a generated file of the same sessions (realistic argument and answer sizes, the
envelope fields the real format carries, and its skipped lines such as Claude Code progress
lines), read through `loopledger.formats.read` with the format forced. The baseline parses each line
of the very same file with orjson and nothing else, in the same run: the ratio is what the
reader adds on top of JSON parsing. Best of several repeats, to damp a noisy machine.
"""

from __future__ import annotations

import random
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import orjson
from loopledger.events import Batch
from loopledger.formats import read

TOOLS = ("Bash", "Read", "Edit", "Grep", "Glob", "browser_navigate")
WORDS = ("build", "fails", "module", "import", "config", "value", "returns", "None", "expected",
         "assert", "line", "error", "path", "src", "test", "retry", "cache", "query", "result")
# Derived, not given: 1M calls through the whole ingest in 60 s leaves the readers a fraction of
# it; at 100k calls/s they take 10 s of the 60.
BUDGET_CALLS_PER_S = 100_000


def _text(rng: random.Random, n: int) -> str:
    words: list[str] = []
    size = 0
    while size < n:
        words.append(rng.choice(WORDS))
        size += len(words[-1]) + 1
    return " ".join(words)


def _calls(rng: random.Random, n: int) -> Iterator[tuple[str, str, dict, str]]:
    for i in range(n):
        tool = rng.choice(TOOLS)
        args = {"command": f"cd /repo && pytest -x tests/test_{i % 97}.py", "timeout": 120} \
            if tool == "Bash" else {"path": f"src/pkg/module_{i % 53}.py", "pattern": _text(rng, 30)}
        answer = _text(rng, int(min(16_000, max(10, rng.lognormvariate(5.7, 1.0)))))
        yield f"call_{i}", tool, args, answer


def _claude_code(rng: random.Random, n: int) -> Iterator[dict]:
    env = {"isSidechain": False, "userType": "external", "cwd": "/repo", "version": "2.1.40",
           "sessionId": "5c1e0f3a-1111-4222-8333-944455556666", "gitBranch": "main"}
    yield {**env, "type": "user", "uuid": "u0", "timestamp": "t",
           "message": {"role": "user", "content": "fix the failing tests"}}
    for cid, tool, args, answer in _calls(rng, n):
        yield {**env, "type": "assistant", "uuid": "a" + cid, "timestamp": "t", "requestId": "r",
               "message": {"model": "claude-sonnet-4-5", "id": "msg_" + cid, "type": "message",
                           "role": "assistant", "usage": {"input_tokens": 3, "output_tokens": 90},
                           "content": [{"type": "tool_use", "id": cid, "name": tool, "input": args}]}}
        yield {**env, "type": "progress", "uuid": "p" + cid, "timestamp": "t", "toolUseID": cid,
               "data": {"type": "hook_progress", "hookEvent": "PostToolUse", "command": "callback"}}
        yield {**env, "type": "user", "uuid": "r" + cid, "timestamp": "t",
               "message": {"role": "user", "content": [
                   {"tool_use_id": cid, "type": "tool_result", "content": answer, "is_error": False}]}}


def _codex(rng: random.Random, n: int) -> Iterator[dict]:
    yield {"timestamp": "t", "type": "session_meta", "payload": {"id": "019ad001", "timestamp": "t",
                                                                 "cwd": "/repo", "cli_version": "0.63.0"}}
    yield {"timestamp": "t", "type": "response_item", "payload": {
        "type": "message", "role": "user", "content": [{"type": "input_text", "text": "fix the tests"}]}}
    for cid, tool, args, answer in _calls(rng, n):
        yield {"timestamp": "t", "type": "response_item", "payload": {
            "type": "function_call", "name": tool, "arguments": orjson.dumps(args).decode(), "call_id": cid}}
        out = orjson.dumps({"output": answer, "metadata": {"exit_code": 0, "duration_seconds": 0.1}})
        yield {"timestamp": "t", "type": "response_item", "payload": {
            "type": "function_call_output", "call_id": cid, "output": out.decode()}}
        yield {"timestamp": "t", "type": "event_msg", "payload": {"type": "token_count", "info": None}}


def _openai_chat(rng: random.Random, n: int) -> Iterator[dict]:
    yield {"role": "system", "content": "You are a coding agent."}
    yield {"role": "user", "content": "fix the failing tests"}
    for cid, tool, args, answer in _calls(rng, n):
        yield {"role": "assistant", "content": None, "tool_calls": [
            {"id": cid, "type": "function", "function": {"name": tool, "arguments": orjson.dumps(args).decode()}}]}
        yield {"role": "tool", "tool_call_id": cid, "content": answer}


def _openai_responses(rng: random.Random, n: int) -> Iterator[dict]:
    yield {"role": "user", "content": "fix the failing tests"}
    for cid, tool, args, answer in _calls(rng, n):
        yield {"type": "function_call", "call_id": cid, "name": tool, "arguments": orjson.dumps(args).decode()}
        yield {"type": "function_call_output", "call_id": cid, "output": answer}


def _anthropic(rng: random.Random, n: int) -> Iterator[dict]:
    yield {"role": "user", "content": "fix the failing tests"}
    for cid, tool, args, answer in _calls(rng, n):
        yield {"role": "assistant", "content": [{"type": "tool_use", "id": cid, "name": tool, "input": args}]}
        yield {"role": "user", "content": [{"type": "tool_result", "tool_use_id": cid, "content": answer}]}


FORMATS: dict[str, Callable[[random.Random, int], Iterator[dict]]] = {
    "claude-code": _claude_code, "codex": _codex, "openai-chat": _openai_chat,
    "openai-responses": _openai_responses, "anthropic": _anthropic,
}


def _best(fn: Callable[[], int], repeats: int) -> tuple[float, int]:
    best = float("inf")
    out = 0
    for _ in range(repeats):
        t0 = time.perf_counter()
        out = fn()
        best = min(best, time.perf_counter() - t0)
    return best, out


def _reader_calls(path: Path, fmt: str) -> int:
    return sum(len(i.calls) for i in read(path, format=fmt) if isinstance(i, Batch))


def _orjson_lines(path: Path) -> int:
    n = 0
    with open(path, "rb") as fh:
        for line in fh:
            orjson.loads(line)
            n += 1
    return n


def run(quick: bool) -> str:
    n = 20_000 if quick else 100_000
    repeats = 2 if quick else 3
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for fmt, gen in FORMATS.items():
            path = Path(tmp) / f"{fmt}.jsonl"
            with open(path, "wb") as fh:
                for rec in gen(random.Random(7), n):
                    fh.write(orjson.dumps(rec) + b"\n")
            mb = path.stat().st_size / 1e6
            t_read, calls = _best(lambda p=path, f=fmt: _reader_calls(p, f), repeats)
            t_base, _ = _best(lambda p=path: _orjson_lines(p), repeats)
            assert calls == n, f"{fmt}: read {calls} calls of {n}"
            rows.append(f"| {fmt} | {mb:.1f} | {calls:,} | {mb / t_read:.1f} | {calls / t_read:,.0f} | "
                        f"{mb / t_base:.1f} | {t_read / t_base:.2f}× | "
                        f"{'✅' if calls / t_read >= BUDGET_CALLS_PER_S else '❌'} ≥ {BUDGET_CALLS_PER_S:,} calls/s |")
            path.unlink()
    return "\n".join([
        "## Readers: read throughput per format",
        "",
        f"Generated JSONL, {n:,} calls per format (realistic argument and answer sizes, the format's "
        "envelope and skipped lines). Baseline: `orjson.loads` over the same file's lines, same run; "
        "ratio = reader time / baseline time. Budget: derived from the ingest budget (1M calls in 60 s).",
        "",
        "| format | MB | calls | reader MB/s | reader calls/s | orjson MB/s | ratio | budget |",
        "|---|---:|---:|---:|---:|---:|---:|---|",
        *rows,
        "",
    ])
