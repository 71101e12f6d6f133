"""Stand-in model servers on 127.0.0.1 for driving the real agent CLIs (Claude Code, Gemini CLI,
Codex CLI, OpenCode) in tests: each model turn asks for the same shell call again, so an
unguarded agent loops.

The wire formats are the public APIs the CLIs speak: the Anthropic Messages API (streamed as
server-sent events when the request says `"stream": true`), the Gemini API
(`:streamGenerateContent?alt=sse` and `:generateContent`), the OpenAI Responses API (Codex CLI:
`/v1/responses`, streamed) and Chat Completions (OpenCode through an OpenAI-compatible provider:
`/v1/chat/completions`, streamed or not). Every request body is kept, so a
test can count the model requests made and read what the model was told (tool results and any
added context).
"""

from __future__ import annotations

import json
import threading
import time
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


@dataclass
class Recorded:
    requests: list[tuple[str, dict]] = field(default_factory=list)  # (path, body) of every POST
    times: list[float] = field(default_factory=list)  # when each arrived (time.monotonic)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def add(self, path: str, body: dict) -> int:
        with self.lock:
            self.requests.append((path, body))
            self.times.append(time.monotonic())
            return len(self.requests)


class _Server:
    """A server thread; `url` is its base URL, `recorded` what it was sent."""

    def __init__(self, handler: type[BaseHTTPRequestHandler]) -> None:
        self.recorded = Recorded()
        handler.recorded = self.recorded  # type: ignore[attr-defined]
        handler.owner = self  # type: ignore[attr-defined]
        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), handler)
        self.httpd.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}"
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)

    def __enter__(self) -> _Server:
        self.thread.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


class _Handler(BaseHTTPRequestHandler):
    recorded: Recorded
    owner: Any

    def log_message(self, *args: Any) -> None:  # quiet
        pass

    def _body(self) -> dict:
        n = int(self.headers.get("content-length") or 0)
        raw = self.rfile.read(n) if n else b""
        try:
            value = json.loads(raw or b"{}")
        except ValueError:
            value = {"$raw": raw.decode("utf-8", "replace")}
        return value if isinstance(value, dict) else {"$value": value}

    def _json(self, value: Any, status: int = 200) -> None:
        data = json.dumps(value).encode()
        self.send_response(status)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def _sse(self, events: list[tuple[str | None, Any]], done: bool = False) -> None:
        self.send_response(200)
        self.send_header("content-type", "text/event-stream")
        self.send_header("cache-control", "no-cache")
        self.send_header("connection", "close")
        self.end_headers()
        for name, data in events:
            chunk = (f"event: {name}\n" if name else "") + f"data: {json.dumps(data)}\n\n"
            self.wfile.write(chunk.encode())
            self.wfile.flush()
        if done:  # Chat Completions streams end with a [DONE] line
            self.wfile.write(b"data: [DONE]\n\n")
            self.wfile.flush()
        self.close_connection = True

    def do_GET(self) -> None:  # noqa: N802
        self._json({})

    def do_HEAD(self) -> None:  # noqa: N802
        self.send_response(200)
        self.end_headers()


# ── Anthropic Messages API ───────────────────────────────────────────────────────────────────


class _Anthropic(_Handler):
    def do_POST(self) -> None:  # noqa: N802
        body = self._body()
        path = self.path.split("?", 1)[0]
        if path.endswith("/count_tokens"):
            self._json({"input_tokens": 100})
            return
        if not path.endswith("/v1/messages"):
            self._json({"type": "error", "error": {"type": "not_found_error", "message": path}}, 404)
            return
        tools = [t.get("name") for t in body.get("tools") or [] if isinstance(t, dict)]
        if self.owner.tool not in tools:  # a side request (title, summary, ...): plain text
            self._message(body, [{"type": "text", "text": "ok"}], "end_turn")
            return
        n = self.recorded.add(path, body)
        if n > self.owner.max_turns:  # an unguarded agent would go on: the test caps it
            self._message(body, [{"type": "text", "text": "I give up."}], "end_turn")
            return
        block = {"type": "tool_use", "id": f"toolu_01Stand{n:06d}In", "name": self.owner.tool,
                 "input": self.owner.tool_input}
        self._message(body, [block], "tool_use")

    def _message(self, body: dict, content: list[dict], stop: str) -> None:
        model = body.get("model") or "claude-sonnet-4-5"
        usage = {"input_tokens": 100, "output_tokens": 10, "cache_creation_input_tokens": 0,
                 "cache_read_input_tokens": 0}
        msg = {"id": f"msg_{id(content):x}", "type": "message", "role": "assistant", "model": model,
               "content": content, "stop_reason": stop, "stop_sequence": None, "usage": usage}
        if not body.get("stream"):
            self._json(msg)
            return
        events: list[tuple[str | None, Any]] = [
            ("message_start", {"type": "message_start", "message": {**msg, "content": [], "stop_reason": None}})]
        for i, block in enumerate(content):
            if block["type"] == "tool_use":
                events.append(("content_block_start", {"type": "content_block_start", "index": i,
                                                       "content_block": {**block, "input": {}}}))
                events.append(("content_block_delta", {"type": "content_block_delta", "index": i, "delta": {
                    "type": "input_json_delta", "partial_json": json.dumps(block["input"])}}))
            else:
                events.append(("content_block_start", {"type": "content_block_start", "index": i,
                                                       "content_block": {"type": "text", "text": ""}}))
                events.append(("content_block_delta", {"type": "content_block_delta", "index": i,
                                                       "delta": {"type": "text_delta", "text": block["text"]}}))
            events.append(("content_block_stop", {"type": "content_block_stop", "index": i}))
        events.append(("message_delta", {"type": "message_delta", "delta": {"stop_reason": stop,
                                                                            "stop_sequence": None},
                                         "usage": {"output_tokens": 10}}))
        events.append(("message_stop", {"type": "message_stop"}))
        self._sse(events)


class AnthropicServer(_Server):
    """Every main-loop request (one offering `tool`) is answered with the same tool call, up to
    `max_turns`; then plain text ends the run."""

    def __init__(self, tool: str = "Bash", tool_input: dict | None = None, max_turns: int = 12) -> None:
        self.tool = tool
        self.tool_input = tool_input or {"command": "cat missing.txt", "description": "Show missing.txt"}
        self.max_turns = max_turns
        super().__init__(type("AnthropicHandler", (_Anthropic,), {}))

    def tool_results(self, body: dict) -> list[dict]:
        """The tool_result blocks of a request's last user message, and any text beside them."""
        messages = body.get("messages") or []
        last = messages[-1] if messages else {}
        content = last.get("content") if isinstance(last, dict) else None
        return [b for b in content if isinstance(b, dict)] if isinstance(content, list) else []


# ── Gemini API ───────────────────────────────────────────────────────────────────────────────


class _Gemini(_Handler):
    def do_POST(self) -> None:  # noqa: N802
        body = self._body()
        path = self.path.split("?", 1)[0]
        if path.endswith(":countTokens"):
            self._json({"totalTokens": 100})
            return
        if not (path.endswith(":streamGenerateContent") or path.endswith(":generateContent")):
            self._json({"error": {"code": 404, "message": path, "status": "NOT_FOUND"}}, 404)
            return
        declared = [d.get("name") for t in body.get("tools") or [] if isinstance(t, dict)
                    for d in t.get("functionDeclarations") or [] if isinstance(d, dict)]
        if self.owner.tool not in declared:  # a side request (routing, next speaker, ...)
            self._reply(path, [{"text": self.owner.side_text(body)}])
            return
        n = self.recorded.add(path, body)
        if n > self.owner.max_turns:
            self._reply(path, [{"text": "I give up."}])
            return
        self._reply(path, [{"functionCall": {"id": f"call-{n}", "name": self.owner.tool,
                                             "args": self.owner.tool_input}}])

    def _reply(self, path: str, parts: list[dict]) -> None:
        response = {"candidates": [{"content": {"role": "model", "parts": parts}, "finishReason": "STOP",
                                    "index": 0}],
                    "usageMetadata": {"promptTokenCount": 100, "candidatesTokenCount": 10, "totalTokenCount": 110},
                    "modelVersion": "gemini-2.5-flash"}
        if path.endswith(":streamGenerateContent"):
            self._sse([(None, response)])
        else:
            self._json(response)


class GeminiServer(_Server):
    """Every main-loop request (one declaring `tool`) is answered with the same function call,
    up to `max_turns`; side requests get a JSON-ish text answer."""

    def __init__(self, tool: str = "run_shell_command", tool_input: dict | None = None, max_turns: int = 12) -> None:
        self.tool = tool
        self.tool_input = tool_input or {"command": "cat missing.txt", "description": "Show missing.txt"}
        self.max_turns = max_turns
        super().__init__(type("GeminiHandler", (_Gemini,), {}))

    def side_text(self, body: dict) -> str:
        # Gemini CLI's side calls (model routing, "who speaks next") ask for JSON.
        config = body.get("generationConfig") or {}
        if config.get("responseMimeType") == "application/json":
            return json.dumps({"reasoning": "stand-in", "next_speaker": "user", "model_choice": "flash"})
        return "ok"


# ── OpenAI Responses API (Codex CLI) ─────────────────────────────────────────────────────────


class _Responses(_Handler):
    def do_POST(self) -> None:  # noqa: N802
        body = self._body()
        path = self.path.split("?", 1)[0]
        if not path.endswith("/responses"):
            self._json({"error": {"message": path, "type": "not_found"}}, 404)
            return
        offered = [t.get("name") for t in body.get("tools") or [] if isinstance(t, dict)]
        tool = next((t for t in self.owner.shell_tools if t in offered), None)
        if tool is None:  # a side request (a title, a summary): plain text
            self._reply([{"type": "message", "role": "assistant", "id": "msg_side",
                          "content": [{"type": "output_text", "text": "ok"}]}], 0)
            return
        n = self.recorded.add(path, body)
        if n > self.owner.max_turns:
            self._reply([{"type": "message", "role": "assistant", "id": f"msg_{n}",
                          "content": [{"type": "output_text", "text": "I give up."}]}], n)
            return
        args = {"cmd": self.owner.command} if tool == "exec_command" else (
            {"command": ["bash", "-lc", self.owner.command]} if tool == "shell" else {"command": self.owner.command})
        self._reply([{"type": "function_call", "id": f"fc_{n}", "call_id": f"call_stand_in_{n}", "name": tool,
                      "arguments": json.dumps(args)}], n)

    def _reply(self, items: list[dict], n: int) -> None:
        rid = f"resp_{n}_{id(items):x}"
        usage = {"input_tokens": 100, "input_tokens_details": None, "output_tokens": 10,
                 "output_tokens_details": None, "total_tokens": 110}
        events: list[tuple[str | None, Any]] = [("response.created", {"type": "response.created",
                                                                      "response": {"id": rid}})]
        for item in items:
            events.append(("response.output_item.added", {"type": "response.output_item.added", "item": item}))
            events.append(("response.output_item.done", {"type": "response.output_item.done", "item": item}))
        events.append(("response.completed", {"type": "response.completed", "response": {"id": rid, "usage": usage}}))
        self._sse(events)


class ResponsesServer(_Server):
    """Every main-loop request (one offering a shell tool: Codex's `exec_command`, or the older
    `shell_command` / `shell`) is answered with a call running `command`, up to `max_turns`."""

    shell_tools = ("exec_command", "shell_command", "shell")

    def __init__(self, command: str = "cat missing.txt", max_turns: int = 12) -> None:
        self.command = command
        self.max_turns = max_turns
        super().__init__(type("ResponsesHandler", (_Responses,), {}))

    @staticmethod
    def tool_outputs(body: dict) -> list[dict]:
        """The request's input items after its last function call's output began: the outputs
        and any message (a hook's added context) the model reads for the previous call."""
        items = [i for i in body.get("input") or [] if isinstance(i, dict)]
        calls = [k for k, i in enumerate(items) if i.get("type") == "function_call"]
        return items[calls[-1] + 1:] if calls else []


# ── OpenAI Chat Completions (OpenCode) ───────────────────────────────────────────────────────


class _Chat(_Handler):
    def do_POST(self) -> None:  # noqa: N802
        body = self._body()
        path = self.path.split("?", 1)[0]
        if not path.endswith("/chat/completions"):
            self._json({"error": {"message": path, "type": "not_found"}}, 404)
            return
        offered = [(t.get("function") or {}).get("name") for t in body.get("tools") or [] if isinstance(t, dict)]
        if self.owner.tool not in offered:  # a side request (the session title)
            self._reply(body, None, "ok")
            return
        n = self.recorded.add(path, body)
        if n > self.owner.max_turns:
            self._reply(body, None, "I give up.")
            return
        self._reply(body, {"id": f"call_stand_in_{n}", "name": self.owner.tool,
                           "arguments": json.dumps({"command": self.owner.command, "description": "Run it"})}, None)

    def _reply(self, body: dict, call: dict | None, text: str | None) -> None:
        usage = {"prompt_tokens": 100, "completion_tokens": 10, "total_tokens": 110}
        finish = "tool_calls" if call else "stop"
        tool_calls = [{"index": 0, "id": call["id"], "type": "function",
                       "function": {"name": call["name"], "arguments": call["arguments"]}}] if call else None
        if not body.get("stream"):
            message: dict[str, Any] = {"role": "assistant", "content": text}
            if tool_calls:
                message["tool_calls"] = [{k: v for k, v in c.items() if k != "index"} for c in tool_calls]
            self._json({"id": "chatcmpl-stand-in", "object": "chat.completion", "created": 0, "model": body.get("model"),
                        "choices": [{"index": 0, "message": message, "finish_reason": finish}], "usage": usage})
            return

        def chunk(delta: dict, reason: str | None = None) -> tuple[None, dict]:
            out = {"id": "chatcmpl-stand-in", "object": "chat.completion.chunk", "created": 0, "model": body.get("model"),
                   "choices": [{"index": 0, "delta": delta, "finish_reason": reason}]}
            return None, ({**out, "usage": usage} if reason else out)

        events = [chunk({"role": "assistant", "content": ""}),
                  chunk({"tool_calls": tool_calls} if tool_calls else {"content": text}), chunk({}, finish)]
        self._sse(events, done=True)


class ChatCompletionsServer(_Server):
    """Every main-loop request (one offering `tool`) is answered with a call of it running
    `command`, up to `max_turns`; side requests get plain text."""

    def __init__(self, tool: str = "bash", command: str = "cat missing.txt", max_turns: int = 12) -> None:
        self.tool = tool
        self.command = command
        self.max_turns = max_turns
        super().__init__(type("ChatHandler", (_Chat,), {}))
