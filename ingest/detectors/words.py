"""A call as a person (or a model) names it: the tool, and for a shell tool its command line.

Shared by the detectors' own reasons (what the model reads when a guard warns or halts) and the
dashboard's "why" sentences (loopledger.analysis.explain), so both name a call the same way.
"""

from __future__ import annotations

import json
import re
from typing import Any

SHELL_TOOLS = frozenset({"bash", "shell", "sh", "run_shell_command", "execute_command", "exec_command",
                         "execute_bash", "run_command", "terminal", "cmdrunaction", "local_shell"})
_COMMAND_FIELDS = ("command", "cmd", "script", "code")
COMMAND_CHARS = 80


def tool_words(tool: Any, args: Any = None) -> str:
    """A call's tool as a person names it: a shell tool by its command (`bash: git commit -m …`),
    since an agent whose every call is bash would otherwise be explained as "bash" every time.
    `args`: the call's arguments (a dict, or its JSON text as the ledger stores it)."""
    name = "" if tool is None else str(tool)
    if name.lower() not in SHELL_TOOLS or args is None:
        return name
    if isinstance(args, str):
        try:
            args = json.loads(args)
        except ValueError:
            # Arguments cut short (a timeline reads their first characters): the command's start.
            m = re.search(r'"(?:command|cmd|script)"\s*:\s*"((?:[^"\\]|\\.)*)', args)
            if not m:
                return name
            args = {"command": m.group(1).replace('\\"', '"').replace("\\n", " ")}
    cmd: Any = None
    if isinstance(args, dict):
        cmd = next((args[f] for f in _COMMAND_FIELDS if args.get(f)), None)
    if isinstance(cmd, list) and all(isinstance(c, str) for c in cmd):
        cmd = cmd[2] if len(cmd) == 3 and cmd[1] in ("-c", "-lc") else " ".join(cmd)
    if not isinstance(cmd, str) or not cmd.strip():
        return name
    cmd = " ".join(cmd.split())
    return f"{name}: {cmd if len(cmd) <= COMMAND_CHARS else cmd[:COMMAND_CHARS - 1] + '…'}"
