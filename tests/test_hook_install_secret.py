"""`loopledger hook install` never writes a ledger password into a file or a hook's command line
(issue 36, reproduction 6): `--db postgresql://user:PASSWORD@…` is refused, saying where the
password goes instead, and nothing prints it; the two ways it points to work end to end — the
password in ~/.pgpass (libpq reads it) with a URL without one, or the whole URL in
$LOOPLEDGER_DATABASE_URL, which the hook reads from its environment.

The real PostgreSQL server, a role of its own with a password that appears nowhere else, the
real `loopledger` command and the installed hook command run as the agent runs it."""

from __future__ import annotations

import json
import os
import secrets
import subprocess
from pathlib import Path

import pytest
import sqlalchemy as sa
from loopledger.ledger import schema as t
from loopledger.ledger.engine import make_engine

from tests.conftest import PG_URL, REQUIRE_PG, _pg_database, _pg_drop
from tests.live_support import BIN

AGENTS = ("claude-code", "gemini-cli", "codex", "opencode")


@pytest.fixture
def pg_role():
    """(URL with the password, the same URL without it, the password): a throwaway database
    owned by a throwaway role whose password is random."""
    if not PG_URL:
        if REQUIRE_PG:
            pytest.fail("LOOPLEDGER_REQUIRE_PG=1 but LOOPLEDGER_TEST_PG_URL is not set")
        pytest.skip("no PostgreSQL server configured (set LOOPLEDGER_TEST_PG_URL)")
    url = _pg_database()
    role, password = "ll_role_" + secrets.token_hex(4), "Pw-" + secrets.token_urlsafe(18).replace("%", "x")
    admin = sa.create_engine(PG_URL, isolation_level="AUTOCOMMIT")
    name = sa.make_url(url).database
    with admin.connect() as conn:
        conn.execute(sa.text(f"CREATE ROLE {role} LOGIN PASSWORD '{password}'"))
        conn.execute(sa.text(f'ALTER DATABASE "{name}" OWNER TO {role}'))
    with_pw = sa.make_url(url).set(username=role, password=password).render_as_string(hide_password=False)
    with_pw = with_pw.replace("postgresql+psycopg://", "postgresql://")  # as a person types it
    try:
        yield with_pw, with_pw.replace(f":{password}@", "@"), password
    finally:
        _pg_drop(url)
        with admin.connect() as conn:
            conn.execute(sa.text(f"DROP ROLE IF EXISTS {role}"))
        admin.dispose()


def _env(home: Path, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items()
           if k not in ("LOOPLEDGER_DATABASE_URL", "LOOPLEDGER_DB", "PGPASSFILE", "PGPASSWORD")}
    return env | {"HOME": str(home), "LOOPLEDGER_HOOK_LOG": str(home / "hook.log")} | extra


def _install(*args: str, env: dict, cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run([str(BIN), "hook", "install", *args], capture_output=True, text=True, env=env, cwd=cwd,
                          timeout=120)


def _every_file(folder: Path) -> dict[str, str]:
    return {str(p.relative_to(folder)): p.read_text(errors="replace") for p in folder.rglob("*") if p.is_file()}


@pytest.mark.parametrize("agent", AGENTS)
def test_a_url_with_a_password_is_refused_at_project_and_user_scope_and_never_printed(pg_role, tmp_path, agent):
    with_pw, _, password = pg_role
    home, project = tmp_path / "home", tmp_path / "project"
    home.mkdir()
    project.mkdir()
    for scope in (("--project", str(project)), ("--user",)):
        proc = _install(agent, *scope, "--db", with_pw, env=_env(home), cwd=project)
        said = proc.stdout + proc.stderr
        assert proc.returncode == 2, said
        assert password not in said
        words = " ".join(said.split())
        assert "~/.pgpass" in words and "PGPASSFILE" in words and "LOOPLEDGER_DATABASE_URL" in words, words
    assert _every_file(project) == {} and all(password not in text for text in _every_file(home).values())


def _pre_tool_use(project: Path, session: str) -> dict:
    return {"session_id": session, "transcript_path": str(project / f"{session}.jsonl"), "cwd": str(project),
            "hook_event_name": "PreToolUse", "tool_name": "Read", "tool_input": {"file_path": "/x"},
            "tool_use_id": "toolu_1"}


def _run_hook(command: str, project: Path, env: dict, session: str) -> None:
    # Claude Code runs the command through a shell, from the project folder.
    proc = subprocess.run(command, shell=True, input=json.dumps(_pre_tool_use(project, session)),
                          capture_output=True, text=True, cwd=project, env=env, timeout=120)
    assert proc.returncode == 0, proc.stderr


def _live_sessions(url_with_pw: str) -> list[str]:
    engine = make_engine(url_with_pw, readonly=True)
    try:
        with engine.connect() as conn:
            return conn.execute(sa.select(t.sessions.c.key).where(
                t.sessions.c.id.in_(sa.select(t.live_events.c.session_id)))).scalars().all()
    finally:
        engine.dispose()


def _command(project: Path) -> str:
    doc = json.loads((project / ".claude" / "settings.json").read_text())
    return doc["hooks"]["PreToolUse"][0]["hooks"][0]["command"]


def test_the_password_in_pgpass_and_a_url_without_it_installs_and_the_hook_reaches_the_ledger(pg_role, tmp_path):
    with_pw, without_pw, password = pg_role
    home, project = tmp_path / "home", tmp_path / "project"
    home.mkdir()
    project.mkdir()
    u = sa.make_url(with_pw)
    pgpass = home / ".pgpass"
    pgpass.write_text(f"{u.host}:{u.port or 5432}:{u.database}:{u.username}:{password}\n")
    pgpass.chmod(0o600)  # libpq ignores a group- or world-readable one
    env = _env(home)
    proc = _install("claude-code", "--project", str(project), "--db", without_pw, env=env, cwd=project)
    assert proc.returncode == 0, proc.stderr
    assert password not in proc.stdout + proc.stderr
    assert all(password not in text for text in _every_file(project).values())
    command = _command(project)
    assert "--db" in command and password not in command
    _run_hook(command, project, env, "pgpass-session")
    assert "pgpass-session" in _live_sessions(with_pw)


def test_a_url_in_loopledger_database_url_stays_there_and_the_hook_reads_it(pg_role, tmp_path):
    with_pw, _, password = pg_role
    home, project = tmp_path / "home", tmp_path / "project"
    home.mkdir()
    project.mkdir()
    env = _env(home, LOOPLEDGER_DATABASE_URL=with_pw)
    proc = _install("claude-code", "--project", str(project), env=env, cwd=project)
    assert proc.returncode == 0, proc.stderr
    said = proc.stdout + proc.stderr
    assert password not in said and "LOOPLEDGER_DATABASE_URL" in said
    assert all(password not in text for text in _every_file(project).values())
    command = _command(project)
    assert "--db" not in command and password not in command  # the hook's argv: no ledger named
    _run_hook(command, project, env, "env-session")
    assert "env-session" in _live_sessions(with_pw)
    # The OpenCode plugin, which spawns its guard with an argv of its own: neither.
    proc = _install("opencode", "--project", str(project), env=env, cwd=project)
    assert proc.returncode == 0, proc.stderr
    assert all(password not in text for text in _every_file(project).values())
