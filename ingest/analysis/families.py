"""Which family a session belongs to, for scores reported per family (pure: two strings in, a word out).

A guard is judged separately on the two kinds of session the labelled sets hold, because they
loop differently and a figure pooled over both hides the one the users have:

- **coding agents**: the agents people run at their desk — Claude Code, Codex CLI, GitHub Copilot
  CLI, Cline and its forks (Roo Code, Kilo Code), Aider, OpenCode, Gemini CLI;
- **harnesses**: benchmark and research harnesses — tau-bench, tau2-bench, mini-swe-agent,
  OpenHands, SWE-agent — and plain OpenAI / Anthropic message logs, which are what harnesses
  write (a desk agent writes its own format);
- **other**: a session whose agent neither its name nor its format tells (an OpenTelemetry trace
  of an unnamed service, a trajectory exported without its agent's name). It is reported as its
  own family rather than guessed into one of the two.

The agent's name decides first (an OpenAI log written by mini-swe-agent is a harness; a trajectory
naming Claude Code is a coding agent), then the format the reader recognised.
"""

from __future__ import annotations

from collections.abc import Iterable

CODING, HARNESS, OTHER = "coding agents", "harnesses", "other"
FAMILIES = (CODING, HARNESS, OTHER)

# Agent names as readers report them (SessionInfo.agent), compared after `_norm`; a name that
# starts with one of these belongs to its family ("claude-code-subagent", "openhands-v1").
CODING_AGENTS = ("claude-code", "claude code", "codex", "copilot", "github-copilot", "cline", "roo", "kilo",
                 "aider", "opencode", "gemini-cli", "gemini cli")
HARNESS_AGENTS = ("tau-bench", "tau2-bench", "tau-2", "mini-swe-agent", "openhands", "codeactagent", "swe-agent",
                  "sweagent", "swe-smith", "terminus")

# Formats (loopledger.formats NAME) whose writer is one family whatever agent it names.
CODING_FORMATS = ("claude-code", "claude-export", "codex", "copilot-cli", "cline", "aider", "opencode", "gemini-cli")
HARNESS_FORMATS = ("tau2-bench", "openhands", "openhands-v1", "swe-agent", "openai-chat", "openai-responses",
                   "anthropic", "atif")


def _norm(text: object) -> str:
    # a ledger's missing agent arrives as NaN through pandas: not a name
    return text.strip().lower().replace("_", "-") if isinstance(text, str) else ""


# The tools of a coding agent at a desk (Claude Code's, Codex CLI's): a plain message log whose
# calls are mostly these is that agent's session converted, not a harness's.
DESK_TOOLS = frozenset({"Bash", "BashOutput", "KillShell", "Read", "Edit", "MultiEdit", "Write", "Glob", "Grep",
                        "TodoWrite", "NotebookEdit", "WebFetch", "WebSearch", "Task", "exec_command",
                        "write_stdin", "apply_patch", "shell_command", "update_plan"})
LOG_FORMATS = ("openai-chat", "anthropic", "openai-responses")


def family(fmt: str | None, agent: str | None = None, tools: Iterable[str] = ()) -> str:
    """`coding agents`, `harnesses` or `other` for a session read as format `fmt` whose reader
    named its agent `agent` (either may be None); `tools`, the names of its calls, tell a plain
    message log converted from a desk agent's session (mostly Claude Code's or Codex's tools)."""
    name = _norm(agent)
    if name:
        if name.startswith(CODING_AGENTS):
            return CODING
        if name.startswith(HARNESS_AGENTS):
            return HARNESS
    f = _norm(fmt)
    if f in LOG_FORMATS and not name:
        names = list(tools)
        if names and 2 * sum(n in DESK_TOOLS for n in names) > len(names):
            return CODING
    if f in CODING_FORMATS:
        return CODING
    if f in HARNESS_FORMATS:
        return HARNESS
    return OTHER
