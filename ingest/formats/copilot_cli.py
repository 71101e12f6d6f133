"""GitHub Copilot CLI session events (`~/.copilot/session-state/<session id>/events.jsonl`).

Each line is one event {"type", "data", "id", "timestamp", "parentId"(, "ephemeral")}, as the CLI
writes them, or the same event wrapped by a tool that keeps them: {"role": "", "content": "",
"raw": {event}} (`raw` an object or its JSON text). The events read:
- `session.start` opens a session, keyed by `data.sessionId` (the model from `selectedModel` or a
  `session.model_change` before the first message; the working directory and CLI version kept); events before any (a resumed session's file) are one
  session keyed by the session folder's name (`events.jsonl`'s parent), else the file's stem;
- `user.message` is the person's turn (`data.content`; `transformedContent` is what the CLI sent,
  with its reminders, not what was typed);
- `assistant.message` is a model reply: its `toolRequests` [{toolCallId, name, arguments}] are
  one batch of calls with the reply's `content` as their text, a reply without them is prose;
- `tool.execution_start` {toolCallId, toolName, arguments} is a call; one the reply already
  requested is not a second call, one no reply requested (an SDK log, a tool the CLI ran itself)
  is a batch of its own;
- `tool.execution_complete` {toolCallId, success, result: {content, detailedContent}, error:
  {message, code}} answers its call: `result.content` (what the model read; `detailedContent`
  where there is no content), or, with `success` false, the error's message (and code) as a
  failed answer (a preToolUse hook's denial included).
Streaming deltas, reasoning, turn markers, model and tool-list changes, hooks, skills and
shutdown summaries are not calls and are skipped. Timestamps are each event's `timestamp`. A line
that is not JSON, or not an event, is reported with its line and skipped. Positions are file
lines.
"""

from __future__ import annotations

import dataclasses
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
    UserTurn,
)
from loopledger.formats._common import (
    as_text,
    bad,
    head_records,
    iso_utc,
    iter_jsonl,
    parse_args,
    parse_json,
    str_or_none,
    title_of,
)

NAME = "copilot-cli"
DESCRIPTION = "GitHub Copilot CLI session events (~/.copilot/session-state/<id>/events.jsonl, plain or wrapped in {role, content, raw})"

_KINDS = ("session.", "user.", "assistant.", "tool.", "system.", "subagent.", "hook.", "skill.", "model.",
          "permission.", "mcp.", "abort")
_CONVERSATION = frozenset({"session.start", "user.message", "assistant.message", "tool.execution_start",
                           "tool.execution_complete", "assistant.turn_start"})


def _event(record: Any) -> dict | None:
    """The event a line holds, unwrapped ({"role", "content", "raw"}); None if it holds none."""
    if isinstance(record, dict) and "raw" in record and "type" not in record:
        raw = record["raw"]
        if isinstance(raw, str):
            try:
                raw = parse_json(raw)
            except ValueError:
                return None
        record = raw
    if (isinstance(record, dict) and isinstance(record.get("type"), str) and record["type"].startswith(_KINDS)
            and isinstance(record.get("data"), dict)):
        return record
    return None


def sniff(head: bytes) -> bool:
    # the first event is session.start, but a wrapped or a resumed file may open otherwise:
    # one of the first records an event of the conversation
    return any((e := _event(r)) is not None and e["type"] in _CONVERSATION for r in head_records(head))


def _fallback_key(path: Path) -> str:
    return path.parent.name if path.name == "events.jsonl" and path.parent.name else path.stem


class _Session:
    """What `read` holds for the session being read: its start (held until the first user
    message titles it), and the calls already emitted (a requested call is not emitted again
    when it starts)."""

    def __init__(self, info: SessionInfo, line: int) -> None:
        self.info = info
        self.line = line
        self.held = True
        self.emitted: set[str] = set()

    def start(self, title: str = "") -> Iterator[Item]:
        if self.held:
            self.held = False
            info = self.info
            if title:
                info = dataclasses.replace(info, title=title)
            yield SessionStart(info, self.line)


def _new_session(data: dict, ts: str | None, line: int, key: str) -> _Session:
    ctx = data.get("context") if isinstance(data.get("context"), dict) else {}
    meta = {k: v for k, v in (("cwd", ctx.get("cwd")), ("copilot_version", data.get("copilotVersion")),
                              ("producer", data.get("producer"))) if isinstance(v, str) and v}
    model = data.get("selectedModel")
    info = SessionInfo(key=str(data.get("sessionId") or key), format=NAME, agent="copilot-cli",
                       model=model if isinstance(model, str) and model != "auto" else None,
                       started_at=iso_utc(data.get("startTime")) or ts, meta=meta)
    return _Session(info, line)


def _call(cid: Any, name: Any, arguments: Any) -> Call:
    args, malformed = parse_args(arguments)
    return Call(str_or_none(cid), str(name or "?"), args, malformed)


def _answer_text(data: dict) -> tuple[str, bool]:
    result = data.get("result")
    error = data.get("error")
    failed = data.get("success") is False
    text = ""
    if isinstance(result, dict):
        content = result.get("content")
        text = as_text(content if content not in (None, "") else result.get("detailedContent"))
    elif result is not None:
        text = as_text(result)
    if failed or error:
        if isinstance(error, dict):
            message = as_text(error.get("message"))
            code = error.get("code")
            said = f"{message} ({code})" if code and message else message or as_text(code)
        else:
            said = as_text(error)
        text = said or text or "failed"
        return text, True
    return text, False


def read(path: Path | str) -> Iterator[Item]:
    path = Path(path)
    session: _Session | None = None
    for line_no, record in iter_jsonl(path):
        if isinstance(record, ReadError):
            yield record
            continue
        event = _event(record)
        if event is None:
            yield bad(path, line_no, "not a Copilot CLI event (no \"type\" and \"data\", nor a \"raw\" event)", record)
            continue
        kind, data = event["type"], event["data"]
        ts = iso_utc(event.get("timestamp") or event.get("ts"))
        if kind == "session.start":
            if session is not None:
                yield from session.start()
            session = _new_session(data, ts, line_no, _fallback_key(path))
            continue
        if kind == "session.model_change" and session is not None and session.held:
            model = data.get("newModel")
            if isinstance(model, str) and model:
                session.info = dataclasses.replace(session.info, model=model)
            continue
        if kind not in ("user.message", "assistant.message", "tool.execution_start", "tool.execution_complete"):
            continue
        if session is None:
            session = _new_session({}, ts, line_no, _fallback_key(path))
        if kind == "user.message":
            text = as_text(data.get("content"))
            yield from session.start(title_of(text))
            if text.strip():
                yield UserTurn(text, ts, line_no)
            continue
        yield from session.start()
        if kind == "assistant.message":
            text = as_text(data.get("content"))
            requests = [r for r in data.get("toolRequests") or [] if isinstance(r, dict)]
            calls = [_call(r.get("toolCallId"), r.get("name") or r.get("toolName"), r.get("arguments"))
                     for r in requests]
            session.emitted.update(c.id for c in calls if c.id)
            if calls:
                yield Batch(tuple(calls), text, ts, line_no)
            elif text.strip():
                yield Prose(text, ts, line_no)
        elif kind == "tool.execution_start":
            cid = str_or_none(data.get("toolCallId"))
            if cid is not None and cid in session.emitted:
                continue
            if cid is not None:
                session.emitted.add(cid)
            yield Batch((_call(cid, data.get("toolName"), data.get("arguments")),), "", ts, line_no)
        else:  # tool.execution_complete
            cid = str_or_none(data.get("toolCallId"))
            if cid is not None and cid not in session.emitted and data.get("toolName"):
                session.emitted.add(cid)  # a log that kept only the completion still ran the call
                yield Batch((_call(cid, data.get("toolName"), data.get("arguments")),), "", ts, line_no)
            text, failed = _answer_text(data)
            yield Answers((Answer(str_or_none(data.get("toolCallId")), text, failed, ts),), line_no)
    if session is not None:
        yield from session.start()
