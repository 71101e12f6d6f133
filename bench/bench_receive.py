"""`loopledger receive`: spans/s from OTLP/HTTP into the ledger, beside `ingest` of the same spans.

Generated GenAI traces (conversations of `execute_tool` spans with realistic argument and result
sizes) are POSTed as OTLP JSON requests of 512 spans, as an SDK's batch processor sends them, to a
real receiver (uvicorn on loopback, the writer thread, the default policies, a SQLite ledger).
Figure: wall time from the first request to every call being in the ledger. Baseline, same run:
`worker.ingest_file` of one OTLP JSON file holding the same requests (what `loopledger ingest`
does with a Collector file export). Also: the latency of one small request until its call is
readable by a dashboard connection (budget: a received span on the dashboard within 2 s).
"""

from __future__ import annotations

import json
import random
import socket
import statistics
import tempfile
import threading
import time
import urllib.request
from pathlib import Path

from loopledger import receive, worker
from loopledger.ledger import migrate
from loopledger.ledger import schema as s
from loopledger.ledger.engine import make_engine
from sqlalchemy import func, select

TOOLS = ("read_file", "run_tests", "search_code", "edit_file", "get_build_status")


def _attr(k: str, v: str) -> dict:
    return {"key": k, "value": {"stringValue": v}}


def requests(n_sessions: int, calls_per: int, seed: int = 11, batch: int = 512) -> list[bytes]:
    rng = random.Random(seed)
    spans = []
    for c in range(n_sessions):
        trace = f"{rng.getrandbits(128):032x}"
        for i in range(calls_per):
            tool = rng.choice(TOOLS)
            args = json.dumps({"path": f"src/pkg/mod{rng.randrange(60)}.py", "line": rng.randrange(400)})
            result = "x" * rng.randrange(200, 1200) if tool != "get_build_status" else "status: pending"
            spans.append({"traceId": trace, "spanId": f"{rng.getrandbits(64):016x}", "name": f"execute_tool {tool}",
                          "startTimeUnixNano": str(1_764_500_000_000_000_000 + c * 10**12 + i * 10**9),
                          "endTimeUnixNano": str(1_764_500_000_000_000_000 + c * 10**12 + i * 10**9 + 5 * 10**8),
                          "attributes": [_attr("gen_ai.operation.name", "execute_tool"), _attr("gen_ai.tool.name", tool),
                                         _attr("gen_ai.conversation.id", f"conv-{c}"),
                                         _attr("gen_ai.tool.call.arguments", args),
                                         _attr("gen_ai.tool.call.result", result)]})
    rng.shuffle(spans)  # sessions interleave across export batches, as concurrent agents do
    return [json.dumps({"resourceSpans": [{"resource": {"attributes": [_attr("service.name", "bench")]},
                                           "scopeSpans": [{"spans": spans[i:i + batch]}]}]}).encode()
            for i in range(0, len(spans), batch)]


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _calls(engine) -> int:
    with engine.connect() as conn:
        return conn.execute(select(func.count()).select_from(s.calls)).scalar() or 0


def _post(url: str, body: bytes) -> None:
    req = urllib.request.Request(url, data=body, method="POST", headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=120) as r:
        r.read()


def _serve(engine, spool: Path):
    import uvicorn

    rec = receive.Receiver(engine, spool, worker.Options())
    port = _free_port()
    srv = uvicorn.Server(uvicorn.Config(receive.make_app(rec), host="127.0.0.1", port=port, log_level="warning"))
    t = threading.Thread(target=srv.run, daemon=True)
    t.start()
    while not srv.started:
        time.sleep(0.01)
    return rec, srv, t, f"http://127.0.0.1:{port}/v1/traces"


def run(quick: bool = False) -> str:
    n_sessions, calls_per = (40, 25) if quick else (200, 50)
    bodies = requests(n_sessions, calls_per)
    total = n_sessions * calls_per
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        # Baseline: the same requests as one Collector export file, ingested once.
        f = tmp / "export.jsonl"
        f.write_bytes(b"\n".join(bodies) + b"\n")
        base_engine = make_engine(f"sqlite:///{tmp / 'base.sqlite'}")
        migrate.upgrade(base_engine)
        t0 = time.perf_counter()
        worker.ingest_file(base_engine, f, worker.Options())
        base_s = time.perf_counter() - t0
        assert _calls(base_engine) == total
        base_engine.dispose()

        engine = make_engine(f"sqlite:///{tmp / 'recv.sqlite'}")
        migrate.upgrade(engine)
        rec, srv, t, url = _serve(engine, tmp / "spool")
        reader = make_engine(f"sqlite:///{tmp / 'recv.sqlite'}", readonly=True)
        t0 = time.perf_counter()
        for body in bodies:
            _post(url, body)
        acked_s = time.perf_counter() - t0
        while _calls(reader) < total:
            time.sleep(0.05)
        recv_s = time.perf_counter() - t0

        # Latency: one small request into the idle receiver, until a reader sees its call.
        lat = []
        for i in range(10):
            one = requests(1, 1, seed=100 + i)[0].replace(b'"conv-0"', f'"lat-{i}"'.encode())
            before = _calls(reader)
            t1 = time.perf_counter()
            _post(url, one)
            while _calls(reader) <= before:
                time.sleep(0.01)
            lat.append(time.perf_counter() - t1)
        srv.should_exit = True
        t.join(30)
        rec.close()
        reader.dispose()
        engine.dispose()
    lat.sort()
    return (
        "## Receive (OTLP/HTTP → ledger)\n\n"
        f"{total:,} GenAI `execute_tool` spans in {n_sessions} interleaved conversations, "
        f"{len(bodies)} OTLP JSON requests of ≤512 spans, default policies, SQLite.\n\n"
        "| measure | figure | baseline (same run) | ratio | budget |\n|---|---:|---:|---:|---|\n"
        f"| `receive`: first request → every call in the ledger | {recv_s:.2f} s "
        f"({total / recv_s:,.0f} spans/s; all acknowledged after {acked_s:.2f} s) | `ingest` of the same "
        f"spans as one file: {base_s:.2f} s ({total / base_s:,.0f} calls/s) | {recv_s / base_s:.2f}× | — |\n"
        f"| one small request → its call readable by the dashboard (10 runs) | median "
        f"{statistics.median(lat) * 1000:.0f} ms, max {lat[-1] * 1000:.0f} ms | — | — | ≤ 2 s |\n"
    )


if __name__ == "__main__":
    print(run(quick=True))
