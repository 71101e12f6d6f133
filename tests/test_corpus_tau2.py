"""corpus_tau2/: real tau2-bench runs read by the `tau2-bench` reader, compared with the counts
corpus_tau2/count.py made without loopledger (plain `json`; its table is in corpus_tau2/README.md):
sessions, agent calls per session, the longest run of identical consecutive calls per session,
answers flagged as errors, user turns.

The files are not in git (corpus_tau2/SOURCES.md says where each comes from, with its sha256).
Read from ../shared/corpus_tau2 when it holds them, else from the clone's corpus_tau2/; skipped
when neither does."""

from __future__ import annotations

import hashlib
import json
import re
from pathlib import Path

import pytest
from loopledger.events import Answers, Batch, ReadError, SessionStart, UserTurn
from loopledger.formats import read, sniff

from tests.conftest import ROOT

pytestmark = pytest.mark.corpus

HERE = ROOT / "corpus_tau2"
CANDIDATES = (ROOT.parent / "shared" / "corpus_tau2", HERE)
_ROW = re.compile(r"^\| `(?P<file>[^`]+)` \| (?P<bytes>\d+) \| `(?P<sha>[0-9a-f]{16})` \| (?P<rest>.*) \|$")


def expected() -> dict[str, dict]:
    """The README's table: file → its counts, as count.py printed them."""
    out = {}
    for line in (HERE / "README.md").read_text().splitlines():
        m = _ROW.match(line)
        if m:
            sessions, calls, user_calls, errors, turns, run, per_calls, per_runs = (
                c.strip() for c in m["rest"].split("|"))
            out[m["file"]] = {"bytes": int(m["bytes"]), "sha": m["sha"], "sessions": int(sessions),
                              "errors": int(errors), "turns": int(turns), "max_run": int(run),
                              "calls": [int(x) for x in per_calls.split(",") if x],
                              "runs": [int(x) for x in per_runs.split(",") if x], "total": int(calls)}
    return out


EXPECTED = expected()


def _holds(folder: Path) -> bool:
    return all((folder / name).is_file() for name in EXPECTED)


DATA = next((f for f in CANDIDATES if _holds(f)), None)


def test_the_table_lists_every_source_with_the_same_bytes():
    sources = (HERE / "SOURCES.md").read_text()
    assert len(EXPECTED) == 9
    for name, row in EXPECTED.items():
        assert f"| `{name}` |" in sources and f"| {row['bytes']} | `{row['sha']}` |" in sources, name
        assert sum(row["calls"]) == row["total"] and len(row["calls"]) == len(row["runs"]) == row["sessions"]


def _runs(calls: list[tuple[str, str]]) -> int:
    best = run = 0
    for i, c in enumerate(calls):
        run = run + 1 if i and c == calls[i - 1] else 1
        best = max(best, run)
    return best


def _counts(path: Path) -> dict:
    per: list[list[tuple[str, str]]] = []
    errors = turns = 0
    keys = set()
    for item in read(path):
        if isinstance(item, SessionStart):
            per.append([])
            keys.add(item.info.key)
        elif isinstance(item, Batch):
            per[-1] += [(c.name, json.dumps(c.args, sort_keys=True)) for c in item.calls]
        elif isinstance(item, Answers):
            errors += sum(a.is_error for a in item.answers)
        elif isinstance(item, UserTurn):
            turns += 1
        assert not isinstance(item, ReadError), str(item)  # a real file reads cleanly
    assert len(keys) == len(per)  # every session its own key
    runs = [_runs(c) for c in per]
    return {"sessions": len(per), "calls": [len(c) for c in per], "runs": runs, "errors": errors,
            "turns": turns, "max_run": max(runs, default=0)}


@pytest.mark.skipif(DATA is None, reason="corpus_tau2 files absent (../shared/corpus_tau2 and corpus_tau2/)")
@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_the_reader_counts_what_the_independent_count_counts(name):
    path = DATA / name
    row = EXPECTED[name]
    raw = path.read_bytes()
    assert (len(raw), hashlib.sha256(raw).hexdigest()[:16]) == (row["bytes"], row["sha"]), "not the bytes SOURCES.md lists"
    assert sniff(path) == "tau2-bench"
    got = _counts(path)
    assert got == {k: row[k] for k in got}
