"""Live clients never wait on a broken or busy guard (issue 36, reproductions 12-16).

- 12: a guard the OpenCode plugin cannot start answers every waiting call at once, and is not
  started again on each call (the plugin under Node, a real spawn of a missing command).
- 13: a call the plugin let run (its wait ran out behind a busy ledger) is never stored as a
  refusal afterwards (the plugin under Node, the real `loopledger guard`, a real SQLite lock).
- 14: a Gemini CLI hook whose virtualenv is gone exits the way Gemini CLI reads as "allow".
- 15: a busy ledger costs one tool call one busy wait in all, not one per hook event (hook
  processes on SQLite and PostgreSQL, in-process and resident; the OpenCode plugin's guard).
- 16: a halt's reason reaches the person running `codex exec` (tests/test_live_codex.py).

No timing is asserted: waits are counted from the one line each event that was not judged logs
(one that waited says how long it waited; one that did not says so)."""

from __future__ import annotations

import json
import os
import select
import shutil
import sqlite3
import subprocess
from pathlib import Path

import pytest

from tests.live_support import BIN, make_ledger

ROOT = Path(__file__).resolve().parent.parent
DRIVER = Path(__file__).with_name("opencode_plugin_driver.mjs")
LADDER = "ladder:warn_at=2,block_at=3,halt_at=4"
BUSY_S = "1"  # LOOPLEDGER_HOOK_BUSY_TIMEOUT in these tests: each wait for a held lock is one second


def _busy_lines(lines: list[str]) -> tuple[int, int]:
    """(waits, events that did not wait) among logged lines about a busy ledger. A wait is any
    busy line that does not say it was not waited for (the old code's "database is locked" and
    PostgreSQL's "lock timeout" included)."""
    busy = [ln for ln in lines if "busy" in ln or "database is locked" in ln or "lock timeout" in ln]
    skipped = [ln for ln in busy if "not waited for again" in ln]
    return len(busy) - len(skipped), len(skipped)


# ── the OpenCode plugin under Node ───────────────────────────────────────────────────────────


class Plugin:
    """LoopLedger's OpenCode plugin (the shipped file, with `command` and `timeout_ms` as its
    CONFIG) loaded by tests/opencode_plugin_driver.mjs in a real Node process."""

    def __init__(self, folder: Path, command: list[str], timeout_ms: int, env: dict[str, str] | None = None) -> None:
        if shutil.which("node") is None:
            pytest.skip("node is needed to run the OpenCode plugin (not on PATH)")
        text = (ROOT / "ingest" / "live" / "opencode_plugin.js").read_text(encoding="utf-8")
        start, end = text.index("/* loopledger:config */"), text.index("/* loopledger:end */")
        config = json.dumps({"command": command, "timeoutMs": timeout_ms})
        plugin = folder / "loopledger-plugin.mjs"
        plugin.write_text(text[:start] + "/* loopledger:config */ " + config + " " + text[end:], encoding="utf-8")
        self.proc = subprocess.Popen(["node", str(DRIVER), str(plugin)], stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, text=True, env=env)

    def op(self, wait_s: float = 300, **op) -> dict:
        assert self.proc.stdin is not None and self.proc.stdout is not None
        self.proc.stdin.write(json.dumps(op) + "\n")
        self.proc.stdin.flush()
        ready, _, _ = select.select([self.proc.stdout], [], [], wait_s)
        assert ready, f"the plugin did not answer {op}"
        return json.loads(self.proc.stdout.readline())

    def call(self, session: str, *ids: str, command: str = "cat missing.txt") -> list[str | None]:
        """tool.execute.before for each id at once: what the plugin threw for each (None: allowed)."""
        got = self.op(op="call", session=session, ids=list(ids), tool="bash", args={"command": command})
        return [r["refused"] for r in got["results"]]

    def after(self, session: str, call_id: str, output: str = "cat: missing.txt: No such file or directory",
              exit: int = 1) -> str:
        return self.op(op="after", session=session, id=call_id, tool="bash", output=output, exit=exit)["output"]

    def logs(self) -> list[str]:
        return self.op(op="logs")["logs"]

    def close(self) -> None:
        if self.proc.stdin is not None:
            self.proc.stdin.close()
        self.proc.wait(timeout=60)


def test_point_12_a_guard_that_cannot_start_answers_every_waiting_call_at_once_and_is_not_retried(tmp_path):
    """A moved virtualenv: the plugin's command does not exist. Three parallel calls and two more
    are all allowed by the spawn error itself (the plugin's 10 s wait never runs out: no "no
    verdict" line), and the command is tried once, not once per call."""
    gone = tmp_path / "moved-venv" / "bin" / "loopledger"
    plugin = Plugin(tmp_path, [str(gone), "guard", "--origin", "opencode"], timeout_ms=10000)
    try:
        assert plugin.call("s1", "c1", "c2", "c3") == [None, None, None]
        assert plugin.call("s1", "c4") == [None]
        assert plugin.call("s1", "c5") == [None]
        logs = plugin.logs()
    finally:
        plugin.close()
    assert not [ln for ln in logs if "no verdict" in ln], logs  # no call waited for the timeout
    started = [ln for ln in logs if "did not start" in ln]
    assert len(started) == 1 and "ENOENT" in started[0], logs


def test_point_12_a_guard_that_ends_before_answering_is_not_started_again_on_each_call(tmp_path):
    """loopledger uninstalled from a virtualenv whose interpreter is still there: the command
    starts and ends at once without answering. Every call is allowed and the command runs once
    (it leaves one line in a file each time it runs)."""
    runs = tmp_path / "runs.txt"
    command = ["sh", "-c", f"echo ran >> {runs}; echo 'No module named loopledger' >&2; exit 1"]
    plugin = Plugin(tmp_path, command, timeout_ms=10000)
    try:
        for i in range(4):
            assert plugin.call("s1", f"c{i}") == [None]
        logs = plugin.logs()
    finally:
        plugin.close()
    assert runs.read_text().splitlines() == ["ran"]
    assert not [ln for ln in logs if "no verdict" in ln], logs
    assert len([ln for ln in logs if "ended before answering" in ln]) == 1, logs


def _ledger_env(tmp_path: Path) -> dict[str, str]:
    return {**os.environ, "HOME": str(tmp_path / "home"), "LOOPLEDGER_HOOK_BUSY_TIMEOUT": BUSY_S,
            "LOOPLEDGER_HOOK_RESIDENT": "0"}


def _stored(ledger: Path, origin: str = "opencode") -> dict[str, str]:
    """call id -> the verdict stored for it."""
    con = sqlite3.connect(ledger)
    try:
        return dict(con.execute("SELECT call_id, verdict FROM enforced_checks WHERE origin = ?", (origin,)).fetchall())
    finally:
        con.close()


def _hold(ledger: Path) -> sqlite3.Connection:
    """Another writer holding the ledger's write lock until it rolls back."""
    con = sqlite3.connect(ledger, isolation_level=None, check_same_thread=False)
    con.execute("BEGIN IMMEDIATE")
    return con


def test_point_13_a_call_the_plugin_let_run_is_never_stored_as_a_halt(tmp_path):
    """The halting call reaches the guard behind six other sessions' events that each wait for
    the busy ledger: the plugin's wait (4 s) runs out first and the call runs. Once the ledger is
    free, the guard must not judge and store that call as the halt it would have been."""
    ledger = tmp_path / "ledger.sqlite"
    make_ledger(ledger)
    command = [str(BIN), "guard", "--db", str(ledger), "--origin", "opencode", "--policy", LADDER]
    plugin = Plugin(tmp_path, command, timeout_ms=4000, env=_ledger_env(tmp_path))
    holder = None
    try:
        assert plugin.call("s1", "c1") == [None]
        plugin.after("s1", "c1")
        assert plugin.call("s1", "c2") == [None]  # warned
        assert "LoopLedger warning" in plugin.after("s1", "c2")
        assert plugin.call("s1", "c3")[0].startswith("LoopLedger blocked")
        holder = _hold(ledger)
        for i in range(6):
            plugin.op(op="user", session=f"other-{i}", text="go on")  # each waits for the lock
        assert plugin.call("s1", "c4") == [None]  # no verdict in time: the plugin let it run
        holder.rollback()
        holder = None
        assert plugin.call("sync", "s") == [None]  # every event before it has been handled
        logs = plugin.logs()
    finally:
        if holder is not None:
            holder.rollback()
        plugin.close()
    stored = _stored(ledger)
    assert stored.get("c3") == "block"  # it did judge before the lock
    assert stored.get("c4") is None, (stored, logs)  # not recorded as a refusal of a call that ran
    assert [ln for ln in logs if "no verdict" in ln]  # the plugin's wait did run out


def test_point_15_the_plugins_tool_call_waits_for_a_busy_ledger_once(tmp_path):
    """A call that waited for the busy ledger in vain: its answer does not wait for it again (it
    would hold up the next call's verdict as long again)."""
    ledger = tmp_path / "ledger.sqlite"
    make_ledger(ledger)
    command = [str(BIN), "guard", "--db", str(ledger), "--origin", "opencode", "--policy", LADDER]
    plugin = Plugin(tmp_path, command, timeout_ms=6000, env=_ledger_env(tmp_path))
    holder = None
    try:
        assert plugin.call("s1", "c0") == [None]  # the guard is up, the session known
        plugin.after("s1", "c0")
        assert plugin.call("s0", "x") == [None]  # once this is answered, c0's answer is stored
        holder = _hold(ledger)
        assert plugin.call("s1", "c1") == [None]  # allowed after one wait in vain
        plugin.after("s1", "c1")
        # Another session's call, the ledger still held: its verdict comes once the answer
        # before it in the guard's queue was handled (and it waits its own once).
        assert plugin.call("s2", "d1") == [None]
        holder.rollback()
        holder = None
        assert plugin.call("sync", "s") == [None]
        logs = plugin.logs()
    finally:
        if holder is not None:
            holder.rollback()
        plugin.close()
    busy = [ln for ln in logs if "busy" in ln or "database is locked" in ln]
    waits, skipped = _busy_lines(logs)
    # c1's one wait, its answer's none; d1, another tool call, waits its own.
    assert (waits, skipped) == (2, 1), busy
    assert "not waited for again" in busy[1] and "c1" in busy[1], busy


# ── hook processes: one busy wait per tool call ───────────────────────────────────────────────


def _events(agent: str, session: str, call: str, cwd: str) -> list[dict]:
    """One tool call's hook events, in the order the agent sends them."""
    base = {"session_id": session, "cwd": cwd}
    if agent == "gemini-cli":
        args = {"command": "cat missing.txt"}
        return [{**base, "hook_event_name": "BeforeTool", "tool_name": "run_shell_command", "tool_input": args},
                {**base, "hook_event_name": "AfterTool", "tool_name": "run_shell_command", "tool_input": args,
                 "tool_response": {"llmContent": "cat: missing.txt: No such file or directory", "error": None}}]
    args = {"command": "cat missing.txt"}
    pre = {**base, "hook_event_name": "PreToolUse", "tool_name": "Bash", "tool_input": args, "tool_use_id": call}
    post = {**pre, "hook_event_name": "PostToolUse", "tool_response": "cat: missing.txt: No such file or directory"}
    if agent == "codex":
        return [pre, post]
    post["tool_response"] = {"stdout": "", "stderr": "cat: missing.txt: No such file or directory",
                             "interrupted": False, "isImage": False}
    batch = {**base, "hook_event_name": "PostToolBatch",
             "tool_calls": [{"tool_name": "Bash", "tool_input": args, "tool_use_id": call,
                             "tool_response": post["tool_response"]}]}
    return [pre, post, batch]


class _PgHolder:
    """Another writer holding every session row's lock (what a hook's transaction takes)."""

    def __init__(self, url: str) -> None:
        from sqlalchemy import create_engine, text

        self.engine = create_engine(url)
        self.conn = self.engine.connect()
        self.tx = self.conn.begin()
        self.conn.execute(text("SELECT id FROM sessions FOR UPDATE"))

    def rollback(self) -> None:
        self.tx.rollback()
        self.conn.close()
        self.engine.dispose()


@pytest.mark.parametrize("agent", ["claude-code", "gemini-cli", "codex"])
@pytest.mark.parametrize("resident", ["0", "1"])
def test_point_15_a_busy_ledger_costs_a_hooked_tool_call_one_wait(tmp_path, db_url, agent, resident):
    """Another writer holds the ledger for a whole tool call: its first event waits the busy
    timeout and is allowed; its later events (the answer; Claude Code's PostToolBatch) try once,
    without waiting, and are allowed. Once the ledger is free the next call is judged at every
    event, and no mark is left behind. In hook processes and through the resident guard."""
    from tests.live_support import run_hook
    from tests.real_clients import stop_residents

    make_ledger(db_url)
    db = db_url.removeprefix("sqlite:///") if db_url.startswith("sqlite:///") else db_url
    home = tmp_path / "home"
    home.mkdir()
    log = tmp_path / "hook.log"
    env = {**_ledger_env(tmp_path), "LOOPLEDGER_HOOK_RESIDENT": resident, "LOOPLEDGER_HOOK_RESIDENT_IDLE": "5",
           "XDG_STATE_HOME": str(home / ".local" / "state"), "XDG_RUNTIME_DIR": ""}
    session = f"sess-{agent}"
    start = {"session_id": session, "cwd": str(tmp_path), "hook_event_name": "SessionStart", "source": "startup"}
    try:
        assert run_hook(start, db, agent, log, env).returncode == 0  # the session row exists
        holder = _hold(Path(db)) if db_url.startswith("sqlite:///") else _PgHolder(db_url)
        try:
            for ev in _events(agent, session, "call_busy", str(tmp_path)):
                assert run_hook(ev, db, agent, log, env).returncode == 0
        finally:
            holder.rollback()
        lines = log.read_text().splitlines()
        events = len(_events(agent, session, "call_busy", str(tmp_path)))
        assert _busy_lines(lines) == (1, events - 1), lines
        for ev in _events(agent, session, "call_free", str(tmp_path)):
            assert run_hook(ev, db, agent, log, env).returncode == 0
        assert log.read_text().splitlines() == lines  # judged at every event: nothing more logged
        marks = home / ".local" / "state" / "loopledger" / "busy"
        assert not marks.exists() or list(marks.iterdir()) == []
    finally:
        stop_residents(home)


# ── Gemini CLI: a hook that cannot start is not a refusal ─────────────────────────────────────


def test_point_14_gemini_hook_command_survives_a_missing_virtualenv(tmp_path):
    """The installed command, its loopledger moved away, exits 1 (Gemini CLI's non-blocking
    error: the call runs, the shell's message shown as a warning), never the shell's 127, which
    Gemini CLI reads as a refusal of every call. Claude Code's and Codex's commands are left as
    they were (both read any status but 2 as non-blocking)."""
    ledger = tmp_path / "ledger.sqlite"
    make_ledger(ledger)
    project = tmp_path / "shop"
    project.mkdir()
    env = {**os.environ, "HOME": str(tmp_path / "home"), "LOOPLEDGER_HOOK_RESIDENT": "0"}
    inst = subprocess.run([str(BIN), "hook", "install", "gemini-cli", "--project", "--db", str(ledger)],
                          cwd=project, capture_output=True, text=True, env=env)
    assert inst.returncode == 0, inst.stderr
    doc = json.loads((project / ".gemini" / "settings.json").read_text())
    command = doc["hooks"]["BeforeTool"][0]["hooks"][0]["command"]
    event = json.dumps({"session_id": "g1", "cwd": str(project), "hook_event_name": "BeforeTool",
                        "tool_name": "run_shell_command", "tool_input": {"command": "ls"}})
    # Gemini CLI runs a hook command with bash -c, the event on stdin.
    ok = subprocess.run(["bash", "-c", command], input=event, capture_output=True, text=True, env=env)
    assert ok.returncode == 0 and json.loads(ok.stdout) == {}, ok.stderr
    moved = command.replace(str(BIN), str(tmp_path / "moved-venv" / "bin" / "loopledger"))
    assert moved != command
    gone = subprocess.run(["bash", "-c", moved], input=event, capture_output=True, text=True, env=env)
    assert gone.returncode == 1 and "No such file or directory" in gone.stderr, (gone.returncode, gone.stderr)


def test_point_14_the_real_gemini_cli_runs_unguarded_when_the_hooks_virtualenv_is_gone(tmp_path):
    """gemini-cli 0.61.0 itself, the installed hook's loopledger moved away: every call runs (the
    model reads each result), nothing is refused; with the bare command it refused every call
    ("Agent execution blocked")."""
    from tests.real_clients import clean_env, gemini_cli, resident_pids
    from tests.stand_in_models import GeminiServer

    gemini = gemini_cli()
    ledger = tmp_path / "ledger.sqlite"
    make_ledger(ledger)
    project, home = tmp_path / "shop", tmp_path / "home"
    project.mkdir()
    (home / ".gemini").mkdir(parents=True)
    (home / ".gemini" / "settings.json").write_text(json.dumps({"security": {"auth": {"selectedType": "gemini-api-key"}},
                                                                "model": {"disableLoopDetection": True}}))
    (home / ".gemini" / "trustedFolders.json").write_text(json.dumps({str(project): "TRUST_FOLDER"}))
    env = clean_env(home, LOOPLEDGER_HOOK_LOG=str(tmp_path / "hook.log"))
    inst = subprocess.run([str(BIN), "hook", "install", "gemini-cli", "--project", "--db", str(ledger)],
                          cwd=project, capture_output=True, text=True, env=env)
    assert inst.returncode == 0, inst.stderr
    assert "the agent runs unguarded" in " ".join(inst.stdout.split())  # the promise tested here
    settings = project / ".gemini" / "settings.json"
    settings.write_text(settings.read_text().replace(str(BIN), str(tmp_path / "moved-venv" / "bin" / "loopledger")))
    with GeminiServer(tool_input={"command": "echo hello", "description": "Run it"}, max_turns=3) as model:
        env.update(GOOGLE_GEMINI_BASE_URL=model.url, GEMINI_API_KEY="stand-in")
        proc = subprocess.run([*gemini, "-p", "Say hello", "--output-format", "stream-json", "--yolo",
                               "-m", "gemini-2.5-flash"], cwd=project, env=env, capture_output=True, text=True,
                              timeout=600)
        n_requests = len(model.recorded.requests)
    said = proc.stdout + proc.stderr
    assert "Agent execution blocked" not in said, said[-3000:]
    results = [json.loads(ln) for ln in proc.stdout.splitlines() if ln.startswith("{")]
    results = [m for m in results if m.get("type") == "tool_result"]
    assert len(results) == 3 and all(r["status"] == "success" for r in results), results
    assert n_requests == 4  # three calls, each result read by the model, then the stand-in ends
    assert _stored(ledger, "gemini-cli") == {} and resident_pids(home) == []


# ── the real clients ───────────────────────────────────────────────────────────────────────────


def test_point_15_the_real_claude_code_waits_for_a_busy_ledger_once_per_tool_call(tmp_path):
    """Claude Code 2.1.197 itself, another writer holding the ledger for its whole run: each tool
    call's PreToolUse waits the busy timeout once, its PostToolUse and PostToolBatch not again
    (before: three waits a call). The session's start and the prompt wait their own (no call)."""
    from tests.real_clients import claude_code, clean_env, stop_residents
    from tests.stand_in_models import AnthropicServer

    claude = claude_code()
    ledger = tmp_path / "ledger.sqlite"
    make_ledger(ledger)
    project, home = tmp_path / "shop", tmp_path / "home"
    project.mkdir()
    home.mkdir()
    inst = subprocess.run([str(BIN), "hook", "install", "claude-code", "--project", "--db", str(ledger)],
                          cwd=project, capture_output=True, text=True)
    assert inst.returncode == 0, inst.stderr
    log = tmp_path / "hook.log"
    calls = 3
    try:
        with AnthropicServer(tool_input={"command": "echo hello", "description": "Say hello"},
                             max_turns=calls) as model:
            env = clean_env(home, ANTHROPIC_BASE_URL=model.url, ANTHROPIC_API_KEY="sk-ant-stand-in",
                            LOOPLEDGER_HOOK_LOG=str(log), LOOPLEDGER_HOOK_BUSY_TIMEOUT=BUSY_S)
            holder = _hold(ledger)
            try:
                proc = subprocess.run([*claude, "-p", "Say hello", "--output-format", "stream-json", "--verbose",
                                       "--include-hook-events", "--allowedTools", "Bash", "--model",
                                       "claude-sonnet-4-5"], cwd=project, env=env, capture_output=True, text=True,
                                      timeout=600)
            finally:
                holder.rollback()
            n_requests = len(model.recorded.requests)
    finally:
        stop_residents(home)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert n_requests == calls + 1  # every call ran, its result read by the model
    lines = log.read_text().splitlines()
    # SessionStart and UserPromptSubmit one wait each; each call one (PreToolUse), then two skipped.
    assert _busy_lines(lines) == (2 + calls, 2 * calls), lines
    assert _stored(ledger, "claude-code") == {}  # nothing judged: the ledger was never free


def test_point_12_the_real_opencode_runs_at_once_when_its_guard_cannot_start(tmp_path):
    """OpenCode 1.18.33 itself with the plugin whose loopledger was moved away: every call runs,
    and the plugin gave up on the guard once (OpenCode's log), not once per call."""
    from tests.real_clients import (
        clean_env,
        keep_opencode_plugin_deps,
        npm_cache,
        opencode,
        opencode_plugin_deps,
    )
    from tests.stand_in_models import ChatCompletionsServer

    oc = opencode()
    ledger = tmp_path / "ledger.sqlite"
    make_ledger(ledger)
    project, home = tmp_path / "shop", tmp_path / "home"
    project.mkdir()
    home.mkdir()
    env = clean_env(home, OPENCODE_DISABLE_MODELS_FETCH="1", OPENCODE_DISABLE_AUTOUPDATE="1",
                    npm_config_cache=str(npm_cache()))
    inst = subprocess.run([str(BIN), "hook", "install", "opencode", "--project", "--db", str(ledger)],
                          cwd=project, capture_output=True, text=True, env=env)
    assert inst.returncode == 0, inst.stderr
    plugin = project / ".opencode" / "plugins" / "loopledger.js"
    plugin.write_text(plugin.read_text().replace(json.dumps(str(BIN)),
                                                 json.dumps(str(tmp_path / "moved-venv" / "bin" / "loopledger"))))
    assert str(BIN) not in plugin.read_text()
    opencode_plugin_deps(project / ".opencode", home / ".config" / "opencode")
    calls = 3
    with ChatCompletionsServer(command="echo hello", max_turns=calls) as model:
        folder = home / ".config" / "opencode"
        folder.mkdir(parents=True, exist_ok=True)
        (folder / "opencode.json").write_text(json.dumps({
            "$schema": "https://opencode.ai/config.json",
            "provider": {"standin": {"npm": "@ai-sdk/openai-compatible", "name": "Stand-in",
                                     "options": {"baseURL": f"{model.url}/v1", "apiKey": "stand-in"},
                                     "models": {"loop-model": {"name": "Loop", "tool_call": True}}}},
            "model": "standin/loop-model", "autoupdate": False, "share": "disabled"}))
        proc = subprocess.run([*oc, "run", "--print-logs", "--log-level", "WARN", "--format", "json", "--auto",
                               "Say hello"], cwd=project, env=env, capture_output=True, text=True, timeout=600)
        n_requests = len(model.recorded.requests)
    keep_opencode_plugin_deps(project / ".opencode")
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert n_requests == calls + 1
    said = proc.stdout + proc.stderr
    tools = [json.loads(ln)["part"]["state"] for ln in proc.stdout.splitlines()
             if ln.startswith("{") and json.loads(ln).get("type") == "tool_use"]
    assert len(tools) == calls and all(t["status"] == "completed" for t in tools), tools
    assert said.count("did not start") == 1, said[-3000:]
    assert "no verdict" not in said


def test_point_15_the_real_gemini_cli_and_codex_cli_wait_for_a_busy_ledger_once_per_tool_call(tmp_path):
    """gemini-cli 0.61.0 and Codex CLI 0.171.0 themselves, another writer holding the ledger for
    the whole run: each tool call waits once (BeforeTool / PreToolUse), its AfterTool /
    PostToolUse not again (before: two waits a call); the start and the prompt wait their own."""
    from tests.real_clients import clean_env, codex_cli, gemini_cli, stop_residents
    from tests.stand_in_models import GeminiServer, ResponsesServer
    from tests.test_live_codex import _codex_home

    gemini, codex = gemini_cli(), codex_cli()
    calls = 2
    for agent in ("gemini-cli", "codex"):
        folder = tmp_path / agent
        ledger = folder / "ledger.sqlite"
        project, home = folder / "shop", folder / "home"
        project.mkdir(parents=True)
        home.mkdir()
        make_ledger(ledger)
        log = folder / "hook.log"
        env = clean_env(home, LOOPLEDGER_HOOK_LOG=str(log), LOOPLEDGER_HOOK_BUSY_TIMEOUT=BUSY_S)
        if agent == "gemini-cli":
            (home / ".gemini").mkdir()
            (home / ".gemini" / "settings.json").write_text(json.dumps(
                {"security": {"auth": {"selectedType": "gemini-api-key"}}, "model": {"disableLoopDetection": True}}))
            (home / ".gemini" / "trustedFolders.json").write_text(json.dumps({str(project): "TRUST_FOLDER"}))
            server = GeminiServer(tool_input={"command": "echo hello", "description": "Say hello"}, max_turns=calls)
        else:
            server = ResponsesServer(command="echo hello", max_turns=calls)
        inst = subprocess.run([str(BIN), "hook", "install", agent, "--project", "--db", str(ledger)],
                              cwd=project, capture_output=True, text=True, env=env)
        assert inst.returncode == 0, inst.stderr
        try:
            with server as model:
                if agent == "gemini-cli":
                    env.update(GOOGLE_GEMINI_BASE_URL=model.url, GEMINI_API_KEY="stand-in")
                    args = [*gemini, "-p", "Say hello", "--output-format", "stream-json", "--yolo",
                            "-m", "gemini-2.5-flash"]
                else:
                    _codex_home(home, model.url, project)
                    env.update(STANDIN_API_KEY="stand-in")
                    args = [*codex, "exec", "--json", "--skip-git-repo-check", "-s", "danger-full-access",
                            "--dangerously-bypass-hook-trust", "Say hello"]
                holder = _hold(ledger)
                try:
                    proc = subprocess.run(args, cwd=project, env=env, capture_output=True, text=True, timeout=600)
                finally:
                    holder.rollback()
                n_requests = len(model.recorded.requests)
        finally:
            stop_residents(home)
        assert proc.returncode == 0, (agent, proc.stderr[-2000:])
        assert n_requests == calls + 1, agent
        lines = log.read_text().splitlines()
        assert _busy_lines(lines) == (2 + calls, calls), (agent, lines)
        assert _stored(ledger, agent) == {}
