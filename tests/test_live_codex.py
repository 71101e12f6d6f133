"""`loopledger hook codex` with the real Codex CLI (npm @openai/codex, pinned in
tests/real_clients.py) against a stand-in Responses API on 127.0.0.1 that asks for the same
shell call on every turn, with `loopledger watch` reading the rollout meanwhile; and `hook
install codex` on the files Codex reads.

Expectations come from the replay engine (tests/live_e2e.py): the guarded run's enforced
verdicts are the verdicts a replay of the rollout Codex wrote gives, the first warning and the
first refusal come where an unguarded agent repeating the call would get them, and a halted
headless run ends there."""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest
from loopledger import vocab

from tests.live_e2e import (
    POLICIES,
    REFUSED,
    Watch,
    enforce_args,
    enforced,
    judged_as_replayed,
    replayed,
    specs_of,
)
from tests.live_support import BIN, make_ledger

PROMPT = "Show me missing.txt"


def _codex_home(home: Path, model_url: str, project: Path | None) -> Path:
    """~/.codex/config.toml pointing Codex at the stand-in (a custom provider), the project
    trusted as Codex records it."""
    codex = home / ".codex"
    codex.mkdir(parents=True, exist_ok=True)
    trust = f'\n[projects."{project}"]\ntrust_level = "trusted"\n' if project is not None else ""
    (codex / "config.toml").write_text(
        'model = "gpt-5.1-codex"\nmodel_provider = "standin"\n\n[model_providers.standin]\nname = "Stand-in"\n'
        f'base_url = "{model_url}/v1"\nwire_api = "responses"\nenv_key = "STANDIN_API_KEY"\n' + trust)
    return codex / "config.toml"


@pytest.fixture
def agent_home(tmp_path):
    from tests.real_clients import resident_pids, stop_residents

    home = tmp_path / "home"
    home.mkdir()
    yield home
    stop_residents(home)
    assert resident_pids(home) == []


def _run(tmp_path: Path, home: Path, policy: str, command: str, max_turns: int, *, bypass: bool = True):
    from tests.real_clients import clean_env, codex_cli
    from tests.stand_in_models import ResponsesServer

    codex = codex_cli()
    ledger = tmp_path / "ledger.sqlite"
    make_ledger(str(ledger))  # enforce chooses in an existing ledger only
    subprocess.run([str(BIN), "enforce", *enforce_args(policy), "--db", str(ledger)], check=True, capture_output=True)
    project = tmp_path / "shop"
    project.mkdir()
    with ResponsesServer(command=command, max_turns=max_turns) as model:
        _codex_home(home, model.url, project)
        env = clean_env(home, STANDIN_API_KEY="stand-in", LOOPLEDGER_HOOK_LOG=str(tmp_path / "hook.log"))
        inst = subprocess.run([str(BIN), "hook", "install", "codex", "--project", "--db", str(ledger)],
                              cwd=project, capture_output=True, text=True, env=env)
        assert inst.returncode == 0, inst.stderr
        args = [*codex, "exec", "--json", "--skip-git-repo-check", "-s", "danger-full-access",
                *(["--dangerously-bypass-hook-trust"] if bypass else []), PROMPT]
        sessions = home / ".codex" / "sessions"
        sessions.mkdir()
        with Watch(ledger, [sessions], env, policy) as watch:  # the dashboard's view, while Codex runs
            proc = subprocess.run(args, cwd=project, env=env, capture_output=True, text=True, timeout=600)
            requests = [body for _, body in model.recorded.requests]
            side = watch.wait_beside(ledger, len(enforced(ledger)))
    (rollout,) = sessions.glob("*/*/*/rollout-*.jsonl")
    return proc, requests, ledger, rollout, inst, side


def _stream(stdout: str) -> list[dict]:
    return [json.loads(line) for line in stdout.splitlines() if line.startswith("{")]


@pytest.mark.parametrize("policy", POLICIES)
def test_the_real_codex_cli_is_guarded_as_its_rollout_replays(tmp_path, agent_home, policy):
    """A stuck failing call: warn reaches the model as added context, a block is a refusal it
    reads, a halt interrupts `codex exec` with no model request after it; every verdict is the
    one a replay of the rollout gives, the first warning and refusal where an unguarded agent
    would get them."""
    proc, requests, ledger, rollout, _, side = _run(tmp_path, agent_home, policy, "cat missing.txt", 12)
    live = enforced(ledger)
    assert {o for _, _, o in live} == {"codex"}
    # Every decision equals the replay of the rollout Codex wrote for this very run.
    verdicts, got = judged_as_replayed(ledger, rollout, "codex", policy, 12, PROMPT)
    outputs = [json.dumps(model_view) for model_view in map(_outputs, requests)]
    if got.warn is not None and got.warn < got.refusal:  # the warned call ran: its notice came with its result
        assert "LoopLedger warning" in outputs[got.warn], outputs[got.warn]
    if verdicts[got.refusal - 1] == vocab.BLOCK:  # the model read the refusal, and the call never ran
        assert "Command blocked by PreToolUse hook: LoopLedger blocked" in outputs[got.refusal]
        assert "No such file" not in outputs[got.refusal]
    # The halt ends the run: the halted call was the last one the model asked for.
    assert len(requests) == got.halt, [r[-200:] for r in outputs]
    assert proc.returncode == 1 and "turn.completed" not in {m.get("type") for m in _stream(proc.stdout)}
    assert "LoopLedger halted the agent" in proc.stderr, proc.stderr[-2000:]  # the person reads why
    # `loopledger watch` read the rollout meanwhile: each decision beside the same policy's replayed check.
    assert [(c, e) for c, e, _ in side] == [(c, v) for c, v, _ in live]
    assert all(e == r for _, e, r in side), side
    assert not (tmp_path / "hook.log").exists(), (tmp_path / "hook.log").read_text()


def _outputs(body: dict) -> list[dict]:
    from tests.stand_in_models import ResponsesServer

    return ResponsesServer.tool_outputs(body)


def test_the_real_codex_cli_is_never_halted_on_output_that_moves(tmp_path, agent_home):
    """The same call whose answer changes every time (`date +%s%N`), under the live default:
    never refused, whatever the replay of its rollout says of warnings. (ladder counts calls
    alone and halts such a poll by design: not the default.)"""
    proc, requests, ledger, rollout, _, _ = _run(tmp_path, agent_home, "default", "date +%s%N", 8)
    live = enforced(ledger)
    assert [(c, v) for c, v, _ in live] == replayed(rollout, "codex", specs_of("default"))
    assert len(live) == 8 and not {v for _, v, _ in live} & set(REFUSED), live
    assert proc.returncode == 0 and len(requests) == 9  # 8 calls, then the stand-in gives up


def test_codex_runs_no_hook_nobody_reviewed(tmp_path, agent_home):
    """What `hook install codex` says: until a person trusts the new hooks, a headless run skips
    them (nothing is enforced), and the install says how to review them."""
    proc, requests, ledger, _, inst, _ = _run(tmp_path, agent_home, "default", "cat missing.txt", 3, bypass=False)
    said = " ".join(inst.stdout.split())
    assert 'choose "Trust all and continue"' in said and "/hooks" in said and "--dangerously-bypass-hook-trust" in said
    assert proc.returncode == 0 and len(requests) == 4
    assert enforced(ledger) == []


# ── the protocol, on a recorded Codex CLI 0.171.0 run (no npm needed) ────────────────────────

FIXTURE = Path(__file__).parent / "fixtures" / "codex_0_171"


def _recording(tmp_path: Path) -> tuple[Path, list[dict]]:
    """The rollout and hook inputs of an unguarded Codex CLI 0.171.0 run (four `cat missing.txt`
    calls against the stand-in), the rollout where the hook inputs say it is."""
    rollout = tmp_path / "rollout-2026-12-01T22-14-27-01a233ac-6bb0-7b00-aebb-c69f957f043c.jsonl"
    rollout.write_bytes((FIXTURE / "rollout.jsonl").read_bytes())
    events = [{**json.loads(line), "transcript_path": str(rollout), "cwd": str(tmp_path)}
              for line in (FIXTURE / "hook_events.jsonl").read_text().splitlines() if line.strip()]
    return rollout, events


def test_recorded_codex_events_are_answered_in_codexs_format_and_judged_as_replayed(tmp_path, fresh_db):
    from tests.live_e2e import LADDER
    from tests.live_support import output, run_hook

    make_ledger(fresh_db)  # enforce chooses in an existing ledger only
    subprocess.run([str(BIN), "enforce", LADDER, "--db", fresh_db], check=True, capture_output=True)
    rollout, events = _recording(tmp_path)
    said, refused = {}, set()
    for ev in events:
        if ev["hook_event_name"] == "PostToolUse" and ev["tool_use_id"] in refused:
            continue  # Codex runs no PostToolUse for a call a hook refused
        proc = run_hook(ev, fresh_db, agent="codex")
        assert proc.returncode == 0 and proc.stderr == b""
        out = output(proc)
        said[(ev["hook_event_name"], ev.get("tool_use_id"))] = out
        if ev["hook_event_name"] == "PreToolUse" and out is not None:
            refused.add(ev["tool_use_id"])
    ledger = Path(fresh_db.removeprefix("sqlite:///"))
    live = enforced(ledger)
    # ladder counts calls alone: the unguarded rollout replays to the same verdicts.
    assert [(c, v) for c, v, _ in live] == replayed(rollout, "codex", specs_of(LADDER))
    assert [v for _, v, _ in live] == ["allow", "warn", "block", "halt"]  # LADDER's own thresholds
    ids = [c for c, _, _ in live]
    assert said[("PreToolUse", ids[0])] is None and said[("PreToolUse", ids[1])] is None
    warn = said[("PostToolUse", ids[1])]["hookSpecificOutput"]
    assert warn["hookEventName"] == "PostToolUse" and warn["additionalContext"].startswith("LoopLedger warning")
    for cid, word in ((ids[2], "blocked"), (ids[3], "halted")):
        out = said[("PreToolUse", cid)]
        spec = out["hookSpecificOutput"]
        assert spec["permissionDecision"] == "deny" and word in spec["permissionDecisionReason"]
        # Codex 0.171.0 takes continue/stopReason on PreToolUse for invalid output, and then runs the call.
        assert "continue" not in out and "stopReason" not in out
    assert said[("PreToolUse", ids[3])]["systemMessage"].startswith("LoopLedger halted the agent")
    with sqlite3.connect(ledger) as db:
        answers = db.execute("SELECT text, is_error FROM live_events WHERE kind = 'answer' ORDER BY seq").fetchall()
        session = db.execute("SELECT s.key, s.format, s.agent, src.path FROM sessions s JOIN sources src "
                             "ON src.id = s.source_id").fetchall()
    assert answers[0] == ("cat: missing.txt: No such file or directory\n", 0)  # the hook's tool_response
    assert session == [(events[0]["session_id"], "codex", "codex", str(rollout))]  # the rollout's own session


FAKE_CODEX = r"""
import json, os, signal, subprocess, sys, time
got = []
signal.signal(signal.SIGINT, lambda *_: got.append(time.time()))
hook = subprocess.run(sys.argv[2:], input=os.environ["EVENT"].encode(), capture_output=True)
time.sleep(0.5)
print(json.dumps({"sigint": bool(got), "stdout": hook.stdout.decode(), "code": hook.returncode}))
"""


@pytest.mark.parametrize("argv0,subcommand,interrupted", [("codex", "exec", True), ("codex", "resume", False),
                                                         ("not-codex", "exec", False)])
def test_a_halt_interrupts_codex_exec_only(tmp_path, fresh_db, argv0, subcommand, interrupted):
    """The hook's parent as Codex starts it: `codex exec` gets SIGINT at a halt (what Ctrl-C
    does: the turn ends, no model request after), the interactive client never (SIGINT kills it),
    nor a process that is not Codex."""
    from tests.live_e2e import LADDER
    from tests.live_support import output

    make_ledger(fresh_db)  # enforce chooses in an existing ledger only
    subprocess.run([str(BIN), "enforce", LADDER, "--db", fresh_db], check=True, capture_output=True)
    rollout, events = _recording(tmp_path)
    script = tmp_path / "fake_codex.py"
    script.write_text(FAKE_CODEX)
    pre = [ev for ev in events if ev["hook_event_name"] == "PreToolUse"]
    for i, ev in enumerate(pre):
        env = {**os.environ, "EVENT": json.dumps(ev)}
        # bash's `exec -a` names the process as Codex's launcher does: argv[0] "codex", then its subcommand.
        proc = subprocess.run(["bash", "-c", f'exec -a {argv0} "$0" "$@"', sys.executable, str(script), subcommand,
                               str(BIN), "hook", "codex", "--db", fresh_db], env=env, capture_output=True, text=True,
                              timeout=120)
        said = json.loads(proc.stdout)
        verdict = enforced(Path(fresh_db.removeprefix("sqlite:///")))[-1][1]
        assert said["code"] == 0
        assert said["sigint"] is (interrupted and verdict == vocab.HALT), (i, verdict, said)
        # The person running `codex exec` reads why (Codex drops the hook's systemMessage as it aborts).
        assert ("LoopLedger halted the agent" in proc.stderr) is (interrupted and verdict == vocab.HALT), proc.stderr
        if verdict == vocab.HALT:
            assert output(subprocess.CompletedProcess([], 0, said["stdout"].encode(), b""))[
                "hookSpecificOutput"]["permissionDecision"] == "deny"


# ── hook install codex ───────────────────────────────────────────────────────────────────────

PERSON_HOOKS = """{
  "hooks": {
    "PostToolUse": [
      {"matcher": "apply_patch", "hooks": [{"type": "command", "command": "~/bin/fmt.sh", "timeout": 10}]}
    ]
  }
}
"""


@pytest.fixture
def ledger_file(tmp_path):
    db = tmp_path / "ledger.sqlite"
    make_ledger(str(db))  # enforce chooses in an existing ledger only
    subprocess.run([str(BIN), "enforce", "--default", "--db", str(db)], check=True, capture_output=True)
    return db


def _install(*args: str, cwd: Path, home: Path, **env: str) -> subprocess.CompletedProcess:
    return subprocess.run([str(BIN), "hook", *args], capture_output=True, text=True, cwd=cwd,
                          env={"HOME": str(home), "PATH": "/usr/bin:/bin", **env})


def test_hook_install_codex_keeps_the_persons_hooks_says_what_codex_needs_and_uninstalls(tmp_path, ledger_file):
    project, home = tmp_path / "shop", tmp_path / "home"
    (project / ".codex").mkdir(parents=True)
    home.mkdir()
    hooks = project / ".codex" / "hooks.json"
    hooks.write_text(PERSON_HOOKS)
    proc = _install("install", "codex", "--project", "--db", str(ledger_file), cwd=project, home=home)
    assert proc.returncode == 0, proc.stderr
    doc = json.loads(hooks.read_text())
    command = f"{BIN} hook codex --db {ledger_file}"
    for event in ("SessionStart", "UserPromptSubmit", "PreToolUse", "PostToolUse"):
        assert [h["command"] for g in doc["hooks"][event] for h in g["hooks"]][-1] == command, event
    assert doc["hooks"]["PostToolUse"][0]["hooks"][0]["command"] == "~/bin/fmt.sh"  # the person's, first
    assert (project / ".codex" / "hooks.json.loopledger.bak").read_text() == PERSON_HOOKS
    said = " ".join(proc.stdout.split())
    assert f"{project}: not trusted yet" in said and "codex exec --trust" in said
    assert 'choose "Trust all and continue"' in said and "--dangerously-bypass-hook-trust" in said
    again = _install("install", "codex", "--project", "--db", str(ledger_file), cwd=project, home=home)
    assert "nothing changed" in again.stdout and json.loads(hooks.read_text()) == doc
    # Trusted as Codex records it (the project; our hooks' review state): the install says so.
    keys = [f"{hooks}:{e}:{g}:0" for e, g in (("session_start", 0), ("user_prompt_submit", 0),
                                               ("pre_tool_use", 0), ("post_tool_use", 1))]
    state = "".join(f'[hooks.state."{k}"]\ntrusted_hash = "sha256:00"\n' for k in keys)
    (home / ".codex").mkdir()
    (home / ".codex" / "config.toml").write_text(f'[projects."{project}"]\ntrust_level = "trusted"\n\n{state}')
    said = " ".join(_install("install", "codex", "--project", "--db", str(ledger_file), cwd=project,
                             home=home).stdout.split())
    assert "not trusted yet" not in said and "Codex has trusted these hooks before" in said
    assert _install("uninstall", "codex", "--project", cwd=project, home=home).returncode == 0
    assert hooks.read_text() == PERSON_HOOKS


def test_hook_install_codex_refuses_files_codex_could_not_read(tmp_path, ledger_file):
    project, home = tmp_path / "shop", tmp_path / "home"
    (project / ".codex").mkdir(parents=True)
    (home / ".codex").mkdir(parents=True)
    config = home / ".codex" / "config.toml"
    config.write_text('model = "o3"\n[features\nhooks = true\n')
    proc = _install("install", "codex", "--project", "--db", str(ledger_file), cwd=project, home=home)
    assert proc.returncode == 1 and str(config) in proc.stderr and "line 2" in proc.stderr
    assert not (project / ".codex" / "hooks.json").exists()  # nothing written
    config.write_text("[features]\nhooks = false\n")
    hooks = project / ".codex" / "hooks.json"
    hooks.write_text('{"hooks": {')
    proc = _install("install", "codex", "--project", "--db", str(ledger_file), cwd=project, home=home)
    assert proc.returncode == 1 and str(hooks) in proc.stderr and hooks.read_text() == '{"hooks": {'
    hooks.unlink()
    proc = _install("install", "codex", "--project", "--db", str(ledger_file), cwd=project, home=home)
    assert proc.returncode == 0 and "[features] hooks = false" in " ".join(proc.stdout.split())


def test_hook_install_codex_user_scope_is_codex_home(tmp_path, ledger_file):
    home, codex_home = tmp_path / "home", tmp_path / "codex-home"
    home.mkdir()
    for env, where in (({}, home / ".codex"), ({"CODEX_HOME": str(codex_home)}, codex_home)):
        proc = _install("install", "codex", "--user", "--db", str(ledger_file), cwd=tmp_path, home=home, **env)
        assert proc.returncode == 0 and f"installed the codex hook in {where / 'hooks.json'}" in proc.stdout
        assert "in the project" not in proc.stdout and "not trusted yet" not in proc.stdout
        assert _install("uninstall", "codex", "--user", cwd=tmp_path, home=home, **env).returncode == 0
        assert not (where / "hooks.json").exists()
