"""Claude Code sessions exported to markdown ("# Claude Session Export"): a "Session Information"
list (`- **Session ID**: `…``, `- **Project Path**: …`), then under "## Conversation" one section
per transcript line:

    ### User | ### Assistant
    > 12/1/2025, 1:47:07 PM          (the exporter's local time, US locale)

    <body: plain text, or a JSON array of Anthropic content blocks>

    ---

Claude Code writes one line per content block, so consecutive Assistant sections are one
assistant message (its text and parallel tool_use blocks: one batch); User sections made of
tool_result blocks are answers, other User text is the person (local-command echoes and
interruption markers excepted, as in the JSONL reader). A section starts at a `### User` /
`### Assistant` heading that follows a `---` line (or "## Conversation"), so a `---` inside a
plain-text body does not end it. Timestamps become ISO 8601 without a zone (the export does not
say which it was written in). Positions are file lines: the heading of the section an item came
from (the last section, for a joined message).
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from datetime import datetime
from pathlib import Path
from typing import Any

import orjson
from loopledger.events import Item, ReadError, SessionInfo, SessionStart, UserTurn
from loopledger.formats._common import MAX_LINE_BYTES, bad, head_text, title_of
from loopledger.formats.anthropic import assistant_events, user_events
from loopledger.formats.claude_code import is_turn_text

NAME = "claude-export"
DESCRIPTION = 'Claude Code session exported to markdown ("# Claude Session Export")'

_HEADER = "# Claude Session Export"
_HEADING = re.compile(r"^### (User|Assistant)\s*$")
_INFO = re.compile(r"^- \*\*(.+?)\*\*:\s*`?(.*?)`?\s*$")
_TS = re.compile(r"^> (.+?)\s*$")
_TS_FORMATS = ("%m/%d/%Y, %I:%M:%S %p", "%m/%d/%Y, %H:%M:%S", "%Y-%m-%d %H:%M:%S", "%d/%m/%Y, %H:%M:%S")


def sniff(head: bytes) -> bool:
    text = head_text(head)
    return text.startswith(_HEADER) and ("## Session Information" in text or "## Conversation" in text)


def _iso(text: str) -> str | None:
    """The export's local time as ISO 8601 (no zone: the export does not say it)."""
    for fmt in _TS_FORMATS:
        try:
            return datetime.strptime(text.replace("\u202f", " "), fmt).isoformat()
        except ValueError:
            continue
    return None


def _trim(body: list[str]) -> None:
    """Drop the section's closing `---` separator (and the blank lines around it)."""
    while body and not body[-1].strip():
        body.pop()
    if body and body[-1].strip() == "---":
        body.pop()


def _body(lines: list[str]) -> Any:
    text = "\n".join(lines).strip()
    if text.startswith("[") and text.endswith("]"):
        try:
            value = orjson.loads(text)
        except orjson.JSONDecodeError:
            return text
        if isinstance(value, list):
            return value
    return text


def read(path: Path | str) -> Iterator[Item]:
    path = Path(path)
    info: dict[str, str] = {}
    sections: list[tuple[str, int, str | None, list[str]]] = []  # role, heading line, ts, body
    in_conversation = False
    prev = ""
    with open(path, "rb") as fh:
        for n, raw in enumerate(iter(lambda: fh.readline(MAX_LINE_BYTES + 1), b""), 1):
            if len(raw) > MAX_LINE_BYTES and not raw.endswith(b"\n"):
                yield bad(path, n, f"line too long (over {MAX_LINE_BYTES} bytes), skipped", raw[:400])
                while (rest := fh.readline(1 << 20)) and not rest.endswith(b"\n"):
                    pass
                continue
            try:
                line = raw.decode("utf-8").rstrip("\r\n")
            except UnicodeDecodeError as exc:
                yield bad(path, n, f"not valid UTF-8: byte 0x{raw[exc.start]:02x} at offset {exc.start} "
                          "(replaced)", raw)
                line = raw.decode("utf-8", "replace").rstrip("\r\n")
            heading = _HEADING.match(line)
            if heading and (prev in ("---", "## Conversation") or not sections and in_conversation):
                if sections:
                    _trim(sections[-1][3])
                sections.append((heading.group(1).lower(), n, None, []))
            elif line.strip() == "## Conversation" and not sections:
                in_conversation = True
            elif not sections:
                m = _INFO.match(line.strip())
                if m:
                    info[m.group(1).strip().lower()] = m.group(2).strip()
            else:
                role, at, ts, body = sections[-1]
                ts_match = _TS.match(line)
                if ts is None and not body and ts_match:
                    sections[-1] = (role, at, ts_match.group(1), body)
                else:
                    body.append(line)
            if line.strip():
                prev = line.strip()
    if sections:
        _trim(sections[-1][3])
    yield from _events(path, info, sections)


def _events(path: Path, info: dict[str, str], sections: list) -> Iterator[Item]:
    out: list[Item] = []
    blocks: list[Any] = []
    first: tuple[str | None, int] = (None, 0)

    def close() -> None:
        nonlocal blocks
        if blocks:
            out.extend(assistant_events(blocks, first[0], first[1]))
        blocks = []

    for role, at, ts_text, lines in sections:
        ts = _iso(ts_text) if ts_text else None
        body = _body(lines)
        if role == "assistant":
            if not blocks:
                first = (ts, at)
            first = (first[0], at)
            blocks.extend([{"type": "text", "text": body}] if isinstance(body, str) else body)
            continue
        close()
        if isinstance(body, list) and any(not isinstance(b, dict) for b in body):
            out.append(bad(path, at, "a User section's JSON body must be a list of content blocks", body))
            continue
        items = user_events(body, ts, at)
        out.extend(i for i in items if not isinstance(i, UserTurn) or is_turn_text(i.text))
    close()
    events = [i for i in out if not isinstance(i, ReadError)]
    if not events:
        yield from out
        return
    title = next((title_of(i.text) for i in events if isinstance(i, UserTurn)), "")
    meta = {k: info[k] for k in ("project path", "export mode") if info.get(k)}
    started = next((getattr(e, "ts", None) for e in events if getattr(e, "ts", None)), None)
    key = info.get("session id") or path.stem
    yield SessionStart(SessionInfo(key, NAME, title, "claude-code", None, started, None,
                                   {k.replace(" ", "_"): v for k, v in meta.items()}), events[0].line)
    yield from out
