"""`loopledger hook install | uninstall`: a person's settings.json stays byte for byte theirs
apart from our entries; install twice changes nothing; uninstall gives the original back."""

from __future__ import annotations

import difflib
import json
import subprocess
from pathlib import Path

import pytest
from loopledger.ledger import migrate
from loopledger.ledger.engine import make_engine
from loopledger.live import hook_settings as hs

from tests.live_support import BIN

# As Claude Code and people write it: two-space JSON, a schema line, permissions, the person's own
# hooks (one compact entry on a line), an empty event list, non-ASCII text, no trailing newline.
REALISTIC = """{
  "$schema": "https://json.schemastore.org/claude-code-settings.json",
  "permissions": {
    "allow": [
      "Bash(npm run lint)",
      "Bash(npm test:*)",
      "Read(~/.zshrc)"
    ],
    "deny": ["Bash(curl:*)", "Read(./.env)"],
    "defaultMode": "acceptEdits"
  },
  "env": {"CLAUDE_CODE_ENABLE_TELEMETRY": "0", "GREETING": "héllo ✓ \\u00e9"},
  "hooks": {
    "PostToolUse": [
      {
        "matcher": "Edit|MultiEdit|Write",
        "hooks": [
          { "type": "command", "command": "npx prettier --write \\"$CLAUDE_FILE_PATHS\\"", "timeout": 30 }
        ]
      }
    ],
    "Notification": []
  },
  "model": "claude-sonnet-4-5",
  "cleanupPeriodDays": 20,
  "includeCoAuthoredBy": false
}"""

WITHOUT_HOOKS = '{\n    "model": "opus",\n    "statusLine": {"type": "command", "command": "~/bin/status.sh"}\n}\n'


def _cli(*args: str, cwd: Path | None = None, env: dict | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([str(BIN), "hook", *args], capture_output=True, text=True, cwd=cwd, env=env)


def _only_insertions(before: str, after: str) -> list[str]:
    """The text `after` adds to `before`, asserting nothing of `before` was changed or removed."""
    added = []
    for op, i1, i2, j1, j2 in difflib.SequenceMatcher(None, before, after, autojunk=False).get_opcodes():
        assert op in ("equal", "insert"), (op, before[i1:i2], after[j1:j2])
        if op == "insert":
            added.append(after[j1:j2])
    return added


def _new_ledger(db: Path) -> Path:
    # `enforce` works on an existing ledger only (a mistyped --db is an error): made here first.
    eng = make_engine(f"sqlite:///{db}")
    migrate.upgrade(eng)
    eng.dispose()
    subprocess.run([str(BIN), "enforce", "--default", "--db", str(db)], check=True, capture_output=True)
    return db


@pytest.fixture
def ledger(tmp_path):
    return _new_ledger(tmp_path / "ledger.sqlite")


@pytest.mark.parametrize("original", [REALISTIC, WITHOUT_HOOKS], ids=["with-hooks", "without-hooks"])
def test_install_adds_only_our_entries_and_uninstall_restores_every_byte(tmp_path, ledger, original):
    project = tmp_path / "shop"
    (project / ".claude").mkdir(parents=True)
    settings = project / ".claude" / "settings.json"
    settings.write_text(original, encoding="utf-8")

    proc = _cli("install", "claude-code", "--project", str(project), "--db", str(ledger))
    assert proc.returncode == 0, proc.stderr
    installed = settings.read_text(encoding="utf-8")
    added = "".join(_only_insertions(original, installed))
    assert "npx prettier" not in added and "permissions" not in added
    doc = json.loads(installed)
    command = f"{BIN} hook claude-code --db {ledger}"
    for event in ("SessionStart", "UserPromptSubmit", "PreToolUse", "PostToolUse", "PostToolUseFailure"):
        ours = [h for g in doc["hooks"][event] for h in g["hooks"] if h["command"] == command]
        assert len(ours) == 1 and ours[0]["type"] == "command", event
    before = json.loads(original)
    assert {k: v for k, v in doc.items() if k != "hooks"} == {k: v for k, v in before.items() if k != "hooks"}
    backup = settings.with_name("settings.json" + hs.BACKUP_SUFFIX)
    assert backup.read_bytes() == original.encode()

    again = _cli("install", "claude-code", "--project", str(project), "--db", str(ledger))
    assert again.returncode == 0 and "nothing changed" in again.stdout
    assert settings.read_text(encoding="utf-8") == installed  # idempotent

    proc = _cli("uninstall", "claude-code", "--project", str(project))
    assert proc.returncode == 0, proc.stderr
    assert settings.read_bytes() == original.encode()  # byte for byte
    assert "nothing changed" in _cli("uninstall", "claude-code", "--project", str(project)).stdout


def test_the_installed_command_is_the_hook(tmp_path, ledger):
    # ladder judges keys alone: three identical calls are refused without any answer fed back
    subprocess.run([str(BIN), "enforce", "ladder", "--db", str(ledger)], check=True, capture_output=True)
    project = tmp_path / "p"
    project.mkdir()
    assert _cli("install", "claude-code", "--project", str(project), "--db", str(ledger)).returncode == 0
    doc = json.loads((project / ".claude" / "settings.json").read_text())
    (group,) = doc["hooks"]["PreToolUse"]
    assert group["matcher"] == "*"
    command = group["hooks"][0]["command"]
    event = {"session_id": "s", "transcript_path": str(tmp_path / "s.jsonl"), "cwd": str(project),
             "hook_event_name": "PreToolUse", "tool_name": "Read", "tool_input": {"file_path": "/x"},
             "tool_use_id": "toolu_1"}
    # Claude Code runs the command through a shell, from the project folder.
    for _ in range(3):
        proc = subprocess.run(command, shell=True, input=json.dumps(event), capture_output=True, text=True,
                              cwd=project)
        assert proc.returncode == 0
    assert json.loads(proc.stdout)["hookSpecificOutput"]["permissionDecision"] == "deny"


def test_user_settings_and_a_changed_ledger(tmp_path, ledger):
    home = tmp_path / "home"
    home.mkdir()
    env = {"HOME": str(home), "PATH": "/usr/bin:/bin"}
    assert _cli("install", "claude-code", "--user", "--db", str(ledger), env=env).returncode == 0
    settings = home / ".claude" / "settings.json"
    first = json.loads(settings.read_text())
    assert len(first["hooks"]["PreToolUse"]) == 1
    other = _new_ledger(tmp_path / "other.sqlite")
    assert _cli("install", "claude-code", "--user", "--db", str(other), env=env).returncode == 0
    doc = json.loads(settings.read_text())
    (group,) = doc["hooks"]["PreToolUse"]  # replaced, not added twice
    assert group["hooks"][0]["command"].endswith(str(other))
    assert _cli("uninstall", "claude-code", "--user", env=env).returncode == 0
    assert not settings.exists() and not (home / ".claude").exists()  # install made both: both gone


def test_gemini_settings(tmp_path, ledger):
    project = tmp_path / "g"
    (project / ".gemini").mkdir(parents=True)
    original = '{\n  "theme": "GitHub",\n  "hooksConfig": {"enabled": true}\n}\n'
    (project / ".gemini" / "settings.json").write_text(original)
    assert _cli("install", "gemini-cli", "--project", str(project), "--db", str(ledger)).returncode == 0
    doc = json.loads((project / ".gemini" / "settings.json").read_text())
    assert set(doc["hooks"]) == {"SessionStart", "BeforeAgent", "BeforeTool", "AfterTool"}
    hook = doc["hooks"]["BeforeTool"][0]["hooks"][0]
    assert hook["type"] == "command" and hook["timeout"] == hs.TIMEOUT_S * 1000 and "gemini-cli" in hook["command"]
    assert _cli("uninstall", "gemini-cli", "--project", str(project)).returncode == 0
    assert (project / ".gemini" / "settings.json").read_text() == original


def test_settings_we_must_not_touch(tmp_path, ledger):
    project = tmp_path / "bad"
    (project / ".claude").mkdir(parents=True)
    settings = project / ".claude" / "settings.json"
    for text in ('{"hooks": [1, 2]}', "{ not json", "[]"):
        settings.write_text(text)
        proc = _cli("install", "claude-code", "--project", str(project), "--db", str(ledger))
        assert proc.returncode == 1 and "error:" in proc.stderr and "Traceback" not in proc.stderr
        assert settings.read_text() == text  # left alone


# ── point 11: hook install surprises ─────────────────────────────────────────────────────────


def _listing(folder: Path) -> dict[str, bytes]:
    return {str(p.relative_to(folder)): p.read_bytes() if p.is_file() else b"<dir>" for p in sorted(folder.rglob("*"))}


def test_point_11_project_alone_means_the_current_folder(tmp_path, ledger):
    project = tmp_path / "shop"
    project.mkdir()
    for args in (("--project",), ("--project", "--db", str(ledger)), ("--db", str(ledger), "--project")):
        extra = () if "--db" in args else ("--db", str(ledger))
        proc = _cli("install", "claude-code", *extra, *args, cwd=project)
        assert proc.returncode == 0, proc.stderr
        assert (project / ".claude" / "settings.json").is_file()
        proc = _cli("uninstall", "claude-code", "--project", cwd=project)
        assert proc.returncode == 0, proc.stderr
        assert not (project / ".claude").exists()


def test_point_11_the_hook_names_the_ledger_the_person_uses_and_never_creates_one(tmp_path, ledger):
    project = tmp_path / "shop"
    project.mkdir()
    env = {"HOME": str(tmp_path / "home"), "PATH": "/usr/bin:/bin"}
    # Nothing named, no ledger here: refused, the path said, nothing created anywhere.
    proc = _cli("install", "claude-code", "--project", str(project), cwd=project, env=env)
    assert proc.returncode == 2 and str(project / "ledger.sqlite") in " ".join(proc.stderr.split())
    assert _listing(project) == {}
    # The ledger the dashboard opens (here through LOOPLEDGER_DB, as `loopledger dashboard` resolves
    # it): named by absolute path in the hook, and printed.
    proc = _cli("install", "claude-code", "--project", str(project), cwd=project,
                env={**env, "LOOPLEDGER_DB": str(ledger)})
    assert proc.returncode == 0, proc.stderr
    assert f"ledger: {ledger}" in proc.stdout
    doc = json.loads((project / ".claude" / "settings.json").read_text())
    assert {h["command"] for groups in doc["hooks"].values() for g in groups for h in g["hooks"]} == \
        {f"{BIN} hook claude-code --db {ledger}"}
    # A relative --db is the person's path from where they stand, made absolute.
    proc = _cli("install", "claude-code", "--project", "--db", "../ledger.sqlite", cwd=project, env=env)
    assert proc.returncode == 0 and f"ledger: {ledger}" in proc.stdout
    assert not (project / "ledger.sqlite").exists()


def test_point_11_uninstall_restores_exactly_what_was_there(tmp_path, ledger):
    cases = {
        "no folder": None,
        "empty folder": {},
        "realistic": {"settings.json": REALISTIC.encode()},
        "empty file": {"settings.json": b""},
        "empty object": {"settings.json": b"{}"},
        "beside other files": {"settings.json": WITHOUT_HOOKS.encode(), "settings.local.json": b'{"x": 1}\n'},
    }
    for name, files in cases.items():
        project = tmp_path / name.replace(" ", "-")
        project.mkdir()
        if files is not None:
            (project / ".claude").mkdir()
            for fname, data in files.items():
                (project / ".claude" / fname).write_bytes(data)
        before = _listing(project)
        for _ in range(2):  # a second install (same ledger) changes nothing that matters
            assert _cli("install", "claude-code", "--project", str(project), "--db", str(ledger)).returncode == 0
        assert "PreToolUse" in (project / ".claude" / "settings.json").read_text()
        proc = _cli("uninstall", "claude-code", "--project", str(project))
        assert proc.returncode == 0, proc.stderr
        assert _listing(project) == before, name  # byte for byte, nothing of ours left


def test_point_11_uninstall_keeps_what_the_person_changed_since(tmp_path, ledger):
    project = tmp_path / "shop"
    (project / ".claude").mkdir(parents=True)
    settings = project / ".claude" / "settings.json"
    settings.write_text(WITHOUT_HOOKS)
    assert _cli("install", "claude-code", "--project", str(project), "--db", str(ledger)).returncode == 0
    settings.write_text(settings.read_text().replace('"opus"', '"sonnet"'))  # the person's own edit
    proc = _cli("uninstall", "claude-code", "--project", str(project))
    assert proc.returncode == 0
    assert settings.read_text() == WITHOUT_HOOKS.replace('"opus"', '"sonnet"')
    backup = settings.with_name("settings.json" + hs.BACKUP_SUFFIX)
    assert backup.read_text() == WITHOUT_HOOKS and str(backup) in " ".join(proc.stdout.split())
    # Created by install, edited since: the person's settings stay, the file too.
    fresh = tmp_path / "fresh"
    fresh.mkdir()
    assert _cli("install", "claude-code", "--project", str(fresh), "--db", str(ledger)).returncode == 0
    made = fresh / ".claude" / "settings.json"
    doc = json.loads(made.read_text())
    made.write_text(json.dumps({**doc, "model": "opus"}, indent=2))
    assert _cli("uninstall", "claude-code", "--project", str(fresh)).returncode == 0
    assert json.loads(made.read_text()) == {"model": "opus"}
    assert not made.with_name("settings.json" + hs.CREATED_SUFFIX).exists()
