"""Everyday work the default set must leave alone, beside the loops it must still stop.

Each test is a session written call by call as an agent makes it (a Claude Code-like tool set,
with the transcript's clock), then replayed through the default set exactly as ingest, the hook
and `guard` judge it (loopledger.replay). What is expected comes from the shape of the work, not
from the detector: a test run that fails differently after each edit is work, a poll of a build
two minutes in is waiting, a sweep of different searches finding nothing is exploration; the
same failing command three times, a poll unchanged for longer than a build takes, ids guessed
one after another and a format error repeated are loops.
"""

from __future__ import annotations

import datetime as dt
import itertools
import re

import pytest
from loopledger import vocab
from loopledger.analysis.scoring import call_position
from loopledger.detectors.policy import DEFAULT_SPECS
from loopledger.events import Answer, Answers, Batch, Call, UserTurn
from loopledger.replay import replay_many

START = dt.datetime(2026, 11, 30, 9, 0, tzinfo=dt.UTC)


class Session:
    """A session written call by call: each call with its answer, `after` seconds after the last."""

    def __init__(self) -> None:
        self.events: list = []
        self.clock = START
        self._ids = itertools.count(1)

    def call(self, tool: str, answer: str, *, error: bool = False, after: float = 8.0, **args) -> Session:
        self.clock += dt.timedelta(seconds=after)
        cid = f"toolu_{next(self._ids):03d}"
        self.events.append(Batch((Call(cid, tool, args),), ts=self.clock.isoformat()))
        self.events.append(Answers((Answer(cid, answer, error),)))
        return self

    def bash(self, command: str, answer: str, *, error: bool = False, after: float = 8.0) -> Session:
        return self.call("Bash", answer, error=error, after=after, command=command)

    def edit(self, path: str, old: str, new: str, after: float = 8.0) -> Session:
        return self.call("Edit", f"The file {path} has been updated successfully.", after=after,
                         file_path=path, old_string=old, new_string=new)

    def user(self, text: str) -> Session:
        self.events.append(UserTurn(text))
        return self


def judged(s: Session) -> tuple[int | None, list[int]]:
    """The default set's first halt (call number, None: never) and the calls it warned before it."""
    halt, warned = None, []
    for steps in replay_many(s.events, list(DEFAULT_SPECS)):
        for step in steps:
            for c in step.checks:
                n = call_position(s.events, step.seq, c.idx)
                if c.verdict == vocab.HALT and halt is None:
                    halt = n
                elif c.verdict == vocab.WARN and halt is None and n not in warned:
                    warned.append(n)
    return halt, warned


def reasons(s: Session) -> list[str]:
    return [c.reason for steps in replay_many(s.events, list(DEFAULT_SPECS)) for step in steps
            for c in step.checks if c.verdict in (vocab.WARN, vocab.HALT)]


def pytest_failure(got: int) -> str:
    return ("Exit code 1\nF                                                      [100%]\n"
            "=================================== FAILURES ===================================\n"
            "___________________________________ test_add ___________________________________\n\n"
            "    def test_add():\n>       assert add(1, 2) == 3\n"
            f"E       assert {got} == 3\nE        +  where {got} = add(1, 2)\n\n"
            "tests/test_calc.py:4: AssertionError\n=========================== short test summary info "
            f"============================\nFAILED tests/test_calc.py::test_add - assert {got} == 3\n"
            "1 failed in 0.03s")


# ── everyday work: never halted, (almost) never warned ─────────────────────────────────────────


def test_a_tdd_cycle_whose_failure_changes_after_each_edit_is_never_halted_nor_warned():
    s = Session()
    for got, body in ((1, "return a"), (2, "return b"), (4, "return a * b * 2"), (5, "return a + b + 2")):
        s.edit("/repo/calc.py", "return 0", body)
        s.bash("pytest -q tests/test_calc.py", pytest_failure(got), error=True)
    s.edit("/repo/calc.py", "return a + b + 2", "return a + b")
    s.bash("pytest -q tests/test_calc.py", ".                                                      [100%]\n"
           "1 passed in 0.02s")
    assert judged(s) == (None, [])


def test_a_test_re_run_after_each_edit_with_a_moving_tally_is_never_halted():
    s = Session()
    for failing in (10, 9, 7, 4, 1):
        s.edit("/repo/src/parser.py", f"# todo {failing}", f"# done {failing}")
        s.bash("pytest -q", f"Exit code 1\n{'F' * failing}{'.' * (40 - failing)}\n"
               f"{failing} failed, {40 - failing} passed in 1.2s", error=True)
    s.bash("pytest -q", "40 passed in 1.1s")
    assert judged(s) == (None, [])


def test_a_ci_run_polled_while_in_progress_is_waiting_not_looping():
    s = Session()
    s.bash("git push origin fix-parser", "To github.com:acme/app.git\n   1a2b3c4..5d6e7f8  fix-parser -> fix-parser")
    for _ in range(9):  # four and a half minutes of a build
        s.bash("sleep 30 && gh run view 9876543 --json status,conclusion",
               '{"conclusion":"","status":"in_progress"}', after=32)
    s.bash("sleep 30 && gh run view 9876543 --json status,conclusion",
           '{"conclusion":"success","status":"completed"}', after=32)
    assert judged(s) == (None, [])


def test_a_poll_that_waits_longer_each_time_is_one_wait():
    s = Session()
    for wait in (10, 20, 40, 60, 60, 60):
        s.bash(f"sleep {wait} && kubectl rollout status deploy/api --timeout=1s",
               'Waiting for deployment "api" rollout to finish: 1 of 3 updated replicas are available...',
               error=True, after=wait + 2)
    s.bash("sleep 60 && kubectl rollout status deploy/api --timeout=1s",
           'deployment "api" successfully rolled out', after=62)
    assert judged(s) == (None, [])


def test_a_readiness_wait_on_a_database_is_allowed():
    s = Session()
    s.bash("docker compose up -d db", "Container app-db-1  Started")
    for _ in range(6):
        s.bash("sleep 5; pg_isready -h localhost -p 5432", "Exit code 2\nlocalhost:5432 - no response",
               error=True, after=6)
    s.bash("sleep 5; pg_isready -h localhost -p 5432", "localhost:5432 - accepting connections", after=6)
    assert judged(s)[0] is None


@pytest.mark.parametrize("command, answers", [
    ("date +%s%N", [str(1764579600123456789 + i * 1_000_003_117) for i in range(20)]),
    ("ls out/", ["\n".join(f"frame_{j:03d}.png" for j in range(i + 1)) for i in range(20)]),
])
def test_output_that_moves_on_every_call_is_never_halted_and_never_warned(command, answers):
    s = Session()
    for a in answers:
        s.bash(command, a, after=3)
    assert judged(s) == (None, [])


def test_a_glob_sweep_of_different_patterns_finding_nothing_is_exploration():
    s = Session()
    for pattern in ("**/*.proto", "**/*.thrift", "**/schema*.json", "**/*.avsc", "**/*.graphql",
                    "**/openapi*.yaml", "**/*.capnp", "**/*.fbs"):
        s.call("Glob", "No files found", pattern=pattern)
    assert judged(s) == (None, [])


def test_a_grep_sweep_of_different_words_finding_nothing_is_exploration():
    s = Session()
    for word in ("retry_budget", "RetryBudget", "max_retries", "backoff_ms", "retryPolicy", "with_retries"):
        s.call("Grep", "No matches found", pattern=word, path="src", output_mode="content")
    for word in ("retry_budget", "RetryBudget", "max_retries", "backoff_ms", "retryPolicy", "with_retries"):
        s.bash(f"grep -rn {word} lib/ tests/", "Exit code 1", error=True)
    assert judged(s) == (None, [])


def test_a_rebuild_after_each_real_edit_is_never_halted():
    s = Session()
    for i in range(6):  # each edit a new change; the build passes with the same words each time
        s.edit("/repo/src/lib.rs", f"fn step{i}() {{}}", f"fn step{i}() {{ tick({i}); }}")
        s.bash("cargo build", "   Compiling app v0.1.0 (/repo)\n    Finished `dev` profile [unoptimized] in 1.92s")
    for line in (12, 30, 47):  # and a build failing differently after each fix
        s.edit("/repo/src/lib.rs", f"let x{line} = ;", f"let x{line} = 0;")
        s.bash("cargo build", f"Exit code 101\nerror[E0308]: mismatched types\n --> src/lib.rs:{line}:9", error=True)
    assert judged(s)[0] is None


def test_a_user_asking_for_the_same_command_again_is_not_a_loop():
    s = Session()
    for _ in range(4):
        s.user("run the smoke test again please")
        s.bash("make smoke", "smoke: 12 checks, 12 ok")
    assert judged(s)[0] is None


# ── loops: still stopped ───────────────────────────────────────────────────────────────────────


def test_the_same_failing_command_three_times_is_halted_before_the_third_runs():
    s = Session()
    failure = "Exit code 1\nnpm ERR! Missing script: \"tset\"\n\nnpm ERR! A complete log of this run can be found in: /tmp/x.log"
    s.bash("npm run tset", failure, error=True)
    s.call("Read", '{\n  "scripts": {"test": "jest"}\n}', file_path="/repo/package.json")
    s.bash("npm run tset", failure, error=True)
    s.bash("npm run tset", failure, error=True)
    halt, _ = judged(s)
    assert halt == 4  # the third `npm run tset` (call #4) is stopped before it runs


def test_a_poll_unchanged_for_longer_than_a_build_takes_is_halted():
    s = Session()
    for _ in range(40):  # a job stuck in the queue, polled every minute for 40 minutes
        s.bash("sleep 60 && gh run view 1234 --json status", '{"status":"queued"}', after=62)
    halt, warned = judged(s)
    assert halt is not None
    waited = (halt - 1) * 62  # seconds between the first poll and the halted one
    assert 10 * 60 <= waited <= 20 * 60  # stopped after a long wait, not two minutes in
    assert warned and warned[-1] == halt - 1  # and warned once, just before


def test_an_identical_call_answered_the_same_back_to_back_is_halted_at_the_third():
    s = Session()
    for _ in range(5):
        s.bash("python reproduce_bug.py", "")
    assert judged(s)[0] == 3


def test_ids_guessed_one_after_another_each_not_found_are_halted():
    s = Session()
    for n in range(1, 9):
        s.call("get_order_details", f"Error: order #W{n:07d} not found", error=True, order_id=f"#W{n:07d}")
    halt, _ = judged(s)
    assert halt is not None and halt <= 5


def test_a_format_error_repeated_is_halted():
    s = Session()
    s.bash("ls", "README.md\nsrc")
    for actions in (2, 3, 2, 4, 3, 2):
        s.call(vocab.HARNESS_ERROR, "Please always provide EXACTLY ONE action in triple backticks, "
               f"found {actions} actions.", error=True, reason="format_error", actions=actions)
    halt, _ = judged(s)
    assert halt is not None and halt <= 1 + 5


FORMAT_ERROR = "Please always provide EXACTLY ONE action in triple backticks, found {} actions."


def _refused(s: Session, actions: int) -> None:
    s.call(vocab.HARNESS_ERROR, FORMAT_ERROR.format(actions), error=True, reason="format_error", actions=actions)


def test_replies_refused_again_and_again_with_a_command_slipping_through_are_halted():
    # Four replies refused, two commands that ran, then refused again: nearly every reply is refused.
    s = Session()
    s.bash("ls", "README.md\nsrc")
    for actions in (5, 3, 6, 2):
        _refused(s, actions)
    s.bash("printf 'print(1)' > repro.py", "")
    s.bash("python3 repro.py", "1")
    for actions in (2, 4, 3, 2):
        _refused(s, actions)
    halt, _ = judged(s)
    assert halt is not None and 8 <= halt <= 9  # the 5th refusal among 7 replies (the 4th in a row is warned)


def test_a_format_slip_now_and_then_between_real_work_is_not_halted():
    # Every other reply refused once, the next one a new command that runs: the agent recovers each time.
    s = Session()
    for n in range(8):
        _refused(s, 2 + n % 3)
        s.bash(f"sed -n '{100 + 10 * n},{110 + 10 * n}p' app/models.py", f"class Model{n}:\n    pass")
    halt, warned = judged(s)
    assert halt is None and warned == []


def test_the_same_write_made_again_and_again_is_halted_whatever_it_answers():
    s = Session()
    for n in range(1, 8):  # the same insertion, growing the file each time
        s.call("str_replace_editor", f"The file /repo/Repro.java has been edited ({23 + 15 * n} lines).",
               command="insert", path="/repo/Repro.java", insert_line=1, new_str="class Repro {}")
    halt, _ = judged(s)
    assert halt is not None and halt <= 4


# ── the words the model reads ──────────────────────────────────────────────────────────────────


def test_a_halt_says_what_repeated_and_how_often_in_plain_words():
    s = Session()
    for _ in range(3):
        s.bash("npm run tset", "Exit code 1\nnpm ERR! Missing script: \"tset\"", error=True)
    (said,) = reasons(s)
    assert "npm run tset" in said and "twice" in said
    assert not re.search(r"\[\w+\]|_at\b|_limit\b", said), said  # no parameter names


def test_a_wait_says_how_long_it_waited():
    s = Session()
    for _ in range(20):
        s.bash("sleep 60 && gh run view 1234 --json status", '{"status":"queued"}', after=62)
    said = reasons(s)[-1]
    assert "gh run view 1234" in said and re.search(r"waited 1[0-9] min", said), said


# ── issue 35: the loops of coding agents (each fails on the code before it) ──────────────────


def test_a_subagent_polling_a_background_job_every_3_seconds_is_halted_long_before_15_minutes():
    s = Session().bash("python scripts/extract.py book.epub", "Command running in background with ID: b2f8b9")
    for k in range(40):
        s.call("BashOutput", f"<status>running</status>\n\n<timestamp>2025-12-01T04:48:{k:02d}.908Z</timestamp>",
               after=3, bash_id="b2f8b9")
    halt, warned = judged(s)
    assert halt == 7  # the 6th poll of an unchanged answer, 18 s after the first
    assert warned and warned[0] == 5  # the model is told once three polls answered the same


def test_a_background_build_polled_while_its_output_moves_is_never_halted():
    s = Session().bash("npm run build", "Command running in background with ID: 7c41e2")
    for k in range(20):
        s.call("BashOutput", f"<status>running</status>\n<stdout>built {k * 5} of 100 modules</stdout>",
               after=3, bash_id="7c41e2")
    assert judged(s) == (None, [])


def test_a_teardown_sent_again_and_again_in_other_dress_is_halted():
    # `docker compose down -v` seven times, each time decorated differently (a cd, a tail, an
    # echoed exit status), each answered with nothing but Claude Code's rerun handle
    s = Session()
    for k, cmd in enumerate(["docker compose down -v 2>&1 | tail -5",
                             "cd /home/me/repo && docker compose down -v 2>&1 | tail -5",
                             "docker compose down -v 2>&1 | tail -5",
                             "docker compose down -v 2>&1 | tail -10",
                             "docker compose down -v",
                             'docker compose down -v; echo "exit: $?"']):
        s.bash(cmd, f"[rerun: b{25 + k}]")
    halt, _ = judged(s)
    assert halt is not None and halt <= 5


def test_a_teardown_then_a_rebuild_then_a_teardown_is_work():
    s = (Session().bash("docker compose down -v 2>&1 | tail -5", "[rerun: b1]")
         .edit("Dockerfile", "RUN npm install", "RUN npm ci")
         .bash("docker compose up --build -d", "Container api Started\n[rerun: b2]")
         .bash("docker compose down -v", "[rerun: b3]")
         .edit("Dockerfile", "RUN npm ci", "RUN npm ci --omit=dev")
         .bash("docker compose up --build -d", "Container api Started\n[rerun: b4]")
         .bash("cd /repo && docker compose down -v", "[rerun: b5]"))
    assert judged(s) == (None, [])
