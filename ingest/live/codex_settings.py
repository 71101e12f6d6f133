"""What `loopledger hook install codex` reads of Codex CLI's own configuration, and says.

The hooks go into hooks.json (loopledger.live.hook_settings edits it as it edits Claude Code's
settings.json: same shape). Codex also reads config.toml beside it, and three of its switches
decide whether those hooks ever run (checked with Codex CLI 0.171.0):
- `[features] hooks = false` (or the older `codex_hooks = false`) turns every hook off;
- a project's `.codex/` layer is loaded only in a trusted project
  (`[projects."/abs/path"] trust_level = "trusted"` in the user's config.toml);
- a new or changed hook runs only after the person reviewed and trusted it: Codex keeps that in
  the user's config.toml as `[hooks.state."<file>:<event>:<group>:<handler>"] trusted_hash`.
A config.toml that is not valid TOML is refused (Codex would not start with it either), naming
the file, line and column; nothing is written then.
"""

from __future__ import annotations

import json
import os
import re
import tomllib
from pathlib import Path
from typing import Any

from loopledger.live.codex import codex_home
from loopledger.live.hook_settings import SettingsError


def read_config(path: Path) -> dict[str, Any]:
    """config.toml as a table ({} when there is none); SettingsError naming the file and the
    line when it is not TOML."""
    try:
        raw = path.read_bytes()
    except FileNotFoundError:
        return {}
    except OSError as exc:
        raise SettingsError(f"{path}: cannot read it: {exc.strerror or exc}") from None
    try:
        return tomllib.loads(raw.decode("utf-8"))
    except UnicodeDecodeError as exc:
        raise SettingsError(f"{path}: not UTF-8 text ({exc.reason} at byte {exc.start})") from None
    except tomllib.TOMLDecodeError as exc:
        raise SettingsError(f"{path}: not valid TOML: {exc}") from None


def _event_key(event: str) -> str:
    return re.sub(r"(?<!^)(?=[A-Z])", "_", event).lower()  # PreToolUse -> pre_tool_use


def trust_keys(hooks_file: Path, ours: Any) -> list[str]:
    """The keys Codex records its trust of our hooks under: `<file>:<event>:<group>:<handler>`
    for each of our groups in hooks.json (`ours(command)` tells ours apart)."""
    try:
        doc = json.loads(hooks_file.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return []
    keys = []
    events = doc.get("hooks") if isinstance(doc, dict) else None
    for event, groups in (events or {}).items() if isinstance(events, dict) else ():
        for g, group in enumerate(groups if isinstance(groups, list) else []):
            for h, hook in enumerate(group.get("hooks") or [] if isinstance(group, dict) else []):
                if isinstance(hook, dict) and isinstance(hook.get("command"), str) and ours(hook["command"]):
                    keys.append(f"{hooks_file}:{_event_key(event)}:{g}:{h}")
    return keys


def _disabled(config: dict[str, Any]) -> bool:
    features = config.get("features")
    return isinstance(features, dict) and (features.get("hooks") is False or features.get("codex_hooks") is False)


def _trusted_project(config: dict[str, Any], folder: Path) -> bool:
    projects = config.get("projects")
    if not isinstance(projects, dict):
        return False
    for name in {str(folder), os.path.realpath(folder)}:
        entry = projects.get(name)
        if isinstance(entry, dict) and entry.get("trust_level") == "trusted":
            return True
    return False


def configs(project: Path | None) -> list[tuple[Path, dict[str, Any]]]:
    """The user's config.toml and, for a project install, the project's, read (SettingsError:
    one is not TOML; `hook install` then writes nothing)."""
    user_config = Path(codex_home()) / "config.toml"
    out = [(user_config, read_config(user_config))]
    if project is not None:
        project_config = project / ".codex" / "config.toml"
        out.append((project_config, read_config(project_config)))
    return out


def install_notes(hooks_file: Path, project: Path | None, ours: Any) -> list[str]:
    """What a person must know after `hook install codex` (SettingsError: a config.toml that is
    not TOML). `project`: the folder of a project install, None for --user."""
    read = configs(project)
    (user_config, user) = read[0]
    notes = []
    for path, config in read:
        if _disabled(config):
            notes.append(f"Codex's hooks are turned off in {path} ([features] hooks = false): nothing is "
                         "enforced until that setting goes.")
    if project is not None and not _trusted_project(user, project):
        notes.append(f"Codex loads a project's .codex/ only in a trusted project ({project}: not trusted yet, per "
                     f"{user_config}). To trust it: start `codex` in it and choose to trust the folder, or run "
                     f'`codex exec --trust` there once, or add [projects."{project}"] trust_level = "trusted" '
                     f"to {user_config}.")
    keys = trust_keys(hooks_file, ours)
    state = user.get("hooks", {}).get("state", {}) if isinstance(user.get("hooks"), dict) else {}
    reviewed = bool(keys) and all(isinstance(state, dict) and isinstance(state.get(k), dict)
                                  and state[k].get("trusted_hash") for k in keys)
    if reviewed:
        notes.append(f"Codex has trusted these hooks before ({user_config}); if it says they changed, review them again "
                     "with /hooks.")
    else:
        notes.append("Codex runs a new or changed hook only after you review and trust it: start `codex`"
                     + (" in the project" if project is not None else "") + ' and choose "Trust all and continue" '
                     'when it says "Hooks need review" (or open /hooks and press t). Until then nothing is '
                     "enforced, and headless runs (`codex exec`) skip the hooks without a word; "
                     "`codex exec --dangerously-bypass-hook-trust` runs them for one invocation without review.")
    return notes
