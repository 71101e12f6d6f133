"""`loopledger ingest | recheck | policies | watch` through the real typer app (and a real process
where the exit status or the environment matters)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from loopledger.cli.app import app
from loopledger.detectors.policy import DEFAULT_SPECS, PolicySpec
from loopledger.ledger import schema
from loopledger.ledger.engine import make_engine
from sqlalchemy import func, select
from typer.testing import CliRunner

from bench.gen_chat import write_corpus
from tests.test_worker import call_msg, chat_line, dump, tool_msg

BIN = Path(sys.executable).parent / "loopledger"
runner = CliRunner()


def _count(url: str, table, *where) -> int:
    eng = make_engine(url, readonly=True)
    try:
        with eng.connect() as conn:
            return conn.execute(select(func.count()).select_from(table).where(*where)).scalar()
    finally:
        eng.dispose()


def _row(table: str, name: str) -> int:
    """The number on the summary table's row called `name`."""
    for line in table.splitlines():
        cells = [c.strip() for c in line.strip("│┃ ").split("│")]
        if len(cells) == 2 and cells[0] == name:
            return int(cells[1].replace(",", ""))
    raise AssertionError(f"no row {name!r} in:\n{table}")


def test_ingest_prints_a_summary_and_exits_0(tmp_path, fresh_db):
    write_corpus(tmp_path / "c", 3, 40, seed=1)
    res = runner.invoke(app, ["ingest", str(tmp_path / "c"), "--db", fresh_db])
    assert res.exit_code == 0, res.output
    calls = _count(fresh_db, schema.calls)
    checks = _count(fresh_db, schema.checks)
    assert calls > 0
    assert "Ingest summary" in res.stdout
    assert (_row(res.stdout, "calls"), _row(res.stdout, "checks (all policies)")) == (calls, checks)
    assert _row(res.stdout, "files") == 3
    again = runner.invoke(app, ["ingest", str(tmp_path / "c"), "--db", fresh_db])
    assert again.exit_code == 0 and _count(fresh_db, schema.calls) == calls


def test_exit_3_when_lines_were_quarantined(tmp_path, fresh_db):
    f = tmp_path / "bad.jsonl"
    f.write_bytes(chat_line(role="user", content="hi") + b"{not json\n" + call_msg("a", "ls", {}) + tool_msg("a", "x"))
    proc = subprocess.run([str(BIN), "ingest", str(f), "--db", fresh_db], capture_output=True, text=True)
    assert proc.returncode == 3, proc.stderr
    assert "1 malformed line(s) quarantined" in proc.stderr
    assert _count(fresh_db, schema.ingest_errors, schema.ingest_errors.c.line == 2) == 1


def test_exit_1_on_an_unreadable_file_others_still_stored(tmp_path, fresh_db):
    write_corpus(tmp_path, 1, 10)
    (tmp_path / "weird.json").write_text('{"not": "a transcript"}')
    res = runner.invoke(app, ["ingest", str(tmp_path), "--db", fresh_db])
    assert res.exit_code == 1
    assert "weird.json" in res.stderr and "not a transcript" in res.stderr
    assert _count(fresh_db, schema.sessions) == 1


@pytest.mark.parametrize("args,needle", [
    (["--policy", "window:window=2,threshold=5"], "threshold"),
    (["--policy", "nosuch"], "unknown detector"),
    (["--max-text", "10"], "max-text"),
])
def test_usage_errors_exit_2(tmp_path, fresh_db, args, needle):
    write_corpus(tmp_path, 1, 5)
    res = runner.invoke(app, ["ingest", str(tmp_path), "--db", fresh_db, *args])
    assert res.exit_code == 2
    assert needle in res.output


def test_missing_path_is_a_usage_error(tmp_path, fresh_db):
    res = runner.invoke(app, ["ingest", str(tmp_path / "nope"), "--db", fresh_db])
    assert res.exit_code == 2 and "nope" in res.stderr


def test_policy_flags_and_config_file(tmp_path, fresh_db, monkeypatch):
    write_corpus(tmp_path / "c", 2, 60, seed=3)
    (tmp_path / "loopledger.toml").write_text('[[policy]]\ndetector = "window"\nparams = {window = 10, threshold = 4}\n')
    monkeypatch.chdir(tmp_path)
    res = runner.invoke(app, ["ingest", "c", "--db", fresh_db, "--policy", "ladder:halt_at=6"])
    assert res.exit_code == 0, res.output
    for spec in (PolicySpec("window", {"window": 10, "threshold": 4}), PolicySpec.parse("ladder:halt_at=6")):
        assert _count(fresh_db, schema.checks, schema.checks.c.policy_id == spec.id) > 0
    listed = runner.invoke(app, ["policies", "--db", fresh_db])
    assert listed.exit_code == 0
    assert "window window=10 threshold=4" in listed.stdout and listed.stdout.count("yes") == len(DEFAULT_SPECS)


def test_recheck_equals_ingesting_with_that_policy(tmp_path, db_url):
    write_corpus(tmp_path / "c", 3, 80, seed=6)
    spec = "window:window=12,threshold=3"
    assert runner.invoke(app, ["ingest", str(tmp_path / "c"), "--db", db_url]).exit_code == 0
    pid = PolicySpec.parse(spec).id
    assert _count(db_url, schema.checks, schema.checks.c.policy_id == pid) == 0
    # Recheck reads no file: move the transcripts away first.
    (tmp_path / "c").rename(tmp_path / "gone")
    res = runner.invoke(app, ["recheck", "--policy", spec, "--db", db_url])
    assert res.exit_code == 0, res.output
    other = f"sqlite:///{tmp_path / 'other.sqlite'}"
    (tmp_path / "gone").rename(tmp_path / "c")
    assert runner.invoke(app, ["ingest", str(tmp_path / "c"), "--db", other, "--policy", spec]).exit_code == 0
    a, b = make_engine(db_url), make_engine(other)
    try:
        da, db = dump(a), dump(b)
        for table in ("checks", "results", "session_stats", "run_outcomes"):
            assert da[table] == db[table]
    finally:
        a.dispose()
        b.dispose()
    assert _count(db_url, schema.checks, schema.checks.c.policy_id == pid) > 0


def test_recheck_needs_a_policy(fresh_db):
    res = runner.invoke(app, ["recheck", "--db", fresh_db])
    assert res.exit_code == 2 and "--policy" in res.stderr


def test_no_redact_and_max_text(tmp_path, fresh_db):
    key = "ghp_" + "Z9" * 18
    f = tmp_path / "s.jsonl"
    f.write_bytes(chat_line(role="user", content=key) + call_msg("a", "cat", {}) + tool_msg("a", "w" * 5000))
    assert runner.invoke(app, ["ingest", str(f), "--db", fresh_db, "--no-redact", "--max-text", "1000"]).exit_code == 0
    eng = make_engine(fresh_db, readonly=True)
    try:
        with eng.connect() as conn:
            assert conn.execute(select(schema.runs.c.user_text)).scalar() == key
            answer, n = conn.execute(select(schema.calls.c.answer, schema.calls.c.answer_len)).one()
    finally:
        eng.dispose()
    assert n == 5000 and len(answer) < 1100


def test_database_url_from_the_environment(tmp_path):
    write_corpus(tmp_path / "c", 1, 10)
    db = tmp_path / "env.sqlite"
    env = dict(os.environ, LOOPLEDGER_DATABASE_URL=f"sqlite:///{db}")
    proc = subprocess.run([str(BIN), "ingest", str(tmp_path / "c")], capture_output=True, text=True, env=env,
                          cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert db.exists() and not (tmp_path / "ledger.sqlite").exists()


def test_watch_without_paths_and_no_agent_folders(tmp_path):
    env = dict(os.environ, HOME=str(tmp_path))
    proc = subprocess.run([str(BIN), "watch", "--db", str(tmp_path / "l.sqlite")], capture_output=True, text=True,
                          env=env, timeout=60)
    assert proc.returncode == 2
    assert "~/.claude/projects" in proc.stderr
