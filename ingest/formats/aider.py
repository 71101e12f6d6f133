"""Aider chat history markdown (`.aider.chat.history.md`, and the website's example transcripts).

The markup, as aider writes it:
- `# aider chat started at <time>` opens a session (a file without one is one session);
- `#### <text>` lines are the person's input (consecutive ones are one multi-line message);
- `> <text>` lines are aider's own output (added files, "Applied edit to …", commits, errors);
- everything else is the assistant's reply.

Aider has no structured tool calls, so the reader derives them from the reply:
- edit blocks (a file name line, then `<<<<<<< SEARCH` / `ORIGINAL`, `=======`,
  `>>>>>>> REPLACE` / `UPDATED`) become one `edit` call per file per reply — aider applies a
  reply's blocks together, one "Applied edit to <file>" per block — with args
  {"path": file, "edits": [[search, replace], …]} in reply order;
- fenced ```bash / sh / shell / console blocks become a `shell` call {"command": block}.
A reply with calls is a Batch (its prose as the text), one without is Prose. The `>` lines after
a reply answer its edit calls: the lines naming the file (or an edit-format failure, is_error).
Shell suggestions get no answer (aider only runs them after asking; the output is not tied to
the block).

Jekyll front matter and `<div>` wrappers (aider's website examples) are skipped. Non-UTF-8 bytes
are reported with their line and replaced; an edit block left open at the end of a reply is
reported and dropped. Positions are file lines, 1-based: the last line an item was read from.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import BinaryIO

from loopledger.events import (
    Answer,
    Answers,
    Batch,
    Call,
    Item,
    Prose,
    ReadError,
    SessionInfo,
    SessionStart,
    UserTurn,
)
from loopledger.formats._common import MAX_LINE_BYTES, bad, head_text, title_of

NAME = "aider"
DESCRIPTION = "Aider chat history markdown (.aider.chat.history.md)"

_STARTED = re.compile(r"^# aider chat started at (.+?)\s*$")
_SNIFF_USER = re.compile(r"(?m)^#### \S")
_SNIFF_AIDER = re.compile(r"(?m)^> (Applied edit to |Added .+ to the chat|Tokens: |Commit [0-9a-f]{7} "
                          r"|Aider v\d|Model: )")
_FENCE = re.compile(r"^(`{3,}|~{3,})\s*([\w+-]*)")
_HEAD_MARK = re.compile(r"^<{5,9} (SEARCH|ORIGINAL)\s*$")
_DIVIDER = re.compile(r"^={5,9}\s*$")
_TAIL_MARK = re.compile(r"^>{5,9} (REPLACE|UPDATED)\s*$")
_WRAPPER = re.compile(r"^\s*</?div\b[^>]*>\s*$")
_SHELL_LANGS = frozenset({"bash", "sh", "shell", "console", "zsh"})
_EDIT_FAILURES = ("did not conform", "malformed", "failed to apply", "searchreplacenoexactmatch",
                  "does not match", "doesn't match", "no exact match")


def sniff(head: bytes) -> bool:
    text = head_text(head)
    if text.startswith(("{", "[")):
        return False
    if text.startswith("# aider chat started at "):
        return True
    # A transcript without the start line (aider's website examples): Markdown from the first
    # line (front matter, a heading, a quote, HTML), person lines and aider's own output lines;
    # a source file quoting a transcript in a string starts otherwise.
    if not text.startswith(("---", "#", ">", "<")):
        return False
    return bool(_SNIFF_USER.search(text) and _SNIFF_AIDER.search(text))


@dataclass
class _Reply:
    """The assistant text and aider output lines that follow one user message."""

    line: int
    text: list[tuple[int, str]] = field(default_factory=list)  # (file line, text)
    notes: list[str] = field(default_factory=list)  # aider's `>` lines, prefix stripped
    last_note: int = 0  # file line of the last `>` line


def read(path: Path | str) -> Iterator[Item]:
    path = Path(path)
    session = 0
    started = False
    # A session's start is held until its first user line, which gives it a title.
    held: SessionStart | None = None
    user: list[str] = []
    user_line = 0
    reply: _Reply | None = None
    in_fence = False
    front_matter = False

    def flush() -> Iterator[Item]:
        nonlocal held, reply, user
        if held is not None:
            yield held
            held = None
        if reply is not None:
            yield from _reply_events(path, reply)
            reply = None
        yield from _user_event(user, user_line)
        user = []

    with open(path, "rb") as fh:
        for line_no, raw in _lines(path, fh):
            if isinstance(raw, ReadError):
                yield raw
                continue
            try:
                line = raw.decode("utf-8")
            except UnicodeDecodeError as exc:
                yield bad(path, line_no, f"not valid UTF-8: byte 0x{raw[exc.start]:02x} at offset "
                          f"{exc.start} (replaced)", raw)
                line = raw.decode("utf-8", "replace")
            line = line.rstrip("\r\n")
            if line_no == 1 and line.strip() == "---":
                front_matter = True
                continue
            if front_matter:
                front_matter = line.strip() != "---"
                continue
            if in_fence and _escapes_fence(line):
                in_fence = False  # an interrupted reply left its code block open
            if not in_fence:
                match = _STARTED.match(line)
                if match:
                    yield from flush()
                    session += 1
                    started = True
                    held = SessionStart(SessionInfo(key=str(session), format=NAME, agent="aider",
                                                    started_at=match.group(1)), line_no)
                    continue
                if line.startswith("#### ") or line == "####":
                    if not started:
                        started = True
                        session += 1
                        held = SessionStart(SessionInfo(key=str(session), format=NAME,
                                                        agent="aider"), line_no)
                    if held is not None:
                        info = held.info
                        yield SessionStart(SessionInfo(
                            key=info.key, format=NAME, title=title_of(line[5:]), agent="aider",
                            started_at=info.started_at), held.line)
                        held = None
                    if reply is not None:
                        yield from flush()
                    user_line = line_no  # the last line: see _reply_events
                    user.append(line[5:].rstrip())
                    continue
            if user:
                yield from _user_event(user, user_line)
                user = []
            if not started:
                continue  # preamble before the first session or user message
            if reply is None:
                reply = _Reply(line_no)
            if not in_fence and (line.startswith("> ") or line == ">"):
                reply.notes.append(line[2:].strip())
                reply.last_note = line_no
                continue
            if not in_fence and _WRAPPER.match(line):
                continue
            if _FENCE.match(line.strip()):
                in_fence = not in_fence
            reply.text.append((line_no, line))
    yield from flush()


def _lines(path: Path, fh: BinaryIO) -> Iterator[tuple[int, bytes | ReadError]]:
    """(line number, bytes) for each line; a line longer than MAX_LINE_BYTES is skipped in
    chunks (never held whole) and stands as a ReadError."""
    line_no = 0
    while raw := fh.readline(MAX_LINE_BYTES + 1):
        line_no += 1
        if len(raw) > MAX_LINE_BYTES and not raw.endswith(b"\n"):
            size = len(raw)
            while rest := fh.readline(1 << 20):
                size += len(rest)
                if rest.endswith(b"\n"):
                    break
            yield line_no, bad(path, line_no, f"line too long ({size} bytes; the limit is "
                               f"{MAX_LINE_BYTES} bytes), skipped", raw[:400])
            continue
        yield line_no, raw


def _escapes_fence(line: str) -> bool:
    """Aider ends its own user and output lines with two spaces (a markdown line break); code
    rarely does, so such a `####` or `>` line ends a fence an interrupted reply left open."""
    return line.endswith("  ") and (line.startswith("#### ") or line.startswith("> "))


def _user_event(user: list[str], line: int) -> Iterator[Item]:
    if user:
        yield UserTurn("\n".join(user).strip(), None, line)


def _reply_events(path: Path, reply: _Reply) -> Iterator[Item]:
    # Each item carries the LAST line it was read from (the reply's last text line; the last of
    # aider's "> Applied edit" lines for the answers): when the history file grows, the worker
    # re-reads exactly the sessions with an item past the old end, and a reply or a multi-line
    # user message that grew must be one of them.
    end = reply.text[-1][0] if reply.text else reply.line
    text = "\n".join(t for _, t in reply.text).strip()
    calls, errors = _calls(path, reply)
    yield from errors
    if not calls:
        if text:
            yield Prose(text, None, end)
        return
    yield Batch(tuple(calls), text, None, end)
    answers = [a for a in (_answer(c, reply.notes) for c in calls) if a is not None]
    if answers:
        # aider writes its "Applied edit" lines after the reply: the answers' line is the last of
        # them, so a history file appended to since the last ingest re-reads this session
        yield Answers(tuple(answers), reply.last_note or end)


def _calls(path: Path, reply: _Reply) -> tuple[list[Call], list[ReadError]]:
    """Edit blocks grouped per file (first-appearance order), then shell blocks, as calls."""
    edits: dict[str, list[list[str]]] = {}
    shells: list[str] = []
    errors: list[ReadError] = []
    lines = [t for _, t in reply.text]
    i = 0
    outside: str | None = None  # the last non-blank line outside fences: newer aider's file name
    while i < len(lines):
        fence = _FENCE.match(lines[i].strip())
        if not fence:
            if lines[i].strip():
                outside = lines[i].strip()
            i += 1
            continue
        body_start = i + 1
        end = body_start
        while end < len(lines) and not _FENCE.match(lines[end].strip()):
            end += 1
        body = lines[body_start:end]
        if fence.group(2).lower() in _SHELL_LANGS and body:
            shells.append("\n".join(body).strip())
        else:
            problem = _edit_blocks(body, edits, outside)
            if problem:
                errors.append(bad(path, reply.text[i][0], problem, "\n".join(body[:5])))
        i = end + 1
    # Aider has no call ids; ids made from the reply's line pair each answer with its own call
    # (an id-less answer would be paired with the oldest open call, maybe the wrong one).
    specs = [("edit", {"path": p, "edits": blocks}) for p, blocks in edits.items()]
    specs += [("shell", {"command": c}) for c in shells if c]
    calls = [Call(f"aider-{reply.line}-{n}", name, args) for n, (name, args) in enumerate(specs, 1)]
    return calls, errors


def _edit_blocks(body: list[str], edits: dict[str, list[list[str]]],
                 before: str | None) -> str | None:
    """Collect the SEARCH/REPLACE blocks of one fenced body into `edits`; a problem message or
    None. The file name is the non-blank line just before a block's head marker: inside the
    fence (older aider), else the line before the fence (`before`, current aider)."""
    i = 0
    filename = before
    while i < len(body):
        line = body[i]
        if not _HEAD_MARK.match(line):
            if line.strip():
                filename = line.strip()
            i += 1
            continue
        search: list[str] = []
        replace: list[str] = []
        j = i + 1
        while j < len(body) and not _DIVIDER.match(body[j]):
            search.append(body[j])
            j += 1
        k = j + 1
        while k < len(body) and not _TAIL_MARK.match(body[k]):
            replace.append(body[k])
            k += 1
        if k >= len(body):
            return "edit block not closed (no ======= / >>>>>>> REPLACE line): dropped"
        if not filename:
            return "edit block without a file name line before it: dropped"
        edits.setdefault(filename, []).append(["\n".join(search), "\n".join(replace)])
        i = k + 1
    return None


def _answer(call: Call, notes: list[str]) -> Answer | None:
    if call.name != "edit" or not notes:
        return None
    path = call.args["path"]
    failures = [n for n in notes if any(f in n.lower() for f in _EDIT_FAILURES)]
    names = re.compile(rf"(^|\s){re.escape(path)}(\s|$)")
    mine = [n for n in notes if names.search(n)]
    if failures:
        return Answer(call.id, "\n".join(failures + [n for n in mine if n not in failures]), True)
    if mine:
        return Answer(call.id, "\n".join(mine))
    return None
