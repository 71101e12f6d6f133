"""bench/mutants.py's readings: a person's reading of a surviving mutant holds for the change it
was written for, not for whatever mutant later carries the same name."""

from __future__ import annotations

import pytest

from bench import mutants

DIFF = """# loopledger.detectors.progress.xǁProgressDetectorǁ__init____mutmut_57: survived
--- src/loopledger/detectors/progress.py
+++ src/loopledger/detectors/progress.py
@@ -1,3 +1,3 @@
 def __init__(self):
-    self._step = 0  # agent steps
+    self._step = 1  # agent steps
"""
OTHER = DIFF.replace("self._step = 0", "self._moved = -1").replace("self._step = 1", "self._moved = -2")
NAME = "loopledger.detectors.progress.xǁProgressDetectorǁ__init____mutmut_57"


def test_a_fingerprint_is_the_change_not_the_headers_or_the_indentation():
    fp = mutants.fingerprint(DIFF)
    assert len(fp) == 8 and int(fp, 16) >= 0
    assert mutants.fingerprint(DIFF.replace("progress.py", "other.py")) == fp  # file headers left out
    assert mutants.fingerprint(DIFF.replace("    self", "        self")) == fp
    assert mutants.fingerprint(OTHER) != fp


def test_a_reading_is_used_for_the_change_it_was_written_for():
    read = {NAME: (mutants.fingerprint(DIFF), "steps are only compared with each other")}
    assert mutants.why(NAME, DIFF, read) == "steps are only compared with each other"


def test_a_reading_of_another_change_under_the_same_name_is_stale_and_not_used():
    read = {NAME: (mutants.fingerprint(OTHER), "_moved -2 or -1: both below every position")}
    got = mutants.why(NAME, DIFF, read)
    assert "_moved" not in got
    # the shape rules still apply (this one is a step-number change), with the stale reading named
    assert got.startswith("agent step numbers are only compared for equality")
    assert f"stale: its reading @{mutants.fingerprint(OTHER)} was of another change" in got


def test_readings_file_lines_need_a_fingerprint_and_a_bad_one_names_its_line(tmp_path, monkeypatch):
    monkeypatch.setattr(mutants, "OUT", tmp_path)
    (tmp_path / "detectors-x.why").write_text(f"# header\n{NAME}@0123abcd  a reading\n\n{NAME}  no fingerprint\n",
                                              encoding="utf-8")
    with pytest.raises(ValueError, match=r"detectors-x\.why:4: a reading starts with mutant_name@fingerprint"):
        mutants.readings("detectors/x.py")
    (tmp_path / "detectors-x.why").write_text(f"# header\n{NAME}@0123abcd  a reading\n", encoding="utf-8")
    assert mutants.readings("detectors/x.py") == {NAME: ("0123abcd", "a reading")}


@pytest.mark.parametrize("module", sorted(mutants.MODULES))
def test_every_committed_reading_carries_its_fingerprint(module):
    assert all(len(fp) == 8 for fp, _ in mutants.readings(module).values())
