"""The receiver's HTTP side and its two threads (see the package docstring for the promises).

POST /v1/traces takes an `ExportTraceServiceRequest` as protobuf (`application/x-protobuf`) or
JSON (`application/json`), optionally gzip-compressed; GET /health says what was received and
what is pending. With a token, both need `Authorization: Bearer <token>` (else 401); a member's
token is refused on /v1/traces (403: spans carry no member; members forward to /v1/live), and a
door the ledger cannot answer for refuses with 503 and Retry-After (forwarded.Door).

A request is decoded and validated, its spans cut into spool lines (redacted, depth-capped:
spool.py) off the event loop, then handed to the WRITER thread, which appends every queued
request's lines, fsyncs once, hands their decoded spans to the flusher and only then lets each
request be answered. The FLUSHER thread (flush.py) writes what the writer appended into the
ledger: at once when fewer than SMALL_FLUSH spans wait or the last flush is `flush_interval`
seconds past, else no sooner than that or STREAM_BACKOFF times the last flush's duration (a
stream's batches share a flush);
nothing the HTTP side waits for ever waits on the ledger.

Malformed bodies get HTTP 400 with the reason and never stop the receiver; bodies over
`max_body` bytes (after decompression too) get 413; other content types 415. A request not
acknowledged within ACK_DEADLINE_S of its body's arrival (decoded, redacted, fsync'd) gets 503
and one logged line: not acknowledged, so the exporter retries, and a retry of spans that did
reach the spool meanwhile is dropped by their ids.
"""

from __future__ import annotations

import hmac
import ipaddress
import logging
import os
import queue
import threading
import time
import zlib
from collections.abc import Callable
from concurrent.futures import Future
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import orjson
from loopledger import worker
from loopledger.formats import otlp
from loopledger.receive import flush as flushing
from loopledger.receive import forwarded
from loopledger.receive import spool as spooling
from sqlalchemy.engine import Engine

log = logging.getLogger("loopledger.receive")

DEFAULT_HOST = "127.0.0.1"
DEFAULT_PORT = 4318  # OTLP/HTTP's registered port
DEFAULT_MAX_BODY = 16 * 1024 * 1024
DEFAULT_KEEP_DAYS = 1
SMALL_FLUSH = 64  # spans waiting that the flusher writes at once, without waiting for its interval
# In a stream, a flush starts at least this many times the last flush's duration after it started
# (and at least `flush_interval`): every flush pays a fixed price per session it touches (its
# resume snapshot sealed, its statements), so under a heavy stream the batches grow instead of
# the flushes following each other, and the flusher leaves the HTTP side most of the GIL.
STREAM_BACKOFF = 2
# ...unless the stream pauses: once the interval is up, no span spooled for this long ends that
# wait (the batch is complete; waiting on would only leave the flusher idle).
STREAM_QUIET = 0.1
TOKEN_ENV = "LOOPLEDGER_RECEIVE_TOKEN"
# JSON levels a request may nest (the whole request counted): under orjson's 255 and well under
# Python's recursion limit for the recursive walks after it. An OTLP span needs about 8; each
# nested kvlist / array attribute value adds 3-4.
MAX_REQUEST_DEPTH = 200
# The OpenTelemetry exporters' own timeout is 10 s (OTEL_EXPORTER_OTLP_TIMEOUT): answered before.
ACK_DEADLINE_S = float(os.environ.get("LOOPLEDGER_RECEIVE_ACK_DEADLINE", "8"))
RETRY_AFTER_S = 5  # a door the ledger cannot answer for: when to ask again
PROTOBUF = "application/x-protobuf"
JSON = "application/json"


class BadRequest(ValueError):
    """The body is not an OTLP trace request; the message says why (sent back with HTTP 400)."""

    status = 400


class TooLarge(BadRequest):
    status = 413


class Unsupported(BadRequest):
    status = 415


def _inflate(body: bytes, max_body: int) -> bytes:
    """gunzip with a cap: a small compressed body must not expand into gigabytes (a zip bomb)."""
    d = zlib.decompressobj(16 + zlib.MAX_WBITS)
    try:
        out = d.decompress(body, max_body + 1)
    except zlib.error as e:
        raise BadRequest(f"Content-Encoding gzip, but the body is not gzip data: {e}") from None
    if len(out) > max_body or d.unconsumed_tail:
        raise TooLarge(f"the decompressed body is over the limit of {max_body} bytes")
    return out


def decode(body: bytes, content_type: str, encoding: str = "", max_body: int = DEFAULT_MAX_BODY) -> dict[str, Any]:
    """A request body as an OTLP JSON request (dict), whatever its wire encoding."""
    return decoded(body, content_type, encoding, max_body)[0]


def decoded(body: bytes, content_type: str, encoding: str = "",
            max_body: int = DEFAULT_MAX_BODY) -> tuple[dict[str, Any], list[otlp.Span]]:
    """`decode`, with the spans its validation read (`prepare` keeps those redaction leaves alone)."""
    if encoding.strip().lower() == "gzip":
        body = _inflate(body, max_body)
    elif encoding.strip() and encoding.strip().lower() != "identity":
        raise Unsupported(f"Content-Encoding {encoding!r} is not supported (gzip or none)")
    ctype = content_type.split(";")[0].strip().lower()
    if ctype == PROTOBUF:
        from google.protobuf.message import DecodeError
        from loopledger.receive import protobuf
        from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

        try:
            msg = ExportTraceServiceRequest.FromString(body)
            req = protobuf.to_dict(msg)  # camelCase like OTLP JSON; ids base64 (the reader takes both)
        except (DecodeError, ValueError, RecursionError) as e:
            raise BadRequest(f"not a protobuf ExportTraceServiceRequest: {e or type(e).__name__}") from None
        req.setdefault("resourceSpans", [])
    elif ctype == JSON:
        try:
            req = orjson.loads(body)
        except orjson.JSONDecodeError as e:
            raise BadRequest(f"invalid JSON: {e}") from None
    else:
        raise Unsupported(f"Content-Type {content_type!r} is not supported ({PROTOBUF} or {JSON})")
    if otlp.depth_over(req, MAX_REQUEST_DEPTH):
        # Checked before anything walks it recursively (the reader, the redaction, orjson).
        raise BadRequest(f"the request nests deeper than {MAX_REQUEST_DEPTH} levels (an attribute's "
                         "kvlistValue / arrayValue nested that deep is not a trace)")
    try:
        spans = otlp.spans_of_request(req)  # validates the shape before anything is written
    except (ValueError, TypeError, AttributeError, RecursionError) as e:
        raise BadRequest(f"not an OTLP trace request: {e}") from None
    for i, span in enumerate(spans):
        # OTLP requires both (all-zero is invalid); without them spans cannot be told apart, and
        # a retry's spans are dropped as duplicates by these ids: refused, never acknowledged.
        for name, value in (("traceId", span.trace_id), ("spanId", span.span_id)):
            if not value.strip("0"):
                raise BadRequest(f"span {i} ({span.name or 'unnamed'!r}) has no {name}: OTLP requires a "
                                 "non-zero traceId and spanId on every span")
    return req, spans


def prepare(req: dict[str, Any], redact: bool = True, spans: list[otlp.Span] | None = None) -> list[spooling.Piece]:
    """A decoded request's spool lines; a shape the reader took but the spooling cannot is a
    bad request too (HTTP 400), never a server error. `spans`: what `decoded` read of `req`."""
    try:
        return spooling.pieces(req, redact, spans)
    except (ValueError, TypeError, AttributeError, RecursionError, orjson.JSONEncodeError) as e:
        raise BadRequest(f"not an OTLP trace request: {type(e).__name__}: {e}") from None


@dataclass
class Stats:
    requests: int = 0
    spans: int = 0
    duplicates: int = 0
    rejected: int = 0
    unauthorized: int = 0
    ingests: int = 0
    last_error: str = ""
    reports: list[worker.FileReport] = field(default_factory=list)
    # POST /v1/live: members' forwarded batches acknowledged (stored), their live events and
    # sessions, and the members they came from (so /health and the exit line count them too).
    batches: int = 0
    live_events: int = 0
    live_sessions: int = 0
    members: set[str] = field(default_factory=set)


class Receiver:
    """The spool's writer thread and the flusher thread. `submit(pieces)` resolves once the
    pieces are on disk; `flush()` writes what is spooled into the ledger now."""

    def __init__(self, engine: Engine, spool: Path, opts: worker.Options, *, flush_interval: float | None = 0.5,
                 keep_days: int | None = DEFAULT_KEEP_DAYS,
                 clock: Callable[[], datetime] = lambda: datetime.now(UTC)) -> None:
        self.engine, self.opts = engine, opts
        self.flush_interval, self.clock, self.keep_days = flush_interval, clock, keep_days
        self.spooler = spooling.Spool(Path(spool), clock)
        self.spool = self.spooler.folder  # a Path, as before
        self.flusher = flushing.Flusher(engine, self.spool, opts)
        self.stats = Stats()
        self._queue: queue.Queue[tuple[list[spooling.Piece], Future] | None] = queue.Queue()
        self._wake = threading.Event()
        self._stop = threading.Event()
        self._flush_lock = threading.Lock()
        self._closed = False
        # Spans spooled since the flusher last started a flush (the writer adds, the flusher
        # zeroes): it only chooses when to flush, so a lost update between the two threads is harmless.
        self._unflushed = 0
        self._spooled_at = 0.0  # monotonic time of the writer's last append (the flusher reads it)
        self._writer = threading.Thread(target=self._write_loop, name="loopledger-receive-writer", daemon=True)
        self._flusher = threading.Thread(target=self._flush_loop, name="loopledger-receive-flusher", daemon=True)
        self._writer.start()
        if flush_interval is not None:  # None: only flush() writes the ledger (tests, tools)
            self._flusher.start()
        if self.flusher.files and any(fs.indexed < fs.path.stat().st_size or fs.committed < fs.indexed
                                      for fs in self.flusher.files.values()):
            self._wake.set()  # spans acknowledged before a restart and not yet in the ledger

    def submit(self, pieces: list[spooling.Piece]) -> Future:
        fut: Future = Future()
        self._queue.put((pieces, fut))
        return fut

    def _write_loop(self) -> None:
        while True:
            item = self._queue.get()
            batch = [item]
            while True:  # group commit: every request queued meanwhile shares one fsync
                try:
                    batch.append(self._queue.get_nowait())
                except queue.Empty:
                    break
            work = [b for b in batch if b is not None]
            if work:
                try:
                    kept, path, start, written = self.spooler.write([pieces for pieces, _ in work])
                except Exception as e:  # noqa: BLE001 — one bad write must not stop the receiver
                    log.exception("spool write failed")
                    for _, fut in work:
                        fut.set_exception(e)
                else:
                    if path is not None:
                        # On disk (fsync'd) before the flusher may take them: the spool stays
                        # the durable record, the handoff only spares re-reading it.
                        self.flusher.hand(path, start, written)
                    for (pieces, fut), n in zip(work, kept, strict=True):
                        self.stats.spans += n
                        self.stats.duplicates += len(pieces) - n
                        fut.set_result(n)
                    if any(kept):
                        self._unflushed += sum(kept)
                        self._spooled_at = time.monotonic()
                        self._wake.set()
            if len(work) < len(batch):
                self.spooler.close()
                return

    def flush(self) -> list[worker.FileReport]:
        """Write what is spooled into the ledger (the flusher thread calls this; tests may too)."""
        with self._flush_lock:
            try:
                reports = self.flusher.flush()
            except Exception as e:  # noqa: BLE001 — the flusher thread must survive anything
                log.exception("flush of the spool failed")
                self.stats.last_error = f"{type(e).__name__}: {e}"
                return []
            self.stats.ingests += len(reports)
            self.stats.reports = (self.stats.reports + reports)[-20:]
            self.stats.last_error = self.flusher.stats.last_error
            self.trim()
            return reports

    def _flush_loop(self) -> None:
        last, took = -self.flush_interval, 0.0
        while not self._stop.is_set():
            self._wake.wait()
            if self._stop.is_set():
                return
            # A few spans (under SMALL_FLUSH: one agent's request into a quiet receiver) are
            # written at once, so time-to-ledger is the flush's own time. More than that is a
            # stream: its first batch is written at once too (waiting the interval for the
            # batches behind it left the flusher idle while they came: bench_receive, 0.5 s more
            # from first span to ledger), each later flush at least the interval after the last
            # one started, then up to STREAM_BACKOFF times that flush's own duration after it
            # started — that part only while spans keep coming (nothing spooled for STREAM_QUIET:
            # the stream paused, it starts at once). What arrives during the wait joins it, so
            # the per-session work of a flush (its statements) is paid once per batch, not per request.
            if self._unflushed >= SMALL_FLUSH:
                soonest = max(time.monotonic(), last + self.flush_interval)
                due = max(soonest, last + STREAM_BACKOFF * took)
                while not self._stop.is_set():
                    now = time.monotonic()
                    quiet_at = self._spooled_at + STREAM_QUIET
                    if now >= due or (now >= soonest and now >= quiet_at):
                        break
                    self._stop.wait((soonest if now < soonest else min(due, quiet_at)) - now)
            self._wake.clear()
            self._unflushed = 0
            last = time.monotonic()
            self.flush()
            took = time.monotonic() - last
            if self.flusher.stats.pending:
                # A busy or unreachable ledger: try again after the interval (at once would
                # spin on a server that refuses connections).
                self._stop.wait(self.flush_interval)
                self._wake.set()

    def trim(self) -> list[Path]:
        """Delete spool files of days before the last `keep_days` whose spans are all in the ledger."""
        if self.keep_days is None:
            return []
        today = self.clock().date()
        gone = []
        for path, fs in list(self.flusher.files.items()):
            try:
                day = datetime.strptime(spooling.day_of(path), "%Y-%m-%d").date()
            except ValueError:
                continue
            if (today - day).days <= self.keep_days or fs.pending or fs.committed < path.stat().st_size:
                continue
            path.unlink()
            self.flusher.forget(path)
            gone.append(path)
            log.info("spool: %s trimmed (every span in it is in the ledger)", path)
        return gone

    def close(self) -> None:
        """Write what is queued, ingest what is spooled, then stop both threads. Safe to call twice."""
        if self._closed:
            return
        self._closed = True
        self._queue.put(None)
        self._writer.join()
        self._stop.set()
        self._wake.set()
        if self._flusher.is_alive():
            self._flusher.join()
        self.flush()


def authorized(header: str | None, token: str | None) -> bool:
    """Whether an Authorization header carries `token` (constant time; no token: everyone)."""
    if not token:
        return True
    scheme, _, given = (header or "").partition(" ")
    if scheme.lower() != "bearer":
        return False
    return hmac.compare_digest(given.strip().encode(), token.encode())


def is_loopback(host: str) -> bool:
    if host.strip().lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False  # a name: it may resolve beyond this machine


def door_problem(host: str, token: str | bool | None, insecure: bool) -> str | None:
    """Why the receiver must not start on `host`, or None: beyond loopback anyone who reaches
    the port could write into the ledger, so that takes a token — `--token`, or members' tokens in
    the ledger (`token` True) — or --insecure, said out loud."""
    if is_loopback(host) or token or insecure:
        return None
    return (f"--host {host} accepts spans from beyond this machine, and without a token anyone who "
            f"reaches the port can write into the ledger. Give --token (or ${TOKEN_ENV}); exporters "
            "send it with OTEL_EXPORTER_OTLP_HEADERS=Authorization=Bearer%20<token>. "
            "To serve without one anyway, add --insecure.")


def make_app(receiver: Receiver, max_body: int = DEFAULT_MAX_BODY, on_ready: Callable[[], None] | None = None,
             token: str | None = None, ack_deadline: float = ACK_DEADLINE_S, closed: bool = False):
    """The Starlette app: POST /v1/traces, GET /health, POST /v1/live; `on_ready` once it is
    listening. With `token`, all answer 401 unless the request carries `Authorization: Bearer
    <token>` (or a member's token, see forwarded.Door); `closed`: a token is required from the
    start (the ledger held members' tokens, or the receiver listens beyond loopback), and for
    good. A request not acknowledged within `ack_deadline` seconds is answered 503 (retry)."""
    import contextlib

    from starlette.applications import Starlette
    from starlette.routing import Route

    routes = _Routes(receiver, max_body, _Team(receiver, token, closed), ack_deadline)

    @contextlib.asynccontextmanager
    async def lifespan(app):
        if on_ready is not None:
            on_ready()
        yield

    return Starlette(routes=[Route("/v1/traces", routes.traces, methods=["POST"]), Route("/health", routes.health),
                             Route(forwarded_path, routes.live, methods=["POST"])], lifespan=lifespan)


def _error(code: int, message: str, status: int, **kw: Any) -> Any:
    """An answer in OTLP's error shape (`code`: a gRPC status code, as exporters expect)."""
    from starlette.responses import JSONResponse

    return JSONResponse({"code": code, "message": message}, status_code=status, **kw)


class _Routes:
    """The app's handlers over one receiver (Starlette is imported where it is used: the CLI
    imports this module without serving)."""

    def __init__(self, receiver: Receiver, max_body: int, team: _Team, ack_deadline: float) -> None:
        self.receiver, self.max_body, self.team, self.ack_deadline = receiver, max_body, team, ack_deadline

    async def denied(self, request: Any) -> Any:
        """None when the request may pass (request.state.member: the member's email, or None)."""
        from starlette.concurrency import run_in_threadpool

        header = request.headers.get("authorization")
        door = self.team.door()
        try:
            ok, member = (await run_in_threadpool(door.check, header)) if door.needs_ledger(header) else \
                door.check(header)
        except forwarded.DoorUnchecked as e:
            # Fail closed, and say "retry": OTLP exporters and members' forwarders retry a 503 (a
            # 500 they drop), and nothing is let in on a guess.
            self.receiver.stats.unauthorized += 1
            return _error(14, f"{e}; retry", 503, headers={"Retry-After": str(RETRY_AFTER_S)})
        request.state.member = member
        if ok:
            return None
        self.receiver.stats.unauthorized += 1
        return _error(16, "missing or wrong bearer token", 401, headers={"WWW-Authenticate": 'Bearer realm="loopledger"'})

    async def body_of(self, request: Any) -> bytes:
        """The request's body, read no further than `max_body` bytes (TooLarge past it)."""
        length = request.headers.get("content-length")
        if length and length.isdigit() and int(length) > self.max_body:
            raise TooLarge(f"the body ({length} bytes) is over the limit of {self.max_body} bytes")
        chunks, size = [], 0
        async for chunk in request.stream():
            size += len(chunk)
            if size > self.max_body:
                raise TooLarge(f"the body is over the limit of {self.max_body} bytes")
            chunks.append(chunk)
        return b"".join(chunks)

    def read(self, body: bytes, ctype: str, encoding: str) -> list[spooling.Piece]:
        req, spans = decoded(body, ctype, encoding, self.max_body)
        return prepare(req, self.receiver.opts.redact, spans)

    async def acknowledge(self, body: bytes, ctype: str, encoding: str) -> int:
        import asyncio

        # Off the event loop: /health and other exporters stay answered meanwhile. An executor
        # future, not anyio's thread (whose cancellation waits for the thread): past the
        # deadline the answer goes at once, and the decoding's result is dropped when it ends.
        pieces = await asyncio.get_running_loop().run_in_executor(None, self.read, body, ctype, encoding)
        self.receiver.stats.requests += 1
        # Shielded: the writer resolves this future whatever the answer was (a cancelled one
        # would raise in its thread); spooled past the deadline, a retry is dropped by its ids.
        return await asyncio.shield(asyncio.wrap_future(self.receiver.submit(pieces)))

    async def traces(self, request: Any) -> Any:
        import asyncio

        from starlette.responses import JSONResponse, Response

        if (no := await self.denied(request)) is not None:
            return no
        if request.state.member is not None:
            # Refused, not stored without its member: spans carry no member, and a member's token
            # is for their guard's forwarding (/v1/live), where every session is stored under them.
            self.receiver.stats.unauthorized += 1
            return _error(7, "a member's token forwards live events to /v1/live; OpenTelemetry exporters send the "
                          "receiver's own --token (docs/team.md)", 403)
        ctype = request.headers.get("content-type", "")
        try:
            body = await self.body_of(request)
        except BadRequest as e:
            self.receiver.stats.rejected += 1
            return _error(3, str(e), e.status)
        try:
            await asyncio.wait_for(self.acknowledge(body, ctype, request.headers.get("content-encoding", "")),
                                   self.ack_deadline)
        except BadRequest as e:
            self.receiver.stats.rejected += 1
            return _error(3, str(e), e.status)
        except TimeoutError:
            log.warning("a request of %d bytes was not acknowledged within the %g s deadline: answered 503 "
                        "(the exporter retries)", len(body), self.ack_deadline)
            return _error(14, f"not acknowledged within {self.ack_deadline:g} s; retry", 503)
        except Exception as e:  # noqa: BLE001 — the disk failed us: not acknowledged, the client retries
            return _error(14, f"the spool could not be written: {e}", 503)
        if ctype.split(";")[0].strip().lower() == PROTOBUF:
            from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceResponse

            return Response(ExportTraceServiceResponse().SerializeToString(), media_type=PROTOBUF)
        return JSONResponse({})

    async def health(self, request: Any) -> Any:
        from starlette.responses import JSONResponse

        if (no := await self.denied(request)) is not None:
            return no
        s, f = self.receiver.stats, self.receiver.flusher.stats
        return JSONResponse({"ok": True, "requests": s.requests, "spans": s.spans, "duplicates": s.duplicates,
                             "rejected": s.rejected, "unauthorized": s.unauthorized, "ingests": s.ingests,
                             "ingested_spans": f.ingested, "pending_spans": f.pending, "busy_flushes": f.busy,
                             "forwarded_batches": s.batches, "forwarded_events": s.live_events,
                             "forwarded_sessions": s.live_sessions, "members": len(s.members),
                             "max_body": self.max_body, "last_error": s.last_error})

    async def live(self, request: Any) -> Any:
        """A member's forwarded live events and decisions (loopledger.receive.forwarded)."""
        from starlette.concurrency import run_in_threadpool
        from starlette.responses import JSONResponse

        if (no := await self.denied(request)) is not None:
            return no
        # Every answer states the body limit: a member's forwarder sizes its batches below it.
        limit = {LIMIT_HEADER: str(self.max_body)}
        if request.state.member is None:
            return _error(7, "forwarding takes a member's token (`loopledger tokens create EMAIL` on the team ledger)",
                          403, headers=limit)
        try:
            body = await self.body_of(request)
            answer = await run_in_threadpool(self.team.store, request.state.member,
                                             forwarded.bearer(request.headers.get("authorization")) or "", body)
        except TooLarge as e:
            self.receiver.stats.rejected += 1
            return _error(3, str(e), 413, headers=limit)
        except forwarded.BadBatch as e:
            self.receiver.stats.rejected += 1
            return _error(3, str(e), 400, headers=limit)
        except Exception as e:  # noqa: BLE001 — a busy or failing ledger: not acknowledged, the forwarder retries
            return _error(14, f"the ledger could not be written: {e}", 503, headers=limit | {"Retry-After": "1"})
        s = self.receiver.stats
        s.batches += 1
        s.live_events += sum(a["events"] for a in answer["accepted"])
        s.live_sessions += len(answer["accepted"])
        s.members.add(request.state.member)
        return JSONResponse(answer, headers=limit)


forwarded_path = "/v1/live"
LIMIT_HEADER = "LoopLedger-Max-Body"  # as loopledger.live.forward reads it


class _Team:
    """The team side of the receiver, made on first use: the token door (a read-only engine on
    the ledger) and the writer of forwarded batches (an engine of its own: the flusher keeps its)."""

    def __init__(self, receiver: Receiver, token: str | None, closed: bool = False) -> None:
        self.receiver, self.token, self.closed = receiver, token, closed
        self._door: forwarded.Door | None = None
        self._writer: Engine | None = None
        self._door_lock, self._lock = threading.Lock(), threading.Lock()

    def _url(self) -> str:
        return self.receiver.engine.url.render_as_string(hide_password=False)

    def door(self) -> forwarded.Door:
        if self._door is None:
            from loopledger.ledger.engine import make_engine

            with self._door_lock:
                if self._door is None:
                    self._door = forwarded.Door(self.token, make_engine(self._url(), readonly=True), self.closed)
        return self._door

    def store(self, member: str, token: str, body: bytes) -> dict[str, Any]:
        sessions = forwarded.parse(body)
        with self._lock:
            if self._writer is None:
                from loopledger.ledger.engine import make_engine

                self._writer = make_engine(self._url())
            # One batch at a time: two members' batches never wait on each other's write lock.
            return forwarded.store_batch(self._writer, member, token, sessions, self.receiver.opts)


def default_spool(url: str) -> Path:
    """Beside a SQLite ledger file (`ledger.sqlite` → `ledger.sqlite.otlp/`), else ./loopledger-otlp."""
    from sqlalchemy.engine import make_url

    u = make_url(url)
    if u.get_backend_name() == "sqlite" and u.database and u.database != ":memory:":
        return Path(u.database).with_name(Path(u.database).name + ".otlp")
    return Path("loopledger-otlp")


def serve(engine: Engine, spool: Path, opts: worker.Options, host: str = DEFAULT_HOST, port: int = DEFAULT_PORT,
          max_body: int = DEFAULT_MAX_BODY, on_ready: Callable[[], None] | None = None, *,
          token: str | None = None, keep_days: int | None = DEFAULT_KEEP_DAYS,
          flush_interval: float = 0.5, closed: bool | None = None) -> Stats:
    """Run until SIGINT/SIGTERM (uvicorn's handlers), then write and ingest what is queued.
    The caller checks `door_problem` first (the CLI refuses to start on it). `closed`: tokens
    required from the start (default: when `host` is beyond loopback; see make_app)."""
    import contextlib
    import signal

    import uvicorn

    class Server(uvicorn.Server):
        @contextlib.contextmanager
        def capture_signals(self):
            # Ctrl-C / SIGTERM end the server and `run` returns, so what was acknowledged is
            # ingested and the summary printed (uvicorn itself would re-raise the signal and die).
            if threading.current_thread() is not threading.main_thread():
                yield
                return
            old = {sig: signal.signal(sig, self.handle_exit) for sig in (signal.SIGINT, signal.SIGTERM)}
            try:
                yield
            finally:
                for sig, handler in old.items():
                    signal.signal(sig, handler)

    receiver = Receiver(engine, spool, opts, keep_days=keep_days, flush_interval=flush_interval)
    app = make_app(receiver, max_body, on_ready, token,
                   closed=(not is_loopback(host)) if closed is None else closed)
    config = uvicorn.Config(app, host=host, port=port, log_level="warning", access_log=False)
    server = Server(config)
    try:
        server.run()
    finally:
        receiver.close()
    return receiver.stats


__all__ = ["BadRequest", "Receiver", "authorized", "decode", "default_spool", "door_problem", "make_app",
           "prepare", "serve"]
