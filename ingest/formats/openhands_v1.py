"""OpenHands V1 conversations (software-agent-sdk, agent-server): one folder per conversation,

    <conversation id>/base_state.json                 the state without events (agent, llm, stats)
    <conversation id>/events/event-00000-<id>.json    one JSON event per file, in index order

ONE session per conversation folder (key: base_state's `id`, else the folder name). Events by
`kind`: MessageEvent (source user → a user turn; agent → prose), ActionEvent (a tool call:
`tool_name`, `tool_call_id`, arguments from `tool_call.arguments`, else the `action` object;
actions sharing an `llm_response_id` are one batch), ObservationEvent (the answer: its
`observation.content`, `is_error`), AgentErrorEvent and UserRejectObservation (error answers);
SystemPromptEvent, ConversationStateUpdateEvent, Condensation*, PauseEvent and other internal
events are skipped. A record's position is its event index + 1.

Discovery hands the worker `base_state.json` for the folder (the SDK rewrites it as the
conversation runs), or the first event file when there is none.
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

NAME = "openhands-v1"
DESCRIPTION = "OpenHands V1 conversation folder (base_state.json, events/event-NNNNN-*.json)"

BASE_STATE = "base_state.json"
EVENTS_DIR = "events"
_EVENT_FILE = re.compile(r"^event-(\d{5,})(?:-[^/]*)?\.json$")
_KINDS = re.compile(rb'"kind"\s*:\s*"(MessageEvent|ActionEvent|ObservationEvent|SystemPromptEvent|'
                    rb'AgentErrorEvent|UserRejectObservation|ConversationStateUpdateEvent)"')
_SKIPPED = ("SystemPromptEvent", "ConversationStateUpdateEvent", "Condensation", "CondensationRequest",
            "CondensationSummaryEvent", "PauseEvent", "TokenEvent", "ConversationErrorEvent")


def sniff(head: bytes) -> bool:
    text = head_text(head)
    if not text.startswith("{"):
        return False
    if _KINDS.search(head) and b'"source"' in head and b'"timestamp"' in head:
        return True
    # base_state.json: the conversation's state beside its events folder
    return b'"execution_status"' in head and b'"agent"' in head and b'"id"' in head


def _conversation(path: Path) -> Path:
    if path.is_dir():
        return path
    return path.parent.parent if path.parent.name == EVENTS_DIR else path.parent


def _event_files(folder: Path) -> list[tuple[int, Path]]:
    events = folder / EVENTS_DIR
    if not events.is_dir():
        return []
    out = []
    for p in events.iterdir():
        m = _EVENT_FILE.match(p.name)
        if m and p.is_file():
            out.append((int(m.group(1)), p))
    return sorted(out)


def unit_of(path: Path) -> Path | None:
    """base_state.json for any file of a conversation folder, else its first event file."""
    is_event = path.parent.name == EVENTS_DIR and _EVENT_FILE.match(path.name)
    is_state = path.name == BASE_STATE and (path.parent / EVENTS_DIR).is_dir()
    if not (is_event or is_state):
        return None
    folder = _conversation(path)
    if (folder / BASE_STATE).is_file():
        return folder / BASE_STATE
    files = _event_files(folder)
    return files[0][1] if files else path


def _args(ev: dict) -> tuple[Any, bool]:
    tc = ev.get("tool_call")
    if isinstance(tc, dict):
        fn = tc.get("function") if isinstance(tc.get("function"), dict) else tc
        if "arguments" in fn:
            return parse_args(fn.get("arguments"))
    action = ev.get("action")
    if isinstance(action, dict):
        return {k: v for k, v in action.items() if k != "kind"}, False
    return None, False


def _observation_text(obs: Any) -> tuple[str, bool]:
    if not isinstance(obs, dict):
        return as_text(obs), False
    text = content_text(obs.get("content")) if "content" in obs else as_text(obs.get("output"))
    code = obs.get("exit_code")
    return text, bool(obs.get("is_error")) or (isinstance(code, int) and not isinstance(code, bool) and code != 0)


def read(path: Path | str) -> Iterator[Item]:
    path = Path(path)
    folder = _conversation(path)
    files = _event_files(folder)
    if not files and path.is_file() and path.name != BASE_STATE:
        files = [(0, path)]  # a single event file on its own
    state = load_json(folder / BASE_STATE) if (folder / BASE_STATE).is_file() else None
    if state is not None and not isinstance(state, dict):
        yield state if isinstance(state, ReadError) else bad(folder / BASE_STATE, 1, "expected a JSON object")
        state = None
    items: list[Item] = []
    pending: tuple[str | None, list[Call], str, str | None, int] | None = None  # response id, calls, text, ts, line

    def close() -> None:
        nonlocal pending
        if pending is not None:
            _, calls, text, ts, line = pending
            items.append(Batch(tuple(calls), text, ts, line))
            pending = None

    for idx, file in files:
        ev = load_json(file)
        line = idx + 1
        if isinstance(ev, ReadError):
            items.append(ev)
            continue
        if not isinstance(ev, dict):
            items.append(bad(file, 1, f"expected an event object, got {type(ev).__name__}", ev))
            continue
        kind, ts = ev.get("kind"), str_or_none(ev.get("timestamp"))
        if kind == "ActionEvent":
            name = str_or_none(ev.get("tool_name")) or "action"
            args, malformed = _args(ev)
            call = Call(str_or_none(ev.get("tool_call_id")), name, args, malformed)
            rid = str_or_none(ev.get("llm_response_id"))
            if pending is not None and rid is not None and pending[0] == rid:
                pending[1].append(call)
                pending = (rid, pending[1], pending[2], pending[3], line)
            else:
                close()
                pending = (rid, [call], content_text(ev.get("thought")), ts, line)
            continue
        close()
        if kind == "ObservationEvent":
            text, is_error = _observation_text(ev.get("observation"))
            items.append(Answers((Answer(str_or_none(ev.get("tool_call_id")), text, is_error, ts),), line))
        elif kind in ("AgentErrorEvent", "UserRejectObservation"):
            text = as_text(ev.get("error") or ev.get("rejection_reason") or kind)
            items.append(Answers((Answer(str_or_none(ev.get("tool_call_id")), text, True, ts),), line))
        elif kind == "MessageEvent":
            msg = ev.get("llm_message") if isinstance(ev.get("llm_message"), dict) else {}
            text = content_text(msg.get("content"))
            if ev.get("source") == "user":
                items.append(UserTurn(text, ts, line))
            elif text.strip():
                items.append(Prose(text, ts, line))
        elif kind not in _SKIPPED and not isinstance(kind, str):
            items.append(bad(file, 1, "event without a kind", ev))
    close()
    events = [i for i in items if not isinstance(i, ReadError)]
    if not events:
        yield from items
        return
    llm = state.get("agent", {}).get("llm", {}) if isinstance(state, dict) and isinstance(state.get("agent"), dict) else {}
    model = str_or_none(llm.get("model")) if isinstance(llm, dict) else None
    key = str_or_none(state.get("id")) if isinstance(state, dict) and state.get("id") else folder.name
    title = next((title_of(e.text) for e in events if isinstance(e, UserTurn)), "")
    started = next((getattr(e, "ts", None) for e in events if getattr(e, "ts", None)), None)
    meta = {"execution_status": state["execution_status"]} if isinstance(state, dict) and isinstance(
        state.get("execution_status"), str) else {}
    yield SessionStart(SessionInfo(key, NAME, title, "openhands", model, started, None, meta),
                       getattr(events[0], "line", None))
    yield from items
