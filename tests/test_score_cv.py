"""`loopledger score --cv` on a small labelled ledger worked out by hand: the choice made on one
project's sessions, scored on the other's, can be worse than the in-sample table says.

Two projects (folders), two tau-bench-shaped files, four labelled sessions; X = the same `edit`
call each time, Y = a different `note` call. Three stored policies, the window seed at
thresholds 2, 3 and 5 (halting the 2nd, 3rd or 5th X within 8 calls):

    session        calls      label        W2 halts at     W3 halts at     W5
    alpha/task-1   X X X      loop 1-3     2: caught       3: caught       never: missed
    alpha/task-2   X Y X      normal       3: false halt   never           never
    beta/task-1    X X X X    loop 1-4     2: caught       3: caught       never: missed
    beta/task-2    X X X Y    normal       2: false halt   3: false halt   never

Precision first (fewest false halts, then most loops caught):
- in sample: W2 2 caught / 2 false, W3 2 / 1, W5 0 / 0 → W5 is the top: 0/2 loops, 0/2 halted;
- hold out alpha, choose on beta: W2 1/1, W3 1/1, W5 0/0 → W5 → on alpha 0/1 loops, 0/1 halted;
- hold out beta, choose on alpha: W2 1/1, W3 1/0, W5 0/0 → W3 → on beta 1/1 loops, 1/1 halted;
- held out, pooled: 1/2 loops, 1/2 normal halted — a choice that looked clean made a false halt
  on the project it never saw.
Wilson 95%: 0/2 → [0.00, 0.66] (upper: z²/(n + z²) = 3.8415/5.8415), 1/2 → [0.09, 0.91].
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from loopledger.detectors.policy import PolicySpec

BIN = Path(sys.executable).with_name("loopledger")
W2, W3, W5 = (PolicySpec.parse(f"window:window=8,threshold={t}") for t in (2, 3, 5))
SESSIONS = {"alpha": {1: "X X X", 2: "X Y X"}, "beta": {1: "X X X X", 2: "X X X Y"}}
LABELS = """file,session_key,label,loop_calls,reason
alpha/runs.json,task-1.trial-0,loop,1-3,edit x3
alpha/runs.json,task-2.trial-0,normal,,edit note edit
beta/runs.json,task-1.trial-0,loop,1-4,edit x4
beta/runs.json,task-2.trial-0,normal,,edit x3 then a note
"""


def _record(task: int, pattern: str) -> dict:
    traj: list[dict] = [{"role": "user", "content": f"Task {task}"}]
    for i, name in enumerate(pattern.split(), 1):
        tool, args = ("edit", {"path": "a.py", "old": "x", "new": "y"}) if name == "X" else ("note", {"n": i})
        traj.append({"role": "assistant", "content": None, "tool_calls": [
            {"id": f"c{task}{i}", "type": "function", "function": {"name": tool, "arguments": json.dumps(args)}}]})
        traj.append({"role": "tool", "tool_call_id": f"c{task}{i}", "name": tool, "content": "ok"})
    return {"task_id": task, "trial": 0, "reward": 0.0, "info": {}, "traj": traj}


def _ledger(root: Path) -> str:
    from loopledger import worker
    from loopledger.ledger import labels, migrate
    from loopledger.ledger.engine import make_engine

    for project, sessions in SESSIONS.items():
        (root / project).mkdir()
        (root / project / "runs.json").write_text(json.dumps([_record(t, p) for t, p in sessions.items()]))
    (root / "labels.csv").write_text(LABELS)
    url = f"sqlite:///{root / 'ledger.sqlite'}"
    engine = make_engine(url)
    try:
        migrate.upgrade(engine)
        opts = worker.Options(specs=[W2, W3, W5], default_ids=frozenset())
        worker.ingest_paths(engine, [root / "alpha", root / "beta"], opts)
        with engine.begin() as conn:
            report = labels.import_file(conn, root / "labels.csv")
        assert report.labelled == 4 and not report.problems, report.messages
    finally:
        engine.dispose()
    return url


def _cv_rows(text: str) -> dict[str, list[str]]:
    """The first cross-validation table's rows (after its title, up to the next one), keyed by the choice."""
    rows, inside = {}, False
    for line in text.splitlines():
        if line.startswith("Cross-validated"):
            if inside:
                break
            inside = True
        if inside and line.startswith("│"):
            cells = [c.strip() for c in line.strip("│").split("│")]
            if cells[0]:
                rows[cells[0]] = cells[1:]
    return rows


def test_score_cv_shows_in_sample_beside_held_out_worked_by_hand(tmp_path):
    url = _ledger(tmp_path)
    out = subprocess.run([str(BIN), "score", "--db", url, "--cv"], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert "one folder of 2 held out at a time" in out.stdout
    top = _cv_rows(out.stdout)["the top of this leaderboard"]
    assert top[0] == W5.label
    assert top[1:4] == ["0/2 [0.00, 0.66]", "0/2 [0.00, 0.66]", "0/2 [0.00, 0.66]"]  # in sample
    assert top[4:7] == ["1/2 [0.09, 0.91]", "1/2 [0.09, 0.91]", "0/2 [0.00, 0.66]"]  # held out


def test_score_cv_shows_the_users_currency_per_family_worked_by_hand(tmp_path):
    """Both files are tau-bench's: one family, harnesses. In sample W5 halts nothing: none of the
    3 + 4 calls inside the loops saved, none of the normal sessions' 3 + 4 lost. Held out: on
    alpha W5 (nothing), on beta W3: halted at call 3 of beta/task-1's loop 1-4 (saves call 4) and
    at call 3 of beta/task-2 (loses call 4). Calls saved 1/7, from (0 of 3, 1 of 4) by session: a
    resample is both alpha (0/6, one time in four), one of each (1/7) or both beta (2/8, one in
    four), so the 95% interval is [0, 0.25]; calls lost likewise."""
    url = _ledger(tmp_path)
    out = subprocess.run([str(BIN), "score", "--db", url, "--cv"], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert "Cross-validated, harnesses: in the user's currency" in out.stdout
    assert "Cross-validated, coding agents" not in out.stdout
    family = out.stdout[out.stdout.index("Cross-validated, harnesses"):]
    top = _cv_rows(family)["the top of this leaderboard"]
    none = "0/2 [0.00, 0.66]"
    assert top[:6] == [none, none, "0/7 (0%) [0.00, 0.00]", none, "0/7 (0%) [0.00, 0.00]", none]  # in sample
    half = "1/2 [0.09, 0.91]"
    assert top[6:] == [half, half, "1/7 (14%) [0.00, 0.25]", half, "1/7 (14%) [0.00, 0.25]", none]  # held out


def test_score_cv_with_one_folder_says_what_to_hold_out_instead(tmp_path):
    url = _ledger(tmp_path)
    out = subprocess.run([str(BIN), "score", "--db", url, "--cv", "--group-by", "agent"], capture_output=True,
                         text=True, timeout=120)
    assert out.returncode == 0
    assert "from two agents or more (found 1)" in out.stderr and "--group-by file" in out.stderr
    assert "Cross-validated" not in out.stdout
    bad = subprocess.run([str(BIN), "score", "--db", url, "--cv", "--group-by", "moon"], capture_output=True,
                         text=True, timeout=120)
    assert bad.returncode == 2 and "--group-by 'moon'" in bad.stderr


def test_the_leaderboard_page_shows_the_same_cross_validated_figures(tmp_path):
    """The same hand-worked numbers on the dashboard's leaderboard (AppTest), then with one file
    held out at a time — here the same split, each project holding one file."""
    from app_support import app, ledger_env

    url = _ledger(tmp_path)
    with ledger_env(url):
        at = app("views/leaderboard.py").run(timeout=60)
        assert not at.exception
        cv = next(d.value for d in at.dataframe if "held out: normal halted" in d.value.columns)
        top = cv[cv["choice"] == "the top of this leaderboard"].iloc[0]
        assert top["chosen on every session"] == W5.label
        assert (top["in sample: loops halted inside"], top["held out: loops halted inside"],
                top["held out: normal halted"]) == ("0/2 [0.00, 0.66]", "1/2 [0.09, 0.91]", "1/2 [0.09, 0.91]")
        # the harnesses' table in the user's currency: the same figures as the CLI's, worked above
        assert any(t.value == "harnesses, in the user's currency" for t in at.text)
        fam = next(d.value for d in at.dataframe if "held out: calls saved" in d.value.columns)
        top = fam[fam["choice"] == "the top of this leaderboard"].iloc[0]
        assert (top["in sample: calls saved"], top["held out: calls saved"], top["held out: calls lost"]) == (
            "0/7 (0%) [0.00, 0.00]", "1/7 (14%) [0.00, 0.25]", "1/7 (14%) [0.00, 0.25]")
        at.radio(key="lb_cv_by").set_value("agent").run(timeout=60)
        assert not at.exception
        assert any("nothing to hold out" in i.value for i in at.info)
