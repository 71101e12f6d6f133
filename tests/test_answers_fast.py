"""The answer readings' shortcuts (answers.FailureReader matching its opening patterns at position
0 only, and a substring test of needed words before a search) read every text as one plain
case-insensitive search of the same patterns does. The oracle here is that plain search, written
from the pattern tables, not from the code under test."""

from __future__ import annotations

import re

from hypothesis import given, settings
from hypothesis import strategies as st
from loopledger.detectors import answers as A

FLAGS = re.IGNORECASE | re.MULTILINE
HEAD_ALL = re.compile("|".join(f"(?:{A.ERROR_PATTERNS[n]})" for n in A.DEFAULT_ERROR_NAMES), FLAGS)
TAIL_ONLY = re.compile(A.ERROR_PATTERNS["test_summary"], FLAGS)


def plain_failure(text: str) -> bool:
    return bool(HEAD_ALL.search(text[:A.HEAD]) or (len(text) > A.HEAD and TAIL_ONLY.search(text[-A.TAIL:])))


# Texts made of what the patterns look for (and near misses), odd cases, the four characters
# that fold to ASCII letters, and anything else.
WORDS = ["Error:", "error :", "ERRORS:", "Exit code 1", "exit status: 0", "<returncode>2</returncode>",
         "Traceback (most recent call last):", "bash: x: command not found", "No such file or directory",
         "Wrong flag!", "invalid", "2 failed, 3 passed", "FAILED tests/x.py::t", "ERROR collecting",
         "test result: FAILED", "--- FAIL: T", "FAIL\tpkg", "fa\u0131led", "\u017ftatus: running", "\u212aill",
         "status: in_progress", "queued", "not yet ready", "no response", "still building", "waiting for",
         "503", "429 Too Many Requests", "rate-limit", "connection refused", "service unavailable",
         "try again later", "\u0130N PROGRESS", "\n", " ", "  ", "ok", "→", "é"]
texts = st.lists(st.one_of(st.sampled_from(WORDS), st.text(max_size=30)), max_size=40).map("".join)


@settings(max_examples=600, deadline=None)
@given(texts)
def test_the_failure_reading_is_the_plain_search(text):
    assert A.FailureReader()(text) is plain_failure(text)
    assert A.is_failure(text) is plain_failure(text)


@settings(max_examples=600, deadline=None)
@given(texts)
def test_pending_and_transient_are_the_plain_searches(text):
    assert A.is_pending(text) is (A.PENDING.search(text[:A.STATUS_HEAD]) is not None)
    assert A.is_transient(text) is (A.TRANSIENT.search(text[:A.HEAD]) is not None)


def test_a_pattern_of_ones_own_is_searched_anywhere_in_the_head():
    reader = A.FailureReader(("error_prefix", "re:build broke"))
    assert reader("step 3 of 4: the build broke here")
    assert not reader("step 3 of 4: the build went fine")
    assert reader("Error: x")


def test_the_shortcuts_skip_the_search_and_the_folding_characters_do_not():
    assert not A.FailureReader()("all good here, 12 passed")
    assert A.FailureReader()("2 fa\u0131led")  # dotless i matches i case-insensitively
    assert A.is_pending("\u017ftatus: queued")  # long s matches s
