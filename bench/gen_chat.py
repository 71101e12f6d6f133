"""Generate OpenAI Chat Completions JSONL transcripts (one session per file) with realistic sizes.

Used by bench_ingest (a million calls) and by the worker tests (small corpora). Deterministic for
a seed. Sessions mix ordinary work with the loops the detectors exist for: the same call
repeated with the same answer, A-B-A-B alternation, and parallel batches.

Sizes follow what real coding-agent sessions show: arguments of tens to a few hundred bytes,
answers mostly under a kilobyte with a long tail of file dumps and test logs (a few KiB).
"""

from __future__ import annotations

import random
from pathlib import Path

import orjson

TOOLS = ("bash", "read_file", "search_code", "edit_file", "list_dir", "run_tests", "browser_navigate",
         "get_issue", "write_file", "grep")
WORDS = ("the", "build", "fails", "because", "module", "import", "config", "value", "returns", "None",
         "expected", "assert", "line", "error", "path", "src", "test", "function", "class", "self", "data",
         "request", "response", "timeout", "retry", "cache", "index", "query", "result", "user")


def _text(rng: random.Random, n_bytes: int) -> str:
    out: list[str] = []
    size = 0
    while size < n_bytes:
        w = rng.choice(WORDS)
        out.append(w)
        size += len(w) + 1
        if rng.random() < 0.08:
            out.append("\n")
    return " ".join(out)


def _answer_size(rng: random.Random) -> int:
    # Lognormal: median ~300 bytes, a tail of several KiB (file dumps, test output).
    return int(min(16_000, max(10, rng.lognormvariate(5.7, 1.0))))


def _args(rng: random.Random, tool: str, i: int) -> dict:
    if tool == "bash":
        return {"command": f"cd /repo && {rng.choice(['pytest -x', 'make', 'ls -la', 'git status'])} {i % 97}",
                "timeout": 120}
    if tool in ("read_file", "write_file", "edit_file"):
        args = {"path": f"src/pkg/module_{i % 53}.py", "start": i % 400, "end": i % 400 + 40}
        if tool != "read_file":
            args["content"] = _text(rng, rng.randint(40, 400))
        return args
    if tool in ("search_code", "grep"):
        return {"pattern": f"def {rng.choice(WORDS)}_{i % 31}", "path": "src", "max_results": 50}
    if tool == "browser_navigate":
        return {"url": f"https://docs.example.com/page/{i % 211}"}
    return {"id": i % 1000, "fields": ["title", "body", "labels"]}


def session_lines(rng: random.Random, n_calls: int, *, session: int = 0) -> list[bytes]:
    """One session's JSONL lines holding about `n_calls` tool calls."""
    msgs: list[dict] = [
        {"role": "system", "content": "You are a careful engineer. Use the tools."},
        {"role": "user", "content": f"Session {session}: " + _text(rng, rng.randint(60, 300))},
    ]
    made = 0
    k = 0
    while made < n_calls:
        k += 1
        if rng.random() < 0.03:
            msgs.append({"role": "user", "content": _text(rng, rng.randint(20, 200))})
        r = rng.random()
        if r < 0.06:  # a loop: the same call, the same answer, 3-6 times
            tool = rng.choice(TOOLS)
            args = _args(rng, tool, k)
            answer = _text(rng, _answer_size(rng))
            plan = [[(tool, args, answer)] for _ in range(rng.randint(3, 6))]
        elif r < 0.09:  # A-B alternation
            a_tool, b_tool = rng.sample(TOOLS, 2)
            a, b = (a_tool, _args(rng, a_tool, k), _text(rng, 200)), (b_tool, _args(rng, b_tool, k + 1), "ok")
            plan = [[a], [b]] * rng.randint(2, 4)
        elif r < 0.2:  # a parallel batch
            plan = [[(t, _args(rng, t, k + j), _text(rng, _answer_size(rng)))
                     for j, t in enumerate(rng.sample(TOOLS, 2))]]
        else:
            tool = rng.choice(TOOLS)
            plan = [[(tool, _args(rng, tool, k), _text(rng, _answer_size(rng)))]]
        for batch in plan:
            ids = [f"call_{session}_{k}_{made + j}" for j in range(len(batch))]
            msgs.append({"role": "assistant", "content": _text(rng, 40) if rng.random() < 0.3 else None,
                         "tool_calls": [{"id": cid, "type": "function",
                                         "function": {"name": t, "arguments": orjson.dumps(a).decode()}}
                                        for cid, (t, a, _) in zip(ids, batch, strict=True)]})
            for cid, (t, _, ans) in zip(ids, batch, strict=True):
                msgs.append({"role": "tool", "tool_call_id": cid, "name": t, "content": ans})
            made += len(batch)
        if rng.random() < 0.05:
            msgs.append({"role": "assistant", "content": "I will try again."})
    return [orjson.dumps(m) + b"\n" for m in msgs]


def write_corpus(folder: Path, n_files: int, calls_per_file: int, seed: int = 7) -> list[Path]:
    """`n_files` JSONL sessions of about `calls_per_file` calls each; returns their paths."""
    rng = random.Random(seed)
    folder.mkdir(parents=True, exist_ok=True)
    paths = []
    for i in range(n_files):
        p = folder / f"session_{i:05d}.jsonl"
        with open(p, "wb") as fh:
            fh.writelines(session_lines(rng, calls_per_file, session=i))
        paths.append(p)
    return paths
