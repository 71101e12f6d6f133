"""corpus_tau2/: real tau2-bench runs read by the `tau2-bench` reader, compared with the counts
corpus_tau2/count.py made without loopledger (plain `json`; its table is in corpus_tau2/README.md):
sessions, agent calls per session, the longest run of identical consecutive calls per session,
answers flagged as errors, user turns.

The files are not in git (corpus_tau2/SOURCES.md says where each comes from, with its sha256).
Read from ../shared/corpus_tau2 when it holds them, else from the clone's corpus_tau2/; skipped
when neither does.

corpus_tau2/labels.csv (committed) labels every session of three files by hand; its rows are
checked against the same table (sessions per file, calls per session) and, with the files
present, against the sessions the reader sees. No guard or detector runs here."""

from __future__ import annotations

import csv
import hashlib
import json
import re
from collections import Counter
from pathlib import Path

import pytest
from loopledger.analysis import scoring
from loopledger.events import Answers, Batch, ReadError, SessionStart, UserTurn
from loopledger.formats import read, sniff
from loopledger.ledger import labels as label_file

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


# ── the hand labels ────────────────────────────────────────────────────────────────────────────

_LABEL_ROW = re.compile(r"^\| `(?P<file>[^`]+)` \| (?P<sessions>\d+) \| (?P<loop>\d+) \| (?P<normal>\d+) \| (?P<unclear>\d+) \|$")


def _label_counts() -> dict[str, dict[str, int]]:
    """The README's "Labels" table: file → sessions and sessions per label."""
    return {m["file"]: {k: int(m[k]) for k in ("sessions", "loop", "normal", "unclear")}
            for m in map(_LABEL_ROW.match, (HERE / "README.md").read_text().splitlines()) if m}


def _label_rows() -> list[dict[str, str]]:
    with (HERE / "labels.csv").open(encoding="utf-8", newline="") as fh:
        return list(csv.DictReader(fh))


def _by_file(rows: list[dict[str, str]]) -> dict[str, list[dict[str, str]]]:
    out: dict[str, list[dict[str, str]]] = {}
    for r in rows:
        out.setdefault(r["file"], []).append(r)
    return out


def test_the_labels_file_reads_as_labels_with_no_row_refused():
    with (HERE / "labels.csv").open(encoding="utf-8", newline="") as fh:
        rows, problems = label_file.parse(fh, "labels.csv")
    assert problems == []
    assert len(rows) == sum(c["sessions"] for c in _label_counts().values()) == 150


def test_every_labelled_file_is_labelled_session_by_session_as_the_table_counts_them():
    rows = _label_rows()
    counts = _label_counts()
    assert list(rows[0]) == list(label_file.COLUMNS)
    assert [r["file"] for r in rows] == sorted(r["file"] for r in rows), "keep labels.csv sorted by file"
    per_file = _by_file(rows)
    assert set(per_file) == set(counts) and set(counts) <= set(EXPECTED)
    for name, frows in per_file.items():
        calls = EXPECTED[name]["calls"]  # calls per session in file order: count.py's, not a guard's
        assert len(frows) == counts[name]["sessions"] == EXPECTED[name]["sessions"], name
        assert len({r["session_key"] for r in frows}) == len(frows), f"{name}: a session labelled twice"
        assert dict(Counter(r["label"] for r in frows)) == {k: v for k, v in counts[name].items()
                                                           if k != "sessions" and v}, name
        for r, n_calls in zip(frows, calls, strict=True):  # rows follow the reader's session order
            assert None not in r and None not in r.values(), f"not 5 columns (quote with \"\" in CSV): {r}"
            assert r["reason"].strip(), r
            if r["label"] == "loop":
                first, last = scoring.parse_loop_calls(r["loop_calls"])
                assert 1 <= first <= last <= n_calls, (r, n_calls)
            else:
                assert r["loop_calls"] == "", r


@pytest.mark.skipif(DATA is None, reason="corpus_tau2 files absent (../shared/corpus_tau2 and corpus_tau2/)")
@pytest.mark.parametrize("name", sorted(_label_counts()))
def test_every_labelled_session_is_one_the_reader_sees_in_the_same_order(name):
    keys, calls = [], []
    for item in read(DATA / name):
        if isinstance(item, SessionStart):
            keys.append(item.info.key)
            calls.append(0)
        elif isinstance(item, Batch):
            calls[-1] += len(item.calls)
    assert [r["session_key"] for r in _by_file(_label_rows())[name]] == keys
    assert calls == EXPECTED[name]["calls"]  # so a loop range inside the table's count is inside the session
