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
   nothing could have changed what it reads, so it halts at halt_at like a failure. A poll is
   judged over its last `poll_span` answers: a success repeat whose answer changed within them
   halts only once poll_span answers in a row are equal. A failure re-run after a write (a call
   since that changed files, `writes`) counts the call's failures in a row with the newest's
   failure signature and the same tallies ("3 failed, 40 passed": fewer failing is progress) and
   halts at `rerun_halt_at`: an edit → test cycle gets more rope; a
   success repeat after another call changed files halts at ok_halt_at + 1. A transient failure
   (5xx, 429, rate limit) halts at halt_at + 1 and is not kept over a user turn. The same write
   back to back (nothing between) halts at ok_halt_at whatever it answers.
1b. Near repeat: a call new by its arguments that differ from the tool's latest calls only in
   their numbers (`sleep 30 && gh run view`, then `sleep 60 && …`), those calls in a row each
   a success with the same answer, word for word for the newest two, no write since and no
   movement of the tool: count = those calls + 1, warned from 3, halted at max(ok_halt_at,
   same_failure_at) — a poll waiting longer each time on an answer that never moves.
2. Stale retry. The tool's trailing run of failures with the same error (its earlier entries
   with known answers, newest first, while each failed with the error of the newest), oldest
   first, then this call: an attempt is a stale retry when it goes back to arguments already
   tried in the run, or keeps every argument value the error names (a string or number of 4+
   characters in the arguments that the error text contains: "flight HAT030 not available").
   Trying something new is progress: count = 1 + the stale retries in a row ending with this
   call (so a call with new arguments that keep nothing the error named counts 1). It halts at
   count >= halt_at (rerun_halt_at after a write).
2b. Run of one failure: the tool's trailing failures since the latest success of any call and
   the latest user turn, while each has the newest's failure signature (the text without the
   argument values it names — a command string's words among them —, its volatile parts and its
   numbers), counted in agent steps (calls
   checked with no answer recorded between). count = steps + 1, whatever the arguments (a harness
   format error nine times, ids guessed one after another); halts at `same_failure_at`.
2c. A harness refusal (`vocab.HARNESS_ERROR`: a reply the harness would not run) is linked to
   earlier refusals by rules 1 and 2 only while no call has succeeded since: its arguments are
   the harness's summary ("found 2 actions"), not the agent's action.
3. A failure is an answer the reader flagged (`Answer.is_error`) or whose first 200 characters
   match one of `errors` (case-insensitive; by default `Error: …` / `ERROR:` at the start, as
   tau-bench and the OpenHands editor write them, mini-swe-agent's `<returncode>N</returncode>`
   with N != 0, a leading `Exit code N` (Claude Code, Codex), a Python traceback, a shell's
   `command not found`, a search that found nothing (`No matches found`, `No such file or
   directory`: a guess that missed) and a checker's rejection opening the answer (`Wrong flag!`,
   `Incorrect`, `Invalid …`): what formats without a flag, or exports that lost it, still say;
   `failed_prefix`, a short `… failed:` verdict, is offered but not a default).
4. An unknown answer (never came back) neither breaks a run nor joins it; calls of one batch
   are judged before any of their answers exist.
5. Progress elsewhere, per tool: a repeated call answered differently from its previous answer
   shows the world moving (a polled job whose log advances): the tool's successful repeats
   before it are no evidence of a loop. A failure is never rescued so, nor another tool, nor by
   a repeat whose answer changed after a write between (the agent's own edit, not the world).
6. The verdict: halt when any rule halts; else warn when a count >= warn_at (the run of one
   failure: same_failure_at - 1); else allow. The Check carries the count and threshold of the
   rule nearer its halt.
7. A user turn forgets what `across_turns` does not keep: `none` forgets everything, `errors`
   keeps the failed calls (an agent retrying a failing write after its user says "try again",
   while re-reading after new user input is normal), `all` keeps everything.

halt_at and ok_halt_at are >= 3: a halt always rests on two answers that did not change. The
window holds `window` entries, so a verdict never depends on anything older. Defaults (window 20,
warn_at 2, halt_at 3, ok_halt_at 4, same_failure_at 5, poll_span 5, rerun_halt_at 4 (never below
halt_at), across_turns errors) were chosen by scoring against the labelled sets:
docs/detection.md.
"""

from __future__ import annotations

import copy
import re
import shlex
from collections import deque
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, NamedTuple

import orjson
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
REPEAT, RETRY, FAILURES = "repeat", "retry", "failures"
ACROSS_TURNS = ("none", "errors", "all")

DEFAULT_WINDOW = 20
DEFAULT_WARN_AT = 2
DEFAULT_HALT_AT = 3
DEFAULT_OK_HALT_AT = 4
DEFAULT_ACROSS_TURNS = "errors"
DEFAULT_SAME_FAILURE_AT = 5
DEFAULT_POLL_SPAN = 5
DEFAULT_RERUN_HALT_AT = 4
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
    # `/bin/bash: line 334:` — an interactive shell's command counter, one more on every call
    "shell_line": r"\b(?:ba|da|z|k)?sh: line \d+:",
    # (a path's start: `/srv/job/tmp/step-1200` holds `/tmp/` but is not a temp path)
    "temp_path": r"(?<![\w.~/\\-])(?:/private)?/(?:tmp|var/folders|var/tmp)/[^\s'\"`<>:;,)\]}]*"
                 r"|(?<![\w.~/\\-])[A-Za-z]:\\Users\\[^\\\s]+\\AppData\\Local\\Temp\\[^\s'\"`<>;,)\]}]*",
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
    # a search or lookup that found nothing: "No matches found for "X" in /repo" (SWE-agent's
    # search tools), "No files found", "ls: cannot access 'x': No such file or directory" — a
    # guess that missed, as much a failure as "order W0012 not found"
    "nothing_found": r"\A\s*no (?:matches|results|files|file|entries) (?:were )?found\b"
                     r"|\A[^\n]{0,120}\bno such file or directory\b",
    # a checker's verdict on an attempt: "Wrong flag!" (a CTF submit), "Incorrect answer"
    "rejected": r"\A\s*(?:wrong|incorrect|invalid)\b",
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
# Options that make a reading program run another program (`git grep -O<pager>`, `rg --pre
# ./x.sh`) or write a file (`git diff --output=p`, `tree -o out`, `file -C`): not reads, and the
# latter are writes. `find`'s actions likewise.
_FIND_RUNS = frozenset({"-exec", "-execdir", "-ok", "-okdir"})
_FIND_WRITES = frozenset({"-delete", "-fprint", "-fprint0", "-fprintf", "-fls"})
_OPTION_RUNS: dict[str, tuple[str, ...]] = {"git": ("-O", "--open-files-in-pager"), "rg": ("--pre",)}
_OPTION_WRITES: dict[str, tuple[str, ...]] = {"git": ("--output",), "tree": ("-o",), "file": ("-C", "--compile")}
# A sed script that only prints: addresses (numbers, $, /regex/), p, =, l, q, n, braces, `!`.
_SED_PRINTS = re.compile(r"(?:\s|[\d$,;!{}+~=pPlqQn]|/(?:[^/\\\n]|\\.)*/I?)*")
# What changes files, told positively (a call that is neither a read nor one of these is unknown).
WRITE_PROGRAMS = frozenset({"tee", "cp", "mv", "rm", "rmdir", "touch", "mkdir", "ln", "chmod", "chown",
                            "truncate", "dd", "install", "patch", "apply_patch", "unzip"})
# SWE-agent's editing commands (`edit 1:1` + text + `end_of_edit`), told by the first word: their
# text is code, which a shell tokenizer may not even read.
EDIT_COMMANDS = frozenset({"edit", "insert", "append", "create"})
WRITE_GIT = frozenset({"apply", "checkout", "restore", "reset", "stash", "am", "cherry-pick", "merge",
                       "rebase", "mv", "rm", "switch", "pull", "clean", "revert"})
WRITE_VERBS = frozenset({"create", "str_replace", "insert", "undo_edit", "write", "edit", "append",
                         "replace", "patch", "apply", "delete"})  # an editor tool's command
# Arguments that carry new content for a file (an editor's old/new text, a whole file, a patch).
EDIT_KEYS = frozenset({"old_str", "new_str", "old_string", "new_string", "file_text", "new_content",
                       "edits", "patch", "diff", "insert_line"})
CONTENT_KEYS = frozenset({"content", "contents", "text"})
PATH_KEYS = frozenset({"path", "file_path", "filename", "file", "target_file", "absolute_path"})
_SHELL_FIELDS = ("command", "cmd")
_CHAINS = frozenset({";", "&&", "||", "&", "(", ")", ";;"})
_QUIET = frozenset({"/dev/null", "/dev/stdout", "/dev/stderr"})


def _short_flag(words: list[str], letter: str, long: str) -> bool:
    """`-i`, a cluster holding it (`-ni`, `-pi`) or `--in-place[=…]`-style long form."""
    return any((w.startswith("-") and not w.startswith("--") and letter in w[1:]) or w.startswith(long)
               for w in words)


def _has_option(words: list[str], options: tuple[str, ...]) -> bool:
    """`--output`, `--output=p`, or a short option with its value attached (`-Ovim`)."""
    return any(w == o or w.startswith(o + "=") or (len(o) == 2 and w.startswith(o))
               for w in words for o in options)


def _sed_reads(words: list[str]) -> bool:
    """`sed -n` (alone or in a cluster: `-nE`) whose every script only prints (no `w`/`W` file,
    no `e` command, no script file). `-i` is a write (classify_shell checks writes first)."""
    args = words[1:]
    if not any(a.startswith("-") and not a.startswith("--") and "n" in a for a in args):
        return False
    if _short_flag(args, "f", "--file"):
        return False
    scripts, rest, i = [], [], 0
    while i < len(args):
        a = args[i]
        if a in ("-e", "--expression"):
            if i + 1 == len(args):
                return False  # an option without its script
            scripts.append(args[i + 1])
            i += 2
            continue
        if a.startswith("--expression="):
            scripts.append(a.split("=", 1)[1])
        elif not a.startswith("-"):
            rest.append(a)
        i += 1
    if not scripts and rest:
        scripts.append(rest[0])
    return bool(scripts) and all(_SED_PRINTS.fullmatch(s) for s in scripts)


def _stage_reads(words: list[str]) -> bool:
    if not words:
        return False
    prog = words[0].rsplit("/", 1)[-1]
    if prog == "sed":
        return _sed_reads(words)
    if prog == "find":
        return _FIND_RUNS.isdisjoint(words[1:])
    if prog == "git" and (len(words) < 2 or words[1] not in READ_GIT):
        return False
    if prog not in READ_PROGRAMS and prog != "git":
        return False
    return not _has_option(words[1:], _OPTION_RUNS.get(prog, ()))


def _stage_writes(words: list[str]) -> bool:
    if not words:
        return False
    prog = words[0].rsplit("/", 1)[-1]
    if prog in WRITE_PROGRAMS:
        return True
    if prog in ("sed", "perl"):
        return _short_flag(words[1:], "i", "--in-place")
    if prog == "find":
        return not _FIND_WRITES.isdisjoint(words[1:])
    if prog == "git" and len(words) > 1 and words[1] in WRITE_GIT:
        return True
    return _has_option(words[1:], _OPTION_WRITES.get(prog, ()))


def classify_shell(command: str) -> tuple[bool, bool]:
    """(reads, writes) of a shell command. reads: every pipeline stage a read-only program, nothing
    chained, no write redirect (`2>&1` and `>/dev/null` are not writes). writes: a redirect into a
    file, `sed -i`, `tee`, `cp`/`mv`/`rm`, `git checkout`… anywhere in it."""
    lex = shlex.shlex(command, posix=True, punctuation_chars=True)
    lex.whitespace_split = True
    try:
        tokens = list(lex)
    except ValueError:
        return False, False  # unbalanced quotes: not something to vouch for
    if not tokens:
        return False, False
    reads = writes = False
    chained = False
    stage: list[str] = []
    stages = [stage]
    for i, t in enumerate(tokens):
        if t == "|":
            stage = []
            stages.append(stage)
        elif t in _CHAINS:
            chained = True
            stage = []
            stages.append(stage)
        elif "`" in t or "$(" in t:
            chained = True
            stage.append(t)
        elif set(t) <= set("<>&|") and ">" in t:
            target = tokens[i + 1] if i + 1 < len(tokens) else ""
            # `2>&1`, `>&-`: a stream joined or closed (shlex splits `&1` into `&` `1`; `<&` holds no `>`)
            dup = t == ">&" and (target.isdigit() or target == "-")
            if not dup and target not in _QUIET:
                writes = True
        else:
            stage.append(t)
    writes = writes or any(_stage_writes(w) for w in stages)
    reads = not chained and not writes and all(_stage_reads(w) for w in stages)
    return reads, writes


def _shell_text(args: dict) -> str | None:
    for field in _SHELL_FIELDS:
        value = args.get(field)
        if isinstance(value, list) and value and all(isinstance(v, str) for v in value):
            # Codex ["bash", "-lc", "cat x"]; an argv ["cat", "x"]
            value = value[2] if len(value) == 3 and value[1] in ("-c", "-lc") else shlex.join(value)
        if isinstance(value, str):
            return value
    return None


def classify(name: str, args: Any) -> tuple[bool, bool]:
    """(reads, writes): whether a call only reads the workspace, and whether it (positively)
    changes files, from what its arguments say. A tool's name is not enough: `get_workflow_run`
    and `read_file` of a log read what moves by itself (a poll). Unknown is neither."""
    if not isinstance(args, dict):
        return False, False
    command = _shell_text(args)
    if command is not None:
        verb = command.strip().lower()
        if verb in READ_VERBS:
            return True, False
        if verb in WRITE_VERBS or verb.split(None, 1)[0] in EDIT_COMMANDS:
            return False, True
        return classify_shell(command)
    keys = args.keys()
    if not EDIT_KEYS.isdisjoint(keys) or (not CONTENT_KEYS.isdisjoint(keys) and not PATH_KEYS.isdisjoint(keys)):
        return False, True
    return False, any(isinstance(v, str) and v.lstrip().startswith("*** Begin Patch") for v in args.values())


def reads_only(name: str, args: Any) -> bool:
    """Whether a call only reads the workspace: an editor's `command: view`, or a shell command
    made of programs that read files (`cat`, `grep`, `sed -n`, `git diff`, …) without a write."""
    return classify(name, args)[0]


def writes(name: str, args: Any) -> bool:
    """Whether a call changes files, by its arguments: an editor's old/new text or whole file, a
    patch, a shell redirect into a file, `sed -i`, `tee`, `git checkout`…"""
    return classify(name, args)[1]


class ProgressVerdict(NamedTuple):
    action: str  # allow | warn | halt
    count: int  # the attempt this call would be without progress (the rule that halts soonest)
    rule: str  # "repeat" | "retry" | "failures" | "" (nothing tried before)
    threshold: int  # the count at which that rule halts (halt_at, ok_halt_at, rerun_halt_at,
    #                 poll_span + 1 or same_failure_at)
    position: int  # this call's position, for record_answer


class Entry:
    """One call in the window. Its answer is kept as the reader's digest of the full text plus
    the text itself: the normalized digest is computed only when two answers with different
    texts must be compared (rare: only repeats are compared), and then cached."""

    __slots__ = ("position", "step", "tool", "key", "args", "raw", "text", "failed", "named", "stale",
                 "_norm", "_sig", "_shape")

    def __init__(self, position: int, tool: str, key: str, args: Any, step: int = 0) -> None:
        self.position = position
        self.step = step  # the agent step (calls checked with no answer recorded between)
        self.tool = tool
        self.key = key  # digest of the canonical arguments
        self.args = args  # the call's arguments (shared, never changed): read when it fails
        self.raw: str | None = None  # digest of the full answer text (None: not back yet)
        self.stale = 1  # the attempt without progress its check counted (1: nothing tried before)
        self._shape: str | None = None  # _shape(args), computed when a near repeat asks
        # Set when the answer comes back (record_answer), read only once `raw` is set — one entry
        # is built per check, so what an unanswered call never needs is not assigned:
        # text, failed, named (argument values its error message names), _norm, _sig.

    @property
    def reads(self) -> bool:
        """The call only reads (reads_only); classified when a rule first asks (cached by key)."""
        return _classified(self.tool, self.args, self.key)[0]

    @property
    def writes(self) -> bool:
        """The call changes files (writes)."""
        return _classified(self.tool, self.args, self.key)[1]

    def copy(self) -> Entry:
        new = Entry(self.position, self.tool, self.key, self.args, self.step)
        new.raw, new.stale = self.raw, self.stale
        if self.raw is not None:
            new.text, new.failed, new.named = self.text, self.failed, self.named
            new._norm, new._sig = self._norm, self._sig
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


def _compile(pattern: str, flags: int = 0) -> re.Pattern[str]:
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
            compiled = _compile(p, flags)
        except re.error as e:
            raise ConfigError(field, f"{field} holds valid regular expressions",
                              f"{field}: {p!r} is not a valid regular expression ({e})") from None
        if compiled.search(""):
            # A pattern that matches nothing at all would "remove" the empty string everywhere.
            raise ConfigError(field, f"{field} patterns match something",
                              f"{field}: {p!r} matches the empty string")
        out.append(compiled)
    return tuple(out)


def validate(window: Any, warn_at: Any, halt_at: Any, ok_halt_at: Any, across_turns: Any,
             same_failure_at: Any = None, poll_span: Any = None, rerun_halt_at: Any = None) -> None:
    same_failure_at = DEFAULT_SAME_FAILURE_AT if same_failure_at is None else same_failure_at
    poll_span = DEFAULT_POLL_SPAN if poll_span is None else poll_span
    rerun_halt_at = DEFAULT_RERUN_HALT_AT if rerun_halt_at is None else rerun_halt_at
    for name, value in (("window", window), ("warn_at", warn_at), ("halt_at", halt_at),
                        ("ok_halt_at", ok_halt_at), ("same_failure_at", same_failure_at),
                        ("poll_span", poll_span), ("rerun_halt_at", rerun_halt_at)):
        if not isinstance(value, int) or isinstance(value, bool):
            raise ConfigError(name, f"{name} is an integer", f"{name}: must be an integer, got {value!r}")
    if window < 2:
        raise ConfigError("window", "window >= 2", f"window: must be >= 2, got {window}")
    if window > MAX_WINDOW:
        raise ConfigError("window", f"window <= {MAX_WINDOW}", f"window: must be <= {MAX_WINDOW}, got {window}")
    if warn_at < 2:
        raise ConfigError("warn_at", "warn_at >= 2", f"warn_at: must be >= 2, got {warn_at}")
    for name, value in (("halt_at", halt_at), ("ok_halt_at", ok_halt_at), ("same_failure_at", same_failure_at)):
        if value < 3:
            # Two equal answers are the least evidence that nothing changes.
            raise ConfigError(name, f"{name} >= 3", f"{name}: must be >= 3, got {value}")
        if value < warn_at:
            raise ConfigError(name, f"{name} >= warn_at", f"{name}: must be >= warn_at ({warn_at}), got {value}")
    if poll_span < 2:
        raise ConfigError("poll_span", "poll_span >= 2", f"poll_span: must be >= 2, got {poll_span}")
    if rerun_halt_at < 3:
        raise ConfigError("rerun_halt_at", "rerun_halt_at >= 3", f"rerun_halt_at: must be >= 3, got {rerun_halt_at}")
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


_DIGITS = re.compile(r"\d+")
# A result's tally, which an edit moving forward changes: "3 failed, 40 passed", "2 errors",
# "Tests run: 12, Failures: 2" (a line number moves with edits; a tally moves with the fix).
_TALLY = re.compile(r"\b\d+\s+(?:failed|failures?|errors?|passed|tests?|warnings?|skipped|problems?|issues?)\b"
                    r"|\b(?:tests run|failures|errors|skipped)\s*:\s*\d+", re.IGNORECASE)


def _words(value: str) -> set[str]:
    """The words of a command string at least NAMED_MIN_LEN long, quotes stripped."""
    return {w for w in (t.strip("'\"`") for t in value.split()) if len(w) >= NAMED_MIN_LEN}


_DIGITS_B = re.compile(rb"\d+")


def _shape(args: Any) -> str:
    """Digest of the arguments with every number taken out."""
    try:
        canonical = _dumps(args, option=_SORT) if args is not None else b"{}"
    except TypeError:
        canonical = canonical_bytes(args)
    return _hash(_DIGITS_B.sub(b"#", canonical))


def _entry_shape(e: Entry) -> str:
    if e._shape is None:
        e._shape = _shape(e.args)
    return e._shape


def _tallies(text: str) -> list[str]:
    return [m.lower() for m in _TALLY.findall(text[:4000])]
# A failure that says it will pass by itself (a server's 5xx/429, "try again later"): retrying it
# is what the agent is asked to do, so it gets one attempt more (halt_at + 1).
TRANSIENT = re.compile(r"\b(?:50[234]|429)\b|service unavailable|temporarily unavailable|rate.?limit|"
                       r"try again later|too many requests", re.IGNORECASE)
_new = tuple.__new__  # a NamedTuple without its Python-level __new__ (one per check)
_dumps, _SORT = orjson.dumps, orjson.OPT_SORT_KEYS
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


def _alternation(patterns: tuple[re.Pattern[str], ...]) -> re.Pattern[str] | None:
    """The patterns as one case-insensitive alternation (one search per answer), or None when
    there are none or they do not combine (a `re:` pattern with inline global flags)."""
    if not patterns:
        return None
    try:
        return _compile("|".join(f"(?:{p.pattern})" for p in patterns), re.IGNORECASE)
    except re.error:
        return None


class ProgressDetector:
    """Stale repeats, stale retries and runs of one failure over the last `window` calls (see the
    module docstring)."""

    __slots__ = ("window", "warn_at", "halt_at", "ok_halt_at", "across_turns", "same_failure_at", "poll_span",
                 "rerun_halt_at", "volatile", "errors", "_any_error", "normalize", "_entries", "_by_tool", "_next", "_step",
                 "_answered", "_answered_at", "_turn", "_success", "_moved", "last", "_shape")

    def __init__(self, window: int = DEFAULT_WINDOW, warn_at: int = DEFAULT_WARN_AT,
                 halt_at: int = DEFAULT_HALT_AT, ok_halt_at: int = DEFAULT_OK_HALT_AT,
                 across_turns: str = DEFAULT_ACROSS_TURNS, volatile: Sequence[str] = DEFAULT_VOLATILE,
                 errors: Sequence[str] = DEFAULT_ERRORS, same_failure_at: int = DEFAULT_SAME_FAILURE_AT,
                 poll_span: int = DEFAULT_POLL_SPAN, rerun_halt_at: int | None = None) -> None:
        rerun_halt_at = DEFAULT_RERUN_HALT_AT if rerun_halt_at is None else rerun_halt_at
        validate(window, warn_at, halt_at, ok_halt_at, across_turns, same_failure_at, poll_span, rerun_halt_at)
        self.window = window
        self.warn_at = warn_at
        self.halt_at = halt_at
        self.ok_halt_at = ok_halt_at
        self.across_turns = across_turns
        self.same_failure_at = same_failure_at
        self.poll_span = poll_span
        self.rerun_halt_at = max(rerun_halt_at, halt_at)  # never below a repeat with no edit between
        self.volatile = compile_patterns("volatile", volatile)
        self.errors = compile_patterns("errors", errors, re.IGNORECASE)
        # One search instead of one per pattern (each is checked on its own above).
        self._any_error = _alternation(self.errors)
        self.normalize = Normalizer(self.volatile)
        self._entries: deque[Entry] = deque(maxlen=window)  # the window, oldest first
        self._by_tool: dict[str, deque[Entry]] = {}  # the same entries per tool (trimmed lazily)
        self._next = 0
        self._step = 0  # agent steps: a check after an answer was recorded starts the next one
        self._answered = True
        self._turn = 0  # position of the first call after the latest user turn
        self._success = -1  # position of the newest call answered by a success (-1: none)
        self._moved: dict[str, int] = {}  # tool -> position of its latest repeat answered differently
        self._answered_at: dict[str, int] = {}  # tool -> position of its newest answered call
        self.last: ProgressVerdict | None = None
        self._shape: str | None = None  # the call being checked: its _shape, when a rule computed it

    # -- answers ---------------------------------------------------------------------------

    def is_failure(self, text: str, is_error: bool = False) -> bool:
        if is_error:
            return True
        head = text[:ERROR_HEAD]
        if self._any_error is not None:
            return self._any_error.search(head) is not None
        return any(p.search(head) for p in self.errors)

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
        error names (an id tried: "order W0012 not found"), its volatile parts and every number
        ("found 3 actions", "found 2 actions"). The runs-of-one-failure rule compares these."""
        if e._sig is None:
            text = e.text
            # a command string's words are its values too (`search_dir EnumValues.java` answered
            # "No matches found for "EnumValues.java"": the guess is the word, not the command)
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
              args_digest: str | None = None) -> ProgressVerdict:
        if args_digest is None:
            if canonical is None:
                try:  # canonical_bytes, its common case inlined (the hot path)
                    canonical = _dumps(args, option=_SORT) if args is not None else b"{}"
                except TypeError:
                    canonical = canonical_bytes(args)
            args_digest = _hash(canonical)
        position = self._next
        self._next = position + 1
        if self._answered:
            self._step += 1
            self._answered = False
        same_tool = self._by_tool.get(name)
        if same_tool is None:
            if len(self._by_tool) >= 4 * self.window:  # keep it bounded: drop tools out of the window
                self._reindex()
            same_tool = self._by_tool[name] = deque()
            verdict = _new(ProgressVerdict, (ALLOW, 1, "", self.ok_halt_at, position))
        else:
            lo = position - self.window  # the window: the `window` calls before this one
            while same_tool and same_tool[0].position < lo:
                same_tool.popleft()
            if self._answered_at.get(name, -1) < lo:  # no answer of this tool in the window yet
                verdict = _new(ProgressVerdict, (ALLOW, 1, "", self.ok_halt_at, position))
            else:
                verdict = _new(ProgressVerdict, (*self._score(same_tool, name, args_digest, args), position))
        entry = Entry(position, name, args_digest, args, self._step)
        entry.stale = verdict[1]
        if self._shape is not None:
            entry._shape, self._shape = self._shape, None
        self._entries.append(entry)
        same_tool.append(entry)
        self.last = verdict
        return verdict

    def _reindex(self) -> None:
        self._by_tool = {}
        for e in self._entries:
            self._by_tool.setdefault(e.tool, deque()).append(e)

    def _score(self, same_tool: deque[Entry], tool: str, key: str, args: Any) -> tuple[str, int, str, int]:
        """(action, count, rule, threshold) for a call with these arguments, given the tool's
        entries in the window."""
        chain: list[Entry] = []  # the tool's trailing run of same-error failures, newest first
        run_steps = 0  # the run of one failure: the agent steps it spans
        # A harness refusal's arguments are the harness's summary of a reply it would not run
        # ("found 2 actions"), not an action the agent chose: refusals are one repeated call only
        # while no call has succeeded since (the agent acting in between makes the next one new).
        floor = self._success if tool == vocab.HARNESS_ERROR else -1
        # 1. The tool's trailing failures (a success ends both the retry chain and the run).
        retry_open = run_open = True
        run_head: Entry | None = None
        for e in reversed(same_tool):
            if e.position <= floor:
                break
            if e.raw is None:
                continue  # an unknown answer neither breaks a run nor joins it
            if not e.failed:
                break
            if retry_open:
                if not chain or self.same_answer(e, chain[0]):
                    chain.append(e)
                else:
                    retry_open = False
            if run_open:
                if run_head is None:
                    run_lo = max(self._success, self._turn - 1)  # a success or a user turn ends a run
                    if e.position <= run_lo:
                        run_open = False
                    else:
                        run_head, run_steps, run_step = e, 1, e.step
                elif e.position <= run_lo or self.failure_signature(e) != self.failure_signature(run_head):
                    run_open = False
                elif e.step != run_step:
                    run_steps += 1
                    run_step = e.step
            if not (retry_open or run_open):
                break
        # 2. This call's own earlier answers (same tool and arguments).
        repeat = 0  # earlier calls with this key that end on the same answer
        same: Entry | None = None
        streak, streak_head = 0, None  # in this call's failures in a row: those equal to its newest
        moving = False  # this call's answers changed within its last poll_span answers
        repeat_open = streak_open = True
        moved = -1
        for e in reversed(same_tool):
            if e.position <= floor:
                break
            if e.key != key or e.raw is None:
                continue
            if streak_open:
                if not e.failed:
                    streak_open = False
                elif streak_head is None:
                    streak_head, streak = e, 1
                elif (self.failure_signature(e) == self.failure_signature(streak_head)
                      and _tallies(e.text) == _tallies(streak_head.text)):
                    # the same failure, up to its numbers (line numbers move with edits) but for
                    # its tallies: fewer tests failing after an edit is progress
                    streak += 1
            if repeat_open:
                if same is None:
                    moved = self._moved.get(tool, -1)
                    if e.failed or e.position >= moved:
                        same, repeat = e, 1
                    else:
                        repeat_open = False  # a success before its tool moved: no evidence
                elif self.same_answer(e, same):
                    if not same.failed and e.position < moved:
                        repeat_open = False  # the tool's world moved since (progress elsewhere)
                    else:
                        same = e
                        repeat += 1
                else:
                    repeat_open = False
                    moving = repeat < self.poll_span
            if not (repeat_open or streak_open):
                break
        near = False
        if same is None:
            repeat, same = self._near_repeats(same_tool, tool, key, args)
            near = same is not None
        if same is None and not chain and not run_steps:
            return ALLOW, 1, "", self.ok_halt_at
        retry = self._retries(chain, key, args) + 1 if chain else 1
        repeat_count = repeat + 1
        if same is None:
            repeat_halt = self.ok_halt_at
        elif same.failed:
            repeat_halt = self.halt_at + 1 if self._transient(same) else self.halt_at
            if self._wrote_since(same.position):
                # A failure repeated after files changed is a re-run after an edit: judged by how
                # often that failure came back while the call kept failing, against more rope.
                repeat_count, repeat_halt = streak + 1, self.rerun_halt_at
        else:
            repeat_halt = self.halt_at if self._only_reads_since(same, tool, key, args) else self.ok_halt_at
            if self._wrote_since(same.position, key):
                # a check after another call changed files (cat patch.txt after git diff > patch.txt):
                # one more, as a failure re-run after a write gets one more than halt_at
                repeat_halt = self.ok_halt_at + 1
            if moving:
                repeat_halt = max(repeat_halt, self.poll_span + 1)  # a poll that moves lately
            if near:
                repeat_halt = max(self.ok_halt_at, self.same_failure_at)
        retry_halt = self.halt_at
        if retry >= self.halt_at:
            if self._wrote_since(chain[-1].position):
                retry_halt = self.rerun_halt_at
            elif self._transient(chain[0]):
                retry_halt = self.halt_at + 1
        if repeat and same is not None and _classified(tool, args, key)[1]:
            # The same write, again and again with nothing between: the same change re-made,
            # whatever it answers (an insertion that grows the file each time).
            again = self._in_a_row(tool, key) + 1
            if again >= self.ok_halt_at and again > repeat_count:
                repeat_count, repeat_halt = again, self.ok_halt_at
        run_count = run_steps + 1
        run_halt = self.same_failure_at
        if repeat_count >= repeat_halt or retry >= retry_halt or run_count >= run_halt:
            action = HALT
        elif max(repeat_count, retry) >= self.warn_at or run_count >= run_halt - 1:
            action = WARN
        else:
            action = ALLOW
        if repeat == 0 and retry == 1 and run_count == 1:
            return action, 1, "", repeat_halt
        # Report the rule nearer its halt (ties: repeat, then retry).
        candidates = [(repeat_halt - repeat_count, 0, REPEAT)] if repeat else []
        if chain:
            candidates.append((retry_halt - retry, 1, RETRY))
        if run_steps:
            candidates.append((run_halt - run_count, 2, FAILURES))
        best = min(candidates)
        if best[2] == REPEAT:
            return action, repeat_count, REPEAT, repeat_halt
        if best[2] == RETRY:
            return action, retry, RETRY, retry_halt
        return action, run_count, FAILURES, run_halt

    def _near_repeats(self, same_tool: deque[Entry], tool: str, key: str, args: Any) -> tuple[int, Entry | None]:
        """A call new by its arguments that differ from the tool's latest calls only in their
        numbers (`sleep 30 && gh run view`, `sleep 60 && …`; page=2, page=3): how many of those
        latest calls in a row, each a success with the same answer and no write or movement of
        the tool since, and the newest of them (None: no such run)."""
        # the cheap test first, where most calls end: the tool's two newest answers are one
        # success, word for word (a near repeat whose answers differ only in a clock is missed)
        first = second = None
        for e in reversed(same_tool):
            if e.raw is None:
                continue
            if first is None:
                if e.failed or e.key == key:
                    return 0, None
                first = e
            else:
                if e.raw != first.raw or e.failed:
                    return 0, None
                second = e
                break
        if second is None:
            return 0, None
        shape = self._shape = _shape(args)
        moved = self._moved.get(tool, -1)
        n, head, oldest = 0, None, second
        for e in reversed(same_tool):
            if e.raw is None:
                continue
            if e.failed or e.key == key or e.position < moved or _entry_shape(e) != shape:
                break
            if head is None:
                head = e
            elif not self.same_answer(e, head):
                break
            n, oldest = n + 1, e
        if n < 2 or self._wrote_since(oldest.position - 1):
            return 0, None  # two equal answers before this call at the least (warned at the 3rd)
        return n, head

    def _transient(self, e: Entry) -> bool:
        return TRANSIENT.search(e.text[:ERROR_HEAD]) is not None

    def _in_a_row(self, tool: str, key: str) -> int:
        """How many of the latest calls, back to back, were this one."""
        n = 0
        for e in reversed(self._entries):
            if e.key != key or e.tool != tool:
                break
            n += 1
        return n

    def _wrote_since(self, first: int, other_than: str | None = None) -> bool:
        """A call after position `first` changed files (a write whose answer is a success; with
        `other_than`, a write with other arguments)."""
        for e in reversed(self._entries):
            if e.position <= first:
                return False
            if e.writes and e.raw is not None and not e.failed and e.key != other_than:
                return True
        return False

    def _wrote_between(self, first: int, last: int) -> bool:
        """A call strictly between positions `first` and `last` changed files (a successful write)."""
        for e in reversed(self._entries):
            if e.position <= first:
                return False
            if e.position < last and e.writes and e.raw is not None and not e.failed:
                return True
        return False

    def _only_reads_since(self, first: Entry, tool: str, key: str, args: Any) -> bool:
        """This call and every call since `first` (the oldest of its run of equal answers) only
        read: nothing between could have changed what it reads, so the unchanged answer is as
        stale as a repeated failure."""
        if not _classified(tool, args, key)[0]:
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
        self._answered = True
        if isinstance(answer, str):
            entry.text, entry.raw = answer, text_digest(answer)
        else:
            entry.text, entry.raw, is_error = answer.text, answer.digest, is_error or answer.is_error
        entry._norm = entry._sig = None
        entry.failed = failed = self.is_failure(entry.text, is_error)
        if failed:
            text = entry.text
            entry.named = frozenset(v for v in leaves(entry.args) if v in text)
        else:
            entry.named = _NOTHING
            if position > self._success:
                self._success = position
        tool = entry.tool
        if position > self._answered_at.get(tool, -1):
            self._answered_at[tool] = position
        if position > self._moved.get(tool, -1):
            key, raw = entry.key, entry.raw
            for e in reversed(self._by_tool.get(tool, ())):
                if e.key == key and e.raw is not None and e.position < position:
                    # Equal texts are equal answers: normalized only when the text changed.
                    if e.raw != raw and not self.same_answer(e, entry) and not self._wrote_between(e.position, position):
                        self._moved[tool] = position  # a repeated call answered differently
                    break

    def user_turn(self) -> None:
        self._turn = self._next  # a run of one failure never spans a user turn
        if self.across_turns == "all":
            return
        if self.across_turns == "errors":
            # a transient failure (503, rate limit) says nothing of a retry after the user spoke
            kept = [e for e in self._entries if e.raw is not None and e.failed and not self._transient(e)]
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
        new._moved, new._answered_at = dict(self._moved), dict(self._answered_at)
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
                "ok_halt_at": self.ok_halt_at, "across_turns": self.across_turns,
                "same_failure_at": self.same_failure_at, "poll_span": self.poll_span,
                "rerun_halt_at": self.rerun_halt_at}


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
                            resolve("errors", p["errors"], ERROR_PATTERNS), p["same_failure_at"],
                            p["poll_span"], p["rerun_halt_at"])


class ProgressPolicy(PerCallAnswers):
    def __init__(self, spec: PolicySpec) -> None:
        super().__init__(spec)
        self.detector = _detector(spec.params)

    def _threshold_name(self, v: ProgressVerdict) -> str:
        """Which parameter set the halt this verdict counts toward (a transient failure or a
        re-read after another call changed files gets one attempt more: `NAME + 1`)."""
        d = self.detector
        # (only a warn or a halt is named, and each carries its rule)
        candidates = {FAILURES: (("same_failure_at", d.same_failure_at),),
                      RETRY: (("halt_at", d.halt_at), ("rerun_halt_at", d.rerun_halt_at)),
                      REPEAT: (("ok_halt_at", d.ok_halt_at), ("halt_at", d.halt_at),
                               ("poll_span + 1", d.poll_span + 1), ("rerun_halt_at", d.rerun_halt_at))}[v.rule]
        for name, value in candidates:
            if v.threshold == value:
                return name
        for name, value in candidates:
            if v.threshold == value + 1:
                return f"{name} + 1"
        return candidates[0][0]

    def _judge(self, i: int, call: Any) -> tuple[Check, int]:
        v = self.detector.check(call.name, call.args, args_digest=call_key(call)[1])
        reason = ""
        if v.action != vocab.ALLOW:
            # The threshold's name as the form names it, so the words match the numbers.
            name = self._threshold_name(v)
            reason = (f"{call.name}: the same answer {v.count - 1} times [{name}]" if v.rule == REPEAT else
                      f"{call.name}: the same error, retried {v.count - 1} times without addressing it [{name}]"
                      if v.rule == RETRY else
                      f"{call.name}: the same failure {v.count - 1} times in a row, whatever the arguments [{name}]")
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
        Param("same_failure_at", INT, DEFAULT_SAME_FAILURE_AT, 3,
              "halt at this step of one tool failing the same way in a row, whatever the arguments "
              "(no success, no user turn between)"),
        Param("poll_span", INT, DEFAULT_POLL_SPAN, 2,
              "a repeat whose answer moved within its last poll_span answers halts only once "
              "poll_span answers in a row are the same"),
        Param("rerun_halt_at", INT, DEFAULT_RERUN_HALT_AT, 3,
              "halt at this attempt after the same failure when files were changed between (a re-run "
              "after an edit)"),
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
