"""`loopledger score` (the console script, for real) on the hand-worked ledger of score_support:
the same literal numbers the leaderboard page shows (tests/test_app_leaderboard.py)."""

from __future__ import annotations

import csv
import io
import subprocess
import sys
from pathlib import Path

import pytest
from score_support import CURRENCY, EXPECTED, INTERVALS, LADDER, LOOP_CALLS, NORMAL_CALLS, WINDOW, build

BIN = Path(sys.executable).with_name("loopledger")


def _run(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([str(BIN), *args], capture_output=True, text=True, timeout=120)


def _table_rows(text: str) -> dict[str, list[str]]:
    """The rich table's data rows, keyed by the policy cell."""
    rows = {}
    for line in text.splitlines():
        if line.startswith("│"):
            cells = [c.strip() for c in line.strip("│").split("│")]
            rows[cells[0]] = cells[1:]
    return rows


def _main_table(text: str) -> str:
    """The leaderboard table: what comes before the first table per family."""
    return text.split("\nharnesses: ")[0]


def _expected_cells(pid: str) -> list[str]:
    """The hand-counted row, each ratio followed by its hand-computed Wilson interval; loops
    flagged inside, calls saved of the 13 spent inside loops, calls lost of the normal sessions'
    10. Both policies halt, and the ledger's transcripts report no token usage: tokens and $ saved
    are "unknown" (never 0)."""
    (*counts, precision, recall, saved, into), (p_ci, r_ci) = EXPECTED[pid], INTERVALS[pid]
    lost, flagged = CURRENCY[pid]
    shares = {0: "0/13 (0%)", 1: "1/13 (8%)"}  # 1/13 = 7.7%
    assert LOOP_CALLS == 13 and NORMAL_CALLS == 10 and lost == 0
    return [str(v) for v in (*counts, precision, p_ci, recall, r_ci, f"{flagged}/3", shares[saved], "0/10 (0%)",
                             "unknown", "unknown", into)]


def test_score_prints_the_hand_counted_table(tmp_path):
    url, _ = build(tmp_path)
    out = _run("score", "--db", url)
    assert out.returncode == 0, out.stderr
    assert "over 3 loop and 2 normal labelled session(s) (1 unclear left out)" in out.stdout
    rows = _table_rows(_main_table(out.stdout))
    assert rows[WINDOW.label] == _expected_cells(WINDOW.id)
    assert rows[LADDER.label] == _expected_cells(LADDER.id)
    assert list(rows) == [LADDER.label, WINDOW.label], "ranked: same catches, LADDER has no false halt"
    by_saved = _table_rows(_main_table(_run("score", "--db", url, "--sort", "saved").stdout))
    assert list(by_saved) == [WINDOW.label, LADDER.label]


def test_score_prints_a_table_per_family_in_the_users_currency(tmp_path):
    """The six tau-bench sessions are a harness's: one family table, each policy's figures with
    their intervals — Wilson on sessions (2/3 → [0.21, 0.94], 1/3 → [0.06, 0.79], 0/2 → [0.00,
    0.66], 1/2 → [0.09, 0.91]); on calls a session bootstrap, which for no call saved or lost
    is the point 0."""
    url, _ = build(tmp_path)
    out = _run("score", "--db", url)
    assert out.returncode == 0, out.stderr
    assert "harnesses: 3 loop and 2 normal session(s), in the user's currency" in out.stdout
    assert "coding agents:" not in out.stdout  # no session of that family here
    family = out.stdout[out.stdout.index("harnesses: 3 loop"):]
    rows = _table_rows(family)
    assert rows[LADDER.label] == ["2/3 [0.21, 0.94]", "1/3 [0.06, 0.79]", "0/13 (0%) [0.00, 0.00]",
                                  "0/2 [0.00, 0.66]", "0/10 (0%) [0.00, 0.00]", "0/2 [0.00, 0.66]"]
    window = rows[WINDOW.label]
    assert window[:2] == ["2/3 [0.21, 0.94]", "2/3 [0.21, 0.94]"] and window[3:] == [
        "1/2 [0.09, 0.91]", "0/10 (0%) [0.00, 0.00]", "0/2 [0.00, 0.66]"]
    assert window[2].startswith("1/13 (8%) [0.00, ")  # a resample without task-1 saves none


def test_a_policy_replayed_from_the_ledger_scores_like_a_stored_one(tmp_path):
    # Only LADDER is stored; WINDOW is replayed on the labelled sessions' stored events.
    url, _ = build(tmp_path, specs=(LADDER,))
    out = _run("score", "--db", url, "--policy", WINDOW.text, "--format", "csv")
    assert out.returncode == 0, out.stderr
    rows = {r["policy_id"]: r for r in csv.DictReader(io.StringIO(out.stdout))}
    assert set(rows) == {LADDER.id, WINDOW.id}
    assert rows[WINDOW.id]["policy"] == f"{WINDOW.label} (replayed)"
    for pid in (LADDER.id, WINDOW.id):
        got = [rows[pid][k] for k in ("loops", "caught", "early", "missed", "normal", "false_halts", "precision",
                                      "precision_ci", "recall", "recall_ci", "flagged", "saved", "lost",
                                      "tokens_saved", "usd_saved", "into_loop")]
        assert got == _expected_cells(pid)
    md = _run("score", "--db", url, "--format", "markdown").stdout
    assert md.splitlines()[0].startswith("| policy | loops | caught |")
    assert (f"| {LADDER.label} | 3 | 2 | 0 | 1 | 2 | 0 | 1.00 | [0.34, 1.00] | 0.67 | [0.21, 0.94] | 1/3 | 0/13 (0%) "
            "| 0/10 (0%) | unknown | unknown | 4 (4, 4) |" in md)


@pytest.mark.parametrize(("args", "message"), [
    (("--policy", "nosuch"), "nosuch"),
    (("--sort", "speed"), "--sort 'speed'"),
    (("--format", "xml"), "--format 'xml'"),
])
def test_bad_usage_is_one_line_exit_2(tmp_path, args, message):
    out = _run("score", "--db", str(tmp_path / "l.sqlite"), *args)
    assert out.returncode == 2 and message in out.stderr and "Traceback" not in out.stderr


def test_an_unlabelled_ledger_says_how_to_label(tmp_path):
    from loopledger.ledger import migrate
    from loopledger.ledger.engine import make_engine

    eng = make_engine(f"sqlite:///{tmp_path / 'empty.sqlite'}")  # score reads an existing ledger only
    migrate.upgrade(eng)
    eng.dispose()
    out = _run("score", "--db", str(tmp_path / "empty.sqlite"))
    assert out.returncode == 0
    assert "loopledger labels import" in out.stderr


def test_help_explains_score_and_labels():
    env = {"COLUMNS": "200", "PATH": "/usr/bin:/bin", "TERM": "dumb"}
    score = subprocess.run([str(BIN), "score", "--help"], capture_output=True, text=True, env=env).stdout
    assert "--db" in score and "--policy" in score and "false halt" in score
    imp = subprocess.run([str(BIN), "labels", "import", "--help"], capture_output=True, text=True, env=env).stdout
    assert "session_key" in imp and "loop_calls" in imp and "Exit status" in imp
    exp = subprocess.run([str(BIN), "labels", "export", "--help"], capture_output=True, text=True, env=env).stdout
    assert "--full-paths" in exp
