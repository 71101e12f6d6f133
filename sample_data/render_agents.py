"""Renderers for coding agents' own session files: Claude Code JSONL (and its markdown export),
OpenCode's `opencode export` JSON, Codex CLI rollouts (current and legacy), Gemini CLI sessions
(JSONL and the older single JSON). Each copies the shape of real files or the tool's source."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any

from script import Ids, Script, dumps

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


def copilot_events(s: Script, *, session_id: str, cwd: str, model: str, version: str = "1.0.63") -> list[dict]:
    """GitHub Copilot CLI session events (~/.copilot/session-state/<id>/events.jsonl): one event
    a line {type, data, id, timestamp, parentId}, as the SDK's session-events schema defines them;
    a reply's calls are its toolRequests, each run as tool.execution_start / _complete."""
    ids = Ids(s.name, s.start, step_s=2.0)
    out: list[dict] = []
    parent: str | None = None

    def emit(kind: str, data: dict, ephemeral: bool = False) -> None:
        nonlocal parent
        eid = ids.uuid()
        row: dict = {"type": kind, "data": data, "id": eid, "timestamp": ids.tick(), "parentId": parent}
        if ephemeral:
            row["ephemeral"] = True
        out.append(row)
        parent = eid

    emit("session.start", {"sessionId": session_id, "version": 1, "producer": "copilot-agent",
                           "copilotVersion": version, "startTime": ids.tick(0), "context": {"cwd": cwd},
                           "alreadyInUse": False, "remoteSteerable": False})
    emit("session.model_change", {"newModel": model, "reasoningEffort": None, "contextTier": None})
    turn = 0
    for ev in s.events:
        if ev[0] == "user":
            emit("user.message", {"content": ev[1], "transformedContent": f"<current_datetime>{ids.tick(0)}"
                                  f"</current_datetime>\n\n{ev[1]}", "attachments": [],
                                  "interactionId": ids.uuid()})
            continue
        emit("assistant.turn_start", {"turnId": str(turn)})
        if ev[0] == "prose":
            emit("assistant.message", {"messageId": ids.uuid(), "model": model, "content": ev[1],
                                       "toolRequests": [], "turnId": str(turn), "outputTokens": 96})
        else:
            _, text, calls = ev
            cids = ["toolu_vrtx_" + ids.hex(24) for _ in calls]
            emit("assistant.message", {"messageId": ids.uuid(), "model": model, "content": text,
                                       "toolRequests": [{"toolCallId": cid, "name": c.name, "arguments": c.args,
                                                         "type": "function"} for cid, c in zip(cids, calls, strict=True)],
                                       "turnId": str(turn), "outputTokens": 140})
            for cid, c in zip(cids, calls, strict=True):
                emit("tool.execution_start", {"toolCallId": cid, "toolName": c.name, "arguments": c.args,
                                              "turnId": str(turn)})
                if c.error:
                    emit("tool.execution_complete", {"toolCallId": cid, "model": model, "turnId": str(turn),
                                                     "success": False,
                                                     "error": {"message": c.answer, "code": "denied"}})
                else:
                    emit("tool.execution_complete", {"toolCallId": cid, "model": model, "turnId": str(turn),
                                                     "success": True,
                                                     "result": {"content": c.answer, "detailedContent": c.answer}})
        emit("assistant.turn_end", {"turnId": str(turn)})
        turn += 1
    emit("session.shutdown", {"shutdownType": "routine", "totalPremiumRequests": turn})
    return out
