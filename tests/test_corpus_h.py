"""corpus_h/: 46 real sessions (Claude Code, Codex CLI, tau2-bench results) from 13 repositories
no other set names, labelled by reading before any guard ran on them (corpus_h/README.md).

The transcripts are not in git (corpus_h/.gitignore): corpus_h/labels.csv and SOURCES.md are.
The data is read from `LOOPLEDGER_CORPUS_H_DATA` if set, else `../shared/corpus_h` when it holds
the files, else the worktree's own corpus_h; the tests skip when none does. No guard or detector
runs here: these tests pin the bytes that were labelled and that every session the readers see
has exactly one label (tests/test_detection_scores.py scores the set with the others)."""

from __future__ import annotations

import csv
import functools
import hashlib
import os
import re
from pathlib import Path

import pytest
from loopledger.analysis.replay_table import sessions_of
from loopledger.formats import read

from tests.conftest import ROOT

pytestmark = pytest.mark.corpus

LABELS = ROOT / "corpus_h"
ROW = re.compile(r"^\| `([^`]+)` \| ([\w.-]+/[\w.-]+) \|.*\| (\d+) \| `([0-9a-f]{16})` \|$", re.M)


def _sources() -> dict[str, tuple[str, int, str]]:
    """file → (repository, bytes, sha256 prefix), as SOURCES.md pins it."""
    return {f: (repo, int(size), digest) for f, repo, size, digest in
            ROW.findall((LABELS / "SOURCES.md").read_text(encoding="utf-8"))}


def _labels() -> list[dict[str, str]]:
    with (LABELS / "labels.csv").open(encoding="utf-8", newline="") as fh:
        return list(csv.DictReader(fh))


@pytest.fixture(scope="module")
def data_dir() -> Path:
    named = os.environ.get("LOOPLEDGER_CORPUS_H_DATA")
    candidates = [Path(named)] if named else [ROOT.parent / "shared" / "corpus_h", LABELS]
    for folder in candidates:
        if all((folder / f).is_file() for f in _sources()):
            return folder
    pytest.skip(f"the fetched transcripts are in none of {[str(c) for c in candidates]} "
                "(they are not committed; see corpus_h/README.md)")


@functools.cache
def _keys(path: Path) -> tuple[str, ...]:
    return tuple(info.key for info, _, _ in sessions_of(read(path), path))


def test_the_labels_name_only_pinned_files_each_with_a_reason():
    rows, sources = _labels(), _sources()
    assert rows and {r["file"] for r in rows} <= set(sources)
    assert len({repo for repo, _, _ in sources.values()}) >= 6  # what the set was gathered for
    for r in rows:
        assert None not in r and None not in r.values(), f"not 5 columns: {r}"
        assert r["label"] in ("loop", "normal", "unclear") and r["reason"].strip(), r
        if r["label"] == "loop":
            first, _, last = r["loop_calls"].partition("-")
            assert 1 <= int(first) < int(last), r
        else:
            assert r["loop_calls"] == "", r


def test_every_file_is_the_one_sources_md_pins(data_dir):
    for rel, (_, size, digest) in _sources().items():
        data = (data_dir / rel).read_bytes()
        assert len(data) == size and hashlib.sha256(data).hexdigest()[:16] == digest, rel


def test_every_session_the_readers_see_has_exactly_one_label(data_dir):
    labelled = [(r["file"], r["session_key"]) for r in _labels()]
    assert len(labelled) == len(set(labelled))
    seen = [(rel, key) for rel in sorted({f for f, _ in labelled}) for key in _keys(data_dir / rel)]
    assert sorted(seen) == sorted(labelled)
