"""The resident guard (loopledger.live.resident) and the hook's thin client
(loopledger.live.hook_client), as an agent meets them: real `loopledger hook` processes, a real
resident process on a real Unix socket, real ledgers. Whether an answer came from the resident
is read off the hook process itself (`-X importtime`: a hook answered by the resident never
imports the session code)."""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest
from loopledger.detectors.policy import PolicySpec
from loopledger.ledger import migrate
from loopledger.ledger.engine import make_engine
from loopledger.live import enforce, hook_client

from tests.live_support import BIN, gone, npm_test_loop, output, socket_count, wait_until

LADDER = "ladder:warn_at=2,block_at=3,halt_at=4"  # warn, block, halt, after_halt in six calls
ALLOW = "ladder:warn_at=90,block_at=95,halt_at=99"  # thresholds out of reach: every call allowed
# The interpreter of the console script, as an agent starts it (its identity names the socket).
PYTHON = BIN.read_text().splitlines()[0].removeprefix("#!")


@pytest.fixture
def env(tmp_path):
    """A hook environment with the resident on and its own runtime folder; every resident
    started in it is stopped afterwards. Its timeouts only bound a hang, never decide an
    answer on a slow machine: the hook's deadline (after which the resident drops a request
    and the hook answers itself) and the wait for the resident's reply (busy timeout + 5 s)
    are over a minute, not the 20 s and 10 s an agent gets; a test of those limits sets its own."""
    run = tmp_path / "run"
    run.mkdir(mode=0o700)
    e = {**os.environ, "LOOPLEDGER_HOOK_RESIDENT": "1", "XDG_RUNTIME_DIR": str(run),
         "LOOPLEDGER_HOOK_RESIDENT_IDLE": "600", "LOOPLEDGER_HOOK_DEADLINE": "300",
         "LOOPLEDGER_HOOK_BUSY_TIMEOUT": "60"}
    yield e
    for lock in (run / "loopledger").glob("*.lock") if (run / "loopledger").is_dir() else []:
        try:
            os.kill(int(lock.read_text().strip() or 0), signal.SIGKILL)
        except (ValueError, ProcessLookupError, PermissionError):
            pass


def _ledger(url: str, spec: str = LADDER) -> None:
    eng = make_engine(url)
    migrate.upgrade(eng)
    with eng.begin() as conn:
        enforce.set_enforced(conn, PolicySpec.parse(spec), origin="cli")
    eng.dispose()


def _hook(event: dict, db: str, env: dict, agent: str = "claude-code", timeout: float = 120):
    """One hook process; (answer, whether it answered in its own process)."""
    proc = subprocess.run([PYTHON, "-X", "importtime", str(BIN), "hook", agent, "--db", db],
                          input=json.dumps(event).encode(), capture_output=True, env=env, timeout=timeout)
    assert proc.returncode == 0
    err = proc.stderr.decode()
    imported = {line.split("|")[-1].strip() for line in err.splitlines() if line.startswith("import time:")}
    rest = [line for line in err.splitlines() if not line.startswith("import time:")]
    assert rest == [], rest
    return output(proc), "loopledger.live.session" in imported


def _socket(env: dict) -> Path:
    """This install's socket in `env`, as the client names it."""
    code = "from loopledger.live import hook_client; print(hook_client.socket_path())"
    return Path(subprocess.check_output([PYTHON, "-c", code], env=env, text=True).strip())


def _start(env: dict) -> subprocess.Popen:
    proc = subprocess.Popen([PYTHON, "-P", "-m", "loopledger.live.resident"], env=env, cwd="/",
                            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    _wait_served(env)
    return proc


def _at(sock, method: str, path) -> None:
    """sock.bind / sock.connect at `path` however long it is (the way the hook and resident do)."""
    addr, fd = hook_client.address(str(path))
    try:
        getattr(sock, method)(addr)
    finally:
        if fd is not None:
            os.close(fd)


def _wait_served(env: dict, timeout: float = 60) -> int:
    """The pid of the resident serving `env`'s socket, once it accepts connections."""
    path = _socket(env)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if path.exists():
            import socket

            with socket.socket(socket.AF_UNIX) as s:
                try:
                    _at(s, "connect", path)
                except OSError:
                    pass
                else:
                    return int(Path(str(path) + ".lock").read_text())
        time.sleep(0.05)
    raise AssertionError(f"no resident at {path}")


def _drive(loop, db: str, env: dict, agent: str = "claude-code") -> list[tuple[str, dict | None, bool]]:
    """Every event of the loop through its own hook process, a refused call not run."""
    said, refused = [], set()
    for ev in loop.events:
        if ev["hook_event_name"] == "PostToolUseFailure" and ev["tool_use_id"] in refused:
            continue
        out, in_process = _hook(ev, db, env, agent)
        if ev["hook_event_name"] == "PreToolUse" and out is not None:
            refused.add(ev["tool_use_id"])
        said.append((ev["hook_event_name"], out, in_process))
    return said


def _checks(db: str, session: str) -> list[tuple]:
    eng = make_engine(db)
    with eng.connect() as conn:
        rows = conn.exec_driver_sql(
            "SELECT e.seq, e.verdict, e.count, e.reason FROM enforced_checks e JOIN sessions s ON s.id = e.session_id "
            "WHERE s.key = ? ORDER BY e.seq".replace("?", "'" + session + "'")).all()
    eng.dispose()
    return [tuple(r) for r in rows]


def _strip(said):
    return [(event, out) for event, out, _ in said]


def test_the_resident_answers_what_the_in_process_path_answers_claude_code(tmp_path, db_url, env):
    _ledger(db_url)
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    here = npm_test_loop(tmp_path / "a", calls=6, session="sess-in-process")
    there = npm_test_loop(tmp_path / "b", calls=6, session="sess-resident")
    in_process = _drive(here, db_url, {**env, "LOOPLEDGER_HOOK_RESIDENT": "0"})
    _start(env)
    resident = _drive(there, db_url, env)
    assert all(in_proc for *_, in_proc in in_process)
    assert not any(in_proc for *_, in_proc in resident)  # every event answered by the resident
    assert _strip(resident) == _strip(in_process)
    pre = [out for event, out in _strip(resident) if event == "PreToolUse"]
    # LADDER on six identical failing calls (hand-counted): allow, warn (runs), block, halt, after_halt.
    assert pre[0] is None and pre[1] is None
    assert pre[2]["hookSpecificOutput"]["permissionDecision"] == "deny" and "continue" not in pre[2]
    assert pre[3]["continue"] is False and pre[4]["continue"] is False
    warned = [out for event, out in _strip(resident) if event == "PostToolUseFailure" and out]
    assert len(warned) == 1 and "LoopLedger warning" in warned[0]["hookSpecificOutput"]["additionalContext"]
    # The same decisions in the ledger, row for row.
    assert _checks(db_url, "sess-resident") == _checks(db_url, "sess-in-process")
    assert [v for _, v, *_ in _checks(db_url, "sess-resident")] == ["allow", "warn", "block", "halt", "after_halt",
                                                                   "after_halt"]


def test_the_resident_answers_what_the_in_process_path_answers_codex(tmp_path, fresh_db, env):
    """Codex CLI 0.171.0's recorded hook inputs (tests/fixtures/codex_0_171): the resident gives
    the in-process path's answers, and the ledger the same rows."""
    _ledger(fresh_db)
    fixture = Path(__file__).parent / "fixtures" / "codex_0_171" / "hook_events.jsonl"

    def events(session):
        evs = [{**json.loads(line), "session_id": session, "transcript_path": str(tmp_path / f"{session}.jsonl")}
               for line in fixture.read_text().splitlines() if line.strip()]
        refused, out = set(), []
        for ev in evs:  # Codex runs no PostToolUse for a call a hook refused
            if ev["hook_event_name"] != "PostToolUse" or ev["tool_use_id"] not in refused:
                out.append(ev)
            if ev["hook_event_name"] == "PreToolUse" and len([e for e in out if e["hook_event_name"] == "PreToolUse"]) > 2:
                refused.add(ev["tool_use_id"])  # LADDER refuses from the third call on
        return out

    off = {**env, "LOOPLEDGER_HOOK_RESIDENT": "0"}
    in_process = [_hook(ev, fresh_db, off, "codex") for ev in events("c-in")]
    _start(env)
    resident = [_hook(ev, fresh_db, env, "codex") for ev in events("c-res")]
    assert [o for o, _ in resident] == [o for o, _ in in_process]
    assert not any(p for _, p in resident)  # the resident decided every one
    denies = [o for o, _ in resident if o and "permissionDecision" in o.get("hookSpecificOutput", {})]
    assert len(denies) == 2 and all("continue" not in o for o in denies)
    assert _checks(fresh_db, "c-res") == _checks(fresh_db, "c-in")


def test_the_resident_answers_what_the_in_process_path_answers_gemini_cli(tmp_path, fresh_db, env):
    _ledger(fresh_db, "ladder")

    def events(session):
        base = {"session_id": session, "transcript_path": str(tmp_path / f"{session}.json"), "cwd": str(tmp_path)}
        call = {**base, "hook_event_name": "BeforeTool", "tool_name": "run_shell_command",
                "tool_input": {"command": "npm test"}}
        after = {**base, "hook_event_name": "AfterTool", "tool_name": "run_shell_command",
                 "tool_input": {"command": "npm test"},
                 "tool_response": {"llmContent": "FAIL", "returnDisplay": "FAIL", "error": None}}
        return [{**base, "hook_event_name": "BeforeAgent", "prompt": "fix it"}, call, after, call, after, call, call]

    off = {**env, "LOOPLEDGER_HOOK_RESIDENT": "0"}
    in_process = [_hook(ev, fresh_db, off, "gemini-cli") for ev in events("g-in")]
    _start(env)
    resident = [_hook(ev, fresh_db, env, "gemini-cli") for ev in events("g-res")]
    assert [o for o, _ in resident] == [o for o, _ in in_process]
    assert not any(p for _, p in resident)
    outs = [o for o, _ in resident]
    assert outs[:4] == [{}, {}, {}, {}]  # prompt, call, answer, warned call: {} allows in Gemini CLI
    assert "LoopLedger warning" in outs[4]["hookSpecificOutput"]["additionalContext"]
    assert outs[5]["decision"] == "deny" and "continue" not in outs[5]
    assert outs[6]["decision"] == "deny" and outs[6]["continue"] is False


def test_without_a_resident_the_hook_answers_itself_then_one_starts_for_the_next_call(tmp_path, fresh_db, env):
    _ledger(fresh_db)
    loop = npm_test_loop(tmp_path, calls=1)
    pre = next(ev for ev in loop.events if ev["hook_event_name"] == "PreToolUse")
    assert not _socket(env).exists()
    out, in_process = _hook(pre, fresh_db, env)
    assert out is None and in_process
    # The hook has exited and the resident it started lives on (it idles 60 s): the hook did not
    # wait for it; detached into its own session, away from the agent's process group.
    pid = _wait_served(env)
    assert os.getsid(pid) not in (os.getsid(0), 0)
    out, in_process = _hook({**pre, "tool_use_id": "toolu_next"}, fresh_db, env)
    assert out is None and not in_process


def test_a_dead_residents_socket_file_or_a_hung_resident_leaves_the_answer_to_the_hook(tmp_path, fresh_db, env):
    import socket

    _ledger(fresh_db, ALLOW)
    loop = npm_test_loop(tmp_path, calls=3)
    pres = [ev for ev in loop.events if ev["hook_event_name"] == "PreToolUse"]
    env = {**env, "LOOPLEDGER_HOOK_BUSY_TIMEOUT": "1"}  # the client waits a reply for this + 5 s
    path = _socket(env)
    path.parent.mkdir(mode=0o700)
    dead = socket.socket(socket.AF_UNIX)
    _at(dead, "bind", path)
    dead.close()  # the file stays, nobody listens: connection refused
    assert _hook(pres[0], fresh_db, env) == (None, True)
    # A fresh resident replaced it (the client started one; it took the lock and the path).
    _wait_served(env)
    pid = int(Path(str(path) + ".lock").read_text())
    os.kill(pid, signal.SIGKILL)
    wait_until(lambda: gone(pid), "the killed resident is gone")
    os.unlink(path)
    hung = socket.socket(socket.AF_UNIX)
    _at(hung, "bind", path)
    hung.listen(1)  # accepts, never answers
    try:
        out, in_process = _hook(pres[1], fresh_db, env, timeout=60)
    finally:
        hung.close()
    assert out is None and in_process
    assert [v for _, v, *_ in _checks(fresh_db, loop.events[0]["session_id"])] == ["allow", "allow"]


def test_a_resident_killed_mid_request_leaves_the_answer_to_the_hook(tmp_path, fresh_db, env):
    _ledger(fresh_db, ALLOW)
    loop = npm_test_loop(tmp_path, calls=3)
    pres = [ev for ev in loop.events if ev["hook_event_name"] == "PreToolUse"]
    env = {**env, "LOOPLEDGER_HOOK_BUSY_TIMEOUT": "60"}
    resident = _start(env)
    assert _hook(pres[0], fresh_db, env) == (None, False)
    # Hold the ledger's write lock: the resident's request waits in it until it is killed.
    blocker = sqlite3.connect(fresh_db.removeprefix("sqlite:///"), isolation_level=None)
    blocker.execute("BEGIN IMMEDIATE")
    hook = subprocess.Popen([PYTHON, "-X", "importtime", str(BIN), "hook", "claude-code", "--db", fresh_db],
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env)
    hook.stdin.write(json.dumps(pres[1]).encode())
    hook.stdin.close()
    # Killed once it has taken the hook's request (its listening socket and that connection).
    wait_until(lambda: socket_count(resident.pid) >= 2 or hook.poll() is not None, "the resident took the request")
    assert hook.poll() is None
    resident.kill()
    resident.wait(timeout=30)
    blocker.execute("ROLLBACK")
    blocker.close()
    assert hook.wait(timeout=120) == 0
    assert hook.stdout.read() == b""
    assert "loopledger.live.session" in hook.stderr.read().decode()  # answered in its own process
    # Each call decided exactly once: the dead resident wrote nothing.
    assert [v for _, v, *_ in _checks(fresh_db, loop.events[0]["session_id"])] == ["allow", "allow"]


@pytest.mark.skipif(os.getuid() != 0, reason="needs root to serve a socket as another user")
def _stored(db: str, session: str, kind: str, call_id: str) -> int:
    eng = make_engine(db)
    with eng.connect() as conn:
        n = conn.exec_driver_sql(
            "SELECT COUNT(*) FROM live_events e JOIN sessions s ON s.id = e.session_id "
            "WHERE s.key = %(s)s AND e.kind = %(k)s AND e.call_id = %(c)s".replace("%(s)s", f"'{session}'")
            .replace("%(k)s", f"'{kind}'").replace("%(c)s", f"'{call_id}'")).scalar_one()
    eng.dispose()
    return n


def test_a_resident_killed_between_its_commit_and_its_reply_leaves_the_call_recorded_once(tmp_path, db_url, env):
    """The resident commits the decision, then dies before its reply: the hook answers in its own
    process on the same event, and must give the answer the ledger holds, not judge the call a
    second time (LADDER: a third identical call is blocked; counted twice it would be a halt)."""
    _ledger(db_url)
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    loop = npm_test_loop(tmp_path / "a", calls=3, session="sess-killed")
    ref = npm_test_loop(tmp_path / "b", calls=3, session="sess-reference")
    third = [i for i, ev in enumerate(loop.events) if ev["hook_event_name"] == "PreToolUse"][2]
    off = {**env, "LOOPLEDGER_HOOK_RESIDENT": "0"}
    expected = [_hook(ev, db_url, off)[0] for ev in ref.events[:third + 1]][-1]  # uninterrupted, in-process
    for ev in loop.events[:third]:
        _hook(ev, db_url, off)
    held = tmp_path / "held"
    resident = _start({**env, "LOOPLEDGER_HOOK_RESIDENT_TEST_HOLD": str(held)})
    hook = subprocess.Popen([PYTHON, "-X", "importtime", str(BIN), "hook", "claude-code", "--db", db_url],
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env)
    hook.stdin.write(json.dumps(loop.events[third]).encode())
    hook.stdin.close()
    deadline = time.monotonic() + 120
    while not held.exists():  # committed, reply not sent
        assert time.monotonic() < deadline and resident.poll() is None
        time.sleep(0.02)
    call_id = loop.events[third]["tool_use_id"]
    assert _stored(db_url, "sess-killed", "call", call_id) == 1  # the resident committed it
    resident.kill()
    resident.wait(timeout=30)
    assert hook.wait(timeout=120) == 0
    assert "loopledger.live.session" in hook.stderr.read().decode()  # answered in its own process
    out = json.loads(hook.stdout.read())
    assert out == expected
    assert out["hookSpecificOutput"]["permissionDecision"] == "deny" and "continue" not in out  # a block
    assert _stored(db_url, "sess-killed", "call", call_id) == 1
    assert [v for _, v, *_ in _checks(db_url, "sess-killed")] == ["allow", "warn", "block"]
    assert _checks(db_url, "sess-killed") == _checks(db_url, "sess-reference")


def _killed_after_commit(event: dict, db: str, env: dict, tmp_path, agent: str = "claude-code"):
    """`event` handed to a resident that commits its decision and is killed before replying;
    (the hook's answer, whether it answered in its own process)."""
    held = tmp_path / "held"
    held.unlink(missing_ok=True)
    resident = _start({**env, "LOOPLEDGER_HOOK_RESIDENT_TEST_HOLD": str(held)})
    hook = subprocess.Popen([PYTHON, "-X", "importtime", str(BIN), "hook", agent, "--db", db],
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env)
    hook.stdin.write(json.dumps(event).encode())
    hook.stdin.close()
    deadline = time.monotonic() + 120
    while not held.exists():  # committed, reply not sent
        assert time.monotonic() < deadline and resident.poll() is None
        time.sleep(0.02)
    resident.kill()
    resident.wait(timeout=30)
    assert hook.wait(timeout=120) == 0
    text = hook.stdout.read().decode().strip()
    return (json.loads(text) if text else None), "loopledger.live.session" in hook.stderr.read().decode()


def test_gemini_cli_a_resident_killed_after_its_commit_leaves_the_call_recorded_once(tmp_path, fresh_db, env):
    """Gemini CLI's BeforeTool has no call id: the redelivered call is found by its tool and
    arguments among the events stored since it was handed over (ladder: the third identical
    call is a deny; recorded twice it would be a halt)."""
    _ledger(fresh_db, "ladder")
    base = {"transcript_path": str(tmp_path / "g.json"), "cwd": str(tmp_path), "hook_event_name": "BeforeTool",
            "tool_name": "run_shell_command", "tool_input": {"command": "npm test"}}
    off = {**env, "LOOPLEDGER_HOOK_RESIDENT": "0"}
    expected = [_hook({**base, "session_id": "g-ref"}, fresh_db, off, "gemini-cli")[0] for _ in range(3)][-1]
    for _ in range(2):
        _hook({**base, "session_id": "g-killed"}, fresh_db, off, "gemini-cli")
    out, in_process = _killed_after_commit({**base, "session_id": "g-killed"}, fresh_db, env, tmp_path, "gemini-cli")
    assert in_process and out == expected
    assert out["decision"] == "deny" and "continue" not in out
    assert [v for _, v, *_ in _checks(fresh_db, "g-killed")] == ["allow", "warn", "block"]
    # Without a resident dying, the same call sent again is a new call, judged again (as always).
    assert _hook({**base, "session_id": "g-killed"}, fresh_db, off, "gemini-cli")[0]["continue"] is False


def test_a_socket_served_by_another_uid_is_not_used(tmp_path, fresh_db, env):
    _ledger(fresh_db)
    loop = npm_test_loop(tmp_path, calls=1)
    pre = next(ev for ev in loop.events if ev["hook_event_name"] == "PreToolUse")
    path = _socket(env)
    path.parent.mkdir(mode=0o700)
    # Bound here, then listening as nobody (SO_PEERCRED reports the listener's uid); it would
    # answer a block to anything it is sent, and records what it received.
    fake = ("import os, socket, sys\n"
            "from loopledger.live.hook_client import address\n"
            "s = socket.socket(socket.AF_UNIX); s.bind(address(sys.argv[1])[0]); os.setuid(65534); s.listen(1)\n"
            "print('ready', flush=True)\n"
            "c, _ = s.accept(); c.settimeout(10)\n"
            "data = b''\n"
            "try:\n    data = c.recv(65536)\nexcept OSError:\n    pass\n"
            "sys.stdout.write(str(len(data))); sys.stdout.flush()\n")
    proc = subprocess.Popen([sys.executable, "-c", fake, str(path)], stdout=subprocess.PIPE, text=True)
    assert proc.stdout.readline().strip() == "ready"
    out, in_process = _hook(pre, fresh_db, {**env, "LOOPLEDGER_HOOK_RESIDENT_IDLE": "1"})
    assert out is None and in_process
    assert proc.wait(timeout=30) == 0 and proc.stdout.read() == "0"  # it was sent nothing


def test_a_runtime_folder_deeper_than_af_unix_allows_is_still_served(tmp_path, fresh_db, env):
    # AF_UNIX addresses stop at 107 bytes; a deep HOME or XDG folder (a CI runner's, pytest's own
    # tmp folders under xdist) must not silently turn the resident off.
    run = tmp_path / ("deep-" * 16) / "run"
    run.mkdir(parents=True, mode=0o700)
    env = {**env, "XDG_RUNTIME_DIR": str(run)}
    assert len(str(_socket(env))) > 108
    _ledger(fresh_db, ALLOW)
    pres = [ev for ev in npm_test_loop(tmp_path, calls=2).events if ev["hook_event_name"] == "PreToolUse"]
    resident = _start(env)
    try:
        out, in_process = _hook(pres[0], fresh_db, env)
        assert out is None and not in_process  # allowed, and answered by the resident
    finally:
        resident.kill()
        resident.wait()


def test_a_socket_in_a_folder_open_to_others_is_not_used(tmp_path, fresh_db, env):
    _ledger(fresh_db)
    loop = npm_test_loop(tmp_path, calls=1)
    pre = next(ev for ev in loop.events if ev["hook_event_name"] == "PreToolUse")
    _start(env)
    _socket(env).parent.chmod(0o777)
    out, in_process = _hook(pre, fresh_db, env)
    assert out is None and in_process


def test_a_request_of_another_identity_is_declined(tmp_path, fresh_db, env):
    import socket

    _ledger(fresh_db, ALLOW)
    loop = npm_test_loop(tmp_path, calls=2)
    pres = [ev for ev in loop.events if ev["hook_event_name"] == "PreToolUse"]
    _start(env)
    path = _socket(env)
    # Another version / location / key: the reply says "answer it yourself", nothing is decided.
    with socket.socket(socket.AF_UNIX) as s:
        _at(s, "connect", path)
        s.sendall(hook_client.pack(b"0.0.1\0/elsewhere", b"claude-code", b"--db\0" + fresh_db.encode(), b"/", b"",
                                   json.dumps(pres[0]).encode()))
        s.shutdown(socket.SHUT_WR)
        reply = hook_client.unpack(hook_client.read_all(s), 4)
    assert reply is not None and reply[0] == b"fallback"
    assert _checks(fresh_db, loop.events[0]["session_id"]) == []
    # Another state key in the hook's environment names another socket: this resident is not asked.
    other = {**env, "LOOPLEDGER_STATE_KEY": "another key"}
    assert _socket(other) != path
    assert _hook(pres[0], fresh_db, other) == (None, True)
    _wait_served(other)  # the one that hook started for itself (stopped with the others)
    assert [v for _, v, *_ in _checks(fresh_db, loop.events[0]["session_id"])] == ["allow"]


def _package_copy(folder: Path) -> Path:
    """A copy of the loopledger package laid out as installed (ingest/ as loopledger, app/ as
    loopledger.app): with it first on PYTHONPATH, hooks and residents run this copy, so a test
    may change its files without any other test's resident seeing its own code change."""
    import shutil

    import loopledger

    src = Path(loopledger.__file__).parent
    dest = folder / "loopledger"
    skip = shutil.ignore_patterns("__pycache__")
    shutil.copytree(src, dest, ignore=skip)
    shutil.copytree(src.parent / "app", dest / "app", ignore=skip)
    return folder


def test_a_resident_whose_code_changed_on_disk_declines_and_exits(tmp_path, fresh_db, env):
    """An upgrade of an editable install: the resident's own copy of the code is changed (never
    the checkout other tests' residents run), its next request is declined, and it exits."""
    _ledger(fresh_db, ALLOW)
    loop = npm_test_loop(tmp_path, calls=2)
    pres = [ev for ev in loop.events if ev["hook_event_name"] == "PreToolUse"]
    pkg = _package_copy(tmp_path / "pkg")
    env = {**env, "PYTHONPATH": str(pkg)}
    where = subprocess.check_output([PYTHON, "-P", "-c", "import loopledger; print(loopledger.__file__)"],
                                    env=env, cwd="/", text=True).strip()
    assert where == str(pkg / "loopledger" / "__init__.py")  # the copy is what runs
    resident = _start(env)
    assert _hook(pres[0], fresh_db, env) == (None, False)  # answered by the copy's resident
    hooks_py = pkg / "loopledger" / "live" / "hooks.py"
    st = hooks_py.stat()
    os.utime(hooks_py, ns=(st.st_atime_ns, st.st_mtime_ns + 1_000_000_000))
    assert _hook(pres[1], fresh_db, env) == (None, True)
    assert resident.wait(timeout=30) == 0
    _wait_served(env)  # the fresh one that hook started (stopped with the others)
    assert [v for _, v, *_ in _checks(fresh_db, loop.events[0]["session_id"])] == ["allow", "allow"]


def test_the_resident_exits_when_idle_and_removes_its_socket(env):
    env = {**env, "LOOPLEDGER_HOOK_RESIDENT_IDLE": "0.5"}
    resident = _start(env)
    assert resident.wait(timeout=60) == 0
    assert not _socket(env).exists()


def test_the_client_path_imports_no_decision_code(tmp_path, fresh_db, env):
    _ledger(fresh_db)
    loop = npm_test_loop(tmp_path, calls=1)
    pre = next(ev for ev in loop.events if ev["hook_event_name"] == "PreToolUse")
    _start(env)
    proc = subprocess.run([PYTHON, "-X", "importtime", str(BIN), "hook", "claude-code", "--db", fresh_db],
                          input=json.dumps(pre).encode(), capture_output=True, env=env, timeout=120)
    imported = {line.split("|")[-1].strip() for line in proc.stderr.decode().splitlines()}
    assert "loopledger.live.hook_client" in imported
    assert not imported & {"orjson", "sqlite3", "socket", "loopledger.live.hooks", "loopledger.live.db",
                           "loopledger.live.session", "loopledger.redact", "sqlalchemy"}


def test_the_resident_follows_a_ledger_replaced_or_removed_between_events(tmp_path, env):
    """It keeps a SQLite ledger open between events, and still writes where a hook process
    would: a ledger file replaced by another is written afresh, a removed one is not recreated."""
    ledger = tmp_path / "ledger.sqlite"
    db = f"sqlite:///{ledger}"
    _ledger(db, ALLOW)
    loop = npm_test_loop(tmp_path, calls=3)
    pres = [ev for ev in loop.events if ev["hook_event_name"] == "PreToolUse"]
    session = loop.events[0]["session_id"]
    _start(env)
    log = tmp_path / "hook.log"
    env = {**env, "LOOPLEDGER_HOOK_LOG": str(log)}
    assert _hook(pres[0], db, env) == (None, False)
    assert len(_checks(db, session)) == 1
    for suffix in ("", "-wal", "-shm"):
        Path(str(ledger) + suffix).unlink(missing_ok=True)
    _ledger(db, ALLOW)
    assert _hook(pres[1], db, env) == (None, False)
    assert [v for _, v, *_ in _checks(db, session)] == ["allow"]  # the new file's first decision
    for suffix in ("", "-wal", "-shm"):
        Path(str(ledger) + suffix).unlink(missing_ok=True)
    assert _hook(pres[2], db, env) == (None, False)
    assert not ledger.exists()
    assert "no ledger at" in log.read_text().splitlines()[-1]


def _open_files(pid: int) -> list[str]:
    out = []
    for fd in Path(f"/proc/{pid}/fd").iterdir():
        try:
            out.append(os.readlink(fd))
        except OSError:
            pass
    return out


def test_an_idle_resident_lets_go_of_a_ledger_removed_or_replaced(tmp_path, env):
    """A ledger kept open by an idle resident and then removed (or replaced by another file) is
    closed within LEDGER_CHECK_S, not held (its space, its old inode) until the resident exits;
    the next event writes to the file that is there then."""
    from loopledger.live import resident as resident_mod

    ledger = tmp_path / "ledger.sqlite"
    db = f"sqlite:///{ledger}"
    _ledger(db, ALLOW)
    loop = npm_test_loop(tmp_path, calls=2)
    pres = [ev for ev in loop.events if ev["hook_event_name"] == "PreToolUse"]
    proc = _start(env)
    assert _hook(pres[0], db, env) == (None, False)
    assert any(f == str(ledger) for f in _open_files(proc.pid))  # kept open between events
    for suffix in ("", "-wal", "-shm"):
        Path(str(ledger) + suffix).unlink(missing_ok=True)
    deadline = time.monotonic() + resident_mod.LEDGER_CHECK_S + 60
    while any(f.startswith(str(ledger)) for f in _open_files(proc.pid)):
        assert time.monotonic() < deadline, _open_files(proc.pid)
        time.sleep(0.1)
    assert proc.poll() is None  # still serving: it let go of that ledger only
    _ledger(db, ALLOW)
    assert _hook(pres[1], db, env) == (None, False)
    assert [v for _, v, *_ in _checks(db, loop.events[0]["session_id"])] == ["allow"]


def test_on_postgresql_the_resident_survives_its_pooled_connection_dying(tmp_path, db_url, env):
    if not db_url.startswith("postgresql"):
        pytest.skip("PostgreSQL only: the resident keeps its engine and pool")
    _ledger(db_url, ALLOW)
    loop = npm_test_loop(tmp_path, calls=3)
    pres = [ev for ev in loop.events if ev["hook_event_name"] == "PreToolUse"]
    log = tmp_path / "hook.log"
    env = {**env, "LOOPLEDGER_HOOK_LOG": str(log)}
    _start(env)
    assert _hook(pres[0], db_url, env) == (None, False)
    eng = make_engine(db_url)
    with eng.connect() as conn:  # what a server restart does to the resident's pooled connection
        conn.exec_driver_sql("SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
                             "WHERE datname = current_database() AND pid <> pg_backend_pid()")
    eng.dispose()
    assert _hook(pres[1], db_url, env) == (None, False)
    assert not log.exists()  # judged, not allowed for want of a ledger
    assert [v for _, v, *_ in _checks(db_url, loop.events[0]["session_id"])] == ["allow", "allow"]


def test_a_resident_started_by_an_agent_under_test_goes_soon_and_can_be_stopped(tmp_path):
    """The real-agent tests hand their agent tests.real_clients.clean_env, which the agent passes
    to its hooks: the resident those hooks start idles RESIDENT_IDLE_S, not 10 minutes, and
    stop_residents ends one still running (the tests' teardown)."""
    from tests.real_clients import RESIDENT_IDLE_S, clean_env, resident_pids, stop_residents

    db = f"sqlite:///{tmp_path / 'ledger.sqlite'}"
    _ledger(db, ALLOW)
    home = tmp_path / "home"
    home.mkdir()
    env = {**clean_env(home), "LOOPLEDGER_HOOK_RESIDENT": "1"}  # on, as for a person (conftest turns it off)
    loop = npm_test_loop(tmp_path, calls=2)
    pres = [ev for ev in loop.events if ev["hook_event_name"] == "PreToolUse"]
    for ev in pres:
        subprocess.run([str(BIN), "hook", "claude-code", "--db", db], input=json.dumps(ev).encode(), env=env,
                       check=True, capture_output=True)
        deadline = time.monotonic() + 60
        while not resident_pids(home):
            assert time.monotonic() < deadline, "no resident started"
            time.sleep(0.05)
    # Left alone it exits after its idle time (generous margin for a loaded machine).
    deadline = time.monotonic() + RESIDENT_IDLE_S + 60
    while resident_pids(home):
        assert time.monotonic() < deadline, "the resident outlived its idle time"
        time.sleep(0.1)
    # One still running is stopped by the teardown helper.
    subprocess.run([str(BIN), "hook", "claude-code", "--db", db], input=json.dumps(pres[0]).encode(), env=env,
                   check=True, capture_output=True)
    deadline = time.monotonic() + 60
    while not resident_pids(home):
        assert time.monotonic() < deadline, "no resident started"
        time.sleep(0.05)
    assert stop_residents(home) and resident_pids(home) == []
