"""What an event's `line` is, per format: a file line, or a message or record index.

Readers of line-oriented files (JSONL, Markdown) give each event the file line it came from;
readers of JSON documents give the 1-based index of its message or record (docs/formats.md, and
each reader's docstring). "line 37" of a pretty-printed or one-line JSON document points nowhere,
so the pages call a position what it is: `word(format, path)` → "line", "message" or "record".
A format that reads both (JSONL or a document) is told apart by the file's name, as people name
them (`.jsonl` is lines). Pure: no file is opened.
"""

from __future__ import annotations

LINE, MESSAGE, RECORD = "line", "message", "record"

# The word for a format's positions in a JSON document; formats not listed give file lines.
DOCUMENT = {"anthropic": MESSAGE, "openai-chat": MESSAGE, "gemini-cli": MESSAGE, "cline": MESSAGE,
            "opencode": MESSAGE, "openai-responses": RECORD, "atif": RECORD, "swe-agent": RECORD,
            "openhands": RECORD, "openhands-v1": RECORD, "otlp": RECORD}
# Formats whose files are always documents (a `.jsonl` name does not make them lines).
ALWAYS_DOCUMENT = frozenset({"cline", "opencode", "atif", "swe-agent", "openhands-v1"})
LINE_SUFFIXES = (".jsonl", ".ndjson", ".jsonlines")


def word(format: str | None, path: str | None = None) -> str:
    """"line", "message" or "record": what the events' positions of `format` count in `path`."""
    doc = DOCUMENT.get(format or "")
    if doc is None:
        return LINE
    if format in ALWAYS_DOCUMENT:
        return doc
    return LINE if (path or "").lower().endswith(LINE_SUFFIXES) else doc
