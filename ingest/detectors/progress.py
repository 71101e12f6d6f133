"""Our progress detector: a repeat is a loop only when nothing changed.

Judged per call, before it executes, over the last `window` calls (not only back to back). Every
call leaves an entry: its tool, its canonical arguments' digest and, once it comes back, its
answer and whether the answer is a failure. Answers are compared after their volatile parts are
removed (`volatile`: timestamps, clock readings, durations, UUIDs, long hex ids, temp paths —
regular expressions, each match replaced by one placeholder character); answers with equal
texts are equal without that work, so it is paid only when a repeat's answer text changed.

1. Stale repeat. The earlier entries with this call's tool and arguments key whose answers are
   known, newest first: `r` = how many end on the same answer (a changed answer is progress: the
   run, and so the count, restarts at it). count = r + 1. It halts at count >= halt_at when that
   answer is a failure, at count >= ok_halt_at when it is a success (a success repeated after
   other calls is often a check after an edit; a failure repeated is not) — except a read of the
   workspace (`reads_only`: an editor's `command: view`, a shell pipeline of `cat`/`grep`/
   `sed -n`/`git diff`…) when it and every call since the oldest of its equal answers only read:
   nothing could have changed what it reads, so it halts at halt_at like a failure.
2. Stale retry. The tool's trailing run of failures with the same error (its earlier entries
   with known answers, newest first, while each failed with the error of the newest), oldest
   first, then this call: an attempt is a stale retry when it goes back to arguments already
   tried in the run, or keeps every argument value the error names (a string or number of 4+
   characters in the arguments that the error text contains: "flight HAT030 not available").
   Trying something new is progress: count = 1 + the stale retries in a row ending with this
   call (so a call with new arguments that keep nothing the error named counts 1). It halts at
   count >= halt_at.
3. A failure is an answer the reader flagged (`Answer.is_error`) or whose first 200 characters
   match one of `errors` (case-insensitive; by default `Error: …` / `ERROR:` at the start, as
   tau-bench and the OpenHands editor write them, mini-swe-agent's `<returncode>N</returncode>`
   with N != 0, a leading `Exit code N` (Claude Code, Codex), a Python traceback and a shell's
   `command not found`: what formats without a flag, or exports that lost it, still say;
   `failed_prefix`, a short `… failed:` verdict, is offered but not a default).
4. An unknown answer (never came back) neither breaks a run nor joins it; calls of one batch
   are judged before any of their answers exist.
5. Progress elsewhere: a repeated call (same tool and arguments) answered differently from its
   previous answer shows the world moving (a polled job whose log advances); what came before
   it is no evidence of a loop, for any call: both rules look back only to it.
6. The verdict: halt when either rule halts; else warn when either count >= warn_at; else
   allow. The Check carries the count and threshold of the rule nearer its halt.
7. A user turn forgets what `across_turns` does not keep: `none` forgets everything, `errors`
   keeps the failed calls (an agent retrying a failing write after its user says "try again",
   while re-reading after new user input is normal), `all` keeps everything.

halt_at and ok_halt_at are >= 3: a halt always rests on two answers that did not change. The
window holds `window` entries, so a verdict never depends on anything older. Defaults (window 20,
warn_at 2, halt_at 3, ok_halt_at 4, across_turns errors) were chosen by scoring against the
labelled corpus: docs/detection.md.
"""

from __future__ import annotations

import copy
import re
import shlex
from collections import deque
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, NamedTuple

import xxhash
from loopledger import vocab
from loopledger.detectors.base import INT, NAMES, TEXT, Check, Param, PerCallAnswers
from loopledger.detectors.canonical import call_key, canonical_bytes
from loopledger.detectors.errors import ConfigError
from loopledger.detectors.registry import Detector
from loopledger.events import is_capped, text_digest

if TYPE_CHECKING:  # pragma: no cover — the spec grammar imports the detectors, not the reverse
    from loopledger.detectors.policy import PolicySpec

ALLOW, WARN, HALT = "allow", "warn", "halt"
REPEAT, RETRY = "repeat", "retry"
ACROSS_TURNS = ("none", "errors", "all")

DEFAULT_WINDOW = 20
DEFAULT_WARN_AT = 2
DEFAULT_HALT_AT = 3
DEFAULT_OK_HALT_AT = 4
DEFAULT_ACROSS_TURNS = "errors"
MAX_WINDOW = 10_000
ERROR_HEAD = 200  # error patterns look at the opening of an answer, where tools put the verdict
NAMED_MIN_LEN = 4  # shorter values (ids like 1, words like "yes") are named by chance

# What changes on every call without meaning progress, by name (the `volatile` parameter takes
# these names, or `re:<expression>`). Matched in this order as one alternation.
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
    # /tmp/pytest-of-me/pytest-3/x, /var/folders/…/T/tmpab12, C:\Users\me\AppData\Local\Temp\x
    "temp_path": r"(?:/private)?/(?:tmp|var/folders|var/tmp)/[^\s'\"`<>:;,)\]}]*"
                 r"|[A-Za-z]:\\Users\\[^\\\s]+\\AppData\\Local\\Temp\\[^\s'\"`<>;,)\]}]*",
}
DEFAULT_VOLATILE_NAMES: tuple[str, ...] = tuple(VOLATILE_PATTERNS)
DEFAULT_VOLATILE: tuple[str, ...] = tuple(VOLATILE_PATTERNS.values())

# What makes an answer the reader did not flag a failure, by name (the `errors` parameter).
ERROR_PATTERNS: dict[str, str] = {
    "error_prefix": r"\A\s*error\b\s*:",  # tau-bench "Error: …", OpenHands editor "ERROR:\n…"
    "nonzero_returncode": r"\A\s*<returncode>\s*-?[1-9]\d*\s*</returncode>",  # mini-swe-agent
    # Claude Code's Bash "Exit code 1\n…", Codex's plain-text shells "Exit code: 1\n…", when an
    # export (ATIF, OTLP, a copied transcript) lost the flag the agent had
    "exit_code": r"\A\s*exit (?:code|status)\s*:?\s*-?[1-9]\d*\b",
    # a Python tool or script that died (SWE-agent and OpenHands print it as the observation)
    "traceback": r"\A\s*Traceback \(most recent call last\):",
    # bash "bash: ponyc: command not found", zsh "(eval):1: command not found: tree"
    "command_not_found": r"\A[^\n]*\bcommand not found\b",
    # a verdict in up to three words: "Command failed: npm test" (Node's execSync), "Pre-commit
    # validation failed:", "Build failed:" (a grep hit "log:12: upload failed:" is not one)
    "failed_prefix": r"\A\s*(?:[\w-]+ ){0,3}failed\s*:",
}
# failed_prefix is offered, not a default: it also reads a test runner's "1 failed: …" summary,
# which would move halts on sessions judged before it existed (measured: docs/detection.md).
DEFAULT_ERROR_NAMES: tuple[str, ...] = tuple(n for n in ERROR_PATTERNS if n != "failed_prefix")
DEFAULT_ERRORS: tuple[str, ...] = tuple(ERROR_PATTERNS[n] for n in DEFAULT_ERROR_NAMES)

_hash = xxhash.xxh3_128_hexdigest

# Shell programs that read the workspace (as a pipeline's commands, without a write redirect or a
# chain). Not `tail`, `ls`, `ps`: they are how agents poll what moves without them (a log, an
# output folder, a process).
READ_PROGRAMS = frozenset({"cat", "head", "grep", "egrep", "fgrep", "rg", "wc", "nl", "tree", "stat",
                           "file"})
READ_GIT = frozenset({"status", "diff", "log", "show", "blame", "grep"})
READ_VERBS = frozenset({"view", "read", "open", "show"})  # an editor tool's command=view
_SHELL_FIELDS = ("command", "cmd")
_CHAINS = frozenset({";", "&&", "||", "&", "(", ")", ";;"})


def _reads_shell(command: str) -> bool:
    """A shell command that only reads: every pipeline stage a read-only program, nothing chained,
    no write redirect (`2>&1` and `>/dev/null` are not writes)."""
    lex = shlex.shlex(command, posix=True, punctuation_chars=True)
    lex.whitespace_split = True
    try:
        tokens = list(lex)
    except ValueError:
        return False  # unbalanced quotes: not something to vouch for
    if not tokens:
        return False
    stage: list[str] = []
    stages = [stage]
    for i, t in enumerate(tokens):
        if t == "|":
            stage = []
            stages.append(stage)
        elif t in _CHAINS or "`" in t or "$(" in t:
            return False
        elif set(t) <= set("<>&|") and ">" in t:
            target = tokens[i + 1] if i + 1 < len(tokens) else ""
            if not (t == ">&" or target in ("/dev/null", "&1", "&2")):
                return False
        else:
            stage.append(t)
    for words in stages:
        if not words:
            return False
        prog = words[0].rsplit("/", 1)[-1]
        if prog == "sed":
            if "-n" not in words[1:] or any(w.startswith(("-i", "--in-place")) for w in words[1:]):
                return False
        elif prog == "find":
            if any(w in ("-delete", "-exec", "-execdir", "-ok", "-fprint") for w in words[1:]):
                return False
        elif prog == "git":
            if len(words) < 2 or words[1] not in READ_GIT:
                return False
        elif prog not in READ_PROGRAMS:
            return False
    return True


def reads_only(name: str, args: Any) -> bool:
    """Whether a call only reads the workspace, from what its arguments say: an editor's
    `command: view`, or a shell command made of programs that read files (`cat`, `grep`,
    `sed -n`, `git diff`, …). A tool's name is not enough: `get_workflow_run` and `read_file` of
    a log read what moves by itself (a poll). Unknown is not a read."""
    if isinstance(args, dict):
        for field in _SHELL_FIELDS:
            value = args.get(field)
            if isinstance(value, list) and value and all(isinstance(v, str) for v in value):
                # Codex ["bash", "-lc", "cat x"]; an argv ["cat", "x"]
                value = value[2] if len(value) == 3 and value[1] in ("-c", "-lc") else shlex.join(value)
            if isinstance(value, str):
                return value.strip().lower() in READ_VERBS or _reads_shell(value)
    return False


class ProgressVerdict(NamedTuple):
    action: str  # allow | warn | halt
    count: int  # the attempt this call would be without progress (the rule that halts soonest)
    rule: str  # "repeat" | "retry" | "" (nothing tried before)
    threshold: int  # the count at which that rule halts (halt_at, or ok_halt_at for a repeat
    #                 of a successful answer)
    position: int  # this call's position, for record_answer


class Entry:
    """One call in the window. Its answer is kept as the reader's digest of the full text plus
    the text itself: the normalized digest is computed only when two answers with different
    texts must be compared (rare: only repeats are compared), and then cached."""

    __slots__ = ("position", "tool", "key", "args", "raw", "text", "failed", "named", "stale", "reads",
                 "_norm")

    def __init__(self, position: int, tool: str, key: str, args: Any, reads: bool = False) -> None:
        self.position = position
        self.reads = reads  # the call only reads (reads_only)
        self.tool = tool
        self.key = key  # digest of the canonical arguments
        self.args = args  # the call's arguments (shared, never changed): read when it fails
        self.raw: str | None = None  # digest of the full answer text (None: not back yet)
        self.text = ""
        self.failed = False
        self.named: frozenset[str] = frozenset()  # argument values its error message names
        self.stale = 1  # the attempt without progress its check counted (1: nothing tried before)
        self._norm: str | None = None

    def copy(self) -> Entry:
        new = Entry(self.position, self.tool, self.key, self.args, self.reads)
        new.raw, new.text, new.failed, new.named = self.raw, self.text, self.failed, self.named
        new.stale, new._norm = self.stale, self._norm
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
    """Replaces every match of each pattern, in order, by one placeholder character (one pass
    per pattern: measured faster than one alternation of them all)."""

    __slots__ = ("patterns",)

    def __init__(self, patterns: tuple[re.Pattern[str], ...]) -> None:
        self.patterns = patterns

    def __call__(self, text: str) -> str:
        for p in self.patterns:
            text = p.sub("\x00", text)
        return text


class ProgressDetector:
    """Stale repeats and stale retries over the last `window` calls (see the module docstring)."""

    __slots__ = ("window", "warn_at", "halt_at", "ok_halt_at", "across_turns", "volatile", "errors",
                 "normalize", "_entries", "_by_tool", "_next", "_moved", "_reads", "last")

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
        self._entries: deque[Entry] = deque(maxlen=window)  # the window, oldest first
        self._by_tool: dict[str, deque[Entry]] = {}  # the same entries per tool (trimmed lazily)
        self._next = 0
        self._moved = -1  # position of the latest call seen to make progress (-1: none)
        self._reads = False  # the call being checked only reads
        self.last: ProgressVerdict | None = None

    # -- answers ---------------------------------------------------------------------------

    def is_failure(self, text: str, is_error: bool = False) -> bool:
        if is_error:
            return True
        head = text[:ERROR_HEAD]
        for p in self.errors:
            if p.search(head):
                return True
        return False

    def digest(self, text: str) -> str:
        """Digest of the text with its volatile parts removed."""
        return _hash(self.normalize(text).encode("utf-8", "surrogatepass"))

    def _norm(self, e: Entry) -> str:
        if e._norm is None:
            # A capped answer (as the ledger stores it) is only its head: its full digest, which
            # the marker holds, decides — a hex id pattern must not erase that digest.
            e._norm = e.raw or "" if is_capped(e.text) else self.digest(e.text)
        return e._norm

    def same_answer(self, a: Entry, b: Entry) -> bool:
        """Equal after the volatile parts are removed (and both failures, or both not)."""
        if a.failed != b.failed:
            return False
        return a.raw == b.raw or self._norm(a) == self._norm(b)

    # -- the check -------------------------------------------------------------------------

    def check(self, name: str, args: Any, canonical: bytes | None = None,
              args_digest: str | None = None) -> ProgressVerdict:
        if args_digest is None:
            args_digest = _hash(canonical if canonical is not None else canonical_bytes(args))
        position = self._next
        self._next = position + 1
        self._reads = reads_only(name, args)
        same_tool = self._by_tool.get(name)
        if same_tool is None:
            if len(self._by_tool) >= 4 * self.window:  # keep it bounded: drop tools out of the window
                self._reindex()
            same_tool = self._by_tool[name] = deque()
            action, count, rule, threshold = (ALLOW, 1, "", self.ok_halt_at)
        else:
            lo = position - self.window  # the window: the `window` calls before this one
            while same_tool and same_tool[0].position < lo:
                same_tool.popleft()
            action, count, rule, threshold = self._score(same_tool, args_digest, args)
        entry = Entry(position, name, args_digest, args, self._reads)
        entry.stale = count
        self._entries.append(entry)
        same_tool.append(entry)
        self.last = ProgressVerdict(action, count, rule, threshold, position)
        return self.last

    def _reindex(self) -> None:
        self._by_tool = {}
        for e in self._entries:
            self._by_tool.setdefault(e.tool, deque()).append(e)

    def _score(self, same_tool: deque[Entry], key: str, args: Any) -> tuple[str, int, str, int]:
        """(action, count, rule, threshold) for a call with these arguments, given the tool's
        entries in the window."""
        repeat = 0  # earlier calls with this key that end on the same answer
        same: Entry | None = None
        chain: list[Entry] = []  # the tool's trailing run of same-error failures, newest first
        repeat_open = retry_open = True
        moved = self._moved
        for e in reversed(same_tool):
            if e.position < moved:
                break  # the world moved at `moved`: what came before is no evidence of a loop
            if e.raw is None:
                continue  # an unknown answer neither breaks a run nor joins it
            if retry_open:
                if e.failed and (not chain or self.same_answer(e, chain[0])):
                    chain.append(e)
                else:
                    retry_open = False
            if repeat_open and e.key == key:
                if same is None or self.same_answer(e, same):
                    same = e
                    repeat += 1
                else:
                    repeat_open = False
            if not (repeat_open or retry_open):
                break
        retry = self._retries(chain, key, args) + 1 if chain else 1
        repeat_count = repeat + 1
        repeat_halt = self.halt_at if same is not None and (same.failed or self._only_reads_since(same)) \
            else self.ok_halt_at
        if repeat_count >= repeat_halt or retry >= self.halt_at:
            action = HALT
        elif max(repeat_count, retry) >= self.warn_at:
            action = WARN
        else:
            action = ALLOW
        if repeat == 0 and retry == 1:
            return action, 1, "", repeat_halt
        # Report the rule nearer its halt.
        if repeat_halt - repeat_count <= self.halt_at - retry:
            return action, repeat_count, REPEAT, repeat_halt
        return action, retry, RETRY, self.halt_at

    def _only_reads_since(self, first: Entry) -> bool:
        """This call and every call since `first` (the oldest of its run of equal answers) only
        read: nothing between could have changed what it reads, so the unchanged answer is as
        stale as a repeated failure."""
        if not self._reads:
            return False
        for e in reversed(self._entries):
            if e.position < first.position:
                return True
            if not e.reads:
                return False
        return True

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
        if isinstance(answer, str):
            entry.text, entry.raw = answer, text_digest(answer)
        else:
            entry.text, entry.raw, is_error = answer.text, answer.digest, is_error or answer.is_error
        entry.failed = self.is_failure(entry.text, is_error)
        if entry.failed:
            text = entry.text
            entry.named = frozenset(v for v in leaves(entry.args) if v in text)
        if position > self._moved:
            key = entry.key
            for e in reversed(self._by_tool.get(entry.tool, ())):
                if e.key == key and e.raw is not None and e.position < position:
                    if not self.same_answer(e, entry):
                        self._moved = position  # a repeated call answered differently: progress
                    break

    def user_turn(self) -> None:
        if self.across_turns == "all":
            return
        if self.across_turns == "errors":
            kept = [e for e in self._entries if e.failed]
            self._entries.clear()
            self._entries.extend(kept)
        else:
            self._entries.clear()
        self._reindex()
        self.last = None

    def __deepcopy__(self, memo: dict[int, Any]) -> ProgressDetector:
        # Patterns are shared (immutable); entries are mutable (answers arrive later): copied.
        new = copy.copy(self)
        new._entries = deque((e.copy() for e in self._entries), maxlen=self.window)
        new._reindex()
        return new

    def state(self) -> dict[str, Any]:
        """Each tracked call, oldest first: tool, arguments digest, answer digest after the
        volatile parts are removed (None: not back yet; a trailing `!`: a failure) and `stale`,
        the attempt without progress its check counted (1: nothing tried before)."""
        tracked = [{"tool": e.tool, "args": e.key[:8],
                    "answer": None if e.raw is None else self._norm(e)[:8] + ("!" if e.failed else ""),
                    "stale": e.stale}
                   for e in self._entries]
        last = self.last
        return {"calls": tracked, "count": last.count if last else 0, "rule": last.rule if last else "",
                "window": self.window, "warn_at": self.warn_at, "halt_at": self.halt_at,
                "ok_halt_at": self.ok_halt_at, "across_turns": self.across_turns}


# -- the Policy adapter and its registration ---------------------------------------------------


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


def _detector(p: Mapping[str, Any]) -> ProgressDetector:
    return ProgressDetector(p["window"], p["warn_at"], p["halt_at"], p["ok_halt_at"], p["across_turns"],
                            resolve("volatile", p["volatile"], VOLATILE_PATTERNS),
                            resolve("errors", p["errors"], ERROR_PATTERNS))


class ProgressPolicy(PerCallAnswers):
    def __init__(self, spec: PolicySpec) -> None:
        super().__init__(spec)
        self.detector = _detector(spec.params)

    def _judge(self, i: int, call: Any) -> tuple[Check, int]:
        v = self.detector.check(call.name, call.args, args_digest=call_key(call)[1])
        reason = ""
        if v.action != vocab.ALLOW:
            # The threshold's name as the form names it (a repeat of a success halts at ok_halt_at).
            name = "halt_at" if v.rule != REPEAT or v.threshold == self.detector.halt_at else "ok_halt_at"
            reason = (f"{call.name}: the same answer {v.count - 1} times [{name}]" if v.rule == REPEAT else
                      f"{call.name}: the same error, retried {v.count - 1} times without addressing it [{name}]")
        return Check(i, v.action, v.count, None, v.threshold, reason), v.position


DETECTOR = Detector(
    "progress",
    (
        Param("window", INT, DEFAULT_WINDOW, 2, "calls remembered"),
        Param("warn_at", INT, DEFAULT_WARN_AT, 2, "warn at this attempt without progress"),
        Param("halt_at", INT, DEFAULT_HALT_AT, 3,
              "halt at this attempt after the same failure (a repeat or a retry)"),
        Param("ok_halt_at", INT, DEFAULT_OK_HALT_AT, 3,
              "halt at this identical call after the same successful answer"),
        Param("across_turns", TEXT, DEFAULT_ACROSS_TURNS, 0,
              "what a user turn keeps: none | errors | all"),
        Param("volatile", NAMES, DEFAULT_VOLATILE_NAMES, 0,
              "removed before comparing: " + ", ".join(VOLATILE_PATTERNS) + " or re:<expression>"),
        Param("errors", NAMES, DEFAULT_ERROR_NAMES, 0,
              "what else makes an answer a failure: " + ", ".join(ERROR_PATTERNS) + " or re:<expression>"),
    ),
    ProgressPolicy,
    validate=_detector,  # builds one: every rule, every pattern checked
    summary="ours: a repeat is a loop only when nothing changed (answers read; failures retried)",
)
