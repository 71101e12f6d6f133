"""`loopledger hook claude-code` driven as Claude Code drives it: one real process per event,
real-shaped payloads, on a real ledger; its decisions against the same policy's replay of the
session's transcript."""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest
from loopledger import formats, vocab, worker
from loopledger.detectors.policy import PolicySpec
from loopledger.events import ReadError, SessionStart
from loopledger.ledger import migrate, schema
from loopledger.ledger.engine import make_engine
from loopledger.live import enforce
from loopledger.replay import replay
from sqlalchemy import select

from tests.live_support import BIN, FAILING, SESSION, npm_test_loop, output, run_hook

REFUSED = (vocab.BLOCK, vocab.HALT, vocab.AFTER_HALT)


def _ledger(url: str, spec: PolicySpec | None = None):
    eng = make_engine(url)
    migrate.upgrade(eng)
    if spec is not None:
        with eng.begin() as conn:
            enforce.set_enforced(conn, spec, origin="compare")
    return eng


def _replayed(path: Path, spec: PolicySpec) -> dict[str, str]:
    """tool_use id → the policy's verdict on it when its transcript is replayed."""
    events = [it for it in formats.read(path, "claude-code") if not isinstance(it, SessionStart | ReadError)]
    out = {}
    for step in replay(events, spec):
        for c in step.checks:
            out[step.event.calls[max(c.idx, 0)].id] = c.verdict
    return out


def _drive(loop, db: str) -> dict[str, dict | None]:
    """Every event through its own hook process; a refused call is not run (no answer event)."""
    said: dict[str, dict | None] = {}
    refused: set[str] = set()
    for ev in loop.events:
        if ev["hook_event_name"] == "PostToolUseFailure" and ev["tool_use_id"] in refused:
            continue
        proc = run_hook(ev, db)
        assert proc.returncode == 0, proc.stderr
        out = output(proc)
        if ev["hook_event_name"] == "PreToolUse":
            said[ev["tool_use_id"]] = out
            if out is not None:
                refused.add(ev["tool_use_id"])
        elif ev["hook_event_name"] != "PostToolUseFailure":
            assert out is None, out  # SessionStart / UserPromptSubmit never say anything
    return said


@pytest.mark.parametrize("spec_text", ["ladder", "run-length"])
def test_enforced_verdicts_are_the_replays_in_claude_codes_format(tmp_path, db_url, spec_text):
    spec = PolicySpec.parse(spec_text)
    eng = _ledger(db_url, spec)
    loop = npm_test_loop(tmp_path, calls=6)
    expected = _replayed(loop.transcript, spec)
    assert set(expected.values()) & set(REFUSED), expected  # the loop is refused somewhere
    said = _drive(loop, db_url)

    for tid in loop.call_ids:
        verdict, out = expected[tid], said[tid]
        if verdict in (vocab.ALLOW, vocab.WARN):
            assert out is None, (tid, verdict, out)  # allowed: nothing on stdout
            continue
        spec_out = out["hookSpecificOutput"]
        assert spec_out["hookEventName"] == "PreToolUse"
        assert spec_out["permissionDecision"] == "deny"
        assert "LoopLedger" in spec_out["permissionDecisionReason"]
        if verdict == vocab.BLOCK:
            assert "continue" not in out  # the model reads the reason and goes on
        else:
            assert out["continue"] is False and "halted" in out["stopReason"]

    # The ledger: every decision, marked enforced, in the session the transcript reader gives.
    worker.ingest_paths(eng, [loop.transcript], worker.Options(specs=[spec]))
    with eng.connect() as conn:
        sessions = conn.execute(select(schema.sessions.c.id, schema.sessions.c.key,
                                       schema.sessions.c.n_calls)).all()
        assert [(k, n) for _, k, n in sessions] == [(SESSION, 6)]  # one session: the hooks' is the file's
        sid = sessions[0][0]
        ec = schema.enforced_checks.c
        rows = conn.execute(select(ec.call_id, ec.verdict, ec.policy_id, ec.origin, ec.tool)
                            .where(ec.session_id == sid).order_by(ec.seq)).all()
        assert [(r.call_id, r.verdict) for r in rows] == [(t, expected[t]) for t in loop.call_ids]
        assert {r.policy_id for r in rows} == {spec.id} and {r.origin for r in rows} == {"claude-code"}
        # Replayed verdicts of the same policy in the same session sit beside them, call for call.
        c, ch = schema.calls.c, schema.checks.c
        replayed = dict(conn.execute(select(c.call_id, ch.verdict).join(
            schema.checks, (ch.session_id == c.session_id) & (ch.seq == c.seq)
            & ((ch.idx == c.idx) | (ch.idx == -1))).where(c.session_id == sid, ch.policy_id == spec.id)).all())
        assert replayed == {r.call_id: r.verdict for r in rows}
    eng.dispose()


def test_warn_reaches_the_model_as_additional_context(tmp_path, fresh_db):
    # ladder warns at the 2nd identical call (the default set warns only on two unchanged answers,
    # one attempt before its halt): the mechanism is the same for every policy
    _ledger(fresh_db, PolicySpec.parse("ladder")).dispose()
    loop = npm_test_loop(tmp_path, calls=2)
    outs = [output(run_hook(ev, fresh_db)) for ev in loop.events]
    post = [o for ev, o in zip(loop.events, outs, strict=True) if ev["hook_event_name"] == "PostToolUseFailure"]
    assert post[0] is None  # the first call was allowed without a word
    ctx = post[1]["hookSpecificOutput"]
    assert ctx["hookEventName"] == "PostToolUseFailure" and "LoopLedger warning" in ctx["additionalContext"]


def test_a_user_turn_starts_a_new_run(tmp_path, fresh_db):
    _ledger(fresh_db, PolicySpec.parse("ladder")).dispose()  # keys alone: no answers fed back here
    loop = npm_test_loop(tmp_path, calls=3)
    pre = [ev for ev in loop.events if ev["hook_event_name"] == "PreToolUse"]
    prompt = next(ev for ev in loop.events if ev["hook_event_name"] == "UserPromptSubmit")
    assert output(run_hook(pre[0], fresh_db)) is None
    assert output(run_hook(pre[1], fresh_db)) is None  # warn: allowed
    assert output(run_hook(pre[2], fresh_db))["hookSpecificOutput"]["permissionDecision"] == "deny"
    run_hook({**prompt, "prompt": "try once more"}, fresh_db)
    again = {**pre[0], "tool_use_id": "toolu_after_prompt"}
    assert output(run_hook(again, fresh_db)) is None  # counted from 1 again


def test_two_hook_processes_of_one_session_at_once_lose_nothing(tmp_path, db_url):
    # Thresholds out of reach: every call is allowed and its count must be 1, 2, … n exactly once.
    _ledger(db_url, PolicySpec.parse("ladder:warn_at=90,block_at=95,halt_at=99")).dispose()
    loop = npm_test_loop(tmp_path, calls=1)
    pre = next(ev for ev in loop.events if ev["hook_event_name"] == "PreToolUse")
    pairs = 6
    ids = []
    for i in range(pairs):
        a, b = f"toolu_par{i}a", f"toolu_par{i}b"
        ids += [a, b]
        procs = [subprocess.Popen([str(BIN), "hook", "claude-code", "--db", db_url], stdin=subprocess.PIPE,
                                  stdout=subprocess.PIPE, stderr=subprocess.PIPE) for _ in (a, b)]
        for proc, tid in zip(procs, (a, b), strict=True):
            proc.stdin.write(json.dumps({**pre, "tool_use_id": tid}).encode())
            proc.stdin.close()
        for proc in procs:
            assert proc.wait(timeout=120) == 0
            assert proc.stdout.read() == b""
    eng = make_engine(db_url)
    with eng.connect() as conn:
        ec = schema.enforced_checks.c
        rows = conn.execute(select(ec.call_id, ec.count, ec.seq).order_by(ec.seq)).all()
        le = schema.live_events.c
        n_events = len(conn.execute(select(le.seq)).all())
    eng.dispose()
    assert sorted(r.call_id for r in rows) == sorted(ids)  # none lost
    assert [r.count for r in rows] == list(range(1, 2 * pairs + 1))  # none counted twice
    assert n_events == 2 * pairs


def test_bad_input_missing_ledger_and_internal_errors_allow_and_are_logged(tmp_path, fresh_db):
    log = tmp_path / "hook.log"
    loop = npm_test_loop(tmp_path, calls=1)
    pre = next(ev for ev in loop.events if ev["hook_event_name"] == "PreToolUse")
    missing = str(tmp_path / "nowhere" / "ledger.sqlite")
    for raw, db in ((b"{not json", fresh_db), (b"[1, 2]", fresh_db), (b'{"hook_event_name": "PreToolUse"}', fresh_db),
                    (json.dumps(pre).encode(), missing)):
        proc = run_hook(raw, db, log=log)
        assert proc.returncode == 0 and proc.stdout == b"" and proc.stderr == b""
    lines = log.read_text().splitlines()
    assert len(lines) == 4
    assert "not JSON" in lines[0] and "not an object" in lines[1] and "no session_id" in lines[2]
    assert "no ledger at" in lines[3] and "nowhere" in lines[3]
    assert not Path(missing).exists()  # a hook never creates a ledger
    # A ledger that is not one (no tables): allowed, logged, left alone.
    bogus = tmp_path / "bogus.sqlite"
    sqlite3.connect(bogus).execute("CREATE TABLE t (x)").connection.commit()
    proc = run_hook(pre, str(bogus), log=log)
    assert proc.returncode == 0 and proc.stdout == b""
    assert "not a LoopLedger ledger" in log.read_text().splitlines()[-1]


def test_answers_are_recorded_for_result_aware_guards(tmp_path, fresh_db):
    _ledger(fresh_db).dispose()
    loop = npm_test_loop(tmp_path, calls=2)
    for ev in loop.events:
        run_hook(ev, fresh_db)
    with sqlite3.connect(fresh_db.removeprefix("sqlite:///")) as raw:
        kinds = raw.execute("SELECT kind, call_id, text, is_error FROM live_events ORDER BY seq").fetchall()
    assert [k for k, *_ in kinds] == ["user", "call", "answer", "call", "answer"]
    assert kinds[2][1:] == (loop.call_ids[0], FAILING, 1)


def test_gemini_cli_before_and_after_tool(tmp_path, fresh_db):
    _ledger(fresh_db, PolicySpec("ladder")).dispose()  # warn → block → halt, one each (no longer the default)
    base = {"session_id": "g-1", "transcript_path": str(tmp_path / "session-g-1.json"), "cwd": str(tmp_path),
            "timestamp": "2026-11-30T10:00:00Z"}
    call = {**base, "hook_event_name": "BeforeTool", "tool_name": "run_shell_command",
            "tool_input": {"command": "npm test"}}
    after = {**base, "hook_event_name": "AfterTool", "tool_name": "run_shell_command",
             "tool_input": {"command": "npm test"},
             "tool_response": {"llmContent": FAILING, "returnDisplay": FAILING, "error": None}}
    outs = []
    for ev in (call, after, call, after, call, call):
        proc = run_hook(ev, fresh_db, agent="gemini-cli")
        assert proc.returncode == 0
        outs.append(output(proc))
    assert outs[0] == {} and outs[1] == {}  # Gemini CLI reads stdout as JSON: {} allows
    assert outs[2] == {}  # warned: runs
    assert "LoopLedger warning" in outs[3]["hookSpecificOutput"]["additionalContext"]
    assert outs[4]["decision"] == "deny" and "blocked" in outs[4]["reason"] and "continue" not in outs[4]
    assert outs[5]["decision"] == "deny" and outs[5]["continue"] is False and outs[5]["stopReason"]


def test_hook_help_and_the_fast_path_imports(tmp_path, fresh_db):
    help_text = subprocess.run([str(BIN), "hook", "claude-code", "--help"], capture_output=True, text=True).stdout
    assert "PreToolUse" in help_text
    # The hook's process must not import the CLI or the database toolkit (they cost most of a hook's time).
    _ledger(fresh_db).dispose()
    loop = npm_test_loop(tmp_path, calls=1)
    pre = next(ev for ev in loop.events if ev["hook_event_name"] == "PreToolUse")
    code = ("import sys; from loopledger.entry import main\n"
            "sys.argv = ['loopledger', 'hook', 'claude-code', '--db', sys.argv[1]]\n"
            "try:\n    main()\nexcept SystemExit:\n    pass\n"
            "bad = [m for m in ('typer', 'rich', 'sqlalchemy', 'pandas', 'streamlit', 'alembic', 'importlib.metadata') if m in sys.modules]\n"
            "print(','.join(bad), file=sys.stderr)")
    proc = subprocess.run([sys.executable, "-c", code, fresh_db], input=json.dumps(pre).encode(), capture_output=True)
    assert proc.returncode == 0 and proc.stderr.decode().strip() == ""


def test_the_hook_imports_only_the_enforced_detectors_module(tmp_path, fresh_db):
    _ledger(fresh_db, PolicySpec("roo")).dispose()
    loop = npm_test_loop(tmp_path, calls=1)
    pre = next(ev for ev in loop.events if ev["hook_event_name"] == "PreToolUse")
    code = ("import sys; from loopledger.entry import main\n"
            "sys.argv = ['loopledger', 'hook', 'claude-code', '--db', sys.argv[1]]\n"
            "try:\n    main()\nexcept SystemExit:\n    pass\n"
            "print(' '.join(m for m in sys.modules if m.startswith('loopledger.detectors.')), file=sys.stderr)")
    proc = subprocess.run([sys.executable, "-c", code, fresh_db], input=json.dumps(pre).encode(), capture_output=True)
    loaded = set(proc.stderr.decode().split())
    assert "loopledger.detectors.roo" in loaded
    # Detectors neither enforced nor in any default: their modules stay unread.
    assert not loaded & {f"loopledger.detectors.{m}" for m in ("window", "openhands", "gemini_cli")}


def test_without_bytecode_writing_the_hook_keeps_its_bytecode_in_its_own_cache(tmp_path, fresh_db):
    _ledger(fresh_db).dispose()
    loop = npm_test_loop(tmp_path, calls=1)
    pre = next(ev for ev in loop.events if ev["hook_event_name"] == "PreToolUse")
    cache = tmp_path / "cache"
    env = {**os.environ, "PYTHONDONTWRITEBYTECODE": "1", "XDG_CACHE_HOME": str(cache)}
    env.pop("PYTHONPYCACHEPREFIX", None)
    proc = run_hook(pre, fresh_db, env=env)
    assert proc.returncode == 0 and not proc.stderr
    from loopledger.live import session as live_session

    session_py = Path(live_session.__file__).resolve()
    cached = list((cache / "loopledger" / "pycache").rglob("session.*.pyc"))
    assert any(str(session_py.parent).lstrip("/") in str(p) for p in cached), cached


def test_each_event_resumes_the_sealed_state_and_a_bad_snapshot_falls_back_to_replay(tmp_path, fresh_db):
    """The live state is the worker's kind of snapshot (loopledger.snapshots): after every event
    it is current (its seq is the number of live events), and a snapshot that does not verify is
    never used: the hook replays the stored live events and decides exactly the same."""
    spec = PolicySpec.parse("ladder")
    eng = _ledger(fresh_db, spec)
    loop = npm_test_loop(tmp_path, calls=6)
    expected = _replayed(loop.transcript, spec)
    path = fresh_db.removeprefix("sqlite:///")

    def snapshot_row():
        with sqlite3.connect(path) as db:
            n = db.execute("SELECT COUNT(*) FROM live_events").fetchone()[0]
            row = db.execute("SELECT seq, length(state) FROM live_states WHERE policy_id = ?", (spec.id,)).fetchone()
        return n, row

    said: dict[str, dict | None] = {}
    refused: set[str] = set()
    for i, ev in enumerate(loop.events):
        if ev["hook_event_name"] == "PostToolUseFailure" and ev["tool_use_id"] in refused:
            continue
        if i == 5:  # mid-session: spoil the stored snapshot's signature
            with sqlite3.connect(path) as db:
                db.execute("UPDATE live_states SET state = zeroblob(64)")
        proc = run_hook(ev, fresh_db)
        assert proc.returncode == 0, proc.stderr
        if ev["hook_event_name"] == "PreToolUse":
            said[ev["tool_use_id"]] = output(proc)
            if said[ev["tool_use_id"]] is not None:
                refused.add(ev["tool_use_id"])
        n, row = snapshot_row()
        if n:
            assert row is not None and row[0] == n and row[1] > 64  # current after every event
    refused_expected = {t for t, v in expected.items() if v in REFUSED}
    assert refused == refused_expected
    eng.dispose()


# ── point 12: a halt stops the agent in the real Claude Code ─────────────────────────────────

LADDER = "ladder:warn_at=2,block_at=3,halt_at=4"  # explicit: the live default may change


def _batch_event(pre: dict, response: object) -> dict:
    """Claude Code 2.1.197's PostToolBatch input (its bundled hook schema): the common fields and
    tool_calls [{tool_name, tool_input, tool_use_id, tool_response}] of the batch just resolved."""
    common = {k: pre[k] for k in ("session_id", "transcript_path", "cwd", "permission_mode")}
    return {**common, "hook_event_name": "PostToolBatch",
            "tool_calls": [{"tool_name": pre["tool_name"], "tool_input": pre["tool_input"],
                            "tool_use_id": pre["tool_use_id"], "tool_response": response}]}


def test_point_12_post_tool_batch_ends_the_turn_after_a_halted_call_only(tmp_path, fresh_db):
    _ledger(fresh_db, PolicySpec.parse(LADDER)).dispose()
    loop = npm_test_loop(tmp_path, calls=5)
    said = []
    for ev in loop.events:
        if ev["hook_event_name"] != "PreToolUse":
            if ev["hook_event_name"] in ("SessionStart", "UserPromptSubmit"):
                run_hook(ev, fresh_db)
            continue
        pre = output(run_hook(ev, fresh_db))
        refused = pre is not None
        if not refused:
            run_hook(next(e for e in loop.events if e.get("tool_use_id") == ev["tool_use_id"]
                          and e["hook_event_name"] == "PostToolUseFailure"), fresh_db)
        reason = pre["hookSpecificOutput"]["permissionDecisionReason"] if refused else FAILING
        proc = run_hook(_batch_event(ev, reason), fresh_db)
        assert proc.returncode == 0 and proc.stderr == b""
        said.append(output(proc))
    # Hand-counted under LADDER: allow, warn, block, halt, after_halt. A batch holding an allowed,
    # warned or blocked call says nothing (the model goes on, reading the refusal); a halted one,
    # and one refused after the halt, end the turn with the reason the person sees.
    assert said[:3] == [None, None, None]
    for out in said[3:]:
        assert set(out) == {"continue", "stopReason"} and out["continue"] is False
        assert out["stopReason"].startswith("LoopLedger halted the agent (ladder)")


def test_point_12_hook_install_adds_the_post_tool_batch_hook(tmp_path, fresh_db):
    _ledger(fresh_db).dispose()
    project = tmp_path / "p"
    project.mkdir()
    proc = subprocess.run([str(BIN), "hook", "install", "claude-code", "--project", str(project),
                           "--db", fresh_db.removeprefix("sqlite:///")], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    doc = json.loads((project / ".claude" / "settings.json").read_text())
    (group,) = doc["hooks"]["PostToolBatch"]
    assert "matcher" not in group  # PostToolBatch takes no tool matcher
    assert group["hooks"][0]["command"].split(" hook ")[1].startswith("claude-code --db ")


def _stream(stdout: str) -> list[dict]:
    return [json.loads(line) for line in stdout.splitlines() if line.startswith("{")]


@pytest.fixture
def agent_home(tmp_path):
    """The real agent's HOME; the resident guard its hooks started is stopped afterwards."""
    from tests.real_clients import resident_pids, stop_residents

    home = tmp_path / "home"
    yield home
    stop_residents(home)
    assert resident_pids(home) == []


def _claude_run(tmp_path: Path, home: Path, policy: str, command: str, max_turns: int):
    """Claude Code headless in a project with `hook install` settings, against a stand-in
    Messages API asking for `command` on every turn: (process, model requests, ledger, the
    transcript Claude Code wrote)."""
    from tests.live_e2e import enforce_args
    from tests.real_clients import claude_code, clean_env
    from tests.stand_in_models import AnthropicServer

    claude = claude_code()
    ledger = tmp_path / "ledger.sqlite"
    _ledger(f"sqlite:///{ledger}").dispose()  # `enforce` chooses in an existing ledger only
    subprocess.run([str(BIN), "enforce", *enforce_args(policy), "--db", str(ledger)], check=True, capture_output=True)
    project = tmp_path / "shop"
    project.mkdir()
    home.mkdir(exist_ok=True)
    inst = subprocess.run([str(BIN), "hook", "install", "claude-code", "--project", "--db", str(ledger)],
                          cwd=project, capture_output=True, text=True)
    assert inst.returncode == 0, inst.stderr
    with AnthropicServer(tool_input={"command": command, "description": "Run it"}, max_turns=max_turns) as model:
        env = clean_env(home, ANTHROPIC_BASE_URL=model.url, ANTHROPIC_API_KEY="sk-ant-stand-in",
                        LOOPLEDGER_HOOK_LOG=str(tmp_path / "hook.log"))
        proc = subprocess.run([*claude, "-p", "Show me missing.txt", "--output-format", "stream-json", "--verbose",
                               "--include-hook-events", "--allowedTools", "Bash", "--model", "claude-sonnet-4-5"],
                              cwd=project, env=env, capture_output=True, text=True, timeout=600)
        requests = [body for _, body in model.recorded.requests]
    assert proc.returncode == 0, proc.stderr[-2000:]
    (transcript,) = (home / ".claude" / "projects").glob("*/*.jsonl")
    return proc, requests, ledger, transcript, model


@pytest.mark.parametrize("policy", ["default", LADDER])
def test_point_12_the_real_claude_code_ends_the_run_at_a_halt(tmp_path, agent_home, policy):
    """Claude Code itself (npm @anthropic-ai/claude-code, pinned in tests/real_clients.py), headless,
    with the settings `hook install` writes, against a stand-in Messages API on 127.0.0.1 that asks
    for `cat missing.txt` on every turn: every decision is the one a replay of Claude Code's
    transcript gives, the first warning and refusal come where an unguarded agent would get them,
    warn reaches the model as added context, block is a deny the model reads, and at the halt the
    run ends (no model request after it) with the reason."""
    from tests.live_e2e import enforced, judged_as_replayed

    proc, requests, ledger, transcript, model = _claude_run(tmp_path, agent_home, policy, "cat missing.txt", 12)
    stream = _stream(proc.stdout)
    (result,) = [m for m in stream if m.get("type") == "result"]
    assert {o for _, _, o in enforced(ledger)} == {"claude-code"}
    verdicts, got = judged_as_replayed(ledger, transcript, "claude-code", policy, 12, "Show me missing.txt")
    # The model's view, request by request: the result of call n is in request n+1.
    views = [model.tool_results(b) for b in requests]
    assert all(b["type"] == "tool_result" for b in views[1]) and "LoopLedger" not in json.dumps(views[1])
    if got.warn is not None and got.warn < got.refusal:
        context = [b["text"] for b in views[got.warn] if b["type"] == "text"]
        assert any("LoopLedger warning" in t for t in context), views[got.warn]  # warn: added context
        assert "No such file" in json.dumps(views[got.warn])  # ... beside the call's real result
    if verdicts[got.refusal - 1] == vocab.BLOCK:
        (blocked,) = [b for b in views[got.refusal] if b["type"] == "tool_result"]
        assert blocked["is_error"] is True and "LoopLedger blocked this Bash call" in json.dumps(blocked)
        assert "No such file" not in json.dumps(blocked)  # block: not run
    # The halt ends the run: the halted call was the last the model asked for.
    assert len(requests) == got.halt, [json.dumps(v)[-200:] for v in views]
    assert result["terminal_reason"] == "hook_stopped"
    # The stop, with the reason the person sees, is the PostToolBatch hook's answer.
    stops = [json.loads(m["stdout"]) for m in stream if m.get("subtype") == "hook_response"
             and m.get("hook_event") == "PostToolBatch" and m.get("stdout", "").strip()]
    assert len(stops) == 1 and stops[0]["continue"] is False
    assert stops[0]["stopReason"].startswith("LoopLedger halted the agent")
    assert not (tmp_path / "hook.log").exists()  # nothing went wrong in a hook


@pytest.mark.parametrize("command", ["date +%s%N", "ls out"], ids=["clock", "growing-folder"])
def test_the_real_claude_code_is_never_halted_when_the_output_moves(tmp_path, agent_home, command):
    """Claude Code itself under the default set (nothing chosen), asked 20 times by the stand-in
    model for a command whose output changes on every call (the clock; a folder that gains a
    file each time): every call runs, the model is asked a 21st time (no halt), and warnings are
    at most a few (they said "change approach" to a sound approach on 19 of 20 calls once). The
    folder gains its files from outside (a writer beside the agent), as a build's output would."""
    import threading

    from tests.real_clients import claude_code, clean_env
    from tests.stand_in_models import AnthropicServer

    claude = claude_code()
    ledger = tmp_path / "ledger.sqlite"
    _ledger(f"sqlite:///{ledger}").dispose()  # nothing enforced: the live default set
    project, home = tmp_path / "shop", tmp_path / "home"
    project.mkdir()
    home.mkdir()
    inst = subprocess.run([str(BIN), "hook", "install", "claude-code", "--project", "--db", str(ledger)],
                          cwd=project, capture_output=True, text=True)
    assert inst.returncode == 0, inst.stderr
    (project / "out").mkdir()
    done = threading.Event()

    def writer() -> None:  # a file more every 50 ms, until the run ends
        n = 0
        while not done.wait(0.05):
            (project / "out" / f"frame_{n:05d}.png").write_bytes(b"")
            n += 1

    threading.Thread(target=writer, daemon=True).start()
    try:
        with AnthropicServer(tool_input={"command": command, "description": "Check again"}, max_turns=20) as model:
            env = clean_env(home, ANTHROPIC_BASE_URL=model.url, ANTHROPIC_API_KEY="sk-ant-stand-in",
                            LOOPLEDGER_HOOK_LOG=str(tmp_path / "hook.log"))
            proc = subprocess.run([*claude, "-p", "Watch it", "--output-format", "stream-json", "--verbose",
                                   "--allowedTools", "Bash", "--model", "claude-sonnet-4-5"],
                                  cwd=project, env=env, capture_output=True, text=True, timeout=900)
            requests = [body for _, body in model.recorded.requests]
    finally:
        done.set()
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert len(requests) == 21  # 20 calls answered, then the model's plain reply: never stopped
    with sqlite3.connect(ledger) as db:
        verdicts = [v for (v,) in db.execute("SELECT verdict FROM enforced_checks ORDER BY seq")]
    assert len(verdicts) == 20 and not {"block", "halt"} & set(verdicts)
    assert verdicts.count("warn") <= 2, verdicts
    told = json.dumps([model.tool_results(b) for b in requests])
    assert told.count("LoopLedger warning") <= 2 and "LoopLedger blocked" not in told


def test_point_12_the_real_claude_code_is_never_halted_on_output_that_moves(tmp_path, agent_home):
    """The same call whose answer changes every time (`date +%s%N`), under the live default: never
    refused; the decisions are the replay's."""
    from tests.live_e2e import REFUSED as REFUSED_LIVE
    from tests.live_e2e import enforced, replayed, specs_of

    proc, requests, ledger, transcript, _ = _claude_run(tmp_path, agent_home, "default", "date +%s%N", 8)
    live = enforced(ledger)
    assert [(c, v) for c, v, _ in live] == replayed(transcript, "claude-code", specs_of("default"))
    assert len(live) == 8 and not {v for _, v, _ in live} & set(REFUSED_LIVE), live
    assert len(requests) == 9  # 8 calls, then the stand-in gives up


# ── point 13: Gemini CLI's results read alike live and replayed ──────────────────────────────

GEMINI_FIXTURE = Path(__file__).parent / "fixtures" / "gemini_cli_0_61"
# The shell result both calls got, as gemini-cli's llmContent gave it minus its wrapper and the
# per-call process group id (hand-copied from the recorded hook input).
CAT_MISSING = "Output: cat: missing.txt: No such file or directory\nExit Code: 1"


def _gemini_recording(tmp_path: Path) -> tuple[Path, list[dict]]:
    session = tmp_path / "session-2026-12-01T10-06-0dc88e00.jsonl"
    session.write_bytes((GEMINI_FIXTURE / "session.jsonl").read_bytes())
    events = [{**json.loads(line), "transcript_path": str(session), "cwd": str(tmp_path)}
              for line in (GEMINI_FIXTURE / "hook_events.jsonl").read_text().splitlines() if line.strip()]
    return session, events


def _stored(db_url: str) -> tuple[list, list]:
    with sqlite3.connect(db_url.removeprefix("sqlite:///")) as db:
        answers = db.execute("SELECT text, is_error FROM live_events WHERE kind = 'answer' ORDER BY seq").fetchall()
        verdicts = [v for (v,) in db.execute("SELECT verdict FROM enforced_checks ORDER BY seq")]
    return answers, verdicts


def _replayed_in_order(path: Path, spec: PolicySpec, fmt: str) -> list[str]:
    events = [it for it in formats.read(path, fmt) if not isinstance(it, SessionStart | ReadError)]
    return [c.verdict for step in replay(events, spec) for c in step.checks]


def test_point_13_identical_failing_shell_calls_store_identical_answers_and_halt_as_replayed(tmp_path, fresh_db):
    spec = PolicySpec.parse("progress")  # result-aware: a repeat is a loop only when the answer did not change
    _ledger(fresh_db, spec).dispose()
    session, events = _gemini_recording(tmp_path)
    before = [e for e in events if e["hook_event_name"] == "AfterTool"]
    assert len(before) == 2 and before[0]["tool_response"] != before[1]["tool_response"]  # PGIDs differ
    outs = []
    for ev in events:
        proc = run_hook(ev, fresh_db, agent="gemini-cli")
        assert proc.returncode == 0 and proc.stderr == b""
        outs.append((ev["hook_event_name"], output(proc)))
    answers, verdicts = _stored(fresh_db)
    # Both runs of the failing command: the same answer, a failure (it exited 1).
    assert answers[:2] == [(CAT_MISSING, 1), (CAT_MISSING, 1)]
    # progress (halt_at 3): the third identical failure halts; no warning before it, as a warning
    # needs two unchanged answers and comes one attempt before the halt.
    assert verdicts == ["allow", "allow", "halt"]
    calls = [o for name, o in outs if name == "BeforeTool"]
    assert calls[0] == {} and calls[1] == {}
    assert calls[2]["decision"] == "deny" and calls[2]["continue"] is False
    assert calls[2]["stopReason"].startswith("LoopLedger halted the agent (progress)")
    # The session file Gemini CLI wrote for the same run, replayed: the same verdicts.
    assert _replayed_in_order(session, spec, "gemini-cli") == verdicts
    read = [a for it in formats.read(session, "gemini-cli") if type(it).__name__ == "Answers" for a in it.answers]
    assert [(a.text, a.is_error) for a in read[:2]] == [(CAT_MISSING, True), (CAT_MISSING, True)]
    assert read[2].text.startswith("LoopLedger halted the agent") and read[2].is_error


def test_point_13_gemini_results_one_reading_for_hook_and_reader():
    from loopledger.formats.gemini import tool_result

    # A command whose own output has lines like the trailer's: only the trailer is read.
    out = "Output: Error: not found\nExit Code: 3 reported above\ndone"
    assert tool_result("run_shell_command", f"<untrusted_context>\n{out}\nProcess Group PGID: 77\n</untrusted_context>",
                       False) == (out, False)
    assert tool_result("run_shell_command", "Output: x\nSignal: SIGKILL\nBackground PIDs: 12, 13\nProcess Group PGID: 9",
                       False) == ("Output: x\nSignal: SIGKILL", True)
    assert tool_result("run_shell_command", "Output: (empty)\nError: spawn bash ENOENT", False)[1] is True
    # An escaped closing tag inside comes back; a hook's context and refusal words go.
    assert tool_result("web_fetch", "<untrusted_context>\na &lt;/untrusted_context&gt; b\n</untrusted_context>\n\n"
                       "<hook_context>note</hook_context>", False) == ("a </untrusted_context> b", False)
    assert tool_result("read_file", "Tool execution blocked: no", False) == ("no", True)
    # Process ids are only a shell result's: another tool's text is left as it is.
    assert tool_result("read_file", "Process Group PGID: 5", False) == ("Process Group PGID: 5", False)


def test_point_13_hook_install_gemini_says_the_folder_must_be_trusted_and_how(tmp_path, fresh_db):
    _ledger(fresh_db).dispose()
    project, home = tmp_path / "g", tmp_path / "home"
    project.mkdir()
    home.mkdir()
    env = {"HOME": str(home), "PATH": "/usr/bin:/bin"}
    db = fresh_db.removeprefix("sqlite:///")
    proc = subprocess.run([str(BIN), "hook", "install", "gemini-cli", "--project", str(project), "--db", db],
                          capture_output=True, text=True, env=env)
    assert proc.returncode == 0, proc.stderr
    said = " ".join(proc.stdout.split())
    assert "only in a trusted folder" in said and "not trusted yet" in said
    assert "/permissions trust" in said and str(home / ".gemini" / "trustedFolders.json") in said
    assert "hooksConfig" not in proc.stdout  # enabled by default: not the fix
    # Trusted as gemini-cli records it: the install says so and gives no recipe.
    (home / ".gemini").mkdir()
    (home / ".gemini" / "trustedFolders.json").write_text(json.dumps({str(project): "TRUST_FOLDER"}))
    proc = subprocess.run([str(BIN), "hook", "install", "gemini-cli", "--project", str(project), "--db", db],
                          capture_output=True, text=True, env=env)
    said = " ".join(proc.stdout.split())
    assert "it is trusted" in said and "/permissions" not in said


def _gemini_run(tmp_path: Path, home: Path, policy: str, command: str, max_turns: int):
    """gemini-cli headless in a folder trusted as it records trust, with `hook install` settings,
    against a stand-in Gemini API asking for `command` on every turn."""
    from tests.live_e2e import enforce_args
    from tests.real_clients import clean_env, gemini_cli
    from tests.stand_in_models import GeminiServer

    gemini = gemini_cli()
    ledger = tmp_path / "ledger.sqlite"
    _ledger(f"sqlite:///{ledger}").dispose()  # `enforce` chooses in an existing ledger only
    subprocess.run([str(BIN), "enforce", *enforce_args(policy), "--db", str(ledger)], check=True, capture_output=True)
    project = tmp_path / "shop"
    project.mkdir()
    (home / ".gemini").mkdir(parents=True)
    # Gemini CLI's own loop detection (it stops a run after a few identical calls) off: what is
    # tested is LoopLedger's guard alone.
    (home / ".gemini" / "settings.json").write_text(json.dumps({"security": {"auth": {"selectedType": "gemini-api-key"}},
                                                                "model": {"disableLoopDetection": True}}))
    (home / ".gemini" / "trustedFolders.json").write_text(json.dumps({str(project): "TRUST_FOLDER"}))
    env = clean_env(home, LOOPLEDGER_HOOK_LOG=str(tmp_path / "hook.log"))
    inst = subprocess.run([str(BIN), "hook", "install", "gemini-cli", "--project", "--db", str(ledger)],
                          cwd=project, capture_output=True, text=True, env=env)
    assert inst.returncode == 0 and "it is trusted" in " ".join(inst.stdout.split()), inst.stdout
    with GeminiServer(tool_input={"command": command, "description": "Run it"}, max_turns=max_turns) as model:
        env.update(GOOGLE_GEMINI_BASE_URL=model.url, GEMINI_API_KEY="stand-in")
        proc = subprocess.run([*gemini, "-p", "Show me missing.txt", "--output-format", "stream-json", "--yolo",
                               "-m", "gemini-2.5-flash"], cwd=project, env=env, capture_output=True, text=True,
                              timeout=600)
        n_requests = len(model.recorded.requests)
    assert proc.returncode == 0, proc.stderr[-2000:]
    (session,) = (home / ".gemini" / "tmp").glob("*/chats/session-*.jsonl")
    return proc, n_requests, ledger, session


@pytest.mark.parametrize("policy", ["default", LADDER])
def test_point_13_the_real_gemini_cli_halts_and_replays_alike(tmp_path, agent_home, policy):
    """gemini-cli itself (npm @google/gemini-cli 0.61.0), headless, in a folder trusted the way it
    records trust (~/.gemini/trustedFolders.json), with `hook install` settings, against a stand-in
    Gemini API on 127.0.0.1 (GOOGLE_GEMINI_BASE_URL): identical failing shell calls are stored as
    the same failure, every decision is the one a replay of its session file gives, the first
    warning and refusal where an unguarded agent would get them, and the halt ends the run."""
    from tests.live_e2e import judged_as_replayed

    proc, n_requests, ledger, session = _gemini_run(tmp_path, agent_home, policy, "cat missing.txt", 10)
    # Gemini CLI gives hooks no call id: the decisions line up with the replay call for call.
    _, got = judged_as_replayed(ledger, session, "gemini-cli", policy, 10, "Show me missing.txt", by_id=False)
    assert n_requests == got.halt  # no model turn after the halted call
    results = [m for m in _stream(proc.stdout) if m.get("type") == "tool_result"]
    assert results[-1]["status"] == "error" and "LoopLedger halted the agent" in results[-1]["output"]
    answers, _ = _stored(f"sqlite:///{ledger}")
    assert answers[:2] == [(CAT_MISSING, 1), (CAT_MISSING, 1)]
    assert not (tmp_path / "hook.log").exists()


def test_point_13_the_real_gemini_cli_is_never_halted_on_output_that_moves(tmp_path, agent_home):
    """The same call whose answer changes every time (`date +%s%N`), under the live default: never
    refused; the decisions are the replay's."""
    from tests.live_e2e import REFUSED as REFUSED_LIVE
    from tests.live_e2e import enforced, replayed, specs_of

    proc, n_requests, ledger, session = _gemini_run(tmp_path, agent_home, "default", "date +%s%N", 8)
    live = enforced(ledger)
    assert [v for _, v, _ in live] == [v for _, v in replayed(session, "gemini-cli", specs_of("default"))]
    assert len(live) == 8 and not {v for _, v, _ in live} & set(REFUSED_LIVE), live
    assert n_requests == 9


def test_point_13_a_failed_tool_is_stored_as_its_session_file_records_it(tmp_path, fresh_db):
    """gemini-cli 0.61.0's read_file on a missing file (hook input and chat record copied from a
    recorded run): the model, and the session file, get the error's message alone."""
    _ledger(fresh_db).dispose()
    session = tmp_path / "session-2026-12-01T10-29-eb30ee4c.jsonl"
    call = {"id": "read_file__call-1", "name": "read_file", "args": {"file_path": "missing.txt"}, "status": "error",
            "result": [{"functionResponse": {"id": "read_file__call-1", "name": "read_file",
                                             "response": {"error": "File not found: /p/missing.txt"}}}],
            "resultDisplay": "File not found.", "timestamp": "2026-12-01T10:29:34.965Z"}
    session.write_text(json.dumps({"sessionId": "eb30ee4c", "projectHash": "ab", "startTime": "2026-12-01T10:29:30Z"})
                       + "\n" + json.dumps({"id": "m1", "type": "gemini", "timestamp": "2026-12-01T10:29:34Z",
                                            "content": "", "toolCalls": [call]}) + "\n")
    base = {"session_id": "eb30ee4c", "transcript_path": str(session), "cwd": "/p", "tool_name": "read_file",
            "tool_input": {"file_path": "missing.txt"}}
    after = {**base, "hook_event_name": "AfterTool", "tool_response": {
        "llmContent": "Could not read file because no file was found at the specified path.",
        "returnDisplay": "File not found.",
        "error": {"message": "File not found: /p/missing.txt", "type": "file_not_found"}}}
    for ev in ({**base, "hook_event_name": "BeforeTool"}, after):
        assert run_hook(ev, fresh_db, agent="gemini-cli").returncode == 0
    answers, _ = _stored(fresh_db)
    read = [(a.text, a.is_error) for it in formats.read(session, "gemini-cli") if type(it).__name__ == "Answers"
            for a in it.answers]
    assert answers == [("File not found: /p/missing.txt", 1)] and read == [("File not found: /p/missing.txt", True)]


def test_the_in_process_hook_loads_no_threading_and_signs_with_hmac(tmp_path, fresh_db):
    """The in-process path's import diet: the registry's lock is _thread's (no threading); its
    snapshots are signed by the standard library's hmac (issue 30: no hand-written HMAC)."""
    _ledger(fresh_db).dispose()
    loop = npm_test_loop(tmp_path, calls=1)
    pre = next(ev for ev in loop.events if ev["hook_event_name"] == "PreToolUse")
    code = ("import sys; from loopledger.entry import main\n"
            "sys.argv = ['loopledger', 'hook', 'claude-code', '--db', sys.argv[1]]\n"
            "try:\n    main()\nexcept SystemExit:\n    pass\n"
            "print(' '.join(m for m in ('hmac', 'threading', 'loopledger.live.session') "
            "if m in sys.modules), file=sys.stderr)")
    proc = subprocess.run([sys.executable, "-c", code, fresh_db], input=json.dumps(pre).encode(), capture_output=True,
                          env={**os.environ, "LOOPLEDGER_HOOK_RESIDENT": "0"})
    assert proc.returncode == 0 and proc.stderr.decode().split() == ["hmac", "loopledger.live.session"]  # decided here
