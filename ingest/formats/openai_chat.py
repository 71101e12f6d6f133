"""OpenAI Chat Completions message lists, in the shapes agents log them:

- a JSON list of messages, or {"messages": [...]} (a request body);
- JSONL, one message per line, or one conversation {"messages": [...]} per line;
- mini-swe-agent trajectories {"info": ..., "messages": [...]} (one session); v1 trajectories act
  through fenced ```bash blocks in the assistant's text: a reply the harness ran is one `bash`
  call, the next user message its answer; a reply it refused (zero or several blocks: its
  format error) is one `harness_error` call answered by that error;
- Claude Code / Codex sessions converted to {"messages": [...], "meta": {...}}: keyed by
  `meta.session_id` (or `meta.session_meta.session_id`);
- tau-bench result lists [{"task_id", "reward", "info", "traj", "trial"}, ...]: one session per
  record, emitted record by record.

Assistant `tool_calls[].function.arguments` is a JSON string: a malformed one is kept raw and
flagged on the Call, not fatal. Role "tool" messages answer by `tool_call_id`; the legacy
`function_call` / role "function" pair has no ids (answers are then paired by order). System
and developer messages are not user turns; an assistant message with content and no tool calls
is Prose.
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
from loopledger.formats._common import (
    HARNESS_ERROR,
    JSONL,
    bad,
    content_text,
    head_text,
    iter_jsonl,
    parse_args,
    records_or_document,
    str_or_none,
    title_of,
)

NAME = "openai-chat"
DESCRIPTION = "OpenAI Chat Completions messages (JSON / JSONL; mini-swe-agent, tau-bench)"

_ROLE = re.compile(rb'"role"\s*:\s*"(system|user|assistant|tool|developer|function)"')
_SKIPPED_ROLES = ("system", "developer", "exit")  # mini-swe-agent ends with role "exit"


def sniff(head: bytes) -> bool:
    text = head_text(head)
    return text.startswith(("[", "{")) and bool(_ROLE.search(head))


def _calls(msg: dict, path: Path, line: int) -> tuple[list[Call], list[ReadError]]:
    calls: list[Call] = []
    errors: list[ReadError] = []
    raw_calls = msg.get("tool_calls") or []
    if not isinstance(raw_calls, list):
        return [], [bad(path, line, f"tool_calls must be a list, got {type(raw_calls).__name__}",
                        raw_calls)]
    for n, tc in enumerate(raw_calls):
        fn = tc.get("function") if isinstance(tc, dict) else None
        if not isinstance(fn, dict) or not isinstance(fn.get("name"), str):
            errors.append(bad(path, line, f"tool call #{n + 1} has no function name", tc))
            continue
        args, malformed = parse_args(fn.get("arguments"))
        calls.append(Call(str_or_none(tc.get("id")), fn["name"], args, malformed))
    legacy = msg.get("function_call")
    if isinstance(legacy, dict) and isinstance(legacy.get("name"), str):
        args, malformed = parse_args(legacy.get("arguments"))
        calls.append(Call(None, legacy["name"], args, malformed))
    return calls, errors


def chat_usage(msg: dict) -> TurnUsage | None:
    """A chat completion's `usage` (prompt_tokens counting prompt_tokens_details.cached_tokens,
    completion_tokens) and model, on the message itself or in the response mini-swe-agent keeps
    beside it (extra.response)."""
    extra = msg.get("extra")
    response = extra.get("response") if isinstance(extra, dict) else None
    src = msg if isinstance(msg.get("usage"), dict) else response if isinstance(response, dict) else None
    u = src.get("usage") if src is not None else None
    if not isinstance(u, dict):
        return None

    def n(value: Any) -> int | None:
        return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else None

    details = u.get("prompt_tokens_details")
    cached = n(details.get("cached_tokens")) if isinstance(details, dict) else None
    usage = TurnUsage(str_or_none(src.get("model") or msg.get("model")), n(u.get("prompt_tokens")),
                      n(u.get("completion_tokens")), cached or None)
    return usage if usage.known else None


def message_events(msg: Any, path: Path, line: int) -> list[Item]:
    """One chat message → its events (or a ReadError); `line` = file line or message index."""
    if not isinstance(msg, dict):
        return [bad(path, line, f"expected a message object, got {type(msg).__name__}", msg)]
    role = msg.get("role")
    ts = str_or_none(msg.get("timestamp") or msg.get("created_at"))
    content = msg.get("content")
    if role == "user":
        extra = msg.get("extra")
        if isinstance(extra, dict) and extra.get("interrupt_type") == "FormatError":
            return _refused(extra, content_text(content), ts, line)
        return [UserTurn(content_text(content), ts, line)]
    if role == "assistant":
        calls, errors = _calls(msg, path, line)
        text = content_text(content)
        if calls:
            return [*errors, Batch(tuple(calls), text, ts, line, chat_usage(msg))]
        return [*errors, Prose(text, ts, line, chat_usage(msg))] if text.strip() else errors
    if role == "tool":
        answer = Answer(str_or_none(msg.get("tool_call_id")), content_text(content), False, ts)
        return [Answers((answer,), line)]
    if role == "function":
        return [Answers((Answer(None, content_text(content), False, ts),), line)]
    if role in _SKIPPED_ROLES:
        return []
    return [bad(path, line, f"unknown message role {role!r}", msg)]


def _refused(extra: dict, text: str, ts: str | None, line: int) -> list[Item]:
    """mini-swe-agent v2 keeps no assistant message for a reply it could not parse: only its
    format error, a user message marked extra.interrupt_type "FormatError" (with the reply in
    extra.model_response, the count in extra.n_actions where the model is text-based). That is
    the harness, not the person: one `harness_error` call answered by the error."""
    args: dict[str, Any] = {"reason": "format_error"}
    if isinstance(extra.get("n_actions"), int) and not isinstance(extra["n_actions"], bool):
        args["actions"] = extra["n_actions"]
    reply = extra.get("model_response")
    call = Call(f"format-error-{line}", HARNESS_ERROR, args)
    return [Batch((call,), reply if isinstance(reply, str) else "", ts, line),
            Answers((Answer(call.id, text, True, ts),), line)]


def _session(path: Path, messages: list, info: SessionInfo, line: int | None,
             file_line: bool = False) -> Iterator[Item]:
    """`file_line`: the whole conversation sits on file line `line` (JSONL of conversations), so
    its events carry that line; otherwise a message's line is its index in the list."""
    title = next((content_text(m.get("content")) for m in messages
                  if isinstance(m, dict) and m.get("role") == "user"), "")
    if title and not info.title:
        info = SessionInfo(info.key, info.format, title_of(title), info.agent, info.model,
                           info.started_at, info.parent_key, info.meta)
    yield SessionStart(info, line)
    for n, msg in enumerate(messages, 1):
        yield from message_events(msg, path, line if file_line and line else n)


def _model(info: Any) -> str | None:
    try:
        return str_or_none(info["config"]["model"]["model_name"])
    except (KeyError, TypeError):
        return None


def _tau_bench(path: Path, records: list) -> Iterator[Item]:
    seen: set[str] = set()
    for n, rec in enumerate(records, 1):
        if not isinstance(rec, dict) or not isinstance(rec.get("traj"), list):
            yield bad(path, n, "tau-bench record without a \"traj\" message list", rec)
            continue
        key = f"task-{rec.get('task_id')}.trial-{rec.get('trial')}"
        if key in seen:
            key = f"{key}.record-{n}"
        seen.add(key)
        meta = {k: rec[k] for k in ("task_id", "trial", "reward") if k in rec}
        info = SessionInfo(key, NAME, "", "tau-bench", None, None, None, meta)
        # Messages of a record are numbered within the record; the record index is in the key.
        yield from _session(path, rec["traj"], info, n)
        records[n - 1] = None  # emitted: let it go


def _document(path: Path, doc: Any) -> Iterator[Item]:
    if isinstance(doc, ReadError):
        yield doc
    elif isinstance(doc, list) and doc and all(isinstance(r, dict) and "traj" in r for r in doc[:3]):
        yield from _tau_bench(path, doc)
    elif isinstance(doc, list):
        yield from _session(path, doc, SessionInfo("0", NAME), 1)
    elif isinstance(doc, dict) and isinstance(doc.get("messages"), list):
        info = doc.get("info")
        key = str_or_none(doc.get("instance_id")) or _meta_session_id(doc) or "0"
        agent = "mini-swe-agent" if "trajectory_format" in doc or isinstance(info, dict) else None
        meta = {"trajectory_format": doc["trajectory_format"]} if "trajectory_format" in doc else {}
        # How the run ended (loopledger.analysis.outcome reads these): mini-swe-agent's exit status and submission.
        if isinstance(info, dict) and isinstance(info.get("exit_status"), str):
            meta["exit_status"] = info["exit_status"]
            if isinstance(info.get("submission"), str):
                meta["submission"] = info["submission"][:200]
        info = SessionInfo(key, NAME, "", agent, _model(info), None, None, meta)
        if agent and _text_actions(doc["messages"]):
            config = doc["info"].get("config") if isinstance(doc.get("info"), dict) else None
            yield from _mini_v1(path, doc["messages"], info, config)
        else:
            yield from _session(path, doc["messages"], info, 1)
    else:
        yield bad(path, 1, "expected a list of messages, {\"messages\": [...]} or a tau-bench "
                  f"result list, got {type(doc).__name__}")


def _meta_session_id(doc: dict) -> str | None:
    """Claude Code / Codex sessions converted to {"messages", "meta"}: the session id in meta."""
    meta = doc.get("meta")
    if not isinstance(meta, dict):
        return None
    inner = meta.get("session_meta")
    sid = meta.get("session_id") or (inner.get("session_id") if isinstance(inner, dict) else None)
    return str_or_none(sid) if isinstance(sid, str | int) and not isinstance(sid, bool) else None


# mini-swe-agent v1 acts through one fenced bash block in the assistant's text (no tool_calls);
# the next user message is the observation, "<returncode>N</returncode><output>…</output>".
_BASH_BLOCK = re.compile(r"```(?:bash|sh)[ \t]*\n(.*?)```", re.S)
_RETURNCODE = re.compile(r"<returncode>\s*(-?\d+)\s*</returncode>")
# What the harness itself runs (minisweagent/agents/default.py, AgentConfig.action_regex): a
# reply is executed only when this finds exactly one block; otherwise the harness runs nothing
# and answers with its format_error_template.
_MINI_ACTION = r"```bash\s*\n(.*?)\n```"
_MINI_FORMAT_ERROR = "Please always provide EXACTLY ONE action"  # the default template's head
_MINI_TIMEOUT = "The last command <command>"  # the default timeout_template's head
_FOUND = re.compile(r"found (\d+) actions")


def _text_actions(messages: list) -> bool:
    """No tool_calls anywhere and fenced bash blocks in the assistant's text: a v1 trajectory."""
    has_blocks = False
    for m in messages:
        if not isinstance(m, dict) or m.get("role") != "assistant":
            continue
        if m.get("tool_calls") or m.get("function_call"):
            return False
        has_blocks = has_blocks or bool(_BASH_BLOCK.search(content_text(m.get("content"))))
    return has_blocks


def _template_head(agent_config: Any, key: str, default: str) -> str:
    """The fixed text a harness template starts with (up to its first Jinja field), as the
    trajectory's own config has it; the default template's head when the config lacks it."""
    template = agent_config.get(key) if isinstance(agent_config, dict) else None
    head = template.split("{{")[0].split("{%")[0].strip() if isinstance(template, str) else ""
    return head[:200] if len(head) >= 12 else default


class _MiniHarness:
    """How one v1 trajectory's harness acted and answered, from its own config (a run with
    custom templates or action_regex is read by them)."""

    def __init__(self, config: Any) -> None:
        agent = config.get("agent") if isinstance(config, dict) else None
        regex = agent.get("action_regex") if isinstance(agent, dict) else None
        try:
            self.action = re.compile(regex if isinstance(regex, str) else _MINI_ACTION, re.S)
        except re.error:
            self.action = re.compile(_MINI_ACTION, re.S)
        self.format_error = _template_head(agent, "format_error_template", _MINI_FORMAT_ERROR)
        self.timeout = _template_head(agent, "timeout_template", _MINI_TIMEOUT)

    def refused(self, answer: Any) -> bool:
        """The message after a reply is the harness's format error: the reply ran nothing."""
        return (isinstance(answer, dict) and answer.get("role") == "user"
                and content_text(answer.get("content")).lstrip().startswith(self.format_error))

    def calls(self, n: int, text: str, answer: Any) -> list[Call]:
        """What the reply at message `n` made the harness do: one `bash` call (the one action it
        ran), or one `harness_error` call when it refused the reply (zero or several actions),
        or nothing (prose, no answer)."""
        actions = [a.strip() for a in self.action.findall(text)]
        if self.refused(answer):
            found = _FOUND.search(content_text(answer.get("content")))
            count = int(found.group(1)) if found else len(actions)
            return [Call(f"mini-{n}-0", HARNESS_ERROR, {"reason": "format_error", "actions": count})]
        if len(actions) != 1:
            # the trajectory's regex is not ours to second-guess: a block the reader sees is the
            # one the harness answered (an observation followed)
            actions = [b.strip() for b in _BASH_BLOCK.findall(text)][:1]
        return [Call(f"mini-{n}-1", "bash", {"command": actions[0]})] if actions else []

    def failed(self, call: Call, text: str) -> bool:
        if call.name == HARNESS_ERROR or text.lstrip().startswith(self.timeout):
            return True
        code = _RETURNCODE.search(text)
        return bool(code and code.group(1) != "0")


def _mini_v1(path: Path, messages: list, info: SessionInfo, config: Any = None) -> Iterator[Item]:
    """What the harness ran: one `bash` call per executed reply, its observation the next user
    message (an error when its returncode is not 0 or the command timed out); a reply the
    harness refused (format error) is one `harness_error` call answered by that refusal. Only
    the first user message is the person: every later one is the harness (observations,
    format errors, step-limit notices)."""
    harness = _MiniHarness(config)
    task = next((content_text(m.get("content")) for m in messages
                 if isinstance(m, dict) and m.get("role") == "user"), "")
    yield SessionStart(SessionInfo(info.key, info.format, title_of(task), info.agent, info.model,
                                   info.started_at, info.parent_key, info.meta), 1)
    pending: list[Call] = []
    seen_task = False
    for n, msg in enumerate(messages, 1):
        if not isinstance(msg, dict):
            yield bad(path, n, f"expected a message object, got {type(msg).__name__}", msg)
            continue
        role, text = msg.get("role"), content_text(msg.get("content"))
        ts = str_or_none(msg.get("timestamp"))
        if role == "assistant":
            answer = messages[n] if n < len(messages) else None
            pending = harness.calls(n, text, answer)
            yield Batch(tuple(pending), text, ts, n) if pending else Prose(text, ts, n)
        elif role == "user" and not seen_task:
            seen_task = True
            yield UserTurn(text, ts, n)
        elif role == "user" and pending:
            yield Answers(tuple(Answer(c.id, text, harness.failed(c, text), ts) for c in pending), n)
            pending = []
        elif role not in (*_SKIPPED_ROLES, "user"):
            yield bad(path, n, f"unknown message role {role!r}", msg)


def _is_conversation(value: Any) -> bool:
    return isinstance(value, dict) and "role" not in value and isinstance(value.get("messages"), list)


_STATE = "openai-chat/1"


def _jsonl(path: Path, checkpoint: bool = False, resume: Checkpoint | None = None) -> Iterator[Item]:
    """JSONL of messages (one session), or of conversations {"messages": [...]} (one session per
    line, as fine-tuning and eval logs are written); the first record decides which. Each line's
    items depend on that line alone, so a Checkpoint is just the position (and the mode)."""
    started = False
    per_line: bool | None = None
    start = (0, 0)
    if resume is not None:
        _, started, per_line = resume.state
        start = (resume.offset, resume.line)
    pos: list[int] = []
    for line, rec in iter_jsonl(path, start=start, pos=pos):
        if isinstance(rec, ReadError):
            yield rec
            continue
        if per_line is None:
            per_line = _is_conversation(rec)
        if per_line:
            if _is_conversation(rec):
                key = _meta_session_id(rec) or f"line-{line}"
                yield from _session(path, rec["messages"], SessionInfo(key, NAME), line, True)
            else:
                yield bad(path, line, "expected a conversation {\"messages\": [...]} on every line, "
                          "as on the first", rec)
            continue
        items = message_events(rec, path, line)
        for item in items:
            if not started and not isinstance(item, ReadError):
                title = title_of(item.text) if isinstance(item, UserTurn) else ""
                yield SessionStart(SessionInfo("0", NAME, title), line)
                started = True
            yield item
    if checkpoint and pos[0] == pos[2]:
        yield Checkpoint(pos[0], pos[1], (_STATE, started, per_line))


def _is_record(value: Any) -> bool:
    return isinstance(value, dict) and "role" in value or _is_conversation(value)


def read(path: Path | str) -> Iterator[Item]:
    path = Path(path)
    doc = records_or_document(path, _is_record)
    return _jsonl(path) if doc is JSONL else _document(path, doc)


def read_from(path: Path | str, checkpoint: Checkpoint | None = None) -> Iterator[Item]:
    """`read`, plus a Checkpoint at the end of JSONL (documents are re-read whole); or continued
    from a checkpoint."""
    path = Path(path)
    if checkpoint is not None:
        if not (isinstance(checkpoint.state, tuple) and checkpoint.state[:1] == (_STATE,)):
            raise ValueError(f"{path}: not an openai-chat reader checkpoint")
        return _jsonl(path, checkpoint=True, resume=checkpoint)
    doc = records_or_document(path, _is_record)
    return _jsonl(path, checkpoint=True) if doc is JSONL else _document(path, doc)
