"""The CLI says true things (issue 13 point 10), each checked on a real process."""

from __future__ import annotations

import os
import re
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest
import typer.main
from loopledger.cli.app import app
from loopledger.cli.commands import AUTO_JOBS_BYTES

BIN = Path(sys.executable).with_name("loopledger")
SAMPLE = Path(__file__).resolve().parent.parent / "sample_data" / "anthropic"
KNOWN = "claude-code, codex, copilot-cli, gemini-cli"


def run(*args, cwd, timeout=120) -> subprocess.CompletedProcess:
    return subprocess.run([str(BIN), *map(str, args)], capture_output=True, text=True, timeout=timeout, cwd=cwd,
                          env={k: v for k, v in os.environ.items() if not k.startswith("LOOPLEDGER_")})


def _count(db: Path, table: str) -> int:
    with sqlite3.connect(db) as conn:
        return conn.execute(f"SELECT count(*) FROM {table}").fetchone()[0]


def test_recheck_has_its_own_help_and_reads_loopledger_toml(tmp_path):
    help_text = run("recheck", "--help", cwd=tmp_path).stdout
    assert "rechecked" in help_text and "added to the defaults" not in help_text
    assert run("ingest", SAMPLE, "--db", "l.sqlite", cwd=tmp_path).returncode == 0
    (tmp_path / "loopledger.toml").write_text('[[policy]]\ndetector = "window"\nparams = {threshold = 5}\n')
    p = run("recheck", "--db", "l.sqlite", cwd=tmp_path)
    assert p.returncode == 0, p.stderr  # it used to exit 2: "give at least one --policy"
    assert "Recheck: 1 policy" in p.stdout
    assert "files" not in p.stdout and "unchanged" not in p.stdout  # no file is read by recheck
    assert "threshold=5" in run("policies", "--db", "l.sqlite", cwd=tmp_path).stdout


def test_a_format_that_is_no_name_is_rejected_before_any_file_is_touched(tmp_path):
    p = run("ingest", SAMPLE, "--db", "l.sqlite", "--format", "claude", cwd=tmp_path)
    assert p.returncode == 2 and "'claude'" in p.stderr and KNOWN in p.stderr
    assert not (tmp_path / "l.sqlite").exists() or _count(tmp_path / "l.sqlite", "sources") == 0
    p = run("ingest", SAMPLE, "--db", "l.sqlite", cwd=tmp_path)  # the correct run stores everything
    assert p.returncode == 0 and _count(tmp_path / "l.sqlite", "sessions") > 0
    p = run("replay", next(SAMPLE.iterdir()), "--format", "claude", cwd=tmp_path)
    assert p.returncode == 2 and KNOWN in p.stderr
    p = run("watch", SAMPLE, "--db", "l.sqlite", "--format", "claude", cwd=tmp_path)
    assert p.returncode == 2 and KNOWN in p.stderr


def test_messages_show_newlines_and_never_raw_bytes(tmp_path):
    (tmp_path / "notes.json").write_text("# notes\nsecond line\n")
    (tmp_path / "blob.jsonl").write_bytes(b"\x1b[31m\x00\x07\xff\xfe binary \x1b]0;pwn\x07\n")
    p = run("ingest", tmp_path / "notes.json", tmp_path / "blob.jsonl", "--db", "l.sqlite", cwd=tmp_path)
    assert p.returncode == 1
    assert "# notes⏎second line" in p.stderr and "\\\\n" not in p.stderr and "\\n" not in p.stderr
    assert not re.search(r"[\x00-\x08\x0b-\x1f\x7f]", p.stdout + p.stderr)  # no control byte at all
    assert "\\x1b[31m" in p.stderr  # the escape is shown, not obeyed


def test_unreadable_entries_in_a_folder_are_reported(tmp_path):
    folder = tmp_path / "logs"
    folder.mkdir()
    (folder / "a.json").write_bytes(next(SAMPLE.iterdir()).read_bytes())
    (folder / "gone.jsonl").symlink_to(tmp_path / "nowhere.jsonl")
    os.mkfifo(folder / "pipe.jsonl")
    p = run("ingest", folder, "--db", "l.sqlite", cwd=tmp_path)
    assert p.returncode == 1
    assert "gone.jsonl: a dangling link" in p.stderr and "pipe.jsonl: not a regular file" in p.stderr
    assert _count(tmp_path / "l.sqlite", "sessions") > 0  # the readable file is still stored


def _watch_until(tmp_path, folder, expect: str) -> subprocess.CompletedProcess:
    log = tmp_path / "watch.log"
    with log.open("w") as err:
        proc = subprocess.Popen([str(BIN), "watch", str(folder), "--db", "w.sqlite", "--interval", "0.2"],
                                cwd=tmp_path, stdout=subprocess.PIPE, stderr=err, text=True)
    deadline = time.monotonic() + 90
    while expect not in log.read_text():
        assert proc.poll() is None and time.monotonic() < deadline, log.read_text()
        time.sleep(0.2)
    proc.send_signal(signal.SIGINT)
    out, _ = proc.communicate(timeout=60)
    return subprocess.CompletedProcess(proc.args, proc.returncode, out, log.read_text())


def test_watch_exit_status_says_what_happened(tmp_path):
    good = tmp_path / "good"
    good.mkdir()
    (good / "a.json").write_bytes(next(SAMPLE.iterdir()).read_bytes())
    p = _watch_until(tmp_path, good, "a.json")
    assert p.returncode == 0, p.stderr
    bad = tmp_path / "bad"
    bad.mkdir()
    (bad / "junk.json").write_text('{"not": "a transcript"}')
    p = _watch_until(tmp_path, bad, "junk.json")
    assert p.returncode == 1 and "not a transcript" in p.stderr  # it used to exit 0 whatever happened


def _commands():
    group = typer.main.get_command(app)
    return [(name, group.commands[name]) for name in group.commands]


@pytest.mark.parametrize("name", [n for n, _ in _commands()])
def test_flags_read_as_flags(name, tmp_path):
    help_text = run(name, "--help", cwd=tmp_path).stdout
    assert "<bool>" not in help_text
    cmd = dict(_commands())[name]
    for param in cmd.params:
        if getattr(param, "is_flag", False) and param.secondary_opts:
            assert f"{param.opts[0]} / {param.secondary_opts[0]}" in help_text


def test_jobs_help_agrees_with_the_code(tmp_path):
    help_text = " ".join(run("ingest", "--help", cwd=tmp_path).stdout.split())
    assert f"more than {AUTO_JOBS_BYTES // 2**20} MB" in help_text and "at most 4" in help_text
    import inspect

    from loopledger import jobs
    from loopledger.cli import commands
    assert "worker.default_jobs(" in inspect.getsource(commands.run_ingest)
    assert "min(os.cpu_count() or 1, 4)" in inspect.getsource(jobs.default_jobs)
    assert jobs.default_jobs(AUTO_JOBS_BYTES) == 1 and jobs.default_jobs(AUTO_JOBS_BYTES + 1) == min(os.cpu_count() or 1, 4)
    assert "more than 4 MB" not in help_text and f"over {jobs.HAND_OVER_BYTES // 2**20} MB" in help_text
