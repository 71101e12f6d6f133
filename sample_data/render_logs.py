"""Renderers for API request logs and traces: a Script as OTLP JSON requests (the Collector's
file exporter), OpenAI chat messages, OpenAI Responses items and an Anthropic Messages request."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any

from script import Ids, Script, dumps


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
