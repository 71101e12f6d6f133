"""The receiver's two shortcuts on the way from a request body to spool lines, each held against
the slow way it replaces: protobuf.to_dict against protobuf's own `MessageToDict` (key for key,
in the same order), and spool.pieces given the spans decoding read against pieces reading them
again (the same lines, the same spans), on requests holding secrets, hostile texts and values
nested past the redaction's depth."""

from __future__ import annotations

import json

import orjson
import pytest
from google.protobuf.json_format import MessageToDict
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from loopledger.formats import otlp
from loopledger.receive import http, protobuf
from loopledger.receive import spool as spooling
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.proto.common.v1.common_pb2 import AnyValue, KeyValue

from bench.gen_hostile import adversarial
from tests.test_receive import request, tool_span
from tests.test_redact import SECRETS

# ── protobuf → OTLP JSON ────────────────────────────────────────────────────────────────────


def _value(depth: int = 0) -> st.SearchStrategy[AnyValue]:
    leaves = st.one_of(
        st.text(max_size=20).map(lambda s: AnyValue(string_value=s)),
        st.booleans().map(lambda b: AnyValue(bool_value=b)),
        st.integers(-(1 << 63), (1 << 63) - 1).map(lambda i: AnyValue(int_value=i)),
        st.floats(allow_nan=True, allow_infinity=True).map(lambda f: AnyValue(double_value=f)),
        st.binary(max_size=12).map(lambda b: AnyValue(bytes_value=b)),
        st.just(AnyValue()),  # no value set at all
    )
    if depth >= 3:
        return leaves

    def array(vals: list[AnyValue]) -> AnyValue:
        v = AnyValue()
        v.array_value.values.extend(vals)
        return v

    def kvlist(kvs: list[KeyValue]) -> AnyValue:
        v = AnyValue()
        v.kvlist_value.values.extend(kvs)
        return v

    return st.one_of(leaves, st.lists(_value(depth + 1), max_size=3).map(array),
                     st.lists(_kv(depth + 1), max_size=3).map(kvlist))


def _kv(depth: int = 0) -> st.SearchStrategy[KeyValue]:
    return st.builds(lambda k, v: KeyValue(key=k, value=v), st.text(max_size=10), _value(depth))


@st.composite
def _requests(draw) -> ExportTraceServiceRequest:
    req = ExportTraceServiceRequest()
    for _ in range(draw(st.integers(0, 2))):
        rs = req.resource_spans.add()
        rs.resource.attributes.extend(draw(st.lists(_kv(), max_size=3)))
        rs.resource.dropped_attributes_count = draw(st.integers(0, 3))
        rs.schema_url = draw(st.sampled_from(["", "https://opentelemetry.io/schemas/1.21.0"]))
        for _ in range(draw(st.integers(0, 2))):
            ss = rs.scope_spans.add()
            ss.scope.name = draw(st.text(max_size=8))
            ss.scope.version = draw(st.sampled_from(["", "1.0"]))
            ss.scope.attributes.extend(draw(st.lists(_kv(), max_size=2)))
            for _ in range(draw(st.integers(0, 3))):
                sp = ss.spans.add()
                sp.trace_id = draw(st.binary(min_size=16, max_size=16))
                sp.span_id = draw(st.binary(min_size=8, max_size=8))
                sp.parent_span_id = draw(st.sampled_from([b"", b"\x01" * 8]))
                sp.trace_state = draw(st.sampled_from(["", "k=v"]))
                sp.flags = draw(st.integers(0, (1 << 32) - 1))
                sp.name = draw(st.text(max_size=12))
                sp.kind = draw(st.integers(0, 7))  # 6 and 7 name no SpanKind: kept as numbers
                sp.start_time_unix_nano = draw(st.integers(0, (1 << 64) - 1))
                sp.end_time_unix_nano = draw(st.integers(0, (1 << 64) - 1))
                sp.attributes.extend(draw(st.lists(_kv(), max_size=4)))
                sp.dropped_attributes_count = draw(st.integers(0, 2))
                for _ in range(draw(st.integers(0, 2))):
                    ev = sp.events.add()
                    ev.name = draw(st.text(max_size=6))
                    ev.time_unix_nano = draw(st.integers(0, 1 << 62))
                    ev.attributes.extend(draw(st.lists(_kv(), max_size=2)))
                for _ in range(draw(st.integers(0, 1))):
                    link = sp.links.add()
                    link.trace_id, link.span_id = sp.trace_id, b"\x02" * 8
                    link.attributes.extend(draw(st.lists(_kv(), max_size=2)))
                sp.status.code = draw(st.integers(0, 3))  # 3 names no StatusCode
                sp.status.message = draw(st.text(max_size=6))
    return req


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(_requests())
def test_to_dict_is_message_to_dict_key_for_key_and_in_order(req):
    fast, slow = protobuf.to_dict(req), MessageToDict(req)
    assert orjson.dumps(fast) == orjson.dumps(slow)


def _sdk_request(n: int) -> ExportTraceServiceRequest:
    """Spans made by the real OpenTelemetry SDK and encoded by its OTLP exporter's own encoder."""
    from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
    from opentelemetry.sdk.resources import Resource
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor, SpanExporter, SpanExportResult
    from opentelemetry.trace import SpanKind, Status, StatusCode

    got = []

    class Keep(SpanExporter):
        def export(self, spans):
            got.extend(spans)
            return SpanExportResult.SUCCESS

    provider = TracerProvider(resource=Resource.create({"service.name": "agent", "deployment.count": 3}))
    provider.add_span_processor(SimpleSpanProcessor(Keep()))
    tracer = provider.get_tracer("test", "1.0")
    with tracer.start_as_current_span("invoke_agent", kind=SpanKind.INTERNAL):
        for i in range(n):
            with tracer.start_as_current_span(f"execute_tool t{i}", kind=SpanKind.CLIENT, attributes={
                    "gen_ai.tool.name": f"t{i}", "gen_ai.tool.call.arguments": json.dumps({"i": i}),
                    "score": i / 3, "ok": i % 2 == 0, "tags": ["a", "b"], "n": i}) as span:
                span.add_event("retry", {"attempt": i})
                if i % 3 == 0:
                    span.set_status(Status(StatusCode.ERROR, "boom"))
    return encode_spans(got)


def test_an_sdk_export_takes_the_fast_way_and_reads_the_same():
    msg = _sdk_request(20)
    assert protobuf.message_dict(msg) == MessageToDict(msg)  # no field left to MessageToDict
    assert orjson.dumps(protobuf.to_dict(msg)) == orjson.dumps(MessageToDict(msg))


def test_what_the_fast_way_cannot_write_is_left_to_message_to_dict():
    req = ExportTraceServiceRequest()
    sp = req.resource_spans.add().scope_spans.add().spans.add()
    sp.trace_id, sp.span_id = b"\x01" * 16, b"\x02" * 8
    sp.attributes.add(key="x").value.double_value = float("nan")
    with pytest.raises(protobuf.Rare):
        protobuf.message_dict(req)
    assert protobuf.to_dict(req) == MessageToDict(req)
    assert protobuf.to_dict(req)["resourceSpans"][0]["scopeSpans"][0]["spans"][0]["attributes"][0] == {
        "key": "x", "value": {"doubleValue": "NaN"}}


# ── request → spool lines ───────────────────────────────────────────────────────────────────

DEEP = {"stringValue": "bottom"}
for _ in range(40):  # 4 levels each: past redact.MAX_DEPTH (128) in a line, under the request's 200
    DEEP = {"kvlistValue": {"values": [{"key": "k", "value": DEEP}]}}


def _texts() -> list[str]:
    return ([secret for _, secret in SECRETS] + [f"token {secret} in a line" for _, secret in SECRETS]
            + list(adversarial(2_000).values()) + ["plain text", "", "xox without a dash", "a@b:/c"])


@pytest.mark.parametrize("text", _texts())
def test_pieces_given_the_decoded_spans_are_the_pieces_read_again(text):
    spans = [tool_span("c", 0, result=text), tool_span("c", 1, args=json.dumps({"q": text})),
             tool_span("d", 2, result="clean")]
    spans[2]["attributes"].append({"key": "deep", "value": DEEP})
    body = request(spans)
    for redact in (True, False):
        req, read = http.decoded(body, http.JSON)
        given_ = spooling.pieces(req, redact, read)
        again = spooling.pieces(http.decode(body, http.JSON), redact)
        assert given_ == again
        assert [p.spans for p in again] == [tuple(otlp.spans_of_request(orjson.loads(p.line))) for p in again]


def test_a_span_redacted_on_its_way_to_the_spool_is_read_from_its_redacted_line():
    secret = SECRETS[0][1]
    req, read = http.decoded(request([tool_span("c", 0, result=f"key {secret}")]), http.JSON)
    (piece,) = spooling.pieces(req, True, read)
    assert secret not in piece.line.decode() and secret in str(read[0].attrs)
    assert secret not in str(piece.spans[0].attrs) and "[REDACTED:openai-key]" in str(piece.spans[0].attrs)
