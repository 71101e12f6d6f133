"""`loopledger hook install | uninstall opencode`: LoopLedger's OpenCode plugin file.

OpenCode (checked with 1.18.33) loads every plugin file in a project's `.opencode/plugins/` and
in `~/.config/opencode/plugins/` (`$XDG_CONFIG_HOME`) when it starts. The plugin
(opencode_plugin.js, shipped with the package) runs `loopledger guard --origin opencode` once per
OpenCode process and applies its verdicts: install writes it there with this installation's
command and the ledger filled in. The file is LoopLedger's own: install replaces only a file
that says so on its first line (a file of the same name that is not ours is refused), running it
twice changes nothing, and uninstall removes the file and the folders install created for it.
"""

from __future__ import annotations

import json
import os
import shlex
from pathlib import Path

from loopledger.live.hook_settings import Change, SettingsError, created_marker

SOURCE = Path(__file__).with_name("opencode_plugin.js")
FIRST_LINE = "// LoopLedger's guard for OpenCode, installed by `loopledger hook install opencode`"
_CONFIG = ("/* loopledger:config */", "/* loopledger:end */")
FILE_NAME = "loopledger.js"


def plugin_path(project: Path | None = None, user: bool = False) -> Path:
    """PROJECT/.opencode/plugins/loopledger.js (default: this folder), or, --user,
    $XDG_CONFIG_HOME/opencode/plugins/loopledger.js (default ~/.config)."""
    if user:
        base = Path(os.environ.get("XDG_CONFIG_HOME") or Path.home() / ".config").expanduser() / "opencode"
    else:
        base = (project or Path.cwd()).expanduser() / ".opencode"
    return base.absolute() / "plugins" / FILE_NAME


def guard_command(hook_command: str) -> list[str]:
    """`loopledger guard` run the way `hook_command` runs the hook (this installation's script,
    the same ledger), its decisions recorded as OpenCode's."""
    words = shlex.split(hook_command)
    at = words.index("hook")
    return [*words[:at], "guard", *words[at + 2:], "--origin", "opencode"]


def render(command: list[str]) -> str:
    """The plugin with its CONFIG: the guard `command`, and the wait for a verdict the hook's
    (the busy timeout + 5 s)."""
    try:
        busy = float(os.environ.get("LOOPLEDGER_HOOK_BUSY_TIMEOUT", "5"))
    except ValueError:
        busy = 5.0
    config = json.dumps({"command": command, "timeoutMs": int((busy + 5) * 1000)}, ensure_ascii=False)
    text = SOURCE.read_text(encoding="utf-8")
    start, end = text.index(_CONFIG[0]) + len(_CONFIG[0]), text.index(_CONFIG[1])
    return text[:start] + " " + config + " " + text[end:]


def _ours(text: str) -> bool:
    return text.startswith(FIRST_LINE)


def install(path: Path, text: str, command: str) -> Change:
    """`text` (render's) at `path`; `command` is what the Change reports."""
    try:
        old = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        old = None
    except (OSError, UnicodeDecodeError) as exc:
        raise SettingsError(f"{path}: cannot read it: {exc}") from None
    if old is not None and not _ours(old):
        raise SettingsError(f"{path}: a plugin of that name that is not LoopLedger's is there; not replaced")
    if old == text:
        return Change(path, False, None, command)
    if old is None:
        created = [p for p in (path.parent.parent, path.parent) if not p.exists()]
        path.parent.mkdir(parents=True, exist_ok=True)
        created_marker(path).write_text(json.dumps({"folders": [str(p) for p in created]}) + "\n", encoding="utf-8")
    tmp = path.with_name(f".{path.name}.loopledger-{os.getpid()}.tmp")
    tmp.write_text(text, encoding="utf-8")
    os.replace(tmp, path)
    return Change(path, True, None, command)


def uninstall(path: Path) -> Change:
    try:
        old = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return Change(path, False, None, "")
    if not _ours(old):
        raise SettingsError(f"{path}: not LoopLedger's plugin; left alone")
    path.unlink()
    marker = created_marker(path)
    try:
        folders = json.loads(marker.read_text(encoding="utf-8")).get("folders") or []
    except (OSError, ValueError, AttributeError):
        folders = []
    marker.unlink(missing_ok=True)
    for folder in sorted(folders, key=len, reverse=True):  # the plugins folder before .opencode/
        try:
            Path(folder).rmdir()  # only when empty: anything else in it is not ours
        except OSError:
            pass
    return Change(path, True, None, "", removed=True)
