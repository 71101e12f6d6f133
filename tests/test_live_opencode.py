"""LoopLedger's OpenCode plugin with the real OpenCode (npm opencode-ai, pinned in
tests/real_clients.py) against a stand-in Chat Completions API on 127.0.0.1 that asks for the
same shell call on every turn; `hook install opencode`; and `loopledger watch` reading
OpenCode's database while it runs.

Expectations come from the replay engine (tests/live_e2e.py): the enforced verdicts are the
ones a replay of the session OpenCode stored gives, the first warning and refusal come where an
unguarded agent repeating the call would get them, and a halt aborts the run there."""

from __future__ import annotations

import json
import os
import subprocess
import time
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


def _config(home: Path, model_url: str) -> None:
    """OpenCode's user config: the stand-in as an OpenAI-compatible provider, its one model."""
    folder = home / ".config" / "opencode"
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "opencode.json").write_text(json.dumps({
        "$schema": "https://opencode.ai/config.json",
        "provider": {"standin": {"npm": "@ai-sdk/openai-compatible", "name": "Stand-in",
                                 "options": {"baseURL": f"{model_url}/v1", "apiKey": "stand-in"},
                                 "models": {"loop-model": {"name": "Loop", "tool_call": True}}}},
        "model": "standin/loop-model", "autoupdate": False, "share": "disabled"}))


def _guards_left(ledger: Path) -> list[int]:
    """`loopledger guard` processes still serving this ledger (the plugin's child)."""
    pids = []
    for proc in Path("/proc").iterdir():
        try:
            cmd = (proc / "cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        if b"guard" in cmd and str(ledger).encode() in cmd:
            pids.append(int(proc.name))
    return pids


def _run(tmp_path: Path, policy: str, command: str, max_turns: int, *, user: bool = False):
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
    make_ledger(str(ledger))  # enforce chooses in an existing ledger only
    subprocess.run([str(BIN), "enforce", *enforce_args(policy), "--db", str(ledger)], check=True, capture_output=True)
    project, home = tmp_path / "shop", tmp_path / "home"
    project.mkdir()
    home.mkdir()
    plugin_home = home / ".config" / "opencode" if user else project / ".opencode"
    opencode_plugin_deps(project / ".opencode", home / ".config" / "opencode")  # OpenCode reads both
    data = home / ".local" / "share" / "opencode"
    env = clean_env(home, LOOPLEDGER_HOOK_LOG=str(tmp_path / "hook.log"), OPENCODE_DISABLE_MODELS_FETCH="1",
                    OPENCODE_DISABLE_AUTOUPDATE="1", npm_config_cache=str(npm_cache()))
    inst = subprocess.run([str(BIN), "hook", "install", "opencode", "--user" if user else "--project",
                           "--db", str(ledger)], cwd=project, capture_output=True, text=True, env=env)
    assert inst.returncode == 0, inst.stderr
    with ChatCompletionsServer(command=command, max_turns=max_turns) as model, \
            Watch(ledger, [data / "opencode.db"], env, policy) as watch:
        _config(home, model.url)
        proc = subprocess.run([*oc, "run", "--format", "json", "--auto", PROMPT], cwd=project, env=env,
                              capture_output=True, text=True, timeout=600)
        requests = [body for _, body in model.recorded.requests]
        side = watch.wait_beside(ledger, len(enforced(ledger)))
    keep_opencode_plugin_deps(plugin_home)
    deadline = time.monotonic() + 30
    while _guards_left(ledger) and time.monotonic() < deadline:  # the guard ends with OpenCode's pipe
        time.sleep(0.1)
    assert _guards_left(ledger) == []
    return proc, requests, ledger, data / "opencode.db", side


def _events(stdout: str) -> list[dict]:
    return [json.loads(line) for line in stdout.splitlines() if line.startswith("{")]


def _tool_results(body: dict) -> str:
    """What the model read for the previous call: the request's trailing tool messages."""
    messages = body.get("messages") or []
    tail = []
    for m in reversed(messages):
        if m.get("role") != "tool":
            break
        tail.append(m.get("content"))
    return json.dumps(tail)


@pytest.mark.parametrize("policy", POLICIES)
def test_the_real_opencode_is_guarded_as_its_storage_replays(tmp_path, policy):
    """A stuck failing call: warn reaches the model in the call's result, block is the call's
    error the model reads, halt aborts the run with no model request after it; every verdict is
    the one a replay of the session OpenCode stored gives, and `loopledger watch`, reading
    OpenCode's database meanwhile, puts the replayed check beside each enforced decision."""
    proc, requests, ledger, db, side = _run(tmp_path, policy, "cat missing.txt", 12)
    live = enforced(ledger)
    assert {o for _, _, o in live} == {"opencode"}
    verdicts, got = judged_as_replayed(ledger, db, "opencode", policy, 12, PROMPT)
    if got.warn is not None and got.warn < got.refusal:
        assert "LoopLedger warning" in _tool_results(requests[got.warn])
    if verdicts[got.refusal - 1] == vocab.BLOCK:
        seen = _tool_results(requests[got.refusal])
        assert "LoopLedger blocked" in seen and "No such file" not in seen
    assert len(requests) == got.halt  # the halted call was the last one the model asked for
    assert proc.returncode == 0, proc.stderr[-2000:]
    last = [e for e in _events(proc.stdout) if e.get("type") == "tool_use"][-1]["part"]["state"]
    assert last["status"] == "error" and last["error"].startswith("LoopLedger halted the agent")
    # The guard's decisions beside the replayed checks, call for call, as the Session page shows them.
    assert [(c, e) for c, e, _ in side] == [(c, v) for c, v, _ in live]
    assert all(e == r for _, e, r in side), side
    assert not (tmp_path / "hook.log").exists()


def test_the_real_opencode_is_never_halted_on_output_that_moves(tmp_path):
    """The same call whose answer changes every time (`date +%s%N`), under the live default:
    never refused."""
    proc, requests, ledger, db, _ = _run(tmp_path, "default", "date +%s%N", 8)
    live = enforced(ledger)
    assert [(c, v) for c, v, _ in live] == replayed(db, "opencode", specs_of("default"))
    assert len(live) == 8 and not {v for _, v, _ in live} & set(REFUSED), live
    assert proc.returncode == 0 and len(requests) == 9


def test_the_user_wide_plugin_guards_every_project(tmp_path):
    """`hook install opencode --user` (~/.config/opencode/plugins/): OpenCode loads it in any
    folder."""
    proc, requests, ledger, db, _ = _run(tmp_path, LADDER_USER, "cat missing.txt", 12, user=True)
    assert (tmp_path / "home" / ".config" / "opencode" / "plugins" / "loopledger.js").is_file()
    assert not (tmp_path / "shop" / ".opencode" / "plugins").exists()
    live = enforced(ledger)
    assert [(c, v) for c, v, _ in live] == replayed(db, "opencode", specs_of(LADDER_USER))
    assert vocab.HALT in {v for _, v, _ in live} and len(requests) == len(live)


LADDER_USER = "ladder:warn_at=2,block_at=3,halt_at=4"


def test_hook_install_opencode_is_idempotent_refuses_a_stranger_and_uninstalls_cleanly(tmp_path, fresh_db):
    from loopledger.ledger import migrate

    migrate.upgrade(fresh_db)
    db = fresh_db.removeprefix("sqlite:///")
    project = tmp_path / "p"
    project.mkdir()
    env = {**os.environ, "HOME": str(tmp_path / "home")}

    def hook(*args: str) -> subprocess.CompletedProcess:
        return subprocess.run([str(BIN), "hook", *args], capture_output=True, text=True, cwd=project, env=env)

    first = hook("install", "opencode", "--project", "--db", db)
    assert first.returncode == 0, first.stderr
    plugin = project / ".opencode" / "plugins" / "loopledger.js"
    text = plugin.read_text()
    config = json.loads(text.split("/* loopledger:config */", 1)[1].split("/* loopledger:end */", 1)[0])
    assert config["command"][1:] == ["guard", "--db", db, "--origin", "opencode"]
    assert Path(config["command"][0]).name == "loopledger" and Path(config["command"][0]).is_file()
    assert "OpenCode loads plugins when it starts" in " ".join(first.stdout.split())
    again = hook("install", "opencode", "--project", "--db", db)
    assert "nothing changed" in again.stdout and plugin.read_text() == text
    # Uninstall takes the file and the folders the install made, nothing else.
    assert hook("uninstall", "opencode", "--project").returncode == 0
    assert not (project / ".opencode").exists()
    # A plugin of that name that is not ours is never replaced, nor removed.
    plugin.parent.mkdir(parents=True)
    plugin.write_text("export const Mine = async () => ({})\n")
    refused = hook("install", "opencode", "--project", "--db", db)
    assert refused.returncode == 1 and "not LoopLedger's" in refused.stderr and str(plugin) in refused.stderr
    assert hook("uninstall", "opencode", "--project").returncode == 1
    assert plugin.read_text() == "export const Mine = async () => ({})\n"
