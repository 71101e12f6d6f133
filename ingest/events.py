"""Normalized events: the one shape every transcript format is read into.

A reader yields a flat stream of items for one file:

    SessionStart, <events of that session>..., SessionStart, <events>..., with ReadError anywhere

so a file holding many sessions (tau-bench results, OpenHands output.jsonl) streams without
holding more than one record in memory. Events are immutable; `line` is the source line (JSONL)
or record index (JSON documents), 1-based, kept for error messages and the Session page.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import xxhash


def text_digest(text: str) -> str:
    """Stable digest of a whole answer text; equality of answers is equality of digests.

    Stored next to the capped text in the ledger so that a recheck from the ledger compares
    exactly what an ingest from the file compared.
    """
    return xxhash.xxh3_128_hexdigest(text.encode("utf-8", "surrogatepass"))


TRUNCATED = "…[truncated: "  # start of the marker ending a text the ledger capped (ledger/store.py)


def is_capped(text: str | None) -> bool:
    """A text the ledger stored capped: its head, then a marker with the full length and digest."""
    return bool(text) and text.endswith("]") and TRUNCATED in text[-120:]


@dataclass(frozen=True, slots=True)
class SessionInfo:
    """What a reader knows about a session before its events."""

    key: str  # unique within the source file (e.g. the Claude Code sessionId, a task id, "0")
    format: str  # reader name, e.g. "openai-chat", "claude-code"
    title: str = ""
    agent: str | None = None
    model: str | None = None
    started_at: str | None = None  # ISO-8601 where the format has it
    parent_key: str | None = None  # subagent → parent session key, where known
    meta: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class SessionStart:
    info: SessionInfo
    line: int | None = None


@dataclass(frozen=True, slots=True)
class UserTurn:
    """A message from the person: a run boundary (seed 000's break_run)."""

    text: str
    ts: str | None = None
    line: int | None = None


@dataclass(frozen=True, slots=True)
class TurnUsage:
    """What one model turn used, as the transcript reports it (None: not reported).

    `input_tokens` counts ALL input, cache reads and writes included, as OpenAI and genai-prices
    count it (a reader of Anthropic usage, which reports them apart, adds them up). Carried on the
    Prose or Batch event the turn produced; no detector reads it (it is left out of equality so
    events compare as the detectors see them). `cache_write_1h_tokens` is the part of
    `cache_write_tokens` written for an hour (Anthropic prices it higher)."""

    model: str | None = None
    input_tokens: int | None = None
    output_tokens: int | None = None
    cache_read_tokens: int | None = None
    cache_write_tokens: int | None = None
    cache_write_1h_tokens: int | None = None
    provider: str | None = None  # genai-prices provider id where the format says (anthropic, openai, google)

    @property
    def known(self) -> bool:
        return self.input_tokens is not None or self.output_tokens is not None


@dataclass(frozen=True, slots=True)
class Prose:
    """An assistant message without tool calls (the stagnation detector reads these)."""

    text: str
    ts: str | None = None
    line: int | None = None
    usage: TurnUsage | None = field(default=None, compare=False)


@dataclass(frozen=True, slots=True)
class Call:
    """One tool call. `args` is the parsed JSON value (normally a dict); None ≡ {}.

    When the transcript's argument string is not valid JSON, `args` holds the raw string and
    `args_malformed` is True: the call is still checked (keyed on that string), and flagged.
    """

    id: str | None
    name: str
    args: Any = None
    args_malformed: bool = False


@dataclass(frozen=True, slots=True)
class Batch:
    """The tool calls of one assistant message, in emission order (possibly one call)."""

    calls: tuple[Call, ...]
    text: str = ""  # prose the assistant wrote alongside the calls, if any
    ts: str | None = None
    line: int | None = None
    usage: TurnUsage | None = field(default=None, compare=False)  # the model turn's tokens


@dataclass(frozen=True, slots=True)
class Answer:
    """One call's result. `digest` is text_digest(full text); computed when not given."""

    call_id: str | None
    text: str
    is_error: bool = False
    ts: str | None = None
    digest: str = ""

    def __post_init__(self) -> None:
        if not self.digest:
            object.__setattr__(self, "digest", text_digest(self.text))


@dataclass(frozen=True, slots=True)
class Answers:
    """Results that came back, keyed by call id (one message may answer several calls).

    Formats without call ids (SWE-agent) give `call_id=None`: the replay engine pairs such an
    answer with the oldest unanswered call of the pending batch.
    """

    answers: tuple[Answer, ...]
    line: int | None = None


@dataclass(frozen=True, slots=True)
class Retry:
    """The harness retrying a failed model request (rate limit, overload, network): neither a
    turn nor a tool call. Stored and shown so a retry storm is visible; no detector reads it, and
    it does not open or extend a run. `text` starts with what the transcript called it."""

    text: str
    ts: str | None = None
    line: int | None = None


@dataclass(frozen=True, slots=True)
class ReadError:
    """A malformed line or record: reading goes on, the caller decides where it is stored."""

    path: str
    line: int | None
    message: str
    excerpt: str = ""

    def __str__(self) -> str:
        where = f"{self.path}:{self.line}" if self.line is not None else self.path
        return f"{where}: {self.message}"


Event = UserTurn | Prose | Batch | Answers | Retry
Item = SessionStart | UserTurn | Prose | Batch | Answers | Retry | ReadError

@dataclass(frozen=True, slots=True)
class Checkpoint:
    """Where a reader can continue a file from (`formats.read_from`): bytes through `offset`
    (line `line`) are read; `state` (picklable) is the reader's own, taken just before its
    end-of-file flush. Items a resumed read yields are exactly those a whole read yields after
    this point; the events the whole read flushed after it (`flushed` per session key, e.g. a
    message whose lines may continue) are provisional and yielded again. Not an event: only
    `read_from` yields it, as its last-but-flush item."""

    offset: int
    line: int
    state: Any
