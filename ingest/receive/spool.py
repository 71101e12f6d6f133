"""The receiver's spool: every acknowledged span on disk, redacted, readable only by its owner.

One file per UTC day of receipt, `otlp-YYYY-MM-DD.jsonl`, in a folder created 0700; files are
created 0600. Each line is an OTLP JSON `ExportTraceServiceRequest` holding ONE span (its
resource and scope copied beside it), so the file is a Collector file export that `loopledger
ingest` reads as it is, and a span can be read back alone by its byte range (the flusher reads
only what it has not ingested yet, see flush.py).

Before a line is written its strings are redacted (redact.py, unless the receiver runs with
--no-redact): a secret never reaches the disk. A request
is answered only after its lines are written, flushed and fsync'd (the folder too when the day's
file was just created): an acknowledged span survives the receiver being killed.

A span already spooled (same trace and span id) is not written again: an exporter's retry adds
nothing, all day and across a restart. The ids of the spool's spans are read once at start for
that and kept as 64-bit digests (digests.py: 12 bytes a span, no object per span; two different
spans sharing a digest — odds about n²/2⁶⁵, 3·10⁻⁸ for a million spans — would drop the second).
"""

from __future__ import annotations

import errno
import os
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import orjson
from loopledger import redact
from loopledger.formats import otlp
from loopledger.receive.digests import DigestIndex, digest

PATTERN = "otlp-*.jsonl"


@dataclass(frozen=True, slots=True)
class Piece:
    """One span of a request, ready to spool."""

    trace_id: str
    span_id: str
    line: bytes  # the OTLP JSON line, newline included
    # The line's spans as the reader makes them from it (otlp.spans_of_request of the redacted
    # request the line is the JSON of): handed to the flusher in memory once the line is on disk,
    # so the spool is not read back and decoded a second time (flush.py, Flusher.hand).
    spans: tuple[otlp.Span, ...] = ()


def redacted(value: Any, secrets: bool = True) -> Any:
    """The one place the spool redacts: redact.py's walker (iterative; a container nested past
    redact.MAX_DEPTH becomes its marker, --no-redact or not)."""
    return redact.redact_value(value, secrets=secrets)


def pieces(req: dict[str, Any], redact_secrets: bool = True, spans: list[otlp.Span] | None = None) -> list[Piece]:
    """The request's spans, one spool line each, redacted. Pure. The request's depth was
    checked when it was decoded (http.decode), so neither the redaction nor orjson can fail on it.
    `spans`: `otlp.spans_of_request(req)`, when the caller has them (decoding validates with it):
    a line the redaction leaves as it is keeps its span from there instead of reading it again."""
    out: list[Piece] = []
    given = iter(spans or ())
    for rs in req.get("resourceSpans") or []:
        if not isinstance(rs, dict):
            continue
        resource = rs.get("resource") if isinstance(rs.get("resource"), dict) else {}
        for ss in rs.get("scopeSpans") or rs.get("instrumentationLibrarySpans") or []:
            if not isinstance(ss, dict):
                continue
            scope = {k: v for k, v in ss.items() if k != "spans"}
            for sp in ss.get("spans") or []:
                if not isinstance(sp, dict):
                    continue
                span = next(given, None)
                one = {"resourceSpans": [{"resource": resource, "scopeSpans": [{**scope, "spans": [sp]}]}]}
                try:
                    # The line is serialized anyway: the same bytes tell whether redaction would
                    # change anything (mostly not), sparing its own serialization and walk.
                    line = orjson.dumps(one)
                except TypeError:
                    line = None
                if line is None or not redact.left_alone(line, redact_secrets):
                    red = redacted(one, redact_secrets)
                    if red is not one or line is None:
                        one, line, span = red, orjson.dumps(red), None
                trace_id, span_id = otlp._hex_id(sp.get("traceId")), otlp._hex_id(sp.get("spanId"))
                if span is not None and (span.trace_id, span.span_id) == (trace_id, span_id):
                    read: tuple[otlp.Span, ...] = (span,)
                else:
                    read = tuple(otlp.spans_of_request(one))
                out.append(Piece(trace_id, span_id, line + b"\n", read))
    return out


def day_of(path: Path) -> str:
    return path.stem.removeprefix("otlp-")


class Spool:
    """Appends pieces to the day's file, durably; one thread uses it (the receiver's writer)."""

    def __init__(self, folder: Path, clock: Callable[[], datetime] = lambda: datetime.now(UTC)) -> None:
        self.folder, self.clock = Path(folder), clock
        self.folder.mkdir(mode=0o700, parents=True, exist_ok=True)
        os.chmod(self.folder, 0o700)  # an older receiver made it 0755: spans hold prompts and output
        self.seen = DigestIndex()  # digest(trace id, span id) of every spooled span
        for f in sorted(self.folder.glob(PATTERN)):
            os.chmod(f, 0o600)
            self.seen.update(digest(t, s) for t, s in each_id(f))
        self._fd: int | None = None
        self._path: Path | None = None

    def path_for(self, when: datetime) -> Path:
        return self.folder / f"otlp-{when:%Y-%m-%d}.jsonl"

    def _open(self, path: Path) -> int:
        if self._path != path:
            if self._fd is not None:
                os.close(self._fd)
            created = not path.exists()
            if not created:
                drop_torn_tail(path)
            self._fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
            self._path = path
            if created:  # the new file's name must survive a crash too
                dfd = os.open(self.folder, os.O_RDONLY)
                try:
                    os.fsync(dfd)
                finally:
                    os.close(dfd)
        assert self._fd is not None
        return self._fd

    def write(self, batches: list[list[Piece]]) -> tuple[list[int], Path | None, int, list[Piece]]:
        """Append each batch's new spans; returns how many of each were new, the file, the
        offset the appended lines start at and those pieces, in file order. Returns only once
        they are on disk (fsync)."""
        kept: list[int] = []
        written: list[Piece] = []
        new: set[int] = set()  # digests, as `seen`
        for batch in batches:
            n = 0
            for p in batch:
                key = digest(p.trace_id, p.span_id)
                if key in self.seen or key in new:
                    continue  # a retry, or the same span twice in one request
                new.add(key)
                written.append(p)
                n += 1
            kept.append(n)
        if not written:
            return kept, None, 0, written
        path = self.path_for(self.clock())
        fd = self._open(path)
        start = os.lseek(fd, 0, os.SEEK_END)  # this thread is the file's only writer
        data = b"".join(p.line for p in written)
        _room_for(fd, len(data))
        try:
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view):]
            os.fsync(fd)
        except OSError:
            # A full disk or a failing one: nothing of this write is acknowledged, so nothing of
            # it may stay (a torn line would glue onto the next span) and its spans are not
            # `seen` (the exporter's retry must be written, not taken for a duplicate); nothing
            # of it is handed to the flusher either.
            self._undo(fd, start)
            raise
        self.seen.update(new)
        return kept, path, start, written

    def _undo(self, fd: int, start: int) -> None:
        try:
            os.ftruncate(fd, start)
            os.fsync(fd)
        except OSError:
            pass  # the next open cuts a torn tail (drop_torn_tail)
        self.close()

    def close(self) -> None:
        if self._fd is not None:
            os.close(self._fd)
            self._fd = self._path = None


def _room_for(fd: int, size: int) -> None:
    """ENOSPC before a byte is written when the disk plainly cannot take `size` more: a write cut
    short there leaves whole lines the flusher could read before the write is undone."""
    st = os.fstatvfs(fd)
    free = (st.f_bfree if os.geteuid() == 0 else st.f_bavail) * st.f_frsize
    if free < size:
        raise OSError(errno.ENOSPC, f"{os.strerror(errno.ENOSPC)} ({size} bytes to write, {free} free)")


def ids_in(path: Path) -> set[tuple[str, str]]:
    """The (trace, span) ids of a spool file's spans (a line of an older spool holds many)."""
    return set(each_id(path))


def each_id(path: Path) -> Iterator[tuple[str, str]]:
    """ids_in one line at a time (the file's ids are never all in memory at once)."""
    with open(path, "rb") as fh:
        for raw in fh:
            try:
                req = orjson.loads(raw)
                ids = [(s.trace_id, s.span_id) for s in otlp.spans_of_request(req)]
            except (orjson.JSONDecodeError, ValueError, TypeError, AttributeError):
                continue  # a torn last line (a crash mid-write): never acknowledged
            yield from ids


def drop_torn_tail(path: Path) -> None:
    """Cut a last line without its newline: a write the receiver died in, never acknowledged
    (appending after it would glue the next span onto it)."""
    with open(path, "r+b") as fh:
        size = fh.seek(0, os.SEEK_END)
        if size == 0:
            return
        fh.seek(size - 1)
        if fh.read(1) == b"\n":
            return
        keep = size
        while keep > 0:
            step = min(65536, keep)
            fh.seek(keep - step)
            chunk = fh.read(step)
            i = chunk.rfind(b"\n")
            if i >= 0:
                keep = keep - step + i + 1
                break
            keep -= step
        fh.truncate(keep)
        fh.flush()
        os.fsync(fh.fileno())
