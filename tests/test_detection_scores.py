"""The promise docs/detection.md makes, held against every labelled set present (the shared
corpora in CI; the released and the repository's own gathered sets where their files are): the
default set halts at most one session in two hundred a person labelled normal (one of 490 where
every set is present: a mini-swe-agent run whose replies the harness refused eight times in nine,
then recovered), and halts most labelled loops inside the loop. The labels
are a person's judgement, read from each set's labels.csv; nothing here is computed by the code
under test but the verdicts."""

from __future__ import annotations

import pytest
from loopledger.detectors.policy import DEFAULT_SPECS

from bench.detection_scores import default_folders, pooled, score

pytestmark = pytest.mark.corpus


@pytest.fixture(scope="module")
def sessions():
    found = pooled(default_folders())
    if not found:
        pytest.skip("no labelled set with its transcripts here (../shared/corpus* or corpus*/)")
    return found


def test_the_default_set_halts_almost_no_session_labelled_normal(sessions):
    row = score(sessions, [list(DEFAULT_SPECS)])[0]
    halted = [d for d in row["detail"] if d.startswith("false_halt")]
    assert row["false"] <= row["normal"] // 200, halted


def test_the_default_set_halts_most_loops_inside_the_loop(sessions):
    row = score(sessions, [list(DEFAULT_SPECS)])[0]
    if row["loops"] < 10:
        pytest.skip(f"only {row['loops']} labelled loops here: too few to hold a rate to")
    assert row["caught"] >= 0.85 * row["loops"], row["detail"]
