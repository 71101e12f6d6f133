"""`loopledger replay` on the sample data, as a person runs it (the console script, for real):
every built-in detector replays a file and says its state in words, and calls, runs and sessions
are numbered as the dashboard shows them — from 1, calls by their call number."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from loopledger.detectors.policy import BUILTIN_SPECS, DETECTORS

ROOT = Path(__file__).resolve().parents[1]
BIN = Path(sys.executable).with_name("loopledger")
CLAUDE = ROOT / "sample_data" / "claude_code" / "3f9c1e62-58a4-4d0b-9b7e-2a6d41c0e8f3.jsonl"
TAU2 = ROOT / "sample_data" / "tau2" / "telecom_results.json"
TAU_AIRLINE = ROOT / "sample_data" / "openai_chat" / "tau_airline_results.json"


def _replay(*args: object) -> subprocess.CompletedProcess:
    return subprocess.run([str(BIN), "replay", *map(str, args)], capture_output=True, text=True, timeout=300,
                          env={**os.environ, "COLUMNS": "400"})


def _rows(text: str) -> list[list[str]]:
    """The table's body rows as cells: call, run, event, what, verdict, results, state."""
    return [[cell.strip() for cell in line.split("│")[1:-1]] for line in text.splitlines() if line.startswith("│")]


def _tool_uses(path: Path) -> int:
    """Tool calls in a Claude Code transcript, counted from its lines (not by LoopLedger's reader)."""
    return sum(1 for line in path.read_text().splitlines()
               for part in (json.loads(line).get("message") or {}).get("content") or []
               if isinstance(part, dict) and part.get("type") == "tool_use")


@pytest.mark.parametrize("spec", BUILTIN_SPECS, ids=[s.detector for s in BUILTIN_SPECS])
def test_every_built_in_detector_replays_a_sample_file(spec):
    out = _replay(CLAUDE, "--policy", spec.text)
    assert out.returncode == 0, out.stderr
    assert out.stderr == ""
    assert f"policy: {spec.label}" in out.stdout
    rows = _rows(out.stdout)
    calls = [r for r in rows if r[2] == "batch"]
    n = _tool_uses(CLAUDE)  # 14, one per assistant message
    assert [r[0] for r in calls] == [f"#{i}" for i in range(1, n + 1)]  # calls by their number, from 1
    assert {r[1] for r in rows} == {"#1"}  # one user turn: the first run, run #1
    assert all(r[6] for r in calls), [r for r in calls if not r[6]]  # its state in words at every call
    assert re.search(rf"^totals: runs 1, calls {n},", out.stdout, re.M)


def test_the_help_lists_every_built_in_detector():
    out = subprocess.run([str(BIN), "replay", "--help"], capture_output=True, text=True, timeout=60,
                         env={**os.environ, "COLUMNS": "1000"})
    assert out.returncode == 0
    listed = re.search(r"lists \(([^)]*)\)", " ".join(out.stdout.split())).group(1)
    assert set(DETECTORS) <= {name.strip() for name in listed.split(",")}


def test_runs_are_numbered_from_1_and_the_first_halt_by_its_call():
    """tau2's telecom sample: four user messages, so four runs, #1 to #4 in order."""
    users = [m for m in json.loads(TAU2.read_text())["simulations"][0]["messages"] if m["role"] == "user"]
    out = _replay(TAU2, "--policy", "progress")
    assert out.returncode == 0, out.stderr
    runs = [r[1] for r in _rows(out.stdout)]
    assert list(dict.fromkeys(runs)) == [f"#{i}" for i in range(1, len(users) + 1)]
    assert re.search(r"first halt at call #\d+ \(run #\d\)", out.stdout)
    assert "first_halt_seq" not in out.stdout  # a step number, not what people count


def test_sessions_of_a_file_are_numbered_from_1_and_keyed_for_session():
    out = _replay(TAU_AIRLINE, "--policy", "window")
    assert out.returncode == 0, out.stderr
    titles = re.findall(r"session (\d) of (\d) · (\S+)", out.stdout)
    assert [(a, b) for a, b, _ in titles] == [("1", "2"), ("2", "2")]
    key = titles[1][2]
    one = _replay(TAU_AIRLINE, "--policy", "window", "--session", key)
    assert one.returncode == 0 and one.stdout.count("totals:") == 1
