"""Codex CLI rollouts (~/.codex/sessions/YYYY/MM/DD/rollout-*.jsonl).

Current envelope: each line is {"timestamp", "type", "payload"} with type session_meta (the
session), turn_context (model, cwd), response_item (a Responses API item: message,
function_call, custom_tool_call, local_shell_call, their outputs, reasoning) or event_msg (UI
events that duplicate the items: skipped). Legacy files: a first line {"id", "timestamp",
"instructions", ...} then bare Responses items, with {"record_type": "state"} lines between.

User turns are response_item messages with role user, except the ones Codex injects itself
(<environment_context>, <user_instructions>, AGENTS.md instructions). Shell outputs are often a
JSON string {"output": ..., "metadata": {"exit_code": ...}}: unwrapped, non-zero exit = error.
A rollout does not record which calls were parallel, so one call = one batch.

Process tools: `exec_command` starts a process (its output may say "Process running with session
ID N") and `write_stdin` writes to it; with empty `chars` it only polls. A poll's call keeps just
what it targets, {"session_id": N, "chars": ""} (the wait and token limits it also carries are
not what is polled), and both tools' outputs lose their per-call header lines ("Chunk ID: …",
"Wall time: … seconds"), so a quiet poll that never moves repeats exactly for the guards.
`apply_patch` is a custom_tool_call whose input is the raw patch: {"input": patch}.
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
    Checkpoint,
    Item,
    ReadError,
    SessionInfo,
    SessionStart,
)
from loopledger.formats._common import bad, content_text, head_records, iter_jsonl, str_or_none, title_of
from loopledger.formats.openai_responses import item_events

NAME = "codex"
DESCRIPTION = "Codex CLI rollout JSONL (~/.codex/sessions/**/rollout-*.jsonl, current and legacy)"

_ENVELOPES = ("session_meta", "turn_context", "response_item", "event_msg", "compacted")
_INJECTED = ("<environment_context>", "<user_instructions>", "# AGENTS.md instructions",
             "<INSTRUCTIONS>", "<user_shell_command>")
_META_HEAD = re.compile(rb'\{"timestamp":\s*"[^"]*",\s*"type":\s*"session_meta"')
# How far to look ahead for the model and title before the first event (bounded: streaming).
_INFO_LINES = 2000


def sniff(head: bytes) -> bool:
    recs = head_records(head, limit=3)
    if not recs:
        # session_meta can outgrow the sniffed head (it embeds the instructions)
        return bool(_META_HEAD.match(head.lstrip()))
    if not isinstance(recs[0], dict):
        return False
    first = recs[0]
    if first.get("type") in _ENVELOPES and "payload" in first:
        return True
    # Legacy: a bare session header, then items or state records.
    return ("id" in first and "timestamp" in first and "type" not in first and "role" not in first
            and ("instructions" in first or "git" in first))


def is_injected(text: str) -> bool:
    return text.lstrip().startswith(_INJECTED)


def _items(path: Path, start: tuple[int, int] = (0, 0), pos: list[int] | None = None,
           ) -> Iterator[tuple[int, Any, str | None]]:
    """(line, Responses item | ReadError, timestamp) for both layouts; other lines dropped.
    `start` / `pos`: as iter_jsonl's (a resumed read never sees the legacy header)."""
    for n, (line, rec) in enumerate(iter_jsonl(path, start=start, pos=pos), 1 if start[0] else 0):
        if isinstance(rec, ReadError):
            yield line, rec, None
        elif not isinstance(rec, dict):
            yield line, bad(path, line, f"expected a JSON object, got {type(rec).__name__}",
                            rec), None
        elif "payload" in rec and rec.get("type") in _ENVELOPES:
            if rec["type"] == "response_item":
                yield line, rec["payload"], str_or_none(rec.get("timestamp"))
        elif "record_type" in rec or (n == 0 and "type" not in rec and "role" not in rec):
            continue  # legacy state record / session header
        elif "type" in rec or "role" in rec:
            yield line, rec, None
        else:
            yield line, bad(path, line, "neither a rollout envelope nor a Responses item",
                            rec), None


def _info(path: Path, done: list[bool] | None = None) -> SessionInfo:
    """`done[0]`: whether later lines can no longer change it (model and title found, or the
    look-ahead is used up): a reader checkpoint is only taken then."""
    key = started = model = title = None
    meta: dict[str, Any] = {}
    final = False
    for n, (_, rec) in enumerate(iter_jsonl(path)):
        if n > _INFO_LINES or (model and title):
            final = True
            break
        if not isinstance(rec, dict):
            continue
        payload = rec.get("payload") if isinstance(rec.get("payload"), dict) else None
        kind = rec.get("type")
        if kind == "session_meta" and payload is not None or (n == 0 and "type" not in rec):
            src = payload if payload is not None else rec
            key = key or str_or_none(src.get("id"))
            started = started or str_or_none(src.get("timestamp"))
            meta.update({k: src[k] for k in ("cwd", "cli_version", "originator", "model_provider")
                         if isinstance(src.get(k), str)})
            model = model or str_or_none(src.get("model"))
        elif kind == "turn_context" and payload is not None:
            model = model or str_or_none(payload.get("model"))
        item = payload if kind == "response_item" else (rec if "payload" not in rec else None)
        if isinstance(item, dict) and item.get("type") == "message" and item.get("role") == "user":
            text = content_text(item.get("content"))
            if not title and not is_injected(text):
                title = title_of(text)
    if done is not None:
        done[:] = [final]
    return SessionInfo(key or path.stem, NAME, title or "", "codex", model, started, None, meta)


_STATE = "codex/1"
_PROCESS_TOOLS = ("exec_command", "write_stdin")
_VOLATILE = re.compile(r"^(Chunk ID: \S+|Wall time: [\d.]+ seconds)\n", re.M)


def _poll(call: Call) -> Call:
    """A write_stdin with nothing to write is a poll: keyed on the process it polls."""
    args = call.args
    if call.name != "write_stdin" or not isinstance(args, dict) or args.get("chars") not in (None, ""):
        return call
    return Call(call.id, call.name, {"session_id": args.get("session_id"), "chars": ""}, call.args_malformed)


def _process_tools(items: Iterator[Item]) -> Iterator[Item]:
    """Polls keyed on their process; the process tools' "Chunk ID" / "Wall time" lines dropped.
    Stateless item by item (only those tools print such lines), so a read continued from a
    checkpoint transforms exactly what a whole read does."""
    for item in items:
        if isinstance(item, Batch) and any(c.name in _PROCESS_TOOLS for c in item.calls):
            item = Batch(tuple(_poll(c) for c in item.calls), item.text, item.ts, item.line, item.usage)
        elif isinstance(item, Answers) and any(_VOLATILE.search(a.text) for a in item.answers):
            item = Answers(tuple(Answer(a.call_id, _VOLATILE.sub("", a.text), a.is_error, a.ts)
                                 if _VOLATILE.search(a.text) else a for a in item.answers), item.line)
        yield item


def read(path: Path | str) -> Iterator[Item]:
    path = Path(path)
    started = False
    for item in _process_tools(item_events(_items(path), path, group=False, is_injected=is_injected)):
        if not started and not isinstance(item, ReadError):
            yield SessionStart(_info(path), getattr(item, "line", None))
            started = True
        yield item


def read_from(path: Path | str, checkpoint: Checkpoint | None = None) -> Iterator[Item]:
    """`read` plus a Checkpoint before the final flush (the last call, whose answer may follow);
    or continued from one. One rollout is one session."""
    path = Path(path)
    pos: list[int] = []
    state = None
    start = (0, 0)
    started = checkpoint is not None
    info_final = [checkpoint is not None]
    if checkpoint is not None:
        if not (isinstance(checkpoint.state, tuple) and checkpoint.state[:1] == (_STATE,)):
            raise ValueError(f"{path}: not a codex reader checkpoint")
        state, start = checkpoint.state[1], (checkpoint.offset, checkpoint.line)

    def at_end(open_calls: tuple) -> Checkpoint | None:
        if started and info_final[0] and pos and pos[0] == pos[2]:
            return Checkpoint(pos[0], pos[1], (_STATE, open_calls))
        return None

    for item in _process_tools(item_events(_items(path, start, pos), path, group=False, is_injected=is_injected,
                                           state=state, at_end=at_end)):
        if not started and not isinstance(item, ReadError | Checkpoint):
            yield SessionStart(_info(path, info_final), getattr(item, "line", None))
            started = True
        yield item
