"""Our progress detector: a repeat is a loop only when nothing changed.

Per call, before it executes, over the last `window` calls (not only back to back). Every call
leaves an entry: its tool, its arguments' digest and, once it comes back, its answer's digest
taken after the volatile parts are removed (timestamps, durations, UUIDs, long hex ids, temp
paths: `volatile`, a list of regular expressions) and whether the answer is a failure.

- Stale repeat: the earlier calls in the window with this call's tool and canonical arguments,
  newest first, whose answers are known; `r` = how many of them end on the same answer (a
  changed answer is progress: the run, and so the count, restarts at it). count = r + 1.
- Stale retry: the earlier calls in the window of this call's tool, newest first, whose answers
  are known; `r` = how many of them in a row failed with the same (normalized) error, whatever
  their arguments. A success of the tool is progress and ends the run. count = r + 1.
- A failure is an answer the reader flagged (`Answer.is_error`) or one whose text matches one of
  `errors` (regular expressions searched in its first 200 characters; by default an answer that
  opens with `Error:` / `ERROR:`, or mini-swe-agent's `<returncode>N</returncode>` with N ≠ 0).
- An unknown answer (never came back) neither breaks a run nor joins it.
- The verdict takes the larger of the two counts: halt at count ≥ halt_at, warn at ≥ warn_at.
  halt_at ≥ 3: a halt always rests on two answers that did not change.
- A user turn forgets what `across_turns` does not keep: `none` forgets everything, `errors`
  keeps the failed calls (an agent retrying a failing write after its user says "try again"),
  `all` keeps everything.

The history holds `window` entries, so a verdict never depends on anything older.
"""

from __future__ import annotations

import copy
import re
from collections import deque
from collections.abc import Sequence
from typing import Any, NamedTuple

import xxhash

from loopledger.detectors.canonical import canonical_bytes
from loopledger.detectors.errors import ConfigError

ALLOW, WARN, HALT = "allow", "warn", "halt"
REPEAT, RETRY = "repeat", "retry"
ACROSS_TURNS = ("none", "errors", "all")

DEFAULT_WINDOW = 20
DEFAULT_WARN_AT = 2
DEFAULT_HALT_AT = 3
DEFAULT_OK_HALT_AT = 4
DEFAULT_ACROSS_TURNS = "errors"
MAX_WINDOW = 10_000
ERROR_HEAD = 200
NAMED_MIN_LEN = 4  # shorter values (ids like 1, words like "yes") are named by chance  # error patterns look at the opening of an answer, where tools put the verdict

# What changes on every call without meaning progress. Each is replaced by a placeholder before
# answers are compared; order matters (a timestamp before the clock time inside it).
VOLATILE_PATTERNS: dict[str, str] = {
    # 2024-05-13T15:29:59.374Z, 2024-05-13 15:29:59+02:00
    "timestamp": r"\b\d{4}-\d{2}-\d{2}[T ]\d{2}:\d{2}(?::\d{2}(?:[.,]\d+)?)?(?:Z|[+-]\d{2}:?\d{2})?",
    # 15:29:59, 15:29:59.374 (a clock reading; hh:mm alone is too often data, e.g. a departure)
    "clock": r"\b\d{1,2}:\d{2}:\d{2}(?:[.,]\d+)?\b",
    # 0.3 seconds, 12ms, 1.5s, 250 µs, 2 min, 0m12.09s, 1h2m3s
    "duration": r"\b(?:\d+h)?(?:\d+m)?\d+(?:\.\d+)?\s?(?:ns|µs|us|ms|s|secs?|seconds?|mins?|minutes?)\b",
    "uuid": r"\b[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}\b",
    # a commit sha, a request id, a memory address: 12+ hex digits with letters and digits in them
    "hex_id": r"\b(?:0x)?(?=[0-9a-fA-F]*[a-fA-F])(?=[0-9a-fA-F]*\d)[0-9a-fA-F]{12,}\b",
    # /tmp/pytest-of-me/pytest-3/x, /var/folders/…/T/tmpab12, C:\Users\me\AppData\Local\Temp\x
    "temp_path": r"(?:/private)?/(?:tmp|var/folders|var/tmp)/[^\s'\"`<>:;,)\]}]*"
                 r"|[A-Za-z]:\\Users\\[^\\\s]+\\AppData\\Local\\Temp\\[^\s'\"`<>;,)\]}]*",
}
DEFAULT_VOLATILE: tuple[str, ...] = tuple(VOLATILE_PATTERNS.values())

ERROR_PATTERNS: dict[str, str] = {
    "error_prefix": r"\A\s*error\b\s*:",  # tau-bench "Error: …", OpenHands editor "ERROR:\n…"
    "nonzero_returncode": r"\A\s*<returncode>\s*-?[1-9]\d*\s*</returncode>",  # mini-swe-agent
}
DEFAULT_ERRORS: tuple[str, ...] = tuple(ERROR_PATTERNS.values())

_hash = xxhash.xxh3_128_hexdigest


class ProgressVerdict(NamedTuple):
    action: str  # allow | warn | halt
    count: int  # the attempt this call would be without progress (the rule that halts soonest)
    rule: str  # "repeat" | "retry" | "" (nothing tried before)
    threshold: int  # the count at which that rule halts (halt_at, or ok_halt_at for a repeat
    #                 of a successful answer)
    position: int  # this call's position, for record_answer


class Entry:
    """One call in the window. `answer`: the normalized answer's digest (None: unknown)."""

    __slots__ = ("position", "tool", "key", "args", "answer", "failed", "named")

    def __init__(self, position: int, tool: str, key: str, args: Any) -> None:
        self.position = position
        self.tool = tool
        self.key = key  # digest of the normalized canonical arguments
        self.args = args  # the call's arguments (shared, never changed): read when it fails
        self.answer: str | None = None
        self.failed = False
        self.named: frozenset[str] = frozenset()  # argument values its error message names

    def copy(self) -> Entry:
        new = Entry(self.position, self.tool, self.key, self.args)
        new.answer, new.failed, new.named = self.answer, self.failed, self.named
        return new


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


def compile_patterns(field: str, patterns: Any, flags: int = 0) -> tuple[re.Pattern[str], ...]:
    """Compile a list of regular expressions; a bad one is a ConfigError naming `field`."""
    if isinstance(patterns, str) or not isinstance(patterns, Sequence):
        raise ConfigError(field, f"{field} is a list of patterns",
                          f"{field}: must be a list of regular expressions, got {patterns!r}")
    out = []
    for p in patterns:
        if not isinstance(p, str) or not p:
            raise ConfigError(field, f"{field} holds non-empty patterns",
                              f"{field}: every pattern must be a non-empty string, got {p!r}")
        try:
            compiled = re.compile(p, flags)
        except re.error as e:
            raise ConfigError(field, f"{field} holds valid regular expressions",
                              f"{field}: {p!r} is not a valid regular expression ({e})") from None
        if compiled.search(""):
            # A pattern that matches nothing at all would "remove" the empty string everywhere.
            raise ConfigError(field, f"{field} patterns match something",
                              f"{field}: {p!r} matches the empty string")
        out.append(compiled)
    return tuple(out)


def validate(window: Any, warn_at: Any, halt_at: Any, ok_halt_at: Any, across_turns: Any) -> None:
    for name, value in (("window", window), ("warn_at", warn_at), ("halt_at", halt_at),
                        ("ok_halt_at", ok_halt_at)):
        if not isinstance(value, int) or isinstance(value, bool):
            raise ConfigError(name, f"{name} is an integer", f"{name}: must be an integer, got {value!r}")
    if window < 2:
        raise ConfigError("window", "window >= 2", f"window: must be >= 2, got {window}")
    if window > MAX_WINDOW:
        raise ConfigError("window", f"window <= {MAX_WINDOW}", f"window: must be <= {MAX_WINDOW}, got {window}")
    if warn_at < 2:
        raise ConfigError("warn_at", "warn_at >= 2", f"warn_at: must be >= 2, got {warn_at}")
    for name, value in (("halt_at", halt_at), ("ok_halt_at", ok_halt_at)):
        if value < 3:
            # Two equal answers are the least evidence that nothing changes.
            raise ConfigError(name, f"{name} >= 3", f"{name}: must be >= 3, got {value}")
        if value < warn_at:
            raise ConfigError(name, f"{name} >= warn_at", f"{name}: must be >= warn_at ({warn_at}), got {value}")
    if across_turns not in ACROSS_TURNS:
        raise ConfigError("across_turns", f"across_turns is one of {'|'.join(ACROSS_TURNS)}",
                          f"across_turns: must be one of {', '.join(ACROSS_TURNS)}, got {across_turns!r}")


class Normalizer:
    """Removes the volatile parts of a text in one pass (one alternation of all the patterns)."""

    __slots__ = ("patterns", "_combined")

    def __init__(self, patterns: tuple[re.Pattern[str], ...]) -> None:
        self.patterns = patterns
        self._combined = (re.compile("|".join(f"(?:{p.pattern})" for p in patterns)) if patterns else None)

    def __call__(self, text: str) -> str:
        if self._combined is None:
            return text
        return self._combined.sub("\x00", text)


class ProgressDetector:
    """Stale repeats and stale retries over the last `window` calls (see the module docstring)."""

    __slots__ = ("window", "warn_at", "halt_at", "ok_halt_at", "across_turns", "volatile", "errors",
                 "normalize", "_entries", "_next", "last")

    def __init__(self, window: int = DEFAULT_WINDOW, warn_at: int = DEFAULT_WARN_AT,
                 halt_at: int = DEFAULT_HALT_AT, ok_halt_at: int = DEFAULT_OK_HALT_AT,
                 across_turns: str = DEFAULT_ACROSS_TURNS, volatile: Sequence[str] = DEFAULT_VOLATILE,
                 errors: Sequence[str] = DEFAULT_ERRORS) -> None:
        validate(window, warn_at, halt_at, ok_halt_at, across_turns)
        self.window = window
        self.warn_at = warn_at
        self.halt_at = halt_at
        self.ok_halt_at = ok_halt_at
        self.across_turns = across_turns
        self.volatile = compile_patterns("volatile", volatile)
        self.errors = compile_patterns("errors", errors, re.IGNORECASE)
        self.normalize = Normalizer(self.volatile)
        self._entries: deque[Entry] = deque(maxlen=window)
        self._next = 0
        self.last: ProgressVerdict | None = None

    # -- answers and arguments -------------------------------------------------------------

    def is_failure(self, text: str, is_error: bool = False) -> bool:
        if is_error:
            return True
        head = text[:ERROR_HEAD]
        return any(p.search(head) for p in self.errors)

    def digest(self, text: str) -> str:
        """Digest of the text with its volatile parts removed."""
        return _hash(self.normalize(text).encode("utf-8", "surrogatepass"))

    def args_key(self, args: Any, canonical: bytes | None = None) -> str:
        if canonical is None:
            canonical = canonical_bytes(args)
        return self.digest(canonical.decode("utf-8", "surrogatepass"))

    # -- the check -------------------------------------------------------------------------

    def check(self, name: str, args: Any, canonical: bytes | None = None) -> ProgressVerdict:
        key = self.args_key(args, canonical)
        action, count, rule, threshold = self._score(name, key, args)
        position = self._next
        self._next += 1
        self._entries.append(Entry(position, name, key, args))
        self.last = ProgressVerdict(action, count, rule, threshold, position)
        return self.last

    def _score(self, name: str, key: str, args: Any = None) -> tuple[str, int, str, int]:
        """(action, count, rule, threshold) for a call with this tool, arguments key and
        arguments, given the window."""
        repeat = 0  # earlier calls with this key that end on the same answer
        same: Entry | None = None
        chain: list[Entry] = []  # the tool's trailing run of same-error failures, newest first
        repeat_open = retry_open = True
        for e in reversed(self._entries):
            if e.tool != name or e.answer is None:
                continue  # an unknown answer neither breaks a run nor joins it
            if retry_open:
                if e.failed and (not chain or e.answer == chain[0].answer):
                    chain.append(e)
                else:
                    retry_open = False
            if repeat_open and e.key == key:
                if same is None or e.answer == same.answer:
                    same = e
                    repeat += 1
                else:
                    repeat_open = False
            if not (repeat_open or retry_open):
                break
        retry = self._retries(chain, key, args) + 1 if chain else 1
        repeat_count = repeat + 1
        repeat_halt = self.halt_at if same is not None and same.failed else self.ok_halt_at
        if repeat_count >= repeat_halt or retry >= self.halt_at:
            action = HALT
        elif max(repeat_count, retry) >= self.warn_at:
            action = WARN
        else:
            action = ALLOW
        if repeat == 0 and retry == 1:
            return action, 1, "", repeat_halt
        # Report the rule closer to its halt.
        if repeat_halt - repeat_count <= self.halt_at - retry:
            return action, repeat_count, REPEAT, repeat_halt
        return action, retry, RETRY, self.halt_at

    @staticmethod
    def _retries(chain: list[Entry], key: str, args: Any) -> int:
        """How many attempts in a row, ending with this call, retried the chain's error without
        addressing it: each went back to arguments already tried with that error, or kept every
        argument value the error message names. Trying something new is progress: it ends the
        run (so a call with new arguments counts 0)."""
        attempts = [(e.key, e.args) for e in reversed(chain)] + [(key, args)]
        named = chain[0].named  # every entry of the chain has the same (normalized) error
        run = 0
        for i in range(1, len(attempts)):
            k, a = attempts[i]
            stale = any(k == attempts[j][0] for j in range(i)) or (
                bool(named) and named <= leaves(a))
            run = run + 1 if stale else 0
        return run

    def record_answer(self, answer: Any, is_error: bool = False, position: int | None = None) -> None:
        """Record the answer of the call at `position` (default: the call last checked).

        `answer`: the text, an `loopledger.events.Answer` (its `is_error` counts too), or None
        (unknown: nothing is recorded). An answer for a call that left the window is ignored."""
        if answer is None:
            return
        if position is None:
            position = self._next - 1
        entries = self._entries
        i = len(entries) - (self._next - position)
        if position < 0 or not 0 <= i < len(entries) or entries[i].position != position:
            return
        if isinstance(answer, str):
            text = answer
        else:
            text, is_error = answer.text, is_error or answer.is_error
        entry = entries[i]
        entry.failed = self.is_failure(text, is_error)
        entry.answer = self.digest(text) + ("!" if entry.failed else "")
        if entry.failed:
            entry.named = frozenset(v for v in leaves(entry.args) if v in text)

    def user_turn(self) -> None:
        if self.across_turns == "all":
            return
        if self.across_turns == "errors":
            kept = [e for e in self._entries if e.failed]
            self._entries.clear()
            self._entries.extend(kept)
        else:
            self._entries.clear()
        self.last = None

    def __deepcopy__(self, memo: dict[int, Any]) -> ProgressDetector:
        # Patterns are shared (immutable); entries are mutable (answers arrive later): copied.
        new = copy.copy(self)
        new._entries = deque((e.copy() for e in self._entries), maxlen=self.window)
        return new

    def state(self) -> dict[str, Any]:
        """Each tracked call, oldest first: tool, arguments digest, answer digest (None: not
        back yet; a trailing `!`: a failure) and `stale`, the count a call with the same tool and
        arguments would get now."""
        tracked = [{"tool": e.tool, "args": e.key[:8],
                    "answer": None if e.answer is None else e.answer[:8] + ("!" if e.failed else ""),
                    "stale": self._score(e.tool, e.key, e.args)[1]}
                   for e in self._entries]
        last = self.last
        return {"calls": tracked, "count": last.count if last else 0, "rule": last.rule if last else "",
                "window": self.window, "warn_at": self.warn_at, "halt_at": self.halt_at,
                "ok_halt_at": self.ok_halt_at, "across_turns": self.across_turns}


# -- the Policy adapter ----------------------------------------------------------------------

from loopledger import vocab  # noqa: E402
from loopledger.detectors.canonical import call_key  # noqa: E402
from loopledger.detectors.policy import Check, Policy, Result  # noqa: E402
from loopledger.events import Answer, Batch  # noqa: E402


class ProgressPolicy(Policy):
    reads_answers = True

    def __init__(self, spec: Any) -> None:
        super().__init__(spec)
        p = spec.params
        self.detector = ProgressDetector(p["window"], p["warn_at"], p["halt_at"], p["ok_halt_at"],
                                         p["across_turns"], p.get("volatile", DEFAULT_VOLATILE),
                                         p.get("errors", DEFAULT_ERRORS))
        self._positions: tuple[Batch, list[int]] | None = None

    def user_turn(self) -> None:
        self.detector.user_turn()
        self._positions = None

    def check(self, batch: Batch) -> list[Check]:
        out = []
        positions: list[int] = []
        d = self.detector
        for i, call in enumerate(batch.calls):
            v = d.check(call.name, call.args, call_key(call)[0])
            positions.append(v.position)
            reason = ""
            if v.action != vocab.ALLOW:
                reason = (f"{call.name}: the same answer {v.count - 1} times" if v.rule == REPEAT
                          else f"{call.name}: the same error again on arguments already tried "
                               f"({v.count - 1} retries)")
            out.append(Check(i, v.action, v.count, None, v.threshold, reason))
            if v.action == vocab.HALT:
                break
        self._positions = (batch, positions)
        return out

    def answers(self, batch: Batch, answers: Sequence[Answer | None]) -> list[Result]:
        if self._positions is None or self._positions[0] is not batch:
            return []
        for i, position in enumerate(self._positions[1]):
            self.detector.record_answer(answers[i], position=position)
        return []

    def state(self) -> dict[str, Any]:
        return self.detector.state()
