"""Live: what LoopLedger's hook adds to each tool call in the real agent clients.

Each client (the npm packages pinned in tests/real_clients.py: Claude Code, Gemini CLI, Codex
CLI, OpenCode) runs headless against the tests' stand-in model server on 127.0.0.1, which asks
for the same quick shell call (`true`) CALLS times. The stand-in notes when each model request
arrives: the gap between two requests is one tool call's whole turnaround in the client (its
own work, running `true`, and every hook or plugin round trip for the call). Baseline, in the
same run: the same client with nothing installed. The hook's cost per call is the median gap
guarded minus the median gap unguarded. The enforced ladder's thresholds are out of reach, so
every call is allowed and runs (the cost of deciding is the same whatever the verdict).

Paths: `resident` is the default (the hook process hands the event to the resident guard);
`in-process` sets LOOPLEDGER_HOOK_RESIDENT=0 (each hook process decides itself). OpenCode's
plugin talks to one `loopledger guard` process for the whole run. A client whose package cannot
be installed (no npm registry) is left out, saying why. No budget: the figure is for people
choosing; a hook costs the agent no more than this per call.
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path

BIN = Path(sys.executable).parent / "loopledger"
ROOT = Path(__file__).resolve().parent.parent
OUT_OF_REACH = ("ladder:warn_at=900,block_at=950,halt_at=999,read_only_warn_at=900,read_only_block_at=950,"
                "read_only_halt_at=999")
PROMPT = "Run true"


def _p95(xs: list[float]) -> float:
    return sorted(xs)[max(0, int(round(0.95 * len(xs))) - 1)]


def _claude(home: Path, project: Path, server: type, calls: int):
    from tests.real_clients import claude_code

    cmd = claude_code()
    model = server(tool_input={"command": "true", "description": "Run true"}, max_turns=calls)

    def run(env: dict) -> list[str]:
        env.update(ANTHROPIC_BASE_URL=model.url, ANTHROPIC_API_KEY="sk-ant-stand-in")
        return [*cmd, "-p", PROMPT, "--output-format", "json", "--allowedTools", "Bash", "--model", "claude-sonnet-4-5"]
    return model, run


def _gemini(home: Path, project: Path, server: type, calls: int):
    from tests.real_clients import gemini_cli

    cmd = gemini_cli()
    (home / ".gemini").mkdir(parents=True, exist_ok=True)
    (home / ".gemini" / "settings.json").write_text(json.dumps({
        "security": {"auth": {"selectedType": "gemini-api-key"}}, "model": {"disableLoopDetection": True}}))
    (home / ".gemini" / "trustedFolders.json").write_text(json.dumps({str(project): "TRUST_FOLDER"}))
    model = server(tool_input={"command": "true", "description": "Run true"}, max_turns=calls)

    def run(env: dict) -> list[str]:
        env.update(GOOGLE_GEMINI_BASE_URL=model.url, GEMINI_API_KEY="stand-in")
        return [*cmd, "-p", PROMPT, "--output-format", "json", "--yolo", "-m", "gemini-2.5-flash"]
    return model, run


def _codex(home: Path, project: Path, server: type, calls: int):
    from tests.real_clients import codex_cli

    cmd = codex_cli()
    model = server(command="true", max_turns=calls)

    def run(env: dict) -> list[str]:
        (home / ".codex").mkdir(parents=True, exist_ok=True)
        (home / ".codex" / "config.toml").write_text(
            'model = "gpt-5.1-codex"\nmodel_provider = "standin"\n\n[model_providers.standin]\nname = "Stand-in"\n'
            f'base_url = "{model.url}/v1"\nwire_api = "responses"\nenv_key = "STANDIN_API_KEY"\n\n'
            f'[projects."{project}"]\ntrust_level = "trusted"\n')
        env.update(STANDIN_API_KEY="stand-in")
        return [*cmd, "exec", "--json", "--skip-git-repo-check", "-s", "danger-full-access",
                "--dangerously-bypass-hook-trust", PROMPT]
    return model, run


def _opencode(home: Path, project: Path, server: type, calls: int):
    from tests.real_clients import npm_cache, opencode

    cmd = opencode()
    model = server(command="true", max_turns=calls)

    def run(env: dict) -> list[str]:
        folder = home / ".config" / "opencode"
        folder.mkdir(parents=True, exist_ok=True)
        (folder / "opencode.json").write_text(json.dumps({
            "provider": {"standin": {"npm": "@ai-sdk/openai-compatible", "name": "Stand-in",
                                     "options": {"baseURL": f"{model.url}/v1", "apiKey": "stand-in"},
                                     "models": {"loop-model": {"name": "Loop", "tool_call": True}}}},
            "model": "standin/loop-model", "autoupdate": False, "share": "disabled"}))
        env.update(OPENCODE_DISABLE_MODELS_FETCH="1", OPENCODE_DISABLE_AUTOUPDATE="1", npm_config_cache=str(npm_cache()))
        return [*cmd, "run", "--format", "json", "--auto", PROMPT]
    return model, run


def _clients() -> list[tuple[str, str, Callable, str, str]]:
    """(label, hook install agent, runner, the stand-in server class, its package pin)."""
    from tests import real_clients as rc
    from tests import stand_in_models as sm

    return [("Claude Code", "claude-code", _claude, sm.AnthropicServer, f"{rc.CLAUDE_CODE[1]}"),
            ("Gemini CLI", "gemini-cli", _gemini, sm.GeminiServer, f"{rc.GEMINI_CLI[1]}"),
            ("Codex CLI", "codex", _codex, sm.ResponsesServer, f"{rc.CODEX_CLI[1]}"),
            ("OpenCode", "opencode", _opencode, sm.ChatCompletionsServer, f"{rc.OPENCODE[1]}")]


def one_run(tmp: Path, agent: str, runner: Callable, server: type, calls: int, path: str | None) -> list[float]:
    """The gaps (ms) between the model requests of one headless run; `path` None: no hook."""
    from tests.real_clients import clean_env, stop_residents

    run_dir = Path(tempfile.mkdtemp(dir=tmp))
    home, project = run_dir / "home", run_dir / "shop"
    home.mkdir()
    project.mkdir()
    ledger = run_dir / "ledger.sqlite"
    # `enforce` chooses in an existing ledger only: a new, empty one first.
    subprocess.run([str(BIN), "ingest", str(home), "--db", str(ledger)], check=True, capture_output=True)
    subprocess.run([str(BIN), "enforce", OUT_OF_REACH, "--db", str(ledger)], check=True, capture_output=True)
    extra = {"LOOPLEDGER_HOOK_RESIDENT": "0"} if path == "in-process" else {}
    env = clean_env(home, LOOPLEDGER_HOOK_LOG=str(run_dir / "hook.log"), **extra)
    model, run = runner(home, project, server, calls)
    with model:
        args = run(env)
        if path is not None:
            subprocess.run([str(BIN), "hook", "install", agent, "--project", "--db", str(ledger)], cwd=project,
                           env=env, check=True, capture_output=True)
        try:
            subprocess.run(args, cwd=project, env=env, capture_output=True, timeout=900)
        finally:
            stop_residents(home)
        times = list(model.recorded.times)
    if path is not None and (run_dir / "hook.log").exists():
        raise RuntimeError(f"{agent}: a hook failed: {(run_dir / 'hook.log').read_text()[-400:]}")
    gaps = [(b - a) * 1000 for a, b in zip(times, times[1:], strict=False)]
    return gaps[1:]  # the first pays for starting a guard process once per session


def run(quick: bool) -> str:
    import pytest

    calls, rounds = (6, 1) if quick else (10, 2)
    rows, left_out = [], []
    with tempfile.TemporaryDirectory() as tmp:
        for label, agent, runner, server, version in _clients():
            paths = ["resident", "in-process"] if agent != "opencode" else ["plugin"]
            base: list[float] = []
            guarded: dict[str, list[float]] = {p: [] for p in paths}
            try:
                for _ in range(rounds):
                    base += one_run(Path(tmp), agent, runner, server, calls, None)
                    for p in paths:
                        guarded[p] += one_run(Path(tmp), agent, runner, server, calls, p)
            except pytest.skip.Exception as exc:  # the client cannot be installed or run here
                left_out.append(f"{label}: {exc.msg}")
                continue
            bm = statistics.median(base)
            for p, gaps in guarded.items():
                gm = statistics.median(gaps)
                rows.append(f"| {label} {version} | {p} | {gm:.0f} ms ({_p95(gaps):.0f} ms) | {bm:.0f} ms "
                            f"({_p95(base):.0f} ms) | **{gm - bm:+.0f} ms** | {len(gaps)} / {len(base)} |")
    load = os.getloadavg()[0]
    lines = [
        "## Live: the hook's cost per tool call in the real clients\n",
        f"Each client headless against the stand-in model server, which asks for `true` {calls} times, {rounds} "
        "round(s) of runs taking turns; the figure is the time between two model requests (one tool call's whole "
        "turnaround in the client; each run's first left out), guarded beside the same client with nothing "
        "installed, same run. Claude Code runs three hooks per call (PreToolUse, "
        "PostToolUse, PostToolBatch), Gemini CLI and Codex CLI two (before and after the tool), OpenCode's "
        "plugin one `loopledger guard` round trip and one answer line. Every call allowed (the enforced "
        "thresholds are out of reach).\n",
        f"Load average when it ended: {load:.1f} on {os.cpu_count()} cores (other agents share the machine).\n",
        "| client | path | turnaround median (p95), guarded | unguarded median (p95) | added per call | gaps guarded / unguarded |",
        "|---|---|---:|---:|---:|---:|",
        *rows,
    ]
    if left_out:
        lines.append("\nLeft out: " + "; ".join(left_out))
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    sys.path.insert(0, str(ROOT))
    print(run("--quick" in sys.argv))
