"""What an answer says, as our guards read it: failed or not, still waiting or done, and which of
its parts change on every call without meaning anything (pure: regular expressions, no state).

One place for these readings, so every guard of ours that reads answers (progress; cycle's error
texts; the "why" sentences) reads a test run's "2 failed" as a failure alike. Peers' ports keep
their upstream's own reading (an OpenHands agent error is not a failing command).

- **Failure**: the reader's flag (`Answer.is_error`), or the answer's own words where formats
  keep none (OpenAI chat, SWE-agent, mini-swe-agent) or an export lost it (ATIF, OTLP): an
  opening `Error: …`, a non-zero `Exit code`, a traceback, `command not found`, `No such file
  or directory`, a checker's `Wrong …`, and a test runner's summary (`2 failed`, `FAILED`,
  `ERROR collecting`, `test result: FAILED`), at the answer's start or its end where runners put
  it. A search that found nothing is not a failure: it is an answer (`No matches found`, a
  `grep` whose only output is its exit status 1).
- **Transient**: a failure that says it will pass by itself (a 5xx, 429, a rate limit, a refused
  or timed-out connection).
- **Pending**: an answer that says the thing asked about is not done yet (`"status":
  "in_progress"`, `queued`, `pending`, `no response`, `not ready` near the start).
- **Volatile**: timestamps, clock readings, durations, UUIDs, long hex ids, temp paths, a
  shell's line counter — removed before two answers are compared.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any

from loopledger.detectors.errors import ConfigError

HEAD = 200  # failure words open an answer: the verdict comes first
TAIL = 300  # ... or close it: a test runner's summary line
STATUS_HEAD = 300  # a pending status is reported near the start

# What changes on every call without meaning progress, by name (the `volatile` parameter takes
# these names, or `re:<expression>`). Applied in this order.
VOLATILE_PATTERNS: dict[str, str] = {
    # 2024-05-13T15:29:59.374Z, 2024-05-13 15:29:59+02:00
    "timestamp": r"\b\d{4}-\d{2}-\d{2}[T ]\d{2}:\d{2}(?::\d{2}(?:[.,]\d+)?)?(?:Z|[+-]\d{2}:?\d{2})?",
    # 15:29:59, 15:29:59.374 (a clock reading; hh:mm alone is too often data, e.g. a departure)
    "clock": r"\b\d{1,2}:\d{2}:\d{2}(?:[.,]\d+)?\b",
    # 0.3 seconds, 12ms, 1.5s, 250 µs, 2 min, 0m12.09s, 1h2m3s
    "duration": r"\b(?:\d+h)?(?:\d+m)?\d+(?:\.\d+)?\s?(?:ns|µs|us|ms|s|secs?|seconds?|mins?|minutes?)\b",
    "uuid": r"\b[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}\b",
    # a commit sha, a request id, a memory address: 12+ hex digits, letters and digits among them
    "hex_id": r"\b(?:0x)?(?=[0-9a-fA-F]*[a-fA-F])(?=[0-9a-fA-F]*\d)[0-9a-fA-F]{12,}\b",
    # `/bin/bash: line 334:` — an interactive shell's command counter, one more on every call
    "shell_line": r"\b(?:ba|da|z|k)?sh: line \d+:",
    # `[rerun: b25]` — the handle Claude Code gives each shell call's output, one more every call
    "rerun_handle": r"\[rerun: \w+\]",
    # /tmp/pytest-of-me/pytest-3/x, /var/folders/…/T/tmpab12, C:\Users\me\AppData\Local\Temp\x
    # (a path's start: `/srv/job/tmp/step-1200` holds `/tmp/` but is not a temp path)
    "temp_path": r"(?<![\w.~/\\-])(?:/private)?/(?:tmp|var/folders|var/tmp)/[^\s'\"`<>:;,)\]}]*"
                 r"|(?<![\w.~/\\-])[A-Za-z]:\\Users\\[^\\\s]+\\AppData\\Local\\Temp\\[^\s'\"`<>;,)\]}]*",
}
DEFAULT_VOLATILE_NAMES: tuple[str, ...] = tuple(VOLATILE_PATTERNS)

# What makes an answer the reader did not flag a failure, by name (the `errors` parameter). Each
# looks at the answer's opening (HEAD characters); `test_summary` at its end (TAIL) as well.
ERROR_PATTERNS: dict[str, str] = {
    "error_prefix": r"\A\s*error\b\s*:",  # tau-bench "Error: …", OpenHands editor "ERROR:\n…"
    "nonzero_returncode": r"\A\s*<returncode>\s*-?[1-9]\d*\s*</returncode>",  # mini-swe-agent
    # Claude Code's Bash "Exit code 1\n…", Codex's plain-text shells "Exit code: 1\n…"
    "exit_code": r"\A\s*exit (?:code|status)\s*:?\s*-?[1-9]\d*\b",
    # a Python tool or script that died (SWE-agent and OpenHands print it as the observation)
    "traceback": r"\A\s*Traceback \(most recent call last\):",
    # bash "bash: ponyc: command not found", zsh "(eval):1: command not found: tree"
    "command_not_found": r"\A[^\n]*\bcommand not found\b",
    # "ls: cannot access 'x': No such file or directory", "cd: fastxml/: No such file or directory"
    "no_such_file": r"\A[^\n]{0,120}\bno such file or directory\b",
    # a checker's verdict on an attempt: "Wrong flag!" (a CTF submit), "Incorrect answer"
    "rejected": r"\A\s*(?:wrong|incorrect|invalid)\b",
    # a test runner's summary: pytest "2 failed, 3 passed", "FAILED tests/x.py::t", "ERROR
    # collecting", cargo "test result: FAILED", go "--- FAIL:"/"FAIL\tpkg", jest "Tests: 1 failed",
    # mocha "2 failing"
    "test_summary": r"\b[1-9]\d* (?:failed|failing)\b|^FAILED\b|^ERROR collecting\b|\btest result: FAILED\b"
                    r"|^--- FAIL\b|^FAIL\t",
    # a verdict in up to three words: "Command failed: npm test", "Pre-commit validation failed:"
    # (offered, not a default: "log:12: upload failed:" in a grep hit reads the same)
    "failed_prefix": r"\A\s*(?:[\w-]+ ){0,3}failed\s*:",
}
TAIL_ERRORS = frozenset({"test_summary"})  # also read at the answer's end
DEFAULT_ERROR_NAMES: tuple[str, ...] = tuple(n for n in ERROR_PATTERNS if n != "failed_prefix")

# A failure that says it will pass by itself: retrying it is waiting, not repeating.
TRANSIENT = re.compile(r"\b(?:50[234]|429)\b|service unavailable|temporarily unavailable|rate.?limit|"
                       r"try again later|too many requests|connection refused",
                       re.IGNORECASE)
# ... and the words, lower-cased, one of which every match of it holds (see _may_match).
TRANSIENT_NEEDLES = ("502", "503", "504", "429", "unavailable", "limit", "try again later", "too many requests",
                     "connection refused")
# The thing asked about is not done yet: a status field, or words that say so, near the start.
PENDING = re.compile(
    r"\bstatus\W{0,4}(?:running|in[_ ]progress|queued|pending|waiting|starting|requested|scheduled|"
    r"provisioning|creating|initializing|deploying|building)\b"
    r"|\b(?:in[_ ]progress|queued|pending|not (?:yet )?ready|no response|rejecting connections|"
    r"still (?:running|waiting|building|starting)|waiting for|containercreating|"
    # Codex CLI's answer to a command that has not exited yet (exec_command, write_stdin)
    r"process running with session id)\b", re.IGNORECASE)
PENDING_NEEDLES = ("status", "progress", "queued", "pending", "ready", "response", "rejecting", "still", "waiting",
                   "containercreating", "process running")
# The only characters that re.IGNORECASE matches to an ASCII letter (İ ı ſ K: i, i, s, k) — and
# the only ones whose str.lower() holds one.
_FOLDS_TO_ASCII = re.compile("[\u0130\u0131\u017f\u212a]")


def _may_match(text: str, needles: Sequence[str]) -> bool:
    """False only when no case-insensitive match of a pattern whose every match holds one of
    `needles` (ASCII, lower-case) can be in `text`: one substring test per needle instead of a
    regular-expression attempt at every position. (Loops, not any(): this runs per answer.)"""
    low = text.lower()
    for n in needles:
        if n in low:
            return True
    return _FOLDS_TO_ASCII.search(text) is not None

# A search program finding nothing exits 1 with no output: that is an answer, not a failure.
SEARCH_PROGRAMS = frozenset({"grep", "egrep", "fgrep", "rg", "ag", "ack", "git"})
_EXIT_ONLY = re.compile(r"\A\s*(?:(?:error:\s*)?exit (?:code|status)\s*:?\s*1"
                        r"|<returncode>\s*1\s*</returncode>\s*(?:<output>\s*</output>)?)\s*\Z", re.IGNORECASE)
_NO_MATCHES = re.compile(r"\A\s*no (?:matches|results|files|file|entries) (?:were )?found\b", re.IGNORECASE)


def compile_one(pattern: str, flags: int = 0) -> re.Pattern[str]:
    """re.compile, with the flags the compiled pattern reports (re.UNICODE, implied for text) named:
    a pickled pattern is compiled again from (pattern, its .flags) when a snapshot is loaded, and
    under the same flags that is a hit in re's cache instead of a second compile per hook process."""
    try:
        return re.compile(pattern, flags | re.UNICODE)
    except ValueError:  # an inline (?a) or (?L): the text's own choice, compiled as given
        return re.compile(pattern, flags)


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
            compiled = compile_one(p, flags)
        except re.error as e:
            raise ConfigError(field, f"{field} holds valid regular expressions",
                              f"{field}: {p!r} is not a valid regular expression ({e})") from None
        if compiled.search(""):
            # A pattern that matches nothing at all would "remove" the empty string everywhere.
            raise ConfigError(field, f"{field} patterns match something",
                              f"{field}: {p!r} matches the empty string")
        out.append(compiled)
    return tuple(out)


def resolve(field: str, items: Sequence[str], table: Mapping[str, str]) -> tuple[str, ...]:
    """Pattern names and `re:<expression>` items to regular expressions (ConfigError names
    `field` for an unknown name)."""
    out = []
    for item in items:
        if item.startswith("re:"):
            out.append(item[3:])
        elif item in table:
            out.append(table[item])
        else:
            raise ConfigError(field, f"{field} items are pattern names or re:<expression>",
                              f"{field}: unknown pattern {item!r}; known: {', '.join(table)}, "
                              "or re:<regular expression>")
    return tuple(out)


class Normalizer:
    """Replaces every match of each pattern, in order, by one placeholder character (one pass
    per pattern: measured faster than one alternation of them all)."""

    __slots__ = ("patterns",)

    def __init__(self, patterns: tuple[re.Pattern[str], ...]) -> None:
        self.patterns = patterns

    def __call__(self, text: str) -> str:
        for p in self.patterns:
            text = p.sub("\x00", text)
        return text


def _alternation(patterns: Sequence[str]) -> re.Pattern[str] | None:
    if not patterns:
        return None
    return compile_one("|".join(f"(?:{p})" for p in patterns), re.IGNORECASE | re.MULTILINE)


# The named patterns that can only match at the answer's very start (each opens with \A and has
# no alternative outside it): tried once, at position 0, instead of at every position.
OPENING_ERRORS = frozenset(n for n in ERROR_PATTERNS if n != "test_summary")
# Words, lower-cased, that every match of a named pattern searched anywhere contains: a text
# holding none of them cannot match, and a substring test is far cheaper than the search.
NEEDLES: dict[str, tuple[str, ...]] = {"test_summary": ("fail", "error collecting")}


class _Search:
    """A search for any of some patterns, skipped when the text holds none of their needles
    (`needles` None: a pattern of the person's own, always searched)."""

    __slots__ = ("pattern", "needles")

    def __init__(self, patterns: Sequence[str], needles: tuple[str, ...] | None) -> None:
        self.pattern = _alternation(patterns)
        self.needles = needles

    def __call__(self, text: str) -> bool:
        if self.pattern is None or (self.needles is not None and not _may_match(text, self.needles)):
            return False
        return self.pattern.search(text) is not None


def _search(names: Sequence[str], patterns: Sequence[str]) -> _Search:
    needles: tuple[str, ...] | None = ()
    for name in names:
        if name in NEEDLES and needles is not None:
            needles += NEEDLES[name]
        else:
            needles = None
    return _Search(patterns, needles)


class FailureReader:
    """Whether an answer is a failure, by the reader's flag or the `errors` patterns (names of
    ERROR_PATTERNS or `re:<expression>`), case-insensitive: patterns named in TAIL_ERRORS (and
    none else) are also read at the end. The same reading as one search of all of them over the
    answer's head, done cheaper: the named opening patterns are matched at position 0 only, the
    rest searched only when the text holds a word they need."""

    __slots__ = ("opening", "anywhere", "tail", "items")

    def __init__(self, items: Sequence[str] = DEFAULT_ERROR_NAMES) -> None:
        self.items = tuple(items)
        patterns = resolve("errors", self.items, ERROR_PATTERNS)
        # each checked on its own first, so a bad one is named
        compile_patterns("errors", patterns, re.IGNORECASE | re.MULTILINE)
        opening = [p for n, p in zip(self.items, patterns, strict=True) if n in OPENING_ERRORS]
        rest = [(n, p) for n, p in zip(self.items, patterns, strict=True) if n not in OPENING_ERRORS]
        self.opening = _alternation(opening)
        self.anywhere = _search([n for n, _ in rest], [p for _, p in rest])
        tail = [n for n in self.items if n in TAIL_ERRORS]
        self.tail = _search(tail, [ERROR_PATTERNS[n] for n in tail])

    def __call__(self, text: str, is_error: bool = False) -> bool:
        if is_error:
            return True
        head = text[:HEAD]
        if self.opening is not None and self.opening.match(head):
            return True
        if self.anywhere(head):
            return True
        return len(text) > HEAD and self.tail(text[-TAIL:])


DEFAULT_FAILURES = FailureReader()


def is_failure(text: str, is_error: bool = False) -> bool:
    """The default reading: the flag, or the default `errors` patterns."""
    return DEFAULT_FAILURES(text, is_error)


def is_transient(text: str) -> bool:
    head = text[:HEAD]
    return _may_match(head, TRANSIENT_NEEDLES) and TRANSIENT.search(head) is not None


def is_pending(text: str) -> bool:
    head = text[:STATUS_HEAD]
    return _may_match(head, PENDING_NEEDLES) and PENDING.search(head) is not None


def found_nothing(text: str, program: str | None) -> bool:
    """A search that found nothing: "No matches found" (a search tool's answer), or a search
    program's (grep, rg, git grep …) exit status 1 with no other output."""
    if _NO_MATCHES.match(text):
        return True
    return program in SEARCH_PROGRAMS and _EXIT_ONLY.match(text) is not None
