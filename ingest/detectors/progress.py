"""Our progress detector: a repeat is a loop only when nothing changed.

Judged per call, before it runs, against the last `window` calls. Every call leaves an entry:
its tool, its arguments' digest, its time where the transcript has one and, once it comes back,
its answer as `loopledger.detectors.answers` reads it (a failure or not, still pending or not,
volatile parts removed before answers are compared). What the detector believes, one rule each:

1. **A call answered the same way again, with nothing new done between, is stale.** Its count is
   the attempt this call would be: 1 + the earlier runs of the same call (same tool and
   arguments) whose answers, newest first, are all the same. A changed answer is progress (the
   count restarts there), and so is a new change the agent made since: a successful write with
   arguments not seen before in the window makes a later check of a success a new experiment
   (an edit, then the build that passes again). It halts at `halt_at` when the answer is a
   failure, or when nothing between could have changed it (every call since only read, was
   this same call, or was a step retaken: a call answered as its previous run was); otherwise at
   `ok_halt_at`. A failure repeated after new changes gets
   `rerun_halt_at` (an edit that did not touch the failure is an honest try, once). The same
   write made again and again back to back halts at `ok_halt_at` whatever it answers (the same
   insertion, growing the file each time). A write that failed, made again as the very next
   call, is warned at once (an edit whose search text is not in the file fails again).
2. **A poll is judged by what it costs and what it waited for.** A repeat is a wait when the call
   sleeps (`sleep 30 && gh run view …`: how long it sleeps does not make it another call), its
   answer says the thing is not done (`in_progress`, `queued`, `<status>running</status>`, Codex's
   "Process running"), it failed in a way that passes by itself (a 503, a rate limit), or its
   answers moved by themselves before (a log tailed while a build runs). Every poll is a model
   turn: polls that ask for no wait of their own (no sleep, `--timeout` or `yield_time_ms`, under
   `PATIENT_POLL` seconds each) are warned once three polls answered the same and halted at the
   `wait_halt_at`-th, however few minutes they took (a subagent polling every 3 s); patient polls
   are judged by the minutes their answers stay unchanged (`wait_limit`), by the transcript's
   clock, else by the sleeps asked for. A new change of the agent's between polls restarts the
   count.
3. **The same error, retried without addressing it, is stale even when the arguments move.** The
   tool's trailing failures with the same error: an attempt is stale when it goes back to
   arguments already tried, or keeps every argument value the error names (a string or number of
   4+ characters the error quotes: "flight HAT030 not available"). Trying something new is
   progress. Halts at `halt_at` (`rerun_halt_at` after a new change).
4. **One tool failing the same way in a row is stuck, whatever its arguments** (a harness format
   error again and again, guessed ids each "not found"): failures since the latest success with
   one failure signature (the text without the values it quotes, its volatile parts and its
   numbers), counted in agent steps, halt at `same_failure_at`, one step later when the person
   spoke between; a value the person gave, tried, starts the run at their turn. A search that
   found nothing is an answer, not a failure (a sweep of searches is exploration), and a call the
   harness refused before it ran (`vocab.HARNESS_ERROR`: its arguments summarize a reply; Claude
   Code's `<tool_use_error>`: a precondition) is linked to a later attempt only while no call has
   succeeded since: the agent may have done what it asked for. Replies the harness refused as
   unparseable (a format error) are counted among the last `same_failure_at` + 2 steps instead of
   in a row: nearly every reply refused is stuck though a command slipped through between, while
   a slip now and then, each followed by a command that runs, is not.

A call is its action: the commentary written beside it (a shell command's `description`, a
`thought`: canonical.action_args) is not part of what makes two calls the same.

An unknown answer (never came back) neither breaks a run nor joins it. A warning comes one
attempt before a halt, and only on evidence: two answers that did not change (a wait: when its
next poll at this pace would pass the limit). A user turn forgets what `across_turns` does not
keep: `none` forgets everything, `errors` keeps the failures (a retry after "try again" is still
the same error), `answers` (the default) keeps every answer but a wait's — a lookup answered the
same again after the person spoke halts one attempt later (`ok_halt_at` + 1), and a change asked
for again after the person spoke is new (a write, or a tool every call of which writes:
`WRITE_TOOLS`) —, `all` keeps everything. The verdict is the most severe rule's; the check
carries the count and threshold of the rule nearest its halt, and a reason in plain words (what
repeated, how many times) that the model and a person read.

Defaults (window 20, halt_at 3, ok_halt_at 4, rerun_halt_at 4, same_failure_at 5, wait_limit
900 s, wait_halt_at 6, across_turns answers) are chosen by grouped cross-validation over every
labelled set (docs/detection.md).
"""

from __future__ import annotations

import copy
import datetime as _dt
import re
from collections import deque
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, NamedTuple

import orjson
import xxhash
from loopledger import vocab
from loopledger.detectors.answers import (
    DEFAULT_ERROR_NAMES,
    DEFAULT_VOLATILE_NAMES,
    ERROR_PATTERNS,
    VOLATILE_PATTERNS,
    FailureReader,
    Normalizer,
    compile_patterns,
    found_nothing,
    is_pending,
    is_transient,
    resolve,
)
from loopledger.detectors.base import FLOAT, INT, NAMES, TEXT, Check, Param, PerCallAnswers
from loopledger.detectors.canonical import action_args, action_key, canonical_bytes
from loopledger.detectors.errors import ConfigError
from loopledger.detectors.registry import Detector
from loopledger.detectors.words import tool_words
from loopledger.detectors.workspace import asked_wait, classify, last_program, sleeps
from loopledger.events import Batch, is_capped, text_digest

if TYPE_CHECKING:  # pragma: no cover — the spec grammar imports the detectors, not the reverse
    from loopledger.detectors.policy import PolicySpec

ALLOW, WARN, HALT = "allow", "warn", "halt"
REPEAT, WAIT, RETRY, FAILURES = "repeat", "wait", "retry", "failures"
ACROSS_TURNS = ("none", "errors", "all", "answers")

DEFAULT_WINDOW = 20
DEFAULT_HALT_AT = 3
DEFAULT_OK_HALT_AT = 4
DEFAULT_RERUN_HALT_AT = 4
DEFAULT_SAME_FAILURE_AT = 5
DEFAULT_WAIT_LIMIT = 900.0  # seconds: a CI run, a rollout, a server coming up take minutes, not a quarter hour unchanged
DEFAULT_WAIT_HALT_AT = 6
DEFAULT_ACROSS_TURNS = "answers"
MAX_WINDOW = 10_000
QUICK_POLL_WARN = 4  # polling without waiting is warned once three polls answered the same
PATIENT_POLL = 5.0  # seconds of its own waiting per poll (a sleep, a --timeout) that make polling patient
# Tools whose every call is a change (Kilo Code's list): a change asked for again after the person
# spoke is the person's request, whatever the reader could tell of its content.
WRITE_TOOLS = frozenset({"edit", "multiedit", "write", "apply_patch"})
SAID_HEAD = 20_000  # characters of a user turn searched for the values a call repeats
NAMED_MIN_LEN = 4  # shorter values (ids like 1, words like "yes") are named by chance
RETIRED = ("warn_at", "poll_span")  # earlier versions' parameters (a stored policy may name them)

_hash = xxhash.xxh3_128_hexdigest
_dumps, _SORT = orjson.dumps, orjson.OPT_SORT_KEYS
_new = tuple.__new__  # a NamedTuple without its Python-level __new__ (one per check)
_NOTHING: frozenset[str] = frozenset()
_CLASSES: dict[str, tuple[bool, bool]] = {}  # tool + arguments digest -> classify(): commands recur


def _classified(name: str, args: Any, key: str) -> tuple[bool, bool]:
    k = name + key
    got = _CLASSES.get(k)
    if got is None:
        if len(_CLASSES) >= 16384:
            _CLASSES.clear()  # bounded: a long session's commands are many, most never recur
        got = _CLASSES[k] = classify(name, args)
    return got


def _seconds(at: Any) -> float | None:
    """A time as epoch seconds: a number as given, an ISO-8601 text parsed (None: unknown)."""
    if at is None or isinstance(at, bool):
        return None
    if isinstance(at, int | float):
        return float(at)
    try:
        t = _dt.datetime.fromisoformat(str(at).strip())
    except ValueError:
        return None
    if t.tzinfo is None:
        t = t.replace(tzinfo=_dt.UTC)
    return t.timestamp()


def leaves(args: Any, min_len: int = NAMED_MIN_LEN) -> set[str]:
    """The argument values (strings, numbers) at least `min_len` characters long, as text.
    Iterative: arguments may nest 10,000 deep."""
    out: set[str] = set()
    stack = [args]
    while stack:
        v = stack.pop()
        if isinstance(v, dict):
            stack.extend(v.values())
        elif isinstance(v, list | tuple):
            stack.extend(v)
        elif isinstance(v, str):
            if len(v) >= min_len:
                out.add(v)
        elif isinstance(v, int | float) and not isinstance(v, bool):
            text = str(v)
            if len(text) >= min_len:
                out.add(text)
    return out


def _words(value: str) -> set[str]:
    """The words of a command string at least NAMED_MIN_LEN long, quotes stripped."""
    return {w for w in (t.strip("'\"`") for t in value.split()) if len(w) >= NAMED_MIN_LEN}


_DIGITS = re.compile(r"\d+")
_DIGITS_B = re.compile(rb"\d+")


def _shape(canonical: bytes) -> str:
    """Digest of canonical arguments with every number taken out (a poll's sleep, a page)."""
    return _hash(_DIGITS_B.sub(b"#", canonical))


_IDS = re.compile(VOLATILE_PATTERNS["uuid"] + "|" + VOLATILE_PATTERNS["hex_id"])


def _new_ids(run: list[Entry]) -> bool:
    """Each answer of the run (newest first) names an id the one before it did not: every call
    made something new (a message queued, a job created) — an action repeated, not a poll."""
    for newer, older in zip(run, run[1:], strict=False):
        ids = set(_IDS.findall(newer.text[:2000]))
        if not ids or ids <= set(_IDS.findall(older.text[:2000])):
            return False
    return len(run) > 1


class ProgressVerdict(NamedTuple):
    action: str  # allow | warn | halt
    count: int  # the attempt this call would be without progress (the rule nearest its halt)
    rule: str  # "repeat" | "wait" | "retry" | "failures" | "" (nothing tried before)
    threshold: int | None  # the count at which that rule halts (None: a wait judged by time)
    position: int  # this call's position, for record_answer
    reason: str = ""  # plain words, for a warn or a halt


class Entry:
    """One call in the window. Its answer is kept as the reader's digest of the full text plus the
    text itself: the normalized digest is computed only when two answers with different texts must
    be compared (only repeats are compared), and then cached."""

    __slots__ = ("position", "step", "tool", "key", "match", "args", "at", "sleep", "raw", "text", "failed",
                 "waits", "named", "fresh", "refused", "echo", "_norm", "_sig")

    def __init__(self, position: int, tool: str, key: str, match: str, args: Any, at: Any, sleep: float,
                 step: int = 0) -> None:
        self.position = position
        self.step = step  # the agent step (calls checked with no answer recorded between)
        self.tool = tool
        self.key = key  # digest of the canonical arguments
        self.match = match  # what makes two calls the same call (a sleeping call: its shape)
        self.args = args  # the call's arguments (shared, never changed): read when it fails
        self.at = at  # when it was made (epoch seconds or ISO text; None: unknown)
        self.sleep = sleep  # seconds its command sleeps
        self.raw: str | None = None  # digest of the full answer text (None: not back yet)
        # Set when the answer comes back (record_answer), read only once `raw` is set: text,
        # failed, waits (pending or transient), named (values its error quotes), fresh (a
        # successful write with arguments new in the window), refused (by the harness), echo (not
        # a write, answered as its previous run in the window was: nothing new), _norm, _sig.

    @property
    def reads(self) -> bool:
        return _classified(self.tool, self.args, self.key)[0]

    @property
    def writes(self) -> bool:
        return _classified(self.tool, self.args, self.key)[1]

    def copy(self) -> Entry:
        new = Entry(self.position, self.tool, self.key, self.match, self.args, self.at, self.sleep, self.step)
        new.raw = self.raw
        if self.raw is not None:
            new.text, new.failed, new.waits, new.named, new.fresh, new.refused, new.echo = (
                self.text, self.failed, self.waits, self.named, self.fresh, self.refused, self.echo)
            new._norm, new._sig = self._norm, self._sig
        return new


class Count(NamedTuple):
    """One rule's reading of the call: the attempt it would be, where it halts and warns."""

    rule: str
    count: int
    halt: int | None  # None: a wait judged by time (then `halting`/`warning` say)
    warn: int | None
    reason: str
    halting: bool = False
    warning: bool = False

    @property
    def halts(self) -> bool:
        return self.halting or (self.halt is not None and self.count >= self.halt)

    @property
    def warns(self) -> bool:
        return self.warning or (self.warn is not None and self.count >= self.warn)

    @property
    def distance(self) -> float:
        if self.halt is None:
            return 0 if self.halting else 1 if self.warning else 2
        return self.halt - self.count


def _times(n: int) -> str:
    return "once" if n == 1 else "twice" if n == 2 else f"{n} times"


def _minutes(seconds: float) -> str:
    return f"{seconds / 60:.0f} min" if seconds >= 90 else f"{seconds:.0f} s"


def validate(window: Any, halt_at: Any, ok_halt_at: Any, across_turns: Any, same_failure_at: Any,
             rerun_halt_at: Any, wait_limit: Any, wait_halt_at: Any) -> None:
    values = {"window": window, "halt_at": halt_at, "ok_halt_at": ok_halt_at, "same_failure_at": same_failure_at,
              "rerun_halt_at": rerun_halt_at, "wait_halt_at": wait_halt_at}
    for name, value in values.items():
        if not isinstance(value, int) or isinstance(value, bool):
            raise ConfigError(name, f"{name} is an integer", f"{name}: must be an integer, got {value!r}")
    if window < 2:
        raise ConfigError("window", "window >= 2", f"window: must be >= 2, got {window}")
    if window > MAX_WINDOW:
        raise ConfigError("window", f"window <= {MAX_WINDOW}", f"window: must be <= {MAX_WINDOW}, got {window}")
    for name in ("halt_at", "ok_halt_at", "same_failure_at", "rerun_halt_at", "wait_halt_at"):
        if values[name] < 3:
            # Two equal answers are the least evidence that nothing changes.
            raise ConfigError(name, f"{name} >= 3", f"{name}: must be >= 3, got {values[name]}")
    if isinstance(wait_limit, bool) or not isinstance(wait_limit, int | float) or not wait_limit > 0:
        raise ConfigError("wait_limit", "wait_limit > 0",
                          f"wait_limit: must be a number of seconds > 0, got {wait_limit!r}")
    if across_turns not in ACROSS_TURNS:
        raise ConfigError("across_turns", f"across_turns is one of {'|'.join(ACROSS_TURNS)}",
                          f"across_turns: must be one of {', '.join(ACROSS_TURNS)}, got {across_turns!r}")


class ProgressDetector:
    """Stale repeats, waits, stale retries and runs of one failure over the last `window` calls
    (see the module docstring)."""

    __slots__ = ("window", "halt_at", "ok_halt_at", "across_turns", "same_failure_at", "rerun_halt_at",
                 "wait_limit", "wait_halt_at", "volatile", "errors", "is_failure", "normalize", "_entries",
                 "_by_tool", "_next", "_step", "_answered", "_answered_at", "_turn", "_success", "_moved", "_polls", "last",
                 "_said", "_asked")

    def __init__(self, window: int = DEFAULT_WINDOW, halt_at: int = DEFAULT_HALT_AT,
                 ok_halt_at: int = DEFAULT_OK_HALT_AT, across_turns: str = DEFAULT_ACROSS_TURNS,
                 volatile: Sequence[str] = DEFAULT_VOLATILE_NAMES, errors: Sequence[str] = DEFAULT_ERROR_NAMES, same_failure_at: int = DEFAULT_SAME_FAILURE_AT,
                 rerun_halt_at: int = DEFAULT_RERUN_HALT_AT, wait_limit: float = DEFAULT_WAIT_LIMIT,
                 wait_halt_at: int = DEFAULT_WAIT_HALT_AT) -> None:
        validate(window, halt_at, ok_halt_at, across_turns, same_failure_at, rerun_halt_at, wait_limit,
                 wait_halt_at)
        self.window = window
        self.halt_at = halt_at
        self.ok_halt_at = ok_halt_at
        self.across_turns = across_turns
        self.same_failure_at = same_failure_at
        self.rerun_halt_at = max(rerun_halt_at, halt_at)  # never below a repeat with nothing new between
        self.wait_limit = float(wait_limit)
        self.wait_halt_at = wait_halt_at
        # Both as the spec names them: pattern names, or re:<expression>.
        self.volatile = compile_patterns("volatile", resolve("volatile", volatile, VOLATILE_PATTERNS))
        self.errors = tuple(errors)
        self.is_failure = FailureReader(self.errors)
        self.normalize = Normalizer(self.volatile)
        self._entries: deque[Entry] = deque(maxlen=window)  # the window, oldest first
        self._by_tool: dict[str, deque[Entry]] = {}  # the same entries per tool (trimmed lazily)
        self._next = 0
        self._step = 0  # agent steps: a check after an answer was recorded starts the next one
        self._answered = True
        self._turn = 0  # position of the first call after the latest user turn
        self._said = ""  # what the person said in the latest user turn (a bounded head)
        self._asked = False  # the call being judged repeats values the person just gave
        self._success = -1  # position of the newest call answered by a success (-1: none)
        self._answered_at: dict[str, int] = {}  # tool -> position of its newest answered call
        self._moved = -1  # the newest call (not a write) whose repeat was answered differently, no new change between
        self._polls: dict[str, int] = {}  # such calls' match -> where it last moved: polls of something outside
        self.last: ProgressVerdict | None = None

    # -- answers ---------------------------------------------------------------------------

    def digest(self, text: str) -> str:
        """Digest of the text with its volatile parts removed."""
        return _hash(self.normalize(text).encode("utf-8", "surrogatepass"))

    def _norm(self, e: Entry) -> str:
        if e._norm is None:
            # A capped answer (as the ledger stores it) is only its head: its full digest, which
            # the marker holds, decides — a hex id pattern must not erase that digest.
            e._norm = e.raw or "" if is_capped(e.text) else self.digest(e.text)
        return e._norm

    def failure_signature(self, e: Entry) -> str:
        """What stays of a failure when what a guess changes is taken out: the argument values the
        error names (an id tried: "order W0012 not found"), a command string's words it quotes,
        its volatile parts and every number ("found 3 actions", "found 2 actions")."""
        if e._sig is None:
            text = e.text
            words = {w for v in leaves(e.args) if " " in v for w in _words(v) if w in text}
            for v in sorted(e.named | words, key=len, reverse=True):
                text = text.replace(v, "\x01")
            e._sig = _DIGITS.sub("#", self.normalize(text))
        return e._sig

    def same_answer(self, a: Entry, b: Entry) -> bool:
        """Equal after the volatile parts are removed (and both failures, or both not)."""
        if a.failed != b.failed:
            return False
        return a.raw == b.raw or self._norm(a) == self._norm(b)

    # -- the check -------------------------------------------------------------------------

    def check(self, name: str, args: Any, canonical: bytes | None = None,
              args_digest: str | None = None, at: Any = None) -> ProgressVerdict:
        """Judge a call before it runs. `at`: when it is made (epoch seconds or ISO-8601 text).
        Arguments are taken without commentary (canonical.action_args) unless their digest is given."""
        if args_digest is None:
            stripped = action_args(args)
            if stripped is not args:
                args, canonical = stripped, None
        if canonical is None and args_digest is None:
            try:  # canonical_bytes, its common case inlined (the hot path)
                canonical = _dumps(args, option=_SORT) if args is not None else b"{}"
            except TypeError:
                canonical = canonical_bytes(args)
        if args_digest is None:
            args_digest = _hash(canonical)
        sleep = sleeps(args)
        if sleep:
            if canonical is None:
                canonical = canonical_bytes(args)
            match = _shape(canonical)
        else:
            match = args_digest
        position = self._next
        self._next = position + 1
        if self._answered:
            self._step += 1
            self._answered = False
        entry = Entry(position, name, args_digest, match, args, at, sleep, self._step)
        self._asked = bool(self._said) and self._quotes_user(args)
        same_tool = self._by_tool.get(name)
        if same_tool is None:
            if len(self._by_tool) >= 4 * self.window:  # keep it bounded: drop tools out of the window
                self._reindex()
            same_tool = self._by_tool[name] = deque()
        lo = position - self.window  # the window: the `window` calls before this one
        while same_tool and same_tool[0].position < lo:
            same_tool.popleft()
        if not same_tool or self._answered_at.get(name, -1) < lo:  # no answer of this tool in the window
            verdict = _new(ProgressVerdict, (ALLOW, 1, "", self.ok_halt_at, position, ""))
        else:
            verdict = self._verdict(same_tool, entry)
        self._entries.append(entry)
        same_tool.append(entry)
        self.last = verdict
        return verdict

    def _reindex(self) -> None:
        self._by_tool = {}
        for e in self._entries:
            self._by_tool.setdefault(e.tool, deque()).append(e)

    def _verdict(self, same_tool: deque[Entry], entry: Entry) -> ProgressVerdict:
        counts = [c for c in (self._stale_repeat(same_tool, entry), self._same_write(entry),
                              self._stale_retry(same_tool, entry), self._failure_run(same_tool, entry))
                  if c is not None]
        if not counts:
            return _new(ProgressVerdict, (ALLOW, 1, "", self.ok_halt_at, entry.position, ""))
        action = HALT if any(c.halts for c in counts) else WARN if any(c.warns for c in counts) else ALLOW
        # The rule nearer its halt speaks (ties: in the order above).
        best = min(counts, key=lambda c: (0 if c.halts else 1 if c.warns else 2, c.distance))
        return _new(ProgressVerdict, (action, best.count, best.rule, best.halt, entry.position,
                                      best.reason if action != ALLOW else ""))

    def _floor(self, tool: str) -> int:
        # A harness refusal's arguments are the harness's summary of a reply it would not run
        # ("found 2 actions"), not an action the agent chose: refusals are one repeated call only
        # while no call has succeeded since (the agent acting in between makes the next one new).
        if self._asked:
            return self._turn - 1  # asked for by the person: a new request from their turn on
        return self._success if tool in vocab.HARNESS_REFUSALS else -1

    def _stale_refusal(self, e: Entry) -> bool:
        """A call the harness refused before a call that has succeeded since: the agent did
        something the refusal may have asked for (Claude Code's "File has not been read yet. Read
        it first", then a Read), so the next attempt is a new one."""
        return e.refused and e.position <= self._success

    def _fresh_write_after(self, first: int) -> int:
        """Position of the newest successful write with new arguments after `first` (-1: none)."""
        return self._fresh_write_between(first, self._next)

    def _fresh_write_between(self, first: int, last: int) -> int:
        """... strictly between positions `first` and `last`."""
        for e in reversed(self._entries):
            if e.position <= first:
                return -1
            if e.position < last and e.raw is not None and e.fresh:
                return e.position
        return -1

    def _quiet_since(self, first: int, entry: Entry) -> bool:
        """Every call after `first` only read, was this same call, or was a step retaken (a call
        answered as its previous run was: SWE-agent reopening the file it had open): nothing new
        could have changed what it answers."""
        for e in reversed(self._entries):
            if e.position <= first:
                return True
            if not (e.reads or (e.raw is not None and e.echo) or (e.tool == entry.tool and e.match == entry.match)):
                return False
        return True

    def _stale_repeat(self, same_tool: deque[Entry], entry: Entry) -> Count | None:
        """Rules 1 and 2: this call's earlier answers, newest first, while they are the same."""
        floor = self._floor(entry.tool)
        run: list[Entry] = []
        for e in reversed(same_tool):
            if e.position <= floor:
                break
            if e.match != entry.match or e.raw is None:
                continue
            if (run and not self.same_answer(e, run[0])) or self._stale_refusal(e):
                break
            run.append(e)
        if not run:
            return None
        head = run[0]
        what = tool_words(entry.tool, entry.args)
        if entry.sleep or any(e.sleep for e in run) or (head.waits and (head.failed or not _new_ids(run))) or (
                not head.failed and self._polls.get(entry.match, -self.window - 1) > entry.position - self.window):
            return self._wait(run, entry, what)
        changed = self._fresh_write_after(run[-1].position)
        change = entry.writes or entry.tool.lower() in WRITE_TOOLS  # this call changes something
        if not head.failed:
            # a new change of the agent's since, or the world moving (another repeated call
            # answered differently): a check that answers the same again is a new experiment
            # (this call's own changed answer is where its run restarts: kept)
            run = [e for e in run if e.position > changed and e.position >= self._moved]
            if run and self.across_turns == "answers" and change:
                run = [e for e in run if e.position >= self._turn]  # asked for again by the person
            if not run:
                return None
        r = len(run)
        warn_at = None
        if head.failed:
            halt = self.rerun_halt_at if changed >= 0 else self.halt_at
            said = f"{what} ran {_times(r)} with the same failure" + (
                ", though files were changed between" if changed >= 0 else "")
            if r == 1 and self._entries[-1] is head and not head.refused and change:
                # A change that failed, sent again at once with nothing read between, fails again
                # (an edit whose search text is not in the file): the model is told now. A call
                # the harness refused is left out: its refusal already said what to do first.
                warn_at = 2
        elif self.across_turns == "answers" and run[-1].position < self._turn:
            # asked again after the person spoke: a new request until it has come back the same
            # more often than a check with other calls between
            halt = self.ok_halt_at + 1
            said = f"{what} ran {_times(r)} with the same answer, though the user spoke between"
        elif self._quiet_since(run[-1].position, entry):
            halt = self.halt_at
            said = f"{what} ran {_times(r)} with the same answer, and nothing between could change it"
        else:
            halt = self.ok_halt_at
            said = f"{what} ran {_times(r)} with the same answer"
        if warn_at is None and halt - 1 >= 3:
            warn_at = halt - 1
        return Count(REPEAT, r + 1, halt, warn_at, said)

    def _wait(self, run: list[Entry], entry: Entry, what: str) -> Count | None:
        """Rule 2: a poll of something outside, judged by what it costs and how long it waited: a
        call that sleeps, a pending answer (not one that names a new id each time: that call
        creates something, a sent mail "queued" again and again), a transient failure, or a call
        whose answers moved by themselves before (a log tailed while a build runs). Each poll is a
        model turn: polls that ask for no wait of their own (no sleep between, no `--timeout`, no
        `yield_time_ms`) halt at `wait_halt_at` unchanged answers, however few minutes they took;
        patient polls are judged by the minutes they stay unchanged (`wait_limit`). The agent's own
        new change between polls is an experiment awaiting its answer: the wait, counted and timed,
        starts after it."""
        if not run[0].failed:
            changed = self._fresh_write_after(run[-1].position)
            if changed >= 0:
                run = [e for e in run if e.position > changed]
                if not run:
                    return None  # the first poll since: nothing to count yet
        r = len(run)
        now, first, newest = _seconds(entry.at), _seconds(run[-1].at), _seconds(run[0].at)
        if now is not None and first is not None:
            waited = now - first
            pace = now - newest if newest is not None else 0.0
        else:
            waited = sum(e.sleep for e in run)
            pace = run[0].sleep
        oldest = run[-1].position
        asked = sum(asked_wait(e.args) for e in self._entries if e.position >= oldest)
        if asked >= PATIENT_POLL * r:
            if waited > 0:
                said = f"{what} has waited {_minutes(waited)} with the same answer ({_times(r)})"
                return Count(WAIT, r + 1, None, None, said, halting=waited > self.wait_limit,
                             warning=r >= 2 and waited + pace > self.wait_limit)
            said = f"{what} was polled {_times(r)} with the same answer"
            return Count(WAIT, r + 1, self.wait_halt_at, self.wait_halt_at - 1, said)
        said = f"{what} was polled {_times(r)} with the same answer, without waiting between"
        if waited > 0:
            said += f" ({_minutes(waited)})"
        # Warned from the third poll on: the model reads it while a short wait can still pay off.
        return Count(WAIT, r + 1, self.wait_halt_at, QUICK_POLL_WARN, said, halting=waited > self.wait_limit)

    def _same_write(self, entry: Entry) -> Count | None:
        """The same write made again and again back to back, whatever it answers."""
        if not _classified(entry.tool, entry.args, entry.key)[1]:
            return None
        n = 0
        for e in reversed(self._entries):
            if e.key != entry.key or e.tool != entry.tool:
                break
            n += 1
        if n < 2:
            return None
        return Count(REPEAT, n + 1, self.ok_halt_at, self.ok_halt_at - 1,
                     f"{tool_words(entry.tool, entry.args)} made the same change {_times(n)} in a row")

    def _trailing_failures(self, same_tool: deque[Entry], floor: int) -> list[Entry]:
        """The tool's trailing failures with the newest one's error, newest first (a success or a
        transient failure ends them; unknown answers are skipped)."""
        chain: list[Entry] = []
        for e in reversed(same_tool):
            if e.position <= floor:
                break
            if e.raw is None:
                continue
            if not e.failed or e.waits or (chain and not self.same_answer(e, chain[0])) or self._stale_refusal(e):
                break
            chain.append(e)
        return chain

    def _stale_retry(self, same_tool: deque[Entry], entry: Entry) -> Count | None:
        """Rule 3: the same error, retried without addressing it."""
        chain = self._trailing_failures(same_tool, self._floor(entry.tool))
        if not chain:
            return None
        attempts = [(e.key, e.args) for e in reversed(chain)] + [(entry.key, entry.args)]
        named = chain[0].named  # every entry of the chain has the same (normalized) error
        stale = 0
        for i in range(1, len(attempts)):
            k, a = attempts[i]
            again = any(k == attempts[j][0] for j in range(i)) or (bool(named) and named <= leaves(a))
            stale = stale + 1 if again else 0
        if not stale:
            return None
        halt = self.rerun_halt_at if self._fresh_write_after(chain[-1].position) >= 0 else self.halt_at
        said = (f"{entry.tool} failed {_times(len(chain))} with the same error, and this retry "
                "changes nothing the error is about")
        return Count(RETRY, stale + 1, halt, halt - 1 if len(chain) >= 2 and halt - 1 >= 2 else None, said)

    def _failure_run(self, same_tool: deque[Entry], entry: Entry) -> Count | None:
        """Rule 4: the tool's failures in a row with one signature, in agent steps."""
        if entry.tool in vocab.HARNESS_REFUSALS:
            return self._refusals(same_tool, entry)
        lo = max(self._success, self._floor(entry.tool))
        if self._turn - 1 > lo and self._person_gave(same_tool, entry):
            lo = self._turn - 1  # the person's value: their try starts the run anew
        head: Entry | None = None
        steps = 0
        step = -1
        spans_turn = False
        for e in reversed(same_tool):
            if e.position <= lo:
                break
            if e.raw is None:
                continue
            if not e.failed or e.waits:
                break
            if head is None:
                head = e
            elif self.failure_signature(e) != self.failure_signature(head):
                break
            if e.step != step:
                steps += 1
                step = e.step
            spans_turn = spans_turn or e.position < self._turn
        if not steps:
            return None
        halt = self.same_failure_at + 1 if spans_turn else self.same_failure_at
        return Count(FAILURES, steps + 1, halt, halt - 1,
                     f"{entry.tool} failed the same way {_times(steps)} in a row, whatever its arguments")

    def _refusals(self, refused: deque[Entry], entry: Entry) -> Count | None:
        """Rule 4 for replies the harness refused to run (a format error): nearly every reply
        refused is stuck, though a command or two slipped through between — the refusals among
        the last `same_failure_at` + 2 steps since the user spoke, whatever they quote."""
        span = self.same_failure_at + 2
        lo_step = entry.step - span
        head: Entry | None = None
        steps: set[int] = set()
        for e in reversed(refused):  # this tool's entries: the harness's refusals
            if e.step <= lo_step or e.position < self._turn:
                break
            if e.raw is None or not e.failed:
                continue
            if head is None:
                head = e
            elif self.failure_signature(e) != self.failure_signature(head):
                continue
            steps.add(e.step)
        if head is None:
            return None
        n = len(steps)
        # Warned only while refused in a row: a reply that ran just before is a recovery so far.
        warn = self.same_failure_at - 1 if head.step == entry.step - 1 else None
        return Count(FAILURES, n + 1, self.same_failure_at, warn,
                     f"the harness refused {n} of the last {span} replies the same way")

    def record_answer(self, answer: Any, is_error: bool = False, position: int | None = None) -> None:
        """Record the answer of the call at `position` (default: the call last checked).

        `answer`: the text, an `loopledger.events.Answer` (its digest is reused, its `is_error`
        counts too), or None (unknown: nothing is recorded). An answer for a call that left the
        window is ignored."""
        if answer is None:
            return
        if position is None:
            position = self._next - 1
        entries = self._entries
        if entries and entries[-1].position == position:
            entry = entries[-1]  # the common case: the answer of the call just checked
        else:
            entry = next((e for e in reversed(entries) if e.position == position), None)
            if entry is None:
                return
        self._answered = True
        if isinstance(answer, str):
            entry.text, entry.raw = answer, text_digest(answer)
        else:
            entry.text, entry.raw, is_error = answer.text, answer.digest, is_error or answer.is_error
        text = entry.text
        entry._norm = entry._sig = None
        failed = self.is_failure(text, is_error) and not found_nothing(text, last_program(entry.args))
        entry.failed = failed
        entry.waits = is_pending(text) or (failed and is_transient(text))
        # refused by the harness before it ran: a reply it could not parse, or Claude Code's
        # `<tool_use_error>` (a precondition: read before editing, a sibling call errored)
        entry.refused = entry.tool in vocab.HARNESS_REFUSALS or (failed and text.lstrip().startswith("<tool_use_error>"))
        entry.fresh = False
        if failed:
            entry.named = frozenset(v for v in leaves(entry.args) if v in text)
        else:
            entry.named = _NOTHING
            if position > self._success:
                self._success = position
            if entry.writes:
                entry.fresh = not any(e.key == entry.key and e.position < position
                                      for e in self._by_tool.get(entry.tool, ()))
        if position > self._answered_at.get(entry.tool, -1):
            self._answered_at[entry.tool] = position
        entry.echo = False
        if not entry.writes:  # a write's answer moving is the agent's own doing, and repeating it is no echo
            for e in reversed(self._by_tool.get(entry.tool, ())):
                if e.position < position and e.match == entry.match and e.raw is not None:
                    if e.raw == entry.raw or self.same_answer(e, entry):
                        entry.echo = True
                    elif position > self._moved and self._fresh_write_between(e.position, position) < 0:
                        self._moved = position  # the world moved, not the agent's own change
                        if len(self._polls) >= 4 * self.window:
                            self._polls = {k: v for k, v in self._polls.items() if v > position - self.window}
                        self._polls[entry.match] = position
                    break

    def user_said(self, text: str) -> None:
        """What the person said in the user turn that comes next (before `user_turn`)."""
        self._said = (text or "")[:SAID_HEAD]

    def _quotes_user(self, args: Any) -> bool:
        """Every argument value of the call (of 4+ characters) is one the person gave in their
        latest turn ("#12345 and #67890. Check again."): the person asked for this very call,
        whatever it answered before. A value they merely mention (their user id beside a booking
        of many values) does not make a call theirs."""
        said = self._said
        values = leaves(args)
        return bool(values) and all(
            v in said or (v[:1] in "#@" and len(v) > NAMED_MIN_LEN and v[1:] in said) for v in values)

    def _person_gave(self, same_tool: deque[Entry], entry: Entry) -> bool:
        """Since the latest user turn, this call or an attempt of its tool carries a value (of 4+
        characters) the person gave in that turn that the attempt before it did not ("then try
        gift_card_2"): the person's own try."""
        said = self._said
        if not said:
            return False
        newer = entry
        for e in reversed(same_tool):
            if e.raw is None:
                continue
            if any(v in said for v in leaves(newer.args) - leaves(e.args)):
                return True
            if e.position < self._turn:
                return False
            newer = e
        return False

    def user_turn(self) -> None:
        self._turn = self._next  # the first call after the person spoke
        if self.across_turns == "all":
            return
        if self.across_turns in ("errors", "answers"):
            # a transient failure (503, rate limit) says nothing of a retry after the user spoke;
            # `answers` keeps every other answer too (a repeat across the turn halts later)
            keep_all = self.across_turns == "answers"
            kept = [e for e in self._entries if e.raw is not None and not e.waits and (keep_all or e.failed)]
            self._entries.clear()
            self._entries.extend(kept)
        else:
            self._entries.clear()
        self._reindex()
        self.last = None

    def __deepcopy__(self, memo: dict[int, Any]) -> ProgressDetector:
        # Patterns are shared (immutable); entries are mutable (answers arrive later): copied, each
        # once, into both the window and the per-tool index. The index is trimmed lazily, so it may
        # still hold calls older than the window, which an answer's reading looks at (a write's
        # freshness): rebuilding it from the window instead made a replay resumed from a copy
        # differ from one that never stopped.
        new = copy.copy(self)
        copies: dict[int, Entry] = {}

        def copied(e: Entry) -> Entry:
            c = copies.get(id(e))
            if c is None:
                c = copies[id(e)] = e.copy()
            return c

        new._entries = deque((copied(e) for e in self._entries), maxlen=self.window)
        new._by_tool = {tool: deque(copied(e) for e in same) for tool, same in self._by_tool.items()}
        new._answered_at, new._polls = dict(self._answered_at), dict(self._polls)
        return new

    def state(self) -> dict[str, Any]:
        """Each tracked call, oldest first: tool, arguments digest and answer digest after the
        volatile parts are removed (None: not back yet; a trailing `!`: a failure, `~`: waiting)."""
        tracked = [{"tool": e.tool, "args": e.key[:8],
                    "answer": None if e.raw is None else
                    self._norm(e)[:8] + ("!" if e.failed else "") + ("~" if e.waits else "")}
                   for e in self._entries]
        last = self.last
        return {"calls": tracked, "count": last.count if last else 0, "rule": last.rule if last else "",
                "window": self.window, "halt_at": self.halt_at, "ok_halt_at": self.ok_halt_at,
                "rerun_halt_at": self.rerun_halt_at, "same_failure_at": self.same_failure_at,
                "wait_limit": self.wait_limit, "wait_halt_at": self.wait_halt_at,
                "across_turns": self.across_turns}


# -- the Policy adapter and its registration ---------------------------------------------------


def _detector(p: Mapping[str, Any]) -> ProgressDetector:
    return ProgressDetector(p["window"], p["halt_at"], p["ok_halt_at"], p["across_turns"],
                            p["volatile"], p["errors"],
                            p["same_failure_at"], p["rerun_halt_at"], p["wait_limit"], p["wait_halt_at"])


class ProgressPolicy(PerCallAnswers):
    def __init__(self, spec: PolicySpec) -> None:
        super().__init__(spec)
        self.detector = _detector(spec.params)
        self._at: Any = None

    def user_said(self, text: str) -> None:
        self.detector.user_said(text)

    def check(self, batch: Batch) -> list[Check]:
        self._at = batch.ts  # a wait is judged by the transcript's clock
        return super().check(batch)

    def _judge(self, i: int, call: Any) -> tuple[Check, int]:
        args, canonical, digest = action_key(call)  # a shell call's `description` is not its action
        v = self.detector.check(call.name, args, canonical, digest, at=self._at)
        return Check(i, v.action, v.count, None, v.threshold, v.reason), v.position


DETECTOR = Detector(
    "progress",
    (
        Param("window", INT, DEFAULT_WINDOW, 2, "calls remembered"),
        Param("halt_at", INT, DEFAULT_HALT_AT, 3,
              "halt at this attempt after the same failure, or the same answer with nothing between "
              "that could change it"),
        Param("ok_halt_at", INT, DEFAULT_OK_HALT_AT, 3,
              "halt at this identical call after the same successful answer, other calls between"),
        Param("rerun_halt_at", INT, DEFAULT_RERUN_HALT_AT, 3,
              "halt at this attempt after the same failure when new changes were made between"),
        Param("same_failure_at", INT, DEFAULT_SAME_FAILURE_AT, 3,
              "halt at this step of one tool failing the same way in a row, whatever the arguments "
              "(no success between; one step later across a user turn)"),
        Param("wait_limit", FLOAT, DEFAULT_WAIT_LIMIT, 1,
              "seconds a wait (a sleeping poll, a pending or transient answer) may stay unchanged"),
        Param("wait_halt_at", INT, DEFAULT_WAIT_HALT_AT, 3,
              "halt a poll at this unchanged answer when the polls ask for no wait of their own "
              "(no sleep, --timeout or yield_time_ms between)"),
        Param("across_turns", TEXT, DEFAULT_ACROSS_TURNS, 0,
              "what a user turn keeps: none | errors | answers (a repeat across it halts one later; "
              "a change asked again is new) | all"),
        Param("volatile", NAMES, DEFAULT_VOLATILE_NAMES, 0,
              "removed before comparing: " + ", ".join(VOLATILE_PATTERNS) + " or re:<expression>"),
        Param("errors", NAMES, DEFAULT_ERROR_NAMES, 0,
              "what else makes an answer a failure: " + ", ".join(ERROR_PATTERNS) + " or re:<expression>"),
    ),
    ProgressPolicy,
    validate=_detector,  # builds one: every rule, every pattern checked
    summary="a repeat is a loop only when nothing changed (answers read; waits timed; failures retried)",
    retired=RETIRED,
)
