"""Anthropic Messages API conversations: a JSON list of messages, {"messages": [...]} (a request
body, "system" beside it), or JSONL of messages. Content is a string or a list of blocks;
tool calls are `tool_use` blocks in assistant messages, their answers `tool_result` blocks (with
`is_error`) in the next user message. A user message made only of tool_result blocks answers
calls; it is not a person speaking, so it is not a user turn.

The block helpers here (`assistant_events`, `user_events`) are shared with the Claude Code reader,
whose lines carry the same content.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

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
    TurnUsage,
    UserTurn,
)
from loopledger.formats._common import (
    JSONL,
    as_text,
    bad,
    content_text,
    head_text,
    iter_jsonl,
    records_or_document,
    str_or_none,
    title_of,
)

NAME = "anthropic"
DESCRIPTION = "Anthropic Messages API conversation (tool_use / tool_result blocks)"

_TOOL_BLOCK = re.compile(rb'"type"\s*:\s*"tool_(use|result)"')
_CALL_TYPES = ("tool_use", "server_tool_use", "mcp_tool_use")
_RESULT_TYPES = ("tool_result", "web_search_tool_result", "mcp_tool_result")


def sniff(head: bytes) -> bool:
    text = head_text(head)
    if not text.startswith(("[", "{")):
        return False
    # OpenAI chat messages carry tool_calls / role "tool"; Anthropic ones tool_use blocks.
    return bool(_TOOL_BLOCK.search(head)) and b'"tool_calls"' not in head


def assistant_events(content: Any, ts: str | None, line: int | None) -> list[Batch | Prose]:
    """An assistant message → one Batch (its tool_use blocks, text alongside) or one Prose."""
    if isinstance(content, str):
        return [Prose(content, ts, line)] if content.strip() else []
    texts: list[str] = []
    calls: list[Call] = []
    for block in content if isinstance(content, list) else []:
        if not isinstance(block, dict):
            continue
        kind = block.get("type")
        if kind in _CALL_TYPES:
            calls.append(Call(str_or_none(block.get("id")), as_text(block.get("name")),
                              block.get("input")))
        elif kind == "text" and isinstance(block.get("text"), str):
            texts.append(block["text"])
        # thinking / redacted_thinking blocks are the model's scratchpad, not a turn.
    text = "\n".join(t for t in texts if t.strip())
    if calls:
        return [Batch(tuple(calls), text, ts, line)]
    return [Prose(text, ts, line)] if text else []


def _count(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else None


def message_usage(msg: dict) -> TurnUsage | None:
    """A Messages API response's `usage` and `model` as a TurnUsage (None without usage, or for
    Claude Code's "<synthetic>" messages, which no model wrote). Anthropic reports uncached
    input, cache writes and cache reads apart; input_tokens here is their sum."""
    u = msg.get("usage")
    model = str_or_none(msg.get("model"))
    if not isinstance(u, dict) or model == "<synthetic>":
        return None
    fresh, write, read = (_count(u.get(k)) for k in
                          ("input_tokens", "cache_creation_input_tokens", "cache_read_input_tokens"))
    created = u.get("cache_creation")
    hour = _count(created.get("ephemeral_1h_input_tokens")) if isinstance(created, dict) else None
    parts = [x for x in (fresh, write, read) if x is not None]
    usage = TurnUsage(model, sum(parts) if parts else None, _count(u.get("output_tokens")), read, write,
                      hour or None, "anthropic")
    return usage if usage.known else None


def add_usage(a: TurnUsage | None, b: TurnUsage | None) -> TurnUsage | None:
    """Two turns' usage as one (a turn that made no event is counted with the next one)."""
    if a is None or b is None:
        return a or b

    def plus(x: int | None, y: int | None) -> int | None:
        return None if x is None and y is None else (x or 0) + (y or 0)

    return TurnUsage(b.model or a.model, plus(a.input_tokens, b.input_tokens), plus(a.output_tokens, b.output_tokens),
                     plus(a.cache_read_tokens, b.cache_read_tokens), plus(a.cache_write_tokens, b.cache_write_tokens),
                     plus(a.cache_write_1h_tokens, b.cache_write_1h_tokens), b.provider or a.provider)


def result_answer(block: dict, ts: str | None) -> Answer:
    return Answer(str_or_none(block.get("tool_use_id")), content_text(block.get("content")),
                  bool(block.get("is_error")), ts)


def user_events(content: Any, ts: str | None, line: int | None) -> list[Answers | UserTurn]:
    """A user message → Answers for its tool_result blocks, then a UserTurn for any text."""
    if isinstance(content, str):
        return [UserTurn(content, ts, line)]
    answers: list[Answer] = []
    texts: list[str] = []
    for block in content if isinstance(content, list) else []:
        if isinstance(block, dict) and block.get("type") in _RESULT_TYPES:
            answers.append(result_answer(block, ts))
        else:
            texts.append(content_text([block]))
    out: list[Answers | UserTurn] = []
    if answers:
        out.append(Answers(tuple(answers), line))
    if texts or not answers:
        out.append(UserTurn("\n".join(t for t in texts if t), ts, line))
    return out


def message_events(msg: Any, path: Path, line: int) -> list[Item]:
    if not isinstance(msg, dict):
        return [bad(path, line, f"expected a message object, got {type(msg).__name__}", msg)]
    role = msg.get("role")
    content = msg.get("content")
    if content is not None and not isinstance(content, str | list):
        return [bad(path, line, f"message content must be a string or a list of blocks, "
                    f"got {type(content).__name__}", msg)]
    ts = str_or_none(msg.get("timestamp") or msg.get("created_at"))
    if role == "assistant":
        return list(assistant_events(content, ts, line))
    if role == "user":
        return list(user_events(content, ts, line))
    if role == "system":
        return []  # a system prompt is not a turn boundary
    return [bad(path, line, f"unknown message role {role!r}", msg)]


def _is_message(value: Any) -> bool:
    return isinstance(value, dict) and "role" in value


def _records(path: Path, doc: Any) -> Iterator[tuple[int, Any]]:
    if doc is JSONL:
        yield from iter_jsonl(path)
        return
    if isinstance(doc, dict) and isinstance(doc.get("messages"), list):
        doc = doc["messages"]
    if isinstance(doc, list):
        yield from enumerate(doc, 1)
    elif isinstance(doc, ReadError):
        yield doc.line or 1, doc
    else:
        yield 1, bad(path, 1, "expected a list of messages or an object with \"messages\", "
                     f"got {type(doc).__name__}")


def read(path: Path | str) -> Iterator[Item]:
    path = Path(path)
    doc = records_or_document(path, _is_message)
    model = str_or_none(doc.get("model")) if isinstance(doc, dict) else None  # a request body
    started = False
    for line, rec in _records(path, doc):
        items = [rec] if isinstance(rec, ReadError) else message_events(rec, path, line)
        for item in items:
            if not started and not isinstance(item, ReadError):
                title = title_of(item.text) if isinstance(item, UserTurn) else ""
                yield SessionStart(SessionInfo("0", NAME, title, model=model), line)
                started = True
            yield item
