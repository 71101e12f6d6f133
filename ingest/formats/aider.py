"""Aider chat history markdown (`.aider.chat.history.md`, and the website's example transcripts).

The markup, as aider writes it:
- `# aider chat started at <time>` opens a session (a file without one is one session);
- `#### <text>` lines are the person's input (consecutive ones are one multi-line message);
- `> <text>` lines are aider's own output (added files, "Applied edit to …", commits, errors);
- everything else is the assistant's reply.

Aider has no structured tool calls, so the reader derives them from the reply, in every edit
format aider writes: one `edit` call per file per reply, however the edit was written —
- diff / diff-fenced / editor-diff: SEARCH/REPLACE blocks (a file name line, then `<<<<<<< SEARCH`
  / `ORIGINAL`, `=======`, `>>>>>>> REPLACE` / `UPDATED`; the name before the fence or inside it),
  args {"path": file, "edits": [[search, replace], …]} in reply order;
- udiff: fenced unified diffs (`--- f` / `+++ f` / `@@`), each hunk an edit [old, new];
- whole / editor-whole: a file name line and a fenced listing, args {"path", "content"}; counted
  only for files aider applied (a listing is otherwise indistinguishable from an example);
- any file aider says it applied (`> Applied edit to F`) with nothing parsed: {"path": F}.
aider's own lines are the ground truth: an edit is answered by its "Applied edit" lines, by the
failure lines naming it (or naming no file) as an error, and an edit shown in the reply that
aider never reported applying is an error answer ("not applied"). No aider line after the reply
at all (a history cut short) leaves the edits unanswered. A path aider prints with backslashes
(Windows) is the same file as the model's forward-slash one.
Failed edits: when a SEARCH block does not match, aider applies the blocks that did and logs one
message, its first line quoted ("> # N SEARCH/REPLACE block(s) failed to match!"), the rest bare
lines (each failed block under "## SearchReplaceNoExactMatch: … lines in FILE", "Did you mean"
listings, "The SEARCH section must exactly match…", "# The other N … were applied
successfully"), ended by a markdown line break; it sends that message back to the model. Each
file's edit of that reply is then answered by the message's sections naming the file, as an
error, or, for a file no section names, as applied. Nothing in the message is the model's or the
person's (a `####` line quoted in it included), and the model's next text is a reply of its own:
a block re-sent again and again is an `edit` call failing again and again. aider 0.50 and
others quote every line of the message (`> `): it then ends at the first line neither quoted
nor blank. Every attempt of the model is a reply of its own: a reply ends at aider's usage line
("> Tokens: ..."), so the model's text after it with no `####` line — its fix after a lint
report, its reply once the files it asked for were added ("Add file to the chat? y") — is the
next reply; watch mode's "> Processing your request..." (an AI comment in a file) starts one too.
Lint and tests: aider lints each file it edited and, finding errors, writes a report per file
("# Fix any errors below, if possible.", the file named in its "## See relevant lines" listing),
asks "Attempt to fix lint errors?" and sends the report back to the model; such a file's edit
is answered by its "Applied edit" line and that report, as an error (the edit took effect and
aider says it left errors; the same with "Attempt to fix test errors?" for every edit of the
reply). A message aider writes over several lines quotes the first only ("> Commit 1a2b3c4 ..."
of a rambling commit message, "> git add a" of a two-line command) and goes on in bare lines up
to one ended by a markdown line break: those lines are aider's, not a reply.
Shell commands — each line of a fenced ```bash / sh / shell / console block, and each
`> Running CMD` line aider writes when it runs one — are `run` calls {"command": CMD}, answered
by the `>` output lines after their "Running" line (a suggestion declined is unanswered).
Architect mode ("Model: ... with architect edit format") logs the architect's reply, then hands
it to the editor model as a message with the person's `####` prefix: that echo is not a user
turn, and the editor's reply is a reply of its own. The architect's reply is a plan: blocks or
diffs in it that aider did not apply are not edits (the editor's are). Rate-limit / overload retries ("Retrying in N seconds...") are Retry events with the
error line before them, never calls.
A reply with calls is a Batch (its prose as the text), one without is Prose.

A reply whose edit blocks aider could not parse ("The LLM did not conform to the edit format."
with no block that "failed to match") ran nothing: one `harness_error` call answered by aider's
words, instead of its edits. Jekyll front matter and `<div>` wrappers (aider's website examples) are skipped. Non-UTF-8 bytes
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
    Retry,
    SessionInfo,
    SessionStart,
    UserTurn,
)
from loopledger.formats._common import HARNESS_ERROR, MAX_LINE_BYTES, bad, head_text, title_of

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
_APPLIED = re.compile(r"^Applied edit to (.+?)\s*$")
_RUNNING = re.compile(r"^Running (.+?)\s*$")
_AFTER_OUTPUT = re.compile(r"^(Add (\S+ tokens of )?command output to the chat|Added \d+ lines? of output|"
                           r"Run shell commands?\?|Tokens: |Applied edit to |Commit [0-9a-f]{7} )")
_RETRYING = re.compile(r"^Retrying in [\d.]+ seconds")
_RATE_LIMIT = re.compile(r"(?i)rate.?limit|overloaded|RateLimitError|APIError|ServiceUnavailable|timed? ?out|"
                         r"InternalServerError|APIConnectionError|\b429\b|\b529\b|\b50[023]\b")
_PATHLIKE = re.compile(r"^[`*]{0,2}[\w./\\-]+\.[\w]+[`*]{0,2}$|^[`*]{0,2}[\w.-]*/[\w./\\-]+[`*]{0,2}$")
_FAILED_TO_MATCH = re.compile(r"^# \d+ SEARCH/REPLACE blocks? failed to match!")
_FAILED_IN = re.compile(r"^## SearchReplaceNoExactMatch: This SEARCH block failed to exactly match lines in (.+?)\s*$")
_FAILURE_PART = re.compile(r"^(## SearchReplaceNoExactMatch|# The other \d+ SEARCH/REPLACE|The SEARCH section must|"
                           r"Don't re-send them|Just reply with fixed versions)")
_FAILURE_ENDS = ("The SEARCH section must exactly match", "Just reply with fixed versions of the block")
_OTHERS_APPLIED = re.compile(r"^# The other \d+ SEARCH/REPLACE blocks? were applied successfully")
_NEW_REQUEST = "Processing your request"  # watch mode: an AI comment in a file is a request
_MODEL = re.compile(r"^> (?:Main model|Model): .+? with (\S+) edit format")
_COMMIT = re.compile(r"^Commit [0-9a-f]{7,} ")
_TOKENS = "Tokens: "  # aider's usage line, written once the model's reply is complete
_LINT_HEAD = "# Fix any errors below, if possible."  # each file's lint report (linter.lint) opens so
_LINT_CONTEXT = re.compile(r"^## See relevant lines? below marked with")
_LINT_RUNNING = re.compile(r"^## Running: .*?(\S+)\s*$")
_LINT_LOCATION = re.compile(r"^(\S+?):\d+(:\d+)?:? ")
_FIX_ASKED = re.compile(r"^Attempt to fix (lint|test) errors\?")
_REPORT_ENDS = re.compile(r"^(Attempt to fix (lint|test) errors\?|Tokens: |Applied edit to |Run shell commands?\?|Running )")
_EDIT_FAILURES = ("did not conform", "malformed", "failed to apply", "failed to match", "did not apply edit", "searchreplacenoexactmatch",
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
    notes: list[tuple[int, str]] = field(default_factory=list)  # aider's `>` lines: (line, text)
    last_note: int = 0  # file line of the last `>` line (or of a failure message's last line)
    # aider's "# N SEARCH/REPLACE block(s) failed to match!" message: (line, text), its first
    # line a `>` line, the rest bare lines; `failing` while it goes on
    failure: list[tuple[int, str]] = field(default_factory=list)
    failing: bool = False
    # whether the message quotes every line (`> `, aider 0.50 and others): it then ends at the
    # first line that is neither quoted nor blank; None until its first line after the head
    quoted: bool | None = None
    # aider's message of several lines (a shell command, a commit message) quotes its first
    # line only and goes on in bare lines up to one ended by "  " (a markdown line break):
    # `open_note` is the last line of such a message still open (0: none), a bare line right
    # after it goes on; a commit message (a weak model's musings) goes on across blank lines
    open_note: int = 0
    committing: bool = False
    # architect mode: this is the architect's reply, a plan aider hands to the editor model;
    # its edit blocks are not edits (the editor's are)
    plan: bool = False
    # aider has handed something back to the model since this reply's text (its failed-to-match
    # message, or a new request of watch mode, "Processing your request..."): text from here
    # on is the model's next reply
    closed: bool = False


class _Chat:
    """What `read` holds between lines: sessions started so far, a session's start held until
    its first user line (which gives it a title), the user message being gathered, the reply
    after it, whether a code fence is open, and the last reply's words (architect mode hands
    them to the editor as a #### message)."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.session = 0
        self.started = False
        self.held: SessionStart | None = None
        self.user: list[str] = []
        self.user_line = 0
        self.reply: _Reply | None = None
        self.in_fence = False
        self.echo = ""
        self.breaks = False
        self.architect = False  # the session runs the architect edit format
        self.plan_next = False  # the next reply is the architect's (after the person's message)

    def failing(self) -> bool:
        return self.reply is not None and self.reply.failing

    def failure_ends_at(self, line: str) -> bool:
        """A quoted failure message ends at the first line neither quoted nor blank (the
        model's next reply, or a `####` line aider wrote without its line break)."""
        reply = self.reply
        if reply is None or not reply.failing or not line.strip():
            return False
        quoted = line.startswith("> ") or line == ">"
        if reply.quoted is None:
            reply.quoted = quoted
        if reply.quoted and not quoted:
            reply.failing, reply.closed = False, True
            return True
        return False

    def flush(self) -> Iterator[Item]:
        if self.held is not None:
            yield self.held
            self.held = None
        if self.reply is not None:
            yield from _reply_events(self.path, self.reply)
            self.echo = _words(" ".join(t for _, t in self.reply.text))
            self.reply = None
        yield from _user_event(self.user, self.user_line, self.echo)
        self.user = []

    def new_session(self, line_no: int, started_at: str | None = None) -> SessionStart:
        self.session += 1
        self.started = True
        self.architect = False
        return SessionStart(SessionInfo(key=str(self.session), format=NAME, agent="aider", started_at=started_at),
                            line_no)

    def user_says(self, line: str, line_no: int) -> Iterator[Item]:
        """A `####` line: the person's message (its first line titles a held session start)."""
        if not self.started:
            self.held = self.new_session(line_no)
        if self.held is not None:
            info = self.held.info
            yield SessionStart(SessionInfo(key=info.key, format=NAME, title=title_of(line[5:]), agent="aider",
                                           started_at=info.started_at), self.held.line)
            self.held = None
        if self.reply is not None:
            yield from self.flush()
        self.user_line = line_no  # the last line: see _reply_events
        self.user.append(line[5:].rstrip())

    def reply_line(self, line: str, line_no: int) -> Iterator[Item]:
        """Any other line: the model's reply text, or aider's `>` output about it."""
        model = _MODEL.match(line)
        if model:
            self.architect = model.group(1) == "architect"
        if self.user:
            self.plan_next = self.architect and not _is_echo(self.user, self.echo)
            yield from _user_event(self.user, self.user_line, self.echo)
            self.user = []
        if not self.started:
            return  # preamble before the first session or user message
        if self.reply is None:
            self.reply = _Reply(line_no, plan=self.plan_next)
        reply, in_fence = self.reply, self.in_fence
        if reply.failing:
            # the failure message's lines (the failed blocks, "Did you mean" listings) are
            # aider's words, not the model's, up to its closing line (ended by "  ", a markdown
            # line break, as aider ends each message it logs); quoted ones to their last `>` line
            text = line[2:] if reply.quoted and line.startswith("> ") else "" if reply.quoted and line == ">" else line
            reply.failure.append((line_no, text))
            reply.last_note = line_no
            if line.endswith("  ") and text.lstrip().startswith(_FAILURE_ENDS):
                reply.failing, reply.closed = False, True
            return
        bare = not (line.startswith("> ") or line == ">")
        if bare and not in_fence and (reply.committing or (line.strip() and reply.open_note == line_no - 1)):
            # (aider writes a blank line before the model's text: a bare line right after its
            # own is its own)
            if line.strip():
                reply.last_note = line_no
                reply.open_note = 0 if line.endswith("  ") else line_no
                reply.committing = reply.committing and not line.endswith("  ")
            return
        reply.committing = reply.committing and bare
        if not in_fence and not bare:
            note = line[2:].strip()
            reply.open_note = 0 if line.endswith("  ") else line_no
            reply.committing = self.breaks and bool(_COMMIT.match(note)) and not line.endswith("  ")
            if note.startswith(_TOKENS) and line.endswith("  "):
                self.breaks = True  # this history ends aider's lines with a line break
            reply.notes.append((line_no, note))
            reply.last_note = line_no
            if _FAILED_TO_MATCH.match(note) or (reply.failure and _FAILURE_PART.match(note)):
                # (a history that quotes every line of the message has its parts as `>` lines)
                reply.failure.append((line_no, note))
                reply.closed = line.endswith("  ")  # a one-line message ends here
                reply.failing = not reply.closed
            elif note.startswith(_NEW_REQUEST) or note.startswith(_LINT_HEAD) or _FIX_ASKED.match(note) or (
                    note.startswith(_TOKENS) and _last_text_line(reply)):
                # the model's reply is over (aider's usage line), or aider hands something back
                # to it: a watch-mode request, a lint or test report ("Attempt to fix lint
                # errors? y"), files it mentioned ("Add file to the chat? y"); its next text,
                # with no `####` line before it, is a reply of its own
                reply.closed = True
            return
        if not in_fence and _WRAPPER.match(line):
            return
        if (not in_fence and line.strip() and reply.last_note > _last_text_line(reply)
                and (reply.closed or _refused([n for _, n in reply.notes]))):
            # aider sent its refusal, or its failed-to-match message, back to the model (no
            # `####` line is logged for it): the text after it is the model's next reply, a new
            # attempt judged on its own
            yield from self.flush()
            reply = self.reply = _Reply(line_no, plan=reply.plan)
        if _FENCE.match(line.strip()):
            self.in_fence = not in_fence
        reply.text.append((line_no, line))


def read(path: Path | str) -> Iterator[Item]:
    path = Path(path)
    chat = _Chat(path)
    with open(path, "rb") as fh:
        for item in _text_lines(path, fh):
            if isinstance(item, ReadError):
                yield item
                continue
            line_no, line = item
            if chat.in_fence and _escapes_fence(line):
                chat.in_fence = False  # an interrupted reply left its code block open
            if chat.failing() and not chat.failure_ends_at(line):
                if not (_STARTED.match(line) or (line.startswith("#### ") and line.endswith("  "))):
                    yield from chat.reply_line(line, line_no)
                    continue
                chat.reply.failing = False  # a failure message that never closed: aider's next line
            if not chat.in_fence:
                match = _STARTED.match(line)
                if match:
                    yield from chat.flush()
                    chat.held = chat.new_session(line_no, match.group(1))
                    continue
                if line.startswith("#### ") or line == "####":
                    yield from chat.user_says(line, line_no)
                    continue
            yield from chat.reply_line(line, line_no)
    yield from chat.flush()


def _text_lines(path: Path, fh: BinaryIO) -> Iterator[tuple[int, str] | ReadError]:
    """(line number, text without its line end) for each line after any front matter; a line
    that is not UTF-8 is read with replacement characters after a ReadError saying so."""
    front_matter = False
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
        yield line_no, line


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


def _words(text: str) -> str:
    return " ".join(text.split())


def _is_echo(user: list[str], echo: str) -> bool:
    """Architect mode: aider passes the architect's reply to the editor model as a message of
    its own, logged with the person's #### prefix. It is not the person speaking."""
    return bool(echo) and _words("\n".join(user).strip().replace("<blank>", "")) == echo


def _user_event(user: list[str], line: int, echo: str = "") -> Iterator[Item]:
    if not user or _is_echo(user, echo):
        return
    yield UserTurn("\n".join(user).strip(), None, line)


def _reply_events(path: Path, reply: _Reply) -> Iterator[Item]:
    # Each item carries the LAST line it was read from (the reply's last text line; the last of
    # aider's "> Applied edit" lines for the answers): when the history file grows, the worker
    # re-reads exactly the sessions with an item past the old end, and a reply or a multi-line
    # user message that grew must be one of them.
    end = reply.text[-1][0] if reply.text else reply.line
    first_text = next((n for n, t in reply.text if t.strip()), None)
    text = "\n".join(t for _, t in reply.text).strip()
    retries = _retries(reply.notes)
    # retries before the reply's text happened while waiting for it; later ones after it
    yield from (r for r in retries if first_text is None or (r.line or 0) < first_text)
    calls, answers, errors = _calls(path, reply)
    yield from errors
    if calls:
        yield Batch(tuple(calls), text, None, end)
        if answers:
            # aider writes its "Applied edit" lines after the reply: the answers' line is the last
            # of them, so a history file appended to since the last ingest re-reads this session
            yield Answers(tuple(answers), max(reply.last_note, end))
    elif text:
        yield Prose(text, None, end)
    yield from (r for r in retries if first_text is not None and (r.line or 0) > first_text)


def _retries(notes: list[tuple[int, str]]) -> list[Retry]:
    """aider's "Retrying in N seconds..." lines, each with the error line(s) just before it."""
    out: list[Retry] = []
    for i, (line, note) in enumerate(notes):
        if _RETRYING.match(note):
            cause = [n for _, n in notes[max(0, i - 3):i] if n and _RATE_LIMIT.search(n)]
            out.append(Retry("\n".join([*cause[-1:], note]), None, line))
    return out


def _fenced(reply: _Reply) -> Iterator[tuple[int, str, list[str], str | None]]:
    """(file line of the fence, language, body lines, last non-blank line before the fence)."""
    lines = reply.text
    i = 0
    outside: str | None = None
    while i < len(lines):
        fence = _FENCE.match(lines[i][1].strip())
        if not fence:
            if lines[i][1].strip():
                outside = lines[i][1].strip()
            i += 1
            continue
        end = i + 1
        while end < len(lines) and not _FENCE.match(lines[end][1].strip()):
            end += 1
        yield lines[i][0], fence.group(2).lower(), [t for _, t in lines[i + 1:end]], outside
        i = end + 1


def _calls(path: Path, reply: _Reply) -> tuple[list[Call], list[Answer], list[ReadError]]:
    """One `edit` call per file (first-appearance order) however the reply wrote it, then one
    `run` call per shell command (aider applies the edits, then offers to run the commands);
    with the answers aider's own output gives them."""
    edits: dict[str, dict] = {}
    shells: list[str] = []
    errors: list[ReadError] = []
    wholes: list[tuple[str, str]] = []  # (file, content): counted only where aider applied them
    for line, lang, body, before in _fenced(reply):
        if lang in _SHELL_LANGS:
            shells += [c.strip() for c in body if c.strip() and not c.strip().startswith("#")]
            continue
        if any(_HEAD_MARK.match(b) for b in body):
            problem = _edit_blocks(body, edits, before)
            if problem:
                errors.append(bad(path, line, problem, "\n".join(body[:5])))
            continue
        if lang == "diff" or (body and body[0].startswith("--- ") and len(body) > 1 and body[1].startswith("+++ ")):
            _udiff(body, edits)
            continue
        name = before if before and _PATHLIKE.match(before) else None
        if name is None and body and _PATHLIKE.match(body[0].strip()):
            name, body = body[0].strip(), body[1:]  # the whole-file format with the name inside
        if name:
            wholes.append((name.strip("`*"), "\n".join(body)))
    notes = [n for _, n in reply.notes]
    applied = [m.group(1).strip() for n in notes if (m := _APPLIED.match(n))]
    for name, content in wholes:
        if name in applied and name not in edits:
            edits[name] = {"path": name, "content": content}
    if reply.plan and not applied and not reply.failure:
        edits, errors = {}, []  # the architect's plan: the editor model writes the edits
    for name in applied:
        if not any(_same_path(name, p) for p in edits):
            edits[name] = {"path": name}  # aider applied it: an edit, whatever we parsed
    runs = _runs(notes)
    refused = _refused(notes)
    if refused:
        # aider could not parse the reply's edits (the coder's get_edits raised): it applied
        # none of them and answered "did not conform to the edit format". Nothing ran: one
        # harness_error call answered by aider's words, not edits nor a malformed record.
        edits, errors = {}, []
    specs = [("edit", args) for args in edits.values()]
    declared = list(shells)
    for command, _ in runs:
        if command in declared:
            declared.remove(command)
        else:
            shells.append(command)  # run without a block we saw (an architect's editor, /test)
    specs += [("run", {"command": c}) for c in shells]
    # Aider has no call ids; ids made from the reply's line pair each answer with its own call
    # (an id-less answer would be paired with the oldest open call, maybe the wrong one).
    calls = [Call(f"aider-{reply.line}-{n}", name, args) for n, (name, args) in enumerate(specs, 1)]
    if refused:
        calls.insert(0, Call(f"aider-{reply.line}-0", HARNESS_ERROR, {"reason": "malformed_edit"}))
    failure = _failure(reply)
    reports, notes = _reports(notes)
    if failure is not None:
        answers = [_failed_edit_answer(c, *failure, notes, applied) for c in calls if c.name == "edit"]
    else:
        answers = [a for a in (_edit_answer(c, notes, applied, reports) for c in calls if c.name == "edit") if a]
    outputs = dict(runs)  # the last run of a command answers it
    answers += [Answer(c.id, outputs[c.args["command"]]) for c in calls
                if c.name == "run" and c.args["command"] in outputs]
    if refused:
        answers.insert(0, Answer(calls[0].id, refused, True))
    return calls, answers, errors


def _last_text_line(reply: _Reply) -> int:
    """The file line of the reply's last non-blank text (0: none yet)."""
    return next((n for n, t in reversed(reply.text) if t.strip()), 0)


def _refused(notes: list[str]) -> str:
    """aider's words when it refused a reply's edits as unparsable (base_coder.apply_updates:
    "The LLM did not conform to the edit format." and the parser's reason), '' otherwise. A
    block that parsed but failed to match also gets that line, with "failed to match": that
    edit was tried, so it is an edit answered by an error, not a refusal."""
    said = "\n".join(notes)
    if "did not conform to the edit format" not in said or "failed to match" in said.lower():
        return ""
    start = next(i for i, n in enumerate(notes) if "did not conform" in n)
    return "\n".join(n for n in notes[start:] if n.strip() and not _RUNNING.match(n))


def _runs(notes: list[str]) -> list[tuple[str, str]]:
    """(command, output) for each "Running CMD" line and the output lines after it."""
    out: list[tuple[str, str]] = []
    i = 0
    while i < len(notes):
        m = _RUNNING.match(notes[i])
        if not m:
            i += 1
            continue
        j = i + 1
        while j < len(notes) and not _RUNNING.match(notes[j]) and not _AFTER_OUTPUT.match(notes[j]):
            j += 1
        out.append((m.group(1).strip(), "\n".join(notes[i + 1:j]).strip()))
        i = j
    return out


def _udiff(body: list[str], edits: dict[str, dict]) -> None:
    """A unified diff (aider's udiff format): each `+++ file` starts a file, `@@` a hunk."""
    name: str | None = None
    hunk: tuple[list[str], list[str]] | None = None

    def close() -> None:
        if name and hunk and (hunk[0] or hunk[1]):
            edits.setdefault(name, {"path": name, "edits": []}).setdefault("edits", []).append(
                ["\n".join(hunk[0]), "\n".join(hunk[1])])

    for line in body:
        if line.startswith("--- ") and not line.startswith("--- -"):
            continue
        if line.startswith("+++ "):
            close()
            name = _strip_prefix(line[4:].strip())
            hunk = ([], [])
        elif line.startswith("@@"):
            close()
            hunk = ([], [])
        elif hunk is not None and name:
            if line.startswith("-"):
                hunk[0].append(line[1:])
            elif line.startswith("+"):
                hunk[1].append(line[1:])
            else:
                ctx = line[1:] if line.startswith(" ") else line
                hunk[0].append(ctx)
                hunk[1].append(ctx)
    close()


def _strip_prefix(name: str) -> str:
    return name[2:] if name.startswith(("a/", "b/")) else name


def _edit_blocks(body: list[str], edits: dict[str, dict], before: str | None) -> str | None:
    """Collect the SEARCH/REPLACE blocks of one fenced body into `edits`; a problem message or
    None. The file name is the non-blank line just before a block's head marker: inside the
    fence (older aider, diff-fenced), else the line before the fence (`before`, current aider)."""
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
        edits.setdefault(filename, {"path": filename, "edits": []}).setdefault("edits", []).append(
            ["\n".join(search), "\n".join(replace)])
        i = k + 1
    return None


def _same_path(a: str, b: str) -> bool:
    """aider prints a path as the OS spells it (backslashes on Windows), the model as it likes."""
    def norm(p: str) -> str:
        return p.strip("`*").replace("\\", "/").removeprefix("./")
    return norm(a) == norm(b)


def _failure(reply: _Reply) -> tuple[dict[str, str], str] | None:
    """aider's failed-to-match message (editblock_coder.apply_edits), if the reply got one:
    (path → its failure text: the message's first line, the sections naming that path, the
    closing lines), and the words for the blocks that did apply (the message's "# The other N
    ... were applied successfully", or "applied"). aider applies every block that matched and
    writes no "Applied edit" line when any failed. None: no such message."""
    if not reply.failure:
        return None
    lines = [t.rstrip() for _, t in reply.failure]
    head, sections, tail = lines[0], {}, []
    current: list[str] | None = None
    for line in lines[1:]:
        m = _FAILED_IN.match(line)
        if m:
            current = sections.setdefault(m.group(1), [])
        elif line.lstrip().startswith(_FAILURE_ENDS[0]):
            current = tail
        if current is not None:
            current.append(line)
    others = next((ln for ln in tail if _OTHERS_APPLIED.match(ln)), "")
    closing = "\n".join(tail).strip()
    texts = {path: "\n".join([head, "", *body, closing]).strip() for path, body in sections.items()}
    if not texts:
        texts = {"": "\n".join(lines).strip()}  # no section names a file: the message stands for each
    return texts, others.lstrip("# ").strip() or "applied"


def _failed_edit_answer(call: Call, texts: dict[str, str], others: str, notes: list[str],
                        applied: list[str]) -> Answer:
    """One file's edit in a reply aider answered with its failed-to-match message: an error
    answered by the sections naming the file (every file, when none is named), else applied
    (by its "Applied edit" lines where aider wrote them, else by the message's own words)."""
    path = call.args["path"]
    mine = [t for p, t in texts.items() if _same_path(p, path)]
    if mine or "" in texts:
        return Answer(call.id, "\n\n".join(mine) or texts[""], True)
    if any(_same_path(a, path) for a in applied):
        return Answer(call.id, "\n".join(n for n in notes if (m := _APPLIED.match(n)) and _same_path(m.group(1), path)))
    return Answer(call.id, others)


def _reports(notes: list[str]) -> tuple[dict[str, str], list[str]]:
    """The lint and test reports aider wrote after applying the reply's edits (path → the
    report's sections naming it; "" → sections naming no file, or a failed test run, which
    stand for every file), and the other notes. aider lints each edited file
    (base_coder.lint_edited; each file's report opens "# Fix any errors below, if possible." and
    names the file in its "## See relevant lines" listing, its "## Running: CMD FILE" line or
    its "FILE:LINE:" errors), then runs the tests; it asks "Attempt to fix lint/test errors?"
    and, answered yes, sends the report back to the model."""
    reports: dict[str, list[str]] = {}
    rest: list[str] = []
    i = 0
    while i < len(notes):
        if not notes[i].startswith(_LINT_HEAD):
            test = _FIX_ASKED.match(notes[i])
            if test and test.group(1) == "test":
                # the test output went to the terminal only: aider's own words are the report
                start = max((k + 1 for k, n in enumerate(notes[:i]) if _APPLIED.match(n) or n.startswith("Commit ")),
                            default=i)
                reports.setdefault("", []).append("\n".join(n for n in notes[start:i + 1] if n.strip()))
            rest.append(notes[i])
            i += 1
            continue
        j = i + 1
        while j < len(notes) and not notes[j].startswith(_LINT_HEAD) and not _REPORT_ENDS.match(notes[j]):
            j += 1
        section = notes[i:j]
        reports.setdefault(_reported_file(section), []).append("\n".join(section).strip())
        i = j
    return {path: "\n\n".join(texts) for path, texts in reports.items()}, rest


def _reported_file(section: list[str]) -> str:
    """The file one lint report names ("" where it names none)."""
    for k, line in enumerate(section):
        if _LINT_CONTEXT.match(line):
            name = next((n for n in section[k + 1:] if n.strip()), "")
            if name.endswith(":"):
                return name[:-1].strip()
    for line in section:
        m = _LINT_RUNNING.match(line) or _LINT_LOCATION.match(line)
        if m:
            return m.group(1)
    return ""


def _edit_answer(call: Call, notes: list[str], applied: list[str], reports: dict[str, str] | None = None) -> Answer | None:
    """aider's word on one file's edit: its "Applied edit to" lines, with the lint report naming
    the file (or the failed test run) as an error; the failure lines naming it (or naming no
    file); or, when aider said something after the reply but never that it applied this file,
    an error. No word at all (a history cut short) is no answer."""
    if not notes:
        return None
    path = call.args["path"]
    spellings = "|".join(re.escape(p) for p in dict.fromkeys([path, path.replace("/", "\\")]))
    names = re.compile(rf"(^|\s)({spellings})(\s|$|[.:,])")
    mine = [n for n in notes if names.search(n) and not _RUNNING.match(n)]
    failures = [n for n in notes if any(f in n.lower() for f in _EDIT_FAILURES)]
    named_failures = [n for n in failures if names.search(n)]
    done = any(_same_path(a, path) for a in applied)
    if named_failures or (failures and not done):
        return Answer(call.id, "\n".join(dict.fromkeys(failures + mine)), True)
    if done:
        found = [t for p, t in (reports or {}).items() if p == "" or _same_path(p, path)]
        if found:
            return Answer(call.id, "\n".join(["\n".join(mine), *found]).strip(), True)
        return Answer(call.id, "\n".join(mine))
    return Answer(call.id, f"not applied: aider did not report an edit to {path}", True)
