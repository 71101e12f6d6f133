"""OpenTelemetry trace files: OTLP JSON (Collector file exporter) and Phoenix flat span exports."""

from __future__ import annotations

import json

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from loopledger.events import Answers, Batch, ReadError, SessionStart, UserTurn
from loopledger.formats import read, sniff

T1 = "5b8efff798038103d269b633813fc60c"
T2 = "0af7651916cd43dd8448eb211c80319c"


def kv(key, value):
    if isinstance(value, bool):
        v = {"boolValue": value}
    elif isinstance(value, int):
        v = {"intValue": str(value)}  # OTLP JSON writes int64 as a string
    else:
        v = {"stringValue": value}
    return {"key": key, "value": v}


def span(trace, sid, name, start, parent="", attrs=(), error=False, message=""):
    out = {"traceId": trace, "spanId": sid, "name": name, "kind": 1,
           "startTimeUnixNano": str(1_764_500_000_000_000_000 + start * 1_000_000_000),
           "endTimeUnixNano": str(1_764_500_000_000_000_000 + start * 1_000_000_000 + 500_000_000),
           "attributes": [kv(k, v) for k, v in attrs]}
    if parent:
        out["parentSpanId"] = parent
    if error:
        out["status"] = {"code": 2, "message": message}
    return out


def request(*spans, service="billing-agent"):
    return {"resourceSpans": [{"resource": {"attributes": [kv("service.name", service)]},
                               "scopeSpans": [{"scope": {"name": "openai-agents"}, "spans": list(spans)}]}]}


def tool(trace, sid, start, name, args, result, parent="a000000000000001", error=False, call_id=None):
    attrs = [("gen_ai.operation.name", "execute_tool"), ("gen_ai.tool.name", name),
             ("gen_ai.tool.call.arguments", json.dumps(args))]
    if result is not None:
        attrs.append(("gen_ai.tool.call.result", result))
    if call_id:
        attrs.append(("gen_ai.tool.call.id", call_id))
    return span(trace, sid, f"execute_tool {name}", start, parent, attrs, error, "tool raised")


def chat(trace, sid, start, users, parent="a000000000000001"):
    msgs = [{"role": "user", "parts": [{"type": "text", "content": u}]} for u in users]
    return span(trace, sid, "chat gpt-4o", start, parent,
                [("gen_ai.operation.name", "chat"), ("gen_ai.request.model", "gpt-4o"),
                 ("gen_ai.input.messages", json.dumps(msgs))])


def agent(trace, start, conversation):
    return span(trace, "a000000000000001", "invoke_agent billing", start, "",
                [("gen_ai.operation.name", "invoke_agent"), ("gen_ai.agent.name", "billing"),
                 ("gen_ai.conversation.id", conversation)])


def items_of(path):
    return list(read(path))


def test_collector_file_export_becomes_sessions_calls_answers_and_turns(tmp_path):
    # Two lines (two export batches), written out of start order: tool spans end first.
    f = tmp_path / "traces.jsonl"
    line1 = request(
        chat(T1, "c000000000000001", 1, ["refund order 7"]),
        tool(T1, "b000000000000002", 3, "refund", {"order": 7}, None, error=True, call_id="call_2"),
        tool(T1, "b000000000000001", 2, "get_order", {"order": 7}, '{"status": "paid"}', call_id="call_1"),
    )
    line2 = request(
        agent(T1, 0, "conv-42"),
        chat(T1, "c000000000000002", 4, ["refund order 7", "try again"]),
        tool(T1, "b000000000000003", 5, "refund", {"order": 7}, "Error: gateway timeout", error=True),
    )
    f.write_text(json.dumps(line1) + "\n" + json.dumps(line2) + "\n")
    assert sniff(f) == "otlp"
    items = items_of(f)
    assert not [i for i in items if isinstance(i, ReadError)]
    starts = [i for i in items if isinstance(i, SessionStart)]
    assert [s.info.key for s in starts] == ["conv-42"]  # inherited from the agent span
    assert starts[0].info.agent == "billing" and starts[0].info.model == "gpt-4o"
    kinds = [(type(i).__name__, i.text if isinstance(i, UserTurn) else None) for i in items[1:]
             if not isinstance(i, Answers)]
    assert kinds == [("UserTurn", "refund order 7"), ("Batch", None), ("Batch", None),
                     ("UserTurn", "try again"), ("Batch", None)]
    batches = [i for i in items if isinstance(i, Batch)]
    assert [(b.calls[0].name, b.calls[0].args, b.calls[0].id) for b in batches] == [
        ("get_order", {"order": 7}, "call_1"), ("refund", {"order": 7}, "call_2"),
        ("refund", {"order": 7}, "b000000000000003")]
    answers = [a for i in items if isinstance(i, Answers) for a in i.answers]
    assert [(a.call_id, a.text, a.is_error) for a in answers] == [
        ("call_1", '{"status": "paid"}', False), ("call_2", "tool raised", True),
        ("b000000000000003", "Error: gateway timeout", True)]
    assert batches[0].ts == "2025-11-30T10:53:22.000000Z"


def test_spans_without_a_conversation_are_one_session_per_trace_and_duplicates_count_once(tmp_path):
    f = tmp_path / "t.json"
    a = tool(T1, "b000000000000001", 1, "ls", {}, "x", parent="")
    b = tool(T2, "b000000000000002", 2, "ls", {}, "y", parent="")
    f.write_text(json.dumps(request(a, b, a)))  # one request as a whole document; `a` resent
    starts = [i.info.key for i in items_of(f) if isinstance(i, SessionStart)]
    assert sorted(starts) == sorted([T1, T2])
    assert sum(isinstance(i, Batch) for i in items_of(f)) == 2


def test_openinference_tool_spans_in_a_phoenix_export(tmp_path):
    f = tmp_path / "phoenix_spans.jsonl"
    rows = [
        {"name": "agent", "context": {"trace_id": "t1", "span_id": "s1"}, "parent_id": None,
         "span_kind": "AGENT", "start_time": "2025-11-30T10:00:00+00:00", "end_time": "2025-11-30T10:00:09+00:00",
         "status_code": "OK", "attributes": {"session": {"id": "sess-9"}, "llm": {"input_messages": []}}},
        {"name": "llm", "context": {"trace_id": "t1", "span_id": "s2"}, "parent_id": "s1", "span_kind": "LLM",
         "start_time": "2025-11-30T10:00:01+00:00", "end_time": "2025-11-30T10:00:02+00:00",
         "status_code": "OK", "attributes": {"llm.input_messages.0.message.role": "user",
                                             "llm.input_messages.0.message.content": "weather in Oslo?",
                                             "llm.model_name": "claude-sonnet"}},
        {"name": "get_weather", "context": {"trace_id": "t1", "span_id": "s3"}, "parent_id": "s1",
         "span_kind": "TOOL", "start_time": "2025-11-30T10:00:03+00:00", "end_time": "2025-11-30T10:00:04+00:00",
         "status_code": "ERROR", "status_message": "HTTP 503",
         "attributes": {"tool": {"name": "get_weather"}, "input": {"value": '{"city": "Oslo"}'}}},
    ]
    f.write_text("\n".join(json.dumps(r) for r in rows) + "\n")
    assert sniff(f) == "otlp"
    items = items_of(f)
    assert items[0].info.key == "sess-9" and items[0].info.model == "claude-sonnet"
    assert isinstance(items[1], UserTurn) and items[1].text == "weather in Oslo?"
    assert items[2].calls[0].name == "get_weather" and items[2].calls[0].args == {"city": "Oslo"}
    (ans,) = items[3].answers
    assert ans.is_error and ans.text == "HTTP 503"


def test_a_line_that_is_not_a_request_is_quarantined_with_its_line_and_the_rest_is_read(tmp_path):
    f = tmp_path / "traces.jsonl"
    good = request(tool(T1, "b000000000000001", 1, "ls", {}, "x", parent=""))
    f.write_text(json.dumps(good) + "\n{\"resourceSpans\": 5}\n{not json\n" + json.dumps(good) + "\n")
    items = items_of(f)
    errors = [i for i in items if isinstance(i, ReadError)]
    assert [(e.line, "resourceSpans" in e.message or "JSON" in e.message) for e in errors] == [(2, True), (3, True)]
    assert sum(isinstance(i, Batch) for i in items) == 1  # line 4 resends line 1's span


@settings(max_examples=60, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.lists(st.tuples(st.sampled_from(["ls", "grep", "refund"]), st.integers(0, 3), st.booleans()),
                min_size=1, max_size=12), st.binary(max_size=40))
def test_fuzzed_requests_read_every_span_or_say_where_not(tmp_path, calls, junk):
    spans = [tool(T1, f"b{n:015x}", n, name, {"n": arg}, f"out {n}", parent="", error=err)
             for n, (name, arg, err) in enumerate(calls)]
    f = tmp_path / "fuzz.jsonl"
    f.write_bytes(json.dumps(request(*spans)).encode() + b"\n" + junk.replace(b"\n", b" ") + b"\n")
    items = items_of(f)
    batches = [i for i in items if isinstance(i, Batch)]
    # Every span read, in start order, whatever the junk line did (a ReadError or nothing).
    assert [b.calls[0].name for b in batches] == [c[0] for c in calls]
    assert all(isinstance(i, ReadError) and i.line == 2 for i in items if isinstance(i, ReadError))


@pytest.mark.parametrize("text", ['{"resourceSpans": [{"scopeSpans": [{"spans": [5]}]}]}',
                                  '{"resourceSpans": ["x"]}'])
def test_wrong_types_inside_a_request_are_quarantined(tmp_path, text):
    f = tmp_path / "bad.jsonl"
    f.write_text(text + "\n")
    (err,) = items_of(f)
    assert isinstance(err, ReadError) and err.line == 1 and "non-object" in err.message


def test_langfuse_session_download(tmp_path):
    obs = [
        {"id": "o1", "traceId": "tr1", "type": "GENERATION", "name": "chat", "model": "gpt-4o",
         "startTime": "2025-11-30T10:00:00.000Z", "input": [{"role": "user", "content": "cancel my flight"}]},
        {"id": "o2", "traceId": "tr1", "type": "TOOL", "name": "cancel_reservation", "parentObservationId": "o1",
         "startTime": "2025-11-30T10:00:01.000Z", "input": {"reservation_id": "HAT030"},
         "output": "Error: reservation not found", "level": "ERROR", "statusMessage": "not found"},
        {"id": "o3", "traceId": "tr1", "type": "SPAN", "name": "format", "startTime": "2025-11-30T10:00:02.000Z"},
    ]
    f = tmp_path / "session-s-77.json"
    f.write_text(json.dumps({"id": "s-77", "traces": [{"id": "tr1", "sessionId": "s-77", "observations": obs}]}))
    assert sniff(f) == "otlp"
    items = items_of(f)
    assert items[0].info.key == "s-77" and items[0].info.model == "gpt-4o"
    assert isinstance(items[1], UserTurn) and items[1].text == "cancel my flight"
    assert items[2].calls[0].name == "cancel_reservation" and items[2].calls[0].args == {"reservation_id": "HAT030"}
    (ans,) = items[3].answers
    assert ans.is_error and ans.text == "Error: reservation not found"
    assert len(items) == 4  # the plain SPAN is neither a call nor a turn
