"""Helpers every reader shares. A small, stable API; other readers import it.

    iter_jsonl(path, max_line_bytes=None) -> Iterator[(line_no, value | ReadError)]
        Stream a JSONL file one line at a time (memory flat); blank lines skipped; a bad line
        (bad JSON, non-UTF-8 bytes, too deep, too long) becomes a ReadError naming file:line.
    load_json(path, max_bytes=...) -> value | ReadError
        A whole JSON document, or one ReadError naming file:line:column.
    parse_json(raw: bytes | str) -> value                     (orjson; raises ValueError)
    json_error_message(raw, exc) -> str                        plain words for a decode failure
    bad(path, line, message, raw=b"") -> ReadError             with an excerpt of raw (bytes/str/value)
    content_text(content) -> str                               string-or-blocks content as text
    parse_args(raw) -> (args, malformed)                       tool arguments from a JSON string
    as_text(value) -> str                                      any answer/output value as text
    head_text(head) -> str                                     sniff bytes as text, BOM/space gone
    head_records(head, limit=8) -> list[Any]                   the complete JSONL lines in a head
    iter_head_records(head) -> Iterator[Any]                   the same, parsed as they are asked for
    str_or_none(value) -> str | None                           timestamps, ids: str or None
    first_line(path) -> value | None                           the first non-blank line, parsed
                                                               (None if it is not one JSON value)
    records_or_document(path, is_record) -> JSONL | value | ReadError
                                                               JSONL of records, or a whole document
    title_of(text, limit=100) -> str                           a session title from a prompt
    iso_utc(value) -> str | None                               a timestamp as ISO 8601 UTC ("…Z")
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import orjson
from loopledger import vocab
from loopledger.events import ReadError
from loopledger.redact import excerpt, redact_text

# Real Claude Code lines carry base64 screenshots of several MB; beyond this a line is not a
# transcript line but a fault, and reading it whole would break the flat-memory promise.
MAX_LINE_BYTES = 64 * 1024 * 1024
# JSON documents (not JSONL) are loaded whole by design; this bounds what "whole" may mean.
MAX_DOC_BYTES = 512 * 1024 * 1024
_CHUNK = 1024 * 1024
_BOM = b"\xef\xbb\xbf"
# The tool name of a reply the harness refused to run (vocab.HARNESS_ERROR, re-exported here for
# the readers).
HARNESS_ERROR = vocab.HARNESS_ERROR

_BARE_TAG = re.compile(r"</?[\w.:-]+>")
_ORJSON_POS = re.compile(r": line \d+ column \d+ \(char \d+\)$")

parse_json = orjson.loads


def bad(path: Path | str, line: int | None, message: str, raw: Any = b"") -> ReadError:
    """A ReadError with an excerpt of `raw` (bytes, text, or any parsed JSON value)."""
    if not isinstance(raw, bytes | str):
        raw = as_text(raw)[:1000]
    # A message may quote a value from the line; it is stored and printed like the excerpt.
    return ReadError(str(path), line, redact_text(message), excerpt(raw) if raw else "")


def json_error_message(raw: bytes | str, exc: Exception) -> str:
    """Plain words for why `raw` did not decode (orjson's own text is terse or misleading)."""
    text = str(exc)
    if isinstance(raw, bytes) and "not valid UTF-8" in text:
        try:
            raw.decode("utf-8")
        except UnicodeDecodeError as err:
            byte = raw[err.start]
            return f"not valid UTF-8: byte 0x{byte:02x} at offset {err.start}"
        return "not valid UTF-8 (lone surrogate escape)"
    if "depth limit exceeded" in text or "recursion" in text.lower():
        return "JSON nested too deeply (more than 1024 levels)"
    # orjson appends "line L column C (char N)" relative to `raw`; within one JSONL line the
    # "line" part would contradict the file line we report, so say the character instead.
    text = _ORJSON_POS.sub("", text)
    pos = getattr(exc, "pos", None)
    return f"invalid JSON: {text}" + (f" (at character {pos + 1})" if isinstance(pos, int) else "")


def iter_jsonl(path: Path | str, max_line_bytes: int | None = None, start: tuple[int, int] = (0, 0),
               pos: list[int] | None = None) -> Iterator[tuple[int, Any]]:
    """Yield (line_no, parsed value | ReadError) for each non-blank line, 1-based.
    `max_line_bytes` defaults to MAX_LINE_BYTES as it is when called (tests lower it).
    `start` = (byte offset, lines before it): continue a file from a line boundary (a reader
    resuming, see Checkpoint). `pos`, if given, is kept at [byte offset, line] just after the
    last newline-terminated line read (where a later read can resume), + [bytes read]: the two
    offsets differ when the file ends inside a line."""
    max_line_bytes = max_line_bytes or MAX_LINE_BYTES
    offset, line_no = start
    if pos is not None:
        pos[:] = [offset, line_no, offset]
    with open(path, "rb") as fh:
        if offset:
            fh.seek(offset)
        while True:
            raw = fh.readline(max_line_bytes + 1)
            if not raw:
                return
            line_no += 1
            offset += len(raw)
            if len(raw) > max_line_bytes and not raw.endswith(b"\n"):
                # Skip the rest of the line in chunks: never hold an enormous line in memory.
                size = len(raw)
                ended = False
                while True:
                    rest = fh.readline(_CHUNK)
                    size += len(rest)
                    offset += len(rest)
                    if not rest or rest.endswith(b"\n"):
                        ended = rest.endswith(b"\n")
                        break
                if pos is not None:
                    pos[2] = offset
                    if ended:
                        pos[:2] = [offset, line_no]
                yield line_no, bad(path, line_no, f"line too long ({size} bytes; the limit is "
                                   f"{max_line_bytes} bytes), skipped", raw[:400])
                continue
            if pos is not None:
                pos[2] = offset
                if raw.endswith(b"\n"):
                    pos[:2] = [offset, line_no]
            if line_no == 1 and raw.startswith(_BOM):
                raw = raw[len(_BOM):]
            if not raw.strip():
                continue
            try:
                value = orjson.loads(raw)
            except orjson.JSONDecodeError as exc:
                yield line_no, bad(path, line_no, json_error_message(raw, exc), raw)
                continue
            yield line_no, value


def load_json(path: Path | str, max_bytes: int = MAX_DOC_BYTES) -> Any:
    """The whole document at `path`, or a ReadError (line = the failing line, 1-based)."""
    try:
        size = Path(path).stat().st_size
        if size > max_bytes:
            return bad(path, None, f"JSON document too large ({size} bytes; the limit is {max_bytes})")
        with open(path, "rb") as fh:
            raw = fh.read()
    except OSError as exc:
        return bad(path, None, f"cannot read file: {exc.strerror or exc}")
    if raw.startswith(_BOM):
        raw = raw[len(_BOM):]
    try:
        return orjson.loads(raw)
    except orjson.JSONDecodeError as exc:
        pos = max(0, min(exc.pos, len(raw)))
        try:
            raw.decode("utf-8")
        except UnicodeDecodeError as err:
            pos = err.start  # orjson reports a UTF-8 fault at position 0
        line = raw.count(b"\n", 0, pos) + 1
        start = raw.rfind(b"\n", 0, pos) + 1
        return bad(path, line, json_error_message(raw, exc), raw[start:start + 400])


_MAX_CONTENT_DEPTH = 64  # tool_result blocks nest; past this it is a fault, not a transcript


def content_text(content: Any, _depth: int = 0) -> str:
    """Text of a message's content: a string, a list of blocks/strings, or a single block.

    Text blocks are joined with newlines; non-text blocks (images, documents) become a short
    placeholder so a message made only of them is not mistaken for an empty one.
    """
    if _depth > _MAX_CONTENT_DEPTH:
        return "[content nested too deeply]"  # a RecursionError would escape read()
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, dict):
        content = [content]
    if not isinstance(content, list):
        return as_text(content)
    parts: list[str] = []
    for block in content:
        if isinstance(block, str):
            parts.append(block)
        elif isinstance(block, dict):
            kind = block.get("type")
            text = block.get("text")
            if isinstance(text, str):
                parts.append(text)
            elif kind in ("tool_result", "function_call_output") and "content" in block:
                parts.append(content_text(block.get("content"), _depth + 1))
            elif isinstance(kind, str):
                parts.append(f"[{kind}]")
        elif block is not None:
            parts.append(as_text(block))
    return "\n".join(p for p in parts if p)


def as_text(value: Any) -> str:
    """An answer or output of any JSON type as text (non-strings as compact JSON)."""
    if value is None:
        return ""
    if isinstance(value, str):
        return value
    try:
        return orjson.dumps(value).decode()
    except TypeError:  # orjson stops at 255 levels of nesting; repr() may too
        try:
            return str(value)
        except RecursionError:
            return f"[{type(value).__name__} nested too deeply to show]"


def parse_args(raw: Any) -> tuple[Any, bool]:
    """Tool arguments → (args, malformed). A JSON string is parsed; an unparsable one is kept
    raw with malformed=True (the call is still checked, keyed on that string). None/"" → None."""
    if raw is None:
        return None, False
    if not isinstance(raw, str):
        return raw, False
    if not raw.strip():
        return None, False
    try:
        return orjson.loads(raw), False
    except orjson.JSONDecodeError:
        return raw, True


def str_or_none(value: Any) -> str | None:
    if value is None or isinstance(value, str):
        return value
    return as_text(value)


def head_text(head: bytes) -> str:
    """The sniffed bytes as text, BOM and leading whitespace removed (bad bytes replaced)."""
    if head.startswith(_BOM):
        head = head[len(_BOM):]
    return head.decode("utf-8", "replace").lstrip()


def head_records(head: bytes, limit: int = 8) -> list[Any]:
    """The first `limit` parsable JSONL lines in `head`: what JSONL sniffers look at."""
    return list(itertools.islice(iter_head_records(head), limit))


def iter_head_records(head: bytes) -> Iterator[Any]:
    """The parsable JSONL lines in `head`, parsed one at a time as they are asked for: every file
    of an ingest is sniffed, by each sniffer in turn until one claims it, and a sniffer that
    decides on the first line need not parse (nor split off) the rest of the head."""
    if head.startswith(_BOM):
        head = head[len(_BOM):]
    start = 0
    # A last line cut off by the sniff limit fails to parse and is left out like any bad line.
    while start >= 0:
        end = head.find(b"\n", start)
        line = head[start:] if end < 0 else head[start:end]
        start = end if end < 0 else end + 1
        if not line.strip():
            continue
        try:
            yield orjson.loads(line)
        except orjson.JSONDecodeError:
            continue


def first_line(path: Path | str, max_bytes: int = 1024 * 1024) -> Any:
    """The first non-blank line parsed as JSON, or None: tells JSONL from a JSON document
    (a pretty-printed document's first line is "[" or "{", which does not parse alone)."""
    with open(path, "rb") as fh:
        for raw in iter(lambda: fh.readline(max_bytes), b""):
            if raw.startswith(_BOM):
                raw = raw[len(_BOM):]
            if raw.strip():
                try:
                    return orjson.loads(raw)
                except orjson.JSONDecodeError:
                    return None
    return None


def title_of(text: str, limit: int = 100) -> str:
    """First non-blank line of a prompt, cut to `limit` characters. A line that is only a tag
    (mini-swe-agent's "<pr_description>") says nothing, so the next line is used."""
    for line in text.splitlines():
        line = line.strip()
        if line and not _BARE_TAG.fullmatch(line):
            return line if len(line) <= limit else line[: limit - 1] + "…"
    return ""


JSONL = object()  # records_or_document's answer for "stream it with iter_jsonl"
_PROBE_LINES = 8
_PROBE_LINE_BYTES = 64 * 1024 * 1024  # a JSONL record this long (a whole conversation) is still probed whole


def _record_lines(path: Path | str, is_record, skip_bare: bool) -> bool:
    with open(path, "rb") as fh:
        seen = 0
        for raw in iter(lambda: fh.readline(_PROBE_LINE_BYTES), b""):
            if len(raw) == _PROBE_LINE_BYTES and not raw.endswith(b"\n"):
                return False  # a line too long to probe: one document (load_json reads it, or says why not)
            raw = raw.removeprefix(_BOM).strip()
            if not raw:
                continue
            if skip_bare and seen == 0 and raw in (b"[", b"{"):
                return False  # a pretty-printed document: no JSONL line is a bare bracket
            seen += 1
            try:
                if is_record(orjson.loads(raw)):
                    return True
            except orjson.JSONDecodeError:
                pass
            if seen >= _PROBE_LINES:
                return False
    return False


def records_or_document(path: Path | str, is_record) -> Any:
    """JSONL (the sentinel) when one of the first lines is a record by `is_record`, else the
    whole document (or its ReadError). A damaged first line does not turn a JSONL file into a
    failed document: when the document does not parse but later lines are records, it is JSONL.
    """
    if _record_lines(path, is_record, skip_bare=True):
        return JSONL
    doc = load_json(path)
    if isinstance(doc, ReadError) and _record_lines(path, is_record, skip_bare=False):
        return JSONL
    return doc


# Already normalized: most transcripts (Claude Code, Codex, Gemini) write exactly this.
_CANON_TS = re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(?:\.\d{1,9})?Z\Z")
_ZONE_NAME = re.compile(r"\s*\[[^\]]*\]\Z")  # Java / Temporal style "…+01:00[Europe/Berlin]"
_LONG_FRACTION = re.compile(r"(\.\d{6})\d+")  # nanoseconds: datetime keeps microseconds


def iso_utc(value: Any) -> str | None:
    """A transcript's timestamp as ISO 8601 in UTC ("2026-03-04T09:00:00.123Z").

    Offsets are applied ("…+01:00[Europe/Berlin]" → the same instant in UTC, the zone name
    dropped); epoch numbers are seconds, or milliseconds when too large for seconds; a time
    without any zone is kept as ISO 8601 without one (the zone is unknown, so it is not
    invented); text that is not a time at all is kept as written."""
    if value is None or isinstance(value, bool):
        return None
    if isinstance(value, int | float):
        seconds = value / 1000 if abs(value) >= 1e11 else value
        try:
            dt = datetime.fromtimestamp(seconds, UTC)
        except (OverflowError, OSError, ValueError):
            return str(value)
        return _format(dt, isinstance(value, float) or seconds != int(seconds) or abs(value) >= 1e11)
    if not isinstance(value, str):
        return as_text(value)
    text = value.strip()
    if _CANON_TS.match(text):
        return text
    core = _LONG_FRACTION.sub(r"\1", _ZONE_NAME.sub("", text))
    try:
        dt = datetime.fromisoformat(core)
    except ValueError:
        return value
    if dt.tzinfo is None:
        return dt.isoformat()
    return _format(dt.astimezone(UTC), dt.microsecond != 0 or "." in core)


def _format(dt: datetime, fraction: bool) -> str:
    if not fraction:
        return dt.strftime("%Y-%m-%dT%H:%M:%SZ")
    spec = "milliseconds" if dt.microsecond % 1000 == 0 else "microseconds"
    return dt.replace(tzinfo=None).isoformat(timespec=spec) + "Z"
