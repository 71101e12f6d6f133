"""`loopledger receive`: an OTLP/HTTP trace receiver that writes into the ledger as the worker does.

POST /v1/traces takes an `ExportTraceServiceRequest` as protobuf (`application/x-protobuf`) or
JSON (`application/json`), optionally gzip-compressed. The request's new spans (a span already
received — same trace and span id — is dropped, so a client's retry adds nothing) are appended
as one OTLP JSON line to a spool file, and only then is the request answered: an acknowledged
span is on disk. A single writer thread (datasette's habit: one writer fed by a queue) appends,
and at most every `flush_interval` seconds ingests the spool files that grew through
`worker.ingest_file`: the same reader (formats/otlp.py), redaction, replay and ledger writes as
`loopledger ingest` of that file, so a received session and the same spans ingested from a file
give the same rows.

The spool is a folder of `otlp-YYYY-MM-DD.jsonl` files (UTC day of receipt): the raw material,
re-ingestable, never rewritten. A conversation that runs across midnight UTC is two sessions
(one per file); the daily roll bounds what one re-read of a spool file costs.

Malformed bodies get HTTP 400 with the reason and never stop the receiver; bodies over
`max_body` bytes (after decompression too) get 413; other content types 415.
"""

from __future__ import annotations

import logging
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
from sqlalchemy.engine import Engine

log = logging.getLogger("loopledger.receive")

DEFAULT_HOST = "127.0.0.1"
DEFAULT_PORT = 4318  # OTLP/HTTP's registered port
DEFAULT_MAX_BODY = 16 * 1024 * 1024
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
    if encoding.strip().lower() == "gzip":
        body = _inflate(body, max_body)
    elif encoding.strip() and encoding.strip().lower() != "identity":
        raise Unsupported(f"Content-Encoding {encoding!r} is not supported (gzip or none)")
    ctype = content_type.split(";")[0].strip().lower()
    if ctype == PROTOBUF:
        from google.protobuf.json_format import MessageToDict
        from google.protobuf.message import DecodeError
        from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

        try:
            msg = ExportTraceServiceRequest.FromString(body)
        except DecodeError as e:
            raise BadRequest(f"not a protobuf ExportTraceServiceRequest: {e}") from None
        req = MessageToDict(msg)  # camelCase like OTLP JSON; ids base64 (the reader takes both)
        req.setdefault("resourceSpans", [])
    elif ctype == JSON:
        try:
            req = orjson.loads(body)
        except orjson.JSONDecodeError as e:
            raise BadRequest(f"invalid JSON: {e}") from None
    else:
        raise Unsupported(f"Content-Type {content_type!r} is not supported ({PROTOBUF} or {JSON})")
    try:
        otlp.spans_of_request(req)  # validates the shape before anything is written
    except (ValueError, TypeError, AttributeError) as e:
        raise BadRequest(str(e)) from None
    return req


def _span_ids(req: dict[str, Any]) -> list[tuple[str, str]]:
    return [(s.trace_id, s.span_id) for s in otlp.spans_of_request(req)]


def _without(req: dict[str, Any], drop: set[tuple[str, str]]) -> tuple[dict[str, Any], int]:
    """The request with the spans in `drop` removed, and how many spans are left."""
    kept = 0
    out_rs = []
    for rs in req.get("resourceSpans") or []:
        scopes = []
        for ss in rs.get("scopeSpans") or rs.get("instrumentationLibrarySpans") or []:
            spans = [sp for sp in ss.get("spans") or []
                     if (otlp._hex_id(sp.get("traceId")), otlp._hex_id(sp.get("spanId"))) not in drop]
            if spans:
                scopes.append({**{k: v for k, v in ss.items() if k != "spans"}, "spans": spans})
                kept += len(spans)
        if scopes:
            out_rs.append({"resource": rs.get("resource") or {}, "scopeSpans": scopes})
    return {"resourceSpans": out_rs}, kept


@dataclass
class Stats:
    requests: int = 0
    spans: int = 0
    duplicates: int = 0
    rejected: int = 0
    ingests: int = 0
    last_error: str = ""
    reports: list[worker.FileReport] = field(default_factory=list)


class Receiver:
    """The spool and its one writer thread. `submit(req)` returns once the spans are on disk."""

    def __init__(self, engine: Engine, spool: Path, opts: worker.Options, *, flush_interval: float = 0.5,
                 clock: Callable[[], datetime] = lambda: datetime.now(UTC)) -> None:
        self.engine, self.spool, self.opts = engine, Path(spool), opts
        self.flush_interval, self.clock = flush_interval, clock
        self.spool.mkdir(parents=True, exist_ok=True)
        self.stats = Stats()
        self._seen: set[tuple[str, str]] = set()
        for f in sorted(self.spool.glob("otlp-*.jsonl")):  # a restart must still drop resent spans
            for item in otlp._spans(f):
                if isinstance(item, otlp.Span):
                    self._seen.add((item.trace_id, item.span_id))
        self._queue: queue.Queue[tuple[dict[str, Any], Future] | None] = queue.Queue()
        self._dirty: set[Path] = set()
        self._thread = threading.Thread(target=self._run, name="loopledger-receive-writer", daemon=True)
        self._closed = False
        self._thread.start()

    def submit(self, req: dict[str, Any]) -> Future:
        fut: Future = Future()
        self._queue.put((req, fut))
        return fut

    def _append(self, req: dict[str, Any]) -> int:
        ids = _span_ids(req)
        dup = {i for i in ids if i in self._seen}
        body, kept = _without(req, dup) if dup else (req, len(ids))
        # A span repeated inside one request counts once too.
        self.stats.duplicates += len(ids) - kept
        if kept:
            path = self.spool / f"otlp-{self.clock():%Y-%m-%d}.jsonl"
            with open(path, "ab") as fh:
                fh.write(orjson.dumps(body) + b"\n")
                fh.flush()
            self._seen.update(ids)
            self._dirty.add(path)
        self.stats.spans += kept
        return kept

    def flush(self) -> None:
        """Ingest the spool files that grew (the writer thread calls this; tests may too)."""
        while self._dirty:
            path = self._dirty.pop()
            report = worker.ingest_file(self.engine, path, self.opts)
            self.stats.ingests += 1
            self.stats.reports = (self.stats.reports + [report])[-20:]
            if report.error:
                self.stats.last_error = report.error
                log.warning("ingest of %s: %s", path, report.error)

    def _run(self) -> None:
        last_flush = 0.0
        while True:
            timeout = max(0.0, self.flush_interval - (time.monotonic() - last_flush)) if self._dirty else None
            try:
                item = self._queue.get(timeout=timeout)
            except queue.Empty:
                item = ...
            if item is None:
                self.flush()
                return
            if item is not ...:
                req, fut = item
                try:
                    fut.set_result(self._append(req))
                except Exception as e:  # noqa: BLE001 — one bad write must not stop the receiver
                    log.exception("spool write failed")
                    fut.set_exception(e)
            if self._dirty and time.monotonic() - last_flush >= self.flush_interval:
                try:
                    self.flush()
                except Exception as e:  # noqa: BLE001
                    self.stats.last_error = f"{type(e).__name__}: {e}"
                    log.exception("ingest of the spool failed")
                last_flush = time.monotonic()

    def close(self) -> None:
        """Write and ingest what is queued, then stop the writer. Safe to call twice."""
        if self._closed:
            return
        self._closed = True
        self._queue.put(None)
        self._thread.join()


def make_app(receiver: Receiver, max_body: int = DEFAULT_MAX_BODY, on_ready: Callable[[], None] | None = None):
    """The Starlette app: POST /v1/traces, GET /health; `on_ready` once it is listening."""
    import contextlib

    from starlette.applications import Starlette
    from starlette.requests import Request
    from starlette.responses import JSONResponse, Response
    from starlette.routing import Route

    async def traces(request: Request) -> Response:
        ctype = request.headers.get("content-type", "")
        wants_pb = ctype.split(";")[0].strip().lower() == PROTOBUF
        try:
            length = request.headers.get("content-length")
            if length and length.isdigit() and int(length) > max_body:
                raise TooLarge(f"the body ({length} bytes) is over the limit of {max_body} bytes")
            chunks, size = [], 0
            async for chunk in request.stream():
                size += len(chunk)
                if size > max_body:
                    raise TooLarge(f"the body is over the limit of {max_body} bytes")
                chunks.append(chunk)
            req = decode(b"".join(chunks), ctype, request.headers.get("content-encoding", ""), max_body)
        except BadRequest as e:
            receiver.stats.rejected += 1
            return JSONResponse({"code": 3, "message": str(e)}, status_code=e.status)
        import asyncio

        receiver.stats.requests += 1
        await asyncio.wrap_future(receiver.submit(req))
        if wants_pb:
            from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceResponse

            return Response(ExportTraceServiceResponse().SerializeToString(), media_type=PROTOBUF)
        return JSONResponse({})

    async def health(request: Request) -> Response:
        s = receiver.stats
        return JSONResponse({"ok": True, "requests": s.requests, "spans": s.spans, "duplicates": s.duplicates,
                             "rejected": s.rejected, "ingests": s.ingests, "last_error": s.last_error})

    @contextlib.asynccontextmanager
    async def lifespan(app):
        if on_ready is not None:
            on_ready()
        yield

    return Starlette(routes=[Route("/v1/traces", traces, methods=["POST"]), Route("/health", health)],
                     lifespan=lifespan)


def default_spool(url: str) -> Path:
    """Beside a SQLite ledger file (`ledger.sqlite` → `ledger.sqlite.otlp/`), else ./loopledger-otlp."""
    from sqlalchemy.engine import make_url

    u = make_url(url)
    if u.get_backend_name() == "sqlite" and u.database and u.database != ":memory:":
        return Path(u.database).with_name(Path(u.database).name + ".otlp")
    return Path("loopledger-otlp")


def serve(engine: Engine, spool: Path, opts: worker.Options, host: str = DEFAULT_HOST, port: int = DEFAULT_PORT,
          max_body: int = DEFAULT_MAX_BODY, on_ready: Callable[[], None] | None = None) -> Stats:
    """Run until SIGINT/SIGTERM (uvicorn's handlers), then write and ingest what is queued."""
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

    receiver = Receiver(engine, spool, opts)
    app = make_app(receiver, max_body, on_ready)
    config = uvicorn.Config(app, host=host, port=port, log_level="warning", access_log=False)
    server = Server(config)
    try:
        server.run()
    finally:
        receiver.close()
    return receiver.stats


__all__ = ["BadRequest", "Receiver", "decode", "default_spool", "make_app", "serve"]
