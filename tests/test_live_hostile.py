"""Issue 27 on the live paths (hook in process and through the resident, `guard`): a hard
deadline whatever the ledger or the network does, a hostile tool result, a newer or read-only
ledger, and the hook's flags read by the CLI's parser.

Outcomes only: the verdict is "allow" and the log says why in one line. Each test carries a
generous pytest-timeout that kills it if a path hangs (on main, the silent PostgreSQL server
hung the hook for good and four parallel hooks behind a busy ledger took 6-16.5 s each); no
test compares a time."""

from __future__ import annotations

import json
import os
import socket
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest
from loopledger.ledger import migrate
from loopledger.ledger.engine import make_engine
from sqlalchemy.engine import URL, make_url

from bench import gen_hostile
from bench.gen_hostile import SECRETS, adversarial, leaks
from tests import test_live_hook
from tests.live_support import BIN, make_ledger, run_hook, socket_count, wait_until

agent_home = test_live_hook.agent_home  # a fixture: the real agent's HOME, its residents stopped after

PRE = {"session_id": "hostile-1", "hook_event_name": "PreToolUse", "tool_name": "Bash",
       "tool_input": {"command": "npm test"}, "cwd": "/tmp", "transcript_path": "/nonexistent/t.jsonl"}


def _env(tmp_path: Path, resident: str, **extra: str) -> dict:
    run = tmp_path / "run"
    run.mkdir(mode=0o700, exist_ok=True)
    return {**os.environ, "HOME": str(tmp_path), "XDG_STATE_HOME": str(tmp_path / "state"),
            "XDG_CACHE_HOME": str(tmp_path / "cache"), "XDG_RUNTIME_DIR": str(run),
            "LOOPLEDGER_HOOK_RESIDENT": resident, "LOOPLEDGER_HOOK_RESIDENT_IDLE": "5", **extra}


def _stop_residents(tmp_path: Path) -> None:
    for lock in (tmp_path / "run" / "loopledger").glob("*.lock") if (tmp_path / "run" / "loopledger").exists() else []:
        try:
            os.kill(int(lock.read_text().split()[0]), 15)
        except (ValueError, OSError, IndexError):
            pass


@pytest.fixture
def sqlite_ledger(tmp_path):
    url = f"sqlite:///{tmp_path / 'ledger.sqlite'}"
    eng = make_engine(url)
    migrate.upgrade(eng)
    eng.dispose()
    yield url, tmp_path / "ledger.sqlite"
    _stop_residents(tmp_path)


def _log_lines(log: Path) -> list[str]:
    return log.read_text().splitlines() if log.exists() else []


# ── a PostgreSQL server that takes the connection and never answers ─────────────────────────

@pytest.fixture
def silent_server():
    with gen_hostile.silent_server() as port:
        yield port


@pytest.mark.timeout(180)
@pytest.mark.parametrize("resident", ["0", "1"])
@pytest.mark.parametrize("agent,event", [("claude-code", "PreToolUse"), ("gemini-cli", "BeforeTool")])
def test_point_2_a_silent_postgresql_server_never_hangs_the_hook_it_allows_and_logs_one_line(
        tmp_path, silent_server, resident, agent, event):
    url = f"postgresql+psycopg://u:Pw-Not-Logged@127.0.0.1:{silent_server}/x"
    log = tmp_path / "hook.log"
    env = _env(tmp_path, resident, LOOPLEDGER_HOOK_DEADLINE="4")
    try:
        for i in range(2):  # the second through the resident the first one started
            proc = run_hook({**PRE, "hook_event_name": event, "tool_use_id": f"t{i}"}, url, agent=agent, log=log, env=env)
            assert proc.returncode == 0, proc.stderr
            assert proc.stdout == (b"{}\n" if agent == "gemini-cli" else b"")  # allowed
    finally:
        _stop_residents(tmp_path)
    lines = _log_lines(log)
    assert len(lines) == 2, lines
    # Either the connect_timeout (cut to the deadline) ended the wait, naming the server, or the
    # deadline itself did first (a loaded machine spends some of it starting the process).
    assert all("allowed without judging" in line and (f"127.0.0.1:{silent_server}/x" in line or "deadline" in line)
               for line in lines), lines
    assert "Pw-Not-Logged" not in log.read_text()


@pytest.mark.timeout(120)
@pytest.mark.parametrize("readonly", [False, True])
def test_point_2_every_postgresql_engine_gives_up_on_a_silent_server(silent_server, readonly):
    """The commands' engines (writer and the dashboard's readers) too: connect_timeout."""
    from sqlalchemy.exc import OperationalError

    eng = make_engine(f"postgresql+psycopg://u@127.0.0.1:{silent_server}/x", readonly=readonly, connect_timeout=2)
    try:
        with pytest.raises(OperationalError, match="(?i)timeout|timed out"):
            eng.connect()
    finally:
        eng.dispose()


# ── parallel hooks behind a busy ledger; the resident drops what its hook gave up ─────────────

@pytest.mark.timeout(600)  # bounds a hang only
@pytest.mark.parametrize("resident", ["0", "1"])
def test_point_2_parallel_hooks_behind_a_busy_ledger_each_allow_unjudged_and_log_one_line(
        tmp_path, sqlite_ledger, resident):
    """Four parallel hooks behind a ledger held busy for as long as they run: each waits its own
    busy timeout (2 s), then allows its call unjudged, logs one line and stores nothing; the next
    call is judged. The deadline (300 s) is out of every machine's reach and the ledger is held
    until every hook has answered, so what ends each wait is the busy ledger, never how fast the
    machine started the hooks (under a 3 s or 10 s deadline a starved hook could reach the
    deadline's alarm or its backstop instead)."""
    url, path = sqlite_ledger
    log = tmp_path / "hook.log"
    env = _env(tmp_path, resident, LOOPLEDGER_HOOK_BUSY_TIMEOUT="2", LOOPLEDGER_HOOK_DEADLINE="300",
               LOOPLEDGER_HOOK_RESIDENT_IDLE="300")
    first = run_hook({**PRE, "tool_use_id": "t-first"}, url, log=log, env=env)  # starts the resident
    assert first.returncode == 0 and first.stdout == b"" and _log_lines(log) == []
    holder = sqlite3.connect(path, isolation_level=None)
    holder.execute("BEGIN IMMEDIATE")
    try:
        procs = [subprocess.Popen([str(BIN), "hook", "claude-code", "--db", url, "--log", str(log)],
                                  stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env)
                 for _ in range(4)]
        outs = [p.communicate(json.dumps({**PRE, "tool_use_id": f"t-par-{i}"}).encode(), timeout=300)
                for i, p in enumerate(procs)]
    finally:
        holder.execute("ROLLBACK")
        holder.close()
    assert [p.returncode for p in procs] == [0] * 4
    assert all(out == b"" for out, _ in outs)  # all allowed
    lines = _log_lines(log)
    assert len(lines) == 4 and all("allowed without judging" in line for line in lines), lines
    after = run_hook({**PRE, "tool_use_id": "t-after"}, url, log=log, env=env)
    assert after.returncode == 0 and _log_lines(log) == lines
    with sqlite3.connect(path) as conn:
        ids = [r[0] for r in conn.execute("SELECT call_id FROM live_events WHERE call_id IS NOT NULL ORDER BY seq")]
    assert ids == ["t-first", "t-after"]  # the unjudged calls were not stored, the next one is judged


@pytest.mark.timeout(300)  # bounds a hang only
def test_point_2_the_resident_drops_a_request_whose_hook_has_gone(tmp_path, sqlite_ledger):
    from loopledger.live import hook_client as wire

    url, path = sqlite_ledger
    log = tmp_path / "hook.log"
    # The resident stays (idle 300 s); the busy hook is ended by its busy timeout (10 s), its
    # deadline (300 s) out of reach: the request whose hook has gone arrives while the resident
    # holds the busy one (waited for below), whatever the machine's speed.
    env = _env(tmp_path, "1", LOOPLEDGER_HOOK_DEADLINE="300", LOOPLEDGER_HOOK_BUSY_TIMEOUT="10",
               LOOPLEDGER_HOOK_RESIDENT_IDLE="300")
    assert run_hook({**PRE, "tool_use_id": "t-first"}, url, log=log, env=env).returncode == 0
    folder = tmp_path / "run" / "loopledger"
    for _ in range(1200):  # the resident the first hook started, detached, binds its socket
        socks = list(folder.glob("hook-*.sock")) if folder.exists() else []
        if socks:
            break
        time.sleep(0.1)
    assert socks, "the first hook started no resident"
    sock_path = socks[0]
    # What a hook process sends, with this environment: the resident checks the identity whole.
    code = ("import json, os, sys; from loopledger.live import hook_client as w\n"
            "print(w.identity().hex())")
    ident = bytes.fromhex(subprocess.run([os.path.join(os.path.dirname(str(BIN)), "python"), "-c", code],
                                         env=env, capture_output=True, text=True, check=True).stdout.strip())
    holder = sqlite3.connect(path, isolation_level=None)
    holder.execute("BEGIN IMMEDIATE")
    try:
        busy = subprocess.Popen([str(BIN), "hook", "claude-code", "--db", url, "--log", str(log)], stdin=subprocess.PIPE,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env)
        busy.stdin.write(json.dumps({**PRE, "tool_use_id": "t-busy"}).encode())
        busy.stdin.close()
        # The resident is busy with it (has taken its request) when the next one comes.
        resident = int(Path(str(sock_path) + ".lock").read_text().split()[0])
        wait_until(lambda: socket_count(resident) >= 2, "the resident took the busy hook's request")
        gone = socket.socket(socket.AF_UNIX)
        addr, fd = wire.address(str(sock_path))  # a deep tmp folder: past AF_UNIX's 107 bytes
        try:
            gone.connect(addr)
        finally:
            if fd is not None:
                os.close(fd)
        gone.sendall(wire.pack(ident, b"claude-code", f"--db\0{url}\0--log\0{log}".encode(), b"/", b"",
                               json.dumps({**PRE, "tool_use_id": "t-gone"}).encode(), repr(time.time() + 30).encode()))
        gone.shutdown(socket.SHUT_WR)
        gone.close()  # the hook gives up at once
        assert busy.wait(timeout=120) == 0
    finally:
        holder.execute("ROLLBACK")
        holder.close()
    assert run_hook({**PRE, "tool_use_id": "t-after"}, url, log=log, env=env).returncode == 0
    with sqlite3.connect(path) as conn:
        ids = [r[0] for r in conn.execute("SELECT call_id FROM live_events WHERE call_id IS NOT NULL ORDER BY seq")]
    assert "t-gone" not in ids and ids == ["t-first", "t-after"], ids


@pytest.mark.timeout(300)  # bounds a hang only
def test_point_2_a_stdin_that_never_closes_is_allowed_at_the_deadline_with_one_line(tmp_path, sqlite_ledger):
    url, _ = sqlite_ledger
    log = tmp_path / "hook.log"
    env = _env(tmp_path, "0", LOOPLEDGER_HOOK_DEADLINE="2")
    for agent in ("claude-code", "gemini-cli", "codex"):
        proc = subprocess.Popen([str(BIN), "hook", agent, "--db", url, "--log", str(log)], stdin=subprocess.PIPE,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env)
        proc.stdin.write(b'{"session_id": "s", ')  # and never more, never closed
        proc.stdin.flush()
        out = proc.stdout.read()  # until the process ends: at its deadline, its stdin still open
        assert proc.wait(timeout=50) == 0
        proc.stdin.close()
        assert out == (b"{}\n" if agent == "gemini-cli" else b"")
    lines = _log_lines(log)
    assert len(lines) == 3 and all("deadline" in line for line in lines), lines  # one line per agent


# ── a hostile tool result through the hook ───────────────────────────────────────────────────

@pytest.mark.timeout(120)
@pytest.mark.parametrize("resident", ["0", "1"])
def test_point_1_a_hostile_web_page_as_a_webfetch_result_is_judged_and_stored_without_its_secret(
        tmp_path, sqlite_ledger, resident):
    """Issue 27: the 200 KB page as a WebFetch result held the in-process hook 31 s, past the
    30 s the installer gives it. Here the hook answers (killed otherwise), the page's answer is
    stored, and a key on the page is not."""
    url, path = sqlite_ledger
    log = tmp_path / "hook.log"
    env = _env(tmp_path, resident)
    key = SECRETS["anthropic-key"]
    # The key first (a stored answer keeps the text's head), escaped as a JSON text inside the page.
    page = '{"k": "\\u003c' + key + '"}\n' + adversarial(200_000)["web-page"]
    pre = {**PRE, "tool_name": "WebFetch", "tool_input": {"url": "https://example.com"}, "tool_use_id": "t-web"}
    post = {**pre, "hook_event_name": "PostToolUse", "tool_response": {"result": page, "code": 200}}
    for ev in (pre, post, {**pre, "tool_use_id": "t-url", "tool_input": {"url": adversarial(200_000)["url-dots"]}}):
        proc = run_hook(ev, url, log=log, env=env)
        assert proc.returncode == 0 and proc.stdout == b"", proc.stderr
    assert _log_lines(log) == []
    with sqlite3.connect(path) as conn:
        stored = "\n".join(str(r) for r in conn.execute("SELECT * FROM live_events"))
    assert "t-web" in stored and "t-url" in stored and "[REDACTED:anthropic-key]" in stored
    assert not any(frag in stored for frag in leaks(key))


@pytest.mark.timeout(300)
def test_point_1_every_adversarial_text_through_guard_is_answered_and_stored_without_its_secret(
        tmp_path, sqlite_ledger):
    """`loopledger guard` takes each of the adversarial texts (200 KB each) as a call's arguments
    and as its answer: every call gets its verdict line (killed by the timeout otherwise), every
    event is stored, and a key placed before each text is not."""
    url, path = sqlite_ledger
    key = SECRETS["anthropic-key"]
    texts = adversarial(200_000)
    lines = []
    for i, (kind, text) in enumerate(sorted(texts.items())):
        lines.append(json.dumps({"session": "hostile", "event": "call", "id": f"h{i}", "tool": "WebFetch",
                                 "args": {"url": f"https://example.com/{kind}", "body": key + " " + text}}))
        lines.append(json.dumps({"session": "hostile", "event": "answer", "id": f"h{i}",
                                 "text": '{"k": "\\u003c' + key + '"}\n' + text}))
    proc = subprocess.run([str(BIN), "guard", "--db", url], input=("\n".join(lines) + "\n").encode(),
                          capture_output=True, timeout=280, env=_env(tmp_path, "0"))
    assert proc.returncode == 0, proc.stderr[-2000:]
    verdicts = [json.loads(line) for line in proc.stdout.splitlines() if line.strip()]
    assert len(verdicts) == len(texts) and all(v.get("verdict") for v in verdicts), verdicts[:3]
    with sqlite3.connect(path) as conn:
        stored = "\n".join(str(r) for r in conn.execute("SELECT * FROM live_events"))
        n_calls = conn.execute("SELECT COUNT(*) FROM live_events WHERE kind = 'call'").fetchone()[0]
    assert n_calls == len(texts) and "[REDACTED:anthropic-key]" in stored
    assert not any(frag in stored for frag in leaks(key))


# ── a newer or read-only ledger ──────────────────────────────────────────────────────────────

NEWER = "this ledger was written by a newer LoopLedger (revision 9999_from_the_future); upgrade loopledger"


def _make_newer(url: str) -> None:
    eng = make_engine(url)
    with eng.begin() as conn:
        conn.exec_driver_sql("UPDATE alembic_version SET version_num = '9999_from_the_future'")
    eng.dispose()


COMMANDS = [["ingest", "{sample}"], ["policies"], ["recheck", "--policy", "window"], ["score"], ["cost"],
            ["labels", "export", "{out}"], ["enforce"], ["enforce", "ladder"], ["sweep", "--detector", "window",
            "--param", "threshold=2..3", "--no-save"], ["hook", "install", "claude-code", "--project", "{tmp}"],
            ["receive", "--port", "0"], ["watch", "{sample}"], ["dashboard", "--port", "0"]]


@pytest.mark.timeout(600)
def test_point_5_a_newer_ledger_is_one_line_and_exit_2_from_every_command_and_one_logged_line_from_the_hook(
        tmp_path, db_url):
    eng = make_engine(db_url)
    migrate.upgrade(eng)
    eng.dispose()
    _make_newer(db_url)
    sample = Path(__file__).resolve().parent.parent / "sample_data" / "anthropic"
    env = _env(tmp_path, "0")
    url = make_url(db_url)
    if url.password:  # as a team runs it: `hook install` refuses a URL holding a password, libpq reads it
        env["PGPASSWORD"] = url.password
        db_url = URL.create(url.drivername, url.username, None, url.host, url.port, url.database,
                            url.query).render_as_string(hide_password=False)
    for cmd in COMMANDS:
        args = [a.format(sample=sample, out=tmp_path / "labels.csv", tmp=tmp_path) for a in cmd]
        proc = subprocess.run([str(BIN), *args, "--db", db_url], capture_output=True, text=True, timeout=120,
                              env=env, cwd=tmp_path)
        assert proc.returncode == 2, (cmd, proc.returncode, proc.stderr[-2000:])
        lines = [line for line in proc.stderr.splitlines() if line.strip()]
        assert len(lines) == 1 and NEWER in lines[0], (cmd, proc.stderr[-2000:])
    guard = subprocess.run([str(BIN), "guard", "--db", db_url], input=b'{"session": "g", "event": "call", "tool": "x"}\n',
                           capture_output=True, timeout=120, env=env)
    assert guard.returncode == 2 and guard.stderr.decode().strip().count("\n") == 0 and NEWER in guard.stderr.decode()
    log = tmp_path / "hook.log"
    for agent in ("claude-code", "gemini-cli", "codex"):
        proc = run_hook({**PRE, "hook_event_name": "BeforeTool" if agent == "gemini-cli" else "PreToolUse"},
                        db_url, agent=agent, log=log, env=env)
        assert proc.returncode == 0 and proc.stderr == b""
    lines = _log_lines(log)
    assert len(lines) == 3 and all(NEWER in line for line in lines), lines  # one per agent's hook


@pytest.mark.timeout(120)
def test_point_5_a_read_only_ledger_is_logged_as_read_only(tmp_path, sqlite_ledger):
    if os.geteuid() == 0:
        pytest.skip("root writes a read-only file anyway")
    url, path = sqlite_ledger
    path.chmod(0o444)
    log = tmp_path / "hook.log"
    proc = run_hook(PRE, url, log=log, env=_env(tmp_path, "0"))
    assert proc.returncode == 0 and proc.stdout == b""
    lines = _log_lines(log)
    assert len(lines) == 1 and "read-only" in lines[0] and "not a LoopLedger ledger" not in lines[0], lines


@pytest.mark.timeout(120)
def test_point_5_a_ledger_in_a_read_only_folder_is_logged_as_read_only(tmp_path):
    """As root (CI) file modes do not stop a write, so the folder is a read-only bind: a
    read-only file system, which stops root too."""
    folder = tmp_path / "ro"
    folder.mkdir()
    url = f"sqlite:///{folder / 'ledger.sqlite'}"
    eng = make_engine(url)
    migrate.upgrade(eng)
    eng.dispose()
    if os.geteuid() == 0:
        if subprocess.run(["mount", "--bind", "-o", "ro", str(folder), str(folder)], capture_output=True).returncode:
            pytest.skip("cannot make a read-only bind mount here")
        subprocess.run(["mount", "-o", "remount,ro,bind", str(folder)], check=False, capture_output=True)
    else:
        folder.chmod(0o555)
        (folder / "ledger.sqlite").chmod(0o444)
    try:
        log = tmp_path / "hook.log"
        proc = run_hook(PRE, url, log=log, env=_env(tmp_path, "0"))
        assert proc.returncode == 0 and proc.stdout == b""
        lines = _log_lines(log)
        assert len(lines) == 1 and "read-only" in lines[0] and "not a LoopLedger ledger" not in lines[0], lines
    finally:
        if os.geteuid() == 0:
            subprocess.run(["umount", str(folder)], check=False)
        else:
            folder.chmod(0o755)


# ── the hook's flags ─────────────────────────────────────────────────────────────────────────

def test_point_5_the_hook_reads_the_same_flags_the_cli_declares():
    import typer
    from loopledger.cli.app import hook_app
    from loopledger.live.hook_flags import FLAGS, parse_flags

    group = typer.main.get_command(hook_app)
    for agent in ("claude-code", "gemini-cli", "codex"):
        declared = sorted(o for p in group.commands[agent].params for o in p.opts if o != "--help")
        assert declared == sorted(FLAGS), declared
    assert parse_flags(["--db", "x", "--log=y"]) == {"db": "x", "log": "y", "agent_pid": None}
    assert parse_flags(["--db=x", "--agent-pid", "42"])["agent_pid"] == "42"
    for bad in (["--dbx", "x"], ["--db"], ["x"], ["--help"], ["-h"]):
        assert parse_flags(bad) is None


@pytest.mark.timeout(120)
@pytest.mark.parametrize("argv,what", [(["--dbx", "{db}"], "No such option: --dbx"),
                                       (["--db"], "requires an argument"),
                                       (["--db", "{db}", "stray"], "unexpected extra argument")])
@pytest.mark.parametrize("agent", ["claude-code", "gemini-cli"])
def test_point_5_a_typo_in_the_hook_command_is_the_cli_parsers_error_exit_1_allowed_and_logged(
        tmp_path, sqlite_ledger, argv, what, agent):
    """Status 1, never 2: both agents refuse the tool call on a hook's 2, and run it on other
    non-zero statuses, showing the error. Nothing is judged or stored."""
    url, path = sqlite_ledger
    env = _env(tmp_path, "1")
    args = [a.format(db=url) for a in argv]
    proc = subprocess.run([str(BIN), "hook", agent, *args], input=json.dumps(PRE).encode(), capture_output=True,
                          timeout=100, env=env)
    assert proc.returncode == 1, proc
    assert what.lower() in proc.stderr.decode().lower() and "allowed" in proc.stderr.decode()
    lines = _log_lines(tmp_path / "state" / "loopledger" / "hook.log")
    assert len(lines) == 1 and what.lower() in lines[0].lower(), lines
    with sqlite3.connect(path) as conn:
        assert conn.execute("SELECT COUNT(*) FROM live_events").fetchone()[0] == 0


@pytest.mark.timeout(120)
def test_point_2_guard_on_a_silent_postgresql_server_answers_every_call_allow(tmp_path, silent_server):
    url = f"postgresql+psycopg://u:Pw-Not-Logged@127.0.0.1:{silent_server}/x"
    feed = b"".join(json.dumps({"session": "g", "event": "call", "id": f"c{i}", "tool": "Bash",
                                "args": {"command": "ls"}}).encode() + b"\n" for i in range(2))
    proc = subprocess.run([str(BIN), "guard", "--db", url], input=feed, capture_output=True, timeout=110,
                          env=_env(tmp_path, "0", LOOPLEDGER_HOOK_DEADLINE="3"))
    assert proc.returncode == 0, proc.stderr
    out = [json.loads(line) for line in proc.stdout.splitlines()]
    assert [o["verdict"] for o in out] == ["allow", "allow"] and all(o.get("error") for o in out), out
    assert b"Pw-Not-Logged" not in proc.stdout + proc.stderr


# ── Gemini CLI: only what loads hooks is recommended ─────────────────────────────────────────

def test_point_6_hook_install_gemini_recommends_only_what_loads_hooks(tmp_path, sqlite_ledger):
    url, path = sqlite_ledger
    project, home = tmp_path / "g", tmp_path / "home"
    project.mkdir()
    home.mkdir()
    for where in (["--project", str(project)], ["--user"]):
        proc = subprocess.run([str(BIN), "hook", "install", "gemini-cli", *where, "--db", str(path)],
                              capture_output=True, text=True, env={"HOME": str(home), "PATH": "/usr/bin:/bin"})
        assert proc.returncode == 0, proc.stderr
        said = " ".join(proc.stdout.split())
        assert "GEMINI_CLI_TRUST_WORKSPACE=true" in said
        # --skip-trust is named only as what not to use: it runs Gemini CLI without any hooks.
        assert "Not --skip-trust" in said and "without any hooks" in said
        assert "unless given --skip-trust" not in said


@pytest.mark.timeout(900)
@pytest.mark.parametrize("how", ["GEMINI_CLI_TRUST_WORKSPACE", "--skip-trust"])
def test_point_6_the_real_gemini_cli_enforces_in_an_untrusted_folder_with_the_variable_and_not_with_skip_trust(
        tmp_path, agent_home, how):
    """gemini-cli 0.61.0, headless, a folder nobody trusted: with GEMINI_CLI_TRUST_WORKSPACE=true
    the hooks run and `progress` halts the third identical failing call; with --skip-trust the
    run goes on, no hook ever runs, and the ledger holds nothing (what docs/live.md says)."""
    from tests.real_clients import clean_env, gemini_cli
    from tests.stand_in_models import GeminiServer

    gemini = gemini_cli()
    ledger = tmp_path / "ledger.sqlite"
    make_ledger(str(ledger))  # enforce chooses in an existing ledger only
    subprocess.run([str(BIN), "enforce", "progress", "--db", str(ledger)], check=True, capture_output=True)
    project, home = tmp_path / "shop", agent_home
    project.mkdir()
    (home / ".gemini").mkdir(parents=True)
    (home / ".gemini" / "settings.json").write_text(json.dumps({"security": {"auth": {"selectedType": "gemini-api-key"}}}))
    env = clean_env(home, LOOPLEDGER_HOOK_LOG=str(tmp_path / "hook.log"))
    inst = subprocess.run([str(BIN), "hook", "install", "gemini-cli", "--project", "--db", str(ledger)],
                          cwd=project, capture_output=True, text=True, env=env)
    assert inst.returncode == 0 and "not trusted yet" in " ".join(inst.stdout.split()), inst.stdout
    extra = ["--skip-trust"] if how == "--skip-trust" else []
    if how == "GEMINI_CLI_TRUST_WORKSPACE":
        env["GEMINI_CLI_TRUST_WORKSPACE"] = "true"
    with GeminiServer(max_turns=6) as model:
        env.update(GOOGLE_GEMINI_BASE_URL=model.url, GEMINI_API_KEY="stand-in")
        proc = subprocess.run([*gemini, "-p", "Show me missing.txt", "--output-format", "stream-json", "--yolo",
                               "-m", "gemini-2.5-flash", *extra], cwd=project, env=env, capture_output=True,
                              text=True, timeout=600)
        n_requests = len(model.recorded.requests)
    assert proc.returncode == 0, proc.stderr[-2000:]
    with sqlite3.connect(ledger) as conn:
        stored = conn.execute("SELECT COUNT(*) FROM live_events").fetchone()[0]
    if how == "GEMINI_CLI_TRUST_WORKSPACE":
        assert n_requests == 3 and stored > 0  # halted at the third call, every event stored
        assert "LoopLedger halted the agent (progress)" in proc.stdout
    else:
        assert stored == 0 and n_requests > 3  # no hook ran: nothing stored, nothing halted
        assert "LoopLedger" not in proc.stdout


def test_the_deadline_line_is_written_when_the_alarm_cut_short_the_import_of_redaction(tmp_path, monkeypatch):
    """The deadline's handler runs wherever the main thread was: inside the first import of
    loopledger.redact (a hook that just hit the busy timeout, logging why) it found that module
    half made, its import failed, and the process ended without the deadline's one line."""
    import types

    from loopledger.live import hooks

    monkeypatch.setitem(sys.modules, "loopledger.redact", types.ModuleType("loopledger.redact"))  # no names yet
    log = tmp_path / "hook.log"
    hooks.expired("claude-code", ["--db", "sqlite:///nowhere.sqlite", "--log", str(log)])
    [line] = _log_lines(log)
    assert "allowed without judging: no decision within the" in line
