"""Cline-family task folders: Cline (saoudrizwan.claude-dev), Roo Code (rooveterinaryinc.roo-cline)
and Kilo Code (kilocode.kilo-code) keep one folder per task in VS Code's globalStorage:
`…/globalStorage/<extension>/tasks/<task id>/` with

- `api_conversation_history.json`: the Anthropic-format messages sent to the model. Tool calls
  are native `tool_use` / `tool_result` blocks (newer versions) or XML tags inside the assistant's
  text (`<read_file><path>src/a.ts</path></read_file>`), answered in the next user message by a
  `[read_file for 'src/a.ts'] Result:` text block and the text blocks after it (or a
  `<function_results>` block). Roo Code adds `ts` (ms since the epoch) to each message.
- `ui_messages.json`: what the panel showed, `{"ts", "type": "say"|"ask", "say"|"ask": kind,
  "text"}`; kinds `tool` / `command` / `use_mcp_server` are calls, `command_output` /
  `mcp_server_response` / `error` their answers, `task` / `user_feedback` the person.
- `task_metadata.json`: files in context and the models used.

A task folder is ONE session (key: the folder name). The API history is what the model saw and
is read when present; `ui_messages.json` stands in for it when it is missing or unreadable, and
otherwise gives the timestamps (`ts`, ms since the epoch → ISO 8601 UTC) through each ui
message's `conversationHistoryIndex`, and the provider retries (`api_req_retried`,
`error_retry`, `api_req_failed`), which are Retry events, never calls.

Person turns: the `<task>`, `<feedback>`, `<answer>` and `<user_message>` texts of user messages;
environment details, tool-result headers, resumption notices and the harness's "[ERROR] You did
not use a tool" nudges are not the person speaking. Record positions are 1-based message indexes
in the file read.

Discovery hands the worker one file per task folder (see `unit_of`): `ui_messages.json`, which
Cline rewrites on every step, so the worker's change detection sees every change of the task;
the reader then reads the whole folder.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from datetime import UTC, datetime
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
    Retry,
    SessionInfo,
    SessionStart,
    UserTurn,
)
from loopledger.formats._common import as_text, bad, content_text, head_text, load_json, str_or_none, title_of

NAME = "cline"
DESCRIPTION = "Cline / Roo Code / Kilo Code task folder (api_conversation_history.json, ui_messages.json)"

API_FILE = "api_conversation_history.json"
UI_FILE = "ui_messages.json"
META_FILE = "task_metadata.json"
# Every file a task folder holds that is part of the task, not a transcript of its own.
MEMBER_FILES = (API_FILE, UI_FILE, META_FILE, "context_history.json", "history_item.json")
# The file that stands for the folder in discovery (rewritten on every step of the task).
UNIT_FILE = UI_FILE

EXTENSIONS = {"saoudrizwan.claude-dev": "cline", "rooveterinaryinc.roo-cline": "roo-code",
              "kilocode.kilo-code": "kilo-code"}

_UI_SNIFF = re.compile(rb'^\s*\[\s*\{[^{}]{0,400}?"type"\s*:\s*"(say|ask)"')
_UI_TS = re.compile(rb'"ts"\s*:\s*\d{10,}')
_UI_KIND = re.compile(rb'"(say|ask)"\s*:\s*"(task|text|api_req_started|user_feedback|tool|command|followup)"')
_API_TASK = re.compile(r"^\[\s*\{[\s\S]{0,2000}?\"role\"\s*:\s*\"user\"[\s\S]{0,4000}?<task>")
_API_MARKS = ("<environment_details>", "] Result:", "<task>\\n")

# Cline writes one tool per message; the tags of every tool the three extensions define.
_XML_TOOLS = frozenset({
    "execute_command", "read_file", "write_to_file", "replace_in_file", "apply_diff", "edit_file",
    "insert_content", "search_and_replace", "search_files", "list_files",
    "list_code_definition_names", "browser_action", "use_mcp_tool", "access_mcp_resource",
    "ask_followup_question", "attempt_completion", "plan_mode_respond", "act_mode_respond",
    "new_task", "switch_mode", "fetch_instructions", "codebase_search", "update_todo_list",
    "load_mcp_documentation", "web_fetch", "condense", "new_rule", "report_bug",
    "run_slash_command", "generate_image", "focus_chain", "summarize_task",
})
_XML_CALL = re.compile(r"<([a-z][a-z0-9_]*)>([\s\S]*?)</\1>")
_XML_PARAM = re.compile(r"<([a-z][a-z0-9_]*)>([\s\S]*?)</\1>")
_RESULT_HEAD = re.compile(r"^\s*\[([\w-]+)(?: for [^\]]*)?\] Result:\s*$")
_NOT_EXECUTED = re.compile(r"^\s*(Tool \[[\w-]+\] was not executed|Skipping tool \[)")
_PERSON_TAGS = re.compile(r"<(task|feedback|answer|user_message)>\s*([\s\S]*?)\s*</\1>")
_ERROR_MARKS = ("The tool execution failed", "<error>", "[ERROR]", "The user denied this operation",
                "Error executing", "Unable to apply diff", "does not exist")
_NOT_PERSON = ("<environment_details>", "[TASK RESUMPTION]", "[ERROR]")

# ui_messages kinds
_UI_RETRY = {"api_req_retried", "error_retry", "api_req_failed", "api_req_retry_delayed"}
_UI_BOOKKEEPING = _UI_RETRY | {"api_req_started", "api_req_finished", "checkpoint_created"}
_UI_OUTPUT = {"command_output": False, "mcp_server_response": False, "error": True,
              "diff_error": True}
_UI_RESULT_TOOLS = {"listFilesTopLevel", "listFilesRecursive", "listCodeDefinitionNames",
                    "searchFiles", "codebaseSearch"}


def sniff(head: bytes) -> bool:
    if _UI_SNIFF.search(head[:4096]) and _UI_TS.search(head) and _UI_KIND.search(head):
        return True
    text = head_text(head)
    return bool(_API_TASK.search(text[:16384])) and any(m in text for m in _API_MARKS)


# ── discovery: a folder is one unit ──────────────────────────────────────────────────────────


def unit_of(path: Path) -> Path | None:
    """The file that stands for `path`'s task folder when `path` is one of its member files
    (ui_messages.json, else api_conversation_history.json when the ui file is missing); None
    when `path` is not a member of a task folder."""
    if path.name not in MEMBER_FILES:
        return None
    folder = path.parent
    for name in (UNIT_FILE, API_FILE):
        if (folder / name).is_file():
            return folder / name
    return None


def default_roots() -> list[Path]:
    """The three extensions' task folders under VS Code's globalStorage on Linux, macOS and
    Windows (VS Code, Insiders, VSCodium, Cursor, Windsurf), whether or not they exist."""
    import os

    bases = [Path("~/.config"), Path("~/Library/Application Support")]
    appdata = os.environ.get("APPDATA")
    bases.append(Path(appdata) if appdata else Path("~/AppData/Roaming"))
    editors = ("Code", "Code - Insiders", "VSCodium", "Cursor", "Windsurf")
    return [(base / editor / "User" / "globalStorage" / ext / "tasks").expanduser()
            for base in bases for editor in editors for ext in EXTENSIONS]


# ── reading ──────────────────────────────────────────────────────────────────────────────────


def _iso(ts: Any) -> str | None:
    """Cline's `ts` (ms since the epoch) as ISO 8601 UTC; strings are kept as they are."""
    if isinstance(ts, bool) or not isinstance(ts, int | float):
        return str_or_none(ts) if isinstance(ts, str) else None
    try:
        return datetime.fromtimestamp(ts / 1000, UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")
    except (OverflowError, OSError, ValueError):
        return None


def _files(path: Path) -> tuple[Path | None, Path | None, Path | None]:
    """(api history, ui messages, metadata) for a folder or any file of one. A file under
    another name (a copy, a download) is read alone: which of the two it is, by content."""
    folder = path if path.is_dir() else path.parent
    if path.is_dir() or path.name in MEMBER_FILES:
        found = [folder / n if (folder / n).is_file() else None for n in (API_FILE, UI_FILE, META_FILE)]
        return found[0], found[1], found[2]
    with open(path, "rb") as fh:
        head = fh.read(64 * 1024)
    if _UI_SNIFF.search(head[:4096]):
        return None, path, None
    return path, None, None


def _agent(path: Path) -> str:
    for part in path.absolute().parts:
        if part.lower() in EXTENSIONS:
            return EXTENSIONS[part.lower()]
    return "cline"


def _model(meta_path: Path | None) -> str | None:
    if meta_path is None:
        return None
    meta = load_json(meta_path)
    usage = meta.get("model_usage") if isinstance(meta, dict) else None
    if isinstance(usage, list):
        for entry in reversed(usage):
            if isinstance(entry, dict) and isinstance(entry.get("model_id"), str):
                return entry["model_id"]
    return None


def read(path: Path | str) -> Iterator[Item]:
    path = Path(path)
    api_path, ui_path, meta_path = _files(path)
    ui: list[tuple[int, dict]] = []
    errors: list[ReadError] = []
    if ui_path is not None:
        doc = load_json(ui_path)
        if isinstance(doc, ReadError):
            errors.append(doc)
        elif not isinstance(doc, list):
            errors.append(bad(ui_path, 1, f"expected a list of ui messages, got {type(doc).__name__}"))
        else:
            for n, msg in enumerate(doc, 1):
                if isinstance(msg, dict):
                    ui.append((n, msg))
                else:
                    errors.append(bad(ui_path, n, f"expected a ui message object, got {type(msg).__name__}", msg))
    api: list[Any] | None = None
    if api_path is not None:
        doc = load_json(api_path)
        if isinstance(doc, ReadError):
            errors.append(doc)
        elif not isinstance(doc, list):
            errors.append(bad(api_path, 1, f"expected a list of messages, got {type(doc).__name__}"))
        else:
            api = doc
    yield from errors
    if api is not None:
        items = _api_items(api_path, api, ui)
    elif ui:
        items = _ui_items(ui_path, ui)
    else:
        return
    items = list(items)
    events = [i for i in items if not isinstance(i, ReadError)]
    if not events:
        yield from items
        return
    folder = path if path.is_dir() else (api_path or ui_path or path).parent
    is_member = path.is_dir() or path.name in MEMBER_FILES
    first_turn = next((e.text for e in events if isinstance(e, UserTurn)), "")
    started = next((t for t in (_iso(m.get("ts")) for _, m in ui) if t), None)
    started = started or next((getattr(e, "ts", None) for e in events if getattr(e, "ts", None)), None)
    info = SessionInfo(folder.name if is_member else path.stem, NAME, title_of(first_turn), _agent(folder),
                       _model(meta_path), started)
    first_line = next(getattr(e, "line", None) for e in events)
    yield SessionStart(info, first_line)
    yield from items


# ── api_conversation_history.json ────────────────────────────────────────────────────────────


def _person(text: str) -> str | None:
    """The person's words in a user text block: the inside of its task / feedback / answer /
    user_message tags; None when the block is the harness talking."""
    found = [m.group(2) for m in _PERSON_TAGS.finditer(text)]
    if found:
        return "\n".join(t for t in found if t.strip()) or None
    return None


def _xml_calls(text: str, line: int) -> list[Call]:
    calls: list[Call] = []
    for m in _XML_CALL.finditer(text):
        name = m.group(1)
        if name not in _XML_TOOLS:
            continue
        args: dict[str, str] = {}
        for p in _XML_PARAM.finditer(m.group(2)):
            args.setdefault(p.group(1), p.group(2).strip("\n"))
        calls.append(Call(f"cline-{line}-{len(calls) + 1}", name, args or None))
    return calls


def _is_error(text: str) -> bool:
    head = text.lstrip()[:300]
    return any(mark in head for mark in _ERROR_MARKS)


def _ts_by_index(ui: list[tuple[int, dict]]) -> dict[int, str]:
    """API message index → a time for it: ui messages carry the index of the last API message
    stored when they were said, so those said after message `idx` lead up to message idx+1; its
    time is the first of them that is not request bookkeeping (an assistant message is stored
    when its stream ends: its text and tool messages say when it came), else the first."""
    first: dict[int, str] = {}
    out: dict[int, str] = {}
    for _, msg in ui:
        idx = msg.get("conversationHistoryIndex")
        ts = _iso(msg.get("ts"))
        if not isinstance(idx, int) or isinstance(idx, bool) or not ts:
            continue
        first.setdefault(idx + 1, ts)
        if idx + 1 not in out and _kind(msg) not in _UI_BOOKKEEPING:
            out[idx + 1] = ts
    return {**first, **out}


def _api_items(path: Path, api: list[Any], ui: list[tuple[int, dict]]) -> Iterator[Item]:
    times = _ts_by_index(ui)
    retries = _ui_retries(ui)
    pending: list[Call] = []  # the XML calls of the last assistant message, unanswered
    last_ts: str | None = None
    for n, msg in enumerate(api, 1):
        if not isinstance(msg, dict):
            yield bad(path, n, f"expected a message object, got {type(msg).__name__}", msg)
            continue
        role, content = msg.get("role"), msg.get("content")
        if content is not None and not isinstance(content, str | list):
            yield bad(path, n, "message content must be a string or a list of blocks, got "
                      f"{type(content).__name__}", msg)
            continue
        ts = _iso(msg.get("ts")) or times.get(n - 1) or last_ts
        last_ts = ts
        while retries and ts is not None and (retries[0].ts or "") <= ts:
            yield retries.pop(0)
        blocks = [{"type": "text", "text": content}] if isinstance(content, str) else (content or [])
        if role == "assistant":
            yield from _assistant(blocks, ts, n, pending)
        elif role == "user":
            yield from _user(blocks, ts, n, pending, first=n == 1)
            pending = []
        elif role != "system":
            yield bad(path, n, f"unknown message role {role!r}", msg)
    yield from retries


def _assistant(blocks: list, ts: str | None, n: int, pending: list[Call]) -> Iterator[Item]:
    texts: list[str] = []
    calls: list[Call] = []
    for b in blocks:
        if not isinstance(b, dict):
            continue
        if b.get("type") == "tool_use":
            calls.append(Call(str_or_none(b.get("id")), as_text(b.get("name")), b.get("input")))
        elif b.get("type") == "text" and isinstance(b.get("text"), str):
            texts.append(b["text"])
    text = "\n".join(t for t in texts if t.strip())
    if not calls:
        calls = _xml_calls(text, n)
        pending.extend(calls)
        if calls:  # the tags are the calls; what is left is what the assistant said
            text = _XML_CALL.sub(lambda m: "" if m.group(1) in _XML_TOOLS else m.group(0), text).strip()
    if calls:
        yield Batch(tuple(calls), text, ts, n)
    elif text.strip():
        yield Prose(text, ts, n)


def _user(blocks: list, ts: str | None, n: int, pending: list[Call], first: bool) -> Iterator[Item]:
    answers: list[Answer] = []
    turns: list[str] = []
    segments: list[list[str]] = []  # XML results: one per "[tool] Result:" header
    loose: list[str] = []  # text that is neither a header's result nor the person
    for b in blocks:
        if not isinstance(b, dict):
            continue
        if b.get("type") == "tool_result":
            body = content_text(b.get("content"))
            answers.append(Answer(str_or_none(b.get("tool_use_id")), body,
                                  bool(b.get("is_error")) or _is_error(body), ts))
            person = _person(body)
            if person:
                turns.append(person)
            continue
        text = content_text([b])
        if not text.strip() or text.lstrip().startswith("<environment_details>"):
            continue
        if _RESULT_HEAD.match(text) or _NOT_EXECUTED.match(text):
            segments.append([] if _RESULT_HEAD.match(text) else [text])
            continue
        if text.lstrip().startswith("<function_results>"):
            segments.append([text.strip().removeprefix("<function_results>").removesuffix("</function_results>").strip("\n")])
            continue
        person = _person(text)
        if segments:
            segments[-1].append(text)  # feedback given on a result is part of that result too
        if person:
            turns.append(person)
        elif segments:
            continue
        elif first and not text.lstrip().startswith(_NOT_PERSON):
            turns.append(text)
        else:
            loose.append(text)
    if pending and not segments and loose:
        segments = [loose]
    for call, seg in zip(pending, segments, strict=False):
        body = "\n".join(seg) or "(tool did not return anything)"
        answers.append(Answer(call.id, body, _is_error(body), ts))
    if answers:
        yield Answers(tuple(answers), n)
    for turn in turns:
        yield UserTurn(turn, ts, n)


# ── ui_messages.json ─────────────────────────────────────────────────────────────────────────


def _kind(msg: dict) -> str | None:
    kind = msg.get(msg.get("type")) if msg.get("type") in ("say", "ask") else None
    return kind if isinstance(kind, str) else None


def _ui_retries(ui: list[tuple[int, dict]]) -> list[Retry]:
    return [_retry(m, None) for _, m in ui if _kind(m) in _UI_RETRY and not m.get("partial")]


def _retry(msg: dict, line: int | None) -> Retry:
    detail = as_text(msg.get("text")).strip()
    return Retry(f"{_kind(msg)}: {detail}" if detail else str(_kind(msg)), _iso(msg.get("ts")), line)


def _json_text(text: Any) -> dict:
    if isinstance(text, str) and text.lstrip().startswith("{"):
        try:
            import orjson

            value = orjson.loads(text)
        except ValueError:
            return {}
        return value if isinstance(value, dict) else {}
    return {}


def _ui_items(path: Path, ui: list[tuple[int, dict]]) -> Iterator[Item]:
    """The session from the panel's messages alone (no API history)."""
    open_call: Call | None = None
    output: list[str] = []
    is_error = False

    def close() -> list[Item]:
        nonlocal open_call, output, is_error
        out: list[Item] = []
        if open_call is not None and output:
            out.append(Answers((Answer(open_call.id, "\n".join(output), is_error, None),), last_line))
        open_call, output, is_error = None, [], False
        return out

    last_line = 0
    for n, msg in ui:
        if msg.get("partial"):
            continue
        kind, text, ts = _kind(msg), msg.get("text"), _iso(msg.get("ts"))
        last_line = n
        if kind in _UI_OUTPUT and open_call is not None:
            output.append(as_text(text))
            is_error = is_error or _UI_OUTPUT[kind]
            continue
        if kind in _UI_RETRY:
            yield _retry(msg, n)
            continue
        if kind in ("task", "user_feedback"):
            yield from close()
            if isinstance(text, str) and text.strip():
                yield UserTurn(text, ts, n)
            continue
        call: Call | None = None
        answer: str | None = None
        if kind == "command":
            command = as_text(text).removesuffix("REQ_APP").strip()
            call = Call(None, "execute_command", {"command": command})
        elif kind == "tool":
            spec = _json_text(text)
            tool = str_or_none(spec.get("tool")) or "tool"
            args = {k: v for k, v in spec.items() if k != "tool" and (k != "content" or tool not in _UI_RESULT_TOOLS)}
            if tool == "readFile":
                args.pop("content", None)  # the absolute path again, not an argument
            call = Call(None, tool, args or None)
            if tool in _UI_RESULT_TOOLS and "content" in spec:
                answer = as_text(spec["content"])
        elif kind == "use_mcp_server":
            spec = _json_text(text)
            name = str_or_none(spec.get("toolName") or spec.get("uri")) or "use_mcp_server"
            call = Call(None, f"mcp:{spec.get('serverName', '')}:{name}",
                        {k: v for k, v in spec.items() if k in ("arguments", "uri")} or None)
        if call is not None:
            # Cline either asks for approval or says it ran (auto-approved): one message a call
            yield from close()
            call = Call(f"cline-ui-{n}", call.name, call.args)
            open_call = call
            yield Batch((call,), "", ts, n)
            if answer is not None:
                output.append(answer)
            continue
        if kind in ("text", "completion_result", "followup") and isinstance(text, str) and text.strip():
            yield from close()
            body = _json_text(text).get("question") if kind == "followup" else None
            yield Prose(str_or_none(body) or text, ts, n)
    yield from close()
