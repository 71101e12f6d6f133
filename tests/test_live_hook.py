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
    _ledger(fresh_db).dispose()  # nothing chosen: the default (ladder) is enforced
    loop = npm_test_loop(tmp_path, calls=2)
    outs = [output(run_hook(ev, fresh_db)) for ev in loop.events]
    post = [o for ev, o in zip(loop.events, outs, strict=True) if ev["hook_event_name"] == "PostToolUseFailure"]
    assert post[0] is None  # the first call was allowed without a word
    ctx = post[1]["hookSpecificOutput"]
    assert ctx["hookEventName"] == "PostToolUseFailure" and "LoopLedger warning" in ctx["additionalContext"]


def test_a_user_turn_starts_a_new_run(tmp_path, fresh_db):
    _ledger(fresh_db).dispose()
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
    _ledger(fresh_db).dispose()
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
