"""`loopledger receive`: the real OpenTelemetry SDK exports over OTLP/HTTP into the ledger."""

from __future__ import annotations

import contextlib
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
from datetime import UTC
from pathlib import Path

import pytest
import uvicorn
from loopledger import receive, worker
from loopledger.detectors.policy import PolicySpec
from loopledger.ledger import migrate
from loopledger.ledger import schema as s
from loopledger.ledger.engine import make_engine
from loopledger.receive.http import SMALL_FLUSH
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


@contextlib.contextmanager
def _served(rec, **app_options):
    """`rec` over real HTTP on a free port, in a thread; (base URL, rec); closed after."""
    port = free_port()
    srv = uvicorn.Server(uvicorn.Config(receive.make_app(rec, **app_options), host="127.0.0.1", port=port, log_level="warning"))
    t = threading.Thread(target=srv.run, daemon=True)
    t.start()
    deadline = time.monotonic() + 20
    while not srv.started:
        assert time.monotonic() < deadline, "receiver did not start"
        time.sleep(0.02)
    try:
        yield f"http://127.0.0.1:{port}", rec
    finally:
        srv.should_exit = True
        t.join(10)
        rec.close()


@pytest.fixture
def server(ledger, tmp_path):
    """A receiver on a free port, served by uvicorn in a thread (real HTTP on loopback)."""
    with _served(receive.Receiver(ledger, tmp_path / "spool", worker.Options(specs=[WINDOW]), flush_interval=0.05),
                 max_body=64 * 1024) as served:
        yield served


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


# ── issue 17: the live-trust points on the receiver ──────────────────────────────────────────

ANT = "sk-ant-api03-" + "A1b2C3d4E5f6G7h8I9j0" * 3
PROJ = "sk-proj-" + "Zz9Yy8Xx7Ww6Vv5Uu4Tt" * 3


def tool_span(conv: str | None, i: int, tool: str = "run_tests", args: str = '{"path": "tests"}',
              result: str = "1 failed", *, trace: str = "5b8efff798038103d269b633813fc60c",
              span_id: str | None = None, parent: str | None = None, t0: int = 1_764_500_000_000_000_000) -> dict:
    attrs = [{"key": "gen_ai.operation.name", "value": {"stringValue": "execute_tool"}},
             {"key": "gen_ai.tool.name", "value": {"stringValue": tool}},
             {"key": "gen_ai.tool.call.id", "value": {"stringValue": f"call_{conv}_{i}"}},
             {"key": "gen_ai.tool.call.arguments", "value": {"stringValue": args}},
             {"key": "gen_ai.tool.call.result", "value": {"stringValue": result}}]
    if conv is not None:
        attrs.append({"key": "gen_ai.conversation.id", "value": {"stringValue": conv}})
    sp = {"traceId": trace, "spanId": span_id or f"{abs(hash((conv, i))) % (1 << 63):016x}",
          "name": f"execute_tool {tool}", "startTimeUnixNano": str(t0 + i * 10**9),
          "endTimeUnixNano": str(t0 + i * 10**9 + 10**8), "attributes": attrs}
    if parent:
        sp["parentSpanId"] = parent
    return sp


def request(spans: list[dict]) -> bytes:
    return json.dumps({"resourceSpans": [{"resource": {"attributes": [
        {"key": "service.name", "value": {"stringValue": "agent"}}]}, "scopeSpans": [{"spans": spans}]}]}).encode()


@pytest.fixture
def manual(ledger, tmp_path):
    """A receiver whose flusher never fires on its own: the test calls rec.flush()."""
    with _served(receive.Receiver(ledger, tmp_path / "spool", worker.Options(specs=[WINDOW]),
                                  flush_interval=None)) as served:
        yield served


def calls_of(engine) -> list[tuple]:
    with engine.connect() as conn:
        return [tuple(r) for r in conn.execute(
            select(s.sessions.c.key, s.calls.c.call_id).join(s.sessions, s.sessions.c.id == s.calls.c.session_id)
            .order_by(s.sessions.c.key, s.calls.c.seq))]


def every_text(engine) -> str:
    """Every value of every table of the ledger, as one text (to grep for secrets)."""
    out = []
    with engine.connect() as conn:
        for table in s.metadata.sorted_tables:
            for row in conn.execute(select(table)):
                out.append(repr(tuple(row)))
    return "\n".join(out)


def test_point_2_secrets_are_redacted_before_the_spool_and_the_spool_is_private(manual, ledger):
    url, rec = manual
    body = request([tool_span("sess-secret", 0, "bash", json.dumps({"cmd": f"curl -H 'x-api-key: {ANT}'"}),
                              f"OPENAI_API_KEY={PROJ}")])
    assert post(url, body, "application/json")[0] == 200
    spool_file = next(rec.spool.glob("otlp-*.jsonl"))
    raw = spool_file.read_bytes()  # acknowledged: on disk now, before any flush
    assert b"sess-secret" in raw
    assert ANT.encode() not in raw and PROJ.encode() not in raw and b"sk-ant-" not in raw and b"sk-proj-" not in raw
    assert b"[REDACTED:anthropic-key]" in raw and b"[REDACTED:openai-key]" in raw
    assert spool_file.stat().st_mode & 0o777 == 0o600
    assert rec.spool.stat().st_mode & 0o777 == 0o700
    rec.flush()
    assert ledger_counts(ledger, "sess-secret")[0] == 1
    text = every_text(ledger)
    assert "sess-secret" in text and ANT not in text and PROJ not in text


def test_point_2_an_existing_spool_folder_and_files_are_made_private(ledger, tmp_path):
    folder = tmp_path / "old-spool"
    folder.mkdir(mode=0o755)
    old = folder / "otlp-2026-01-01.jsonl"
    old.write_bytes(request([tool_span("old", 0)]) + b"\n")
    old.chmod(0o644)
    rec = receive.Receiver(ledger, folder, worker.Options(specs=[WINDOW]), flush_interval=None, keep_days=None)
    try:
        assert folder.stat().st_mode & 0o777 == 0o700 and old.stat().st_mode & 0o777 == 0o600
    finally:
        rec.close()


def deep_json(levels: int) -> str:
    return "[" * levels + '"x"' + "]" * levels


def test_point_4_an_800_deep_argument_costs_that_value_not_the_span_nor_the_later_spans(manual, ledger):
    from loopledger import redact

    url, rec = manual
    assert post(url, request([tool_span("deep", 0, "edit", deep_json(800))]), "application/json")[0] == 200
    assert post(url, request([tool_span("deep", 1, "edit", '{"path": "a.py"}'),
                              tool_span("after", 0, "ls", "{}")]), "application/json")[0] == 200
    rec.flush()
    assert rec.stats.last_error == ""
    assert calls_of(ledger) == [("after", "call_after_0"), ("deep", "call_deep_0"), ("deep", "call_deep_1")]
    with ledger.connect() as conn:
        args = conn.execute(select(s.calls.c.args).join(s.sessions, s.sessions.c.id == s.calls.c.session_id)
                            .order_by(s.sessions.c.key, s.calls.c.seq)).scalars().all()
    assert redact.TOO_DEEP in args[1] and "a.py" in args[2]


def kvlist_body(levels: int) -> bytes:
    v = '{"stringValue": "x"}'
    for _ in range(levels):
        v = '{"kvlistValue": {"values": [{"key": "k", "value": ' + v + "}]}}"
    span = json.dumps(tool_span("kv", 0))[:-1] + ', "events": [], "links": []}'
    span = span[:-1] + ', "droppedAttributesCount": 0}'
    spans = json.loads(span)
    body = request([spans]).decode()
    return body.replace('"attributes": [{"key": "gen_ai.operation.name"',
                        '"attributes": [{"key": "deep", "value": ' + v + '}, {"key": "gen_ai.operation.name"', 1).encode()


NOT_OTLP = [b"[]", b'"resourceSpans"', b"5", b"null", b'{"resourceSpans": [1]}', b'{"resourceSpans": [{"scopeSpans": "x"}]}',
            b'{"resourceSpans": [{"resource": 5, "scopeSpans": []}]}',
            b'{"resourceSpans": [{"scopeSpans": [{"spans": [{"status": "x"}]}]}]}',
            b'{"resourceSpans": [{"scopeSpans": [{"spans": [7]}]}]}',
            b'{"resourceSpans": [{"scopeSpans": [{"spans": [{"attributes": 5, "events": [3]}]}]}]}']


def test_point_10_json_that_is_not_otlp_and_deep_kvlists_get_400_with_a_reason_and_the_receiver_serves_on(manual,
                                                                                                         ledger):
    url, rec = manual
    for body in NOT_OTLP:
        status, answer = post(url, body, "application/json")
        assert status in (200, 400), body
        if status == 400:
            assert answer["message"], body
    status, answer = post(url, kvlist_body(200), "application/json")
    assert status == 400 and "deeper than" in answer["message"]
    status, answer = post(url, b"\x0a\x05\x0a\x03\xff\xff\xff", "application/x-protobuf")
    assert status == 400 and "protobuf" in answer["message"]
    # A shallow kvlist is a fine attribute.
    assert post(url, kvlist_body(3), "application/json")[0] == 200
    assert post(url, request([tool_span("still-up", 0)]), "application/json")[0] == 200
    rec.flush()
    assert ledger_counts(ledger, "still-up")[0] == 1 and ledger_counts(ledger, "kv")[0] == 1


def test_point_5_a_flush_reads_only_what_arrived_and_continues_the_session(manual, ledger):
    url, rec = manual
    # A day already holding 2,000 spans in 20 sessions (100 each), all in the ledger.
    for batch in range(4):
        spans = [tool_span(f"day-{c}", batch * 25 + i, "ls", json.dumps({"i": batch * 25 + i}))
                 for c in range(20) for i in range(25)]
        assert post(url, request(spans), "application/json")[0] == 200
    rec.flush()
    spool_file = next(rec.spool.glob("otlp-*.jsonl"))
    day_bytes = spool_file.stat().st_size
    assert len(calls_of(ledger)) == 2000
    # One more span in one of those sessions, then one in a new session.
    for conv, i in (("day-3", 100), ("new-one", 0)):
        before = spool_file.stat().st_size
        assert post(url, request([tool_span(conv, i, "ls", json.dumps({"i": i}))]), "application/json")[0] == 200
        line = spool_file.stat().st_size - before
        rewritten, continued = rec.flusher.stats.sessions_rewritten, rec.flusher.stats.sessions_continued
        rec.flush()
        st = rec.flusher.stats
        # Work done: the new line taken from the writer in memory, one span; nothing of the day
        # re-read, and not even the new line read back from the spool.
        assert st.last_bytes_handed == line < day_bytes / 1000
        assert st.last_spans_handed == 1
        assert st.last_bytes_read == st.last_spans_read == 0
        if conv == "day-3":
            assert (st.sessions_continued, st.sessions_rewritten) == (continued + 1, rewritten)
    assert ledger_counts(ledger, "day-3")[0] == 101 and ledger_counts(ledger, "new-one")[0] == 1


def test_point_5_a_session_grown_over_many_flushes_has_the_rows_of_one_ingest_of_the_spool(manual, ledger, tmp_path):
    """Continued sessions, rewritten ones (a span sorting before the last, an ancestor arriving after its
    children), every default policy: the rows equal `loopledger ingest` of the spool file."""
    from test_worker import dump

    url, rec = manual
    rec.opts = rec.flusher.opts = worker.Options()  # the default policy set
    trace = "7" * 32
    rounds = [
        [tool_span("grow", i, "run_tests", '{"path": "tests"}', "1 failed") for i in range(3)],
        [tool_span("grow", i, "run_tests", '{"path": "tests"}', "1 failed") for i in range(3, 6)],
        [tool_span("grow", 6, "edit", '{"f": "a.py"}', "ok"), tool_span("other", 0, "ls", "{}", "a b")],
        [tool_span("grow", 2.5, "cat", '{"f": "b.py"}', "B")],  # sorts before the last: a rewrite
        # Children first (no session id of their own: keyed by their trace), their agent span after.
        [tool_span(None, i, "gh", '{"run": 1}', f"{i}/3 done", trace=trace, span_id=f"{i + 1:016x}",
                   parent="a" * 16) for i in range(3)],
        [{"traceId": trace, "spanId": "a" * 16, "name": "invoke_agent", "startTimeUnixNano": "1764500000000000000",
          "endTimeUnixNano": "1764500009000000000", "attributes": [
              {"key": "gen_ai.operation.name", "value": {"stringValue": "invoke_agent"}},
              {"key": "gen_ai.conversation.id", "value": {"stringValue": "late-parent"}}]}],
        [tool_span("grow", i, "run_tests", '{"path": "tests"}', "1 failed") for i in range(7, 12)],
    ]
    for spans in rounds:
        assert post(url, request(spans), "application/json")[0] == 200
        rec.flush()
    assert rec.flusher.stats.sessions_continued >= 2 and rec.stats.last_error == ""
    keys = {k for k, _ in calls_of(ledger)}
    assert keys == {"grow", "other", "late-parent"}  # the trace-keyed session moved under its parent's id
    copy = tmp_path / "whole" / next(rec.spool.glob("otlp-*.jsonl")).name
    copy.parent.mkdir()
    copy.write_bytes(next(rec.spool.glob("otlp-*.jsonl")).read_bytes())
    other = make_engine(f"sqlite:///{tmp_path / 'whole.sqlite'}")
    migrate.upgrade(other)
    worker.ingest_file(other, copy, worker.Options())
    got, want = dump(ledger), dump(other)
    other.dispose()
    for table in want:
        if table != "sources":
            assert got[table] == want[table], table


def test_point_5_an_acknowledgement_never_waits_on_the_ledger(server, ledger, db_url):
    """Another writer holds the ledger while the receiver's own flush waits for it: requests are still
    answered (spooled), and their spans reach the ledger once it is free."""
    if not db_url.startswith("sqlite"):
        pytest.skip("holds SQLite's write lock")
    import sqlite3

    url, rec = server  # flushes every 0.05 s on its own; the ledger's busy timeout is 30 s
    holder = sqlite3.connect(ledger.url.database, isolation_level=None)
    holder.execute("BEGIN IMMEDIATE")
    try:
        assert post(url, request([tool_span("while-held", 0)]), "application/json")[0] == 200
        time.sleep(0.5)  # the flush of that span is now waiting for the lock
        for i in range(1, 4):
            req = urllib.request.Request(f"{url}/v1/traces", data=request([tool_span("while-held", i)]),
                                         method="POST", headers={"Content-Type": "application/json"})
            # Well under the 30 s the flush may wait: an answer queued behind it would time out.
            with urllib.request.urlopen(req, timeout=10) as r:
                assert r.status == 200
        assert call_counts(Path(ledger.url.database)) == {}  # read beside the receiver's engine
    finally:
        holder.execute("ROLLBACK")
        holder.close()
    assert wait_for(lambda: ledger_counts(ledger, "while-held")[0] == 4, 60)


# ── point 6: an acknowledged span reaches the ledger exactly once (a real receiver process) ──

class ReceiverProcess:
    """`loopledger receive` as a user runs it, on a SQLite ledger file."""

    def __init__(self, tmp_path: Path, busy_ms: int = 300, *extra: str, env: dict | None = None) -> None:
        self.db, self.port, self.tmp = tmp_path / "ledger.sqlite", free_port(), tmp_path
        self.busy_ms, self.extra, self.env = busy_ms, extra, env or {}
        self.proc: subprocess.Popen | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self) -> ReceiverProcess:
        env = {**os.environ, "PYTHONUNBUFFERED": "1", "LOOPLEDGER_BUSY_TIMEOUT_MS": str(self.busy_ms), **self.env}
        self.proc = subprocess.Popen([sys.executable, "-m", "loopledger.cli.app", "receive", "--db", str(self.db),
                                      "--port", str(self.port), "--policy", "window", *self.extra],
                                     stderr=subprocess.PIPE, text=True, env=env, cwd=self.tmp)

        def up():
            try:
                with urllib.request.urlopen(f"{self.url}/health", timeout=2) as r:
                    return r.status == 200
            except urllib.error.HTTPError:
                return True
            except OSError:
                return self.proc.poll() is not None
        assert wait_for(up, 60) and self.proc.poll() is None, self.proc.stderr.read() if self.proc.poll() else ""
        return self

    def kill(self) -> None:
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait(30)

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(60)
            except subprocess.TimeoutExpired:
                self.proc.kill()

    def health(self) -> dict:
        with urllib.request.urlopen(f"{self.url}/health", timeout=10) as r:
            return json.loads(r.read())


def call_counts(db: Path) -> dict[str, int]:
    """How many calls rows each call id has, read with plain sqlite3 (an independent count)."""
    import sqlite3

    conn = sqlite3.connect(db)
    try:
        return dict(conn.execute("SELECT call_id, COUNT(*) FROM calls GROUP BY call_id").fetchall())
    except sqlite3.OperationalError:
        return {}
    finally:
        conn.close()


def hold_ledger(db: Path):
    import sqlite3

    holder = sqlite3.connect(db, isolation_level=None, timeout=30)
    holder.execute("BEGIN IMMEDIATE")
    return holder


def many_spans(conv: str, n: int, start: int = 0) -> list[dict]:
    return [tool_span(conv, i, "ls", json.dumps({"i": i}), f"answer {i}") for i in range(start, start + n)]


def test_point_6_a_span_acknowledged_while_the_ledger_is_busy_is_written_once_it_is_free(tmp_path):
    rp = ReceiverProcess(tmp_path).start()
    try:
        holder = hold_ledger(rp.db)  # longer than the receiver's 300 ms busy timeout
        try:
            assert post(rp.url, request(many_spans("busy", 3)), "application/json")[0] == 200
            assert wait_for(lambda: rp.health()["busy_flushes"] >= 2, 30)
            assert rp.health()["pending_spans"] == 3
        finally:
            holder.execute("ROLLBACK")
            holder.close()
        assert wait_for(lambda: call_counts(rp.db).get("call_busy_2") == 1, 30)
        # A retry of the same request after the fact adds nothing.
        assert post(rp.url, request(many_spans("busy", 3)), "application/json")[0] == 200
    finally:
        rp.stop()
    assert rp.proc.returncode == 0
    rp.start()  # and a restart writes nothing twice: once it has nothing waiting, and once stopped
    try:
        assert wait_for(lambda: rp.health()["pending_spans"] == 0, 60)
        assert call_counts(rp.db) == {f"call_busy_{i}": 1 for i in range(3)}
    finally:
        rp.stop()
    assert call_counts(rp.db) == {f"call_busy_{i}": 1 for i in range(3)}


def test_point_6_a_receiver_killed_mid_flush_loses_nothing_and_stores_nothing_twice(tmp_path):
    rp = ReceiverProcess(tmp_path, busy_ms=20_000).start()
    try:
        assert post(rp.url, request(many_spans("first", 5)), "application/json")[0] == 200
        assert wait_for(lambda: len(call_counts(rp.db)) == 5, 30)
        # The next flush is held inside its write transaction (waiting for the lock), then killed.
        holder = hold_ledger(rp.db)
        try:
            assert post(rp.url, request(many_spans("first", 5, 5) + many_spans("second", 4)),
                        "application/json")[0] == 200
            time.sleep(1.5)
            rp.kill()
        finally:
            holder.execute("ROLLBACK")
            holder.close()
        assert len(call_counts(rp.db)) == 5
        # Killed again, this time while it reads, replays and writes 3,000 spans.
        rp.start()
        assert wait_for(lambda: len(call_counts(rp.db)) == 14, 30)
        assert post(rp.url, request(many_spans("big", 3000)), "application/json")[0] == 200
        time.sleep(0.8)
        rp.kill()
        rp.start()
        assert wait_for(lambda: len(call_counts(rp.db)) == 3014, 60)
    finally:
        rp.stop()
    counts = call_counts(rp.db)
    want = {**{f"call_first_{i}": 1 for i in range(10)}, **{f"call_second_{i}": 1 for i in range(4)},
            **{f"call_big_{i}": 1 for i in range(3000)}}
    assert counts == want


def test_point_6_spans_acknowledged_just_before_a_kill_are_written_at_the_next_start(tmp_path):
    rp = ReceiverProcess(tmp_path).start()
    try:
        assert post(rp.url, request(many_spans("restart", 4)), "application/json")[0] == 200
        rp.kill()  # at once: before the flush interval is up
        rp.start()
        assert wait_for(lambda: len(call_counts(rp.db)) == 4, 30)
        assert post(rp.url, request(many_spans("restart", 4)), "application/json")[0] == 200  # a resend
        assert wait_for(lambda: rp.health()["pending_spans"] == 0, 60)
    finally:
        rp.stop()  # stopping writes what waits: counted after it
    assert call_counts(rp.db) == {f"call_restart_{i}": 1 for i in range(4)}


# ── the door ───────────────────────────────────────────────────────────────────────────────

def post_auth(url: str, body: bytes, auth: str | None) -> int:
    req = urllib.request.Request(f"{url}/v1/traces", data=body, method="POST", headers={"Content-Type": "application/json"})
    if auth is not None:
        req.add_header("Authorization", auth)
    try:
        with urllib.request.urlopen(req, timeout=30) as r:
            return r.status
    except urllib.error.HTTPError as e:
        return e.code


def test_point_10_a_token_is_required_once_set_and_the_sdk_exporter_sends_it_from_its_env(tmp_path):
    token = "s3cret-token-for-the-receiver"
    rp = ReceiverProcess(tmp_path, 30_000, env={"LOOPLEDGER_RECEIVE_TOKEN": token}).start()
    try:
        body = request([tool_span("door", 0)])
        assert post_auth(rp.url, body, None) == 401
        assert post_auth(rp.url, body, "Bearer nope") == 401
        assert post_auth(rp.url, body, f"Basic {token}") == 401
        assert post_auth(rp.url, body, f"Bearer {token}x") == 401
        try:
            urllib.request.urlopen(f"{rp.url}/health", timeout=5)
            raise AssertionError("health answered without the token")
        except urllib.error.HTTPError as e:
            assert e.code == 401
        # The real SDK exporter, configured the way its docs say: the header from the environment.
        code = (
            f"import sys; sys.path.insert(0, {str(Path(__file__).parent)!r})\n"
            "from test_receive import export_with_sdk\n"
            f"export_with_sdk({rp.url!r}, 'conv-door')\n")
        env = {**os.environ, "OTEL_EXPORTER_OTLP_HEADERS": f"Authorization=Bearer%20{token}"}
        subprocess.run([sys.executable, "-c", code], env=env, check=True, timeout=60)
        assert wait_for(lambda: len(call_counts(rp.db)) == 4, 30)
        assert post_auth(rp.url, body, f"Bearer {token}") == 200
        assert wait_for(lambda: len(call_counts(rp.db)) == 5, 30)
    finally:
        rp.stop()
    assert call_counts(rp.db)["call_door_0"] == 1  # the refused posts stored nothing


def test_authorized_compares_in_constant_time_and_takes_only_bearer():
    assert receive.authorized(None, None) and receive.authorized("anything", "")
    assert receive.authorized("Bearer abc", "abc") and receive.authorized("bearer  abc", "abc")
    assert not receive.authorized("Bearer abd", "abc") and not receive.authorized("abc", "abc")
    assert not receive.authorized(None, "abc")


@pytest.mark.parametrize("host", ["0.0.0.0", "::", "192.168.1.5", "myhost.example"])
def test_point_10_binding_beyond_loopback_without_a_token_refuses_to_start_and_says_why(tmp_path, host):
    port = free_port()
    env = {k: v for k, v in os.environ.items() if k != "LOOPLEDGER_RECEIVE_TOKEN"}
    proc = subprocess.run([sys.executable, "-m", "loopledger.cli.app", "receive", "--db", str(tmp_path / "l.sqlite"),
                           "--host", host, "--port", str(port)], capture_output=True, text=True, env=env,
                          cwd=tmp_path, timeout=60)
    assert proc.returncode == 2
    err = " ".join(proc.stderr.split())
    assert f"--host {host}" in err and "--token" in err and "--insecure" in err and "anyone" in err
    assert not (tmp_path / "l.sqlite.otlp").exists()


def test_point_10_beyond_loopback_with_insecure_or_a_token_it_starts(tmp_path):
    for extra, env in ((("--host", "0.0.0.0", "--insecure"), {}), (("--host", "0.0.0.0"), {"LOOPLEDGER_RECEIVE_TOKEN": "t"})):
        rp = ReceiverProcess(tmp_path, 30_000, *extra, env=env).start()
        rp.stop()
        err = rp.proc.stderr.read()
        assert rp.proc.returncode == 0
        assert ("NO TOKEN" in err) == ("--insecure" in extra) and ("bearer token required" in err) == bool(env)


# ── anything at all: the receiver keeps serving ─────────────────────────────────────────────

def test_point_10_arbitrary_json_and_protobuf_bytes_never_get_a_500(manual, ledger):
    from hypothesis import HealthCheck, given, settings
    from hypothesis import strategies as st

    url, rec = manual
    scalars = st.none() | st.booleans() | st.integers(-2**63, 2**63 - 1) | st.floats(allow_nan=False,
                                                                                   allow_infinity=False) | st.text(max_size=20)
    keys = st.sampled_from(["resourceSpans", "scopeSpans", "spans", "resource", "attributes", "key", "value",
                            "stringValue", "kvlistValue", "arrayValue", "values", "traceId", "spanId",
                            "parentSpanId", "status", "code", "events", "name", "startTimeUnixNano",
                            "gen_ai.operation.name", "intValue"]) | st.text(max_size=8)
    values = st.recursive(scalars, lambda inner: st.lists(inner, max_size=4) | st.dictionaries(keys, inner, max_size=4),
                          max_leaves=30)
    otlpish = st.fixed_dictionaries({"resourceSpans": st.lists(values, max_size=3)})
    seen: set[int] = set()

    @settings(max_examples=150, deadline=None, suppress_health_check=list(HealthCheck), database=None)
    @given(body=st.one_of(values.map(lambda v: json.dumps(v).encode()), otlpish.map(lambda v: json.dumps(v).encode()),
                          st.binary(max_size=200)), pb=st.booleans())
    def fuzz(body, pb):
        ctype = "application/x-protobuf" if pb else "application/json"
        req = urllib.request.Request(f"{url}/v1/traces", data=body, method="POST", headers={"Content-Type": ctype})
        try:
            with urllib.request.urlopen(req, timeout=30) as r:
                status = r.status
        except urllib.error.HTTPError as e:
            status = e.code
            assert json.loads(e.read())["message"]
        seen.add(status)
        assert status in (200, 400), (status, body)

    fuzz()
    rec.flush()  # whatever was accepted is ingestable
    assert rec.stats.last_error == ""
    assert post(url, request([tool_span("after-fuzz", 0)]), "application/json")[0] == 200
    rec.flush()
    assert ledger_counts(ledger, "after-fuzz")[0] == 1 and 400 in seen


def test_spool_files_of_past_days_are_trimmed_once_in_the_ledger_and_today_is_kept(ledger, tmp_path):
    from datetime import datetime

    now = [datetime(2026, 3, 1, 12, tzinfo=UTC)]
    rec = receive.Receiver(ledger, tmp_path / "spool", worker.Options(specs=[WINDOW]), flush_interval=None,
                           keep_days=1, clock=lambda: now[0])
    try:
        for day, conv in ((1, "d1"), (2, "d2"), (3, "d3")):
            now[0] = datetime(2026, 3, day, 12, tzinfo=UTC)
            rec.submit(receive.prepare(receive.decode(request([tool_span(conv, 0)]), "application/json"))).result(10)
            rec.flush()
        names = sorted(p.name for p in rec.spool.glob("otlp-*.jsonl"))
        # Day 1 is two days old and in the ledger: gone; yesterday and today stay.
        assert names == ["otlp-2026-03-02.jsonl", "otlp-2026-03-03.jsonl"]
        assert {k for k, _ in calls_of(ledger)} == {"d1", "d2", "d3"}  # its sessions are kept
    finally:
        rec.close()


# ── issue 21: a flush of many sessions, and when the flusher flushes ──────────────────────

def test_many_sessions_continued_in_one_flush_have_the_rows_of_one_ingest_of_the_spool(manual, ledger, tmp_path):
    """Eight conversations interleaved in every request (as concurrent agents export them), some
    calls failing and repeated so the policies strike: every flush after the first continues all
    eight at once; the rows equal one `loopledger ingest` of the spool file."""
    from test_worker import dump

    url, rec = manual
    rec.opts = rec.flusher.opts = worker.Options()  # the default policy set
    convs = [f"agent-{c}" for c in range(8)]
    for rnd in range(4):
        spans = []
        for c, conv in enumerate(convs):
            for i in range(rnd * 3, rnd * 3 + 3):
                # The same failing call over and over in half of them: loops for the guards to judge.
                tool, args, result = (("run_tests", '{"path": "tests"}', "1 failed: test_refund") if c % 2 == 0
                                      else ("read_file", json.dumps({"path": f"src/m{i}.py"}), f"line {i}"))
                spans.append(tool_span(conv, i, tool, args, result, trace=f"{c + 1:032x}"))
        assert post(url, request(spans), "application/json")[0] == 200
        continued = rec.flusher.stats.sessions_continued
        rec.flush()
        assert rec.stats.last_error == ""
        if rnd:  # every session continued from its snapshot, none rewritten
            assert rec.flusher.stats.sessions_continued == continued + len(convs)
    # An independent count: 8 conversations x 12 calls, each once.
    got_calls = calls_of(ledger)
    assert len(got_calls) == 96 and len(set(got_calls)) == 96
    spool_file = next(rec.spool.glob("otlp-*.jsonl"))
    copy = tmp_path / "whole" / spool_file.name
    copy.parent.mkdir()
    copy.write_bytes(spool_file.read_bytes())
    other = make_engine(f"sqlite:///{tmp_path / 'whole.sqlite'}")
    migrate.upgrade(other)
    worker.ingest_file(other, copy, worker.Options())
    got, want = dump(ledger), dump(other)
    other.dispose()
    assert want["checks"], "the policies judged something"
    for table in want:
        if table != "sources":
            assert got[table] == want[table], table


@pytest.fixture
def slow_flusher(ledger, tmp_path):
    """A receiver over real HTTP whose flush interval (20 s) is far longer than any wait below."""
    with _served(receive.Receiver(ledger, tmp_path / "spool", worker.Options(specs=[WINDOW]),
                                  flush_interval=20.0)) as served:
        yield served


def test_a_few_spans_into_a_quiet_receiver_skip_the_interval_and_a_stream_waits_for_it(slow_flusher, ledger):
    url, rec = slow_flusher
    # Two one-span requests, the second right after the first one's flush: neither waits the 20 s.
    for i in range(2):
        assert post(url, request([tool_span("quiet", i)]), "application/json")[0] == 200
        assert wait_for(lambda i=i: len(calls_of(ledger)) == i + 1, 10), "flushed without waiting the interval"
    flushes = rec.flusher.stats.flushes
    # A request of SMALL_FLUSH spans or more is a stream: it joins the flush after the interval.
    big = [tool_span("stream", i) for i in range(SMALL_FLUSH)]
    assert post(url, request(big), "application/json")[0] == 200
    time.sleep(1.5)
    assert rec.flusher.stats.flushes == flushes and len(calls_of(ledger)) == 2
    rec.close()  # stopping writes what waits
    assert len(calls_of(ledger)) == 2 + SMALL_FLUSH
