"""What a call does to the workspace, told from its arguments: only reads it, changes files, or
unknown (pure). A tool's name is not enough: `get_workflow_run` and `read_file` of a log read
what moves by itself (a poll), so reads are told by what the arguments say (an editor's
`command: view`, a shell pipeline of `cat`/`grep`/`sed -n`/`git diff` without a write), and
writes likewise (an editor's old/new text or whole file, a patch, a redirect into a file,
`sed -i`, `tee`, `cp`, `git checkout`…). Also: how long a shell command sleeps, and the program a
command's last stage runs.
"""

from __future__ import annotations

import re
import shlex
from typing import Any

# Shell programs that read the workspace (as a pipeline's commands, without a write redirect or a
# chain). Not `tail`, `ls`, `ps`: they are how agents poll what moves without them (a log, an
# output folder, a process).
READ_PROGRAMS = frozenset({"cat", "head", "grep", "egrep", "fgrep", "rg", "wc", "nl", "tree", "stat",
                           "file"})
# SWE-agent's search commands: they read the open file or the repository and change nothing. Not
# its `open`, `goto`, `scroll_*`: they move the viewer that later commands answer from.
SEARCH_COMMANDS = frozenset({"search_file", "search_dir", "find_file"})
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
    if prog not in READ_PROGRAMS and prog not in SEARCH_COMMANDS and prog != "git":
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


def shell_text(args: Any) -> str | None:
    """A shell call's command line (`command`/`cmd`, a Codex argv joined), else None."""
    if not isinstance(args, dict):
        return None
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
    command = shell_text(args)
    if command is not None:
        verb = command.strip().lower()
        if verb in READ_VERBS:
            return True, False
        if verb in WRITE_VERBS or (verb.split(None, 1) or [""])[0] in EDIT_COMMANDS:
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


# `sleep 30`, `sleep 1.5`, `sleep 2m` (GNU sleep's suffixes), `time.sleep(10)`, `Start-Sleep -s 5`
_SLEEP = re.compile(r"\bsleep\s+(\d+(?:\.\d+)?)([smhd]?)\b|\btime\.sleep\(\s*(\d+(?:\.\d+)?)\s*\)"
                    r"|\bStart-Sleep\s+(?:-s(?:econds)?\s+)?(\d+(?:\.\d+)?)", re.IGNORECASE)
_UNIT = {"": 1, "s": 1, "m": 60, "h": 3600, "d": 86400}
_SEGMENTS = re.compile(r"&&|\|\||[;|&\n]")


def sleeps(args: Any) -> float:
    """Seconds a shell command asks to sleep (0: none, or not a shell command): a wait the agent
    chose. Summed over every sleep in it (`sleep 5; pg_isready; sleep 5`)."""
    if not isinstance(args, dict):
        return 0.0
    command = shell_text(args)
    if not command or "leep" not in command:
        return 0.0
    total = 0.0
    for m in _SLEEP.finditer(command):
        if m.group(1) is not None:
            total += float(m.group(1)) * _UNIT[m.group(2).lower()]
        else:
            total += float(m.group(3) or m.group(4))
    return total


# A call's own waiting: `kubectl wait --timeout=300s`, `--wait-timeout 60`; a tool's wait in ms.
_TIMEOUT_FLAG = re.compile(r"--(?:wait-)?timeout[= ](\d+(?:\.\d+)?)([smh]?)\b", re.IGNORECASE)
_WAIT_MS_KEYS = ("yield_time_ms", "block_until_ms", "wait_ms", "wait_time_ms")
_WAIT_S_KEYS = ("wait_seconds", "wait_time", "seconds")


def asked_wait(args: Any) -> float:
    """Seconds a call itself asks to wait before it answers: its sleeps, a `--timeout` it waits
    up to, a tool's own wait (`yield_time_ms` of Codex's `write_stdin`, `block_until_ms`). What a
    poll costs is a model turn each; what it asks to wait is what makes polling patient."""
    total = sleeps(args)
    if not isinstance(args, dict):
        return total
    for key in _WAIT_MS_KEYS:
        v = args.get(key)
        if isinstance(v, int | float) and not isinstance(v, bool) and v > 0:
            total += v / 1000
    for key in _WAIT_S_KEYS:
        v = args.get(key)
        if isinstance(v, int | float) and not isinstance(v, bool) and v > 0:
            total += v
    command = shell_text(args) or " ".join(
        w for v in args.values() if isinstance(v, list) for w in v if isinstance(w, str))  # an argv
    if command and "timeout" in command:
        for m in _TIMEOUT_FLAG.finditer(command):
            total += float(m.group(1)) * _UNIT[m.group(2).lower()]
    return total


def last_program(args: Any) -> str | None:
    """The program a shell command's last stage runs (`cd x && grep -r y .` → grep; `git grep` →
    git), or None for a call that is not a shell command."""
    if not isinstance(args, dict):
        return None
    command = shell_text(args)
    if not command:
        return None
    stage = _SEGMENTS.split(command)[-1].split()
    while stage and "=" in stage[0] and not stage[0].startswith(("-", "=")):
        stage = stage[1:]  # VAR=value prefixes
    return stage[0].rsplit("/", 1)[-1] if stage else None
