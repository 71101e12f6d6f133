"""OpenAI Responses API items: a JSON list of items, {"input": [...]} (a request body),
{"output": [...]} (a response), or JSONL, one item per line.

Items: `message` (role user / assistant / system / developer; content a string or input_text /
output_text blocks), `function_call` / `custom_tool_call` / `local_shell_call` and their
`*_output` items paired by `call_id`; `reasoning` and other items are skipped. Consecutive calls
with no message or output between them came out of one model response (parallel tool calls), so
they form one batch. `item_events` is shared with the Codex reader, which keeps one call per
batch because its rollouts do not say which calls were parallel.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import Any

import orjson
from loopledger.events import (
    Answer,
    Answers,
    Batch,
    Call,
    Item,
    Prose,
    ReadError,
    SessionInfo,
    SessionStart,
    UserTurn,
)
from loopledger.formats._common import (
    JSONL,
    as_text,
    bad,
    content_text,
    head_text,
    iter_jsonl,
    parse_args,
    records_or_document,
    str_or_none,
    title_of,
)

NAME = "openai-responses"
DESCRIPTION = "OpenAI Responses API items (function_call / function_call_output by call_id)"

_ITEM = re.compile(rb'"type"\s*:\s*"(function_call|function_call_output|input_text|output_text'
                   rb'|reasoning|custom_tool_call|local_shell_call)"')
_EXIT_CODE = re.compile(r"Exit code: (-?\d+)\b")
CALL_TYPES = ("function_call", "custom_tool_call", "local_shell_call")
OUTPUT_TYPES = ("function_call_output", "custom_tool_call_output", "local_shell_call_output")


def sniff(head: bytes) -> bool:
    return head_text(head).startswith(("[", "{")) and bool(_ITEM.search(head))


def item_call(item: dict) -> Call:
    kind = item.get("type")
    call_id = str_or_none(item.get("call_id") or item.get("id"))
    if kind == "function_call":
        args, malformed = parse_args(item.get("arguments"))
        return Call(call_id, as_text(item.get("name")), args, malformed)
    if kind == "custom_tool_call":
        # Custom (freeform) tools take a raw string, e.g. Codex's apply_patch.
        return Call(call_id, as_text(item.get("name")), {"input": item.get("input")})
    return Call(call_id, "local_shell", item.get("action"))


def exec_output(output: Any) -> tuple[str, bool]:
    """Codex wraps shell results as JSON {"output": ..., "metadata": {"exit_code": ...}}: unwrap
    it so the answer is the command's output and a non-zero exit code is an error."""
    if isinstance(output, str) and output.startswith('{"output"'):
        try:
            decoded = orjson.loads(output)
        except orjson.JSONDecodeError:
            return output, False
        if isinstance(decoded, dict) and "output" in decoded:
            meta = decoded.get("metadata")
            code = meta.get("exit_code") if isinstance(meta, dict) else None
            return as_text(decoded["output"]), isinstance(code, int) and code != 0
    text = content_text(output) if isinstance(output, list) else as_text(output)
    # Newer Codex shell tools answer in plain text headed "Exit code: N".
    code = _EXIT_CODE.match(text)
    return text, bool(code) and int(code.group(1)) != 0


def item_answer(item: dict, ts: str | None) -> Answer:
    text, is_error = exec_output(item.get("output"))
    status = item.get("status")
    return Answer(str_or_none(item.get("call_id") or item.get("id")), text,
                  is_error or status in ("failed", "incomplete"), ts)


def item_events(items: Iterable[tuple[int, Any, str | None]], path: Path, group: bool,
                is_injected=lambda text: False, state: tuple | None = None,
                at_end: Callable[[tuple], Item | None] | None = None) -> Iterator[Item]:
    """(line, item, ts) → events. `group`: consecutive calls form one batch. `state` continues
    from a `at_end(state)` taken earlier: `at_end` is asked, before the final flush, for an item
    to yield there (a reader's Checkpoint) given the calls still open."""
    calls: list[Call] = list(state[0]) if state else []
    at: tuple[str | None, int] = state[1] if state else (None, 0)

    def flush() -> Iterator[Item]:
        nonlocal calls
        if calls:
            yield Batch(tuple(calls), "", at[0], at[1])
            calls = []

    for line, item, ts in items:
        if isinstance(item, ReadError):
            yield item
            continue
        if not isinstance(item, dict):
            yield bad(path, line, f"expected an item object, got {type(item).__name__}", item)
            continue
        kind = item.get("type", "message" if "role" in item else None)
        ts = ts or str_or_none(item.get("timestamp"))
        if kind in CALL_TYPES:
            if not group:
                yield from flush()
            # ts of the first call, line of the last: an appended call changes this batch, and
            # the worker re-judges a session whose items reach past the old end of the file.
            at = (at[0] if calls else ts, line)
            calls.append(item_call(item))
            continue
        if kind in OUTPUT_TYPES:
            yield from flush()
            yield Answers((item_answer(item, ts),), line)
        elif kind == "message":
            role = item.get("role")
            text = content_text(item.get("content"))
            if role == "user":
                yield from flush()
                if not is_injected(text):
                    yield UserTurn(text, ts, line)
            elif role == "assistant":
                yield from flush()
                if text.strip():
                    yield Prose(text, ts, line)
            elif role not in ("system", "developer"):
                yield bad(path, line, f"unknown message role {role!r}", item)
        elif kind is None:
            yield bad(path, line, "item without a \"type\"", item)
        # reasoning, web_search_call, ghost_snapshot, …: not turns, not calls
    if at_end is not None:
        extra = at_end((tuple(calls), at))
        if extra is not None:
            yield extra
    yield from flush()


def _is_item(value: Any) -> bool:
    # a one-line request body {"input": [...]} also has no "type": it is a document
    return (isinstance(value, dict) and ("type" in value or "role" in value)
            and not isinstance(value.get("input"), list))


def _items(path: Path, doc: Any) -> Iterator[tuple[int, Any, str | None]]:
    if doc is JSONL:
        for line, rec in iter_jsonl(path):
            yield line, rec, None
        return
    if isinstance(doc, dict):
        for key in ("input", "output", "items"):
            if isinstance(doc.get(key), list):
                doc = doc[key]
                break
    if isinstance(doc, list):
        for n, item in enumerate(doc, 1):
            yield n, item, None
    elif isinstance(doc, ReadError):
        yield doc.line or 1, doc, None
    else:
        yield 1, bad(path, 1, "expected a list of Responses items or an object with \"input\" / "
                     f"\"output\", got {type(doc).__name__}"), None


def read(path: Path | str) -> Iterator[Item]:
    path = Path(path)
    doc = records_or_document(path, _is_item)
    model = str_or_none(doc.get("model")) if isinstance(doc, dict) else None  # request / response
    started = False
    for item in item_events(_items(path, doc), path, group=True):
        if not started and not isinstance(item, ReadError):
            title = title_of(item.text) if isinstance(item, UserTurn) else ""
            yield SessionStart(SessionInfo("0", NAME, title, model=model), getattr(item, "line", None))
            started = True
        yield item
