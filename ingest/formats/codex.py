"""Codex CLI rollouts (~/.codex/sessions/YYYY/MM/DD/rollout-*.jsonl).

Current envelope: each line is {"timestamp", "type", "payload"} with type session_meta (the
session), turn_context (model, cwd), response_item (a Responses API item: message,
function_call, custom_tool_call, local_shell_call, their outputs, reasoning) or event_msg (UI
events that duplicate the items: skipped, except token_count, below). Legacy files: a first line {"id", "timestamp",
"instructions", ...} then bare Responses items, with {"record_type": "state"} lines between.

User turns are response_item messages with role user, except the ones Codex injects itself
(<environment_context>, <user_instructions>, AGENTS.md instructions, the <turn_aborted> note
after an interrupt: the person's next prompt is the new run). Shell outputs are often a
JSON string {"output": ..., "metadata": {"exit_code": ...}}: unwrapped, non-zero exit = error.
A rollout does not record which calls were parallel, so one call = one batch.

Process tools: `exec_command` starts a process (its output may say "Process running with session
ID N") and `write_stdin` writes to it; with empty `chars` it only polls. A poll's call keeps just
what it targets, {"session_id": N, "chars": ""} (the wait and token limits it also carries are
not what is polled), and both tools' outputs lose their per-call header lines ("Chunk ID: …",
"Wall time: … seconds"), so a quiet poll that never moves repeats exactly for the guards.
`apply_patch` is a custom_tool_call whose input is the raw patch: {"input": patch}.

Usage: an event_msg token_count follows each model request; its `info.last_token_usage`
(input_tokens counting cached_input_tokens, output_tokens counting reasoning) is that request's,
the model the latest turn_context's. It goes on the last model event (Batch or Prose) before it;
a token_count repeating the previous total (Codex writes some twice) is not counted again.
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
    Prose,
    ReadError,
    SessionInfo,
    SessionStart,
    TurnUsage,
    UserTurn,
)
from loopledger.formats._common import bad, content_text, head_records, iter_jsonl, str_or_none, title_of
from loopledger.formats.anthropic import add_usage
from loopledger.formats.openai_responses import item_events

NAME = "codex"
DESCRIPTION = "Codex CLI rollout JSONL (~/.codex/sessions/**/rollout-*.jsonl, current and legacy)"

_ENVELOPES = ("session_meta", "turn_context", "response_item", "event_msg", "compacted")
_INJECTED = ("<environment_context>", "<user_instructions>", "# AGENTS.md instructions",
             "<INSTRUCTIONS>", "<user_shell_command>", "<turn_aborted>")
_META_HEAD = re.compile(rb'\{"timestamp":\s*"[^"]*",\s*"type":\s*"session_meta"')
# How far to look ahead for the model and title before the first event (bounded: streaming).
_INFO_LINES = 2000


def sniff(head: bytes) -> bool:
    recs = head_records(head, limit=1)  # only the first record is looked at
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


class _Usage:
    """token_count lines read so far, for `_with_usage`; picklable (a reader checkpoint keeps
    the model, the last total and the counts not yet given, so a resumed read counts exactly
    what a whole one does)."""

    __slots__ = ("counts", "model", "total", "open_line", "holding")

    def __init__(self, model: str | None = None, total: Any = None, counts: tuple = ()) -> None:
        self.counts: list[tuple[int, TurnUsage]] = list(counts)
        self.model = model
        self.total = total
        self.open_line: int | None = None  # at a checkpoint: the line of the first call still open
        self.holding = False  # model events of the current stretch are held

    def note(self, kind: str, payload: dict, line: int) -> None:
        if kind == "turn_context":
            self.model = str_or_none(payload.get("model")) or self.model
            return
        info = payload.get("info") if payload.get("type") == "token_count" else None
        last = info.get("last_token_usage") if isinstance(info, dict) else None
        if not isinstance(last, dict) or info.get("total_token_usage") == self.total:
            return
        self.total = info.get("total_token_usage")

        def n(key: str) -> int | None:
            v = last.get(key)
            return v if isinstance(v, int) and not isinstance(v, bool) and v >= 0 else None

        usage = TurnUsage(self.model, n("input_tokens"), n("output_tokens"), n("cached_input_tokens") or None,
                          None, None, "openai")
        if usage.known:
            self.counts.append((line, usage))

    def state(self, open_calls: tuple) -> tuple:
        calls, at = open_calls
        self.open_line = at[1] if calls else None
        if self.holding:  # the held events take the counts before the open call
            keep = tuple(c for c in self.counts if self.open_line is not None and c[0] >= self.open_line)
        else:
            keep = tuple(self.counts)
        return (self.model, self.total, keep)


def _with_usage(items: Iterator[Item], usage: _Usage) -> Iterator[Item]:
    """Model events with their requests' token_count. Codex writes a request's token_count
    next to its items (before them in newer versions, after in older ones) and always before
    the tool outputs that answer them: so the counts of a stretch of model events between two
    other items (answers, user turns) are theirs, given to the stretch's first event."""
    held: list[Batch | Prose] = []

    def release(before: int | None) -> Iterator[Item]:
        mine = [u for line, u in usage.counts if before is None or line < before]
        usage.counts = [c for c in usage.counts if before is not None and c[0] >= before]
        total = None
        for u in mine:
            total = add_usage(total, u)
        first = held[0]
        if total is not None:
            first = (Batch(first.calls, first.text, first.ts, first.line, total) if isinstance(first, Batch)
                     else Prose(first.text, first.ts, first.line, total))
        yield first
        yield from held[1:]
        held.clear()
        usage.holding = False

    for item in items:
        if isinstance(item, Batch | Prose):
            held.append(item)
            usage.holding = True
            continue
        if isinstance(item, Checkpoint):
            if held:
                yield from release(usage.open_line)
        elif held:
            yield from release(getattr(item, "line", None))
        elif isinstance(item, Answers | UserTurn):
            # A stretch without model events: counts before this item had no event to go to.
            line = item.line
            usage.counts = [c for c in usage.counts if line is not None and c[0] > line]
        yield item
    if held:
        yield from release(None)


def _items(path: Path, start: tuple[int, int] = (0, 0), pos: list[int] | None = None,
           usage: _Usage | None = None) -> Iterator[tuple[int, Any, str | None]]:
    """(line, Responses item | ReadError, timestamp) for both layouts; other lines dropped
    (token_count and turn_context lines go to `usage`).
    `start` / `pos`: as iter_jsonl's (a resumed read never sees the legacy header)."""
    for n, (line, rec) in enumerate(iter_jsonl(path, start=start, pos=pos), 1 if start[0] else 0):
        if isinstance(rec, ReadError):
            yield line, rec, None
        elif not isinstance(rec, dict):
            yield line, bad(path, line, f"expected a JSON object, got {type(rec).__name__}",
                            rec), None
        elif "payload" in rec and rec.get("type") in _ENVELOPES:
            if usage is not None and rec["type"] in ("event_msg", "turn_context") and isinstance(rec["payload"], dict):
                usage.note(rec["type"], rec["payload"], line)
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


_STATE = "codex/2"
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
    usage = _Usage()
    for item in _with_usage(_process_tools(item_events(_items(path, usage=usage), path, group=False,
                                                       is_injected=is_injected)), usage):
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
    usage = _Usage(*checkpoint.state[2]) if checkpoint is not None else _Usage()

    def at_end(open_calls: tuple) -> Checkpoint | None:
        if started and info_final[0] and pos and pos[0] == pos[2]:
            return Checkpoint(pos[0], pos[1], (_STATE, open_calls, usage.state(open_calls)))
        return None

    for item in _with_usage(_process_tools(item_events(_items(path, start, pos, usage), path, group=False,
                                                       is_injected=is_injected, state=state, at_end=at_end)),
                            usage):
        if not started and not isinstance(item, ReadError | Checkpoint):
            yield SessionStart(_info(path, info_final), getattr(item, "line", None))
            started = True
        yield item
