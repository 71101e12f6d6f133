"""The peer ports on the real, labelled transcripts of ../shared/corpus, against what is known
independently of this code: issue 14 reports that OpenHands' own stuck detector (openhands-sdk
1.58, run for real on these sessions) halts 1 of the 11 labelled loops inside the loop, and that
the other agents' guards, ported and scored the same way, catch fewer than a third of them;
issue 26 that Kilo Code's LoopDetector, ported, halts 6 of them.

Scored by loopledger.analysis.scoring (a halt counts only inside the labelled loop)."""

from __future__ import annotations

import csv
from collections import Counter

import pytest
from loopledger.analysis import scoring
from loopledger.events import ReadError, SessionStart
from loopledger.formats import read
from loopledger.replay import replay

from tests.conftest import CORPUS

pytestmark = pytest.mark.corpus


@pytest.fixture(scope="module")
def labelled():
    """(label, first, last, events) for every labelled session, read by the real readers."""
    if not (CORPUS / "labels.csv").is_file():
        pytest.skip("../shared/corpus (with labels.csv) is absent")
    corpus_dir = CORPUS
    rows = list(csv.DictReader((corpus_dir / "labels.csv").open(encoding="utf-8")))
    out = []
    for file in sorted({r["file"] for r in rows}):
        sessions: dict[str, list] = {}
        key = None
        for item in read(corpus_dir / file):
            if isinstance(item, SessionStart):
                key = item.info.key
                sessions[key] = []
            elif not isinstance(item, ReadError) and key is not None:
                sessions[key].append(item)
        for r in (r for r in rows if r["file"] == file):
            span = scoring.parse_loop_calls(r["loop_calls"])
            first, last = span if span else (None, None)
            out.append((scoring.normalize_label(r["label"]), first, last, sessions[r["session_key"]]))
    return out


def _outcomes(labelled, spec: str) -> Counter:
    counts: Counter = Counter()
    for i, (label, first, last, events) in enumerate(labelled):
        steps = list(replay(events, spec))
        judged = scoring.judge_replay(spec, i, label, first, last, events, steps, 0)
        counts[(label, judged.outcome)] += 1
    return counts


def test_the_corpus_has_the_labels_the_issue_counts(labelled):
    assert Counter(label for label, *_ in labelled) == {"loop": 11, "normal": 47, "unclear": 6}


def test_openhands_port_catches_what_the_real_sdk_caught(labelled):
    counts = _outcomes(labelled, "openhands")
    assert counts[("loop", scoring.CAUGHT)] == 1


@pytest.mark.parametrize("spec", ["gemini-cli", "roo"])
def test_the_other_ports_catch_fewer_than_a_third(labelled, spec):
    counts = _outcomes(labelled, spec)
    assert counts[("loop", scoring.CAUGHT)] < 11 / 3


def test_the_kilo_port_catches_what_issue_26_measured_on_this_corpus(labelled):
    """Issue 26 (measured with a port of its own): Kilo Code's LoopDetector, ported from source
    and scored the same way, halts 6 of these 11 loops inside the loop."""
    counts = _outcomes(labelled, "kilo")
    assert counts[("loop", scoring.CAUGHT)] == 6
