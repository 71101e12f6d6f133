"""The real agent CLIs from the npm registry, installed once into a cache folder (never into the
repository) for the tests that drive them end to end; a test skips, saying why, when node or npm
is missing or the package cannot be installed (no network).

The versions are pinned: the hook protocols were checked against these releases' bundled code
(Claude Code 2.1.197's PostToolBatch, gemini-cli 0.61.0's trusted folders and tool results) and,
for Codex CLI 0.171.0 and OpenCode 1.18.33, against the clients themselves (their hooks.json /
plugin events, driven in tests/test_live_codex.py and tests/test_live_opencode.py); and the
dashboard's sign-in against oidc-provider 9.13.3.
Set LOOPLEDGER_NPM_CACHE to choose the folder (default ~/.cache/loopledger-tests/npm).
"""

from __future__ import annotations

import fcntl
import os
import shutil
import subprocess
import tempfile
from pathlib import Path

import pytest

CLAUDE_CODE = ("@anthropic-ai/claude-code", "2.1.197")
GEMINI_CLI = ("@google/gemini-cli", "0.61.0")
CODEX_CLI = ("@openai/codex", "0.171.0")
OPENCODE = ("opencode-ai", "1.18.33")
# The OpenID Connect provider the sign-in tests sign into (tests/oidc_provider.mjs, docs/team.md).
OIDC_PROVIDER = ("oidc-provider", "9.13.3")


def cache_root() -> Path:
    env = os.environ.get("LOOPLEDGER_NPM_CACHE")
    return Path(env) if env else Path.home() / ".cache" / "loopledger-tests" / "npm"


def npm_package(name: str, version: str) -> Path:
    """The package's folder (node_modules/NAME) in its own prefix under the cache, installed on
    first use; one installer at a time (a lock file), so parallel test workers share it."""
    if shutil.which("node") is None or shutil.which("npm") is None:
        pytest.skip("node and npm are needed to drive the real client (not on PATH)")
    prefix = cache_root() / f"{name.replace('/', '+')}@{version}"
    folder = prefix / "node_modules" / name
    prefix.mkdir(parents=True, exist_ok=True)
    with open(prefix / ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not (prefix / ".installed").exists():
            proc = subprocess.run(
                ["npm", "install", "--prefix", str(prefix), "--no-audit", "--no-fund", "--no-save",
                 "--loglevel=error", f"{name}@{version}"],
                capture_output=True, text=True, timeout=900)
            if proc.returncode != 0 or not folder.is_dir():
                tail = (proc.stderr or proc.stdout).strip().splitlines()[-3:]
                pytest.skip(f"could not install {name}@{version} from npm: {' / '.join(tail)}")
            (prefix / ".installed").write_text(version)
    return folder


def _works(cmd: list[str]) -> bool:
    try:
        return subprocess.run([*cmd, "--version"], capture_output=True, timeout=120).returncode == 0
    except (OSError, subprocess.TimeoutExpired):
        return False


def claude_code() -> list[str]:
    """The command that runs Claude Code: its native binary (put in place by the package's
    postinstall), else the package's node launcher (when install scripts did not run)."""
    folder = npm_package(*CLAUDE_CODE)
    for cmd in ([str(folder / "bin" / "claude.exe")], ["node", str(folder / "cli-wrapper.cjs")]):
        if _works(cmd):
            return cmd
    pytest.skip(f"{CLAUDE_CODE[0]}@{CLAUDE_CODE[1]} is installed but does not run here (no native binary "
                "for this platform?)")


def gemini_cli() -> list[str]:
    folder = npm_package(*GEMINI_CLI)
    cmd = ["node", str(folder / "bundle" / "gemini.js")]
    if not _works(cmd):
        pytest.skip(f"{GEMINI_CLI[0]}@{GEMINI_CLI[1]} is installed but does not run with this node")
    return cmd


def codex_cli() -> list[str]:
    """Codex CLI's node launcher (it runs the native binary of the platform package npm installed
    beside it)."""
    folder = npm_package(*CODEX_CLI)
    cmd = ["node", str(folder / "bin" / "codex.js")]
    if not _works(cmd):
        pytest.skip(f"{CODEX_CLI[0]}@{CODEX_CLI[1]} is installed but does not run here (no native binary "
                    "for this platform?)")
    return cmd


def opencode() -> list[str]:
    """OpenCode's binary: the one its postinstall put in bin/, else the platform package's."""
    folder = npm_package(*OPENCODE)
    for cmd in ([str(folder / "bin" / "opencode.exe")],
                *[[str(p)] for p in sorted(folder.parent.glob("opencode-*/bin/opencode"))]):
        if _works(cmd):
            return cmd
    pytest.skip(f"{OPENCODE[0]}@{OPENCODE[1]} is installed but does not run here (no binary for this platform?)")


_PLUGIN_DEPS = ("node_modules", "package.json", "package-lock.json")


def opencode_plugin_deps(*folders: Path) -> None:
    """OpenCode installs its plugin SDK (~60 MB of node_modules) into each config folder it
    reads (~/.config/opencode, a project's .opencode/) on its first run there: about half the CPU
    of a short run. A test's fresh folders get the ones an earlier run installed (kept under the
    cache by `keep_opencode_plugin_deps`), as a person's second run finds them; until one is
    kept, OpenCode installs them itself."""
    kept = _kept_plugin_deps()
    if not kept.is_dir():
        return
    for folder in folders:
        folder.mkdir(parents=True, exist_ok=True)
        _copy_plugin_deps(kept, folder)


def _kept_plugin_deps() -> Path:
    return cache_root() / f"opencode-plugin-deps@{OPENCODE[1]}"


def _copy_plugin_deps(src: Path, dst: Path) -> None:
    for name in _PLUGIN_DEPS:
        if (src / name).is_dir():
            shutil.copytree(src / name, dst / name, symlinks=True)
        else:
            shutil.copy2(src / name, dst / name)


def keep_opencode_plugin_deps(folder: Path) -> None:
    """Keep the plugin SDK OpenCode installed in `folder` for the next tests (once; a rename, so
    a parallel worker never sees half a copy)."""
    kept = _kept_plugin_deps()
    if kept.is_dir() or not all((folder / name).exists() for name in _PLUGIN_DEPS):
        return
    staging = Path(tempfile.mkdtemp(prefix=".opencode-plugin-deps-", dir=cache_root()))
    _copy_plugin_deps(folder, staging)
    try:
        staging.rename(kept)
    except OSError:  # another worker kept its copy first
        shutil.rmtree(staging, ignore_errors=True)


def npm_cache() -> Path:
    """npm's download cache for what a client installs at run time (OpenCode installs its plugin
    SDK into a project's .opencode/), shared by the tests so it is fetched once."""
    folder = cache_root() / "npm-cache"
    folder.mkdir(parents=True, exist_ok=True)
    return folder


RESIDENT_IDLE_S = 5


def resident_pids(home: Path) -> list[int]:
    """The resident guards running for an agent whose HOME is `home` (their lock files name
    them; a pid is taken only while it is still a resident, never a recycled one)."""
    pids = []
    for lock in (home / ".cache" / "loopledger" / "run").glob("*.lock"):
        try:
            pid = int(lock.read_text().strip())
            cmdline = Path(f"/proc/{pid}/cmdline").read_bytes()
        except (ValueError, OSError):
            continue
        if b"loopledger.live.resident" in cmdline:
            pids.append(pid)
    return pids


def stop_residents(home: Path) -> list[int]:
    """End the residents `resident_pids` finds (SIGTERM, then waited for); the pids ended."""
    import signal
    import time

    pids = resident_pids(home)
    for pid in pids:
        try:
            os.kill(pid, signal.SIGTERM)
        except ProcessLookupError:
            pass
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline and resident_pids(home):
        time.sleep(0.05)
    return pids


def clean_env(home: Path, **extra: str) -> dict[str, str]:
    """An environment for an agent CLI under test: its own HOME (no person's settings, sessions
    or credentials), no telemetry, no update checks; PATH kept so node and a shell are found.
    The agent hands this environment to its hooks, so the resident guard they start (in
    HOME's ~/.cache/loopledger/run) goes after RESIDENT_IDLE_S idle, not the 10 minutes a person's
    does; stop_residents(home) ends it at once."""
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": str(home), "TERM": "dumb",
           "LANG": "C.UTF-8", "NO_COLOR": "1", "LOOPLEDGER_HOOK_RESIDENT_IDLE": str(RESIDENT_IDLE_S),
           "DISABLE_AUTOUPDATER": "1", "DISABLE_TELEMETRY": "1", "DISABLE_ERROR_REPORTING": "1",
           "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1"}
    env.update(extra)
    return env
