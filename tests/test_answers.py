"""What an answer says (loopledger.detectors.answers): failed or not, still pending, transient, or
a search that found nothing — each reading on the words real tools print."""

from __future__ import annotations

import pytest
from loopledger.detectors.answers import (
    DEFAULT_VOLATILE_NAMES,
    VOLATILE_PATTERNS,
    FailureReader,
    Normalizer,
    compile_patterns,
    found_nothing,
    is_failure,
    is_pending,
    is_transient,
    resolve,
)
from loopledger.detectors.errors import ConfigError

PYTEST_TAIL = ("...\nE       assert 2 == 3\n\ntests/test_calc.py:4: AssertionError\n"
               "=========================== short test summary info ============================\n"
               "FAILED tests/test_calc.py::test_add - assert 2 == 3\n1 failed, 3 passed in 0.05s")


@pytest.mark.parametrize("text", [
    "2 failed: KeyError 'event'",  # a run_tests tool's one-line summary
    "collected 4 items\n\n" + "x" * 400 + PYTEST_TAIL,  # pytest: the verdict is at the end
    "FAILED tests/test_a.py::test_x - AssertionError",
    "ERROR collecting tests/test_b.py\nImportError: No module named 'b'",
    "running 3 tests\ntest a ... ok\n" + "." * 400 + "\ntest result: FAILED. 2 passed; 1 failed; 0 ignored",
    "=== RUN   TestParse\n--- FAIL: TestParse (0.00s)\nFAIL\n",
    "x\n" * 200 + "FAIL\tgithub.com/acme/app/parse\t0.012s",
    "  3 passing (12ms)\n  2 failing\n",
    "Exit code 1\n...",
])
def test_a_test_runner_that_reports_failures_is_a_failure_at_either_end(text):
    assert is_failure(text)


@pytest.mark.parametrize("text", [
    "collected 4 items\n\n....\n4 passed in 0.05s",
    "0 failed, 12 passed",
    "test result: ok. 3 passed; 0 failed",
    "x" * 400 + "\nall checks passed",
    "x" * 400 + "\nthe build said: FAILED earlier but this line only quotes it",  # FAILED must open a line
])
def test_a_passing_run_is_not_a_failure(text):
    assert not is_failure(text)


def test_only_the_test_summary_is_read_at_the_end():
    # "Error: …" at the end of a long output is a log line, not the answer's verdict
    assert not is_failure("x" * 400 + "\nError: something logged on the way")


def test_the_flag_is_a_failure_whatever_the_words():
    assert is_failure("all good", True)


def test_a_reader_of_chosen_patterns_reads_only_those():
    only_prefix = FailureReader(["error_prefix"])
    assert only_prefix("Error: x") and not only_prefix("2 failed: y")
    custom = FailureReader(["re:\\ADENIED\\b"])
    assert custom("DENIED by policy") and not custom("Error: x")
    with pytest.raises(ConfigError) as e:
        FailureReader(["warning"])
    assert e.value.field == "errors"


@pytest.mark.parametrize(("text", "program", "nothing"), [
    ("No matches found", None, True),  # Claude Code's Grep, SWE-agent's search tools
    ("No files found", None, True),  # Claude Code's Glob
    ('No matches found for "EnumValues" in /repo', None, True),
    ("Exit code 1", "grep", True),  # grep -r with no hit: exit status 1, nothing else
    ("<returncode>1</returncode>\n<output>\n</output>", "grep", True),  # mini-swe-agent
    ("Exit code 1", "rg", True),
    ("Exit code 1", "pytest", False),  # exit 1 of anything else is a failure
    ("Exit code 2\ngrep: src: No such file or directory", "grep", False),  # grep's own error
    ("Exit code 1\nbuild.log:3: error", "grep", False),  # output besides the status
])
def test_a_search_that_found_nothing_is_an_answer(text, program, nothing):
    assert found_nothing(text, program) is nothing


@pytest.mark.parametrize(("text", "pending"), [
    ('{"conclusion":"","status":"in_progress"}', True),  # gh run view --json
    ('{"status": "queued"}', True),
    ("localhost:5432 - no response", True),  # pg_isready
    ("/var/run/postgresql:5432 - rejecting connections", True),
    ('Waiting for deployment "api" rollout to finish: 1 of 3 updated replicas are available...', True),
    ("NAME        READY   STATUS              RESTARTS   AGE\napi-7d9f   0/1     ContainerCreating   0   5s", True),
    ("<status>running</status>\n<stdout>\n...", True),  # a background shell's output, still running
    ('{"conclusion":"success","status":"completed"}', False),
    ("running 5 tests\ntest a ... ok", False),  # a test runner's banner is not a status
    ("deployment \"api\" successfully rolled out", False),
])
def test_an_answer_that_says_it_is_not_done_yet_is_pending(text, pending):
    assert is_pending(text) is pending


@pytest.mark.parametrize(("text", "transient"), [
    ("Error: 503 Service Unavailable", True),
    ("HTTP 429 Too Many Requests", True),
    ("Error: rate limit exceeded, try again later", True),
    ("curl: (7) Failed to connect to localhost port 8080: Connection refused", True),
    ("Error: order #W0012 not found", False),
])
def test_a_failure_that_passes_by_itself_is_transient(text, transient):
    assert is_transient(text) is transient


def test_claude_codes_rerun_handle_is_volatile():
    # each shell call's output ends with a new handle: the same empty answer seven times over
    normalize = Normalizer(compile_patterns("volatile", resolve("volatile", DEFAULT_VOLATILE_NAMES, VOLATILE_PATTERNS)))
    assert normalize("[rerun: b25]") == normalize("[rerun: b31]")
    assert normalize("exit: 0\n[rerun: b31]") != normalize("exit: 1\n[rerun: b31]")
