"""`loopledger receive`: the real OpenTelemetry SDK exports over OTLP/HTTP into the ledger."""

from __future__ import annotations

import gzip
import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest
import uvicorn
from loopledger import receive, worker
from loopledger.detectors.policy import PolicySpec
from loopledger.ledger import migrate
from loopledger.ledger import schema as s
from loopledger.ledger.engine import make_engine
from sqlalchemy import func, select

WINDOW = PolicySpec.parse("window")


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@pytest.fixture
def ledger(tmp_path, db_url):
    engine = make_engine(db_url)
    migrate.upgrade(engine)
    yield engine
    engine.dispose()


@pytest.fixture
def server(ledger, tmp_path):
    """A receiver on a free port, served by uvicorn in a thread (real HTTP on loopback)."""
    rec = receive.Receiver(ledger, tmp_path / "spool", worker.Options(specs=[WINDOW]), flush_interval=0.05)
    port = free_port()
    srv = uvicorn.Server(uvicorn.Config(receive.make_app(rec, max_body=64 * 1024), host="127.0.0.1",
                                        port=port, log_level="warning"))
    t = threading.Thread(target=srv.run, daemon=True)
    t.start()
    deadline = time.monotonic() + 20
    while not srv.started:
        assert time.monotonic() < deadline, "receiver did not start"
        time.sleep(0.02)
    yield f"http://127.0.0.1:{port}", rec
    srv.should_exit = True
    t.join(10)
    rec.close()


def export_with_sdk(url: str, conversation: str, n: int = 4) -> None:
    """What an instrumented agent does: GenAI spans through the SDK's OTLP/HTTP (protobuf) exporter."""
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
    from opentelemetry.sdk.resources import Resource
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import BatchSpanProcessor
    from opentelemetry.trace import Status, StatusCode

    provider = TracerProvider(resource=Resource.create({"service.name": "ci-agent"}))
    provider.add_span_processor(BatchSpanProcessor(OTLPSpanExporter(endpoint=f"{url}/v1/traces")))
    tracer = provider.get_tracer("test")
    with tracer.start_as_current_span("invoke_agent fixer", attributes={
            "gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": "fixer",
            "gen_ai.conversation.id": conversation}):
        for i in range(n):
            with tracer.start_as_current_span("execute_tool run_tests", attributes={
                    "gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "run_tests",
                    "gen_ai.tool.call.id": f"call_{i}", "gen_ai.tool.call.arguments": '{"path": "tests"}',
                    "gen_ai.tool.call.result": "1 failed: test_refund"}) as sp:
                sp.set_status(Status(StatusCode.ERROR, "exit 1"))
    assert provider.force_flush(10_000)
    provider.shutdown()


def ledger_counts(engine, key: str) -> tuple[int, list[str]]:
    with engine.connect() as conn:
        sid = conn.execute(select(s.sessions.c.id).where(s.sessions.c.key == key)).scalar()
        if sid is None:
            return 0, []
        calls = conn.execute(select(func.count()).select_from(s.calls).where(s.calls.c.session_id == sid)).scalar()
        verdicts = conn.execute(select(s.checks.c.verdict).where(s.checks.c.session_id == sid,
                                                                 s.checks.c.policy_id == WINDOW.id)
                                .order_by(s.checks.c.seq, s.checks.c.idx)).scalars().all()
    return calls, list(verdicts)


def wait_for(predicate, seconds: float = 30.0):
    deadline = time.monotonic() + seconds
    while True:
        value = predicate()
        if value or time.monotonic() > deadline:
            return value
        time.sleep(0.05)


def test_sdk_spans_become_calls_and_checks_and_a_resend_adds_nothing(server, ledger):
    url, rec = server
    export_with_sdk(url, "conv-sdk-1")
    assert wait_for(lambda: ledger_counts(ledger, "conv-sdk-1")[0] == 4)
    calls, verdicts = ledger_counts(ledger, "conv-sdk-1")
    # window (seed 003, threshold 3): allow, allow, halt on the third identical call, then after_halt.
    assert verdicts == ["allow", "allow", "halt", "after_halt"]
    with ledger.connect() as conn:
        errors = conn.execute(select(s.calls.c.is_error, s.calls.c.answer).join(
            s.sessions, s.sessions.c.id == s.calls.c.session_id).where(s.sessions.c.key == "conv-sdk-1")).all()
    assert [tuple(r) for r in errors] == [(True, "1 failed: test_refund")] * 4

    # The same spans again (a client retry): the spool and the ledger stay as they were.
    spool = sorted((rec.spool).glob("otlp-*.jsonl"))
    before = [p.read_bytes() for p in spool]
    body = spool[0].read_bytes().splitlines()[0]
    post(url, body, "application/json")
    rec.flush()
    assert [p.read_bytes() for p in spool] == before
    assert ledger_counts(ledger, "conv-sdk-1") == (calls, verdicts)
    assert rec.stats.duplicates >= 1


def post(url: str, body: bytes, ctype: str, encoding: str | None = None) -> tuple[int, dict]:
    req = urllib.request.Request(f"{url}/v1/traces", data=body, method="POST", headers={"Content-Type": ctype})
    if encoding:
        req.add_header("Content-Encoding", encoding)
    try:
        with urllib.request.urlopen(req, timeout=30) as r:
            raw = r.read()
            return r.status, (json.loads(raw) if ctype == "application/json" else {})
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read())


def otlp_json(conversation: str, names: list[str]) -> bytes:
    spans = [{"traceId": "5b8efff798038103d269b633813fc60c", "spanId": f"{i + 1:016x}", "name": n,
              "startTimeUnixNano": str(1_764_500_000_000_000_000 + i), "endTimeUnixNano": "0",
              "attributes": [{"key": "openinference.span.kind", "value": {"stringValue": "TOOL"}},
                             {"key": "tool.name", "value": {"stringValue": n}},
                             {"key": "session.id", "value": {"stringValue": conversation}},
                             {"key": "input.value", "value": {"stringValue": "{}"}}]}
             for i, n in enumerate(names)]
    return json.dumps({"resourceSpans": [{"resource": {}, "scopeSpans": [{"spans": spans}]}]}).encode()


def test_gzip_json_is_taken_and_malformed_bodies_get_400_without_stopping_the_receiver(server, ledger):
    url, rec = server
    assert post(url, b"{nope", "application/json")[0] == 400
    status, body = post(url, b'{"resourceSpans": 3}', "application/json")
    assert status == 400 and "resourceSpans" in body["message"]
    assert post(url, b"\x00\xff\x10garbage", "application/x-protobuf")[0] == 400
    assert post(url, b"not gzip", "application/json", "gzip")[0] == 400
    assert post(url, b"{}", "text/plain")[0] == 415
    assert post(url, b"x" * (64 * 1024 + 1), "application/json")[0] == 413
    # A zip bomb: small on the wire, over the limit once inflated.
    assert post(url, gzip.compress(b" " * (1024 * 1024)), "application/json", "gzip")[0] == 413
    # Still serving: a good gzip JSON request lands.
    assert post(url, gzip.compress(otlp_json("sess-gz", ["ls", "ls"])), "application/json", "gzip") == (200, {})
    assert wait_for(lambda: ledger_counts(ledger, "sess-gz")[0] == 2)
    assert rec.stats.rejected == 7


def test_the_spool_file_ingested_by_loopledger_ingest_gives_the_same_rows(server, ledger, tmp_path, db_url):
    url, rec = server
    post(url, otlp_json("sess-file", ["ls", "cat", "ls", "ls", "ls"]), "application/json")
    assert wait_for(lambda: ledger_counts(ledger, "sess-file")[0] == 5)
    received = ledger_counts(ledger, "sess-file")
    spool_file = next(rec.spool.glob("otlp-*.jsonl"))
    copy = tmp_path / "copy.jsonl"
    copy.write_bytes(spool_file.read_bytes())
    other = make_engine(f"sqlite:///{tmp_path / 'other.sqlite'}")
    migrate.upgrade(other)
    worker.ingest_file(other, copy, worker.Options(specs=[WINDOW]))
    assert ledger_counts(other, "sess-file") == received == (5, ["allow", "allow", "allow", "halt", "after_halt"])
    other.dispose()


def test_loopledger_receive_runs_as_a_process_and_stops_on_sigterm(tmp_path):
    port = free_port()
    db = tmp_path / "ledger.sqlite"
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    proc = subprocess.Popen([sys.executable, "-m", "loopledger.cli.app", "receive", "--db", str(db), "--port", str(port),
                             "--policy", "window"], stderr=subprocess.PIPE, text=True, env=env, cwd=tmp_path)
    try:
        def up():
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=2) as r:
                    return r.status == 200
            except OSError:
                return proc.poll() is not None
        assert wait_for(up, 60) and proc.poll() is None
        assert post(f"http://127.0.0.1:{port}", otlp_json("sess-proc", ["ls"]), "application/json")[0] == 200
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(30) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
    err = proc.stderr.read()
    assert "receiving OTLP/HTTP traces on http://127.0.0.1" in err and "1 span(s)" in err
    assert (tmp_path / "ledger.sqlite.otlp").is_dir()
    engine = make_engine(f"sqlite:///{db}")
    assert ledger_counts(engine, "sess-proc")[0] == 1  # what was acknowledged was ingested before exit
    engine.dispose()


def test_decode_names_what_is_wrong():
    with pytest.raises(receive.BadRequest, match="Content-Encoding 'br'"):
        receive.decode(b"{}", "application/json", "br")
    assert receive.decode(b'{"resourceSpans": []}', "application/json; charset=utf-8") == {"resourceSpans": []}
    assert Path(receive.default_spool("sqlite:////x/y/l.sqlite")) == Path("/x/y/l.sqlite.otlp")


def test_received_session_shows_on_the_sessions_page(server, ledger, db_url):
    from app_support import app, ledger_env

    url, _ = server
    post(url, otlp_json("sess-dash", ["deploy", "deploy", "deploy", "deploy"]), "application/json")
    assert wait_for(lambda: ledger_counts(ledger, "sess-dash")[0] == 4)
    with ledger_env(db_url):
        at = app()
    assert not at.exception
    shown = " ".join(str(df.value.to_dict()) for df in at.dataframe)
    assert "sess-dash" in shown
