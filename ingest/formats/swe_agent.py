"""SWE-agent trajectories (`*.traj`): {environment, trajectory: [...], history: [...], info}.

Two variants, told apart by `history`:

- Command strings (the classic ACI): each `trajectory[]` step {action, observation, thought,
  response, state} is one call. A step with an empty action and the model's reply is one SWE-agent
  could not parse (a format error): one `harness_error` call answered by the error it requeried
  with. The action is a raw command string, so tool = its first word and
  args = {"command": the whole action} (the trailing newline older versions append is dropped,
  so the same command compares equal across versions). The observation answers it; there is no
  call id (the replay engine pairs it with the oldest unanswered call).
- What ran, in both variants, read from the harness's own templates (the trajectory's
  replay_config, else SWE-agent's defaults): a command the harness refused before running it
  (its blocklist — `vim`, `python` alone, `tail -f` — or a `bash -n` syntax check: "… was NOT
  executed") is one `harness_error` call {reason, rejected: the command} answered by that
  refusal, a failure; a command it cancelled at its timeout, or an edit its linter rejected
  ("Your proposed edit has introduced new syntax error(s)": nothing changed), keeps its call and
  is answered by a failure. A function-calling reply with no tool call that SWE-agent answered
  with its format error is one `harness_error` call, as in the command variant.
- Function calling: `history` holds assistant messages with OpenAI-style `tool_calls` and
  role "tool" messages with `tool_call_ids`; calls keep their ids, names and parsed arguments.

Only the first non-demonstration user message (the task / issue statement) is a UserTurn: every
later "user" message is the environment speaking (observations, format-error nudges), not a
person, so it is not a run boundary. `info` (exit_status, model_stats, submission size) goes to
the session's meta. Positions are record indexes: the step in `trajectory` or the message in
`history`, 1-based.
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
    HARNESS_ERROR,
    as_text,
    bad,
    content_text,
    head_text,
    load_json,
    parse_args,
    str_or_none,
    title_of,
)

NAME = "swe-agent"
DESCRIPTION = "SWE-agent .traj (trajectory[] of command actions, or the function-calling history)"

# `"trajectory": [` — mini-swe-agent files have `"trajectory_format"` instead and are OpenAI chat.
_TRAJECTORY = re.compile(r'"trajectory"\s*:\s*\[')
_STEP_KEYS = re.compile(r'"(action|observation|thought)"\s*:')
_ISSUE = re.compile(r"ISSUE:\s*\n\s*(\S[^\n]*)")


def sniff(head: bytes) -> bool:
    text = head_text(head)
    return text.startswith("{") and bool(_TRAJECTORY.search(text)) and bool(_STEP_KEYS.search(text))


def read(path: Path | str) -> Iterator[Item]:
    path = Path(path)
    doc = load_json(path)
    if isinstance(doc, ReadError):
        yield doc
        return
    if not isinstance(doc, dict) or not isinstance(doc.get("trajectory"), list):
        yield bad(path, 1, "not a SWE-agent trajectory: expected an object with a 'trajectory' list")
        return
    history = doc.get("history") if isinstance(doc.get("history"), list) else []
    task_index, task = _task_message(history)
    yield SessionStart(_info(doc, task, path))
    if task is not None:
        yield UserTurn(task, None, task_index)
    harness = _Harness(_config(doc))
    if any(isinstance(m, dict) and m.get("role") == "assistant" and m.get("tool_calls")
           for m in history):
        yield from _function_calls(path, history, task_index, harness)
    else:
        yield from _commands(path, doc["trajectory"], harness)


def _config(doc: dict) -> dict:
    config = doc.get("replay_config")
    if isinstance(config, str):  # some versions store the config as a JSON string
        config, _ = parse_args(config)
    return config if isinstance(config, dict) else {}


def _template(text: str) -> re.Pattern[str] | None:
    """A harness template as a pattern matching the start of what it renders: its literal text
    (the first 200 characters of it) with every field (`{action}`, `{{command}}`) any text."""
    pieces = re.split(r"\{\{.*?\}\}|\{[^{}]*\}", text.strip()[:200])
    if len("".join(pieces).strip()) < 12:
        return None
    return re.compile(".*?".join(re.escape(p) for p in pieces), re.S)


# SWE-agent's default templates (sweagent/agent/agents.py, tools/tools.py), for trajectories whose
# config does not carry them. Older releases say "Interactive operation", newer ones "Operation".
_BLOCKED = ("Operation '{action}' is not supported by this environment.",
            "Interactive operation '{action}' is not supported by this environment.")
_SYNTAX = ("Your bash command contained syntax errors and was NOT executed.",)
_TIMEOUT = ("The command {command} was cancelled because it took more than {timeout} seconds.",)
_FORMAT = ("Your output could not be parsed properly.", "Your output was not formatted correctly.",
           "Your last output did not use any tool calls!")
# windowed edit_linting: the edit was checked and thrown away, the file unchanged
_LINT = ("Your proposed edit has introduced new syntax error(s).",)


class _Harness:
    """How one trajectory's SWE-agent answered what it did not run, from its own config's
    templates plus the defaults."""

    def __init__(self, config: dict) -> None:
        agent = config.get("agent") if isinstance(config.get("agent"), dict) else {}
        templates = agent.get("templates") if isinstance(agent.get("templates"), dict) else {}
        tools = agent.get("tools") if isinstance(agent.get("tools"), dict) else {}
        filt = tools.get("filter") if isinstance(tools.get("filter"), dict) else {}

        def patterns(own: Any, defaults: tuple[str, ...]) -> tuple[re.Pattern[str], ...]:
            texts = ([own] if isinstance(own, str) else []) + list(defaults)
            return tuple(p for p in map(_template, texts) if p is not None)

        self.blocked = patterns(filt.get("blocklist_error_template"), _BLOCKED)
        self.syntax = patterns(templates.get("shell_check_error_template"), _SYNTAX)
        self.cancelled = patterns(templates.get("command_cancelled_timeout_template"), _TIMEOUT)
        self.format = patterns(tools.get("format_error_template"), _FORMAT)
        self.lint = patterns(None, _LINT)

    @staticmethod
    def _says(patterns: tuple[re.Pattern[str], ...], text: str) -> bool:
        head = text.lstrip()[:600]
        return any(p.match(head) for p in patterns)

    def refused(self, text: str) -> str | None:
        """Why the harness ran nothing, when this observation is its refusal: "blocked_command"
        or "shell_syntax_error"."""
        if self._says(self.blocked, text):
            return "blocked_command"
        if self._says(self.syntax, text):
            return "shell_syntax_error"
        return None

    def failed(self, text: str) -> bool:
        """It ran and failed by the harness's word: cancelled at the timeout, or an edit its
        linter threw away."""
        return self._says(self.cancelled, text) or self._says(self.lint, text)

    def format_error(self, text: str) -> bool:
        return self._says(self.format, text)


def _task_message(history: list) -> tuple[int | None, str | None]:
    for index, msg in enumerate(history, start=1):
        if isinstance(msg, dict) and msg.get("role") == "user" and not msg.get("is_demo"):
            return index, content_text(msg.get("content"))
    return None, None


def _info(doc: dict, task: str | None, path: Path) -> SessionInfo:
    info = doc.get("info") if isinstance(doc.get("info"), dict) else {}
    meta: dict[str, Any] = {}
    for key in ("exit_status", "model_stats", "swe_agent_version", "swe_rex_version"):
        if info.get(key) is not None:
            meta[key] = info[key]
    if isinstance(info.get("submission"), str):
        meta["submission_chars"] = len(info["submission"])
        meta["submission"] = info["submission"][:200]  # its start: a CTF flag, a patch's first line
    env = doc.get("environment")
    if isinstance(env, str):
        meta["environment"] = env
    model = None
    config = _config(doc)
    if config:
        agent = config.get("agent")
        model_cfg = agent.get("model") if isinstance(agent, dict) else None
        if isinstance(model_cfg, dict):
            model = str_or_none(model_cfg.get("name"))
    # SWE-agent names the file after the instance; the opening "We're currently solving…" line
    # says nothing, so the title is the issue's first line, else the instance.
    meta["instance_id"] = path.stem
    issue = _ISSUE.search(task or "")
    title = title_of(issue.group(1)) if issue else path.stem
    return SessionInfo(key="0", format=NAME, title=title, agent="swe-agent", model=model, meta=meta)


def _commands(path: Path, trajectory: list, harness: _Harness) -> Iterator[Item]:
    for index, step in enumerate(trajectory, start=1):
        if not isinstance(step, dict):
            yield bad(path, index, f"trajectory step {index} is not an object", as_text(step))
            continue
        action = step.get("action")
        if isinstance(action, str) and not action.strip() and _model_text(step):
            yield from _refused(step, trajectory[index] if index < len(trajectory) else None, index)
            continue
        if not isinstance(action, str) or not action.strip():
            yield bad(path, index, f"trajectory step {index} has no action command", as_text(step))
            continue
        command = action.rstrip("\n")
        thought = step.get("thought")
        observation = as_text(step.get("observation")) if "observation" in step else None
        refused = harness.refused(observation) if observation is not None else None
        if refused:
            call = Call(f"swe-refused-{index}", HARNESS_ERROR, {"reason": refused, "rejected": command})
        else:
            call = Call(None, command.split(None, 1)[0], {"command": command})
        yield Batch((call,), thought if isinstance(thought, str) else "", None, index)
        if observation is not None:
            yield Answers((Answer(call.id, observation, bool(refused) or harness.failed(observation)),), index)


def _model_text(step: dict) -> str:
    for key in ("response", "thought"):
        if isinstance(step.get(key), str) and step[key].strip():
            return step[key]
    return ""


def _refused(step: dict, following: Any, index: int) -> Iterator[Item]:
    """A step whose reply SWE-agent could not parse: forward_with_handling (sweagent/agent/
    agents.py) records it with an empty action and the reply as thought, runs nothing and
    requeries with its format error, which the next step's `query` ends with. One
    `harness_error` call answered by that error (not a malformed record)."""
    error = ""
    query = following.get("query") if isinstance(following, dict) else None
    if isinstance(query, list) and query and isinstance(query[-1], dict) and query[-1].get("role") == "user":
        error = content_text(query[-1].get("content"))
    call = Call(f"swe-format-{index}", HARNESS_ERROR, {"reason": "format_error"})
    yield Batch((call,), _model_text(step), None, index)
    yield Answers((Answer(call.id, error or as_text(step.get("observation") or "")
                          or "no action could be parsed from the reply", True),), index)


def _function_calls(path: Path, history: list, task_index: int | None, harness: _Harness) -> Iterator[Item]:
    # what answered each call id, so a call the harness refused is read as refused before its answer
    answered: dict[str, str] = {}
    for msg in history:
        if isinstance(msg, dict) and msg.get("role") == "tool":
            ids = msg.get("tool_call_ids")
            for i in ids if isinstance(ids, list) and ids else [msg.get("tool_call_id")]:
                if isinstance(i, str):
                    answered[i] = content_text(msg.get("content"))
    refused_ids: set[str] = set()
    for index, msg in enumerate(history, start=1):
        if not isinstance(msg, dict):
            yield bad(path, index, f"history message {index} is not an object", as_text(msg))
            continue
        if msg.get("is_demo") or index == task_index:
            continue
        role = msg.get("role")
        text = content_text(msg.get("content"))
        if role == "assistant":
            calls = list(_calls(path, index, msg.get("tool_calls")))
            errors = [c for c in calls if isinstance(c, ReadError)]
            good = tuple(_as_run(c, answered, harness, refused_ids) for c in calls if isinstance(c, Call))
            yield from errors
            following = history[index] if index < len(history) else None
            if good:
                yield Batch(good, text, None, index)
            elif (not errors and isinstance(following, dict) and following.get("role") == "user"
                  and harness.format_error(content_text(following.get("content")))):
                # a reply with no tool call, answered by the format error: it ran nothing
                call = Call(f"swe-format-{index}", HARNESS_ERROR, {"reason": "format_error"})
                yield Batch((call,), text, None, index)
                yield Answers((Answer(call.id, content_text(following.get("content")), True),), index + 1)
            elif text.strip():
                yield Prose(text, None, index)
        elif role == "tool":
            ids = msg.get("tool_call_ids")
            if not isinstance(ids, list) or not ids:
                ids = [msg.get("tool_call_id")]
            failed = str_or_none(ids[0]) in refused_ids or harness.refused(text) is not None or harness.failed(text)
            yield Answers(tuple(Answer(str_or_none(i), text, failed) for i in ids), index)


def _as_run(call: Call, answered: dict[str, str], harness: _Harness, refused_ids: set[str]) -> Call:
    """The call as the harness handled it: a `harness_error` call (same id) when its answer is the
    harness refusing to run it."""
    reason = harness.refused(answered[call.id]) if call.id in answered else None
    if reason is None:
        return call
    refused_ids.add(call.id)
    args = call.args if isinstance(call.args, dict) else {}
    rejected = next((v for k, v in args.items() if k in ("command", "cmd") and isinstance(v, str)), None)
    return Call(call.id, HARNESS_ERROR, {"reason": reason, "rejected": rejected if rejected is not None
                                         else call.name})


def _calls(path: Path, index: int, raw: Any) -> Iterator[Call | ReadError]:
    for position, tc in enumerate(raw if isinstance(raw, list) else []):
        fn = tc.get("function") if isinstance(tc, dict) else None
        if not isinstance(fn, dict) or not isinstance(fn.get("name"), str):
            yield bad(path, index, f"history message {index}: tool call {position + 1} has no "
                      "function name", as_text(tc))
            continue
        args, malformed = parse_args(fn.get("arguments"))
        yield Call(str_or_none(tc.get("id")), fn["name"], args, malformed)
