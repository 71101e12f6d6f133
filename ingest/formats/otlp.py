"""OpenTelemetry traces: OTLP JSON files (the Collector's file exporter, one
`ExportTraceServiceRequest` per line, or one request as a whole document), the flat span
exports of Phoenix (one span object per line: `context.span_id`, `span_kind`, `attributes`) and
Langfuse's JSON downloads (a trace with its `observations`, a session with its `traces`, or a
list / JSONL of observations; observation type TOOL is a tool call, GENERATION a chat span, level
ERROR an error).

What is a tool call, from two conventions:
- GenAI semantic conventions: a span with `gen_ai.operation.name = execute_tool`; name
  `gen_ai.tool.name`, id `gen_ai.tool.call.id`, arguments `gen_ai.tool.call.arguments`, answer
  `gen_ai.tool.call.result`; the session is `gen_ai.conversation.id`.
- OpenInference: a span with `openinference.span.kind = TOOL`; name `tool.name` (else the span
  name), arguments `input.value` (the invocation; `tool.parameters` when that is absent), id
  `tool_call.id`, answer `output.value`; the session is `session.id`.
A span whose status is ERROR answers with is_error (its result text, else the status message, else
the exception event's message).

A session is the conversation / session id, inherited from the nearest ancestor span in the same
trace that carries one (agent frameworks put it on the agent span, not on each tool span), else
the trace id. Spans are ordered by start time; one tool span = one batch of one call (spans do
not say which calls one model reply made together). User turns come from the input messages of
chat / LLM / agent spans: each user message not seen before in the session (counted, so a
repeated "try again" is a new turn) becomes a UserTurn at that span's start.

The same span sent twice (same trace and span id) counts once. Spans of one session may be spread
over the whole file, so the file is grouped whole: memory is one file's spans (the receiver rolls
its spool files daily to bound this).
"""

from __future__ import annotations

import base64
import binascii
import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from loopledger.events import (
    Answer,
    Answers,
    Batch,
    Call,
    Item,
    ReadError,
    SessionInfo,
    SessionStart,
    TurnUsage,
    UserTurn,
)
from loopledger.formats._common import (
    as_text,
    bad,
    head_text,
    iter_jsonl,
    load_json,
    parse_args,
    title_of,
)
from loopledger.formats.anthropic import add_usage

NAME = "otlp"
DESCRIPTION = "OpenTelemetry traces: OTLP JSON (Collector file exporter), Phoenix span exports"

# OTLP status codes: JSON encoders write the number or the enum name.
_ERROR = (2, "STATUS_CODE_ERROR", "ERROR")
_SESSION_KEYS = ("gen_ai.conversation.id", "session.id", "langfuse.session.id")
_LLM_OPS = ("chat", "text_completion", "generate_content", "invoke_agent", "create_agent")


@dataclass(slots=True)
class Span:
    trace_id: str
    span_id: str
    parent_id: str
    name: str
    start_ns: int
    end_ns: int
    attrs: dict[str, Any]
    error: bool = False
    status_message: str = ""
    events: list[dict[str, Any]] = field(default_factory=list)
    line: int | None = None
    resource: dict[str, Any] = field(default_factory=dict)


# ── OTLP JSON → Span ───────────────────────────────────────────────────────────────────────────

# Deeper than this an attribute's kvlist / array value is a fault, not data: the value becomes
# TOO_DEEP (the span and the rest of the file are read as usual), so the recursive conversion
# below stays far from Python's recursion limit. (Deep tool arguments, a JSON string, are parsed
# as they are; redact_event caps them for everything after the reader.)
MAX_VALUE_DEPTH = 64
TOO_DEEP = f"[TOO DEEP: nested over {MAX_VALUE_DEPTH} levels]"


def depth_over(value: Any, limit: int = MAX_VALUE_DEPTH) -> bool:
    """Whether a JSON-like value nests deeper than `limit`: a dict or list `limit` containers
    inside it. Iterative (any depth is safe), one level of containers at a time: a receiver
    checks every request with it, and a list per level costs a third of a stack entry per value."""
    level = [value] if isinstance(value, dict | list) else []
    depth = 0
    while level:
        if depth >= limit:
            return True
        below: list[Any] = []
        more = below.extend
        for v in level:
            more([x for x in (v.values() if isinstance(v, dict) else v) if isinstance(x, dict | list)])
        level = below
        depth += 1
    return False


def _any_value(v: Any, _depth: int = 0) -> Any:
    """An OTLP AnyValue ({"stringValue": …} etc.) as a plain Python value."""
    if not isinstance(v, dict):
        return v
    if _depth > MAX_VALUE_DEPTH:
        return TOO_DEEP
    for key in ("stringValue", "boolValue", "doubleValue"):
        if key in v:
            return v[key]
    if "intValue" in v:
        try:
            return int(v["intValue"])  # JSON encodes int64 as a string
        except (TypeError, ValueError):
            return v["intValue"]
    if "arrayValue" in v:
        return [_any_value(x, _depth + 1) for x in (v["arrayValue"] or {}).get("values", []) or []]
    if "kvlistValue" in v:
        return _attributes((v["kvlistValue"] or {}).get("values", []), _depth + 1)
    if "bytesValue" in v:
        return v["bytesValue"]
    return None


def _attributes(kvs: Any, _depth: int = 0) -> dict[str, Any]:
    if isinstance(kvs, dict):  # already flat (Phoenix, hand-written JSON)
        return dict(kvs)
    out: dict[str, Any] = {}
    for kv in kvs if isinstance(kvs, list) else []:
        if isinstance(kv, dict) and isinstance(kv.get("key"), str):
            out[kv["key"]] = _any_value(kv.get("value"), _depth)
    return out


_HEX_ID = re.compile(r"(?:[0-9a-fA-F]{16}){1,2}")


def _hex_id(value: Any) -> str:
    """Trace/span ids: hex in OTLP JSON; base64 where a protobuf was turned into JSON."""
    if not isinstance(value, str) or not value:
        return ""
    text = value.strip()
    if _HEX_ID.fullmatch(text):  # 16 or 32 hex digits (a regex: this runs several times per span)
        return text.lower()
    try:
        return base64.b64decode(text, validate=True).hex()
    except (binascii.Error, ValueError):
        return text


def _ns(value: Any) -> int:
    try:
        return int(value)
    except (TypeError, ValueError):
        return 0


def spans_of_request(req: Any) -> list[Span]:
    """The spans of one ExportTraceServiceRequest in OTLP JSON (raises ValueError if not one)."""
    if not isinstance(req, dict) or not isinstance(req.get("resourceSpans"), list):
        raise ValueError("not an OTLP trace request (no resourceSpans list)")
    out: list[Span] = []
    for rs in req["resourceSpans"]:
        if not isinstance(rs, dict):
            raise ValueError("resourceSpans holds a non-object")
        resource = _attributes((rs.get("resource") or {}).get("attributes"))
        for ss in rs.get("scopeSpans") or rs.get("instrumentationLibrarySpans") or []:
            for sp in (ss or {}).get("spans") or []:
                if not isinstance(sp, dict):
                    raise ValueError("spans holds a non-object")
                status = sp.get("status") or {}
                out.append(Span(
                    trace_id=_hex_id(sp.get("traceId")), span_id=_hex_id(sp.get("spanId")),
                    parent_id=_hex_id(sp.get("parentSpanId")), name=str(sp.get("name") or ""),
                    start_ns=_ns(sp.get("startTimeUnixNano")), end_ns=_ns(sp.get("endTimeUnixNano")),
                    attrs=_attributes(sp.get("attributes")),
                    error=status.get("code") in _ERROR, status_message=str(status.get("message") or ""),
                    events=[{"name": e.get("name"), **_attributes(e.get("attributes"))}
                            for e in sp.get("events") or [] if isinstance(e, dict)],
                    resource=resource,
                ))
    return out


def _iso_ns(text: Any) -> int:
    if not isinstance(text, str) or not text:
        return 0
    try:
        dt = datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        return 0
    if dt.tzinfo is None:
        dt = dt.replace(tzinfo=UTC)
    return int(dt.timestamp() * 1e9)


def span_of_flat(rec: dict[str, Any]) -> Span:
    """A Phoenix-style flat span: {name, context: {trace_id, span_id}, parent_id, span_kind,
    start_time, end_time, status_code, status_message, attributes}."""
    ctx = rec.get("context") or {}
    attrs = rec.get("attributes") or {}
    attrs = _flatten(attrs) if isinstance(attrs, dict) else _attributes(attrs)
    if rec.get("span_kind") and "openinference.span.kind" not in attrs:
        attrs["openinference.span.kind"] = rec["span_kind"]
    return Span(
        trace_id=str(ctx.get("trace_id") or rec.get("trace_id") or ""),
        span_id=str(ctx.get("span_id") or rec.get("span_id") or ""),
        parent_id=str(rec.get("parent_id") or ""), name=str(rec.get("name") or ""),
        start_ns=_iso_ns(rec.get("start_time")), end_ns=_iso_ns(rec.get("end_time")),
        attrs=attrs, error=str(rec.get("status_code") or "").upper() == "ERROR",
        status_message=str(rec.get("status_message") or ""),
        events=[e for e in rec.get("events") or [] if isinstance(e, dict)],
    )


def _flatten(d: dict[str, Any], prefix: str = "") -> dict[str, Any]:
    """{"tool": {"name": "x"}} → {"tool.name": "x"}: Phoenix nests the dotted attribute names."""
    out: dict[str, Any] = {}
    for k, v in d.items():
        key = f"{prefix}{k}"
        if isinstance(v, dict) and v:
            out.update(_flatten(v, key + "."))
        else:
            out[key] = v
    return out


def span_of_observation(o: dict[str, Any], session: str | None = None) -> Span:
    """A Langfuse observation as a span, in the OpenInference words the rest of this reader reads."""
    kind = str(o.get("type") or "").upper()
    attrs: dict[str, Any] = {}
    if kind == "TOOL":
        attrs.update({"openinference.span.kind": "TOOL", "tool.name": o.get("name") or "tool"})
        if o.get("input") is not None:
            attrs["input.value"] = o["input"] if isinstance(o["input"], str) else as_text(o["input"])
        if o.get("output") is not None:
            attrs["output.value"] = as_text(o["output"])
    elif kind in ("GENERATION", "AGENT"):
        attrs["openinference.span.kind"] = "LLM"
        msgs = o.get("input")
        if isinstance(msgs, dict) and isinstance(msgs.get("messages"), list):
            msgs = msgs["messages"]
        if isinstance(msgs, list):
            for i, m in enumerate(x for x in msgs if isinstance(x, dict)):
                attrs[f"llm.input_messages.{i}.message.role"] = m.get("role")
                attrs[f"llm.input_messages.{i}.message.content"] = as_text(m.get("content", ""))
        if o.get("model"):
            attrs["llm.model_name"] = o["model"]
    sid = session or o.get("sessionId")
    if sid:
        attrs["session.id"] = sid
    return Span(
        trace_id=str(o.get("traceId") or ""), span_id=str(o.get("id") or ""),
        parent_id=str(o.get("parentObservationId") or ""), name=str(o.get("name") or ""),
        start_ns=_iso_ns(o.get("startTime")), end_ns=_iso_ns(o.get("endTime")), attrs=attrs,
        error=str(o.get("level") or "").upper() == "ERROR", status_message=str(o.get("statusMessage") or ""),
    )


def _langfuse(doc: Any) -> list[Span] | None:
    """Spans of a Langfuse download, or None when `doc` is not one."""
    if isinstance(doc, dict) and isinstance(doc.get("traces"), list):  # a session
        return [s for t in doc["traces"] if isinstance(t, dict)
                for s in _langfuse({"trace": t, "observations": t.get("observations") or []}) or []]
    if isinstance(doc, dict) and isinstance(doc.get("observations"), list):  # a trace
        trace = doc.get("trace") if isinstance(doc.get("trace"), dict) else doc
        session = trace.get("sessionId")
        return [span_of_observation(o, session) for o in doc["observations"] if isinstance(o, dict)]
    return None


# ── Span → events ──────────────────────────────────────────────────────────────────────────────

def _is_tool(s: Span) -> bool:
    return (s.attrs.get("gen_ai.operation.name") == "execute_tool"
            or str(s.attrs.get("openinference.span.kind", "")).upper() == "TOOL")


def _args(s: Span) -> tuple[Any, bool]:
    a = s.attrs
    raw = a.get("gen_ai.tool.call.arguments")
    if raw is None:
        raw = a.get("input.value", a.get("tool.parameters"))
    if raw is None:
        return {}, False
    if isinstance(raw, str):
        return parse_args(raw)  # however deep: redact_event caps it (a marker with a digest)
    return raw, False


def _answer_text(s: Span) -> str:
    a = s.attrs
    for key in ("gen_ai.tool.call.result", "output.value"):
        if a.get(key) is not None:
            return as_text(a[key])
    if s.error:
        for e in s.events:
            if e.get("name") == "exception" and e.get("exception.message"):
                return f"{e.get('exception.type', 'Error')}: {e['exception.message']}"
        return s.status_message or "error"
    return ""


def _iso(ns: int) -> str | None:
    if not ns:
        return None
    return datetime.fromtimestamp(ns / 1e9, UTC).isoformat(timespec="microseconds").replace("+00:00", "Z")


def _user_messages(s: Span) -> list[str]:
    """User messages in a chat / LLM / agent span's input, in order."""
    a = s.attrs
    out: list[str] = []
    raw = a.get("gen_ai.input.messages")
    if isinstance(raw, str):
        try:
            raw = parse_args(raw)[0]
        except Exception:  # noqa: BLE001 — a malformed attribute is just not a message list
            raw = None
    if isinstance(raw, list):
        for m in raw:
            if isinstance(m, dict) and m.get("role") == "user":
                parts = m.get("parts") or m.get("content") or ""
                if isinstance(parts, list):
                    out.append(" ".join(str(p.get("content", p.get("text", ""))) for p in parts
                                        if isinstance(p, dict)))
                else:
                    out.append(as_text(parts))
        return out
    i = 0  # OpenInference: llm.input_messages.<i>.message.role / .content
    while f"llm.input_messages.{i}.message.role" in a:
        if a[f"llm.input_messages.{i}.message.role"] == "user":
            out.append(as_text(a.get(f"llm.input_messages.{i}.message.content", "")))
        i += 1
    return out


def _is_llm(s: Span) -> bool:
    return (s.attrs.get("gen_ai.operation.name") in _LLM_OPS
            or str(s.attrs.get("openinference.span.kind", "")).upper() in ("LLM", "AGENT"))


def own_session(s: Span) -> str | None:
    """The session id a span carries itself (None: it inherits one, see `session_of`)."""
    for k in _SESSION_KEYS:
        if s.attrs.get(k):
            return str(s.attrs[k])
    return None


def session_of(s: Any, by_id: Any) -> str:
    """A span's session: its own id, else its nearest ancestor's in `by_id` ((trace, span) →
    anything with trace_id, parent_id and an `own` session or attrs), else its trace id."""
    node = s
    hops = 0
    while node is not None and hops < 1000:  # bounded: a cyclic parent chain is a fault
        own = node.own if hasattr(node, "own") else own_session(node)
        if own:
            return own
        node = by_id.get((node.trace_id, node.parent_id)) if node.parent_id else None
        hops += 1
    return s.trace_id or "0"


def sort_key(s: Span) -> tuple[int, int, str]:
    """A session's spans are read in this order."""
    return (s.start_ns, s.end_ns, s.span_id)


def group_sessions(spans: Iterable[Span]) -> dict[str, list[Span]]:
    """Session key → its spans ordered by start time (first-seen duplicates win)."""
    seen: dict[tuple[str, str], Span] = {}
    for s in spans:
        seen.setdefault((s.trace_id, s.span_id), s)
    out: dict[str, list[Span]] = {}
    for s in seen.values():
        out.setdefault(session_of(s, seen), []).append(s)
    for v in out.values():
        v.sort(key=sort_key)
    return out


def _tokens(a: dict, *keys: str) -> int | None:
    for k in keys:
        v = a.get(k)
        if isinstance(v, int | float) and not isinstance(v, bool) and v >= 0:
            return int(v)
        if isinstance(v, str) and v.isdigit():
            return int(v)
    return None


def span_usage(s: Span) -> TurnUsage | None:
    """An LLM span's `gen_ai.usage.*` (GenAI semantic conventions; input counts cache reads)
    and its model (`gen_ai.response.model`, else `gen_ai.request.model`)."""
    a = s.attrs
    model = a.get("gen_ai.response.model") or a.get("gen_ai.request.model") or a.get("llm.model_name")
    provider = a.get("gen_ai.provider.name") or a.get("gen_ai.system")
    usage = TurnUsage(str(model) if model else None,
                      _tokens(a, "gen_ai.usage.input_tokens", "gen_ai.usage.prompt_tokens", "llm.token_count.prompt"),
                      _tokens(a, "gen_ai.usage.output_tokens", "gen_ai.usage.completion_tokens",
                              "llm.token_count.completion"),
                      _tokens(a, "gen_ai.usage.cache_read.input_tokens", "gen_ai.usage.cache_read_input_tokens"),
                      _tokens(a, "gen_ai.usage.cache_creation.input_tokens", "gen_ai.usage.cache_creation_input_tokens"),
                      None, _PROVIDERS.get(str(provider)) if provider else None)
    return usage if usage.known else None


# GenAI semconv provider names → genai-prices provider ids, where they differ.
_PROVIDERS = {"openai": "openai", "anthropic": "anthropic", "gcp.gemini": "google", "gcp.vertex_ai": "google",
              "gemini": "google", "aws.bedrock": "aws", "azure.ai.openai": "azure", "mistral_ai": "mistral",
              "groq": "groq", "deepseek": "deepseek", "x_ai": "x-ai", "cohere": "cohere"}


@dataclass
class SessionRead:
    """What a session's spans, read in order, have said so far: enough to read more of them
    (the receiver continues a session from here when new spans sort after the last one)."""

    users_seen: int = 0
    title: str = ""
    model: Any = None
    agent: Any = None
    usage: TurnUsage | None = None  # the model calls' usage since the last tool call


def span_items(s: Span, st: SessionRead) -> list[Item]:
    """The events of one span, the next in its session's order (`st` is updated)."""
    if st.model is None:
        st.model = s.attrs.get("gen_ai.request.model") or s.attrs.get("llm.model_name") or None
    if st.agent is None:
        st.agent = s.attrs.get("gen_ai.agent.name") or s.resource.get("service.name") or None
    events: list[Item] = []
    if _is_llm(s):
        st.usage = add_usage(st.usage, span_usage(s))
        msgs = _user_messages(s)
        for text in msgs[st.users_seen:]:
            events.append(UserTurn(text, _iso(s.start_ns), s.line))
            st.title = st.title or title_of(text)
        st.users_seen = max(st.users_seen, len(msgs))
    if _is_tool(s):
        name = str(s.attrs.get("gen_ai.tool.name") or s.attrs.get("tool.name") or s.name or "tool")
        call_id = str(s.attrs.get("gen_ai.tool.call.id") or s.attrs.get("tool_call.id") or s.span_id)
        args, malformed = _args(s)
        # The model call that asked for this tool precedes it: its usage rides on this call.
        events.append(Batch((Call(call_id, name, args, malformed),), ts=_iso(s.start_ns), line=s.line,
                            usage=st.usage))
        st.usage = None
        events.append(Answers((Answer(call_id, _answer_text(s), s.error, _iso(s.end_ns)),), line=s.line))
    return events


def session_start(key: str, spans: list[Span], st: SessionRead) -> SessionStart:
    return SessionStart(SessionInfo(key, NAME, title=st.title or key, agent=st.agent, model=st.model,
                                    started_at=_iso(spans[0].start_ns) if spans else None),
                        spans[0].line if spans else None)


def session_items(key: str, spans: list[Span], st: SessionRead | None = None) -> Iterator[Item]:
    """A session's items from its spans in order (`st`, if given, is left at their end)."""
    st = st if st is not None else SessionRead()
    events = [ev for s in spans for ev in span_items(s, st)]
    yield session_start(key, spans, st)
    yield from events


# ── the reader ────────────────────────────────────────────────────────────────────────────────

def sniff(head: bytes) -> bool:
    text = head_text(head)[:4096]
    if '"resourceSpans"' in text:
        return True
    if '"observations"' in text and ('"traceId"' in text or '"sessionId"' in text):
        return True  # Langfuse trace / session download
    return '"context"' in text and '"span_id"' in text and ('"span_kind"' in text or '"trace_id"' in text)


def _spans(path: Path) -> Iterator[Span | ReadError]:
    text_head = head_text(path.open("rb").read(4096))
    if text_head.startswith("{") and '"resourceSpans"' in text_head:
        # JSONL of requests (the Collector's file exporter), or one request as a document.
        rows = list(iter_jsonl(path))
        if len(rows) == 1 and isinstance(rows[0][1], ReadError):
            doc = load_json(path)
            rows = [(1, doc)]
        for line, rec in rows:
            if isinstance(rec, ReadError):
                yield rec
                continue
            try:
                spans = spans_of_request(rec)
            except ValueError as e:
                yield bad(path, line, str(e), rec)
                continue
            for s in spans:
                s.line = line
                yield s
        return
    if text_head.startswith("[") or (text_head.startswith("{") and '"observations"' in text_head):
        doc = load_json(path)
        if isinstance(doc, ReadError):
            yield doc
            return
        spans = _langfuse(doc)
        if spans is not None:
            yield from spans
            return
        records: Iterable[tuple[int, Any]] = enumerate(doc if isinstance(doc, list) else [doc], 1)
    else:
        records = iter_jsonl(path)
    for line, rec in records:
        if isinstance(rec, ReadError):
            yield rec
        elif isinstance(rec, dict) and isinstance(rec.get("resourceSpans"), list):
            for s in spans_of_request(rec):
                s.line = line
                yield s
        elif isinstance(rec, dict) and (rec.get("context") or rec.get("span_id")):
            s = span_of_flat(rec)
            s.line = line
            yield s
        elif isinstance(rec, dict) and "traceId" in rec and "type" in rec and "id" in rec:
            s = span_of_observation(rec)  # one row of Langfuse's observations export
            s.line = line
            yield s
        else:
            yield bad(path, line, "neither an OTLP request nor a span object", rec)


def read(path: Path | str) -> Iterator[Item]:
    path = Path(path)
    spans: list[Span] = []
    for item in _spans(path):
        if isinstance(item, ReadError):
            yield item
        else:
            spans.append(item)
    for key, group in group_sessions(spans).items():
        yield from session_items(key, group)
