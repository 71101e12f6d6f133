"""Write sample_data/ deterministically: realistic sessions in every format LoopLedger reads.

    python sample_data/generate.py            rewrite the transcript files
    python sample_data/generate.py --table    print the README tables computed by the real pipeline
    python sample_data/generate.py --readme   …and write them into README.md (between the markers)

Each session is written once as a format-neutral script (user turns, prose, batches of calls with
their answers) and rendered into the on-disk shape of one agent's format, copied from real files
(../shared/corpus) or the format's public source. Ids and timestamps derive from the session name,
so a rerun writes byte-identical files.
"""

from __future__ import annotations

import hashlib
import json
import random
import sys
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent


@dataclass(frozen=True)
class C:
    """One tool call with the answer it got back."""

    name: str
    args: Any
    answer: str
    error: bool = False


@dataclass
class Script:
    """A format-neutral session: ("user", text) · ("prose", text) · ("batch", text, [C, ...])."""

    name: str
    start: str = "2026-03-02T09:14:05"
    events: list[tuple] = field(default_factory=list)

    def user(self, text: str) -> Script:
        self.events.append(("user", text))
        return self

    def say(self, text: str) -> Script:
        self.events.append(("prose", text))
        return self

    def calls(self, *calls: C, text: str = "") -> Script:
        self.events.append(("batch", text, list(calls)))
        return self


class Ids:
    """Stable ids and a clock for one session: the same name always gives the same file."""

    def __init__(self, name: str, start: str, step_s: float = 4.0):
        self.name = name
        self.n = 0
        self.t = datetime.fromisoformat(start).replace(tzinfo=UTC)
        self.step = timedelta(seconds=step_s)

    def hex(self, k: int = 24) -> str:
        self.n += 1
        return hashlib.sha256(f"{self.name}/{self.n}".encode()).hexdigest()[:k]

    def uuid(self) -> str:
        h = self.hex(32)
        return f"{h[:8]}-{h[8:12]}-4{h[13:16]}-a{h[17:20]}-{h[20:32]}"

    def tick(self, seconds: float | None = None) -> str:
        self.t += timedelta(seconds=seconds) if seconds is not None else self.step
        return self.t.strftime("%Y-%m-%dT%H:%M:%S.") + f"{self.t.microsecond // 1000:03d}Z"


def dumps(obj: Any) -> str:
    return json.dumps(obj, ensure_ascii=False, separators=(",", ":"))


def write_json(path: Path, obj: Any, indent: int | None = 1) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    text = json.dumps(obj, ensure_ascii=False, indent=indent,
                      separators=(",", ":") if indent is None else None)
    path.write_text(text + "\n", encoding="utf-8")


def write_jsonl(path: Path, rows: list[Any]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(dumps(r) + "\n" for r in rows), encoding="utf-8")


# ---------------------------------------------------------------------------------------------
# Renderers: one per on-disk format
# ---------------------------------------------------------------------------------------------


def otlp_requests(s: Script, *, conversation: str, service: str, agent: str, model: str) -> list[dict]:
    """OTLP JSON as the Collector's file exporter writes it: one ExportTraceServiceRequest per
    export batch. An OpenAI-Agents-style app traces each user turn as one trace: an
    `invoke_agent` span (carrying gen_ai.conversation.id), `chat` spans and `execute_tool` spans.
    Spans are exported as they end, so children come before their parent."""
    ids = Ids(s.name, s.start, step_s=3.0)

    def ns(ts: str) -> str:
        dt = datetime.strptime(ts, "%Y-%m-%dT%H:%M:%S.%fZ").replace(tzinfo=UTC)
        return str(int(dt.timestamp()) * 1_000_000_000 + dt.microsecond * 1000)

    def attr(k: str, v: Any) -> dict:
        return {"key": k, "value": {"intValue": str(v)} if isinstance(v, int) else {"stringValue": v}}

    def span(trace: str, parent: str | None, name: str, start: str, end: str, attrs: dict,
             error: str | None = None) -> dict:
        out = {"traceId": trace, "spanId": ids.hex(16), "name": name, "kind": 1,
               "startTimeUnixNano": ns(start), "endTimeUnixNano": ns(end),
               "attributes": [attr(k, v) for k, v in attrs.items()], "status": {}}
        if parent:
            out["parentSpanId"] = parent
        if error:
            out["status"] = {"code": 2, "message": error}
        return out

    resource = {"attributes": [attr("service.name", service), attr("telemetry.sdk.language", "python"),
                               attr("telemetry.sdk.name", "opentelemetry")]}
    requests: list[dict] = []
    history: list[dict] = []
    turn: list[tuple] = []
    turns: list[list[tuple]] = []
    for ev in s.events:
        if ev[0] == "user" and turn:
            turns.append(turn)
            turn = []
        turn.append(ev)
    if turn:
        turns.append(turn)
    for events in turns:
        trace = ids.hex(32)
        agent_id = ids.hex(16)
        agent_start = ids.tick()
        children: list[dict] = []
        for ev in events:
            if ev[0] == "user":
                history.append({"role": "user", "parts": [{"type": "text", "content": ev[1]}]})
                continue
            start = ids.tick()
            chat = span(trace, agent_id, f"chat {model}", start, ids.tick(1.5), {
                "gen_ai.operation.name": "chat", "gen_ai.system": "openai", "gen_ai.request.model": model,
                "gen_ai.input.messages": dumps(history)})
            chat["spanId"] = ids.hex(16)
            children.append(chat)
            if ev[0] == "prose":
                history.append({"role": "assistant", "parts": [{"type": "text", "content": ev[1]}]})
                continue
            for c in ev[2]:
                call_id = "call_" + ids.hex(24)
                t0 = ids.tick()
                children.append(span(trace, agent_id, f"execute_tool {c.name}", t0, ids.tick(2.0), {
                    "gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": c.name,
                    "gen_ai.tool.call.id": call_id, "gen_ai.tool.type": "function",
                    "gen_ai.tool.call.arguments": dumps(c.args), "gen_ai.tool.call.result": c.answer},
                    error=c.answer.splitlines()[0][:120] if c.error else None))
                history.append({"role": "assistant", "parts": [{"type": "tool_call", "id": call_id,
                                                                "name": c.name, "arguments": c.args}]})
                history.append({"role": "tool", "parts": [{"type": "tool_call_response", "id": call_id,
                                                           "response": c.answer}]})
        root = span(trace, None, f"invoke_agent {agent}", agent_start, ids.tick(), {
            "gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": agent,
            "gen_ai.conversation.id": conversation, "gen_ai.system": "openai"})
        root["spanId"] = agent_id
        # The batch processor exports up to 512 spans as they end: tools and chats, then the agent.
        requests.append({"resourceSpans": [{"resource": resource, "scopeSpans": [
            {"scope": {"name": "openai.agents", "version": "0.6.1"}, "spans": children + [root]}]}]})
    return requests


def openai_chat_messages(s: Script, system: str) -> list[dict]:
    ids = Ids(s.name, s.start)
    out: list[dict] = [{"role": "system", "content": system}]
    for ev in s.events:
        if ev[0] == "user":
            out.append({"role": "user", "content": ev[1]})
        elif ev[0] == "prose":
            out.append({"role": "assistant", "content": ev[1]})
        else:
            _, text, calls = ev
            tcs = [{"id": "call_" + ids.hex(24), "type": "function",
                    "function": {"name": c.name, "arguments": json.dumps(c.args)}} for c in calls]
            out.append({"role": "assistant", "content": text or None, "tool_calls": tcs})
            for tc, c in zip(tcs, calls, strict=True):
                out.append({"role": "tool", "tool_call_id": tc["id"], "name": c.name,
                            "content": c.answer})
    return out


def tau2_results(sims: list[tuple[Script, dict, dict[int, list[C]]]], *, agent_llm: str, domain: str) -> dict:
    """A tau2-bench results file (tau2.data_model.simulation.Results): `sims` are (script, the
    simulation's own fields, user-side calls by the index of the user event that makes them: the
    user simulator's own tools, telecom's phone actions)."""
    out = {"timestamp": sims[0][0].start, "info": {
        "git_commit": "3c2a9b1e0d4f5a6b7c8d9e0f1a2b3c4d5e6f7a8b", "num_trials": 1, "max_steps": 200,
        "max_errors": 10, "user_info": {"implementation": "user_simulator", "llm": "gpt-4.1-2025-04-14",
                                        "llm_args": {"temperature": 0.0}},
        "agent_info": {"implementation": "llm_agent", "llm": agent_llm, "llm_args": {"temperature": 0.0}},
        "environment_info": {"domain_name": domain, "policy": f"# {domain.title()} agent policy",
                             "tool_defs": None}, "seed": 300},
        "tasks": [], "simulations": []}
    for script, fields, user_calls in sims:
        ids = Ids(script.name, script.start)
        msgs = tau2_messages(script, ids, user_calls)
        out["tasks"].append({"id": fields["task_id"]})
        out["simulations"].append({"id": ids.uuid(), **fields, "start_time": script.start,
                                   "messages": msgs, "seed": 626729})
    return out


def tau2_messages(script: Script, ids: Ids, user_calls: dict[int, list[C]]) -> list[dict]:
    """One simulation's `messages` (tau2.data_model.message): tool calls with dict arguments and a
    `requestor`, each answered by a `tool` message with its `error` flag. Times as tau2 writes them
    (`datetime.now().isoformat()`: no zone)."""
    msgs: list[dict] = []

    def at(seconds: float | None = None) -> str:
        return ids.tick(seconds).removesuffix("Z")

    def answer(tc: dict, c: C, who: str) -> None:
        msgs.append({"id": tc["id"], "role": "tool", "content": c.answer, "requestor": who,
                     "error": c.error, "turn_idx": len(msgs), "timestamp": at(0.2)})

    for n, ev in enumerate(script.events):
        if ev[0] == "user":
            tcs = [{"id": "call_" + ids.hex(24), "name": c.name, "arguments": c.args, "requestor": "user"}
                   for c in user_calls.get(n, [])]
            msgs.append({"role": "user", "content": ev[1] or None, "tool_calls": tcs or None,
                         "turn_idx": len(msgs), "timestamp": at()})
            for tc, c in zip(tcs, user_calls.get(n, []), strict=True):
                answer(tc, c, "user")
        elif ev[0] == "prose":
            msgs.append({"role": "assistant", "content": ev[1], "tool_calls": None,
                         "turn_idx": len(msgs), "timestamp": at()})
        else:
            _, text, calls = ev
            tcs = [{"id": "call_" + ids.hex(24), "name": c.name, "arguments": c.args,
                    "requestor": "assistant"} for c in calls]
            msgs.append({"role": "assistant", "content": text or None, "tool_calls": tcs,
                         "turn_idx": len(msgs), "timestamp": at(),
                         "usage": {"completion_tokens": 40, "prompt_tokens": 2100 + 90 * len(msgs)}})
            for tc, c in zip(tcs, calls, strict=True):
                answer(tc, c, "assistant")
    return msgs


def openai_responses_items(s: Script) -> list[dict]:
    ids = Ids(s.name, s.start)
    out: list[dict] = []
    for ev in s.events:
        if ev[0] == "user":
            out.append({"type": "message", "role": "user",
                        "content": [{"type": "input_text", "text": ev[1]}]})
        elif ev[0] == "prose":
            out.append({"type": "message", "id": "msg_" + ids.hex(32), "role": "assistant",
                        "status": "completed",
                        "content": [{"type": "output_text", "text": ev[1], "annotations": []}]})
        else:
            _, text, calls = ev
            # The model's plan rides in the reasoning summary: an assistant message item here
            # would be a separate prose turn to a reader of the flat item list.
            summary = [{"type": "summary_text", "text": text}] if text else []
            out.append({"type": "reasoning", "id": "rs_" + ids.hex(32), "summary": summary})
            cids = []
            for c in calls:
                cid = "call_" + ids.hex(24)
                cids.append(cid)
                out.append({"type": "function_call", "id": "fc_" + ids.hex(32), "call_id": cid,
                            "name": c.name, "arguments": json.dumps(c.args),
                            "status": "completed"})
            for cid, c in zip(cids, calls, strict=True):
                out.append({"type": "function_call_output", "call_id": cid, "output": c.answer})
    return out


def anthropic_request(s: Script, system: str, model: str) -> dict:
    ids = Ids(s.name, s.start)
    msgs: list[dict] = []
    for ev in s.events:
        if ev[0] == "user":
            msgs.append({"role": "user", "content": ev[1]})
        elif ev[0] == "prose":
            msgs.append({"role": "assistant", "content": [{"type": "text", "text": ev[1]}]})
        else:
            _, text, calls = ev
            blocks: list[dict] = [{"type": "text", "text": text}] if text else []
            uses = [{"type": "tool_use", "id": "toolu_01" + ids.hex(22), "name": c.name,
                     "input": c.args} for c in calls]
            msgs.append({"role": "assistant", "content": blocks + uses})
            msgs.append({"role": "user", "content": [
                {"type": "tool_result", "tool_use_id": u["id"],
                 "content": [{"type": "text", "text": c.answer}], "is_error": c.error}
                for u, c in zip(uses, calls, strict=True)]})
    return {"model": model, "max_tokens": 4096, "system": system, "messages": msgs}


CC_VERSION = "2.1.38"


def claude_code_lines(s: Script, *, session_id: str, cwd: str, branch: str, model: str,
                      agent_id: str | None = None) -> list[dict]:
    """Claude Code session JSONL: one line per content block, results as user lines."""
    ids = Ids(s.name, s.start, step_s=3.0)
    side = agent_id is not None
    base = {"isSidechain": side, "userType": "external", "cwd": cwd, "sessionId": session_id,
            "version": CC_VERSION, "gitBranch": branch}
    if side:
        base["agentId"] = agent_id
    out: list[dict] = []
    parent: str | None = None

    def line(kind: str, **kw: Any) -> dict:
        nonlocal parent
        uid = ids.uuid()
        row = {"parentUuid": parent, **base, "type": kind, **kw, "uuid": uid,
               "timestamp": ids.tick()}
        parent = uid
        out.append(row)
        return row

    def assistant(block: dict, msg_id: str, req: str, stop: str | None) -> dict:
        message = {"model": model, "id": msg_id, "type": "message", "role": "assistant",
                   "content": [block], "stop_reason": stop, "stop_sequence": None,
                   "usage": {"input_tokens": 4, "cache_creation_input_tokens": 312,
                             "cache_read_input_tokens": 18840, "output_tokens": 96,
                             "service_tier": "standard"}}
        return line("assistant", message=message, requestId=req)

    if not side:
        out.append({"type": "file-history-snapshot", "messageId": ids.uuid(),
                    "snapshot": {"messageId": "", "trackedFileBackups": {},
                                 "timestamp": ids.tick(0)}, "isSnapshotUpdate": False})
    for ev in s.events:
        if ev[0] == "user":
            line("user", message={"role": "user", "content": ev[1]},
                 **({} if side else {"permissionMode": "default"}))
        elif ev[0] == "prose":
            assistant({"type": "text", "text": ev[1]}, "msg_01" + ids.hex(22),
                      "req_011C" + ids.hex(20), "end_turn")
        else:
            _, text, calls = ev
            msg_id, req = "msg_01" + ids.hex(22), "req_011C" + ids.hex(20)
            if text:
                assistant({"type": "text", "text": text}, msg_id, req, None)
            uses = []
            for c in calls:
                u = {"type": "tool_use", "id": "toolu_01" + ids.hex(22), "name": c.name,
                     "input": c.args}
                a = assistant(u, msg_id, req, "tool_use" if c is calls[-1] else None)
                uses.append((u, a["uuid"]))
            for (u, src), c in zip(uses, calls, strict=True):
                extra: dict[str, Any] = {}
                if c.name == "Bash":
                    extra["toolUseResult"] = {"stdout": "" if c.error else c.answer,
                                              "stderr": c.answer if c.error else "",
                                              "interrupted": False, "isImage": False}
                line("user", message={"role": "user", "content": [
                    {"tool_use_id": u["id"], "type": "tool_result", "content": c.answer,
                     "is_error": c.error}]}, **extra, sourceToolAssistantUUID=src)
    return out


CLINE_ENV = ("<environment_details>\n# VSCode Visible Files\n{file}\n\n# VSCode Open Tabs\n{file}\n\n"
             "# Current Time\n{time}\n\n# Current Mode\nACT MODE\n</environment_details>")
# Cline's ui names for its tools (ClineSayTool.tool); commands and MCP have their own kinds.
CLINE_UI_TOOL = {"read_file": "readFile", "replace_in_file": "editedExistingFile",
                 "write_to_file": "newFileCreated", "list_files": "listFilesRecursive",
                 "search_files": "searchFiles"}


def cline_task(s: Script, *, model: str, retries_before: dict[int, int] | None = None
               ) -> tuple[list[dict], list[dict], dict]:
    """A Cline task folder, older XML tool protocol (one tool per message): the API history
    (assistant text with <tool> tags, `[tool for 'x'] Result:` answers, environment details),
    the panel's ui messages (ts in ms, conversationHistoryIndex, api_req_retried before the
    requests in `retries_before`: request number → retries) and task_metadata.json."""
    ids = Ids(s.name, s.start, step_s=2.5)
    retries_before = retries_before or {}
    api: list[dict] = []
    ui: list[dict] = []
    requests = 0

    def ms() -> int:
        ids.tick()
        return int(ids.t.timestamp() * 1000)

    def say(kind: str, text: str | None = None, ask: bool = False, **kw: Any) -> None:
        msg = {"ts": ms(), "type": "ask" if ask else "say", ("ask" if ask else "say"): kind}
        if text is not None:
            msg["text"] = text
        ui.append({**msg, **kw, "conversationHistoryIndex": len(api) - 1})

    def request() -> None:
        nonlocal requests
        requests += 1
        say("api_req_started", dumps({"request": "…", "tokensIn": 8120 + 37 * requests,
                                      "tokensOut": 212, "cacheReads": 7168, "cost": 0.0091}))
        for _ in range(retries_before.get(requests, 0)):
            say("api_req_retried")

    def env(path: str) -> dict:
        return {"type": "text", "text": CLINE_ENV.format(file=path, time=ids.t.strftime("%m/%d/%Y, %I:%M:%S %p (UTC)"))}

    pending: list[dict] = []
    last_file = "README.md"
    for ev in s.events:
        if ev[0] == "user":
            if not api:
                say("task", ev[1])
                api.append({"role": "user", "content": [{"type": "text", "text": f"<task>\n{ev[1]}\n</task>"}, env(last_file)]})
            else:
                say("user_feedback", ev[1])
                pending.append({"type": "text", "text": f"<feedback>\n{ev[1]}\n</feedback>"})
                api.append({"role": "user", "content": [*pending, env(last_file)]})
                pending = []
            request()
        elif ev[0] == "prose":
            say("completion_result", ev[1])
            api.append({"role": "assistant", "content": [{"type": "text", "text": f"<attempt_completion>\n<result>\n{ev[1]}\n</result>\n</attempt_completion>"}]})
        else:
            _, text, calls = ev
            (c,) = calls  # Cline runs one tool per message
            params = "".join(f"<{k}>{v}</{k}>\n" for k, v in c.args.items())
            body = (f"<thinking>\n{text}\n</thinking>\n\n" if text else "") + f"<{c.name}>\n{params}</{c.name}>"
            if text:
                say("text", text)
            api.append({"role": "assistant", "content": [{"type": "text", "text": body}]})
            subject = c.args.get("path") or c.args.get("command") or ""
            last_file = c.args.get("path", last_file)
            if c.name == "execute_command":
                say("command", c.args["command"])
                say("command_output", c.answer)
            else:
                spec = {"tool": CLINE_UI_TOOL.get(c.name, c.name), **{k: v for k, v in c.args.items() if k != "diff"}}
                say("tool", dumps(spec))
                if c.error:
                    say("error", c.answer)
            answer = (f"The tool execution failed with the following error:\n<error>\n{c.answer}\n</error>"
                      if c.error else c.answer)
            api.append({"role": "user", "content": [
                {"type": "text", "text": f"[{c.name} for '{subject}'] Result:"},
                {"type": "text", "text": answer}, env(last_file)]})
            request()
    meta = {"files_in_context": [{"path": last_file, "record_state": "active", "record_source": "cline_edited",
                                  "cline_read_date": ui[0]["ts"], "cline_edit_date": ui[-1]["ts"], "user_edit_date": None}],
            "model_usage": [{"ts": ui[0]["ts"], "model_id": model, "model_provider_id": "anthropic", "mode": "act"}]}
    return api, ui, meta


def claude_export_md(s: Script, *, session_id: str, project: str) -> str:
    """A Claude Code session exported to markdown ("# Claude Session Export"): one section per
    transcript line, bodies as JSON arrays of content blocks, local US-style timestamps."""
    ids = Ids(s.name, s.start, step_s=3.0)
    sections: list[tuple[str, str, str]] = []

    def stamp() -> str:
        ids.tick()
        return ids.t.strftime("%-m/%-d/%Y, %-I:%M:%S %p")

    def blocks(b: list[dict]) -> str:
        return json.dumps(b, indent=2, ensure_ascii=False)

    for ev in s.events:
        if ev[0] == "user":
            sections.append(("User", stamp(), ev[1]))
        elif ev[0] == "prose":
            sections.append(("Assistant", stamp(), blocks([{"type": "text", "text": ev[1]}])))
        else:
            _, text, calls = ev
            if text:
                sections.append(("Assistant", stamp(), blocks([{"type": "text", "text": text}])))
            uses = []
            for c in calls:
                u = {"type": "tool_use", "id": "toolu_01" + ids.hex(22), "name": c.name, "input": c.args}
                uses.append(u)
                sections.append(("Assistant", stamp(), blocks([u])))
            for u, c in zip(uses, calls, strict=True):
                sections.append(("User", stamp(), blocks([{"tool_use_id": u["id"], "type": "tool_result",
                                                           "content": c.answer, "is_error": c.error}])))
    users = sum(1 for r, _, _ in sections if r == "User")
    head = ("# Claude Session Export\n\n## Session Information\n\n"
            f"- **Session ID**: `{session_id}`\n- **Export Mode**: Full Conversation\n"
            f"- **Total Messages**: {len(sections)} ({users} user, {len(sections) - users} assistant)\n"
            f"- **First Message**: {sections[0][1]}\n- **Last Message**: {sections[-1][1]}\n"
            f"- **Project Path**: `{project}`\n\n---\n\n## Conversation\n\n")
    return head + "".join(f"### {r}\n> {t}\n\n{b}\n\n---\n\n" for r, t, b in sections)


def opencode_export(s: Script, *, session_id: str, project_id: str, directory: str,
                    provider: str, model: str) -> dict:
    """`opencode export` (packages/opencode/src/cli/cmd/export.ts): {info, messages: [{info,
    parts}]}; one assistant message per user turn, one step (step-start … step-finish) per batch
    or prose turn; a C named `invalid` is a call OpenCode could not repair (tool/invalid.ts)."""
    ids = Ids(s.name, s.start)
    t0 = datetime.fromisoformat(s.start).replace(tzinfo=UTC)

    def ms() -> int:
        ids.tick()
        return int((ids.t - t0).total_seconds() * 1000) + int(t0.timestamp() * 1000)

    def oid(prefix: str) -> str:
        return f"{prefix}_{ids.hex(26)}"

    created = int(t0.timestamp() * 1000)
    messages: list[dict] = []
    last_user = ""
    assistant: dict | None = None

    def part(msg: dict, kind: str, **kw: Any) -> None:
        msg["parts"].append({"id": oid("prt"), "sessionID": session_id, "messageID": msg["info"]["id"],
                             "type": kind, **kw})

    for ev in s.events:
        if ev[0] == "user":
            assistant = None
            msg = {"info": {"id": oid("msg"), "sessionID": session_id, "role": "user", "time": {"created": ms()},
                            "agent": "build", "model": {"providerID": provider, "modelID": model}}, "parts": []}
            part(msg, "text", text=ev[1])
            last_user = msg["info"]["id"]
            messages.append(msg)
            continue
        if assistant is None:
            assistant = {"info": {"id": oid("msg"), "sessionID": session_id, "role": "assistant",
                                  "time": {"created": ms()}, "parentID": last_user, "modelID": model,
                                  "providerID": provider, "mode": "build", "agent": "build",
                                  "path": {"cwd": directory, "root": directory}, "cost": 0.0,
                                  "tokens": {"input": 0, "output": 0, "reasoning": 0, "cache": {"read": 0, "write": 0}}},
                         "parts": []}
            messages.append(assistant)
        part(assistant, "step-start")
        text = ev[1]
        if text:
            start = ms()
            part(assistant, "text", text=text, time={"start": start, "end": start + 300})
        for c in (ev[2] if ev[0] == "batch" else []):
            start = ms()
            if c.name == "invalid":
                state = {"status": "completed", "input": c.args, "output": c.answer, "title": "Invalid Tool",
                         "metadata": {}, "time": {"start": start, "end": start + 1}}
            elif c.error:
                state = {"status": "error", "input": c.args, "error": c.answer, "metadata": {},
                         "time": {"start": start, "end": start + 900}}
            else:
                state = {"status": "completed", "input": c.args, "output": c.answer, "title": c.name,
                         "metadata": {}, "time": {"start": start, "end": start + 900}}
            part(assistant, "tool", callID=f"toolu_{ids.hex(24)}", tool=c.name, state=state)
        part(assistant, "step-finish", reason="tool-calls" if ev[0] == "batch" else "stop", cost=0.004,
             tokens={"input": 1800, "output": 120, "reasoning": 0, "cache": {"read": 0, "write": 0}})
        assistant["info"]["time"]["completed"] = ms()
    info = {"id": session_id, "slug": s.name, "version": "1.0.134", "projectID": project_id, "directory": directory,
            "title": next((e[1][:60] for e in s.events if e[0] == "user"), s.name),
            "time": {"created": created, "updated": ms()}}
    return {"info": info, "messages": messages, "todos": []}


def openhands_v1_conversation(s: Script, *, conversation_id: str, model: str) -> tuple[dict, list[dict]]:
    """An OpenHands V1 (software-agent-sdk) conversation folder: base_state.json and one event
    per file (SystemPromptEvent, MessageEvent, ActionEvent with tool_call, ObservationEvent)."""
    ids = Ids(s.name, s.start, step_s=2.0)
    state = {"id": conversation_id, "agent": {"kind": "Agent", "llm": {"model": model, "usage_id": "agent"},
                                              "tools": [{"name": "terminal"}, {"name": "file_editor"}]},
             "workspace": {"kind": "LocalWorkspace", "working_dir": "/workspace/project"},
             "max_iterations": 500, "stuck_detection": True, "execution_status": "finished",
             "confirmation_policy": {"kind": "NeverConfirm"}}
    events: list[dict] = []

    def event(kind: str, source: str, **kw: Any) -> dict:
        ids.tick()
        row = {"id": ids.uuid(), "timestamp": ids.t.replace(tzinfo=None).isoformat(), "source": source, "kind": kind, **kw}
        events.append(row)
        return row

    event("SystemPromptEvent", "agent", system_prompt={"type": "text", "text": "You are OpenHands agent, a helpful AI assistant."},
          tools=[{"title": "terminal"}, {"title": "file_editor"}])
    for ev in s.events:
        if ev[0] == "user":
            event("MessageEvent", "user", llm_message={"role": "user", "content": [{"type": "text", "text": ev[1]}]})
        elif ev[0] == "prose":
            event("MessageEvent", "agent", llm_message={"role": "assistant", "content": [{"type": "text", "text": ev[1]}]})
        else:
            _, text, calls = ev
            rid = "chatcmpl-" + ids.hex(20)
            actions = []
            for n, c in enumerate(calls):
                cid = "toolu_01" + ids.hex(22)
                kind = "TerminalAction" if c.name == "terminal" else "FileEditorAction"
                actions.append((cid, c, event("ActionEvent", "agent",
                    thought=[{"type": "text", "text": text}] if text and n == 0 else [],
                    action={"kind": kind, **c.args}, tool_name=c.name, tool_call_id=cid,
                    tool_call={"id": cid, "name": c.name, "arguments": json.dumps(c.args), "origin": "completion"},
                    llm_response_id=rid, security_risk="LOW")))
            for cid, c, act in actions:
                obs = {"kind": "TerminalObservation" if c.name == "terminal" else "FileEditorObservation",
                       "content": [{"type": "text", "text": c.answer}], "is_error": c.error}
                if c.name == "terminal":
                    obs["exit_code"] = 1 if c.error else 0
                event("ObservationEvent", "environment", tool_name=c.name, tool_call_id=cid, action_id=act["id"], observation=obs)
    return state, events


def codex_lines(s: Script, *, session_id: str, cwd: str, model: str) -> list[dict]:
    """Codex CLI rollout, current envelope (cli 0.58): session_meta, turn_context, items, events."""
    ids = Ids(s.name, s.start, step_s=2.5)
    out: list[dict] = []

    def emit(kind: str, payload: dict) -> None:
        out.append({"timestamp": ids.tick(), "type": kind, "payload": payload})

    emit("session_meta", {"id": session_id, "timestamp": ids.tick(0), "cwd": cwd,
                          "originator": "codex_cli_rs", "cli_version": "0.58.0",
                          "instructions": None, "source": "cli", "model_provider": "openai",
                          "git": {"commit_hash": ids.hex(40), "branch": "main",
                                  "repository_url": "git@github.com:harbor-labs/invoicer.git"}})
    emit("response_item", {"type": "message", "role": "user", "content": [
        {"type": "input_text", "text": f"<environment_context>\n  <cwd>{cwd}</cwd>\n"
         "  <approval_policy>on-request</approval_policy>\n"
         "  <sandbox_mode>workspace-write</sandbox_mode>\n"
         "  <network_access>restricted</network_access>\n  <shell>bash</shell>\n"
         "</environment_context>"}]})
    tokens = 9800
    for ev in s.events:
        if ev[0] == "user":
            emit("response_item", {"type": "message", "role": "user",
                                   "content": [{"type": "input_text", "text": ev[1]}]})
            emit("event_msg", {"type": "user_message", "message": ev[1], "images": []})
            emit("turn_context", {"cwd": cwd, "approval_policy": "on-request",
                                  "sandbox_policy": {"mode": "workspace-write",
                                                     "network_access": False},
                                  "model": model, "effort": "medium", "summary": "auto"})
        elif ev[0] == "prose":
            emit("event_msg", {"type": "agent_message", "message": ev[1]})
            emit("response_item", {"type": "message", "role": "assistant",
                                   "content": [{"type": "output_text", "text": ev[1]}]})
        else:
            _, text, calls = ev
            if text:
                emit("event_msg", {"type": "agent_reasoning", "text": f"**{text}**"})
                emit("response_item", {"type": "reasoning",
                                       "summary": [{"type": "summary_text", "text": f"**{text}**"}],
                                       "content": None, "encrypted_content": "gAAAAB" + ids.hex(40)})
            for c in calls:
                cid = "call_" + ids.hex(24)
                if c.name == "apply_patch":
                    emit("response_item", {"type": "custom_tool_call", "status": "completed",
                                           "call_id": cid, "name": "apply_patch",
                                           "input": c.args["patch"]})
                    emit("response_item", {"type": "custom_tool_call_output", "call_id": cid,
                                           "output": dumps({"output": c.answer, "metadata": {
                                               "exit_code": 1 if c.error else 0,
                                               "duration_seconds": 0.0}})})
                else:
                    emit("response_item", {"type": "function_call", "name": c.name,
                                           "arguments": dumps(c.args), "call_id": cid})
                    emit("response_item", {"type": "function_call_output", "call_id": cid,
                                           "output": dumps({"output": c.answer, "metadata": {
                                               "exit_code": 1 if c.error else 0,
                                               "duration_seconds": 1.4}})})
            tokens += 1800
            emit("event_msg", {"type": "token_count", "info": {
                "total_token_usage": {"input_tokens": tokens, "cached_input_tokens": tokens - 2100,
                                      "output_tokens": 220, "reasoning_output_tokens": 64,
                                      "total_tokens": tokens + 220},
                "model_context_window": 258400}, "rate_limits": None})
    return out


def codex_legacy_lines(s: Script, *, session_id: str, cwd: str) -> list[dict]:
    """Codex CLI rollout from before the envelope (mid 2025): a bare header line, then bare
    Responses items with `{"record_type": "state"}` markers and no timestamps of their own."""
    ids = Ids(s.name, s.start)
    out: list[dict] = [{"id": session_id, "timestamp": ids.tick(0), "instructions": None,
                        "git": {"commit_hash": ids.hex(40), "branch": "main",
                                "repository_url": "git@github.com:harbor-labs/billing.git"}},
                       {"record_type": "state"},
                       {"type": "message", "id": None, "role": "user", "content": [
                           {"type": "input_text", "text": f"<environment_context>\n  <cwd>{cwd}"
                            "</cwd>\n  <approval_policy>on-request</approval_policy>\n  "
                            "<sandbox_mode>workspace-write</sandbox_mode>\n  <network_access>"
                            "enabled</network_access>\n  <shell>zsh</shell>\n"
                            "</environment_context>"}]}]
    for ev in s.events:
        if ev[0] == "user":
            out.append({"type": "message", "id": None, "role": "user",
                        "content": [{"type": "input_text", "text": ev[1]}]})
        elif ev[0] == "prose":
            out.append({"type": "message", "id": "msg_" + ids.hex(32), "role": "assistant",
                        "content": [{"type": "output_text", "text": ev[1]}]})
        else:
            _, text, calls = ev
            out.append({"type": "reasoning", "id": "rs_" + ids.hex(32),
                        "summary": [{"type": "summary_text", "text": f"**{text}**"}] if text else [],
                        "encrypted_content": "gAAAAB" + ids.hex(40)})
            for c in calls:
                cid = "call_" + ids.hex(24)
                out.append({"type": "function_call", "id": "fc_" + ids.hex(32), "name": c.name,
                            "arguments": dumps(c.args), "call_id": cid})
                out.append({"record_type": "state"})
                out.append({"type": "function_call_output", "call_id": cid,
                            "output": dumps({"output": c.answer, "metadata": {
                                "exit_code": 1 if c.error else 0, "duration_seconds": 0.6}})})
    return out


def gemini_records(s: Script, *, session_id: str, project_hash: str, model: str,
                   rewind: tuple[int, Script] | None = None) -> list[dict]:
    """Gemini CLI session JSONL (chatRecordingService): metadata line, messages re-appended by id
    as tool calls complete, `$set` metadata updates, and `$rewindTo` (drops that message onward).

    `rewind=(k, abandoned)`: before the k-th user turn, write `abandoned` (a user turn and what
    the model did with it) and then a `$rewindTo` its user message — as `/rewind` leaves a file.
    """
    ids = Ids(s.name, s.start, step_s=3.0)
    out: list[dict] = [{"sessionId": session_id, "projectHash": project_hash,
                        "startTime": ids.tick(0), "lastUpdated": ids.tick(0), "kind": "main"}]
    users = 0

    def render(events: list[tuple]) -> str | None:
        first_user = None
        for ev in events:
            if ev[0] == "user":
                mid = ids.uuid()
                first_user = first_user or mid
                out.append({"id": mid, "timestamp": ids.tick(), "type": "user",
                            "content": [{"text": ev[1]}]})
            elif ev[0] == "prose":
                out.append({"id": ids.uuid(), "timestamp": ids.tick(), "type": "gemini",
                            "content": ev[1], "thoughts": [], "tokens": _gtokens(), "model": model})
            else:
                _, text, calls = ev
                msg = {"id": ids.uuid(), "timestamp": ids.tick(), "type": "gemini",
                       "content": text, "thoughts": [
                           {"subject": "Checking progress", "description": text or "Next step.",
                            "timestamp": ids.tick(0)}], "tokens": _gtokens(), "model": model}
                out.append(msg)
                out.append({"$set": {"lastUpdated": ids.tick(0)}})
                tcs = []
                for c in calls:
                    cid = f"{c.name}-{int(ids.t.timestamp() * 1000)}-{ids.hex(12)}"
                    resp = {"error": c.answer} if c.error else {"output": c.answer}
                    tcs.append({"id": cid, "name": c.name, "args": c.args,
                                "result": [{"functionResponse": {"id": cid, "name": c.name,
                                                                 "response": resp}}],
                                "status": "error" if c.error else "success",
                                "timestamp": ids.tick(), "displayName": c.name,
                                "description": "", "renderOutputAsMarkdown": False,
                                "resultDisplay": c.answer})
                out.append({**msg, "toolCalls": tcs})
            out.append({"$set": {"lastUpdated": ids.tick(0)}})
        return first_user

    for ev in s.events:
        if ev[0] == "user":
            users += 1
            if rewind and users == rewind[0]:
                target = render(rewind[1].events)
                out.append({"$rewindTo": target})
        render([ev])
    return out


def _gtokens() -> dict:
    return {"input": 14210, "output": 88, "cached": 12040, "thoughts": 132, "tool": 0,
            "total": 14430}


def gemini_legacy(s: Script, *, session_id: str, project_hash: str, model: str) -> dict:
    """The older single-JSON Gemini CLI session file ({sessionId, …, messages: [...]})."""
    rows = gemini_records(s, session_id=session_id, project_hash=project_hash, model=model)
    meta, msgs = rows[0], {}
    for r in rows[1:]:
        if "id" in r:
            msgs[r["id"]] = r  # later copies of a message supersede earlier ones
    last = rows[-1]["$set"]["lastUpdated"]
    return {"sessionId": meta["sessionId"], "projectHash": meta["projectHash"],
            "startTime": meta["startTime"], "lastUpdated": last, "messages": list(msgs.values())}


def atif_trajectory(s: Script, *, session_id: str, agent: str, version: str, model: str,
                    metrics: bool = True) -> dict:
    ids = Ids(s.name, s.start, step_s=6.0)
    steps: list[dict] = []
    for ev in s.events:
        step: dict[str, Any] = {"step_id": len(steps) + 1, "timestamp": ids.tick()}
        if ev[0] == "user":
            step.update(source="user", message=ev[1])
        elif ev[0] == "prose":
            step.update(source="agent", model_name=model, message=ev[1])
        else:
            _, text, calls = ev
            tcs = [{"tool_call_id": "call_" + ids.hex(16 if metrics else 8), "function_name": c.name,
                    "arguments": c.args} for c in calls]
            step.update(source="agent", message=text, tool_calls=tcs,
                        observation={"results": [
                            {"source_call_id": t["tool_call_id"], "content": c.answer}
                            for t, c in zip(tcs, calls, strict=True)]})
            if metrics:
                step["model_name"] = model
                step["metrics"] = {"prompt_tokens": 6100 + 90 * len(steps),
                                   "completion_tokens": 61, "cached_tokens": 5200}
        steps.append(step)
    return {"schema_version": "ATIF-v1.4", "session_id": session_id,
            "agent": {"name": agent, "version": version, "model_name": model, "extra": {}},
            "steps": steps,
            "final_metrics": {"total_steps": len(steps)}}


def swe_agent_traj(s: Script, *, system: str, instance: str) -> dict:
    """SWE-agent .traj: trajectory[] of {action, observation, …} plus the chat `history`.

    Only the command string is stored: the reader names the tool after its first word."""
    traj: list[dict] = []
    history: list[dict] = [{"role": "system", "content": system, "agent": "main"}]
    for ev in s.events:
        if ev[0] == "user":
            history.append({"role": "user", "content": ev[1], "agent": "main"})
        elif ev[0] == "prose":
            history.append({"role": "assistant", "content": ev[1], "thought": ev[1],
                            "action": "", "agent": "main"})
        else:
            _, text, calls = ev
            (c,) = calls  # SWE-agent issues one command per turn
            cmd = c.args["command"]
            response = f"{text}\n\n```\n{cmd}\n```"
            traj.append({"action": cmd, "observation": c.answer, "response": response,
                         "thought": text, "execution_time": 0.41,
                         "state": {"open_file": "/testbed/src/parsedate/core.py",
                                   "working_dir": "/testbed"}})
            history.append({"role": "assistant", "content": response, "thought": text,
                            "action": cmd, "agent": "main"})
            history.append({"role": "user", "content": c.answer + "\n(Open file: /testbed/src/"
                            "parsedate/core.py)\n(Current directory: /testbed)\nbash-$",
                            "agent": "main"})
    return {"environment": "swe_main", "trajectory": traj, "history": history,
            "info": {"exit_status": "submitted (exit_cost)", "submission": None,
                     "model_stats": {"instance_cost": 1.84, "tokens_sent": 512330,
                                     "tokens_received": 6120, "api_calls": len(traj)},
                     "instance_id": instance}}


def openhands_events(s: Script, *, model: str) -> list[dict]:
    """OpenHands saved trajectory: the event stream (actions + observations linked by cause)."""
    ids = Ids(s.name, s.start, step_s=5.0)
    out: list[dict] = []

    def ev(**kw: Any) -> dict:
        row = {"id": len(out), "timestamp": ids.tick(), **kw}
        out.append(row)
        return row

    ev(source="environment", message="", observation="agent_state_changed", content="",
       extras={"agent_state": "loading"})
    for e in s.events:
        if e[0] == "user":
            ev(source="user", message=e[1], action="message",
               args={"content": e[1], "image_urls": [], "wait_for_response": False})
            ev(source="environment", message="", observation="agent_state_changed", content="",
               extras={"agent_state": "running"})
        elif e[0] == "prose":
            ev(source="agent", message=e[1], action="message",
               args={"content": e[1], "image_urls": None, "wait_for_response": False})
        else:
            _, text, calls = e
            resp_id = "chatcmpl-" + ids.uuid()
            tcs = [(c, "toolu_01" + ids.hex(22)) for c in calls]
            model_response = {"id": resp_id, "model": model, "object": "chat.completion",
                              "choices": [{"finish_reason": "tool_calls", "index": 0, "message": {
                                  "content": text, "role": "assistant", "tool_calls": [
                                      {"index": i, "function": {"name": c.name,
                                                                "arguments": json.dumps(c.args)},
                                       "id": tid, "type": "function"}
                                      for i, (c, tid) in enumerate(tcs)]}}]}
            for c, tid in tcs:
                meta = {"function_name": c.name, "tool_call_id": tid,
                        "model_response": model_response, "total_calls_in_response": len(tcs)}
                if c.name == "str_replace_editor" and c.args.get("command") == "view":
                    # OpenHands records a view as a FileReadAction / FileReadObservation.
                    path = c.args["path"]
                    act = ev(source="agent", message=f"Reading file: {path}", action="read",
                             tool_call_metadata=meta,
                             args={"path": path, "start": 0, "end": -1, "thought": text,
                                   "security_risk": 0, "impl_source": "oh_aci",
                                   "view_range": c.args.get("view_range")})
                    ev(source="agent", message=f"I read the file {path}.", cause=act["id"],
                       observation="read", tool_call_metadata=meta, content=c.answer,
                       extras={"path": path, "impl_source": "oh_aci"})
                    continue
                cmd = c.args.get("command", "")
                act = ev(source="agent", message=f"Running command: {cmd}", action="run",
                         tool_call_metadata=meta,
                         args={"command": cmd, "is_input": False, "thought": text,
                               "blocking": False, "hidden": False,
                               "confirmation_state": "confirmed"})
                code = 128 if c.error else 0
                ev(source="agent", message=f"Command `{cmd}` executed with exit code {code}.",
                   cause=act["id"], observation="run", tool_call_metadata=meta,
                   content=c.answer, extras={"command": cmd, "metadata": {
                       "exit_code": code, "pid": -1, "username": "openhands",
                       "hostname": "7c1e0f3a9b2d", "working_dir": "/workspace",
                       "prefix": "", "suffix": f"\n[The command completed with exit code {code}.]"},
                       "hidden": False}, success=not c.error)
    ev(source="environment", message="", observation="agent_state_changed", content="",
       extras={"agent_state": "awaiting_user_input"})
    return out


# ---------------------------------------------------------------------------------------------
# The sessions
# ---------------------------------------------------------------------------------------------

RETAIL_SYSTEM = ("You are a customer support agent for Northwind Outfitters. Verify the customer's "
                 "identity before touching an order. Refunds go back to the original payment "
                 "method. Be concise and friendly.")


def support_clean() -> Script:
    s = Script("support-clean", "2026-03-02T09:14:05")
    s.user("Hi, I ordered a rain shell last week and it still hasn't shipped. Order #W4471903.")
    s.say("I'm sorry about the wait! To look into it, could you confirm the email address on "
          "the account?")
    s.user("sure, it's dana.okafor@example.com")
    s.calls(C("find_user_id_by_email", {"email": "dana.okafor@example.com"}, "dana_okafor_1187"))
    s.calls(C("get_order_details", {"order_id": "#W4471903"}, json.dumps({
        "order_id": "#W4471903", "user_id": "dana_okafor_1187", "status": "pending",
        "items": [{"name": "Stormline Rain Shell", "size": "M", "color": "slate",
                   "item_id": "8125664320", "price": 149.0}],
        "fulfillments": [], "payment_history": [{"transaction_type": "payment",
                                                  "amount": 149.0,
                                                  "payment_method_id": "credit_card_4402"}]})))
    s.calls(C("get_product_details", {"product_id": "6938111410"}, json.dumps({
        "name": "Stormline Rain Shell", "variants": {"8125664320": {
            "options": {"size": "M", "color": "slate"}, "available": False,
            "restock_date": "2026-03-06"}}})))
    s.say("Thanks, Dana. Your order #W4471903 is still pending because the slate Stormline "
          "Rain Shell in size M is back-ordered until March 6. I can keep the order as is, switch "
          "it to an in-stock color, or cancel it for a full refund to your card ending 4402.")
    s.user("Is the black one in stock in M?")
    s.calls(C("get_product_details", {"product_id": "6938111410", "options": {"color": "black"}},
              json.dumps({"name": "Stormline Rain Shell", "variants": {"8125664301": {
                  "options": {"size": "M", "color": "black"}, "available": True,
                  "price": 149.0}}})))
    s.say("Yes, black in size M is in stock at the same price ($149). Shall I switch your "
          "pending order to black? Please reply yes to confirm.")
    s.user("yes please")
    s.calls(C("modify_pending_order_items", {
        "order_id": "#W4471903", "item_ids": ["8125664320"], "new_item_ids": ["8125664301"],
        "payment_method_id": "credit_card_4402"}, json.dumps({
            "order_id": "#W4471903", "status": "pending (item modified)",
            "items": [{"name": "Stormline Rain Shell", "size": "M", "color": "black",
                       "item_id": "8125664301", "price": 149.0}]})))
    s.say("Done! Order #W4471903 now has the black Stormline Rain Shell (M) and should ship "
          "within 1–2 business days. No price difference was charged. Anything else?")
    s.user("That's all, thanks!")
    s.say("You're welcome, Dana. Have a great day!")
    return s


def support_duplicate_batch() -> Script:
    s = Script("support-dup-batch", "2026-03-03T14:02:40")
    s.user("I returned the trail runners two weeks ago and still haven't got my money back. "
           "Order #W9012244, email li.wen@example.org")
    s.calls(C("find_user_id_by_email", {"email": "li.wen@example.org"}, "li_wen_5520"),
            C("get_order_details", {"order_id": "#W9012244"}, json.dumps({
                "order_id": "#W9012244", "user_id": "li_wen_5520", "status": "return received",
                "items": [{"name": "Ridgeback Trail Runner", "item_id": "4410937755",
                           "price": 118.5}],
                "payment_history": [{"transaction_type": "payment", "amount": 118.5,
                                     "payment_method_id": "paypal_7731"}]})),
            text="Let me pull up your account and the order.")
    s.say("I see the return for order #W9012244 arrived at our warehouse, but the refund of "
          "$118.50 hasn't been issued yet. I can issue it now to your PayPal account "
          "(paypal_7731). Shall I go ahead?")
    s.user("Yes, go ahead.")
    # The model emitted the same refund twice in one parallel batch: a double refund in the making.
    refund = {"order_id": "#W9012244", "amount": 118.5, "payment_method_id": "paypal_7731",
              "reason": "return received"}
    s.calls(C("issue_refund", refund, json.dumps({"refund_id": "rf_2Q81", "status": "issued",
                                                   "amount": 118.5})),
            C("issue_refund", refund, json.dumps({"refund_id": "rf_2Q82", "status": "issued",
                                                   "amount": 118.5})),
            C("send_customer_email", {"to": "li.wen@example.org",
                                      "template": "refund_issued",
                                      "order_id": "#W9012244"}, "queued: msg_5f1c"),
            text="Issuing the refund and sending a confirmation email.")
    s.say("Your refund of $118.50 for order #W9012244 has been issued to PayPal; it usually "
          "appears within 3–5 business days. A confirmation email is on its way.")
    return s


def support_ladder() -> Script:
    """The agent keeps re-sending the same email: each send 'works', so answers differ."""
    s = Script("support-ladder", "2026-03-04T16:40:12")
    s.user("Ticket #58213 from Marisol Vega: she never received the password reset email. "
           "Please resend it and let her know.")
    s.calls(C("lookup_customer", {"ticket_id": 58213}, json.dumps({
        "customer_id": "cus_81HQ2", "name": "Marisol Vega", "email": "m.vega@example.net",
        "email_status": "soft_bounce (mailbox full)", "plan": "Team"})),
        text="Looking up the customer on ticket #58213.")
    email = {"customer_id": "cus_81HQ2", "template": "password_reset",
             "to": "m.vega@example.net"}
    for n in range(5):
        s.calls(C("send_email", email, json.dumps({
            "message_id": f"<{hashlib.sha1(f'reset{n}'.encode()).hexdigest()[:16]}@mail.helpdesk.io>",
            "status": "queued"})), text="Resending the password reset email.")
    s.calls(C("add_ticket_note", {"ticket_id": 58213, "note": "Reset email resent. Address "
                                   "soft-bounces (mailbox full); asked customer to free space."},
              "note_id: 99120"))
    s.say("I've resent the password reset to m.vega@example.net. Her mailbox is reporting full "
          "(soft bounce), so I've noted on the ticket that she should free up space or give us "
          "an alternate address.")
    return s


def ops_aab_cycle() -> Script:
    """Check, check again, restart — and the pod crash-loops the same way every time."""
    s = Script("ops-aab", "2026-03-05T02:11:30")
    s.user("PagerDuty: checkout-api is down in prod-eu. Get it healthy again.")
    status = json.dumps({"deployment": "checkout-api", "namespace": "prod-eu", "ready": "0/3",
                         "pods": [{"name": "checkout-api-7d9f6c", "status": "CrashLoopBackOff",
                                   "restarts": 14,
                                   "last_error": "FATAL: password authentication failed for "
                                                 "user \"checkout\""}]})
    s.calls(C("get_deployment_events", {"deployment": "checkout-api", "namespace": "prod-eu",
                                        "limit": 5},
              "Back-off restarting failed container checkout-api in pod checkout-api-7d9f6c"),
            text="Checking recent events for checkout-api.")
    for _ in range(4):
        s.calls(C("get_deployment_status", {"deployment": "checkout-api", "namespace": "prod-eu"},
                  status), text="Checking the rollout status.")
        s.calls(C("get_deployment_status", {"deployment": "checkout-api", "namespace": "prod-eu"},
                  status), text="Still not ready; checking once more before restarting.")
        s.calls(C("restart_deployment", {"deployment": "checkout-api", "namespace": "prod-eu"},
                  "deployment.apps/checkout-api restarted"),
                text="Restarting the deployment.")
    s.say("checkout-api keeps crash-looping: the pods fail with `password authentication failed "
          "for user \"checkout\"`. Restarting will not fix it — the database credential in the "
          "`checkout-db` secret looks rotated. I need someone with access to the secret to "
          "update it.")
    return s


def coding_period3() -> Script:
    """Edit → test → commit, and the pre-commit hook reverts the edit every time."""
    s = Script("cc-period3", "2026-03-06T10:03:00")
    s.user("The ledger flush test is flaky on CI. Fix it and commit.")
    s.calls(C("Task", {"description": "Find flush call sites",
                       "prompt": "Find every place that calls Ledger.flush() or writes to "
                                 "self._pending in src/, and report file:line with a one-line "
                                 "summary of each.",
                       "subagent_type": "Explore"},
              "Found 3 call sites:\n- src/ledger/store.py:88 flush() drains _pending under "
              "self._lock\n- src/ledger/store.py:131 close() calls flush() without the lock\n"
              "- src/worker.py:57 timer thread calls store.flush() every 2s"),
            text="Let me have a subagent map the flush call sites first.")
    s.calls(C("Read", {"file_path": "/home/dev/ledger/src/ledger/store.py", "offset": 120,
                       "limit": 20},
              "   120\t    def close(self) -> None:\n   131\t        self.flush()\n"
              "   132\t        self._conn.close()"))
    edit = {"file_path": "/home/dev/ledger/src/ledger/store.py",
            "old_string": "        self.flush()\n        self._conn.close()",
            "new_string": "        with self._lock:\n            self.flush()\n"
                          "        self._conn.close()"}
    test = {"command": "uv run pytest tests/test_store.py -q -x",
            "description": "Run the store tests"}
    commit = {"command": "git add -A && git commit -m \"Hold the lock while closing the ledger\"",
              "description": "Commit the fix"}
    test_out = ("F\n=================================== FAILURES ===================================\n"
                "___________________________ test_close_flushes_all ____________________________\n"
                "E   AssertionError: assert 41 == 42\n"
                "FAILED tests/test_store.py::test_close_flushes_all - AssertionError: assert 41 == 42\n"
                "1 failed, 17 passed in 0.84s")
    hook_out = ("ruff-format..............................................................Failed\n"
                "- hook id: ruff-format\n- files were modified by this hook\n\n"
                "1 file reformatted\nmypy.....................................................Passed")
    for _ in range(4):
        s.calls(C("Edit", edit, "The file /home/dev/ledger/src/ledger/store.py has been updated."),
                text="Wrapping the flush in close() with the lock.")
        s.calls(C("Bash", test, test_out, error=True))
        s.calls(C("Bash", commit, hook_out, error=True),
                text="The test still fails intermittently; committing the fix to see CI.")
    s.say("I'm going in circles: the ruff-format pre-commit hook rewrites store.py on every "
          "commit and the edit is lost, so the test keeps failing the same way. The real race is "
          "the 2-second timer in src/worker.py calling flush() concurrently; shall I fix that "
          "instead and run the hook before committing?")
    return s


def coding_subagent() -> Script:
    s = Script("cc-subagent", "2026-03-06T10:03:20")
    s.user("Find every place that calls Ledger.flush() or writes to self._pending in src/, and "
           "report file:line with a one-line summary of each.")
    s.calls(C("Grep", {"pattern": "flush\\(", "path": "/home/dev/ledger/src", "output_mode":
                       "content", "-n": True},
              "/home/dev/ledger/src/ledger/store.py:88:    def flush(self) -> None:\n"
              "/home/dev/ledger/src/ledger/store.py:131:        self.flush()\n"
              "/home/dev/ledger/src/worker.py:57:            store.flush()"),
            C("Grep", {"pattern": "_pending", "path": "/home/dev/ledger/src", "output_mode":
                       "content", "-n": True},
              "/home/dev/ledger/src/ledger/store.py:41:        self._pending: list[Row] = []\n"
              "/home/dev/ledger/src/ledger/store.py:76:        self._pending.append(row)\n"
              "/home/dev/ledger/src/ledger/store.py:90:            rows, self._pending = "
              "self._pending, []"),
            text="I'll search for flush calls and _pending writes in parallel.")
    s.calls(C("Read", {"file_path": "/home/dev/ledger/src/ledger/store.py", "offset": 70,
                       "limit": 30},
              "    70\t    def write(self, row: Row) -> None:\n    76\t        self._pending.append(row)\n"
              "    88\t    def flush(self) -> None:\n    89\t        with self._lock:\n"
              "    90\t            rows, self._pending = self._pending, []"))
    s.calls(C("Read", {"file_path": "/home/dev/ledger/src/worker.py", "offset": 45, "limit": 20},
              "    52\t    def _tick(self) -> None:\n    57\t            store.flush()\n"
              "    58\t        self._timer = Timer(2.0, self._tick)"))
    s.say("Found 3 call sites:\n- src/ledger/store.py:88 flush() drains _pending under "
          "self._lock\n- src/ledger/store.py:131 close() calls flush() without the lock\n"
          "- src/worker.py:57 timer thread calls store.flush() every 2s")
    return s


def codex_migrate_halt() -> Script:
    s = Script("codex-migrate", "2026-03-07T13:22:10")
    s.user("Add a `due_date` column to invoices with a migration and expose it in the API.")
    s.calls(C("shell", {"command": ["bash", "-lc", "ls migrations && sed -n 1,40p "
                                    "src/models/invoice.ts"], "workdir": "/home/sam/invoicer"},
              "0001_init.sql\n0002_customers.sql\n0003_invoice_lines.sql\n"
              "export interface Invoice {\n  id: string;\n  customerId: string;\n"
              "  total: number;\n}"), text="Inspecting migrations and the invoice model")
    s.calls(C("apply_patch", {"patch": "*** Begin Patch\n*** Add File: migrations/0004_due_date.sql\n"
                              "+ALTER TABLE invoices ADD COLUMN due_date date;\n"
                              "+CREATE INDEX invoices_due_date_idx ON invoices (due_date);\n"
                              "*** End Patch"},
              "Success. Updated the following files:\nA migrations/0004_due_date.sql"),
            text="Adding the migration")
    migrate = {"command": ["bash", "-lc", "npm run db:migrate"], "workdir": "/home/sam/invoicer"}
    fail = ("> invoicer@1.4.0 db:migrate\n> node scripts/migrate.js\n\n"
            "applying 0004_due_date.sql\n"
            "error: relation \"invoices\" does not exist\n    at Parser.parseErrorMessage "
            "(node_modules/pg-protocol/dist/parser.js:287:98)\nmigration failed, rolled back")
    for _ in range(3):
        s.calls(C("shell", migrate, fail, error=True), text="Running the migration")
    s.calls(C("shell", {"command": ["bash", "-lc", "grep -n DATABASE_URL .env scripts/migrate.js"],
                        "workdir": "/home/sam/invoicer"},
              ".env:3:DATABASE_URL=postgres://localhost:5432/invoicer_test\n"
              "scripts/migrate.js:4:const url = process.env.DATABASE_URL"),
            text="Checking which database the migration targets")
    s.say("The migration fails because `.env` points DATABASE_URL at `invoicer_test`, which has "
          "no tables yet. Should I run `npm run db:reset` against the test database, or point "
          "the migration at your dev database?")
    s.user("Point it at invoicer_dev.")
    s.calls(C("shell", {"command": ["bash", "-lc", "DATABASE_URL=postgres://localhost:5432/"
                                    "invoicer_dev npm run db:migrate"],
                        "workdir": "/home/sam/invoicer"},
              "applying 0004_due_date.sql\nmigrated 1 file"), text="Migrating the dev database")
    s.calls(C("apply_patch", {"patch": "*** Begin Patch\n*** Update File: src/models/invoice.ts\n"
                              "@@\n   total: number;\n+  dueDate: string | null;\n }\n"
                              "*** End Patch"},
              "Success. Updated the following files:\nM src/models/invoice.ts"),
            text="Exposing dueDate on the model")
    s.calls(C("shell", {"command": ["bash", "-lc", "npm test -- invoices"],
                        "workdir": "/home/sam/invoicer"},
              "PASS tests/invoices.test.ts\nTests: 12 passed, 12 total"), text="Running tests")
    s.say("Done: migration 0004 adds `due_date` (indexed) and the API model exposes `dueDate`. "
          "Tests pass against invoicer_dev.")
    return s


def codex_backfill_watch() -> Script:
    """Status, logs, status, logs — while the job moves: a cycle in shape, progress in fact."""
    s = Script("codex-backfill", "2025-08-14T16:02:00")
    s.user("Start the invoice backfill job in billing and watch it until it completes.")
    k = ["bash", "-lc"]
    s.calls(C("shell", {"command": k + ["kubectl apply -f deploy/jobs/backfill-invoices.yaml"],
                        "workdir": "/home/ana/billing"},
              "job.batch/backfill-invoices created"), text="Starting the backfill job")
    status = {"command": k + ["kubectl get job backfill-invoices -n billing --no-headers"],
              "workdir": "/home/ana/billing"}
    logs = {"command": k + ["kubectl logs job/backfill-invoices -n billing --tail=2"],
            "workdir": "/home/ana/billing"}
    for n in range(5):
        age = f"{1 + 2 * n}m{(17 * n) % 60:02d}s"
        s.calls(C("shell", status, f"backfill-invoices   0/1   {age}   {age}"),
                text="Checking the job status")
        s.calls(C("shell", logs, f"batch {40 * n + 39}/200 written (invoices 2019-0{n + 1})\n"
                                 f"batch {40 * n + 40}/200 written (invoices 2019-0{n + 1})"),
                text="Reading the latest log lines")
    s.calls(C("shell", status, "backfill-invoices   1/1   11m02s   11m40s"),
            text="Checking the job status")
    s.say("The backfill finished: 200/200 batches written, job `backfill-invoices` completed "
          "in about 11 minutes.")
    return s


def gemini_ci_poll() -> Script:
    """A read-only poll whose answer moves every time: progress, not a loop."""
    s = Script("gemini-ci-poll", "2026-03-08T08:30:00")
    s.user("I pushed the release branch. Watch the CI run and tell me when it's green.")
    s.calls(C("list_workflow_runs", {"owner": "tidewater", "repo": "pgmeter",
                                     "branch": "release/2.3", "per_page": 1},
              json.dumps({"workflow_runs": [{"id": 8841230057, "name": "CI",
                                             "status": "queued", "head_sha": "5e0c2a1"}]})),
            text="Finding the CI run for release/2.3.")
    steps = ["checkout", "setup-python", "lint", "typecheck", "unit (3.11)", "unit (3.12)",
             "integration (pg15)", "integration (pg16)", "build wheel", "docs"]
    for n in range(22):
        done = min(n // 2, len(steps))
        status = "completed" if done == len(steps) else "in_progress"
        ans = {"id": 8841230057, "status": status, "conclusion": "success" if
               status == "completed" else None, "jobs_completed": f"{done}/{len(steps)}",
               "current_step": steps[done] if done < len(steps) else None,
               "elapsed": f"{2 + n * 25 // 60}m{(n * 25) % 60:02d}s"}
        s.calls(C("get_workflow_run", {"owner": "tidewater", "repo": "pgmeter",
                                       "run_id": 8841230057}, json.dumps(ans)),
                text="Checking the CI run again.")
    s.say("CI run 8841230057 on release/2.3 is green: all 10 jobs passed in about 11 minutes.")
    return s


def opencode_invalid_edit() -> Script:
    """A harness error loop: OpenCode reroutes an `edit` without `oldString` to its `invalid`
    tool four times (nothing runs, the same refusal comes back), then the edit goes through."""
    s = Script("opencode-invalid-edit", "2026-03-10T10:20:00")
    s.user("Rename the config key `retries` to `max_retries` in src/config.ts and run the tests.")
    s.calls(C("read", {"filePath": "/home/dev/relay/src/config.ts"},
              "<file>\n00001| export const defaults = {\n00002|   retries: 3,\n00003|   timeoutMs: 5000,\n"
              "00004| };\n</file>"), text="Reading the config first.")
    refusal = ("The arguments provided to the tool are invalid: Invalid input for tool edit: "
               "oldString: Required")
    for _ in range(4):
        s.calls(C("invalid", {"tool": "edit", "error": "Invalid input for tool edit: oldString: Required"},
                  refusal), text="Renaming the key.")
    s.calls(C("edit", {"filePath": "/home/dev/relay/src/config.ts", "oldString": "  retries: 3,",
                       "newString": "  max_retries: 3,"}, ""), text="Renaming the key, with the old text.")
    s.calls(C("bash", {"command": "npm test --silent", "description": "Run the tests"},
              "Tests: 41 passed, 41 total"), text="Running the tests.")
    s.say("Renamed `retries` to `max_retries`; all 41 tests pass.")
    return s


def otel_rollout_poll() -> Script:
    """A quiet poll: the same rollout-status call, the same 'waiting' answer, 7 times."""
    s = Script("otel-rollout-poll", "2026-03-09T14:02:00")
    s.user("Roll out api v2.8.1 to staging and tell me when it's healthy.")
    s.calls(C("kubectl", {"args": ["set", "image", "deployment/api", "api=registry.tidewater.io/api:2.8.1",
                                   "-n", "staging"]}, "deployment.apps/api image updated"),
            text="Updating the image.")
    waiting = ('Waiting for deployment "api" rollout to finish: 1 of 3 updated replicas are available...')
    for _ in range(7):
        s.calls(C("kubectl", {"args": ["rollout", "status", "deployment/api", "-n", "staging", "--timeout=30s"]},
                  waiting + "\nerror: timed out waiting for the condition", error=True),
                text="Checking the rollout.")
    s.user("Stop polling. Why is it stuck?")
    s.calls(C("kubectl", {"args": ["describe", "pod", "-l", "app=api", "-n", "staging"]},
              "Events:\n  Warning  FailedScheduling  0/4 nodes are available: 4 Insufficient memory."),
            text="Looking at the pods.")
    s.say("Two new pods can't be scheduled: the staging nodes are out of memory. Scale a node "
          "group or lower the memory request.")
    return s


def gemini_rewound() -> Script:
    """What the user rewound away: it must not reach the ledger."""
    s = Script("gemini-ci-rewound", "2026-03-08T08:29:00")
    s.user("Delete the old release branches.")
    for _ in range(3):
        s.calls(C("run_shell_command", {"command": "git push origin --delete release/2.1"},
                  "error: unable to delete 'release/2.1': remote ref does not exist",
                  error=True), text="Deleting release/2.1.")
    return s


def gemini_quiet_poll() -> Script:
    s = Script("gemini-quiet", "2026-02-20T17:05:00")
    s.user("The nightly export job is running; read logs/export.log and tell me when it "
           "finishes.")
    log = ("2026-02-20 17:01:12 INFO export started (tenant=all, format=parquet)\n"
           "2026-02-20 17:01:40 INFO wrote part-0000.parquet (412 MB)\n"
           "2026-02-20 17:02:05 INFO compacting partitions…")
    for _ in range(18):
        s.calls(C("read_file", {"absolute_path": "/srv/exporter/logs/export.log"}, log),
                text="Reading the export log.")
    s.say("The export log hasn't changed for a while: the last line is still \"compacting "
          "partitions…\" from 17:02:05. The job may be stuck in compaction; check the exporter "
          "process.")
    return s


def browser_navigate_poll() -> Script:
    """A costly poll: each page load differs (queue position), yet a browser run has a ceiling."""
    s = Script("browser-queue", "2026-03-09T07:59:30")
    s.user("Get me two tickets for the Lumen Arcade show on April 12 at the Vaultline box office "
           "site. Max 80 EUR each.")
    s.calls(C("browser_navigate", {"url": "https://tickets.vaultline.example/events/lumen-arcade"},
              "Page: Lumen Arcade — Vaultline\n- heading \"Lumen Arcade — Apr 12, 20:00\"\n"
              "- button \"Buy tickets\" [ref=e14]"), text="Opening the event page.")
    s.calls(C("browser_click", {"element": "Buy tickets button", "ref": "e14"},
              "Page: Waiting room — Vaultline\n- text \"You are in line. Position: 2,814\""),
            text="Clicking Buy tickets.")
    for n in range(20):
        pos = 2814 - 131 * (n + 1)
        s.calls(C("browser_navigate", {"url": "https://tickets.vaultline.example/queue"},
                  f"Page: Waiting room — Vaultline\n- text \"You are in line. Position: "
                  f"{pos:,}\"\n- text \"Estimated wait: {max(1, pos // 140)} min\""),
                text="Reloading the waiting room to check my position.")
    s.say("I'm still in the Vaultline waiting room (position about 194). Reloading the page "
          "every few seconds doesn't move me forward faster; I'll stop here so you can keep "
          "the tab open yourself.")
    return s


def swe_abab() -> Script:
    s = Script("swe-abab", "2026-02-11T21:40:00")
    s.user("<uploaded_files>\n/testbed\n</uploaded_files>\nI've uploaded a python code "
           "repository in the directory /testbed. Consider the following issue:\n\n"
           "parse_date('2024-02-30') returns March 1 instead of raising ValueError.\n\n"
           "Can you help me implement the necessary changes so that the issue is resolved?")
    s.calls(C("find_file", {"command": "find_file core.py src"},
              "Found 1 matches for \"core.py\" in /testbed/src:\n/testbed/src/parsedate/core.py"),
            text="First, let's find where parse_date lives.")
    s.calls(C("create", {"command": "create reproduce.py"},
              "[File: /testbed/reproduce.py (1 lines total)]\n1:"),
            text="Let's create a reproduction script.")
    s.calls(C("edit", {"command": "edit 1:1\nfrom parsedate import parse_date\n"
                                  "print(parse_date('2024-02-30'))\nend_of_edit"},
              "[File: /testbed/reproduce.py (2 lines total)]\n1:from parsedate import parse_date\n"
              "2:print(parse_date('2024-02-30'))\nFile updated."))
    run = {"command": "python reproduce.py"}
    open_ = {"command": "open src/parsedate/core.py 58"}
    run_out = "2024-03-01 00:00:00"
    open_out = ("[File: /testbed/src/parsedate/core.py (140 lines total)]\n(47 more lines above)\n"
                "58:    day = min(day, 31)\n59:    base = datetime(year, month, 1)\n"
                "60:    return base + timedelta(days=day - 1)\n(80 more lines below)")
    thoughts = [("The output shows the bug. Let's run it again to be sure it's consistent.",
                 "Let's look at how the date is built."),
                ("Maybe the module is cached; let's rerun the reproduction.",
                 "Let's look at the day clamping again."),
                ("Let's verify the output once more.", "Let's re-open the function."),
                ("Let's run the script again.", "Let's look at line 58 once more.")]
    for t_run, t_open in thoughts:
        s.calls(C("python", run, run_out), text=t_run)
        s.calls(C("open", open_, open_out), text=t_open)
    s.calls(C("edit", {"command": "edit 58:60\n    if not 1 <= day <= monthrange(year, month)[1]:\n"
                                  "        raise ValueError(f\"day {day} out of range\")\n"
                                  "    return datetime(year, month, day)\nend_of_edit"},
              "[File: /testbed/src/parsedate/core.py (140 lines total)]\nFile updated."),
            text="Now let's validate the day against the month length instead of clamping.")
    s.calls(C("python", run, "Traceback (most recent call last):\n  File \"/testbed/reproduce.py\", "
                              "line 2, in <module>\nValueError: day 30 out of range"),
            text="Let's run the reproduction again.")
    s.calls(C("submit", {"command": "submit"}, "diff --git a/src/parsedate/core.py …"),
            text="The fix works; submitting.")
    return s


def openhands_stagnation() -> Script:
    s = Script("oh-stagnation", "2026-02-27T11:00:00")
    s.user("Clone git@github.com:quayside/billing-etl.git into /workspace and run its test suite.")
    s.calls(C("execute_bash", {"command": "git clone git@github.com:quayside/billing-etl.git "
                               "/workspace/billing-etl"},
              "Cloning into '/workspace/billing-etl'...\ngit@github.com: Permission denied "
              "(publickey).\nfatal: Could not read from remote repository.", error=True),
            text="I'll clone the repository first.")
    s.calls(C("execute_bash", {"command": "ls -la ~/.ssh"},
              "ls: cannot access '/root/.ssh': No such file or directory", error=True),
            text="Let me check whether an SSH key is available.")
    stuck = ("I can't clone git@github.com:quayside/billing-etl.git: the sandbox has no SSH key "
             "for GitHub (Permission denied (publickey)). Please add a deploy key or give me an "
             "HTTPS URL with a token, and I'll continue.")
    for _ in range(8):
        s.say(stuck)
    return s


OH_FAKE_USER = ("Please continue working on the task on whatever approach you think is "
                "suitable.\nIf you think you have solved the task, please first send your answer "
                "to user through message and then finish the interaction.\nIMPORTANT: YOU SHOULD "
                "NEVER ASK FOR HUMAN HELP.\n")


def oh_prodded() -> Script:
    """An eval's stand-in user answers every message: each answer is a user turn, so the same
    prose never piles up in one run."""
    s = Script("oh-prodded", "2026-02-27T13:30:00")
    s.user("<uploaded_files>\n/workspace/tidewater__pgmeter__2.3\n</uploaded_files>\nI've "
           "uploaded a python code repository. Consider the following issue description:\n"
           "<issue_description>\n`pgmeter top --limit 0` shows every query instead of none.\n"
           "</issue_description>")
    s.calls(C("execute_bash", {"command": "grep -n \"limit\" /workspace/tidewater__pgmeter__2.3/"
                               "src/pgmeter/top.py"},
              "41:    if limit:\n42:        rows = rows[:limit]"),
            text="Let me find where the limit is applied.")
    s.calls(C("execute_bash", {"command": "cd /workspace/tidewater__pgmeter__2.3 && sed -i "
                               "'41s/if limit:/if limit is not None:/' src/pgmeter/top.py && "
                               "python -m pytest tests/test_top.py -q"},
              "......\n6 passed in 0.41s"),
            text="`if limit:` treats 0 as no limit. I'll compare with None instead.")
    done = ("I changed `if limit:` to `if limit is not None:` in src/pgmeter/top.py, so "
            "`--limit 0` now shows no rows; tests/test_top.py passes.")
    for _ in range(7):
        s.say(done)
        s.user(OH_FAKE_USER)
    s.say(done)
    return s


def oh_view_loop() -> Script:
    """One tool name for reading and writing: a repeated view looks like a repeated write."""
    s = Script("oh-view-loop", "2026-02-27T14:10:00")
    s.user("<uploaded_files>\n/workspace/tidewater__pgmeter__2.3\n</uploaded_files>\nI've "
           "uploaded a python code repository. Consider the following issue description:\n"
           "<issue_description>\n`pgmeter export --format csv` writes the header twice when "
           "the output file already exists.\n</issue_description>")
    view = {"command": "view", "path": "/workspace/tidewater__pgmeter__2.3/src/pgmeter/export.py",
            "view_range": [60, 90]}
    body = ("Here's the result of running `cat -n` on /workspace/tidewater__pgmeter__2.3/src/"
            "pgmeter/export.py:\n    60\tdef write_csv(path, rows, append=False):\n"
            "    61\t    mode = \"a\" if append else \"w\"\n    62\t    with open(path, mode, "
            "newline=\"\") as fh:\n    63\t        w = csv.writer(fh)\n    64\t        "
            "w.writerow(HEADER)\n    65\t        w.writerows(rows)")
    thoughts = ["Let me look at the CSV writer.", "Let me look at the CSV writer again.",
                "Let me re-check how the header is written.",
                "Let me view the function once more to be sure.",
                "Let me view lines 60-90 again."]
    for t in thoughts:
        s.calls(C("str_replace_editor", view, body), text=t)
    s.calls(C("str_replace_editor", {"command": "str_replace",
                                     "path": view["path"],
                                     "old_str": "        w.writerow(HEADER)",
                                     "new_str": "        if not append or fh.tell() == 0:\n"
                                                "            w.writerow(HEADER)"},
              "The file /workspace/tidewater__pgmeter__2.3/src/pgmeter/export.py has been "
              "edited."), text="Write the header only when the file is new or empty.")
    s.say("The header is now written only for a new or empty file, so appending keeps one header.")
    return s


def tau_multirun() -> Script:
    """A support dialog: each user message is a run; one run halts on a repeated booking."""
    s = Script("tau-multirun", "2026-01-15T15:00:00")
    s.user("Hi, I need to change my flight. My user id is omar_haddad_4410.")
    s.calls(C("get_user_details", {"user_id": "omar_haddad_4410"}, json.dumps({
        "name": {"first_name": "Omar", "last_name": "Haddad"}, "membership": "gold",
        "reservations": ["K7QX2M", "PZ31DA"],
        "payment_methods": {"credit_card_9932": {"brand": "visa", "last_four": "9932"}}})))
    s.say("Thanks, Omar. Which reservation would you like to change: K7QX2M or PZ31DA?")
    res = {"reservation_id": "K7QX2M"}
    res_out = json.dumps({"reservation_id": "K7QX2M", "origin": "BOS", "destination": "ORD",
                          "flights": [{"flight_number": "HAT214", "date": "2024-05-21"}],
                          "cabin": "economy", "passengers": 1})
    s.user("K7QX2M please, the Boston one.")
    s.calls(C("get_reservation_details", res, res_out))
    s.say("K7QX2M is BOS → ORD on May 21 (HAT214), economy. What would you like to change?")
    s.user("Move it to May 22, same route, morning if possible.")
    s.calls(C("get_reservation_details", res, res_out))
    s.calls(C("search_direct_flight", {"origin": "BOS", "destination": "ORD",
                                       "date": "2024-05-22"}, json.dumps([
        {"flight_number": "HAT118", "departure": "07:10", "price": {"economy": 164}},
        {"flight_number": "HAT302", "departure": "18:40", "price": {"economy": 139}}])))
    s.say("On May 22 there's HAT118 departing 07:10 ($164, a $22 difference). Shall I switch "
          "K7QX2M to HAT118, paying the difference with your Visa ending 9932?")
    s.user("Yes, do it.")
    upd = {"reservation_id": "K7QX2M", "cabin": "economy",
           "flights": [{"flight_number": "HAT118", "date": "2024-05-22"}],
           "payment_id": "credit_card_9932"}
    for _ in range(3):
        s.calls(C("update_reservation_flights", upd,
                  "Error: payment method credit_card_9932 declined: card expired",
                  error=True))
    s.say("The update failed because the Visa ending 9932 is reported as expired. Do you have "
          "another payment method, such as a travel certificate?")
    s.user("Use my certificate then, certificate_1180.")
    s.calls(C("update_reservation_flights", {**upd, "payment_id": "certificate_1180"},
              json.dumps({"reservation_id": "K7QX2M", "flights": [
                  {"flight_number": "HAT118", "date": "2024-05-22"}], "status": "confirmed"})))
    s.say("All set: K7QX2M is now on HAT118, May 22 at 07:10, paid with certificate_1180.")
    return s


def tau_short() -> Script:
    s = Script("tau-short", "2026-01-15T16:20:00")
    s.user("What's the baggage allowance on reservation ZZ8L0P? I'm user ana_lima_2203.")
    s.calls(C("get_reservation_details", {"reservation_id": "ZZ8L0P"}, json.dumps({
        "reservation_id": "ZZ8L0P", "user_id": "ana_lima_2203", "cabin": "business",
        "total_baggages": 2, "nonfree_baggages": 0})))
    s.say("Reservation ZZ8L0P is in business class: you can check 2 bags free of charge.")
    s.user("Great, thanks.")
    s.say("You're welcome, Ana. Safe travels!")
    return s


def tau2_unpaid_line() -> Script:
    """tau2-bench telecom: the user toggles airplane mode on their own phone (the user simulator's
    tool, not the agent's), then the agent retries a refused `resume_line` 3x."""
    s = Script("tau2-unpaid-line", "2026-02-11T10:05:00")
    s.user("My mobile data stopped working this morning. My number is 555-123-2002.")
    s.calls(C("get_customer_by_phone", {"phone_number": "555-123-2002"}, json.dumps({
        "customer_id": "C1001", "full_name": "Dana Whitfield", "line_ids": ["L1002"]})))
    s.say("Thanks, Dana. Could you first check that airplane mode is off on your phone?")
    s.user("")  # the user's own action: toggle_airplane_mode (tau2_results' user calls)
    s.say("Thanks. Let me look at your line.")
    s.user("Airplane mode is off now, still no data.")
    s.calls(C("get_details_by_id", {"id": "L1002"}, json.dumps({
        "line_id": "L1002", "status": "Suspended", "suspension_reason": "unpaid_bill"})))
    for _ in range(3):
        s.calls(C("resume_line", {"customer_id": "C1001", "line_id": "L1002"},
                  "Error: Line L1002 cannot be resumed: bill B2031 is unpaid", error=True))
    s.say("Your line L1002 is suspended for the unpaid bill B2031; once it is paid I can resume it.")
    s.user("OK, I'll pay it first. ###STOP###")
    return s


def coding_clean() -> Script:
    s = Script("coding-clean", "2026-03-01T11:20:00")
    s.user("Add a --dry-run flag to `pgmeter vacuum` that prints the tables it would vacuum.")
    s.calls(C("search_code", {"pattern": "def vacuum", "path": "src/pgmeter"},
              "src/pgmeter/cli.py:88:def vacuum(ctx, tables, full):"),
            C("read_file", {"path": "tests/test_cli.py", "start": 1, "end": 40},
              "import pytest\nfrom click.testing import CliRunner\nfrom pgmeter.cli import main\n"
              "\n\ndef test_vacuum_all(db):\n    r = CliRunner().invoke(main, [\"vacuum\"])\n"
              "    assert r.exit_code == 0"),
            text="Let me find the vacuum command and its tests.")
    s.calls(C("read_file", {"path": "src/pgmeter/cli.py", "start": 80, "end": 110},
              "80  @main.command()\n81  @click.argument(\"tables\", nargs=-1)\n"
              "82  @click.option(\"--full\", is_flag=True)\n88  def vacuum(ctx, tables, full):\n"
              "89      for t in tables or ctx.obj.db.list_tables():\n"
              "90          ctx.obj.db.vacuum(t, full=full)\n"))
    s.calls(C("edit_file", {"path": "src/pgmeter/cli.py", "line": 82,
                            "new": "@click.option(\"--full\", is_flag=True)\n"
                                   "@click.option(\"--dry-run\", is_flag=True, help=\"Print the "
                                   "tables instead of vacuuming them.\")"}, "ok"),
            C("edit_file", {"path": "src/pgmeter/cli.py", "line": 89,
                            "new": "    for t in tables or ctx.obj.db.list_tables():\n"
                                   "        if dry_run:\n            click.echo(t)\n"
                                   "            continue"}, "ok"))
    s.calls(C("edit_file", {"path": "tests/test_cli.py", "line": 9,
                            "new": "\n\ndef test_vacuum_dry_run(db):\n    r = CliRunner()."
                                   "invoke(main, [\"vacuum\", \"--dry-run\"])\n"
                                   "    assert \"events\" in r.output\n"}, "ok"))
    s.calls(C("run_tests", {"target": "tests/test_cli.py"},
              "FAILED tests/test_cli.py::test_vacuum_dry_run - TypeError: vacuum() got an "
              "unexpected keyword argument 'dry_run'\n1 failed, 6 passed", error=True))
    s.calls(C("edit_file", {"path": "src/pgmeter/cli.py", "line": 88,
                            "new": "def vacuum(ctx, tables, full, dry_run):"}, "ok"),
            text="The function signature needs the new parameter.")
    s.calls(C("run_tests", {"target": "tests/test_cli.py"}, "7 passed in 1.92s"))
    s.say("Added `--dry-run` to `pgmeter vacuum`: it prints each table it would vacuum and "
          "skips the work. New test `test_vacuum_dry_run` passes with the rest of tests/test_cli.py.")
    return s


def mini_swe_scattered() -> Script:
    """The same failing reproduction between two different edits: only a window sees it."""
    s = Script("mini-swe-scattered", "2026-02-14T10:05:00")
    s.user("<pr_description>\nConsider the following PR description:\nQuerySet.bulk_update() "
           "raises TypeError when a JSONField is set to None on some objects and to a dict on "
           "others.\n</pr_description>\n\n<instructions>\nYour task is to make changes to "
           "non-test files in the current directory to fix the issue.\n</instructions>")

    def bash(cmd: str, out: str, code: int = 0) -> C:
        return C("bash", {"command": cmd},
                 f"<returncode>{code}</returncode>\n<output>\n{out}\n</output>", error=code != 0)

    crash = ("Traceback (most recent call last):\n  File \"/testbed/reproduce.py\", line 14, in "
             "<module>\n    Item.objects.bulk_update(items, [\"data\"])\n  File \"/testbed/django/"
             "db/models/query.py\", line 712, in bulk_update\n    attr = Value(attr, "
             "output_field=field)\nTypeError: Object of type NoneType is not JSON serializable")
    s.calls(bash("grep -n \"def bulk_update\" -A40 django/db/models/query.py | sed -n 20,40p",
                 "700:            for obj in batch_objs:\n701:                attr = getattr(obj, "
                 "field.attname)\n702:                if not hasattr(attr, \"resolve_expression\"):"
                 "\n703:                    attr = Value(attr, output_field=field)"),
            text="Let me look at how bulk_update builds its CASE expressions.")
    s.calls(bash("cat > reproduce.py <<'EOF'\nimport django\n# minimal settings + Item(JSONField)\n"
                 "...\nItem.objects.bulk_update(items, [\"data\"])\nprint(\"OK\")\nEOF", ""),
            text="I'll write a reproduction script.")
    s.calls(bash("python reproduce.py", crash, 1))
    s.calls(bash("sed -i '703s/Value(attr, output_field=field)/Value(attr or {}, output_field=field)/' "
                 "django/db/models/query.py", ""),
            text="Treat None as an empty object when building the Value.")
    s.calls(bash("python reproduce.py", crash, 1))
    s.calls(bash("sed -i '703s/Value(attr or {}, output_field=field)/Value(attr, output_field=field)"
                 " if attr is not None else Value(None)/' django/db/models/query.py", ""),
            text="Maybe None needs a bare Value instead.")
    s.calls(bash("python reproduce.py", crash, 1))
    s.calls(bash("grep -n \"def get_db_prep_save\\|def get_prep_value\" "
                 "django/db/models/fields/json.py", "93:    def get_prep_value(self, value):\n"
                 "94:        if value is None:\n95:            return value"),
            text="The traceback is older than my edits: line 712 — the module may be stale. "
                 "Let me check how JSONField prepares values.")
    s.calls(bash("find . -name '*.pyc' -path '*models*' -delete && sed -i '703s/.*/                    "
                 "attr = Value(attr, output_field=field) if attr is not None else Value(None, "
                 "output_field=field)/' django/db/models/query.py && python reproduce.py", "OK"))
    s.calls(bash("python tests/runtests.py queries.test_bulk_update -v 1",
                 "Ran 41 tests in 0.612s\n\nOK"))
    s.calls(bash("echo COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT && git add -A && git diff --cached",
                 "COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT\ndiff --git a/django/db/models/query.py "
                 "b/django/db/models/query.py"))
    return s


def cline_test_rerun() -> Script:
    """Cline re-runs the same failing test command without changing anything in between."""
    s = Script("cline-rerun", "2026-03-10T14:02:00")
    s.user("The invoice PDF test fails since the font upgrade. Make it pass.")
    s.calls(C("read_file", {"path": "src/pdf/render.ts"},
              "import { registerFont } from './fonts'\n\nexport function render(inv: Invoice) {\n"
              "  registerFont('Inter', 'fonts/Inter-Regular.ttf')\n  return layout(inv)\n}\n"),
            text="I'll look at the renderer first.")
    s.calls(C("replace_in_file", {"path": "src/pdf/render.ts", "diff": "------- SEARCH\n"
              "  registerFont('Inter', 'fonts/Inter-Regular.ttf')\n=======\n"
              "  registerFont('Inter', 'fonts/Inter-4.0-Regular.ttf')\n+++++++ REPLACE"},
              "The content was successfully saved to src/pdf/render.ts."),
            text="The font file was renamed in the upgrade.")
    failing = ("FAIL test/pdf.test.ts\n  ● invoice PDF › matches the snapshot\n\n"
               "    expect(received).toMatchSnapshot()\n    Snapshot name: `invoice PDF matches the snapshot 1`\n"
               "    - Snapshot  - 1\n    + Received  + 1\n\nTests: 1 failed, 11 passed, 12 total")
    for note in ("Let me run the PDF tests.", "Running the tests again to confirm.",
                 "Let me run it once more.", "Re-running the test suite."):
        s.calls(C("execute_command", {"command": "npm test -- test/pdf.test.ts", "requires_approval": "false"},
                  failing), text=note)
    s.user("It's a snapshot test: update the snapshot after checking the diff is only the font.")
    s.calls(C("execute_command", {"command": "npm test -- test/pdf.test.ts -u", "requires_approval": "false"},
              "PASS test/pdf.test.ts\n › 1 snapshot updated.\nTests: 12 passed, 12 total"))
    s.say("The renderer now loads the renamed Inter 4.0 font file and the invoice snapshot is "
          "updated; the only change in it is the font.")
    return s


def export_quiet_poll() -> Script:
    """A background command polled with BashOutput: the same 'running' answer, over and over."""
    s = Script("export-poll", "2026-03-09T09:14:02")
    s.user("the staging deploy is stuck, watch it until it finishes")
    s.calls(C("Bash", {"command": "./scripts/deploy-status.sh --follow staging", "run_in_background": True,
                       "description": "Follow the staging deploy"},
              "Command running in background with ID: 7c41e2"),
            text="I'll follow the deploy in the background and poll it.")
    for _ in range(9):
        s.calls(C("BashOutput", {"bash_id": "7c41e2"},
                  "<status>running</status>\n\n<stdout>\nwaiting for rollout: 1 of 3 pods updated\n</stdout>"))
    s.calls(C("Bash", {"command": "kubectl -n staging get pods -l app=api"},
              "NAME                   READY   STATUS             RESTARTS\napi-6d9f7c9b8-k2x4q   0/1     ImagePullBackOff   0"),
            C("Bash", {"command": "kubectl -n staging get events --sort-by=.lastTimestamp | tail -5"},
              "Failed to pull image \"registry.example.invalid/api:9f3c\": not found", error=True),
            text="Still 1 of 3 pods. Checking the pods and the events in parallel:")
    s.say("The rollout is stuck: the new pod cannot pull `registry.example.invalid/api:9f3c` "
          "(ImagePullBackOff). The image tag in the deploy does not exist in the registry.")
    return s


def oh_v1_migration_retry() -> Script:
    """The same failing migration, run again and again after reading the same log."""
    s = Script("oh-v1-migrate", "2026-03-12T16:20:00")
    s.user("`alembic upgrade head` fails on the staging copy. Get the schema current.")
    err = ("sqlalchemy.exc.ProgrammingError: (psycopg.errors.DuplicateColumn) column \"currency\" of "
           "relation \"orders\" already exists\n[SQL: ALTER TABLE orders ADD COLUMN currency VARCHAR(3)]")
    s.calls(C("terminal", {"command": "alembic current"}, "0041_add_refunds (head is 0042_order_currency)"),
            C("file_editor", {"command": "view", "path": "/workspace/project/migrations/versions/0042_order_currency.py"},
              "     1\tdef upgrade():\n     2\t    op.add_column('orders', sa.Column('currency', sa.String(3)))"),
            text="Let me see where the schema is and what the next migration does.")
    for _ in range(3):
        s.calls(C("terminal", {"command": "alembic upgrade head"}, err, error=True))
        s.calls(C("terminal", {"command": "tail -n 5 logs/migrate.log"}, err, error=False))
    s.say("The `currency` column was added by hand on staging before 0042 ran; the migration "
          "needs to skip an existing column (or the column has to be dropped first).")
    return s


def long_refactor(target_calls: int = 2050) -> Script:
    """A long coding session (dashboard scale): many runs, mostly productive, a few loops.

    Edits go out as parallel batches, as they do from a model that plans a whole file's changes
    at once; that also keeps the file compact.
    """
    rng = random.Random(20260310)
    s = Script("long-refactor", "2026-03-10T08:00:00")
    modules = [f"{pkg}/{mod}.py" for pkg in ("billing", "ingest", "reports", "auth", "api")
               for mod in ("models", "service", "views", "tasks", "utils", "schemas", "errors",
                           "client", "cache")]
    calls = 0
    run = 0
    while calls < target_calls:
        mod = modules[run % len(modules)]
        run += 1
        path = f"src/{mod}"
        s.user(f"Port {path} to structured logging (event names, logger.bind).")
        uses = rng.randint(4, 12)
        s.calls(C("search_code", {"pattern": "log\\.(info|warning)\\(", "path": path},
                  f"{uses} matches"),
                C("read_file", {"path": path}, f"<{180 + run} lines>"))
        lines = [20 + 17 * k for k in range(uses)]
        s.calls(*[C("edit_file", {"path": path, "line": ln, "new": f"log.info(\"{mod[:-3]}.{k}\")"},
                    "ok") for k, ln in enumerate(lines)])
        calls += 2 + uses
        test = {"target": "tests/" + mod.replace("/", "/test_")}
        if run % 11 == 0:
            # A missing fixture: the same test run fails the same way three times.
            for _ in range(3):
                s.calls(C("run_tests", test, "1 failed: fixture 'frozen_clock' not found",
                          error=True))
            s.calls(C("search_code", {"pattern": "def frozen_clock", "path": "tests"},
                      "tests/conftest.py:41"))
            calls += 4
        elif run % 17 == 0:
            # Bounces between the test and the diff without changing anything.
            for _ in range(4):
                s.calls(C("run_tests", test, "2 failed: KeyError 'event'"))
                s.calls(C("git_diff", {"path": path}, f"<diff of {path}>"))
            calls += 8
        else:
            s.calls(C("run_tests", test, f"{rng.randint(8, 40)} passed"))
            calls += 1
        s.calls(C("git_commit", {"message": f"Structured logging in {mod}"},
                  f"[main {rng.getrandbits(28):07x}]"))
        calls += 1
        s.say(f"Ported {path}: {uses} log calls now use event names.")
    return s


AIDER_HISTORY = """
# aider chat started at 2026-03-11 09:12:40

> /home/kim/.local/bin/aider --model sonnet src/slugkit/slugify.py tests/test_slugify.py
> Aider v0.86.1
> Main model: anthropic/claude-sonnet-4-20250514 with diff edit format, infinite output
> Weak model: anthropic/claude-3-5-haiku-20241022
> Git repo: .git with 38 files
> Repo-map: using 4096 tokens, auto refresh
> Added src/slugkit/slugify.py to the chat.
> Added tests/test_slugify.py to the chat.

#### slugify("Crème brûlée") returns "crme-brle". Keep accented letters as their ASCII base letter instead of dropping them.

The accents are dropped because the filter keeps only `[a-z0-9]` after lowercasing. Decomposing
the text first (NFKD) splits "è" into "e" plus a combining mark, and the marks can then be
removed before filtering.

src/slugkit/slugify.py
```python
<<<<<<< SEARCH
import re
=======
import re
import unicodedata
>>>>>>> REPLACE
```

src/slugkit/slugify.py
```python
<<<<<<< SEARCH
def slugify(text: str) -> str:
    text = text.lower()
=======
def slugify(text: str) -> str:
    text = unicodedata.normalize("NFKD", text)
    text = "".join(ch for ch in text if not unicodedata.combining(ch))
    text = text.lower()
>>>>>>> REPLACE
```

tests/test_slugify.py
```python
<<<<<<< SEARCH
def test_spaces_become_dashes():
=======
def test_accents_keep_base_letters():
    assert slugify("Crème brûlée") == "creme-brulee"


def test_spaces_become_dashes():
>>>>>>> REPLACE
```

> Tokens: 4.3k sent, 301 received. Cost: $0.02 message, $0.02 session.
> Applied edit to src/slugkit/slugify.py
> Applied edit to src/slugkit/slugify.py
> Applied edit to tests/test_slugify.py
> Commit 3a9c1f2 fix: Transliterate accented letters in slugify

#### /run pytest tests/test_slugify.py -q

> .....                                                                    [100%]
> 5 passed in 0.04s
> Add 0.1k tokens of command output to the chat? (Y)es/(N)o [Yes]: n

#### Good. Add a line about it to CHANGELOG.md under Unreleased.

> CHANGELOG.md
> Add file to the chat? (Y)es/(N)o/(D)on't ask again [Yes]: y

CHANGELOG.md
```markdown
<<<<<<< SEARCH
## Unreleased
=======
## Unreleased

- `slugify` keeps accented letters as their ASCII base letter ("Crème" → "creme").
>>>>>>> REPLACE
```

You can check the whole suite with:

```bash
pytest -q
```

> Tokens: 5.0k sent, 96 received. Cost: $0.02 message, $0.04 session.
> Applied edit to CHANGELOG.md
> Commit 8d02e7b docs: Note slugify transliteration in the changelog
> pytest -q
> Run shell command? (Y)es/(N)o/(D)on't ask again [Yes]: n
""".lstrip()


# ---------------------------------------------------------------------------------------------
# Files
# ---------------------------------------------------------------------------------------------

CODER_SYSTEM = ("You are a careful software engineer working in a local repository. Use the "
                "tools to read, search and edit files and to run tests; keep changes minimal.")
SWE_SYSTEM = ("SETTING: You are an autonomous programmer, and you're working directly in the "
              "command line with a special interface.\n\nThe special interface consists of a "
              "file editor that shows you 100 lines of a file at a time.")
AIRLINE_SYSTEM = ("# Airline Agent Policy\n\nThe current time is 2024-05-15 15:00:00 EST.\n\nAs "
                  "an airline agent, you can help users book, modify, or cancel flight "
                  "reservations. Before updating the booking database you must list the action "
                  "details and obtain explicit user confirmation (yes) to proceed.")
CC_PARENT = "3f9c1e62-58a4-4d0b-9b7e-2a6d41c0e8f3"


def write_all(root: Path = HERE) -> list[Path]:
    written: list[Path] = []

    def put(rel: str, obj: Any, kind: str = "json", indent: int | None = 1) -> None:
        path = root / rel
        if kind == "jsonl":
            write_jsonl(path, obj)
        else:
            write_json(path, obj, indent)
        written.append(path)

    put("otlp/otel-collector-traces.jsonl", otlp_requests(
        otel_rollout_poll(), conversation="conv_5f1c9a2e", service="deploy-bot", agent="deployer",
        model="gpt-4.1-2025-04-14"), "jsonl")
    put(OPENCODE_FILE, opencode_export(
        opencode_invalid_edit(), session_id=OPENCODE_SESSION, project_id="5c1e9b7a3d2f4e6a8b0c1d2e3f4a5b6c7d8e9f0a",
        directory="/home/dev/relay", provider="anthropic", model="claude-sonnet-4-5"), indent=2)
    (root / "aider").mkdir(parents=True, exist_ok=True)
    (root / "aider/.aider.chat.history.md").write_text(AIDER_HISTORY, encoding="utf-8")
    written.append(root / "aider/.aider.chat.history.md")
    put("openai_chat/support_order_clean.json",
        openai_chat_messages(support_clean(), RETAIL_SYSTEM))
    put("openai_chat/support_duplicate_refund.json",
        {"model": "gpt-4.1-2025-04-14",
         "messages": openai_chat_messages(support_duplicate_batch(), RETAIL_SYSTEM)})
    put("openai_chat/cli_flag_clean.jsonl",
        openai_chat_messages(coding_clean(), CODER_SYSTEM), "jsonl")
    put("openai_chat/tau_airline_results.json", [
        {"task_id": 17, "reward": 0.0, "info": {"user_id": "omar_haddad_4410"},
         "traj": openai_chat_messages(tau_multirun(), AIRLINE_SYSTEM), "trial": 0},
        {"task_id": 23, "reward": 1.0, "info": {"user_id": "ana_lima_2203"},
         "traj": openai_chat_messages(tau_short(), AIRLINE_SYSTEM), "trial": 0}])
    mini = openai_chat_messages(mini_swe_scattered(), "You are a helpful assistant that can "
                                "interact with a computer shell to solve programming tasks.")
    put("openai_chat/django__django-15022.traj.json", {
        "info": {"model_stats": {"instance_cost": 0.0412, "api_calls": 11},
                 "config": {"agent": {"step_limit": 250, "cost_limit": 3.0},
                            "model": {"model_name": "deepseek/deepseek-chat"}},
                 "mini_version": "2.2.7", "exit_status": "Submitted",
                 "submission": "diff --git a/django/db/models/query.py b/django/db/models/query.py"},
        "messages": mini + [{"role": "exit", "content": "diff --git a/django/db/models/query.py "
                                                        "b/django/db/models/query.py"}],
        "trajectory_format": "mini-swe-agent-1.1", "instance_id": "django__django-15022"})
    put("tau2/telecom_results.json", tau2_results(
        [(tau2_unpaid_line(), {"task_id": "[mobile_data_issue]unpaid_bill", "trial": 0,
                               "termination_reason": "user_stop", "reward_info": {"reward": 0.0}},
          {3: [C("toggle_airplane_mode", {}, "Airplane Mode: OFF")]})],
        agent_llm="gpt-4.1-2025-04-14", domain="telecom"), indent=2)
    put("openai_responses/oncall_restart_cycle.json", openai_responses_items(ops_aab_cycle()))
    put("anthropic/helpdesk_resend_email.json",
        anthropic_request(support_ladder(), "You are Halcyon Helpdesk's support assistant. "
                          "Use the tools to look up customers and send templated emails.",
                          "claude-sonnet-4-5-20250929"))
    cc_kw = {"session_id": CC_PARENT, "cwd": "/home/dev/ledger", "branch": "fix/flaky-flush"}
    put(f"claude_code/{CC_PARENT}.jsonl",
        claude_code_lines(coding_period3(), model="claude-opus-4-6", **cc_kw), "jsonl")
    put(f"claude_code/{CC_PARENT}/subagents/agent-b71d0c4.jsonl",
        claude_code_lines(coding_subagent(), model="claude-haiku-4-5-20251001",
                          agent_id="b71d0c4", **cc_kw), "jsonl")
    put("codex/rollout-2026-03-07T13-22-10-0199c2a4-7e31-7b52-9d0e-5b8f2c1a6e47.jsonl",
        codex_lines(codex_migrate_halt(), session_id="0199c2a4-7e31-7b52-9d0e-5b8f2c1a6e47",
                    cwd="/home/sam/invoicer", model="gpt-5.1-codex"), "jsonl")
    put("codex/rollout-2025-08-14T16-02-00-5b0e7c1d-2f84-4a39-9e61-d03c8b7a4f25.jsonl",
        codex_legacy_lines(codex_backfill_watch(), session_id="5b0e7c1d-2f84-4a39-9e61-d03c8b7a4f25",
                           cwd="/home/ana/billing"), "jsonl")
    put("gemini/session-2026-03-08T08-29-6d2b9e40.jsonl",
        gemini_records(gemini_ci_poll(), session_id="6d2b9e40-1a7c-4f3e-8b25-c09a7d14e6f1",
                       project_hash=hashlib.sha256(b"/home/ines/pgmeter").hexdigest(),
                       model="gemini-2.5-pro", rewind=(1, gemini_rewound())), "jsonl")
    put("gemini/session-2026-02-20T17-05-a41f03c9.json",
        gemini_legacy(gemini_quiet_poll(), session_id="a41f03c9-55e2-4b1d-9e07-3c8f6a2d1b90",
                      project_hash=hashlib.sha256(b"/srv/exporter").hexdigest(),
                      model="gemini-2.5-flash"), indent=2)
    put("atif/browser_ticket_queue.trajectory.json",
        atif_trajectory(browser_navigate_poll(), session_id="b3c1d2e4-0f5a-4e6b-8c7d-9a1b2c3d4e5f",
                        agent="browser-use", version="0.7.2", model="gpt-4.1-mini"))
    put("atif/refactor_long.trajectory.json",
        atif_trajectory(long_refactor(), session_id="7e0d5c3b-2a19-4f86-b1e4-d8c6a9f02b37",
                        agent="terminus-2", version="1.3.0", model="gpt-5-mini",
                        metrics=False), indent=None)
    put("swe_agent/parsedate__parsedate-212.traj",
        swe_agent_traj(swe_abab(), system=SWE_SYSTEM, instance="parsedate__parsedate-212"))
    oh_meta = {"agent_class": "CodeActAgent", "model_name": "claude-sonnet-4-5-20250929",
               "max_iterations": 100, "dataset": "tidewater-bench", "eval_note": "v0.59"}
    put("openhands/output.jsonl", [
        {"instance_id": iid, "instruction": sc.events[0][1], "metadata": oh_meta,
         "history": openhands_events(sc, model="claude-sonnet-4-5-20250929"),
         "test_result": {"git_patch": "diff --git a/src/pgmeter/…"}, "error": None,
         "metrics": {"accumulated_cost": cost}}
        for iid, sc, cost in (("tidewater__pgmeter-481", oh_prodded(), 0.31),
                              ("tidewater__pgmeter-502", oh_view_loop(), 0.27))], "jsonl")
    put("openhands/clone_no_ssh_key.json",
        openhands_events(openhands_stagnation(), model="claude-sonnet-4-5-20250929"))
    api, ui, meta = cline_task(cline_test_rerun(), model="claude-sonnet-4-5-20250929",
                               retries_before={4: 3})
    task = f"cline/saoudrizwan.claude-dev/tasks/{CLINE_TASK}"
    put(f"{task}/api_conversation_history.json", api, indent=None)
    put(f"{task}/ui_messages.json", ui, indent=None)
    put(f"{task}/task_metadata.json", meta, indent=None)
    state, events = openhands_v1_conversation(oh_v1_migration_retry(), conversation_id=OH_V1_ID,
                                              model="litellm_proxy/claude-sonnet-4-5-20250929")
    conv = f"openhands_v1/{OH_V1_ID.replace('-', '')}"
    put(f"{conv}/base_state.json", state, indent=2)
    for i, ev in enumerate(events):
        put(f"{conv}/events/event-{i:05d}-{ev['id']}.json", ev, indent=2)
    (root / "claude_export").mkdir(parents=True, exist_ok=True)
    (root / "claude_export/staging-deploy-export.md").write_text(
        claude_export_md(export_quiet_poll(), session_id=EXPORT_SESSION, project="/home/dev/platform/deploy"),
        encoding="utf-8")
    written.append(root / "claude_export/staging-deploy-export.md")
    return written


OPENCODE_SESSION = "ses_3a9f0c1d2e4bQm7Lx2Vt8Rk5Wd"
OPENCODE_FILE = f"opencode/{OPENCODE_SESSION}.json"
CLINE_TASK = "1773151320000"
OH_V1_ID = "9a4e7c21-3b5d-4f86-a0c9-1e2d3f4a5b6c"
OH_V1_FILE = f"openhands_v1/{OH_V1_ID.replace('-', '')}/base_state.json"
EXPORT_SESSION = "4e2b7a90-1c3d-4f5e-8a6b-7c8d9e0f1a2b"
CLINE_FILE = f"cline/saoudrizwan.claude-dev/tasks/{CLINE_TASK}/ui_messages.json"
CC_FILE = f"claude_code/{CC_PARENT}.jsonl"
CC_SUB = f"claude_code/{CC_PARENT}/subagents/agent-b71d0c4.jsonl"
SHOWS: dict[tuple[str, str], str] = {
    (OPENCODE_FILE, OPENCODE_SESSION):
        "harness errors: OpenCode reroutes an `edit` without `oldString` to its `invalid` tool "
        "4×, nothing runs and the same refusal comes back (`opencode export` JSON)",
    ("aider/.aider.chat.history.md", "1"):
        "clean: coding agent, 3 runs (edit blocks, a `/run`, a changelog edit)",
    ("anthropic/helpdesk_resend_email.json", "0"):
        "ladder warn → block → halt: support agent re-sends the same email, each send 'works'",
    ("atif/browser_ticket_queue.trajectory.json", "b3c1d2e4-0f5a-4e6b-8c7d-9a1b2c3d4e5f"):
        "costly poll: browser agent reloads a waiting room with `browser_navigate`; the page "
        "changes every time, the ceiling still halts it",
    ("atif/refactor_long.trajectory.json", "7e0d5c3b-2a19-4f86-b1e4-d8c6a9f02b37"):
        "long session (2,053 calls, 166 runs) for the dashboard's scale; a failing test retried "
        "every 11th run, a test/diff bounce every 17th",
    (CC_SUB, "b71d0c4"):
        "clean: the Explore subagent's sidechain (parallel Grep batch), linked to its parent",
    (CC_FILE, CC_PARENT):
        "period-3 retry cycle: Edit → pytest → git commit, a pre-commit hook reverts the edit",
    ("codex/rollout-2026-03-07T13-22-10-0199c2a4-7e31-7b52-9d0e-5b8f2c1a6e47.jsonl",
     "0199c2a4-7e31-7b52-9d0e-5b8f2c1a6e47"):
        "run-length halt on a mutating tool: `npm run db:migrate` fails the same way 3×; "
        "run 1, after the user answers, is clean",
    ("codex/rollout-2025-08-14T16-02-00-5b0e7c1d-2f84-4a39-9e61-d03c8b7a4f25.jsonl",
     "5b0e7c1d-2f84-4a39-9e61-d03c8b7a4f25"):
        "A→B→A→B with progress: job status / job logs while a backfill runs, answers change "
        "every time, so no cycle; only the answer-blind window halts (legacy bare-item rollout)",
    ("gemini/session-2026-02-20T17-05-a41f03c9.json", "a41f03c9-55e2-4b1d-9e07-3c8f6a2d1b90"):
        "quiet poll: `read_file` of a log that never changes, 18×, reaches the observation "
        "allowance (older single-JSON file)",
    ("gemini/session-2026-03-08T08-29-6d2b9e40.jsonl", "6d2b9e40-1a7c-4f3e-8b25-c09a7d14e6f1"):
        "read-only poll whose answer keeps changing (CI run progress), 22×: no run-length halt; "
        "a `$rewindTo` drops 3 failed pushes the user rewound",
    ("openai_chat/cli_flag_clean.jsonl", "0"):
        "clean: coding agent adds a CLI flag (JSONL of messages), one failing test then a fix",
    ("openai_chat/support_duplicate_refund.json", "0"):
        "identical calls inside one batch: the same `issue_refund` twice in one parallel batch "
        "({\"messages\"} document)",
    ("openai_chat/support_order_clean.json", "0"):
        "clean: retail support agent, 5 runs (JSON list of messages)",
    ("openai_chat/tau_airline_results.json", "task-17.trial-0"):
        "user turns break runs: 5 runs (0–4); the same lookup across a user turn is not a "
        "repeat; "
        "run 3 halts on a declined booking retried 3× (tau-bench results list)",
    ("openai_chat/tau_airline_results.json", "task-23.trial-0"):
        "clean: the second record of the same tau-bench file",
    ("openai_chat/django__django-15022.traj.json", "django__django-15022"):
        "scattered repeats: the same failing `python reproduce.py` between two different edits; "
        "the window and progress see it (mini-swe-agent trajectory)",
    ("tau2/telecom_results.json", "task-[mobile_data_issue]unpaid_bill.trial-0"):
        "identical failing call: `resume_line` refused 3× (`error: true` on tau2's tool message); "
        "the user's own `toggle_airplane_mode` is the person's turn, not an agent call "
        "(tau2-bench results file)",
    ("openai_responses/oncall_restart_cycle.json", "0"):
        "A→A→B cycle: status, status, restart — the pod crash-loops the same way each time",
    ("openhands/output.jsonl", "tidewater__pgmeter-481"):
        "a loop no default policy flags: the eval's stand-in user answers each identical "
        "'done' message, and every user turn clears stagnation (output.jsonl, one instance "
        "per line)",
    ("openhands/output.jsonl", "tidewater__pgmeter-502"):
        "a read that looks like a write: `str_replace_editor` view of the same lines 5×; the "
        "name is not read-only, so the mutating thresholds apply",
    ("openhands/clone_no_ssh_key.json", "0"):
        "prose stagnation: the agent repeats the same 'cannot clone' message 8× without a tool",
    (CLINE_FILE, CLINE_TASK):
        "run-length halt: Cline re-runs the same failing `npm test` 4× without changing anything "
        "(XML tool tags in the API history; 3 provider retries are events, not calls); run 1, "
        "after the person's feedback, is clean",
    ("claude_export/staging-deploy-export.md", EXPORT_SESSION):
        "quiet poll: `BashOutput` of a background deploy answers 'running' 9× (Claude markdown "
        "export, one section per transcript line)",
    (OH_V1_FILE, OH_V1_ID):
        "A→B→A→B: `alembic upgrade head` fails, the agent reads the same log, and runs it again "
        "(OpenHands V1 conversation folder, one event per file)",
    ("otlp/otel-collector-traces.jsonl", "conv_5f1c9a2e"):
        "quiet poll over OpenTelemetry: `kubectl rollout status` 7× with the same timeout "
        "(OTLP JSON from the Collector's file exporter, spans out of order)",
    ("swe_agent/parsedate__parsedate-212.traj", "0"):
        "A→B→A→B cycle: `python reproduce.py` / `open core.py 58`, same answers, 4×",
}


def main(argv: list[str]) -> int:
    if "--table" in argv or "--readme" in argv:
        import golden  # the pipeline is needed only here, not to write the files

        tables = golden.render_tables(golden.pipeline_rows(HERE), SHOWS)
        if "--readme" in argv:
            # Rewrites only the marked tables; check every changed cell against design.md.
            readme = HERE / "README.md"
            readme.write_text(golden.splice_tables(readme.read_text("utf-8"), tables), "utf-8")
        else:
            print(tables)
        return 0
    for p in write_all():
        print(f"{p.relative_to(HERE)}  {p.stat().st_size:,} bytes")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
