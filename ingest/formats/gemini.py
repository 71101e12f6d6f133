"""Gemini CLI session files (`~/.gemini/tmp/<project hash>/chats/session-*.json[l]`).

Two shapes, field names as gemini-cli's ChatRecordingService writes them:

- JSONL (current): a metadata line {sessionId, projectHash, startTime, ...}, then an upsert log.
  A message record {id, timestamp, type, content, toolCalls?, ...} is appended again, whole,
  every time its tool calls, results or tokens change: the last write of an id wins and keeps
  the id's first position. {"$set": {...}} patches the metadata; {"$rewindTo": id} drops that
  message and everything after it (an unknown id drops every message, as gemini-cli does).
- JSON (older): one document {sessionId, projectHash, startTime, messages: [...]}.

Because a later line may rewrite or rewind any earlier message, a JSONL file is folded whole
before its events are yielded: memory is the size of the final conversation, not the file.
`$set.messages` (written after /compress or history masking) upserts those messages by id
rather than replacing the list, so the tool calls that really ran stay visible to the guards.

A subagent's file (kind "subagent") is its own session, linked to the parent session named by
its folder.

Messages: `user` → UserTurn (unless it only carries functionResponse parts); `gemini` with
toolCalls → Batch (call id, name, args) followed by Answers for the calls that finished (result
functionResponse output, or resultDisplay; status "error"/"cancelled" flags is_error, read
through `tool_result` like the live hook's AfterTool); `gemini` without toolCalls → Prose. `info`, `error` and `warning` are the CLI talking to the person, not
the model or the person: skipped.
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
    parse_args,
    records_or_document,
    str_or_none,
    title_of,
)

NAME = "gemini-cli"
DESCRIPTION = "Gemini CLI chat recording (session-*.jsonl with $set/$rewindTo, or older .json)"

_SESSION = re.compile(r'"sessionId"\s*:')
_PROJECT = re.compile(r'"projectHash"\s*:')
_LOG_RECORD = re.compile(r'^\{\s*"\$(set|rewindTo)"\s*:', re.M)
_ERROR_STATUSES = ("error", "cancelled")
_SKIPPED_TYPES = ("info", "error", "warning")

# What gemini-cli (0.61) wraps around a tool's own output, found in its bundled code:
# wrapUntrusted() puts shell, web and MCP text in <untrusted_context> (escaping a closing tag
# inside as &lt;/untrusted_context&gt;); a hook's additionalContext is appended as
# "\n\n<hook_context>…</hook_context>"; a hook's refusal becomes "Tool execution blocked: <reason>"
# or "Agent execution stopped by hook: <reason>" (an AfterTool block "Tool result blocked: …").
_UNTRUSTED = re.compile(r"<untrusted_context[^>]*>\n?([\s\S]*?)\n?</untrusted_context>")
_HOOK_CONTEXT = re.compile(r"\s*<hook_context>[\s\S]*?</hook_context>")
_HOOK_REFUSAL = re.compile(r"\A(?:Tool execution blocked|Agent execution stopped by hook|Tool result blocked): ")
# run_shell_command's llmContent: "Output: …", then (each only when there is one) "Error: …",
# "Exit Code: N" (non-zero only), "Signal: …", "Background PIDs: …", "Process Group PGID: N".
# The process ids are new on every call: two runs of one failing command must read as the same
# answer. Only that trailer is read, never the command's own output above it.
SHELL_TOOL = "run_shell_command"
_TRAILER_LINE = re.compile(r"(Exit Code|Signal|Background PIDs|Process Group PGID): .*")
_PROCESS_IDS = ("Background PIDs", "Process Group PGID")
_SPAWN_FAILED = re.compile(r"\AOutput: \(empty\)\nError: ")


def sniff(head: bytes) -> bool:
    text = head_text(head)
    if not text.startswith("{"):
        return False
    if _SESSION.search(text) and _PROJECT.search(text):
        return True
    # Every match holds a "$": a text without one (most files sniffed) skips the multi-line
    # search, which tries each line start of the whole head (the dearest sniff of them all).
    return "$" in text and bool(_LOG_RECORD.search(text))


def read(path: Path | str) -> Iterator[Item]:
    path = Path(path)
    # Any JSON object line is a record of the log; a minified one-line older document folds the
    # same way (its first line carries the messages), so only a pretty-printed one is a document.
    doc = records_or_document(path, lambda value: isinstance(value, dict))
    if doc is JSONL:
        yield from _read_jsonl(path)
    else:
        yield from _read_document(path, doc)


def _read_document(path: Path, doc: Any) -> Iterator[Item]:
    if isinstance(doc, ReadError):
        yield doc
        return
    if not isinstance(doc, dict) or not isinstance(doc.get("messages"), list):
        yield bad(path, 1, "not a Gemini CLI session: expected an object with a 'messages' list, "
                  f"got {type(doc).__name__}")
        return
    messages: dict[str, tuple[dict, int]] = {}
    errors: list[ReadError] = []
    for index, msg in enumerate(doc["messages"], start=1):
        if isinstance(msg, dict) and isinstance(msg.get("id"), str):
            messages[msg["id"]] = (msg, index)
        else:
            errors.append(bad(path, index, f"message {index} is not a message record "
                              "(an object with a string 'id')", as_text(msg)))
    yield from errors
    yield from _session(path, doc, messages, 1)


def _read_jsonl(path: Path) -> Iterator[Item]:
    metadata: dict[str, Any] = {}
    messages: dict[str, tuple[dict, int]] = {}
    last_line = 1
    for line_no, record in iter_jsonl(path):
        last_line = line_no
        if isinstance(record, ReadError):
            yield record
            continue
        if not isinstance(record, dict):
            yield bad(path, line_no, f"expected a JSON object, got {type(record).__name__}",
                      as_text(record))
            continue
        if "$rewindTo" in record:
            target = record["$rewindTo"]
            if not isinstance(target, str):
                yield bad(path, line_no, "$rewindTo must be a message id (a string)", as_text(record))
                continue
            _rewind(messages, target)
        elif isinstance(record.get("id"), str):
            messages[record["id"]] = (record, line_no)
        elif "$set" in record:
            patch = record["$set"]
            if not isinstance(patch, dict):
                yield bad(path, line_no, "$set must be an object", as_text(record))
                continue
            _merge_metadata(metadata, messages, patch, line_no)
        elif "sessionId" in record:
            _merge_metadata(metadata, messages, record, line_no)
        else:
            yield bad(path, line_no, "not a Gemini CLI record (no id, $set, $rewindTo or sessionId)",
                      as_text(record))
    yield from _session(path, metadata, messages, last_line)


def _rewind(messages: dict[str, tuple[dict, int]], target: str) -> None:
    if target not in messages:
        messages.clear()
        return
    ids = list(messages)
    for mid in ids[ids.index(target):]:
        del messages[mid]


def _merge_metadata(metadata: dict, messages: dict[str, tuple[dict, int]], patch: dict,
                    line_no: int) -> None:
    metadata.update({k: v for k, v in patch.items() if k != "messages"})
    listed = patch.get("messages")
    if isinstance(listed, list):
        for msg in listed:
            if isinstance(msg, dict) and isinstance(msg.get("id"), str):
                messages[msg["id"]] = (msg, line_no)


def _session(path: Path, metadata: dict, messages: dict[str, tuple[dict, int]],
             last_line: int) -> Iterator[Item]:
    """The folded session. Its SessionStart carries the last line folded into it: any later line
    ($rewindTo, $set, a rewritten message) can change the session, so a file appended to since
    the last ingest must re-read it (the worker compares the items' lines with the old end)."""
    records = list(messages.values())
    first_user = next((content_text(m.get("content")) for m, _ in records if m.get("type") == "user"),
                      "")
    model = next((m.get("model") for m, _ in records
                  if m.get("type") == "gemini" and isinstance(m.get("model"), str)), None)
    summary = metadata.get("summary")
    meta = {k: metadata[k] for k in ("projectHash", "kind", "directories", "lastUpdated")
            if metadata.get(k) is not None}
    yield SessionStart(SessionInfo(
        key=str_or_none(metadata.get("sessionId")) or "0",
        format=NAME,
        title=title_of(summary if isinstance(summary, str) and summary else first_user),
        agent="gemini-cli",
        model=model,
        started_at=str_or_none(metadata.get("startTime")),
        # gemini-cli writes a subagent's recording to chats/<parent session id>/<id>.jsonl
        parent_key=path.parent.name if metadata.get("kind") == "subagent" else None,
        meta=meta,
    ), last_line)
    for msg, line in records:
        yield from _message_events(msg, line)


def _message_events(msg: dict, line: int) -> Iterator[Item]:
    kind = msg.get("type")
    ts = str_or_none(msg.get("timestamp"))
    text = content_text(msg.get("content"))
    if kind == "user":
        if not _tool_responses_only(msg.get("content")):
            yield UserTurn(text, ts, line)
        return
    if kind != "gemini":
        return  # info / error / warning lines are the CLI's own notices (see module doc)
    calls = msg.get("toolCalls")
    if not isinstance(calls, list) or not calls:
        if text.strip():
            yield Prose(text, ts, line, _usage(msg))
        return
    batch: list[Call] = []
    answers: list[Answer] = []
    for index, tc in enumerate(calls):
        if not isinstance(tc, dict):
            continue
        call_id = str_or_none(tc.get("id")) or f"{msg.get('id')}:{index}"
        args, malformed = parse_args(tc.get("args"))
        batch.append(Call(call_id, str(tc.get("name") or "?"), args, malformed))
        answer = _answer(tc, call_id)
        if answer is not None:
            answers.append(answer)
    if not batch:
        if text.strip():
            yield Prose(text, ts, line, _usage(msg))
        return
    yield Batch(tuple(batch), text, ts, line, _usage(msg))
    if answers:
        yield Answers(tuple(answers), line)


def _usage(msg: dict) -> TurnUsage | None:
    """A `gemini` message's `tokens` {input, output, cached, thoughts, tool, total} and `model`
    (gemini-cli's ChatRecordingService TokensSummary): input is the prompt count, cached reads
    included; thinking tokens are billed as output."""
    tok = msg.get("tokens")
    if not isinstance(tok, dict):
        return None

    def n(key: str) -> int | None:
        v = tok.get(key)
        return v if isinstance(v, int) and not isinstance(v, bool) and v >= 0 else None

    out = [x for x in (n("output"), n("thoughts")) if x is not None]
    usage = TurnUsage(str_or_none(msg.get("model")), n("input"), sum(out) if out else None, n("cached") or None,
                      None, None, "google")
    return usage if usage.known else None


def _tool_responses_only(content: Any) -> bool:
    """A "user" message made of functionResponse parts (written when the history is synced
    after masking or compression) carries tool output, not a person speaking: no run boundary."""
    parts = content if isinstance(content, list) else [content]
    return bool(parts) and all(isinstance(p, dict) and "functionResponse" in p for p in parts)


def _answer(tc: dict, call_id: str) -> Answer | None:
    """The call's result, or None while it has none (scheduled, executing, awaiting approval)."""
    status = tc.get("status")
    result = tc.get("result")
    display = tc.get("resultDisplay")
    if result is None and display is None and status not in _ERROR_STATUSES:
        return None
    text = result_text(result)
    if not text and display is not None:
        text = display if isinstance(display, str) else as_text(display)
    text, is_error = tool_result(str(tc.get("name") or ""), text, status in _ERROR_STATUSES)
    return Answer(call_id, text, is_error, str_or_none(tc.get("timestamp")))


def tool_result(tool: str, text: str, is_error: bool) -> tuple[str, bool]:
    """A Gemini CLI tool result as the guards compare it, the same from a session file and from
    the live AfterTool hook (loopledger.live.hooks): gemini-cli's wrappers off (untrusted-context
    tags, hook context, its words around a hook's refusal), a shell result's per-call process
    ids off, and a shell command that exited non-zero (or died by a signal) a failure, as its
    `Exit Code:` line says though the call's status is "success"."""
    unwrapped = _UNTRUSTED.sub(lambda m: m.group(1).replace("&lt;/untrusted_context&gt;", "</untrusted_context>"),
                               text)
    unwrapped = _HOOK_CONTEXT.sub("", unwrapped)
    if _HOOK_REFUSAL.match(unwrapped):
        unwrapped, is_error = _HOOK_REFUSAL.sub("", unwrapped, count=1), True
    if tool == SHELL_TOOL and unwrapped.startswith("Output: "):
        lines = unwrapped.split("\n")
        end = len(lines)
        while end > 1 and (m := _TRAILER_LINE.fullmatch(lines[end - 1])):
            end -= 1
            value = lines[end].split(": ", 1)[1].strip()
            if m.group(1) == "Signal" or (m.group(1) == "Exit Code" and value not in ("", "0")):
                is_error = True
        kept = lines[:end] + [ln for ln in lines[end:] if ln.split(":", 1)[0] not in _PROCESS_IDS]
        unwrapped = "\n".join(kept)
        is_error = is_error or bool(_SPAWN_FAILED.match(unwrapped))
    return unwrapped, is_error


def result_text(result: Any) -> str:
    """Text of a PartListUnion result: functionResponse output/error parts, text parts."""
    if result is None:
        return ""
    if isinstance(result, str):
        return result
    parts = result if isinstance(result, list) else [result]
    out: list[str] = []
    for part in parts:
        if isinstance(part, str):
            out.append(part)
        elif isinstance(part, dict):
            response = part.get("functionResponse")
            if isinstance(response, dict):
                body = response.get("response")
                if isinstance(body, dict) and isinstance(body.get("output"), str):
                    out.append(body["output"])
                elif isinstance(body, dict) and isinstance(body.get("error"), str):
                    out.append(body["error"])
                else:
                    out.append(as_text(body))
            elif isinstance(part.get("text"), str):
                out.append(part["text"])
            else:
                out.append(as_text(part))
    return "\n".join(p for p in out if p)
