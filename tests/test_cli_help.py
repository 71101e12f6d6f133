"""`loopledger --help` and each command's --help explain themselves (the console script, for real)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

BIN = Path(sys.executable).with_name("loopledger")
COMMANDS = ("ingest", "watch", "recheck", "policies", "replay", "sweep", "dashboard")


def _help(*args: str) -> str:
    out = subprocess.run([str(BIN), *args, "--help"], capture_output=True, text=True, timeout=60,
                         env={"COLUMNS": "200", "PATH": "/usr/bin:/bin", "TERM": "dumb"})
    assert out.returncode == 0, out.stderr
    return out.stdout


def test_top_level_help_names_every_command_and_the_formats():
    text = _help()
    for cmd in COMMANDS:
        assert cmd in text
    for fmt in ("Claude Code", "Codex", "Gemini", "SWE-agent", "OpenHands", "ATIF"):
        assert fmt in text


@pytest.mark.parametrize("cmd", COMMANDS)
def test_each_command_help_says_what_it_does(cmd):
    text = _help(cmd)
    assert f"loopledger {cmd}" in text
    assert "--help" in text
    if cmd not in ("replay",):
        assert "--db" in text, "every ledger command says how the ledger is chosen"


def test_ingest_help_explains_policies_config_and_exit_status():
    text = _help("ingest")
    assert "[[policy]]" in text, "the config table syntax survives rich markup"
    assert "window:window=10" in text
    assert "Exit status" in text and "quarantined" in text


def test_bad_usage_exits_2_with_a_message():
    out = subprocess.run([str(BIN), "ingest"], capture_output=True, text=True, timeout=60)
    assert out.returncode == 2
    assert "Missing argument" in out.stderr or "PATHS" in out.stderr


@pytest.mark.parametrize("cmd", [["ingest", "sample_data/anthropic"], ["policies"], ["recheck", "--policy", "window"],
                                 ["sweep", "--detector", "window", "--param", "threshold=2..3"]])
def test_a_ledger_that_cannot_be_opened_is_one_clear_line_and_exit_1(cmd, tmp_path):
    blocker = tmp_path / "not-a-folder"
    blocker.write_text("a file where the ledger's folder should be")
    db = blocker / "ledger.sqlite"
    out = subprocess.run([str(BIN), *cmd, "--db", str(db)], capture_output=True, text=True, timeout=120,
                         cwd=Path(__file__).resolve().parent.parent)
    assert out.returncode == 1, out.stderr
    assert "cannot open the ledger" in out.stderr and str(blocker) in out.stderr
    assert "Traceback" not in out.stderr and "╭" not in out.stderr


def test_an_unreachable_postgresql_ledger_names_the_server_not_the_password():
    url = "postgresql://someone:s3cret-pw@127.0.0.1:1/ledger"
    out = subprocess.run([str(BIN), "policies", "--db", url], capture_output=True, text=True, timeout=120)
    assert out.returncode == 1
    assert "cannot open the ledger at postgresql+psycopg://someone:***@127.0.0.1:1/ledger" in out.stderr
    assert "s3cret-pw" not in out.stderr + out.stdout
