"""`loopledger hook codex` with the real Codex CLI (npm @openai/codex, pinned in
tests/real_clients.py) against a stand-in Responses API on 127.0.0.1 that asks for the same
shell call on every turn; and `hook install codex` on the files Codex reads.

Expectations come from the replay engine (tests/live_e2e.py): the guarded run's enforced
verdicts are the verdicts a replay of the rollout Codex wrote gives, the first warning and the
first refusal come where an unguarded agent repeating the call would get them, and a halted
headless run ends there."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest
from loopledger import vocab

from tests.live_e2e import (
    POLICIES,
    REFUSED,
    Prediction,
    enforce_args,
    enforced,
    first_answer,
    replayed,
    specs_of,
    unguarded,
)
from tests.live_support import BIN

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
        proc = subprocess.run(args, cwd=project, env=env, capture_output=True, text=True, timeout=600)
        requests = [body for _, body in model.recorded.requests]
    (rollout,) = (home / ".codex" / "sessions").glob("*/*/*/rollout-*.jsonl")
    return proc, requests, ledger, rollout, inst


def _stream(stdout: str) -> list[dict]:
    return [json.loads(line) for line in stdout.splitlines() if line.startswith("{")]


@pytest.mark.parametrize("policy", POLICIES)
def test_the_real_codex_cli_is_guarded_as_its_rollout_replays(tmp_path, agent_home, policy):
    """A stuck failing call: warn reaches the model as added context, a block is a refusal it
    reads, a halt interrupts `codex exec` with no model request after it; every verdict is the
    one a replay of the rollout gives, the first warning and refusal where an unguarded agent
    would get them."""
    proc, requests, ledger, rollout, _ = _run(tmp_path, agent_home, policy, "cat missing.txt", 12)
    specs = specs_of(policy)
    live = enforced(ledger)
    assert {o for _, _, o in live} == {"codex"}
    # Every decision equals the replay of the rollout Codex wrote for this very run.
    assert [(c, v) for c, v, _ in live] == replayed(rollout, "codex", specs)
    verdicts = [v for _, v, _ in live]
    call, answer = first_answer(rollout, "codex")
    expected = Prediction.of(unguarded(call, answer, 12, specs, PROMPT))
    got = Prediction.of(verdicts)
    assert expected.refusal is not None, "the replay must refuse a call stuck on one failure"
    assert (got.warn, got.refusal) == (expected.warn, expected.refusal)
    outputs = [json.dumps(model_view) for model_view in map(_outputs, requests)]
    if got.warn is not None and got.warn < got.refusal:  # the warned call ran: its notice came with its result
        assert "LoopLedger warning" in outputs[got.warn], outputs[got.warn]
    if verdicts[got.refusal - 1] == vocab.BLOCK:  # the model read the refusal, and the call never ran
        assert "Command blocked by PreToolUse hook: LoopLedger blocked" in outputs[got.refusal]
        assert "No such file" not in outputs[got.refusal]
    assert got.halt is not None
    # The halt ends the run: the halted call was the last one the model asked for.
    assert len(requests) == got.halt, [r[-200:] for r in outputs]
    assert proc.returncode == 1 and "turn.completed" not in {m.get("type") for m in _stream(proc.stdout)}
    assert not (tmp_path / "hook.log").exists(), (tmp_path / "hook.log").read_text()


def _outputs(body: dict) -> list[dict]:
    from tests.stand_in_models import ResponsesServer

    return ResponsesServer.tool_outputs(body)


def test_the_real_codex_cli_is_never_halted_on_output_that_moves(tmp_path, agent_home):
    """The same call whose answer changes every time (`date +%s%N`), under the live default:
    never refused, whatever the replay of its rollout says of warnings. (ladder counts calls
    alone and halts such a poll by design: not the default.)"""
    proc, requests, ledger, rollout, _ = _run(tmp_path, agent_home, "default", "date +%s%N", 8)
    live = enforced(ledger)
    assert [(c, v) for c, v, _ in live] == replayed(rollout, "codex", specs_of("default"))
    assert len(live) == 8 and not {v for _, v, _ in live} & set(REFUSED), live
    assert proc.returncode == 0 and len(requests) == 9  # 8 calls, then the stand-in gives up


def test_codex_runs_no_hook_nobody_reviewed(tmp_path, agent_home):
    """What `hook install codex` says: until a person trusts the new hooks, a headless run skips
    them (nothing is enforced), and the install says how to review them."""
    proc, requests, ledger, _, inst = _run(tmp_path, agent_home, "default", "cat missing.txt", 3, bypass=False)
    said = " ".join(inst.stdout.split())
    assert 'choose "Trust all and continue"' in said and "/hooks" in said and "--dangerously-bypass-hook-trust" in said
    assert proc.returncode == 0 and len(requests) == 4
    assert enforced(ledger) == []
