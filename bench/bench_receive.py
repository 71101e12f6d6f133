"""`loopledger receive`: spans/s from OTLP/HTTP into the ledger, beside `ingest` of the same spans,
and what one small request costs as the day's spool grows.

Generated GenAI traces (conversations of `execute_tool` spans with realistic argument and result
sizes; concurrent conversations interleave across export batches, each conversation's spans in
the order its agent ended them, as SDK batch processors send them) are POSTed as OTLP JSON
requests of 512 spans to a real `loopledger receive` process (uvicorn on loopback, the default
policies, a SQLite ledger).

1. Throughput: wall time from the first request to every call being in the ledger, and the
   receiver's peak RSS. Baseline, same run: `loopledger ingest` (a process too) of one OTLP JSON
   file holding the same requests (a Collector file export), its time and peak RSS; and the CPU
   time of each (steadier than wall time when the machine is shared).
2. Flat with the day: at spool sizes 0, 1k, 10k (and 100k in a full run), 10 one-span requests
   (half into an existing conversation, half a new one): the POST's answer time (ack latency), and
   the time until a dashboard connection can read its call (time-to-ledger); beside them the
   slowest 512-span export call while the spool grew to that size.
3. Profile: where the receiver's CPU goes while it takes the throughput run's spans, sampled by
   py-spy from outside (the receiver runs a writer and a flusher thread beside uvicorn's loop,
   which cProfile, one thread at a time, would not see); only samples holding the GIL count.
"""

from __future__ import annotations

import json
import os
import random
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

from loopledger import worker
from loopledger.ledger import migrate
from loopledger.ledger import schema as s
from loopledger.ledger.engine import make_engine
from loopledger.receive.http import SMALL_FLUSH
from sqlalchemy import func, select

TOOLS = ("read_file", "run_tests", "search_code", "edit_file", "get_build_status")


def _attr(k: str, v: str) -> dict:
    return {"key": k, "value": {"stringValue": v}}


def _span(rng: random.Random, trace: str, conv: str, i: int, t0: int) -> dict:
    tool = rng.choice(TOOLS)
    args = json.dumps({"path": f"src/pkg/mod{rng.randrange(60)}.py", "line": rng.randrange(400)})
    result = "x" * rng.randrange(200, 1200) if tool != "get_build_status" else "status: pending"
    start = t0 + i * 10**9
    return {"traceId": trace, "spanId": f"{rng.getrandbits(64):016x}", "name": f"execute_tool {tool}",
            "startTimeUnixNano": str(start), "endTimeUnixNano": str(start + 5 * 10**8),
            "attributes": [_attr("gen_ai.operation.name", "execute_tool"), _attr("gen_ai.tool.name", tool),
                           _attr("gen_ai.conversation.id", conv), _attr("gen_ai.tool.call.arguments", args),
                           _attr("gen_ai.tool.call.result", result)]}


def _body(spans: list[dict]) -> bytes:
    return json.dumps({"resourceSpans": [{"resource": {"attributes": [_attr("service.name", "bench")]},
                                          "scopeSpans": [{"spans": spans}]}]}).encode()


def requests(n_sessions: int, calls_per: int, seed: int = 11, batch: int = 512, prefix: str = "conv",
             t_base: int = 1_764_500_000_000_000_000) -> list[bytes]:
    rng = random.Random(seed)
    queues = []
    for c in range(n_sessions):
        trace = f"{rng.getrandbits(128):032x}"
        t0 = t_base + c * 10**12
        queues.append([_span(rng, trace, f"{prefix}-{c}", i, t0) for i in range(calls_per)])
    # Concurrent agents: the next span comes from a random conversation, each conversation in order.
    spans = []
    heads = [0] * n_sessions
    live = list(range(n_sessions))
    while live:
        k = rng.randrange(len(live))
        c = live[k]
        spans.append(queues[c][heads[c]])
        heads[c] += 1
        if heads[c] == calls_per:
            live[k] = live[-1]
            live.pop()
    return [_body(spans[i:i + batch]) for i in range(0, len(spans), batch)]


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _calls(engine) -> int:
    with engine.connect() as conn:
        return conn.execute(select(func.count()).select_from(s.calls)).scalar() or 0


def _post(url: str, body: bytes) -> float:
    t = time.perf_counter()
    req = urllib.request.Request(url, data=body, method="POST", headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=120) as r:
        r.read()
    return time.perf_counter() - t


def _cli(*args: str) -> list[str]:
    return [sys.executable, "-m", "loopledger.cli.app", *args]


def _hwm_mb(pid: int, field: str = "VmHWM") -> float:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith(field + ":"):
                return int(line.split()[1]) / 1024
    except (OSError, ValueError):
        pass
    return 0.0


def _cpu_s(pid: int) -> float:
    """CPU seconds (user + system) a process has used: far steadier than wall time on a loaded
    machine, so the ratio beside it says what the receiver costs, not what the neighbours did."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _peak_mb(proc: subprocess.Popen, stop: bool = False) -> float:
    """The process's peak RSS in MB, sampled from /proc/<pid>/status (VmHWM) until it exits
    (`stop`: SIGTERM it first, its peak read before). Not wait4's ru_maxrss: Linux carries a
    forked child's maxrss over from its parent's memory at the fork, so a child of this (big)
    bench process would report at least the bench's own size."""
    peak = _hwm_mb(proc.pid)
    if stop:
        proc.terminate()
    while proc.poll() is None:
        peak = max(peak, _hwm_mb(proc.pid))
        time.sleep(0.02)
    return peak


class _Receiver:
    def __init__(self, tmp: Path) -> None:
        self.db = tmp / "recv.sqlite"
        port = _free_port()
        self.url = f"http://127.0.0.1:{port}/v1/traces"
        self.proc = subprocess.Popen(_cli("receive", "--db", str(self.db), "--port", str(port)),
                                     stderr=subprocess.DEVNULL, cwd=tmp)
        deadline = time.monotonic() + 60
        while True:
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=2):
                    break
            except OSError:
                if time.monotonic() > deadline or self.proc.poll() is not None:
                    raise RuntimeError("the receiver did not start") from None
                time.sleep(0.1)
        self.reader = make_engine(f"sqlite:///{self.db}", readonly=True)

    def wait_calls(self, n: int) -> None:
        while _calls(self.reader) < n:
            time.sleep(0.02)

    def stop(self) -> float:
        self.reader.dispose()
        return _peak_mb(self.proc, stop=True)


def _ingested_in_process(path: Path, db: Path, calls: int) -> tuple[float, float]:
    """`ingest` of one file into a fresh ledger, in this process: (wall s, CPU s)."""
    engine = make_engine(f"sqlite:///{db}")
    migrate.upgrade(engine)
    t0, c0 = time.perf_counter(), time.process_time()
    worker.ingest_file(engine, path, worker.Options())
    took = time.perf_counter() - t0, time.process_time() - c0
    assert _calls(engine) == calls
    engine.dispose()
    return took


def _parts(bodies: list[bytes], tmp: Path, flushes: int) -> tuple[float, float]:
    """Where the receiver's CPU goes, in this process on the same requests: (the HTTP side's
    decoding, validation, redaction and spool lines, CPU s; the flusher writing them into a fresh
    ledger in `flushes` even flushes, the writer's spooling included, CPU s)."""
    from loopledger.receive import http

    opts = worker.Options()
    c0 = time.process_time()
    pieces = []
    for body in bodies:
        req, spans = http.decoded(body, http.JSON)
        pieces.append(http.prepare(req, opts.redact, spans))
    side = time.process_time() - c0
    engine = make_engine(f"sqlite:///{tmp / 'parts.sqlite'}")
    migrate.upgrade(engine)
    rec = http.Receiver(engine, tmp / "parts-spool", opts, flush_interval=None)
    every = max(1, len(pieces) // max(1, flushes))
    c0 = time.process_time()
    for i, p in enumerate(pieces, 1):
        rec.submit(p).result()
        if i % every == 0:
            rec.flush()
    rec.close()
    flush = time.process_time() - c0
    engine.dispose()
    return side, flush


def _flushes(rec: _Receiver) -> int:
    """The writes the receiver's flusher made (its /health `ingests`: counted just after the
    rows a reader sees are committed, so it is read until it stops changing)."""
    seen, deadline = -1, time.monotonic() + 5
    while time.monotonic() < deadline:
        with urllib.request.urlopen(rec.url.replace("/v1/traces", "/health"), timeout=10) as r:
            now = int(json.loads(r.read())["ingests"])
        if now == seen and now > 0:
            return now
        seen = now
        time.sleep(0.2)
    return max(seen, 1)


def _throughput(tmp: Path, n_sessions: int, calls_per: int) -> str:
    bodies = requests(n_sessions, calls_per)
    total = n_sessions * calls_per
    f = tmp / "export.jsonl"
    f.write_bytes(b"\n".join(bodies) + b"\n")
    # Baseline time in this process (no interpreter start counted); its peak RSS from a process.
    base_s, base_cpu = _ingested_in_process(f, tmp / "base.sqlite", total)
    base = subprocess.Popen(_cli("ingest", str(f), "--db", str(tmp / "base2.sqlite"), "--create"),
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    base_mb = _peak_mb(base)
    rec = _Receiver(tmp)
    t0, c0 = time.perf_counter(), _cpu_s(rec.proc.pid)
    for body in bodies:
        _post(rec.url, body)
    acked_s = time.perf_counter() - t0
    rec.wait_calls(total)
    recv_s, recv_cpu = time.perf_counter() - t0, _cpu_s(rec.proc.pid) - c0
    flushes = _flushes(rec)
    recv_mb = rec.stop()
    spool = sum(p.stat().st_size for p in (tmp / "recv.sqlite.otlp").glob("*.jsonl"))
    side, flush = _parts(bodies, tmp, flushes)
    return (
        f"{total:,} GenAI `execute_tool` spans in {n_sessions} interleaved conversations, "
        f"{len(bodies)} OTLP JSON requests of ≤512 spans, default policies, SQLite. The receiver is a "
        "`loopledger receive` process; `ingest` is timed in-process (`worker.ingest_file`), its peak RSS "
        "from a `loopledger ingest` process of the same file.\n\n"
        "| measure | receive | `ingest` of the same spans as one file (same run) | ratio (ingest ÷ receive "
        "time) | budget |\n|---|---:|---:|---:|---|\n"
        f"| first request → every call in the ledger | {recv_s:.2f} s ({total / recv_s:,.0f} spans/s; all "
        f"acknowledged after {acked_s:.2f} s) | {base_s:.2f} s ({total / base_s:,.0f} spans/s) | "
        f"{base_s / recv_s:.2f}× | ≥ 1× |\n"
        f"| CPU time for it (user + system) | {recv_cpu:.2f} s (the receiver process) | {base_cpu:.2f} s | "
        f"{base_cpu / recv_cpu:.2f}× | ≥ 1× |\n"
        f"| peak RSS | {recv_mb:.0f} MB | {base_mb:.0f} MB | — | flat |\n"
        f"| spool on disk after it | {spool / 1e6:.1f} MB | — | — | — |\n"
        f"| its parts, in-process on the same requests: the HTTP side (decode, validate, redact, spool lines) "
        f"| {side:.2f} CPU-s | | | |\n"
        f"| … and the flusher (spooling included), in {flushes} flushes as the receiver made them | {flush:.2f} CPU-s "
        f"| {base_cpu:.2f} CPU-s | {base_cpu / flush:.2f}× | |\n\n"
        "Where the budget stands: the flusher does what `ingest` does (the same reader, redaction, "
        "policies and rows, `file_ingest`), so its CPU alone is about `ingest`'s; the receiver adds the "
        "HTTP side, which must be done before a request is acknowledged. In one process the two share one "
        "interpreter lock, so the wall time is at least their CPU together; with the flusher in a process of "
        "its own it would still be at least the flusher's own CPU (plus reading back the spool, which it is "
        "handed in memory now) after the first spans came: ≥ 1× is out of reach while the flusher costs what "
        "`ingest` costs.\n"
    )


def _sdk_run(tmp: Path, n_spans: int, conversations: int = 200) -> str:
    """The Phoenix-shaped run: `n_spans` GenAI tool spans made by the real OpenTelemetry SDK and
    sent by its OTLP/HTTP (protobuf) exporter — a BatchSpanProcessor, 512 spans per export —
    to a `loopledger receive` process, `conversations` agents at once (round robin, one span each
    in turn). Timed from the first span to every call in the ledger; beside it, `ingest` of the
    very spans as a file: the receiver's own spool file, copied when it is done."""
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
    from opentelemetry.sdk.resources import Resource
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import BatchSpanProcessor

    rec = _Receiver(tmp)
    provider = TracerProvider(resource=Resource.create({"service.name": "bench-agents"}))
    provider.add_span_processor(BatchSpanProcessor(OTLPSpanExporter(endpoint=rec.url), max_queue_size=n_spans,
                                                   max_export_batch_size=512, schedule_delay_millis=200))
    tracer = provider.get_tracer("bench")
    rng = random.Random(5)
    per = n_spans // conversations
    t0, c0 = time.perf_counter(), _cpu_s(rec.proc.pid)
    for i in range(per):
        for c in range(conversations):
            tool = rng.choice(TOOLS)
            with tracer.start_as_current_span(f"execute_tool {tool}", attributes={
                    "gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": tool,
                    "gen_ai.conversation.id": f"sdk-{c}", "gen_ai.tool.call.id": f"call_{c}_{i}",
                    "gen_ai.tool.call.arguments": json.dumps({"path": f"src/pkg/mod{rng.randrange(60)}.py",
                                                              "line": rng.randrange(400)}),
                    "gen_ai.tool.call.result": "x" * rng.randrange(200, 1200) if tool != "get_build_status"
                    else "status: pending"}):
                pass
    made = time.perf_counter() - t0
    assert provider.force_flush(300_000)
    acked = time.perf_counter() - t0
    provider.shutdown()
    total = per * conversations
    rec.wait_calls(total)
    recv_s, recv_cpu = time.perf_counter() - t0, _cpu_s(rec.proc.pid) - c0
    recv_mb = rec.stop()
    spool = next((tmp / "recv.sqlite.otlp").glob("otlp-*.jsonl"))
    copy = tmp / "sdk-spans.jsonl"
    shutil.copyfile(spool, copy)
    base_s, base_cpu = _ingested_in_process(copy, tmp / "sdk-base.sqlite", total)
    return (
        f"The Phoenix-shaped run: {total:,} GenAI tool spans from the real OpenTelemetry SDK (TracerProvider, "
        f"BatchSpanProcessor, 512 spans per export) through its OTLP/HTTP protobuf exporter, {conversations} "
        f"conversations at once, into a `loopledger receive` process; the SDK made them in {made:.2f} s and every "
        f"export was acknowledged after {acked:.2f} s. Baseline: `ingest` (in-process) of the same spans as a file "
        "(the receiver's spool, copied).\n\n"
        "| measure | receive | `ingest` of the same spans as one file (same run) | ratio (ingest ÷ receive) | budget |\n"
        "|---|---:|---:|---:|---|\n"
        f"| first span → every call in the ledger | {recv_s:.2f} s ({total / recv_s:,.0f} spans/s) | {base_s:.2f} s "
        f"({total / base_s:,.0f} spans/s) | {base_s / recv_s:.2f}× | ≥ 1× |\n"
        f"| CPU time (user + system) | {recv_cpu:.2f} s (the receiver process) | {base_cpu:.2f} s | "
        f"{base_cpu / recv_cpu:.2f}× | ≥ 1× |\n"
        f"| receiver peak RSS | {recv_mb:.0f} MB | | | flat |\n"
    )


def _py_spy() -> str | None:
    here = Path(sys.executable).with_name("py-spy")
    return str(here) if here.exists() else shutil.which("py-spy")


def profile_rows(raw: str, top: int = 14) -> tuple[int, list[tuple[int, int, str]], list[tuple[int, str]]]:
    """py-spy's raw output (one `frame;frame;...;leaf count` line per stack) as the total sample
    count, LoopLedger's `top` frames by inclusive samples (a frame counted once per stack it is
    on) beside their own (leaf) samples, and the `top` frames of any code by own samples. Frames
    on nearly every stack (thread entry points) say nothing and are left out."""
    total = 0
    inclusive: dict[str, int] = {}
    own: dict[str, int] = {}
    for line in raw.splitlines():
        stack, _, n = line.rpartition(" ")
        if not stack or not n.isdigit():
            continue
        count = int(n)
        total += count
        frames = stack.split(";")
        for f in set(frames):
            inclusive[f] = inclusive.get(f, 0) + count
        own[frames[-1]] = own.get(frames[-1], 0) + count
    ours = sorted(((c, own.get(f, 0), f) for f, c in inclusive.items()
                   if c < 0.9 * total and ("ingest/" in f or "loopledger/" in f)), reverse=True)
    leaves = sorted(((c, f) for f, c in own.items()), reverse=True)
    return total, ours[:top], leaves[:top]


def _profile(tmp: Path, n_sessions: int, calls_per: int) -> str:
    spy = _py_spy()
    head = "Profile of the receiver while it takes the throughput run's spans (py-spy, 250 samples/s, GIL held)"
    if spy is None:
        return f"{head}: not taken, py-spy is not installed.\n"
    bodies = requests(n_sessions, calls_per)
    total = n_sessions * calls_per
    rec = _Receiver(tmp)
    out = tmp / "receive.pyspy.txt"
    proc = subprocess.Popen([spy, "record", "--pid", str(rec.proc.pid), "--format", "raw", "--output", str(out),
                             "--rate", "250", "--gil", "--function"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    time.sleep(1.0)  # attached before the first request
    for body in bodies:
        _post(rec.url, body)
    rec.wait_calls(total)
    proc.send_signal(signal.SIGINT)  # py-spy writes what it sampled and exits
    try:
        _, err = proc.communicate(timeout=60)
    finally:
        rec.stop()
    if not out.exists():
        return f"{head}: not taken ({(err or '').strip().splitlines()[-1:] or ['py-spy wrote nothing']}).\n"
    samples, rows, leaves = profile_rows(out.read_text())
    lines = [f"{head}: {samples:,} samples. LoopLedger's frames by the share of samples each is on "
             "(inclusive; the share where it is the running frame: own), then the running frames of any code.", "",
             "| LoopLedger frame | inclusive | own |", "|---|---:|---:|"]
    lines += [f"| `{frame}` | {100 * inc / samples:.0f}% | {100 * mine / samples:.0f}% |" for inc, mine, frame in rows]
    lines += ["", "| running frame | own |", "|---|---:|"]
    lines += [f"| `{frame}` | {100 * mine / samples:.0f}% |" for mine, frame in leaves]
    return "\n".join(lines) + "\n"


def _flat(tmp: Path, sizes: list[int]) -> str:
    rec = _Receiver(tmp)
    rows = []
    spooled = 0
    for size in sizes:
        slowest = 0.0
        if size > spooled:
            per = 50
            n = (size - spooled) // per
            for body in requests(n, per, seed=size, prefix=f"fill{size}"):
                slowest = max(slowest, _post(rec.url, body))
            spooled += n * per
            rec.wait_calls(spooled)
        acks, ttl = [], []
        for i in range(10):
            prefix = f"fill{size}" if size and i % 2 == 0 else f"one{size}-{i}"
            # Later than the day's spans: a conversation continued, not rewritten.
            one = requests(1, 1, seed=10**7 + size + i, prefix=prefix, t_base=1_764_600_000_000_000_000)[0]
            before = _calls(rec.reader)
            t1 = time.perf_counter()
            acks.append(_post(rec.url, one))
            while _calls(rec.reader) <= before:
                time.sleep(0.005)
            ttl.append(time.perf_counter() - t1)
            spooled += 1
        rows.append(f"| {spooled - 10:,} | {statistics.median(acks) * 1000:.1f} ms (max {max(acks) * 1000:.1f}) | "
                    f"{statistics.median(ttl) * 1000:.0f} ms (max {max(ttl) * 1000:.0f}) | "
                    + (f"{slowest * 1000:.0f} ms" if slowest else "—")
                    + f" | {_hwm_mb(rec.proc.pid, 'VmRSS'):.0f} MB |")
    rec.stop()
    return ("One-span requests into a receiver whose day's spool already holds N spans (all in the "
            "ledger), 10 each; half continue a conversation of the day, half start one. The flusher "
            f"writes fewer than {SMALL_FLUSH} waiting spans at once, more (a stream) at once too when its last "
            "flush started 0.5 s ago or more, else then (later while the stream lasts: up to twice the last "
            "flush's duration); "
            "time-to-ledger is until a separate read-only connection sees the call.\n\n"
            "| spans spooled today | ack latency, median | time-to-ledger, median | slowest 512-span export "
            "call while filling | receiver RSS |\n|---:|---:|---:|---:|---:|\n" + "\n".join(rows) + "\n")


def run(quick: bool = False) -> str:
    n_sessions, calls_per = (40, 25) if quick else (200, 50)
    sizes = [0, 1_000, 10_000] if quick else [0, 1_000, 10_000, 100_000]
    load = os.getloadavg()[0]
    with tempfile.TemporaryDirectory() as tmp:
        a = Path(tmp) / "a"
        a.mkdir()
        through = _throughput(a, n_sessions, calls_per)
        b = Path(tmp) / "b"
        b.mkdir()
        flat = _flat(b, sizes)
        c = Path(tmp) / "c"
        c.mkdir()
        prof = _profile(c, n_sessions, calls_per)
        d = Path(tmp) / "d"
        d.mkdir()
        sdk = _sdk_run(d, 2_000 if quick else 20_000, 40 if quick else 200)
    return (f"## Receive (OTLP/HTTP → ledger)\n\nLoad average at start: {load:.2f}.\n\n{through}\n{sdk}\n{flat}\n"
            f"{prof}")


if __name__ == "__main__":
    print(run(quick="--full" not in sys.argv))
