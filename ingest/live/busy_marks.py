"""Which tool calls already waited for a busy ledger: a hook event of such a call does not wait
again, so a ledger another writer holds costs one tool call one busy timeout in all, not one per
hook event (Claude Code sends PreToolUse, PostToolUse and PostToolBatch for one call; Gemini CLI
BeforeTool and AfterTool; Codex CLI PreToolUse and PostToolUse).

A mark is an empty file, `$XDG_STATE_HOME/loopledger/busy/<agent>.<session>.<call>` (folder
0700), written when an event of the call waited the busy timeout in vain. The call's later
events (its answer; Claude Code's PostToolBatch) then try the ledger once, without waiting:
judged when the ledger is free by then, else allowed at once. The call's last event removes the
mark. A file, not memory, because the hook's events are answered by separate processes (the
in-process path) as well as by the resident guard, in any mix. A call is named by its
`tool_use_id`; Gemini CLI gives none, and its AfterTool follows its BeforeTool, so there it is
named by its tool. A mark older than MAX_AGE_S is ignored, and removed when another is written.

Stdlib only, and cheap when there is no mark (one stat): every answer event looks.
"""

from __future__ import annotations

import os
import time
from typing import Any

MAX_AGE_S = 3600.0


def _folder() -> str:
    from loopledger import folders

    return folders.state_dir("busy")


def _safe(text: str) -> str:
    """`text` as part of a file name: itself when it is short plain ASCII, else a digest."""
    if 0 < len(text) <= 96 and text.isascii() and all(c.isalnum() or c in "-_" for c in text):
        return text
    import hashlib

    return "h" + hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()[:40]


def calls_of(agent: str, kind: str, payload: dict[str, Any]) -> list[str]:
    """The calls an event belongs to: a call's or an answer's own, a batch's every call; none for
    a prompt or a session start."""
    if kind == "batch":
        calls = payload.get("tool_calls")
        return [c["tool_use_id"] for c in calls if isinstance(c, dict) and isinstance(c.get("tool_use_id"), str)
                and c["tool_use_id"]] if isinstance(calls, list) else []
    if kind not in ("call", "answer"):
        return []
    call_id = payload.get("tool_use_id")
    if isinstance(call_id, str) and call_id:
        return [call_id]
    tool = payload.get("tool_name")
    return [f"tool:{tool}"] if agent == "gemini-cli" and isinstance(tool, str) and tool else []


def _path(agent: str, session: str, call: str) -> str:
    return os.path.join(_folder(), f"{agent}.{_safe(session)}.{_safe(call)}")


def waited(agent: str, session: str, calls: list[str]) -> bool:
    """Whether one of `calls` already waited for a busy ledger (within MAX_AGE_S)."""
    now = time.time()
    for call in calls:
        try:
            if now - os.stat(_path(agent, session, call)).st_mtime < MAX_AGE_S:
                return True
        except OSError:
            continue
    return False


def note(agent: str, session: str, calls: list[str]) -> None:
    """`calls` waited for a busy ledger in vain; marks older than MAX_AGE_S go."""
    try:
        folder = _folder()
        os.makedirs(folder, mode=0o700, exist_ok=True)
        for call in calls:
            os.close(os.open(_path(agent, session, call), os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600))
        now = time.time()
        for name in os.listdir(folder):
            try:
                if now - os.stat(os.path.join(folder, name)).st_mtime >= MAX_AGE_S:
                    os.unlink(os.path.join(folder, name))
            except OSError:
                continue
    except OSError:
        pass  # no mark: the call's later events wait as any would


def clear(agent: str, session: str, calls: list[str]) -> None:
    """The calls' last event: their marks go."""
    for call in calls:
        try:
            os.unlink(_path(agent, session, call))
        except OSError:
            continue
