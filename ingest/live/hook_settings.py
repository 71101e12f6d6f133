"""`loopledger hook install | uninstall`: our entries in an agent's settings.json, and nothing else.

A person's settings.json is theirs: the file is edited as text, not re-serialized. Each change
is spliced in at the byte position a small span-keeping JSON parser finds, in the file's own
indentation, so every byte outside our entries stays as it was, and uninstalling what an install
added gives the original file back. A backup of the file as it was is kept next to it
(`settings.json.loopledger.bak`) before every change; a change that changes nothing writes
nothing (install is idempotent).

Our entries are the hook commands that run `loopledger hook <agent>`; uninstall removes exactly
those (and an event list or `hooks` object that only held them).
"""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import sys
from dataclasses import dataclass, field
from json.decoder import scanstring
from pathlib import Path
from typing import Any

BACKUP_SUFFIX = ".loopledger.bak"
TIMEOUT_S = 30  # the agent waits at most this long for one hook (it normally takes tens of ms)

# Which events each agent sends us, and whether their entries take a tool matcher.
EVENTS = {
    "claude-code": (("SessionStart", None), ("UserPromptSubmit", None), ("PreToolUse", "*"),
                    ("PostToolUse", "*"), ("PostToolUseFailure", "*")),
    "gemini-cli": (("SessionStart", None), ("BeforeAgent", None), ("BeforeTool", None), ("AfterTool", None)),
}
FOLDER = {"claude-code": ".claude", "gemini-cli": ".gemini"}


class SettingsError(ValueError):
    """A settings file we must not touch (not JSON, not an object, hooks of the wrong type)."""


def settings_path(agent: str, project: Path | None = None, user: bool = False) -> Path:
    """~/.claude/settings.json (--user) or PROJECT/.claude/settings.json (default: this folder);
    .gemini/ for Gemini CLI."""
    base = Path.home() if user else (project or Path.cwd())
    return base.expanduser().absolute() / FOLDER[agent] / "settings.json"


def _ours(agent: str) -> re.Pattern[str]:
    return re.compile(r"(^|[\s/\\'\"])loopledger(\.exe)?['\"]?\s+(-\S+\s+)*hook\s+" + re.escape(agent) + r"(\s|$)")


def hook_command(agent: str, db: str | None) -> str:
    """The command the agent runs: this installation's `loopledger` script by absolute path (a
    hook runs with the agent's PATH, not the person's virtualenv), with an absolute ledger."""
    from loopledger.ledger.urls import resolve_url, sqlite_file

    exe = Path(sys.executable).parent / ("loopledger.exe" if os.name == "nt" else "loopledger")
    if exe.is_file():
        prefix = shlex.quote(str(exe))
    elif shutil.which("loopledger"):
        prefix = shlex.quote(shutil.which("loopledger"))  # type: ignore[arg-type]
    else:
        prefix = f"{shlex.quote(sys.executable)} -P -m loopledger"
    url = resolve_url(db)
    target = sqlite_file(url) or url
    return f"{prefix} hook {agent} --db {shlex.quote(target)}"


def entries(agent: str, command: str) -> dict[str, list[dict[str, Any]]]:
    """event name → the groups we add under it."""
    out: dict[str, list[dict[str, Any]]] = {}
    for event, matcher in EVENTS[agent]:
        hook: dict[str, Any] = {"type": "command", "command": command}
        if agent == "gemini-cli":
            hook = {"name": "loopledger", **hook, "timeout": TIMEOUT_S * 1000}  # milliseconds there
        else:
            hook["timeout"] = TIMEOUT_S  # seconds
        group: dict[str, Any] = {"matcher": matcher} if matcher is not None else {}
        group["hooks"] = [hook]
        out[event] = [group]
    return out


# ── a JSON parser that keeps spans ───────────────────────────────────────────────────────────


@dataclass
class Node:
    kind: str  # object | array | scalar
    start: int
    end: int  # one past the last character
    members: list[tuple[str, int, Node]] = field(default_factory=list)  # object: (key, key start, value)
    items: list[Node] = field(default_factory=list)  # array
    value: Any = None  # scalar

    def get(self, key: str) -> tuple[int, Node] | None:
        for i, (k, _, v) in enumerate(self.members):
            if k == key:
                return i, v
        return None


_WS = re.compile(r"[ \t\n\r]*")
_SCALAR = re.compile(r"-?(?:0|[1-9]\d*)(?:\.\d+)?(?:[eE][-+]?\d+)?|true|false|null")


def _parse(text: str, i: int) -> Node:
    i = _WS.match(text, i).end()  # type: ignore[union-attr]
    if i >= len(text):
        raise SettingsError("unexpected end of the file")
    ch = text[i]
    if ch == "{":
        node = Node("object", i, i)
        i = _WS.match(text, i + 1).end()  # type: ignore[union-attr]
        if text[i:i + 1] == "}":
            node.end = i + 1
            return node
        while True:
            if text[i:i + 1] != '"':
                raise SettingsError(f"expected a key at character {i}")
            key, j = scanstring(text, i + 1)
            j = _WS.match(text, j).end()  # type: ignore[union-attr]
            if text[j:j + 1] != ":":
                raise SettingsError(f"expected ':' at character {j}")
            value = _parse(text, j + 1)
            node.members.append((key, i, value))
            i = _WS.match(text, value.end).end()  # type: ignore[union-attr]
            if text[i:i + 1] == ",":
                i = _WS.match(text, i + 1).end()  # type: ignore[union-attr]
                continue
            if text[i:i + 1] == "}":
                node.end = i + 1
                return node
            raise SettingsError(f"expected ',' or '}}' at character {i}")
    if ch == "[":
        node = Node("array", i, i)
        i = _WS.match(text, i + 1).end()  # type: ignore[union-attr]
        if text[i:i + 1] == "]":
            node.end = i + 1
            return node
        while True:
            item = _parse(text, i)
            node.items.append(item)
            i = _WS.match(text, item.end).end()  # type: ignore[union-attr]
            if text[i:i + 1] == ",":
                i += 1
                continue
            if text[i:i + 1] == "]":
                node.end = i + 1
                return node
            raise SettingsError(f"expected ',' or ']' at character {i}")
    if ch == '"':
        value, j = scanstring(text, i + 1)
        return Node("scalar", i, j, value=value)
    m = _SCALAR.match(text, i)
    if not m:
        raise SettingsError(f"unexpected {ch!r} at character {i}")
    return Node("scalar", i, m.end(), value=json.loads(m.group()))


def parse(text: str) -> Node:
    root = _parse(text, 0)
    if _WS.match(text, root.end).end() != len(text):  # type: ignore[union-attr]
        raise SettingsError("text after the JSON document")
    return root


# ── splicing ─────────────────────────────────────────────────────────────────────────────────


@dataclass(frozen=True)
class Style:
    unit: str  # one level of indentation ("" = the file is on one line)
    colon: str  # ": " or ":"

    @classmethod
    def of(cls, text: str) -> Style:
        m = re.search(r"\n([ \t]+)\S", text)
        colon = ": " if re.search(r'"\s*:\s', text) or "\n" in text else ":"
        if "\n" not in text.strip():
            return cls("", colon)
        return cls(m.group(1) if m else "  ", colon)

    def render(self, value: Any, indent: str) -> str:
        if not self.unit:
            return json.dumps(value, ensure_ascii=False, separators=("," if self.colon == ":" else ", ", self.colon))
        text = json.dumps(value, ensure_ascii=False, indent=self.unit, separators=(",", self.colon))
        return text.replace("\n", "\n" + indent)


def _line_indent(text: str, pos: int) -> str:
    start = text.rfind("\n", 0, pos) + 1
    return _WS.match(text, start).group().replace("\n", "").replace("\r", "")  # type: ignore[union-attr]


def _append(text: str, style: Style, container: Node, piece: str) -> str:
    """`piece` (an array item, or `"key": value` text) added as the container's last child."""
    indent = _line_indent(text, container.start)
    child = indent + style.unit
    last = container.items[-1] if container.kind == "array" and container.items else \
        container.members[-1][2] if container.kind == "object" and container.members else None
    if not style.unit:
        sep = "," if style.colon == ":" else ", "
        if last is None:
            return text[:container.start + 1] + piece + text[container.end - 1:]
        return text[:last.end] + sep + piece + text[last.end:]
    if last is None:
        return text[:container.start + 1] + "\n" + child + piece + "\n" + indent + text[container.end - 1:]
    return text[:last.end] + ",\n" + child + piece + text[last.end:]


def _remove(text: str, container: Node, index: int) -> str:
    """The container's child at `index` taken out with its separator (an only child: emptied)."""
    spans = ([(n.start, n.end) for n in container.items] if container.kind == "array"
             else [(k, v.end) for _, k, v in container.members])
    if len(spans) == 1:
        return text[:container.start + 1] + text[container.end - 1:]
    start, end = spans[index]
    if index > 0:
        return text[:spans[index - 1][1]] + text[end:]
    return text[:start] + text[spans[1][0]:]


def _member_piece(style: Style, key: str, value: Any, indent: str) -> str:
    return json.dumps(key, ensure_ascii=False) + style.colon + style.render(value, indent)


# ── install / uninstall ──────────────────────────────────────────────────────────────────────


def _is_ours(agent: str, hook: Node) -> bool:
    if hook.kind != "object":
        return False
    found = hook.get("command")
    return found is not None and isinstance(found[1].value, str) and bool(_ours(agent).search(found[1].value))


def remove_entries(text: str, agent: str) -> str:
    """`text` without our hook commands (and the groups, event lists and `hooks` object that
    held nothing else)."""
    while True:
        root = parse(text)
        if root.kind != "object":
            raise SettingsError("the settings file is not a JSON object")
        found = root.get("hooks")
        if found is None or found[1].kind != "object":
            return text
        hooks_index, hooks = found
        edited = None
        for ev_index, (_, _, groups) in enumerate(hooks.members):
            if groups.kind != "array":
                continue
            for g_index, group in enumerate(groups.items):
                inner = group.get("hooks") if group.kind == "object" else None
                if inner is None or inner[1].kind != "array":
                    continue
                mine = [i for i, h in enumerate(inner[1].items) if _is_ours(agent, h)]
                if not mine:
                    continue
                if len(mine) < len(inner[1].items):  # a group shared with the person's own hooks
                    edited = _remove(text, inner[1], mine[0])
                elif len(groups.items) > 1:
                    edited = _remove(text, groups, g_index)
                elif len(hooks.members) > 1:
                    edited = _remove(text, hooks, ev_index)
                else:
                    edited = _remove(text, root, hooks_index)
                break
            if edited is not None:
                break
        if edited is None:
            return text
        text = edited


def add_entries(text: str, agent: str, command: str) -> str:
    """`text` with our groups appended under each event (the `hooks` object or an event list
    created where missing)."""
    style = Style.of(text)
    for event, groups in entries(agent, command).items():
        root = parse(text)
        if root.kind != "object":
            raise SettingsError("the settings file is not a JSON object")
        found = root.get("hooks")
        if found is None:
            indent = _line_indent(text, root.start) + style.unit
            text = _append(text, style, root, _member_piece(style, "hooks", {event: groups}, indent))
            continue
        hooks = found[1]
        if hooks.kind != "object":
            raise SettingsError("'hooks' in the settings file is not an object")
        ev = hooks.get(event)
        if ev is None:
            indent = _line_indent(text, hooks.start) + style.unit
            text = _append(text, style, hooks, _member_piece(style, event, groups, indent))
            continue
        if ev[1].kind != "array":
            raise SettingsError(f"'hooks.{event}' in the settings file is not a list")
        indent = _line_indent(text, ev[1].start) + style.unit
        for group in groups:
            text = _append(text, style, ev[1], style.render(group, indent))
            ev = parse(text).get("hooks")[1].get(event)  # type: ignore[index,union-attr]
    return text


@dataclass(frozen=True)
class Change:
    path: Path
    changed: bool
    backup: Path | None
    command: str


def _read(path: Path) -> tuple[str, bool]:
    try:
        raw = path.read_bytes()
    except FileNotFoundError:
        return "", False
    try:
        return raw.decode("utf-8"), True
    except UnicodeDecodeError as exc:
        raise SettingsError(f"{path}: not UTF-8 text ({exc})") from None


def _write(path: Path, old: str | None, new: str) -> Path | None:
    path.parent.mkdir(parents=True, exist_ok=True)
    backup = None
    if old is not None:
        backup = path.with_name(path.name + BACKUP_SUFFIX)
        shutil.copy2(path, backup)
    tmp = path.with_name(f".{path.name}.loopledger-{os.getpid()}.tmp")
    tmp.write_text(new, encoding="utf-8")
    if old is not None:
        shutil.copymode(path, tmp)
    os.replace(tmp, path)
    return backup


def install(agent: str, path: Path, command: str) -> Change:
    text, exists = _read(path)
    try:
        base = text if text.strip() else "{}\n"
        new = add_entries(remove_entries(base, agent), agent, command)
    except SettingsError as exc:
        raise SettingsError(f"{path}: {exc}") from None
    if exists and new == text:
        return Change(path, False, None, command)
    if not exists or not text.strip():
        new = json.dumps(json.loads(new), indent=2, ensure_ascii=False) + "\n"  # a new file: the usual style
    return Change(path, True, _write(path, text if exists else None, new), command)


def uninstall(agent: str, path: Path) -> Change:
    text, exists = _read(path)
    if not exists:
        return Change(path, False, None, "")
    try:
        new = remove_entries(text, agent)
    except SettingsError as exc:
        raise SettingsError(f"{path}: {exc}") from None
    if new == text:
        return Change(path, False, None, "")
    return Change(path, True, _write(path, text, new), "")
