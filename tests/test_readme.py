"""README.md and docs/ tell the truth about the CLI (sqlite-utils' habit): the reference in
docs/cli.md is the commands' own --help, every command and option is documented, every command
line in README.md runs, and every example in the manual parses or runs."""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest
import typer.main
from loopledger.cli import docs as cli_docs
from loopledger.cli.app import app

ROOT = Path(__file__).resolve().parent.parent
README = (ROOT / "README.md").read_text(encoding="utf-8")
CLI_MD = (ROOT / "docs" / "cli.md").read_text(encoding="utf-8")
MANUAL = {p.name: p.read_text(encoding="utf-8") for p in sorted((ROOT / "docs").glob("*.md"))}
BIN = Path(sys.executable).with_name("loopledger")
GROUP = typer.main.get_command(app)


def _blocks(lang: str, text: str = README) -> list[str]:
    return re.findall(rf"^```{lang}\n(.*?)^```", text, flags=re.S | re.M)


def _command_lines(text: str) -> list[str]:
    """Every loopledger command line in a text's sh blocks, comments and [optional] parts cut."""
    lines = []
    for block in _blocks("sh", text):
        for line in block.splitlines():
            line = line.split("  #")[0].strip()
            # A line run in the background or into a file parses as the command alone.
            line = re.sub(r"\s+(&|[12]?>.*)$", "", line)
            if line.startswith(".venv/bin/loopledger"):
                lines.append(re.sub(r"\s*\[[^\]]*\]", "", line))
    return lines


def _examples() -> list[str]:
    return _command_lines(README) + [ln for text in MANUAL.values() for ln in _command_lines(text)]


def test_the_reference_is_the_commands_own_help():
    assert cli_docs.reference() in CLI_MD, "docs/cli.md's reference is stale: run python -m loopledger.cli.docs"


def _prose() -> str:
    """Everything people read about the commands, but the generated reference itself."""
    return "\n".join([README, CLI_MD.split(cli_docs.START)[0],
                      *(t for name, t in MANUAL.items() if name != "cli.md")])


COMMANDS = dict(cli_docs.commands(GROUP))


@pytest.mark.parametrize("name", list(COMMANDS))
def test_every_command_and_option_is_documented(name):
    cmd = COMMANDS[name]
    assert name in _prose(), f"no prose mentions `{name}`"
    section = CLI_MD.split(f"#### `{name}`\n", 1)[1].split("####", 1)[0]
    for param in cmd.params:
        if getattr(param, "hidden", False):
            continue  # not for people (a hook's --agent-pid, set by its own fast path)
        for opt in [*param.opts, *getattr(param, "secondary_opts", [])]:
            if opt.startswith("--"):
                assert opt in section, f"`{name}`: {opt} is not in docs/cli.md"


@pytest.mark.parametrize("line", _examples())
def test_every_example_parses(line):
    """Each example's flags exist and its values convert (the command does not run)."""
    args = shlex.split(line)[1:]
    if args == ["--help"]:
        return
    cmd, name = GROUP.commands[args[0]], f"loopledger {args[0]}"
    while getattr(cmd, "commands", None) and len(args) > 1 and args[1] in cmd.commands:
        args = args[1:]
        cmd, name = cmd.commands[args[0]], f"{name} {args[0]}"
    cmd.make_context(name, args[1:])


def test_the_readme_is_a_front_door():
    assert len(README.splitlines()) <= 200
    for link in re.findall(r"\]\(([^)#]+)\)", README):
        assert (ROOT / link).exists(), f"README links to {link}, which is not there"


def test_every_readme_command_runs(tmp_path):
    """Every command line in README.md, in order, in a scratch folder holding sample_data."""
    (tmp_path / "sample_data").symlink_to(ROOT / "sample_data")
    env = {k: v for k, v in os.environ.items() if not k.startswith("LOOPLEDGER_")}
    env["HOME"] = str(tmp_path / "home")  # `hook install --user` or a default ledger never touch the real one
    lines = [ln for ln in _command_lines(README)]
    for line in lines:
        p = subprocess.run([str(BIN), *shlex.split(line)[1:]], cwd=tmp_path, capture_output=True, text=True,
                           timeout=300, env=env)
        # 3 = finished with quarantined lines: sample_data holds a deliberately malformed line.
        assert p.returncode in (0, 3), f"{line}\n{p.stderr}"
    assert len(lines) >= 8


def _python_examples() -> list[tuple[str, int]]:
    # the manual's runnable examples (plugins.md holds fragments of a package, run by test_plugin_example)
    return [(name, i) for name in ("guards.md", "live.md") for i in range(len(_blocks("python", MANUAL[name])))]


@pytest.mark.parametrize(("doc", "index"), _python_examples())
def test_the_python_examples_run(doc, index, tmp_path, monkeypatch):
    from loopledger.ledger import migrate
    from loopledger.ledger.engine import make_engine, sqlite_url

    monkeypatch.chdir(tmp_path)
    eng = make_engine(sqlite_url(tmp_path / "ledger.sqlite"))  # the ./ledger.sqlite examples name
    migrate.upgrade(eng)
    eng.dispose()
    code = _blocks("python", MANUAL[doc])[index]
    exec(compile(code, f"docs/{doc} python block {index}", "exec"), {})
