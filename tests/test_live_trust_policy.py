"""Issue 17, points 1, 7 and 9: a ledger row never chooses code the live paths run; the live
default is the scored default set (a moving poll is not halted, a stuck loop is); read-only
commands open an existing ledger only. Real subprocesses (`loopledger hook`, `guard`,
`policies`, ...) on real SQLite ledgers."""

from __future__ import annotations

import hashlib
import json
import os
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest
from loopledger.analysis import scoring
from loopledger.detectors import registry
from loopledger.detectors.policy import DEFAULT_SPECS, PolicySpec
from loopledger.events import ReadError, SessionStart
from loopledger.formats import read
from loopledger.ledger import migrate
from loopledger.ledger.engine import make_engine
from loopledger.live import enforce
from loopledger.replay import replay

from tests.live_support import BIN, npm_test_loop, output, run_hook

HOOK_TIMEOUT_S = 20  # far beyond a hook's normal answer; a hook that waits on a signal never gets there


def _ledger(path: Path) -> str:
    url = f"sqlite:///{path}"
    eng = make_engine(url)
    migrate.upgrade(eng)
    eng.dispose()
    return url


def _enforce_raw_row(url: str, detector: str, params: str = "{}") -> str:
    """What a teammate with write access to a shared ledger can do: a policies row naming any
    detector, and an enforcement of it, written with plain SQL (no LoopLedger code involved)."""
    pid = hashlib.md5(detector.encode()).hexdigest()  # any 32 characters: the writer picks them
    path = url.removeprefix("sqlite:///")
    with sqlite3.connect(path) as raw:
        raw.execute("INSERT INTO policies (id, detector, params, label, is_default, created_at) "
                    "VALUES (?, ?, ?, ?, 0, ?)", (pid, detector, params, detector, time.time()))
        # As an enforcement of one policy has always been written (no enforcement_policies rows).
        raw.execute("INSERT INTO enforcements (policy_id, set_at, origin) VALUES (?, ?, 'api')", (pid, time.time()))
    return pid


@pytest.fixture
def marker_module(tmp_path):
    """A module on PYTHONPATH that leaves a marker file when anything imports it."""
    site = tmp_path / "site"
    site.mkdir()
    marker = tmp_path / "IMPORTED"
    (site / "ll_evil_plugin.py").write_text(
        f"open({str(marker)!r}, 'w').write('imported')\n"
        "def make():\n    raise SystemExit('ran code chosen by a ledger row')\n")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(site), os.environ.get("PYTHONPATH", "")])}
    return env, marker, "ll_evil_plugin:make"


# ── point 1: stored policies never name code ──────────────────────────────────────────────────


@pytest.mark.parametrize("detector", ["signal:pause", "module"])
def test_point_1_a_stored_module_factory_policy_is_allowed_at_once_and_imports_nothing(
        tmp_path, marker_module, detector):
    env, marker, evil = marker_module
    detector = evil if detector == "module" else detector
    url = _ledger(tmp_path / "shared.sqlite")
    _enforce_raw_row(url, detector)
    loop = npm_test_loop(tmp_path, calls=1)
    pre = next(ev for ev in loop.events if ev["hook_event_name"] == "PreToolUse")
    log = tmp_path / "hook.log"
    # `signal:pause` imported and called waits for a signal forever: the timeout is the failure.
    proc = subprocess.run([str(BIN), "hook", "claude-code", "--db", url, "--log", str(log)],
                          input=json.dumps(pre).encode(), capture_output=True, timeout=HOOK_TIMEOUT_S, env=env)
    assert proc.returncode == 0
    assert proc.stdout == b""  # Claude Code: no output = the call is allowed
    assert not marker.exists(), "the hook imported a module a ledger row named"
    lines = log.read_text().splitlines()
    assert len(lines) == 1 and detector in lines[0] and "not registered" in lines[0] and "allowed" in lines[0]


def test_point_1_guard_allows_a_stored_unregistered_policy_and_says_why(tmp_path, marker_module):
    env, marker, evil = marker_module
    url = _ledger(tmp_path / "shared.sqlite")
    _enforce_raw_row(url, evil)
    line = json.dumps({"session": "s1", "event": "call", "id": "c1", "tool": "Bash", "args": {"command": "ls"}})
    proc = subprocess.run([str(BIN), "guard", "--db", url], input=(line + "\n").encode(), capture_output=True,
                          timeout=HOOK_TIMEOUT_S, env=env)
    assert proc.returncode == 0, proc.stderr
    (verdict,) = [json.loads(x) for x in proc.stdout.decode().splitlines()]
    assert verdict["verdict"] == "allow" and verdict["id"] == "c1"
    assert evil in verdict["error"] and "not registered" in verdict["error"]
    assert len(proc.stderr.decode().strip().splitlines()) == 1  # one line says why
    assert not marker.exists()


def test_point_1_policies_says_a_stored_unregistered_policy_is_allowed(tmp_path, marker_module):
    env, marker, evil = marker_module
    url = _ledger(tmp_path / "shared.sqlite")
    _enforce_raw_row(url, evil)
    proc = subprocess.run([str(BIN), "policies", "--db", url], capture_output=True, text=True, timeout=600,
                          env={**env, "COLUMNS": "300"})
    assert proc.returncode == 0, proc.stderr
    row = next(ln for ln in proc.stdout.splitlines() if evil in ln and "Stored" not in ln)
    assert "not registered here: allowed" in row
    enforced = next(ln for ln in proc.stdout.splitlines() if "ENFORCED" in ln)
    assert evil in enforced
    assert "not registered here: allowed" in proc.stdout.split("ENFORCED", 1)[1]
    assert not marker.exists()


def test_point_1_in_process_readers_of_the_ledger_never_import(tmp_path, marker_module):
    """Policy.enforced, enforce.enforced_specs and a stored row's spec: looked up, not imported."""
    env, marker, evil = marker_module
    url = _ledger(tmp_path / "shared.sqlite")
    _enforce_raw_row(url, evil)
    sys.path.insert(0, env["PYTHONPATH"].split(os.pathsep)[0])
    try:
        from loopledger.guards import LiveGuard, Policy

        with pytest.raises(enforce.NotRegistered, match="not registered"):
            Policy.enforced(url)
        eng = make_engine(url)
        with eng.connect() as conn, pytest.raises(enforce.NotRegistered):
            enforce.enforced_specs(conn)
        eng.dispose()
        with LiveGuard(db=url, session="py") as g, pytest.raises(enforce.NotRegistered):
            g.call("Bash", {"command": "ls"}, "c1")
        assert not registry.is_registered(evil)
        with pytest.raises(ValueError, match="not registered"):
            PolicySpec(evil)
        assert not marker.exists() and "ll_evil_plugin" not in sys.modules
    finally:
        sys.path.pop(0)


def test_point_1_the_command_line_may_still_name_module_factory(tmp_path):
    """The person running a command chooses code: `--policy module:factory` is imported there."""
    site = tmp_path / "site"
    site.mkdir()
    (site / "ll_own_plugin.py").write_text(
        "from loopledger.detectors.registry import Detector\n"
        "from loopledger.detectors import registry\n"
        "def make():\n    rl = registry.get('run-length')\n"
        "    return Detector('own', rl.params, rl.factory, rl.validate, 'mine')\n")
    env = {**os.environ, "PYTHONPATH": str(site)}
    url = _ledger(tmp_path / "mine.sqlite")
    proc = subprocess.run([str(BIN), "enforce", "ll_own_plugin:make:max_strikes=3", "--db", url],
                          capture_output=True, text=True, timeout=600, env=env)
    assert proc.returncode == 0, proc.stderr
    assert "ll_own_plugin:make" in proc.stdout


# ── point 7: the live default is the scored default ───────────────────────────────────────────


def _gh_poll_events(tmp_path: Path, answers: list[str]) -> list[dict]:
    session = "gh-poll-1"
    base = {"session_id": session, "transcript_path": str(tmp_path / f"{session}.jsonl"), "cwd": "/w",
            "permission_mode": "default"}
    args = {"command": "gh run view 4242 --json jobs", "description": "Check the CI run"}
    events = [{**base, "hook_event_name": "UserPromptSubmit", "prompt": "wait for CI to finish"}]
    for i, text in enumerate(answers):
        tid = f"toolu_gh{i:03d}"
        events.append({**base, "hook_event_name": "PreToolUse", "tool_name": "Bash", "tool_input": args,
                       "tool_use_id": tid})
        events.append({**base, "hook_event_name": "PostToolUse", "tool_name": "Bash", "tool_input": args,
                       "tool_use_id": tid, "tool_response": {"stdout": text, "stderr": "", "interrupted": False}})
    return events


def test_point_7_a_moving_poll_is_never_halted_by_the_live_default(tmp_path):
    url = _ledger(tmp_path / "ledger.sqlite")  # nothing enforced: the live default applies
    done = [1, 4, 7, 9, 10, 11, 12]
    answers = [f"Run CI #4242 (in_progress)\n{k}/12 jobs done" for k in done]
    outs = [output(run_hook(ev, url)) for ev in _gh_poll_events(tmp_path, answers)]
    pre_outs = outs[1::2]
    denied = [o for o in pre_outs if o and o.get("hookSpecificOutput", {}).get("permissionDecision") == "deny"]
    assert denied == [] and not any(o and o.get("continue") is False for o in outs)
    with sqlite3.connect(url.removeprefix("sqlite:///")) as raw:
        verdicts = [v for (v,) in raw.execute("SELECT verdict FROM enforced_checks ORDER BY seq")]
        ids = {p for (p,) in raw.execute("SELECT policy_id FROM enforced_checks")}
    assert len(verdicts) == len(done) and set(verdicts) <= {"allow", "warn"}
    assert ids <= {sp.id for sp in DEFAULT_SPECS}  # each decision names a policy of the default set


def test_point_7_a_stuck_loop_is_halted_by_the_live_default_where_scoring_halts_the_set(tmp_path):
    url = _ledger(tmp_path / "ledger.sqlite")
    loop = npm_test_loop(tmp_path, calls=6)  # the same failing `npm test`, the same answer each time
    verdicts = {}
    for ev in loop.events:
        if ev["hook_event_name"] == "PostToolUseFailure" and verdicts.get(ev["tool_use_id"]) in ("block", "halt"):
            continue  # a refused call never ran: no result comes back for it
        out = output(run_hook(ev, url))
        if ev["hook_event_name"] == "PreToolUse":
            hs = (out or {}).get("hookSpecificOutput", {})
            verdicts[ev["tool_use_id"]] = ("halt" if out and out.get("continue") is False
                                           else "block" if hs.get("permissionDecision") == "deny" else "allow/warn")
    halted = [i for i, t in enumerate(loop.call_ids) if verdicts[t] == "halt"]
    assert halted, f"the live default never halted a stuck loop: {verdicts}"
    # The set as scoring judges it: the earliest first halt of any member, replaying the transcript.
    events = [it for it in read(loop.transcript, "claude-code") if not isinstance(it, SessionStart | ReadError)]
    firsts = [scoring.judge_replay(sp.id, 1, "loop", 1, 6, events, list(replay(events, sp)), 0).halt_at
              for sp in DEFAULT_SPECS]
    assert halted[0] + 1 == min(h for h in firsts if h is not None)


def test_point_7_enforce_a_set_names_it_and_the_earliest_verdict_wins(tmp_path):
    url = _ledger(tmp_path / "ledger.sqlite")
    specs = ["window:window=8,threshold=3", "ladder:warn_at=2,block_at=3,halt_at=5"]
    proc = subprocess.run([str(BIN), "enforce", *specs, "--db", url], capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr
    eng = make_engine(url)
    with eng.connect() as conn:
        assert enforce.enforced_specs(conn) == tuple(PolicySpec.parse(s) for s in specs)
    eng.dispose()
    loop = npm_test_loop(tmp_path, calls=4)
    pres = [ev for ev in loop.events if ev["hook_event_name"] == "PreToolUse"]
    run_hook(loop.events[1], url)  # the prompt
    outs = []
    for ev in pres:
        outs.append(output(run_hook(ev, url)))
        if outs[-1] is None:
            run_hook(next(e for e in loop.events if e["hook_event_name"] == "PostToolUseFailure"
                          and e["tool_use_id"] == ev["tool_use_id"]), url)
    # Alone: ladder warns at 2, blocks at 3; window (3 in 8) halts at the 3rd. The set halts at 3,
    # named after window, and the call after it is refused too.
    assert outs[0] is None and outs[1] is None
    assert outs[2]["continue"] is False and "(window)" in outs[2]["stopReason"]
    assert outs[3]["continue"] is False
    listed = subprocess.run([str(BIN), "policies", "--db", url], capture_output=True, text=True, timeout=600,
                            env={**os.environ, "COLUMNS": "300"}).stdout
    line = next(ln for ln in listed.splitlines() if "ENFORCED" in ln)
    assert "the set" in line and "window" in line and "ladder" in line and "since" in line and "(cli, by " in line


def test_point_7_policies_names_the_default_set_until_one_is_chosen(tmp_path):
    url = _ledger(tmp_path / "ledger.sqlite")
    listed = subprocess.run([str(BIN), "policies", "--db", url], capture_output=True, text=True, timeout=600,
                            env={**os.environ, "COLUMNS": "300"}).stdout
    line = next(ln for ln in listed.splitlines() if "ENFORCED" in ln)
    assert "default set" in line and "ladder" not in line
    assert all(sp.detector in line for sp in DEFAULT_SPECS)


# ── point 9: read-only commands open an existing ledger only ──────────────────────────────────


@pytest.mark.parametrize("args", [["score"], ["policies"], ["labels", "export"], ["dashboard", "--port", "1"],
                                  ["sweep", "--detector", "ladder", "--param", "halt_at=4..5"], ["enforce"], ["cost"]],
                         ids=lambda a: " ".join(a[:2]))
def test_point_9_a_read_command_on_a_missing_ledger_is_an_error_and_creates_nothing(tmp_path, args):
    missing = tmp_path / "ledgr.sqlite"  # mistyped
    proc = subprocess.run([str(BIN), *args, "--db", str(missing)], capture_output=True, text=True, timeout=600,
                          cwd=tmp_path, env={**os.environ, "COLUMNS": "300"})
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert str(missing) in proc.stderr.replace("\n", "")
    assert not missing.exists() and list(tmp_path.iterdir()) == []


def test_point_9_an_existing_ledger_still_reads(tmp_path):
    url = _ledger(tmp_path / "ledger.sqlite")
    for args in (["score"], ["policies"], ["labels", "export"]):
        proc = subprocess.run([str(BIN), *args, "--db", url], capture_output=True, text=True, timeout=600)
        assert proc.returncode == 0, (args, proc.stderr)



def test_point_9_a_missing_folder_is_no_ledger_either(tmp_path):
    missing = tmp_path / "ledgers" / "team.sqlite"
    proc = subprocess.run([str(BIN), "policies", "--db", str(missing)], capture_output=True, text=True, timeout=600,
                          env={**os.environ, "COLUMNS": "300"})
    assert proc.returncode == 2 and str(missing) in proc.stderr.replace("\n", "")
    assert list(tmp_path.iterdir()) == []


# The set as one guard (replay.PolicySet, what the live paths enforce): before its first halt
# every member has seen exactly the events it sees alone, so the set's first halt is the earliest
# first halt of any member (scoring.any_of), and each call's verdict is the most severe member's.
_SEVERITY = ["allow", "warn", "block", "halt", "after_halt"]
_TOOLS = [("Bash", {"command": "npm test"}), ("Bash", {"command": "gh run view 1"}), ("Read", {"path": "a.py"})]
_ANSWERS = ["1 failed", "2/12 done", "5/12 done", "ok"]


def _session(script: list[tuple[int, int, bool]]) -> list:
    from loopledger.events import Answer, Answers, Batch, Call, UserTurn

    events: list = [UserTurn("go")]
    for i, (tool, answer, turn) in enumerate(script):
        if turn:
            events.append(UserTurn("again"))
        name, args = _TOOLS[tool]
        events.append(Batch((Call(f"c{i}", name, args),)))
        events.append(Answers((Answer(f"c{i}", _ANSWERS[answer], answer == 0),)))
    return events


@pytest.mark.parametrize("specs", [DEFAULT_SPECS, (PolicySpec("window"), PolicySpec.parse("ladder:halt_at=6")),
                                   (PolicySpec("roo"), PolicySpec("cycle"), PolicySpec("progress"))],
                         ids=["default", "window+ladder", "roo+cycle+progress"])
def test_point_7_a_set_halts_where_scoring_halts_it(specs):
    from hypothesis import given, settings
    from hypothesis import strategies as st
    from loopledger.replay import PolicySet

    @settings(max_examples=80, deadline=None)
    @given(st.lists(st.tuples(st.integers(0, 2), st.integers(0, 3), st.integers(0, 4).map(lambda n: n == 0)),
                    min_size=1, max_size=14))
    def check(script):
        events = _session(script)
        alone = [list(replay(events, sp)) for sp in specs]
        together = list(replay(events, PolicySet.of(specs)))
        firsts = [scoring.judge_replay(sp.id, 1, "loop", 1, 1, events, steps, 0).halt_at
                  for sp, steps in zip(specs, alone, strict=True)]
        halted = [h for h in firsts if h is not None]
        got = scoring.judge_replay("set", 1, "loop", 1, 1, events, together, 0).halt_at
        assert got == (min(halted) if halted else None)
        for seq, step in enumerate(together):  # up to the set's first halt: the most severe member verdict
            if not step.checks:
                continue
            want = max((c.verdict for s in alone for c in s[seq].checks), key=_SEVERITY.index)
            assert step.checks[0].verdict == want, (seq, script)
            if want == "halt":
                break

    check()
