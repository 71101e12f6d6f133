"""The built wheel in a fresh virtualenv that also holds a package named `app` (a FastAPI or
Flask project's usual name): both import, and the manual's guard examples (docs/guards.md's Python,
and docs/live.md's Node client of `loopledger guard`) run against the installed wheel, not this checkout."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import sysconfig
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
DOCS = ROOT / "docs"


def _blocks(lang: str, doc: str, after: str) -> list[str]:
    """A manual page's ```lang code blocks from the section titled `after` on."""
    text = (DOCS / doc).read_text(encoding="utf-8")
    text = text[text.index(after):]
    return re.findall(rf"```{lang}\n(.*?)```", text, re.S)


@pytest.fixture(scope="module")
def fresh_venv(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("wheel")
    proj = tmp / "proj"
    proj.mkdir()
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(ROOT / name, proj / name)
    for name in ("ingest", "app"):
        shutil.copytree(ROOT / name, proj / name, ignore=shutil.ignore_patterns("__pycache__"))
    dist = tmp / "dist"
    subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w", str(dist), str(proj)],
                   check=True, capture_output=True)
    (wheel,) = dist.glob("loopledger-*.whl")
    tops = {n.split("/")[0] for n in zipfile.ZipFile(wheel).namelist() if ".dist-info/" not in n}
    assert tops == {"loopledger"}
    venv = tmp / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    py = venv / "bin" / "python"
    subprocess.run([str(py), "-m", "pip", "install", "-q", "--no-deps", str(wheel)], check=True,
                   capture_output=True)
    site = Path(subprocess.check_output([str(py), "-c", "import sysconfig; print(sysconfig.get_path('purelib'))"],
                                        text=True).strip())
    # The dependencies (streamlit, SQLAlchemy, …) from this test's environment, appended after the
    # venv's own site-packages; this environment's editable loopledger is not (its .pth is not read).
    (site / "deps.pth").write_text(sysconfig.get_path("purelib") + "\n")
    user_app = site / "app"
    user_app.mkdir()
    (user_app / "__init__.py").write_text('NAME = "the user\'s own app"\n')
    work = tmp / "work"
    work.mkdir()
    return venv, work


def test_the_wheel_and_a_users_app_package_both_import(fresh_venv):
    venv, work = fresh_venv
    code = ("import app, loopledger, loopledger.app, loopledger.guards as g\n"
            "print(app.NAME); print(loopledger.__file__); print(g.API_VERSION)\n"
            "print(sorted(set(g.__all__) - set(dir(g))))")
    out = subprocess.run([str(venv / "bin" / "python"), "-c", code], cwd=work, capture_output=True, text=True,
                         check=True).stdout.splitlines()
    assert out[0] == "the user's own app"
    assert out[1].startswith(str(venv)) and str(ROOT) not in out[1]  # the wheel, not this checkout
    assert out[2] == "1.2" and out[3] == "[]"


def test_readme_guard_examples_run_against_the_installed_wheel(fresh_venv):
    venv, work = fresh_venv
    env = dict(os.environ, PATH=f"{venv / 'bin'}{os.pathsep}{os.environ['PATH']}")
    env.pop("LOOPLEDGER_DATABASE_URL", None)
    env.pop("LOOPLEDGER_DB", None)
    # A ledger to enforce from, made by the installed command (`enforce` chooses in an existing
    # ledger only); ladder (no longer the live default) for the example's graded allow → warn →
    # block → halt.
    (work / "no-transcripts-yet").mkdir()
    subprocess.run(["loopledger", "ingest", "no-transcripts-yet", "--db", "ledger.sqlite"], cwd=work, env=env,
                   check=True, capture_output=True)
    subprocess.run(["loopledger", "enforce", "ladder", "--db", "ledger.sqlite"], cwd=work, env=env, check=True,
                   capture_output=True)
    blocks = _blocks("python", "guards.md", "# The guards in your own agent loop")
    assert len(blocks) >= 5
    for code in blocks:
        proc = subprocess.run([str(venv / "bin" / "python"), "-c", code], cwd=work, env=env, capture_output=True,
                              text=True)
        assert proc.returncode == 0, (code, proc.stderr)
    python_api = subprocess.run([str(venv / "bin" / "python"), "-c", blocks[-1]], cwd=work, env=env,
                                capture_output=True, text=True).stdout.split()
    assert python_api == ["allow", "warn", "block", "halt"]
    (js,) = _blocks("js", "live.md", "## Guard any agent")
    (work / "guard-client.mjs").write_text(js)
    node = shutil.which("node")
    if node is None:
        pytest.skip("no node on this machine")
    proc = subprocess.run([node, "guard-client.mjs"], cwd=work, env=env, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.splitlines() == ["call-0 allow", "call-1 warn", "call-2 block", "call-3 halt"]
    # Both clients' decisions are in the ledger, marked enforced.
    import sqlite3

    with sqlite3.connect(work / "ledger.sqlite") as raw:
        rows = raw.execute("SELECT s.key, e.origin, COUNT(*) FROM enforced_checks e JOIN sessions s "
                           "ON s.id = e.session_id GROUP BY s.key, e.origin ORDER BY s.key").fetchall()
    assert rows == [("demo", "guard", 4), ("nightly-run", "python", 8)]


def test_the_wheel_ships_and_installs_the_opencode_plugin(fresh_venv, tmp_path):
    venv, _ = fresh_venv
    exe = venv / "bin" / "loopledger"
    ledger, project = tmp_path / "ledger.sqlite", tmp_path / "shop"
    project.mkdir()
    env = {"HOME": str(tmp_path), "PATH": f"{venv / 'bin'}:/usr/bin:/bin"}
    # `enforce` chooses in an existing ledger only: the installed command makes one first.
    (tmp_path / "none-yet").mkdir()
    subprocess.run([str(exe), "ingest", str(tmp_path / "none-yet"), "--db", str(ledger)], check=True,
                   capture_output=True, env=env)
    subprocess.run([str(exe), "enforce", "--default", "--db", str(ledger)], check=True, capture_output=True, env=env)
    proc = subprocess.run([str(exe), "hook", "install", "opencode", "--project", str(project), "--db", str(ledger)],
                          capture_output=True, text=True, env=env)
    assert proc.returncode == 0, proc.stderr
    plugin = (project / ".opencode" / "plugins" / "loopledger.js").read_text()
    assert f'"command": ["{exe}", "guard", "--db", "{ledger}", "--origin", "opencode"]' in plugin
    assert "export const LoopLedger" in plugin
