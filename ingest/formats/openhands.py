"""OpenHands event streams, in the three shapes OpenHands leaves on disk:

- evaluation / resolver `output.jsonl`: one instance per line {instance_id?, instruction,
  metadata, history: [events], ...} → one session per line (key = instance_id, else "line-N");
- a saved trajectory (GUI download, replay tests): a JSON list of events → one session;
- the legacy flat events (2024 resolver output): action fields at the top level
  ({"action": "run", "command": ..., "thought": ...}), no id / source / cause.

Events:
- An agent action that does something (run, run_ipython, read, edit, write, browse,
  browse_interactive, call_tool_mcp, ...) is a call: name = tool_call_metadata.function_name
  when present (execute_bash, str_replace_editor, ...), else the action name; id =
  tool_call_metadata.tool_call_id, else the event id; args = the action's args without the
  bookkeeping fields in NOISE (thought, security_risk, confirmation_state, ...), which change
  from call to call without changing what the call does; a `read` action made by a tool
  (str_replace_editor) gets back the `command: "view"` the model sent. Consecutive actions produced by one
  model response (same model_response.id) form one batch.
- An observation answers the action named by its `cause` (legacy: the oldest open action);
  text = content; is_error for an `error` / `user_rejected` observation or a non-zero exit code
  (-1, "still running / timed out", is not an error).
- `message` from the user → UserTurn; from the agent → Prose. Legacy messages carry no source:
  the first is the task (UserTurn), later ones the agent's (Prose).
- `think` → Prose (its thought): a thought is the model talking to itself, not acting, and
  the stagnation detector reads prose; its "Your thought has been logged" answer is dropped.
- `finish` → Prose (its final thought): it ends the episode rather than acting on anything.
- `system` (the system prompt and tool list), `recall` (workspace context), and the
  environment's `change_agent_state` / `agent_state_changed` / `null` observations are
  bookkeeping: skipped. An agent's `error` observation without a cause (a malformed or unknown
  tool call the controller never ran) is the harness refusing the reply: one `harness_error`
  call answered by the error.
- Actions whose source is the user or the environment (a command typed into the GUI terminal)
  are not the agent's calls: skipped.

Positions: the JSONL line for output.jsonl (all events of an instance share its line), the
event's index (1-based) for a JSON event list.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass, field
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
    HARNESS_ERROR,
    JSONL,
    as_text,
    bad,
    head_text,
    iter_jsonl,
    records_or_document,
    str_or_none,
    title_of,
)

NAME = "openhands"
DESCRIPTION = "OpenHands events: output.jsonl (one instance per line), saved event list, legacy flat"

NOISE = frozenset({
    "thought", "security_risk", "confirmation_state", "is_confirmed", "hidden", "action_risk",
    "keep_prompt", "kernel_init_code", "impl_source", "translated_ipython_code",
    "reasoning_content", "image_urls", "images_urls", "wait_for_response",
})
# Top-level keys of a legacy flat action that are the event's envelope, not its arguments.
_ENVELOPE = frozenset({
    "id", "timestamp", "source", "message", "action", "observation", "cause", "args", "extras",
    "tool_call_metadata", "llm_metrics", "timeout", "success",
})
_SKIPPED_ACTIONS = frozenset({
    "system", "recall", "change_agent_state", "null", "condensation", "condensation_request",
    "agent_state_changed",
})
_ERROR_OBSERVATIONS = frozenset({"error", "user_rejected"})

_EVENT = re.compile(
    r'"(action|observation)"\s*:\s*"(message|run|run_ipython|read|edit|write|browse|'
    r'browse_interactive|finish|think|system|recall|change_agent_state|agent_state_changed|'
    r'delegate|call_tool_mcp|mcp|null|error|reject|condensation|task_tracking)"')
_SOURCE = re.compile(r'"source"\s*:\s*"(agent|user|environment)"')
_HISTORY = re.compile(r'"history"\s*:\s*\[')
_TRAJECTORY = re.compile(r'"trajectory"\s*:\s*\[')  # SWE-agent's key: not ours
_EVAL_OUTPUT = re.compile(r'\{\s*"instance_id"\s*:\s*"[^"]*"\s*,\s*"test_result"\s*:\s*\{\s*"git_patch"')
_RESOLVER_OUTPUT = re.compile(r'"issue_type"\s*:\s*"(issue|pr)"\s*,\s*"instruction"\s*:')


def sniff(head: bytes) -> bool:
    text = head_text(head)
    # An instance's git patch comes before its history and can fill the whole head: the
    # record's opening keys (evaluation EvalOutput, resolver output) identify it instead.
    if text.startswith("{") and (_EVAL_OUTPUT.match(text) or _RESOLVER_OUTPUT.search(text[:4096])):
        return True
    if not _EVENT.search(text):
        return False
    if text.startswith("["):
        return bool(_SOURCE.search(text)) or '"role"' not in text
    return text.startswith("{") and bool(_HISTORY.search(text)) and not _TRAJECTORY.search(text)


def read(path: Path | str) -> Iterator[Item]:
    path = Path(path)
    doc = records_or_document(path, lambda value: isinstance(value, dict) and "history" in value)
    if doc is JSONL:
        yield from _read_instances(path)
    elif isinstance(doc, ReadError):
        yield doc
    elif isinstance(doc, list):
        yield SessionStart(_list_info(doc))
        yield from _events(path, doc, per_event_line=True, base_line=None)
    elif isinstance(doc, dict) and isinstance(doc.get("history"), list):
        yield from _instance(path, doc, 1, per_event_line=True)
    else:
        yield bad(path, 1, "not an OpenHands file: expected a list of events or an object with "
                  "a 'history' list")


def _read_instances(path: Path) -> Iterator[Item]:
    for line_no, record in iter_jsonl(path):
        if isinstance(record, ReadError):
            yield record
        elif not isinstance(record, dict) or not isinstance(record.get("history"), list):
            yield bad(path, line_no, "not an OpenHands instance record (an object with a "
                      "'history' list of events)", as_text(record))
        else:
            yield from _instance(path, record, line_no, per_event_line=False)


def _instance(path: Path, record: dict, line_no: int, per_event_line: bool) -> Iterator[Item]:
    metadata = record.get("metadata") if isinstance(record.get("metadata"), dict) else {}
    llm = metadata.get("llm_config") if isinstance(metadata.get("llm_config"), dict) else {}
    issue = record.get("issue") if isinstance(record.get("issue"), dict) else {}
    instruction = record.get("instruction")
    title = str_or_none(issue.get("title")) or (
        title_of(instruction) if isinstance(instruction, str) else "")
    meta: dict[str, Any] = {}
    for key in ("error", "success", "base_commit"):
        if record.get(key) is not None:
            meta[key] = record[key]
    test_result = record.get("test_result")
    if isinstance(test_result, dict) and isinstance(test_result.get("git_patch"), str):
        meta["submitted_patch"] = bool(test_result["git_patch"].strip())  # how it ended: loopledger.analysis.outcome
    if isinstance(record.get("metrics"), dict) and "accumulated_cost" in record["metrics"]:
        meta["accumulated_cost"] = record["metrics"]["accumulated_cost"]
    history = record["history"]
    yield SessionStart(SessionInfo(
        key=str_or_none(record.get("instance_id")) or f"line-{line_no}",
        format=NAME,
        title=title or str_or_none(record.get("instance_id")) or "",
        agent=str_or_none(metadata.get("agent_class")) or "openhands",
        model=str_or_none(llm.get("model")),
        started_at=_first_timestamp(history),
        meta=meta,
    ), line_no)
    yield from _events(path, history, per_event_line=per_event_line, base_line=line_no)


def _list_info(events: list) -> SessionInfo:
    task = next((_message_text(e) for e in events if isinstance(e, dict)
                 and e.get("action") == "message" and e.get("source") == "user"), "")
    model = None
    for e in events:
        tcm = e.get("tool_call_metadata") if isinstance(e, dict) else None
        response = tcm.get("model_response") if isinstance(tcm, dict) else None
        if isinstance(response, dict) and isinstance(response.get("model"), str):
            model = response["model"]
            break
    return SessionInfo(key="0", format=NAME, title=title_of(task), agent="openhands", model=model,
                       started_at=_first_timestamp(events))


def _first_timestamp(events: list) -> str | None:
    for e in events:
        if isinstance(e, dict) and e.get("timestamp"):
            return str_or_none(e["timestamp"])
    return None


@dataclass
class _Pending:
    """The batch being collected: actions of one model response and the answers seen so far."""

    response_id: str | None
    calls: list[Call] = field(default_factory=list)
    answers: list[Answer] = field(default_factory=list)
    text: str = ""
    ts: str | None = None
    line: int | None = None


class _Stream:
    """Turns one history into events; state: open calls and the batch being collected."""

    def __init__(self) -> None:
        self.open: dict[Any, str | None] = {}  # action event id → call id
        self.legacy_open = 0  # legacy actions carry no id: answered in order
        self.pending: _Pending | None = None
        self.seen_message = False

    def flush(self) -> Iterator[Item]:
        if self.pending is not None and self.pending.calls:
            p = self.pending
            yield Batch(tuple(p.calls), p.text, p.ts, p.line)
            if p.answers:
                yield Answers(tuple(p.answers), p.line)
        self.pending = None

    def action(self, event: dict, line: int | None) -> Iterator[Item]:
        action = event.get("action")
        source = event.get("source")
        legacy = "args" not in event and "source" not in event
        args = event.get("args") if isinstance(event.get("args"), dict) else (
            {k: v for k, v in event.items() if k not in _ENVELOPE} if legacy else {})
        ts = str_or_none(event.get("timestamp"))
        if action in _SKIPPED_ACTIONS:
            return
        if action == "message":
            yield from self.flush()
            text = _message_text(event)
            is_user = source == "user" or (source is None and not self.seen_message)
            self.seen_message = True
            if is_user:
                yield UserTurn(text, ts, line)
            elif source in ("agent", None) and text.strip():
                yield Prose(text, ts, line)
            return
        if action in ("think", "finish"):
            yield from self.flush()
            text = (args.get("final_thought") or args.get("thought") or event.get("message") or "")
            if isinstance(text, str) and text.strip():
                yield Prose(text, ts, line)
            return
        if source not in ("agent", None):
            return
        tcm = event.get("tool_call_metadata") if isinstance(event.get("tool_call_metadata"),
                                                               dict) else {}
        response = tcm.get("model_response") if isinstance(tcm.get("model_response"), dict) else {}
        response_id = str_or_none(response.get("id"))
        call_id = str_or_none(tcm.get("tool_call_id")) or str_or_none(event.get("id"))
        name = str_or_none(tcm.get("function_name")) or str(action)
        call_args = {k: v for k, v in args.items() if k not in NOISE}
        if action == "read" and name != action and "command" not in call_args:
            # The editor's `command: "view"` (as the model sent it) becomes a `read` action whose
            # args drop the command: put it back, so the call says it only reads.
            call_args = {"command": "view", **call_args}
        call = Call(call_id, name, call_args)
        if self.pending is None or response_id is None or self.pending.response_id != response_id:
            yield from self.flush()
            thought = args.get("thought")
            self.pending = _Pending(response_id, text=thought if isinstance(thought, str) else "",
                                    ts=ts, line=line)
        self.pending.calls.append(call)
        if _event_id(event.get("id")) is not None:
            self.open[_event_id(event.get("id"))] = call_id
        else:
            self.legacy_open += 1

    def observation(self, event: dict, line: int | None) -> Iterator[Item]:
        cause = _event_id(event.get("cause"))
        if cause is not None and cause in self.open:
            call_id = self.open.pop(cause)
        elif cause is None and event.get("id") is None and self.legacy_open > 0:
            self.legacy_open -= 1
            call_id = None
        elif (event.get("observation") == "error" and cause is None and event.get("id") is not None
              and event.get("source") in ("agent", None)):
            yield from self.refused(event, line)
            return
        else:
            return  # answers a message, think, state change or nothing: not a call
        answer = Answer(call_id, as_text(event.get("content")), _is_error(event),
                        str_or_none(event.get("timestamp")))
        if self.pending is not None and any(c.id == call_id for c in self.pending.calls):
            self.pending.answers.append(answer)
        else:
            yield Answers((answer,), line)


    def refused(self, event: dict, line: int | None) -> Iterator[Item]:
        """An agent's `error` observation that answers no action: the AgentController turned
        the model's reply into no action at all (a malformed or unknown function call, no
        action: openhands/controller/agent_controller.py adds an ErrorObservation and runs
        nothing). One `harness_error` call answered by that error."""
        yield from self.flush()
        call = Call(f"error-{_event_id(event.get('id'))}", HARNESS_ERROR, {"reason": "error_observation"})
        ts = str_or_none(event.get("timestamp"))
        yield Batch((call,), "", ts, line)
        yield Answers((Answer(call.id, as_text(event.get("content")), True, ts),), line)


def _events(path: Path, events: list, per_event_line: bool, base_line: int | None) -> Iterator[Item]:
    stream = _Stream()
    for index, event in enumerate(_flatten(events), start=1):
        line = index if per_event_line else base_line
        if not isinstance(event, dict):
            yield bad(path, line, f"event {index} is not an object ({type(event).__name__})",
                      as_text(event))
            continue
        if isinstance(event.get("action"), str):
            yield from stream.action(event, line)
        elif isinstance(event.get("observation"), str):
            yield from stream.observation(event, line)
        else:
            yield bad(path, line, f"event {index} is neither an action nor an observation",
                      as_text(event))
    yield from stream.flush()


def _event_id(value: Any) -> int | str | None:
    """An event id or cause usable as a key (ints in practice; anything else is no id)."""
    return value if isinstance(value, (int, str)) and not isinstance(value, bool) else None


def _flatten(events: list) -> Iterator[Any]:
    """Some OpenHands versions store history as [action, observation] pairs."""
    for event in events:
        if isinstance(event, list):
            yield from event
        else:
            yield event


def _message_text(event: dict) -> str:
    args = event.get("args") if isinstance(event.get("args"), dict) else event
    content = args.get("content")
    if isinstance(content, str):
        return content
    return as_text(event.get("message"))


def _is_error(event: dict) -> bool:
    if event.get("observation") in _ERROR_OBSERVATIONS:
        return True
    extras = event.get("extras") if isinstance(event.get("extras"), dict) else {}
    meta = extras.get("metadata") if isinstance(extras.get("metadata"), dict) else {}
    code = meta.get("exit_code", extras.get("exit_code", event.get("exit_code")))
    return isinstance(code, int) and not isinstance(code, bool) and code not in (0, -1)
