"""README.md tells the truth about the CLI (sqlite-utils' habit): its reference is the commands'
own --help, every command and option is documented, and its examples run."""

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
BIN = Path(sys.executable).with_name("loopledger")
GROUP = typer.main.get_command(app)


def _blocks(lang: str) -> list[str]:
    return re.findall(rf"^```{lang}\n(.*?)^```", README, flags=re.S | re.M)


def _examples() -> list[str]:
    """Every loopledger command line in the README's sh blocks, comments and [optional] parts cut."""
    lines = []
    for block in _blocks("sh"):
        for line in block.splitlines():
            line = line.split("  #")[0].strip()
            if line.startswith(".venv/bin/loopledger"):
                lines.append(re.sub(r"\s*\[[^\]]*\]", "", line))
    return lines


def test_the_reference_is_the_commands_own_help():
    assert cli_docs.reference() in README, "README's CLI reference is stale: run python -m loopledger.cli.docs"


def _prose() -> str:
    return README.split(cli_docs.START)[0]


COMMANDS = dict(cli_docs.commands(GROUP))


@pytest.mark.parametrize("name", list(COMMANDS))
def test_every_command_and_option_is_documented(name):
    cmd = COMMANDS[name]
    assert name in _prose(), f"no prose mentions `{name}`"
    section = README.split(f"#### `{name}`\n", 1)[1].split("####", 1)[0]
    for param in cmd.params:
        for opt in [*param.opts, *getattr(param, "secondary_opts", [])]:
            if opt.startswith("--"):
                assert opt in section, f"`{name}`: {opt} is not in the README"


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


def test_the_sample_data_examples_run(tmp_path):
    (tmp_path / "sample_data").symlink_to(ROOT / "sample_data")
    block = next(b for b in _blocks("sh") if "demo.sqlite" in b)
    env = {k: v for k, v in os.environ.items() if not k.startswith("LOOPLEDGER_")}
    ran = 0
    for line in block.splitlines():
        if not line.startswith(".venv/bin/loopledger"):
            continue
        p = subprocess.run([str(BIN), *shlex.split(line)[1:]], cwd=tmp_path, capture_output=True, text=True,
                           timeout=300, env=env)
        # 3 = finished with quarantined lines: sample_data holds a deliberately malformed line.
        assert p.returncode in (0, 3), f"{line}\n{p.stderr}"
        ran += 1
    assert ran >= 5


@pytest.mark.parametrize("index", range(len(_blocks("python"))))
def test_the_python_examples_run(index, tmp_path, monkeypatch):
    from loopledger.ledger import migrate
    from loopledger.ledger.engine import make_engine, sqlite_url

    monkeypatch.chdir(tmp_path)
    eng = make_engine(sqlite_url(tmp_path / "ledger.sqlite"))  # the ./ledger.sqlite examples name
    migrate.upgrade(eng)
    eng.dispose()
    exec(compile(_blocks("python")[index], f"README.md python block {index}", "exec"), {})
