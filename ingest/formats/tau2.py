"""tau2-bench runs (sierra-research/tau2-bench, `tau2.data_model.simulation`), as it saves them:

- a results file `{"timestamp", "info", "tasks", "simulations": [...]}`, one session per
  simulation, streamed simulation by simulation (ijson): memory holds one simulation, whatever
  the file's size;
- a single simulation file (the "dir" format: `results.json` beside `simulations/<id>.json`;
  or, as some forks save one, {"task_id", "task", "run_info", "reward_info", "messages"}),
  one session. Its `results.json` holds no conversation (metadata and an index): it reads as no
  session.

Sessions are keyed like tau-bench's: `task-<task_id>.trial-<trial>` (the simulation id where a
trimmed leaderboard file dropped both; `.record-<n>` added to a key seen before in the file).

Messages (`role` system / user / assistant / tool):
- every user message is a turn boundary (UserTurn); the user simulator's own tool calls (the
  telecom domain's phone actions, `requestor: "user"`) and their answers are the person's, not
  the agent's: they are not Calls, and the turn's text names them when it has no words;
- assistant `tool_calls` are one Batch (its `content` the batch's text; the turn's `usage`
  with the model from `raw_data` or the run's `info.agent_info.llm`); content alone is Prose;
- a `tool` message (or a multi-tool message, `tool_messages`) answers by id; `error: true` flags
  the answer as a failure; where a trimmed file dropped `error` the answer's text is all there is.
  An audio message's content is audio, not text: read as "[audio]".
Full-duplex (voice) simulations store `ticks` instead of messages: the agent's tool calls and
results of each tick are read, and a user chunk that starts speech after silence is a turn
boundary; streamed speech chunks are not Prose.

A record of the wrong shape is a ReadError naming the simulation (its index and key) and the
message; broken JSON ends the stream with one ReadError at the failing line, after the sessions
before it.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import ijson
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
    MAX_DOC_BYTES,
    bad,
    content_text,
    head_text,
    load_json,
    parse_args,
    str_or_none,
    title_of,
)
from loopledger.formats.openai_chat import chat_usage

NAME = "tau2-bench"
DESCRIPTION = "tau2-bench results (JSON with simulations) and single simulation files"
AGENT = "tau2-bench"

# A results file opens with the run's info (user_info, agent_info, num_trials); a simulation file
# with its id, task_id and termination_reason.
_RESULTS = (re.compile(rb'"num_trials"\s*:'), re.compile(rb'"user_info"\s*:'), re.compile(rb'"agent_info"\s*:'))
_SIMULATION = (re.compile(rb'"task_id"\s*:'), re.compile(rb'"termination_reason"\s*:'),
               re.compile(rb'"start_time"\s*:'))
# A single simulation as some forks save it: {"task_id", "task", "run_info": {simulation_id,
# termination_reason, …}, "reward_info", "messages"}.
_RUN_SIMULATION = (re.compile(rb'"task_id"\s*:'), re.compile(rb'"run_info"\s*:'),
                   re.compile(rb'"termination_reason"\s*:'))
_SKIPPED_ROLES = ("system",)


def sniff(head: bytes) -> bool:
    if not head_text(head).startswith("{"):
        return False
    return any(all(p.search(head) for p in kind) for kind in (_RESULTS, _SIMULATION, _RUN_SIMULATION))


class _Survey:
    """What the top of the file says before any simulation: its kind and the run's agent."""

    def __init__(self) -> None:
        self.kind = "other"  # "results" (simulations follow) | "simulation" | "metadata" | "other"
        self.keys: set[str] = set()
        self.model: str | None = None
        self.domain: str | None = None


_INFO_FIELDS = {"info.agent_info.llm": "model", "info.environment_info.domain_name": "domain"}


def _survey(path: Path) -> _Survey:
    """Walk the top-level keys up to the first conversation (`simulations`, or a simulation's
    `messages` / `ticks`), picking up the agent's model and the domain on the way. Raises
    ijson's error on broken JSON."""
    out = _Survey()
    with open(path, "rb") as fh:
        for prefix, event, value in ijson.parse(fh):
            if event == "string" and prefix in _INFO_FIELDS:
                setattr(out, _INFO_FIELDS[prefix], value)
            elif prefix == "" and event == "map_key":
                out.keys.add(value)
                if value == "simulations":
                    out.kind = "results"
                    break
                if value in ("messages", "ticks"):
                    out.kind = "simulation"
                    break
            elif prefix == "" and event != "start_map":
                break  # the document is not an object
    if out.kind == "other" and {"info", "tasks"} <= out.keys:
        out.kind = "metadata"  # a dir-format results.json: its simulations are files of their own
    return out


def _syntax_error(path: Path, exc: Exception, after: int) -> ReadError:
    """Where the JSON broke: orjson's line and message when the file is small enough to load
    whole (this is the error path only), ijson's otherwise; `after` simulations were read."""
    where = f"after simulation {after}: " if after else ""
    if path.stat().st_size <= MAX_DOC_BYTES:
        err = load_json(path)
        if isinstance(err, ReadError):
            return ReadError(err.path, err.line, where + err.message, err.excerpt)
    first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
    return bad(path, None, f"{where}invalid JSON: {first}")


def read(path: Path | str) -> Iterator[Item]:
    path = Path(path)
    try:
        survey = _survey(path)
    except (ijson.JSONError, UnicodeDecodeError) as exc:
        yield _syntax_error(path, exc, 0)
        return
    except OSError as exc:
        yield bad(path, None, f"cannot read file: {exc.strerror or exc}")
        return
    if survey.kind == "simulation":
        doc = load_json(path)
        if isinstance(doc, ReadError):
            yield doc
        else:
            yield from _simulation(path, doc, 1, survey, set())
    elif survey.kind == "results":
        yield from _results(path, survey)
    elif survey.kind == "other":
        yield bad(path, None, "expected a tau2-bench results object {\"info\", \"tasks\", \"simulations\"} "
                  "or one simulation {\"id\", \"task_id\", \"messages\"}")


def _results(path: Path, survey: _Survey) -> Iterator[Item]:
    seen: set[str] = set()
    n = 0
    with open(path, "rb") as fh:
        sims = ijson.items(fh, "simulations.item", use_float=True)
        while True:
            try:
                sim = next(sims)
            except StopIteration:
                return
            except (ijson.JSONError, UnicodeDecodeError) as exc:
                yield _syntax_error(path, exc, n)
                return
            n += 1
            yield from _simulation(path, sim, n, survey, seen)


def _key(sim: dict, n: int, seen: set[str]) -> str:
    parts = [f"{label}-{str_or_none(sim[field])}" for field, label in (("task_id", "task"), ("trial", "trial"))
             if sim.get(field) is not None]
    key = ".".join(parts) or str_or_none(sim.get("id")) or f"simulation-{n}"
    if key in seen:
        key = f"{key}.record-{n}"
    seen.add(key)
    return key


def _meta(sim: dict) -> dict[str, Any]:
    meta: dict[str, Any] = {k: sim[k] for k in ("task_id", "trial", "termination_reason") if sim.get(k) is not None}
    if isinstance(sim.get("id"), str):
        meta["simulation_id"] = sim["id"]
    reward = sim.get("reward_info")
    if isinstance(reward, dict) and isinstance(reward.get("reward"), int | float) and not isinstance(reward["reward"], bool):
        meta["reward"] = reward["reward"]  # loopledger.analysis.outcome reads it
    return meta


def _simulation(path: Path, sim: Any, n: int, survey: _Survey, seen: set[str]) -> Iterator[Item]:
    if not isinstance(sim, dict):
        yield bad(path, None, f"simulation {n}: expected an object, got {type(sim).__name__}", sim)
        return
    key = _key(sim, n, seen)
    where = f"simulation {n} ({key})"
    messages, ticks = sim.get("messages"), sim.get("ticks")
    if messages is None and isinstance(ticks, list):
        events = _tick_events(path, ticks, where)
    elif isinstance(messages, list):
        events = _message_events(path, messages, where, survey.model)
    else:
        yield bad(path, None, f"{where}: no \"messages\" list (nor full-duplex \"ticks\")", sim)
        return
    meta = _meta(sim)
    if survey.domain:
        meta["domain"] = survey.domain
    yield SessionStart(SessionInfo(key, NAME, _title(messages, ticks), AGENT, survey.model,
                                   str_or_none(sim.get("start_time")), None, meta), n)
    yield from events


def _title(messages: Any, ticks: Any) -> str:
    if isinstance(messages, list):
        chunks = messages
    else:
        chunks = [t.get("user_chunk") for t in ticks if isinstance(t, dict)]
    for m in chunks:
        if isinstance(m, dict) and m.get("role") == "user":
            text = _text(m)
            if text.strip():
                return title_of(text)
    return ""


def _text(msg: dict) -> str:
    # an audio message's content is base64 audio (tau2.data_model.message)
    return "[audio]" if msg.get("is_audio") is True else content_text(msg.get("content"))


def _calls(path: Path, msg: dict, where: str) -> tuple[list[Call], list[ReadError]]:
    raw = msg.get("tool_calls") or []
    if not isinstance(raw, list):
        return [], [bad(path, None, f"{where}: tool_calls must be a list, got {type(raw).__name__}", raw)]
    calls, errors = [], []
    for k, tc in enumerate(raw, 1):
        if not isinstance(tc, dict) or not isinstance(tc.get("name"), str):
            errors.append(bad(path, None, f"{where}: tool call #{k} has no name", tc))
            continue
        args, malformed = parse_args(tc.get("arguments"))
        calls.append(Call(str_or_none(tc.get("id")) or None, tc["name"], args, malformed))
    return calls, errors


def _usage(msg: dict, model: str | None):
    usage = chat_usage(msg)
    if usage is None:
        return None
    raw = msg.get("raw_data")
    named = str_or_none(raw.get("model")) if isinstance(raw, dict) else None
    return dataclasses.replace(usage, model=named or model)


class _Requests:
    """The calls still unanswered and who asked for each (assistant or user), oldest first: a
    trimmed file drops a tool message's `requestor`, and an answer without an id answers the
    oldest call."""

    LIMIT = 256  # calls never answered are forgotten past this many

    def __init__(self) -> None:
        self.pending: list[tuple[str | None, str]] = []

    def add(self, call_id: str | None, requestor: str) -> None:
        self.pending.append((call_id, requestor))
        del self.pending[:-self.LIMIT]

    def take(self, call_id: str | None, stated: Any) -> str:
        found = "assistant"
        for k, (pid, requestor) in enumerate(self.pending):
            if call_id is None or pid == call_id:
                found = requestor
                del self.pending[k]
                break
        return stated if stated in ("user", "assistant") else found


def _message_events(path: Path, messages: list, where: str, model: str | None) -> Iterator[Item]:
    requests = _Requests()
    for i, msg in enumerate(messages, 1):
        at = f"{where}, message {i}"
        if not isinstance(msg, dict):
            yield bad(path, None, f"{at}: expected a message object, got {type(msg).__name__}", msg)
            continue
        role, ts = msg.get("role"), str_or_none(msg.get("timestamp"))
        if role == "user":
            calls, errors = _calls(path, msg, at)
            yield from errors
            for c in calls:
                requests.add(c.id, "user")
            text = _text(msg) or " ".join(f"[{c.name}]" for c in calls)
            yield UserTurn(text, ts, i)
        elif role == "assistant":
            calls, errors = _calls(path, msg, at)
            yield from errors
            text = _text(msg)
            if calls:
                for c in calls:
                    requests.add(c.id, "assistant")
                yield Batch(tuple(calls), text, ts, i, _usage(msg, model))
            elif text.strip():
                yield Prose(text, ts, i, _usage(msg, model))
        elif role == "tool":
            answers = _answers(path, msg, at, requests)
            if isinstance(answers, ReadError):
                yield answers
            elif answers:
                yield Answers(tuple(answers), i)
        elif role not in _SKIPPED_ROLES:
            yield bad(path, None, f"{at}: unknown message role {role!r}", msg)


def _answers(path: Path, msg: dict, at: str, requests: _Requests) -> list[Answer] | ReadError:
    """The agent's answers in a tool message (one, or a multi-tool message's several)."""
    parts = msg.get("tool_messages") if "tool_messages" in msg else [msg]
    if not isinstance(parts, list) or not all(isinstance(p, dict) for p in parts):
        return bad(path, None, f"{at}: tool_messages must be a list of tool messages", msg)
    out = []
    for part in parts:
        call_id = str_or_none(part.get("id")) or None
        if requests.take(call_id, part.get("requestor")) == "user":
            continue  # the user simulator's own tool (its phone), answered to it
        error = part.get("error")
        out.append(Answer(call_id, content_text(part.get("content")), error is True,
                          str_or_none(part.get("timestamp"))))
    return out


def _tick_events(path: Path, ticks: list, where: str) -> Iterator[Item]:
    """Full-duplex: per tick, a user chunk starting speech after silence is a turn; the agent's
    tool calls are a Batch and its tool results Answers."""
    speaking = False
    for i, tick in enumerate(ticks, 1):
        at = f"{where}, tick {i}"
        if not isinstance(tick, dict):
            yield bad(path, None, f"{at}: expected a tick object, got {type(tick).__name__}", tick)
            continue
        ts = str_or_none(tick.get("timestamp"))
        chunk = tick.get("user_chunk")
        now = isinstance(chunk, dict) and chunk.get("contains_speech") is True
        if now and not speaking:
            yield UserTurn(_text(chunk), ts, i)
        speaking = now
        calls, errors = _calls(path, {"tool_calls": tick.get("agent_tool_calls")}, at)
        yield from errors
        if calls:
            yield Batch(tuple(calls), "", ts, i)
        results = tick.get("agent_tool_results") or []
        if not isinstance(results, list) or not all(isinstance(r, dict) for r in results):
            yield bad(path, None, f"{at}: agent_tool_results must be a list of tool messages", results)
        elif results:
            yield Answers(tuple(Answer(str_or_none(r.get("id")) or None, content_text(r.get("content")),
                                       r.get("error") is True, str_or_none(r.get("timestamp")))
                                for r in results), i)
