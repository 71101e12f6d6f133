"""`loopledger hook install | uninstall`: our entries in an agent's settings.json, and nothing else.

A person's settings.json is theirs: the file is edited as text, not re-serialized. Each change
is spliced in at the byte position a small span-keeping JSON parser finds, in the file's own
indentation, so every byte outside our entries stays as it was, and uninstalling what an install
added gives the original file back. The first install keeps the file as it was next to it
(`settings.json.loopledger.bak`), or, when there was none, a marker that it created it
(`settings.json.loopledger.created`); uninstall then restores exactly that (the original bytes,
or no file and no folder where install made them) and removes what it kept, unless the person
changed other settings since (those stay). A change that changes nothing writes nothing
(install is idempotent).

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

BACKUP_SUFFIX = ".loopledger.bak"  # the file as it was before the first install
CREATED_SUFFIX = ".loopledger.created"  # marker: there was no file before the first install
TIMEOUT_S = 30  # the agent waits at most this long for one hook (it normally takes tens of ms)

# Which events each agent sends us, and whether their entries take a tool matcher.
EVENTS = {
    "claude-code": (("SessionStart", None), ("UserPromptSubmit", None), ("PreToolUse", "*"),
                    ("PostToolUse", "*"), ("PostToolUseFailure", "*"), ("PostToolBatch", None)),
    "gemini-cli": (("SessionStart", None), ("BeforeAgent", None), ("BeforeTool", None), ("AfterTool", None)),
    # Codex CLI's hooks.json has Claude Code's shape (its matcher is a regex; "*" matches all).
    "codex": (("SessionStart", None), ("UserPromptSubmit", None), ("PreToolUse", "*"), ("PostToolUse", "*")),
}
FOLDER = {"claude-code": ".claude", "gemini-cli": ".gemini", "codex": ".codex"}
FILE = {"codex": "hooks.json"}  # the others: settings.json


class SettingsError(ValueError):
    """A settings file we must not touch (not JSON, not an object, hooks of the wrong type)."""


def settings_path(agent: str, project: Path | None = None, user: bool = False) -> Path:
    """~/.claude/settings.json (--user) or PROJECT/.claude/settings.json (default: this folder);
    .gemini/ for Gemini CLI; .codex/hooks.json for Codex CLI (--user: $CODEX_HOME, else ~/.codex)."""
    if user and agent == "codex":
        from loopledger.live.codex import codex_home

        return Path(codex_home()) / FILE[agent]
    base = Path.home() if user else (project or Path.cwd())
    return base.expanduser().absolute() / FOLDER[agent] / FILE.get(agent, "settings.json")


def _ours(agent: str) -> re.Pattern[str]:
    return re.compile(r"(^|[\s/\\'\"])loopledger(\.exe)?['\"]?\s+(-\S+\s+)*hook\s+" + re.escape(agent) + r"(\s|$)")


def is_our_command(agent: str):
    """A test of a hook command: whether it runs this agent's `loopledger hook`."""
    pattern = _ours(agent)
    return lambda command: bool(pattern.search(command))


def hook_command(agent: str, db: str | None) -> str:
    """The command the agent runs: this installation's `loopledger` script by absolute path (a
    hook runs with the agent's PATH, not the person's virtualenv), with an absolute ledger — but
    never a password: a URL with one that comes from $LOOPLEDGER_DATABASE_URL stays there (the
    command names no ledger; the hook reads the variable where it runs), and `hook install`
    refuses a `--db` with one."""
    from loopledger.ledger.urls import ENV_URL, has_password, resolve_url, sqlite_file

    exe = Path(sys.executable).parent / ("loopledger.exe" if os.name == "nt" else "loopledger")
    if exe.is_file():
        prefix = shlex.quote(str(exe))
    elif shutil.which("loopledger"):
        prefix = shlex.quote(shutil.which("loopledger"))  # type: ignore[arg-type]
    else:
        prefix = f"{shlex.quote(sys.executable)} -P -m loopledger"
    url = resolve_url(db)
    if db is None and os.environ.get(ENV_URL) and has_password(url):
        return f"{prefix} hook {agent}"
    target = sqlite_file(url) or url
    return f"{prefix} hook {agent} --db {shlex.quote(target)}"


def agent_command(agent: str, db: str | None) -> str:
    """hook_command as written into the agent's settings. Gemini CLI (0.61.0, its hook runner)
    reads any exit status but 0 and 1 as a refusal with the hook's stderr as the reason, so a
    hook that cannot start — the shell's 127 for a virtualenv moved or deleted, an interpreter
    gone, a process killed — would refuse every prompt and call: `|| exit 1` makes each of those
    its non-blocking error (it shows the shell's message as a warning and runs the call). Claude
    Code and Codex CLI already read every status but 2 so, and LoopLedger's hook never exits 2."""
    command = hook_command(agent, db)
    return f"{command} || exit 1" if agent == "gemini-cli" and os.name != "nt" else command


def install_notes(command: str) -> list[str]:
    """What `hook install` tells the person before the agent's first call: the resident guard the
    hook will start, and that the command names this installation's files (a virtualenv moved
    or deleted leaves the agent a hook that cannot start — any failure allows the call, so the
    guard would be silently off)."""
    notes = ["On the agent's first tool call the hook starts a resident guard: a background loopledger "
             "process of yours that answers the hook's later calls in a few milliseconds and exits once "
             "idle (LOOPLEDGER_HOOK_RESIDENT=0 turns it off)."]
    exe = shlex.split(command)[0] if command.strip() else ""
    if sys.prefix != sys.base_prefix:  # a virtualenv: this clone's .venv (make run), or another one
        notes.append(f"The command names this virtualenv's loopledger ({exe}): if you move or delete "
                     f"{sys.prefix}, the hook cannot start and the agent runs unguarded; run "
                     "`loopledger hook install` again from the new place.")
    else:
        notes.append(f"The command names {exe}: if it moves, run `loopledger hook install` again.")
    return notes


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


def add_entries(text: str, agent: str, command: str, style: Style | None = None) -> str:
    """`text` with our groups appended under each event (the `hooks` object or an event list
    created where missing), in `style` (default: the text's own)."""
    style = style or Style.of(text)
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
    backup: Path | None  # where the file as it was before LoopLedger is kept (None: nowhere)
    command: str
    removed: bool = False  # uninstall deleted a settings file (and folder) that install had created


def backup_path(path: Path) -> Path:
    return path.with_name(path.name + BACKUP_SUFFIX)


def created_marker(path: Path) -> Path:
    """Install created the settings file (and, when the marker says so, its folder): uninstall
    deletes them again rather than leave a `{}` behind."""
    return path.with_name(path.name + CREATED_SUFFIX)


def _read(path: Path) -> tuple[str, bool]:
    try:
        raw = path.read_bytes()
    except FileNotFoundError:
        return "", False
    try:
        return raw.decode("utf-8"), True
    except UnicodeDecodeError as exc:
        raise SettingsError(f"{path}: not UTF-8 text ({exc})") from None


def _write(path: Path, new: str) -> None:
    tmp = path.with_name(f".{path.name}.loopledger-{os.getpid()}.tmp")
    tmp.write_bytes(new.encode("utf-8"))
    if path.exists():
        shutil.copymode(path, tmp)
    os.replace(tmp, path)


def install(agent: str, path: Path, command: str) -> Change:
    """Our entries in `path`. The first install keeps the file as it was (a byte copy, or a
    marker that there was none) until uninstall; a later install (another ledger) keeps it."""
    text, exists = _read(path)
    try:
        base = text if text.strip() else "{}\n"
        # The file's style before our old entries come out (a file of nothing but our entries
        # shrinks to `{}`, which has none).
        new = add_entries(remove_entries(base, agent), agent, command, Style.of(base))
    except SettingsError as exc:
        raise SettingsError(f"{path}: {exc}") from None
    backup, marker = backup_path(path), created_marker(path)
    if exists and new == text:
        return Change(path, False, backup if backup.exists() else None, command)
    if not exists or not text.strip():
        new = json.dumps(json.loads(new), indent=2, ensure_ascii=False) + "\n"  # a new file: the usual style
    first = not backup.exists() and not marker.exists()
    folder_created = not path.parent.exists()
    path.parent.mkdir(parents=True, exist_ok=True)
    if first and not exists:
        marker.write_text(json.dumps({"folder_created": folder_created}) + "\n", encoding="utf-8")
    elif first:
        shutil.copy2(path, backup)
    _write(path, new)
    return Change(path, True, backup if backup.exists() else None, command)


def uninstall(agent: str, path: Path) -> Change:
    """Our entries out of `path`. When nothing else changed since install, what was there comes
    back exactly: the kept copy byte for byte, or no file (and no folder) where there was none.
    Edits the person made since stay; the kept copy then stays too, and is named."""
    text, exists = _read(path)
    backup, marker = backup_path(path), created_marker(path)
    if not exists:
        marker.unlink(missing_ok=True)
        return Change(path, False, None, "")
    try:
        new = remove_entries(text, agent)
        remaining = json.loads(new)
    except (SettingsError, ValueError) as exc:
        raise SettingsError(f"{path}: {exc}") from None
    if marker.exists() and remaining == {}:
        try:
            folder_created = bool(json.loads(marker.read_text(encoding="utf-8")).get("folder_created"))
        except (OSError, ValueError, AttributeError):
            folder_created = False
        path.unlink()
        marker.unlink()
        if folder_created:
            try:
                path.parent.rmdir()  # only when empty: anything else in it is not ours
            except OSError:
                pass
        return Change(path, True, None, "", removed=True)
    if backup.exists():
        original, _ = _read(backup)
        try:
            same = json.loads(original if original.strip() else "{}") == remaining
        except ValueError:
            same = False
        if same:  # nothing but our entries changed: the original bytes, formatting and all
            if original != text:
                _write(path, original)
            backup.unlink()
            return Change(path, original != text, None, "")
    if new == text:
        return Change(path, False, backup if backup.exists() else None, "")
    _write(path, new)
    marker.unlink(missing_ok=True)  # the person's own settings are in the file now: it stays
    return Change(path, True, backup if backup.exists() else None, "")


# ── Gemini CLI's trusted folders ─────────────────────────────────────────────────────────────


def gemini_trusted_folders_path() -> Path:
    """Where gemini-cli (0.61, packages/core/src/config/storage.ts) keeps folder trust:
    $GEMINI_CLI_TRUSTED_FOLDERS_PATH, else ~/.gemini/trustedFolders.json."""
    env = os.environ.get("GEMINI_CLI_TRUSTED_FOLDERS_PATH")
    return Path(env) if env else Path.home() / ".gemini" / "trustedFolders.json"


def gemini_trust(folder: Path, rules_text: str | None) -> bool | None:
    """Whether gemini-cli trusts `folder` by its trustedFolders.json rules ({path: TRUST_FOLDER |
    TRUST_PARENT | DO_NOT_TRUST}); the longest matching rule wins, TRUST_PARENT trusts the rule
    path's parent (packages/core/src/utils/trust.ts). None: no rule (untrusted until a person says)."""
    try:
        rules = json.loads(rules_text) if rules_text else {}
    except ValueError:
        return None
    if not isinstance(rules, dict):
        return None
    target = os.path.realpath(folder)
    best, verdict = -1, None
    for rule, level in rules.items():
        if level not in ("TRUST_FOLDER", "TRUST_PARENT", "DO_NOT_TRUST") or not isinstance(rule, str):
            continue
        base = os.path.realpath(os.path.dirname(rule) if level == "TRUST_PARENT" else rule)
        if (target == base or target.startswith(base.rstrip(os.sep) + os.sep)) and len(rule) > best:
            best, verdict = len(rule), level != "DO_NOT_TRUST"
    return verdict


# gemini-cli 0.61.0 checked: GEMINI_CLI_TRUST_WORKSPACE=true and trustedFolders.json load the
# hooks; --skip-trust gets past the refusal but loads none ("Hook registry initialized with 0
# hook entries": the settings are read before the flag takes effect), so it is never offered.
_SKIP_TRUST = ("GEMINI_CLI_TRUST_WORKSPACE=true in its environment. Not --skip-trust: Gemini CLI then "
               "runs without any hooks, and nothing is enforced.")


def gemini_trust_note(folder: Path | None) -> str:
    """What `hook install gemini-cli` says about folder trust (a project install: `folder`)."""
    how = ('To trust it: start `gemini` in it and choose "Trust folder", or run `/permissions trust` '
           'inside Gemini CLI, or add {"%s": "TRUST_FOLDER"} to %s, or run headless (`gemini -p`) with '
           f"{_SKIP_TRUST}")
    if folder is None:
        return ("Gemini CLI blocks project hooks in untrusted folders; these are user hooks "
                "(~/.gemini/settings.json), but headless runs (`gemini -p`) still refuse an untrusted "
                f"folder: trust it, or run with {_SKIP_TRUST}")
    rules = gemini_trusted_folders_path()
    try:
        text = rules.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError):
        text = None
    trusted = gemini_trust(folder, text)
    state = ("it is trusted" if trusted else "it is marked DO_NOT_TRUST" if trusted is False
             else "it is not trusted yet")
    note = (f"Gemini CLI runs a project's hooks only in a trusted folder ({folder}: {state}, "
            f"per {rules}); in an untrusted one nothing is enforced.")
    return note if trusted else note + " " + how % (folder, rules)
