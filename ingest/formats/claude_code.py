"""Claude Code session JSONL (~/.claude/projects/<project>/<sessionId>.jsonl and the
<sessionId>/subagents/agent-<id>.jsonl files next to it).

Each `user` / `assistant` line carries one Anthropic message (content shared with the anthropic
reader). What this reader adds:
- One API message is written as several lines sharing `message.id` (a text line, then one line
  per tool_use block); they are joined back into ONE batch. Tool-result lines that arrive while
  that message is still open (Claude Code runs parallel calls as they stream) are held and
  emitted after the joined batch; a different message id or a real user turn closes it.
- Tool-result-only user lines are Answers, not user turns; meta lines (isMeta), compact
  summaries, local-command echoes and "[Request interrupted by user]" markers are not user turns.
- Every other line type Claude Code writes is metadata and skipped on purpose (see LINE_TYPES:
  titles, permission modes, file snapshots, hooks, queue bookkeeping, system notes, API retry
  notes). A `system` line of subtype api_error (a request retried) is a Retry event. An `attachment` line of kind `queued_command` is the person typing while the agent
  works: a user turn. A line type not in LINE_TYPES is skipped too and counted (logged once per
  file with its count): newer versions add types, and a new type must never fail a file.
- Subagent lines (isSidechain) are their own session keyed by agentId, parent_key = sessionId.
  A file mixing both (older versions wrote sidechains inline) is read once per session so that
  sessions never interleave and memory stays flat.
"""

from __future__ import annotations

import dataclasses
import itertools
import logging
from array import array
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import xxhash
from loopledger.events import (
    Answer,
    Answers,
    Checkpoint,
    Item,
    ReadError,
    Retry,
    SessionInfo,
    SessionStart,
    TurnUsage,
    UserTurn,
)
from loopledger.formats._common import (
    as_text,
    bad,
    content_text,
    iter_head_records,
    iter_jsonl,
    str_or_none,
    title_of,
)
from loopledger.formats.anthropic import add_usage, assistant_events, message_usage, user_events

NAME = "claude-code"
DESCRIPTION = "Claude Code session JSONL (~/.claude/projects/*/*.jsonl, subagents too)"

log = logging.getLogger(__name__)

# Every line type seen in Claude Code files, and what the reader does with it. "read": becomes
# events; "skip": metadata, skipped on purpose. Anything else is skipped and counted.
LINE_TYPES = {
    "user": "read",
    "assistant": "read",
    "attachment": "read",  # only its queued_command kind (a user turn); hooks, reminders skipped
    "summary": "skip",  # the session's title (used for SessionInfo.title)
    "custom-title": "skip",  # a title the person typed (used for SessionInfo.title)
    "ai-title": "skip",
    "agent-name": "skip",
    "cost-state": "skip",
    "permission-mode": "skip",
    "mode": "skip",
    "last-prompt": "skip",
    "worktree-state": "skip",
    "pr-link": "skip",
    "tag": "skip",
    "file-history-snapshot": "skip",
    "queue-operation": "skip",  # enqueue/dequeue bookkeeping; the prompt arrives as an attachment
    "progress": "skip",  # hook and subagent progress
    "system": "skip",  # turn_duration, compact_boundary, local_command, …; api_error → Retry
}
_TITLE_FIELDS = {"custom-title": "customTitle", "summary": "summary", "ai-title": "aiTitle"}
_METADATA_EVIDENCE = ("sessionId", "leafUuid", "snapshot", "messageId")
_SNIFF_RECORDS = 32
_NOT_A_TURN = ("[Request interrupted by user", "<local-command-stdout>", "<local-command-stderr>",
               "<local-command-caveat>")
# How far to look ahead for the title and model before the first event (bounded: streaming).
_INFO_LINES = 2000

Ident = tuple[bool, str | None]  # (is sidechain, agentId or sessionId for sidechains)


def sniff(head: bytes) -> bool:
    """Look past any number of leading metadata lines (permission-mode, titles, snapshots…)
    to the first user/assistant line; a file of metadata only is claimed when those lines carry
    Claude Code's own keys. A line without a string `type` is not Claude Code."""
    evidence = seen = False
    for rec in itertools.islice(iter_head_records(head), _SNIFF_RECORDS):  # parsed as far as looked at
        seen = True
        if not isinstance(rec, dict) or not isinstance(rec.get("type"), str):
            return False
        kind = rec["type"]
        if kind in ("user", "assistant"):
            return isinstance(rec.get("message"), dict) and any(
                k in rec for k in ("sessionId", "parentUuid", "isSidechain"))
        if kind in LINE_TYPES or "sessionId" in rec:
            evidence = evidence or any(k in rec for k in _METADATA_EVIDENCE)
    if evidence:
        return True
    # A first line longer than the sniffed head (a pasted screenshot) parses as nothing:
    # recognise the envelope's own keys instead.
    return not seen and head.lstrip().startswith(b"{") and all(
        k in head for k in (b'"parentUuid"', b'"sessionId"', b'"isSidechain"'))


def _ident(rec: dict) -> Ident:
    if rec.get("isSidechain"):
        return True, str_or_none(rec.get("agentId") or rec.get("sessionId"))
    return False, None


def _conversational(rec: Any) -> bool:
    return (isinstance(rec, dict) and rec.get("type") in ("user", "assistant")
            and isinstance(rec.get("message"), dict))


def is_turn_text(text: str) -> bool:
    """Whether a user text is the person speaking (not an interruption marker or a local-command echo)."""
    return bool(text.strip()) and not text.lstrip().startswith(_NOT_A_TURN)


def _user_items(rec: dict, line: int) -> list[Answers | UserTurn]:
    ts = str_or_none(rec.get("timestamp"))
    items = user_events(rec["message"].get("content"), ts, line)
    result = rec.get("toolUseResult")
    if (isinstance(result, str) and result.startswith("Error") and len(items) == 1
            and isinstance(items[0], Answers) and len(items[0].answers) == 1):
        # Some versions flag a failed tool only in toolUseResult ("Error: ..."), not is_error.
        a = items[0].answers[0]
        items = [Answers((Answer(a.call_id, a.text, True, a.ts, a.digest),), line)]
    return [it for it in items if not isinstance(it, UserTurn) or is_turn_text(it.text)]


def _copy_key(rec: dict) -> int | None:
    """What makes a line the same line again: a resumed session re-writes the conversation so far
    into the file (new uuids; the same timestamps, message ids, tool_use ids and texts). A line
    is its type, timestamp, message id and the ids (or text sizes) of its blocks; None without a
    timestamp (never taken for a copy)."""
    ts = rec.get("timestamp")
    if not isinstance(ts, str):
        return None
    msg = rec["message"]
    content = msg.get("content")
    if isinstance(content, list):
        parts = [str(b.get("id") or b.get("tool_use_id") or len(str(b.get("text") or b.get("thinking") or "")))
                 for b in content if isinstance(b, dict)]
    else:
        parts = [str(len(content)) if isinstance(content, str) else ""]
    # a 64-bit digest: a long session keeps one per line (and a resume checkpoint carries them)
    return xxhash.xxh64_intdigest(f"{rec['type']}|{ts}|{msg.get('id') or ''}|{'|'.join(parts)}".encode("utf-8", "surrogatepass"))


def _instant(ts: str) -> str:
    """An ISO-8601 UTC timestamp comparable as text: `…22Z` and `…22.121Z` both to milliseconds."""
    if ts.endswith("Z") and "." not in ts[-8:]:
        return ts[:-1] + ".000Z"
    return ts


def _skipped(rec: dict) -> bool:
    return bool(rec.get("isMeta") or rec.get("isCompactSummary") or rec.get("isVisibleInTranscriptOnly"))


def _queued_prompt(rec: dict) -> str | None:
    """The text of an `attachment` line that is the person typing while the agent works
    (kind queued_command, mode prompt, origin human); None for hooks, reminders, notifications."""
    att = rec.get("attachment")
    if not isinstance(att, dict) or att.get("type") != "queued_command":
        return None
    origin = att.get("origin")
    kind = origin.get("kind") if isinstance(origin, dict) else None
    prompt = att.get("prompt")
    if att.get("commandMode") not in (None, "prompt") or kind not in (None, "human"):
        return None
    text = content_text(prompt) if isinstance(prompt, str | list) else ""
    return text if is_turn_text(text) else None


def _retry(rec: dict, line: int) -> Retry:
    """A `system` line of subtype api_error: Claude Code retrying a failed request."""
    err = rec.get("error")
    status = err.get("status") if isinstance(err, dict) else None
    message = err.get("message") if isinstance(err, dict) else err
    if isinstance(message, dict | list):
        message = None
    parts = ["api_error", str(status) if status is not None else "", as_text(message or rec.get("content") or "")]
    attempt, most = rec.get("retryAttempt"), rec.get("maxRetries")
    if attempt is not None:
        parts.append(f"(attempt {as_text(attempt)}" + (f"/{as_text(most)})" if most is not None else ")"))
    return Retry(" ".join(p for p in parts if p), str_or_none(rec.get("timestamp")), line)


def _info(path: Path, ident: Ident, first_key: str | None, done: list[bool] | None = None) -> SessionInfo:
    """Title, model, start time: from the first lines of `ident`. The title is the one the
    person gave (custom-title), else Claude Code's summary, its ai-title, the first prompt.
    `done[0]` tells whether a reader checkpoint may be taken: the model and a title are known
    (or the look-ahead limit was reached). A custom title given after that shows after the
    file's next whole read, not on an append."""
    titles: dict[str, str] = {}
    model = started = parent = key = version = None
    final = False
    for n, (_, rec) in enumerate(iter_jsonl(path)):
        if n > _INFO_LINES or ("custom-title" in titles and model):
            final = True
            break
        if not isinstance(rec, dict):
            continue
        kind = rec.get("type") if isinstance(rec.get("type"), str) else None
        if kind in _TITLE_FIELDS and not ident[0] and kind not in titles:
            text = title_of(as_text(rec.get(_TITLE_FIELDS[kind])))
            if text:
                titles[kind] = text
        if not _conversational(rec) or _ident(rec) != ident:
            continue
        started = started or str_or_none(rec.get("timestamp"))
        version = version or str_or_none(rec.get("version"))
        if key is None:
            key = str_or_none(ident[1] if ident[0] else rec.get("sessionId"))
            parent = str_or_none(rec.get("sessionId")) if ident[0] else None
        msg = rec["message"]
        if rec["type"] == "assistant" and not model and msg.get("model") not in (None, "<synthetic>"):
            model = str_or_none(msg.get("model"))
        if rec["type"] == "user" and "prompt" not in titles and not _skipped(rec):
            turns = [it for it in _user_items(rec, 0) if isinstance(it, UserTurn)]
            if turns:
                titles["prompt"] = title_of(turns[0].text)
    title = next((titles[k] for k in ("custom-title", "summary", "ai-title", "prompt") if titles.get(k)), "")
    meta = {"version": version} if version else {}
    if done is not None:
        done[:] = [final or (model is not None and bool(titles))]
    return SessionInfo(key or first_key or "0", NAME, title, "claude-code", model, started,
                       parent, meta)


_STATE = "claude-code/4"  # /4: the lines' copy keys as bytes, and the newest timestamp


class _Message:
    """One session's reading state: the assistant message being joined (its lines share one
    message.id), the tool results held until it closes, its usage, and whether the session
    started. What a Checkpoint carries (`state`), and what `_session` reads each line into."""

    __slots__ = ("path", "ident", "open_id", "blocks", "first", "held", "held_line", "started", "usage", "carry",
                 "keys", "newest", "_lookup", "info_final")

    def __init__(self, path: Path, ident: Ident, resume: Checkpoint | None = None) -> None:
        self.path, self.ident = path, ident
        self.open_id: str | None = None
        self.blocks: list[Any] = []
        self.first: tuple[str | None, int] = (None, 0)
        self.held: list[Answer] = []
        self.held_line = 0
        self.started = False
        self.usage: TurnUsage | None = None  # the open message's usage (each of its lines repeats it)
        self.carry: TurnUsage | None = None  # a message that made no event (thinking only): counted with the next
        # Every line's _copy_key, 8 bytes each (an array, not a set: memory stays near flat), and the
        # newest line's timestamp: only a line older than that can be a copy, looked up then.
        self.keys = array("Q")
        self.newest: str | None = None
        self._lookup: set[int] | None = None  # built from keys at the first line older than newest
        if resume is not None:
            (_, self.ident, self.open_id, blocks, self.first, held, self.held_line, self.started, self.usage,
             self.carry, keys, self.newest) = resume.state
            self.blocks, self.held = list(blocks), list(held)
            self.keys.frombytes(keys)
        self.info_final = [resume is not None]  # a resumed session's info was final at its checkpoint

    def state(self) -> tuple:
        return (_STATE, self.ident, self.open_id, tuple(self.blocks), self.first, tuple(self.held),
                self.held_line, self.started, self.usage, self.carry, self.keys.tobytes(), self.newest)

    def copied(self, rec: dict) -> bool:
        """Whether the line is one this session read already, written again by a resume (which
        keeps the original timestamps: a copy is always older than the newest line read; lines of
        parallel subagents written inline interleave their times too, so the key decides)."""
        key = _copy_key(rec)
        if key is None:
            return False
        ts = _instant(rec["timestamp"])
        if self.newest is not None and ts < self.newest:
            if self._lookup is None:
                self._lookup = set(self.keys)
            if key in self._lookup:
                return True
        else:
            self.newest = ts
        self.keys.append(key)
        if self._lookup is not None:
            self._lookup.add(key)
        return False

    # Lists, not generators: these run for every line of the file.
    def close(self) -> list[Item]:
        """The open message's batch (and the results held meanwhile); nothing is open after."""
        out: list[Item] = assistant_events(self.blocks, self.first[0], self.first[1]) if self.blocks else []
        turn = add_usage(self.carry, self.usage)
        if out and turn is not None:
            out[0] = dataclasses.replace(out[0], usage=turn)
            self.carry = None
        elif turn is not None:
            self.carry = turn
        if self.held:
            out.append(Answers(tuple(self.held), self.held_line))
        self.open_id, self.blocks, self.held, self.usage = None, [], [], None
        return out

    def emit(self, items: list) -> list[Item]:
        """`items`, behind the SessionStart when they are the session's first."""
        if items and not self.started:
            self.started = True
            info = _info(self.path, self.ident, None, self.info_final)
            return [SessionStart(info, getattr(items[0], "line", None)), *items]
        return items

    def assistant(self, rec: dict, msg: dict, content: Any, line: int) -> list[Item]:
        out: list[Item] = []
        mid = str_or_none(msg.get("id"))
        if mid is None or mid != self.open_id:
            out = self.emit(self.close())
            self.open_id = mid
            self.first = (str_or_none(rec.get("timestamp")), line)
        # The batch's line is its message's LAST line: an appended line of the same message
        # changes the batch, and the worker re-judges a session whose items pass the old end.
        self.first = (self.first[0], line)
        if isinstance(content, str):
            content = [{"type": "text", "text": content}]
        self.blocks.extend(content or [])
        self.usage = message_usage(msg) or self.usage
        if mid is None:
            out += self.emit(self.close())
        return out

    def user(self, rec: dict, line: int) -> list[Item]:
        items = _user_items(rec, line)
        if self.open_id is not None and items and all(isinstance(it, Answers) for it in items):
            self.held_line = line  # the last result line, for the same reason
            for it in items:
                self.held.extend(it.answers)
            return []
        return self.emit(self.close() + items)

    def other(self, rec: dict, line: int, report_errors: bool, unknown: Counter[str]) -> list[Item]:
        """A line that is not a user or assistant message: a retry, a queued prompt, a bad
        message line, or metadata (skipped; an unknown type counted)."""
        kind = rec.get("type") if isinstance(rec.get("type"), str) else f"<{type(rec.get('type')).__name__}>"
        if kind in ("user", "assistant"):
            return [bad(self.path, line, f"{rec['type']} line without a message object", rec)] if report_errors else []
        if kind == "system" and rec.get("subtype") == "api_error" and _ident(rec) == self.ident:
            return self.emit(self.close() + [_retry(rec, line)])
        if kind == "attachment" and _ident(rec) == self.ident:
            prompt = _queued_prompt(rec)
            if prompt is not None:
                return self.emit(self.close() + [UserTurn(prompt, str_or_none(rec.get("timestamp")), line)])
        elif kind not in LINE_TYPES and report_errors:
            unknown[kind] += 1
        return []


def _session(path: Path, ident: Ident, report_errors: bool, others: list[Ident] | None,
             checkpoint: bool = False, resume: Checkpoint | None = None,
             counts: Counter[str] | None = None) -> Iterator[Item]:
    """The items of one session (lines of `ident`); collects other sessions' idents seen.
    `checkpoint`: yield a Checkpoint before the end-of-file flush (when resumable: the file's
    only session, ending on a complete line); `resume`: continue from one; `counts` receives
    the line types skipped as unknown."""
    m = _Message(path, ident, resume)
    ident = m.ident  # a checkpoint's own
    pos: list[int] = []
    unknown: Counter[str] = Counter()
    for line, rec in iter_jsonl(path, start=(resume.offset, resume.line) if resume else (0, 0), pos=pos):
        if isinstance(rec, ReadError):
            if report_errors:
                yield rec
            continue
        if not isinstance(rec, dict):
            if report_errors:
                yield bad(path, line, f"expected a JSON object, got {type(rec).__name__}", rec)
            continue
        if not _conversational(rec):
            yield from m.other(rec, line, report_errors, unknown)
            continue
        this = _ident(rec)
        if this != ident:
            if others is not None and this not in others:
                others.append(this)
            continue
        if _skipped(rec):
            continue
        msg = rec["message"]
        content = msg.get("content")
        if content is not None and not isinstance(content, str | list):
            if report_errors:
                yield bad(path, line, "message content must be a string or a list of blocks, "
                          f"got {type(content).__name__}", rec)
            continue
        if m.copied(rec):
            continue  # a line written again by a resume
        yield from (m.assistant(rec, msg, content, line) if rec["type"] == "assistant" else m.user(rec, line))
    if checkpoint and m.started and m.info_final[0] and not others and pos[0] == pos[2]:
        yield Checkpoint(pos[0], pos[1], m.state())
    yield from m.emit(m.close())
    if unknown:
        log.info("%s: skipped lines of types this reader does not know: %s", path,
                 ", ".join(f"{k} ×{n}" for k, n in unknown.most_common()))
        if counts is not None:
            counts.update(unknown)


def read_from(path: Path | str, checkpoint: Checkpoint | None = None) -> Iterator[Item]:
    """`read`, plus a Checkpoint before the final flush; or continued from a checkpoint."""
    if checkpoint is None:
        yield from read(path, checkpoint=True)
        return
    if not (isinstance(checkpoint.state, tuple) and checkpoint.state[:1] == (_STATE,)):
        raise ValueError(f"{path}: not a claude-code reader checkpoint")
    path = Path(path)
    others: list[Ident] = []
    yield from _session(path, checkpoint.state[1], True, others, True, checkpoint)
    for ident in others:
        yield from _session(path, ident, False, None)


def read(path: Path | str, checkpoint: bool = False, unknown_types: Counter[str] | None = None) -> Iterator[Item]:
    """`unknown_types`, when given, receives the count of each line type skipped as unknown."""
    path = Path(path)
    first: Ident | None = None
    for _, rec in iter_jsonl(path):
        if (_conversational(rec) and not _skipped(rec)) or (
                isinstance(rec, dict) and rec.get("type") == "attachment" and _queued_prompt(rec)):
            first = _ident(rec)
            break
    if first is None:
        # Nothing conversational: still report the file's bad lines.
        yield from (rec for _, rec in iter_jsonl(path) if isinstance(rec, ReadError))
        return
    others: list[Ident] = []
    yield from _session(path, first, True, others, checkpoint, counts=unknown_types)
    for ident in others:
        yield from _session(path, ident, False, None)
