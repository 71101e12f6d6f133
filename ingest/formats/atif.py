"""ATIF — Harbor's Agent Trajectory Interchange Format (RFC 0001, ATIF-v1.0 … v1.x).

One JSON document {schema_version: "ATIF-v1.x", session_id, agent: {name, version, model_name},
steps: [...]} is one session. Each step has a `source`:

- "user" → UserTurn(message);
- "system" → nothing (a system prompt is not a turn boundary; design.md);
- "agent" with `tool_calls` [{tool_call_id, function_name, arguments}] → Batch (message as the
  text alongside), then Answers from `observation.results` [{source_call_id, content}];
  "agent" without tool calls → Prose(message). Results of an agent step without tool calls come
  from actions outside tool calling (the RFC says so) and answer nothing.

A result carrying `is_error` (not in the RFC, written by some exporters, also read from its
`extra`) sets the error flag. Positions reported in errors and on events are the step's index in
`steps` (1-based): a record index, as the document has no meaningful line per step.
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
    UserTurn,
)
from loopledger.formats._common import (
    as_text,
    bad,
    content_text,
    head_text,
    load_json,
    parse_args,
    str_or_none,
    title_of,
)

NAME = "atif"
DESCRIPTION = "ATIF (Harbor Agent Trajectory Interchange Format) trajectory JSON"

_VERSION = re.compile(r'"schema_version"\s*:\s*"ATIF-v', re.I)


def sniff(head: bytes) -> bool:
    text = head_text(head)
    return text.startswith("{") and bool(_VERSION.search(text))


def read(path: Path | str) -> Iterator[Item]:
    path = Path(path)
    doc = load_json(path)
    if isinstance(doc, ReadError):
        yield doc
        return
    if not isinstance(doc, dict) or not isinstance(doc.get("steps"), list):
        yield bad(path, 1, "not an ATIF trajectory: expected an object with a 'steps' list")
        return
    steps = doc["steps"]
    agent = doc.get("agent") if isinstance(doc.get("agent"), dict) else {}
    first_user = next((s.get("message") for s in steps if isinstance(s, dict)
                       and s.get("source") == "user" and isinstance(s.get("message"), str)), "")
    first_ts = next((s.get("timestamp") for s in steps if isinstance(s, dict)
                     and s.get("timestamp")), None)
    meta: dict[str, Any] = {"schema_version": doc.get("schema_version")}
    if agent.get("version") is not None:
        meta["agent_version"] = agent.get("version")
    if isinstance(doc.get("final_metrics"), dict):
        meta["final_metrics"] = doc["final_metrics"]
    yield SessionStart(SessionInfo(
        key=str_or_none(doc.get("session_id")) or "0",
        format=NAME,
        title=title_of(first_user),
        agent=str_or_none(agent.get("name")),
        model=str_or_none(agent.get("model_name")),
        started_at=str_or_none(first_ts),
        meta=meta,
    ))
    for index, step in enumerate(steps, start=1):
        if not isinstance(step, dict):
            yield bad(path, index, f"step {index} is not an object ({type(step).__name__})",
                      as_text(step))
            continue
        yield from _step_events(path, index, step)


def _step_events(path: Path, index: int, step: dict) -> Iterator[Item]:
    source = step.get("source")
    ts = str_or_none(step.get("timestamp"))
    message = content_text(step.get("message"))
    if source == "user":
        yield UserTurn(message, ts, index)
        return
    if source == "system":
        return
    if source != "agent":
        yield bad(path, index, f"step {index}: unknown source {source!r} "
                  "(expected system, user or agent)", as_text(step))
        return
    raw_calls = step.get("tool_calls")
    if raw_calls is not None and not isinstance(raw_calls, list):
        yield bad(path, index, f"step {index}: tool_calls is not a list", as_text(raw_calls))
        raw_calls = None
    calls: list[Call] = []
    for position, tc in enumerate(raw_calls or []):
        if not isinstance(tc, dict) or not isinstance(tc.get("function_name"), str):
            yield bad(path, index, f"step {index}: tool call {position + 1} has no function_name",
                      as_text(tc))
            continue
        args, malformed = parse_args(tc.get("arguments"))
        calls.append(Call(str_or_none(tc.get("tool_call_id")), tc["function_name"], args, malformed))
    if not calls:
        if message.strip():
            yield Prose(message, ts, index)
        return
    yield Batch(tuple(calls), message, ts, index)
    answers = _answers(step.get("observation"), ts, len(calls))
    if answers:
        yield Answers(answers, index)


def _answers(observation: Any, ts: str | None, n_calls: int) -> tuple[Answer, ...]:
    if not isinstance(observation, dict) or not isinstance(observation.get("results"), list):
        return ()
    out: list[Answer] = []
    for result in observation["results"]:
        if not isinstance(result, dict):
            continue
        text = content_text(result.get("content"))
        refs = result.get("subagent_trajectory_ref")
        if not text and isinstance(refs, list):
            ids = [str(r.get("session_id")) for r in refs if isinstance(r, dict)]
            text = "[subagent trajectory " + ", ".join(ids) + "]"
        extra = result.get("extra") if isinstance(result.get("extra"), dict) else {}
        is_error = bool(result.get("is_error") or extra.get("is_error"))
        out.append(Answer(str_or_none(result.get("source_call_id")), text, is_error, ts))
    # Results without a source_call_id answer calls in order only when the counts agree;
    # otherwise they come from non-tool actions and pairing them would misattribute them.
    if any(a.call_id is None for a in out) and len(out) != n_calls:
        out = [a for a in out if a.call_id is not None]
    return tuple(out)
