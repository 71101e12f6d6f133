"""Codex CLI's side of `loopledger hook codex`: reading its hook events, ending a halted
`codex exec` run, and what `hook install codex` must say about Codex's own switches.

The protocol, checked against Codex CLI 0.171.0 (its codex-rs/hooks crate and the real client
driven in tests/test_live_codex.py): every command hook gets one JSON object on stdin with
`session_id` (the thread id, also the rollout's session_meta id), `transcript_path` (the rollout,
~/.codex/sessions/YYYY/MM/DD/rollout-*.jsonl), `cwd`, `hook_event_name`, `turn_id`, `model` and
`permission_mode`; PreToolUse adds `tool_name` (the canonical name: "Bash" for every shell-like
tool, apply_patch, mcp__server__tool), `tool_input` (`{"command"}` for shell tools) and
`tool_use_id` (the Responses API call id); PostToolUse also `tool_response` (a shell call's
output text, an MCP tool's JSON result). PostToolUse fires only for a call that ran.
- PreToolUse: `hookSpecificOutput.permissionDecision: "deny"` with `permissionDecisionReason`
  refuses the call; the model reads "Command blocked by PreToolUse hook: <reason>. Command: …"
  as its result. `continue: false` and `stopReason` are rejected there as invalid output (the
  hook then counts as failed and the call RUNS), so a refusal never carries them.
- PostToolUse: `hookSpecificOutput.additionalContext` reaches the model as a developer message
  before the call's result (the rollout reader does not take it for a user turn). Its
  `continue: false` only replaces the result with the stopReason: no hook answer ends a turn.
So a halt is a refusal plus an interrupt: a headless `codex exec` run is sent SIGINT while the
hook is still awaited, as Ctrl-C would, and ends there ("turn interrupted", exit status 1; the
rollout records the call as "aborted by user" and a <turn_aborted> marker), with no further model
request. The interactive TUI is not signalled (SIGINT kills it outright): there the halted call
and every later call of the run are refused until the person writes again.
"""

from __future__ import annotations

import os
from typing import Any

ARG_AGENT_PID = "--agent-pid"  # the hook process's parent, added by loopledger.entry (the resident cannot see it)


def codex_home() -> str:
    """Codex's own folder: $CODEX_HOME, else ~/.codex (a path string: this module is on the hook's path)."""
    env = os.environ.get("CODEX_HOME")
    return os.path.abspath(os.path.expanduser(env)) if env else os.path.join(os.path.expanduser("~"), ".codex")


def answer_of(response: Any) -> tuple[str, bool]:
    """(text, is_error) of a PostToolUse `tool_response`: a shell call's output is its text (Codex
    hands hooks no exit status), anything else its sorted JSON."""
    from loopledger.live.session import _text

    return _text(response), False


def _process(pid: int) -> tuple[list[str], int] | None:
    """(argv, parent pid) of a process of ours, from /proc (None when it is gone)."""
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as fh:
            argv = [a.decode("utf-8", "surrogateescape") for a in fh.read().split(b"\0") if a]
        with open(f"/proc/{pid}/stat", "rb") as fh:
            ppid = int(fh.read().rsplit(b")", 1)[1].split()[1])
    except (OSError, ValueError, IndexError):
        return None
    return argv, ppid


def exec_run(pid: int, depth: int = 4) -> int | None:
    """The `codex exec` process at `pid` or among its nearest ancestors (a hook may run under a
    shell), else None: the interactive client, or no Codex at all."""
    for _ in range(depth):
        found = _process(pid)
        if found is None or pid <= 1:
            return None
        argv, ppid = found
        if argv and os.path.basename(argv[0]) in ("codex", "codex.exe"):
            # `codex [options] exec|e …`: the subcommand is the first word that is not an option.
            words = [a for a in argv[1:] if not a.startswith("-")]
            return pid if words[:1] in (["exec"], ["e"]) or "exec" in argv[1:] else None
        pid = ppid
    return None


def interrupt(agent_pid: int | None, reason: str | None = None) -> bool:
    """End a halted headless run as Ctrl-C does: SIGINT to its `codex exec` process (Codex then
    aborts the turn it awaits this hook in: no further model request). False when there is none
    to signal (the TUI, an unknown parent), which leaves the refusal alone to stop the model.
    `reason` is first written to that process's stderr: aborting the turn, Codex drops the
    hook's answer unread, so its systemMessage would never reach the person, who would see only
    "turn interrupted"."""
    target = exec_run(agent_pid) if agent_pid else None
    if target is None:
        return False
    import signal

    if reason:
        tell(target, reason)
    try:
        os.kill(target, signal.SIGINT)
    except OSError:
        return False
    return True


def tell(pid: int, text: str) -> bool:
    """One line of `text` on the stderr of process `pid` (its terminal, or the pipe or file a
    script reads it from), through /proc; never blocking (a full pipe loses the line)."""
    line = (" ".join(text.split()) + "\n").encode("utf-8", "replace")
    try:
        fd = os.open(f"/proc/{pid}/fd/2", os.O_WRONLY | os.O_APPEND | os.O_NOCTTY | os.O_NONBLOCK)
    except OSError:
        return False
    try:
        os.write(fd, line)
    except OSError:
        return False
    finally:
        os.close(fd)
    return True


