"""The progress detector: one test (at least) per rule of docs/architecture.md, "progress"."""

from __future__ import annotations

import copy
import json
from pathlib import Path

import pytest
from loopledger.detectors import ConfigError, PolicySpec, ProgressDetector, make_policy
from loopledger.detectors.answers import is_pending
from loopledger.detectors.progress import ProgressVerdict
from loopledger.detectors.workspace import asked_wait
from loopledger.events import Answer, Answers, Batch, Call, UserTurn
from loopledger.replay import Replayer, replay

FAIL = "Error: flight HAT030 not available on date 2024-05-13"


def run(d: ProgressDetector, calls) -> list[tuple[str, int, str]]:
    """Check each (name, args, answer[, is_error]) in turn, record its answer; the verdicts."""
    out = []
    for name, args, answer, *err in calls:
        v = d.check(name, args)
        out.append((v.action, v.count, v.rule))
        if answer is not None:
            d.record_answer(answer, bool(err and err[0]))
    return out


def actions(d: ProgressDetector, calls) -> list[str]:
    return [a for a, _, _ in run(d, calls)]


# ── rule 1: stale repeat ──────────────────────────────────────────────────────────────────────


def test_repeats_count_across_other_calls_inside_the_window():
    # Not only back to back: the django fix.patch written 4x with a sed between.
    calls = [("bash", {"c": "write"}, "ok"), ("bash", {"c": "write"}, "ok"), ("bash", {"c": "sed 1"}, "x"),
             ("bash", {"c": "write"}, "ok"), ("bash", {"c": "write"}, "ok")]
    assert actions(ProgressDetector(), calls)[-1] == "halt"


# ── rule 2: stale retry ───────────────────────────────────────────────────────────────────────


def _update(*flights: str, payment: str = "gift_card_1") -> dict:
    return {"flights": [{"flight_number": f, "date": "2024-05-13"} for f in flights],
            "payment_id": payment, "reservation_id": "XEWRD9"}


def test_trying_something_new_each_time_the_user_asks_is_not_a_loop():
    # tau-bench task 23 (normal): a different payment method each time, each asked for by the
    # user (a user turn between), the same error.
    err = "Error: gift card balance is not enough"
    d, got = ProgressDetector(), []
    for i in range(6):
        got += actions(d, [("update", _update("HAT072", payment=f"gift_card_{i}"), err)])
        d.user_said(f"That one is empty too. Please use gift_card_{i + 1} instead.")
        d.user_turn()
    assert got == ["allow"] * 6


def test_the_person_s_words_reach_the_detector_through_a_replay():
    # The same day as a transcript: what the person says in each turn is what makes the next card
    # theirs, so a replay that lost their words would halt it as a run of one failure.
    events: list = []
    for i in range(6):
        cid = f"c{i}"
        events.append(Batch((Call(cid, "update", _update("HAT072", payment=f"gift_card_{i}")),), "", None, None))
        events.append(Answers((Answer(cid, "Error: gift card balance is not enough", True),), None))
        events.append(UserTurn(f"That one is empty too. Please use gift_card_{i + 1} instead.", None, None))
    verdicts = [c.verdict for step in replay(events, "progress") for c in step.checks]
    assert verdicts == ["allow"] * 6
    silent = [e if not isinstance(e, UserTurn) else UserTurn("", None, None) for e in events]
    assert "halt" in [c.verdict for step in replay(silent, "progress") for c in step.checks]


def _guesses(d: ProgressDetector, first: int, n: int) -> list[str]:
    return actions(d, [("get_order_details", {"order_id": f"#W66000{first + i:02d}"}, "Error: order not found")
                       for i in range(n)])


def test_ids_guessed_across_user_turns_halt_one_step_later():
    # tau-bench retail task 43 (corpus_ho3, a loop): order ids guessed one after another, three
    # between each simulated-user turn that gives none of them: still one tool failing the same
    # way, halted one step later than with nobody speaking between (same_failure_at + 1).
    d, got = ProgressDetector(), []
    for first in (0, 3, 6):
        got += _guesses(d, first, 3)
        d.user_said("I don't know the order id, it was placed around October 11th.")
        d.user_turn()
    assert got.index("halt") == 5 and got[4] == "warn"
    assert _guesses(ProgressDetector(), 0, 9).index("halt") == 4  # without the turns: same_failure_at


def test_a_value_the_person_just_gave_starts_the_failures_anew():
    # four guesses, then the person's own id: their try, counted from their turn; the agent's
    # guesses after it count on from that try (halted at its 5th step, same_failure_at)
    d = ProgressDetector()
    assert _guesses(d, 0, 4) == ["allow", "allow", "allow", "warn"]
    d.user_said("Sorry, it is #W6600042.")
    d.user_turn()
    assert actions(d, [("get_order_details", {"order_id": "#W6600042"}, "Error: order not found")]) == ["allow"]
    assert _guesses(d, 50, 4) == ["allow", "allow", "warn", "halt"]


def test_other_tools_failing_the_same_way_are_not_retries_of_this_one():
    calls = [("a", {"x": "HAT030"}, FAIL), ("b", {"x": "HAT030"}, FAIL), ("c", {"x": "HAT030"}, FAIL)]
    assert actions(ProgressDetector(), calls) == ["allow"] * 3


# ── rule 3: what a failure is ─────────────────────────────────────────────────────────────────


@pytest.mark.parametrize(("text", "is_error", "failed"), [
    ("anything", True, True),  # the reader's flag (Claude Code, OpenHands, Codex)
    ("Error: flight HAT030 not available", False, True),  # tau-bench
    ("ERROR:\nNo replacement was performed", False, True),  # OpenHands str_replace_editor
    ("  error : disk full", False, True),
    ("<returncode>1</returncode>\n<output>\nTraceback", False, True),  # mini-swe-agent
    ("<returncode>-9</returncode>", False, True),
    ("<returncode>0</returncode>\n<output>\nerror: x</output>", False, False),
    ("Errors found: 0", False, False),  # "error" must be the word, followed by a colon
    ("all good, no error: none", False, False),  # only the opening counts
    ("x" * 300 + "Error: late", False, False),
    ("Exit code 1\n(eval):1: permission denied:", False, True),  # Claude Code Bash, flag lost
    ("Exit code: 2\nWall time: 0.4 seconds\nOutput:\n", False, True),  # Codex plain-text shell
    ("exit status 127", False, True),
    ("Exit code 0\nok", False, False),
    ("the exit code 1 means", False, False),  # only at the start
    ('Traceback (most recent call last):\n  File "reproduce.py", line 3', False, True),
    ('Result:\nTraceback (most recent call last):', False, False),  # a traceback the output quotes
    ("bash: ponyc: command not found", False, True),
    ("(eval):1: command not found: tree", False, True),  # zsh
    ("README.md\ncommand not found handler added", False, False),  # the first line only
    ("Command failed: npm test", False, False),  # failed_prefix is not a default
])
def test_failure_is_the_flag_or_an_error_pattern_at_the_start(text, is_error, failed):
    assert ProgressDetector().is_failure(text, is_error) is failed


@pytest.mark.parametrize(("text", "failed"), [
    ("Command failed: npm test", True),  # Node's execSync
    ("Pre-commit validation failed:\n\n[DIALYZER]", True),
    ("1 failed: fixture 'frozen_clock' not found", True),
    ("app.log:12: upload failed: timeout", False),  # a grep hit, not a verdict
    ("3 failed, 2 passed in 0.4s", False),
])
def test_failed_prefix_is_offered_by_name(text, failed):
    spec = PolicySpec.parse("progress:errors=failed_prefix")
    assert make_policy(spec).detector.is_failure(text) is failed


def test_failure_patterns_are_configurable():
    d = ProgressDetector(errors=[r"re:\AWrong flag"])
    assert d.is_failure("Wrong flag!") and not d.is_failure("Error: x")
    spec = PolicySpec.parse("progress:errors=re:\\AWrong flag")
    assert make_policy(spec).detector.is_failure("Wrong flag!")


def test_an_answer_object_brings_its_error_flag():
    d = ProgressDetector()
    for _ in range(2):
        d.check("Bash", {"command": "git commit"})
        d.record_answer(Answer("1", "hook failed", is_error=True))
    assert d.check("Bash", {"command": "git commit"}).action == "halt"


# ── volatile parts ────────────────────────────────────────────────────────────────────────────


@pytest.mark.parametrize(("name", "a", "b", "different"), [
    ("timestamp", "at 2024-05-13T15:29:59.374Z ok", "at 2024-05-14T01:02:03Z ok", "at 2024-05-14T01:02:03Z KO"),
    ("timestamp", "2024-05-13 15:29+02:00 ok", "2025-01-01 00:00:00 ok", "2025-01-01 00:00:00 no"),
    ("clock", "[15:29:59] started", "[09:01:02.5] started", "[09:01:02.5] stopped"),
    ("duration", "1 failed in 0.12s", "1 failed in 3.40s", "2 failed in 3.40s"),
    ("duration", "done in 0m12.09s", "done in 1h2m3s", "done in 1h2m3s!"),
    ("duration", "took 250 ms", "took 3 seconds", "took 3 seconds twice"),
    ("uuid", "id 3f9c1e62-58a4-4d0b-9b7e-2a6d41c0e8f3", "id 019C5242-3FCB-7495-B540-31AD8B29F740", "ID x"),
    ("hex_id", "[main 1a2b3c4d5e6f7a8b] done", "[main 9f8e7d6c5b4a3f2e] done", "[dev 9f8e7d6c5b4a3f2e] done"),
    ("hex_id", "<object at 0x7f3a2b1c4d50>", "<object at 0x7f3a2b1c9999>", "<thing at 0x7f3a2b1c9999>"),
    ("temp_path", "wrote /tmp/pytest-of-ana/pytest-3/out.txt", "wrote /tmp/tmpx81_q/out.txt", "read /tmp/a"),
    ("temp_path", "in /var/folders/x1/T/tmpab12/f", "in /private/var/folders/zz/T/tmpq/f", "in /home/f"),
    ("temp_path", r"C:\Users\ana\AppData\Local\Temp\tmp1\f.txt", r"C:\Users\bo\AppData\Local\Temp\t2", "C:\\x"),
])
def test_each_volatile_pattern_removes_only_what_changes_without_meaning(name, a, b, different):
    only = ProgressDetector(volatile=[name])
    assert only.digest(a) == only.digest(b)
    assert only.digest(b) != only.digest(different)
    assert ProgressDetector(volatile=[]).digest(a) != ProgressDetector(volatile=[]).digest(b)


@pytest.mark.parametrize("text", [
    "flight 12:30",  # hh:mm is data (a departure), not a clock reading
    "order 123456789012345",  # digits only: a number, not a hex id
    "commit abc1234",  # a short sha: shorter than 12
    "deadbeefcafe",  # letters only
    "sum 3 + 4",
])
def test_volatile_patterns_leave_data_alone(text):
    assert ProgressDetector().normalize(text) == text


def test_a_timestamp_in_every_answer_does_not_hide_a_loop():
    calls = [("status", {}, f"2024-05-13T15:29:{s:02d}Z build failed: missing key") for s in range(4)]
    assert actions(ProgressDetector(), calls)[-1] == "halt"
    assert "halt" not in actions(ProgressDetector(volatile=[]), calls)


# ── unknown answers, batches ──────────────────────────────────────────────────────────────────


def test_an_unknown_answer_neither_breaks_nor_joins_a_run():
    d = ProgressDetector()
    got = run(d, [("r", {}, "x"), ("r", {}, None), ("r", {}, "x"), ("r", {}, "x")])
    assert [c for _, c, _ in got] == [1, 2, 2, 3]  # the unanswered 2nd call is not counted


def test_calls_of_one_batch_are_judged_before_any_answer_exists():
    events = [Batch(tuple(Call(f"c{i}", "read", {"p": 1}) for i in range(5))),
              Answers(tuple(Answer(f"c{i}", "same") for i in range(5)))]
    checks = [c.verdict for s in replay(events, PolicySpec("progress")) for c in s.checks]
    assert checks == ["allow"] * 5


def test_a_halt_stops_the_rest_of_its_batch():
    events = []
    for i in range(3):
        events += [Batch((Call(f"a{i}", "f", {}), Call(f"b{i}", "g", {"i": i}))),
                   Answers((Answer(f"a{i}", "Error: no"), Answer(f"b{i}", "ok")))]
    steps = list(replay(events, PolicySpec("progress")))
    assert [c.verdict for c in steps[4].checks] == ["halt", "after_halt"]


# ── a read repeated with nothing but reads between ────────────────────────────────────────────


def test_a_read_repeated_around_writes_keeps_the_success_threshold():
    # pvlib 75-79: sed -n the same lines, a fix script between each (it failed silently).
    show = ("bash", {"command": "sed -n '220,260p' ./pvlib/pvsystem.py"}, "def f():\n    pass")
    calls = [show, ("bash", {"command": "cat > fix1.py << 'EOF'\n...\nEOF\npython fix1.py"}, ""),
             show, ("bash", {"command": "cp x.backup x && python fix2.py"}, ""), show]
    assert "halt" not in actions(ProgressDetector(), calls)


def test_an_api_poll_that_answers_the_same_twice_then_moves_is_never_halted():
    # A CI run polled by a read-only-looking name: the same "in_progress" twice, then it moves.
    answers = ["in_progress 2/9", "in_progress 2/9", "in_progress 5/9", "in_progress 5/9",
               "in_progress 8/9", "completed success"]
    calls = [("get_workflow_run", {"run_id": 8841}, a) for a in answers]
    assert "halt" not in actions(ProgressDetector(), calls)


# ── progress elsewhere ────────────────────────────────────────────────────────────────────────


# ── user turns ────────────────────────────────────────────────────────────────────────────────


def _turns(d: ProgressDetector, answer: str) -> list[str]:
    out = []
    for _ in range(4):
        out += actions(d, [("update", {"seg": "HAT030"}, answer)])
        d.user_turn()
    return out


@pytest.mark.parametrize("mode", ["errors", "answers"])
def test_across_turns_errors_keeps_failures_but_forgets_successes(mode):
    d = ProgressDetector(across_turns=mode)
    assert _turns(d, FAIL)[2] == "halt"  # "try again" from the user changes nothing
    assert "halt" not in _turns(ProgressDetector(across_turns=mode), '{"flights": []}')  # a re-search after user input
    assert "halt" not in _turns(ProgressDetector(across_turns="none"), FAIL)  # none: every turn starts afresh


def test_across_turns_none_forgets_everything_and_all_keeps_everything():
    assert "halt" not in _turns(ProgressDetector(across_turns="none"), FAIL)
    assert _turns(ProgressDetector(across_turns="all"), '{"flights": []}')[3] == "halt"


# ── thresholds and validation ─────────────────────────────────────────────────────────────────


# ── state, snapshots, the policy ──────────────────────────────────────────────────────────────


def test_a_deep_copy_is_an_independent_snapshot():
    d = ProgressDetector()
    run(d, [("r", {}, "same"), ("r", {}, "same")])
    snap = copy.deepcopy(d)
    d.check("r", {})
    d.record_answer("changed")
    assert snap.state()["calls"] != d.state()["calls"]
    assert snap.check("r", {}).count == 3


# A day that leans on what a copy must carry: sleeping polls timed by their sleeps, then by a
# clock that disagrees with them (each entry's `sleep` and `at`), a retry judged by the values its error names (each entry's arguments), a
# person's turn, and answers recorded after the copy was taken.
_DAY = ([("bash", {"command": "sleep 60 && gh run view 42 --json status"}, '{"status": "queued"}', False, None)
         for _ in range(6)]  # no clock: timed by their sleeps
        + ["turn"]
        + [("bash", {"command": c}, "error An unexpected error occurred: left-pad: Not found", True, 300.0 + i)
           for i, c in enumerate(["yarn add left-pad", "pnpm add left-pad"] * 2)]
        + [("bash", {"command": "sleep 60 && gh run view 42 --json status"}, '{"status": "queued"}', False,
            400.0 + 90 * i) for i in range(6)])  # a clock slower than the sleeps: the clock counts


def _play(d: ProgressDetector, script, first=None) -> list[tuple]:
    """Each step's verdict; `first`: a verdict already taken for the first step (its answer still
    to be recorded)."""
    out = []
    for k, step in enumerate(script):
        if step == "turn":
            d.user_turn()
            continue
        name, args, answer, failed, at = step
        v = first if (k == 0 and first is not None) else d.check(name, args, at=at)
        out.append((v.action, v.count, v.rule, v.reason))
        d.record_answer(answer, failed)
    return out


def test_a_copy_taken_anywhere_goes_on_exactly_as_the_original():
    whole = _play(ProgressDetector(wait_limit=300), _DAY)
    assert {a for a, *_ in whole} >= {"warn", "halt"}  # the day exercises the rules it is for
    for k in range(len(_DAY)):
        d = ProgressDetector(wait_limit=300)
        done = _play(d, _DAY[:k])
        assert done + _play(copy.deepcopy(d), _DAY[k:]) == whole, f"copied after step {k}"
        if _DAY[k] != "turn":  # copied between a check and its answer
            name, args, *_, at = _DAY[k]
            v = d.check(name, args, at=at)
            assert done + _play(copy.deepcopy(d), _DAY[k:], first=v) == whole, f"copied inside step {k}"


# ── the labelled corpus (../shared, when present) ─────────────────────────────────────────────

CORPUS = Path(__file__).resolve().parent.parent.parent / "shared" / "corpus"


def test_answers_are_judged_as_the_ledger_stores_them():
    """A recheck from the ledger sees capped answers: ingest judges the same capped text, so two
    long answers that differ only past the cap stay different (their digests differ) both ways."""
    from loopledger.ledger.store import as_stored, is_capped

    long_a, long_b = "x" * 3000 + " 12:00:01 a", "x" * 3000 + " 12:00:02 b"
    events = [Batch((Call("1", "t", {}),)), Answers((Answer("1", long_a), Answer("2", "short")))]
    stored = as_stored(events, 1024)
    answer = stored[1].answers[0]
    assert is_capped(answer.text) and answer.digest == Answer("1", long_a).digest
    assert stored[1].answers[1] is events[1].answers[1] and stored[0] is events[0]
    d = ProgressDetector()
    for text in (long_a, long_b):
        d.check("t", {})
        d.record_answer(as_stored([Answers((Answer("1", text),))], 1024)[0].answers[0])
    assert d.check("t", {}).count == 2  # the 2nd answer differs: the run restarted at it


# ── issue 18: reads that write, temp paths, and the rules added beside them ──────────────────


def test_a_temp_path_starts_a_path():
    d = ProgressDetector()
    assert d.normalize("/srv/job/tmp/step-1200") == "/srv/job/tmp/step-1200"
    assert d.normalize("saved to /tmp/pytest-3/x.json") == "saved to \x00"
    assert d.normalize("x=/var/tmp/abc") == "x=\x00"


def test_a_failure_and_a_success_are_never_the_same_answer():
    # the same text, once flagged: not a repeat of the same answer (the run restarts at it)
    d = ProgressDetector()
    got = run(d, [("t", {}, "boom"), ("t", {}, "boom", True), ("t", {}, "boom", True), ("t", {}, "boom", True)])
    assert [c for _, c, _ in got] == [1, 2, 2, 3]


def test_error_patterns_look_only_at_the_opening_of_an_answer():
    d = ProgressDetector()  # command_not_found reads the first line, within ERROR_HEAD (200)
    assert d.is_failure("x" * 150 + " command not found")
    assert not d.is_failure("x" * 250 + " command not found")


def test_run_of_one_failure_counts_agent_steps_not_calls():
    # seven reads of one batch failing "Sibling tool call errored" are one step; the retry of one
    # of them is the 2nd step, not the 8th call
    d = ProgressDetector()
    positions = [d.check("Read", {"file_path": f"f{i}.py"}).position for i in range(7)]
    for p in positions:
        d.record_answer("Error: Sibling tool call errored", True, position=p)
    v = d.check("Read", {"file_path": "f9.py"})
    assert v.action == "allow"  # run of one failure: 2 steps of 5; retry: new arguments, 1
    # the same seven failures as seven steps: the 8th is past same_failure_at
    d = ProgressDetector()
    for i in range(7):
        d.check("Read", {"file_path": f"f{i}.py"})
        d.record_answer("Error: Sibling tool call errored", True)
    v = d.check("Read", {"file_path": "f9.py"})
    assert (v.action, v.count, v.rule) == ("halt", 8, "failures")


# ── shapes from the corpus engineer's labelled sessions (corpus/labels.csv) ──────────────────


def test_a_user_turn_forgets_transient_failures():
    # task-35 (normal): two 503s, the user speaks twice, the same order asked again
    d = ProgressDetector()
    call = ("get_order_details", {"order_id": "#W9672333"}, "Error: 503 Service Unavailable")
    actions(d, [call, call])
    d.user_turn()
    assert run(d, [call])[0] == ("allow", 1, "")


def test_the_shell_line_counter_is_volatile():
    d = ProgressDetector()
    a = "/bin/bash: line 316: cd: fastxml/: No such file or directory"
    b = "/bin/bash: line 334: cd: fastxml/: No such file or directory"
    assert d.normalize(a) == d.normalize(b) and d.normalize("line 316: x") == "line 316: x"


def test_the_per_tool_index_stays_bounded():
    # 1,000 distinct tool names through a window of 5: only tools still in the window are kept
    d = ProgressDetector(window=5)
    for i in range(1000):
        d.check(f"tool_{i}", {})
        d.record_answer("ok")
    assert len(d._by_tool) <= 4 * 5


def test_argument_values_an_error_can_name():
    from loopledger.detectors.progress import leaves

    args = {"a": [1234, True, "ab", {"b": ("xyz1",)}], "c": 12.5, "d": 7}
    assert leaves(args) == {"1234", "xyz1", "12.5"}  # 4+ characters; never a bool
    assert leaves(args, min_len=2) == {"1234", "xyz1", "12.5", "ab"}


def test_a_run_of_one_failure_ignores_the_guessed_names_it_quotes():
    # user names guessed one after another: "user <name> not found" (no digits to collapse)
    names = ["amelia_silva", "amelia_silvia", "a_silva", "amelias", "silva_amelia", "amelia_s"]
    calls = [("get_user_details", {"user_id": n}, f"Error: user {n} not found") for n in names]
    assert actions(ProgressDetector(), calls)[4] == "halt"  # the 5th guess


def test_a_digest_takes_any_text():
    assert len(ProgressDetector().digest("lone surrogate \ud800")) == 32


# ── pinned by mutation testing (bench/mutants.py): each asserts a rule's exact edge ───────────


@pytest.fixture(autouse=True)
def _fresh_classification_cache():
    # reads/writes are cached by tool + arguments digest across detectors; a test must see its
    # own classification, not one an earlier test left
    from loopledger.detectors import progress

    progress._CLASSES.clear()


def test_a_call_whose_tool_answered_only_other_calls_counts_one():
    got = run(ProgressDetector(), [("t", {"a": 1}, "ok"), ("t", {"a": 2}, "ok")])
    assert got == [("allow", 1, ""), ("allow", 1, "")]
    # the tool's answers all left the window: a fresh start too
    d = ProgressDetector(window=2)
    run(d, [("t", {"a": 1}, "ok"), ("u", {}, "x"), ("v", {}, "y")])
    assert run(d, [("t", {"a": 1}, "ok")]) == [("allow", 1, "")]


def test_arguments_are_keyed_by_their_canonical_form():
    d = ProgressDetector()
    run(d, [("t", {"a": 1, "b": 2}, "same"), ("t", {"b": 2, "a": 1}, "same")])
    assert d.check("t", {"a": 1, "b": 2}).count == 3  # key order is not a difference
    d = ProgressDetector()
    run(d, [("t", None, "same")])
    assert d.check("t", {}).count == 2  # no arguments ≡ {}
    d = ProgressDetector()
    run(d, [("t", {"n": 2 ** 70}, "same")])  # past orjson's integers: the fallback canonical form
    assert d.check("t", {"n": 2 ** 70}).count == 2


GUESS = [("get", {"id": f"#W{i:02d}"}, f"Error: #W{i:02d} not found") for i in range(20)]


def _four_guesses_then(said: str) -> ProgressDetector:
    """Ids #W00..#W03 guessed, each not found; then the person says `said`."""
    d = ProgressDetector()
    actions(d, GUESS[:4])
    d.user_said(said)
    d.user_turn()
    return d


def test_a_run_of_one_failure_goes_on_across_a_user_turn_that_gives_nothing_new():
    # the person spoke but gave none of the values tried: one step later than without the turn
    d = _four_guesses_then("I am not sure which order it was.")
    guess = GUESS
    assert run(d, guess[4:6]) == [("warn", 5, "failures"), ("halt", 6, "failures")]


def test_a_value_the_person_names_from_before_their_turn_is_no_new_try():
    # the person repeats an id the agent already tried: the guesses after it go on as before
    d = _four_guesses_then("#W01 was not it, and I do not know which one it is.")
    guess = GUESS
    assert actions(d, guess[4:6]) == ["warn", "halt"]


def test_a_run_of_one_failure_starts_after_a_user_turn_whose_value_it_tries():
    d = _four_guesses_then("Try #W04 then.")
    guess = GUESS
    assert actions(d, guess[4:9]) == ["allow", "allow", "allow", "warn", "halt"]


def test_a_kept_failure_and_a_new_call_after_a_user_turn_count_on():
    d = ProgressDetector()
    actions(d, [("book", {"a": 1}, "Error: declined")])
    d.user_turn()  # the failure is kept (across_turns=answers), and so is the run
    assert run(d, [("book", {"a": 2}, "Error: declined")]) == [("allow", 2, "failures")]


def test_the_run_of_one_failure_warns_one_before_it_halts():
    calls = [("book", {"seat": 12, "n": i}, "Error: seat 12 is taken") for i in range(5)]
    assert actions(ProgressDetector(), calls) == ["allow", "allow", "allow", "warn", "halt"]


def test_a_refused_change_sent_again_at_once_is_warned_before_it_runs():
    # Aider: the same SEARCH block resent right after "failed to match" is refused again.
    edit = {"path": "client/src/App.js", "edits": [["<div>stats</div>", "<div>stats<Heatmap/></div>"]]}
    refused = "# 1 SEARCH/REPLACE block failed to match!"
    calls = [("edit", edit, refused, True), ("edit", edit, refused, True), ("edit", edit, refused, True)]
    assert actions(ProgressDetector(), calls) == ["allow", "warn", "halt"]
    # Something read between, or a read-only call retried: no warning before the halt.
    read = ("bash", {"command": "cat client/src/App.js"}, "<div>stats </div>")
    assert actions(ProgressDetector(), [calls[0], read, calls[1]]) == ["allow", "allow", "allow"]
    lookup = ("get_order", {"id": "#W0001"}, "Error: order not found", True)
    assert actions(ProgressDetector(), [lookup, lookup, lookup]) == ["allow", "allow", "halt"]
    # A change the harness refused before it ran: the refusal already told the model what to do.
    unread = ("Edit", {"file_path": "a.py", "old_string": "x", "new_string": "y"},
              "<tool_use_error>File has not been read yet. Read it first before writing to it.</tool_use_error>", True)
    assert actions(ProgressDetector(), [unread, unread]) == ["allow", "allow"]


def test_an_identical_write_repeated_around_reads_is_no_check_after_an_edit():
    # django-11620: the same `cat > fix.patch` four times, reads between: its own writes are not
    # "another call changed files", so ok_halt_at holds
    calls = []
    for i in range(4):
        calls += [("bash", {"command": "cat > fix.patch << 'EOF'\n+x\nEOF"}, "<returncode>0</returncode>"),
                  ("bash", {"command": f"sed -n '{i},9p' a.py"}, f"<returncode>0</returncode> {i}")]
    assert actions(ProgressDetector(), calls)[6] == "halt"


def test_a_stale_retry_gets_rerun_halt_at_only_with_a_write_since_its_oldest():
    calls = [("update", _update("HAT030", "HAT050"), FAIL),
             ("bash", {"command": "sed -i s/a/b/ plan.txt"}, ""),
             ("update", _update("HAT030", "HAT051"), FAIL),
             ("bash", {"command": "grep x plan.txt"}, "x"),
             ("update", _update("HAT030", "HAT052"), FAIL)]
    assert actions(ProgressDetector(), calls)[4] == "warn"  # the 3rd attempt: rerun_halt_at 4


def test_different_failures_in_a_row_are_not_one_failure():
    calls = [("get", {"id": i}, f"Error: {why}") for i, why in
             enumerate(["no such order", "card declined", "seat taken", "bad date", "closed", "late"])]
    assert "halt" not in actions(ProgressDetector(), calls)


def test_named_values_are_taken_out_longest_first():
    d = ProgressDetector()
    for args, text in (({"a": "ABCD", "b": "ABCDEF"}, "Error: ABCDEF not found"),
                       ({"a": "WXYZ", "b": "WXYZQQ"}, "Error: WXYZQQ not found")):
        d.check("get", args)
        d.record_answer(text)
    first, second = d._entries
    assert d.failure_signature(first) == d.failure_signature(second)


def test_an_answer_for_a_call_out_of_the_window_is_ignored():
    d = ProgressDetector(window=2)
    first = d.check("t", {}).position
    for i in range(3):
        d.check("u", {"i": i})
    d.record_answer("late", position=first)  # no error, nothing recorded
    assert all(e.raw is None for e in d._entries)


def test_only_the_same_call_back_to_back_is_a_write_in_a_row():
    x, y = {"command": "edit 1:1\nA\nend_of_edit"}, {"command": "edit 9:9\nB\nend_of_edit"}
    calls = [("edit", x, "[File: a (8 lines total)]"), ("edit", y, "[File: a (9 lines total)]"),
             ("edit", x, "[File: a (10 lines total)]"), ("edit", x, "[File: a (11 lines total)]")]
    assert "halt" not in actions(ProgressDetector(), calls)


def test_a_pending_answer_of_the_same_tool_is_skipped_not_a_stop():
    d = ProgressDetector()
    guess = [("get", {"id": f"#W{i:02d}"}, f"Error: #W{i:02d} not found") for i in range(6)]
    actions(d, guess[:4])
    assert d.check("get", {"id": "#W04"}).action == "halt"  # the 5th step
    assert d.check("get", {"id": "#W05"}).action == "halt"  # the 4th's answer pending: still the 5th


def test_alternating_failures_are_no_run_of_one():
    calls = [("get", {"i": i}, "Error: A" if i % 2 == 0 else "Error: B") for i in range(9)]
    assert "halt" not in actions(ProgressDetector(), calls)


def test_steps_of_one_failure_count_batches():
    d = ProgressDetector()
    for b in range(3):
        positions = [d.check("Read", {"file_path": f"f{b}{i}.py"}).position for i in range(7)]
        for p in positions:
            d.record_answer("Error: Sibling tool call errored", True, position=p)
    assert d.check("Read", {"file_path": "g.py"}).action == "warn"  # the 4th step of 5


def test_a_rerun_streak_ends_at_a_pass():
    fail = "Exit code: 1\nFAILED test_parse"
    calls = []
    for text in (fail, fail, "Exit code: 0\n1 passed", fail, fail):
        calls += [("bash", {"command": "pytest -q"}, text), ("Edit", {"file_path": "p.py", "old_string": "a",
                                                                      "new_string": str(len(calls))}, "ok")]
    assert actions(ProgressDetector(), calls + [("bash", {"command": "pytest -q"}, None)])[-1] == "warn"


def test_an_answer_that_came_back_after_a_different_one_is_a_new_run():
    calls = [("get", {"id": 1}, text) for text in ("x1", "x2", "x1")]
    d = ProgressDetector()
    run(d, calls)
    assert d.check("get", {"id": 1}).count == 2  # x1 once since x2: not x1 twice


# ── the agent's own writes are not the world moving (issue 18, marshmallow-1343 rerun) ─────────


def _restore_rounds(rounds: int, gap: int = 0, turn: bool = False) -> list:
    """`git checkout f` (the same restore, the same answer), then a different edit and a view of
    what it did each round; `gap` unrelated reads of other files per round."""
    events: list = []
    for r in range(rounds):
        if turn:
            events.append(UserTurn("try again", None, None))
        calls = [("git checkout src/schema.py", "Updated 1 path from the index"),
                 (f"sed -i '{895 + r}d' src/schema.py", ""),
                 ("sed -n '890,910p' src/schema.py", f"view after round {r}: line {895 + r} gone")]
        calls += [(f"cat other{r}_{g}.py", f"file {r} {g}") for g in range(gap)]
        for command, answer in calls:
            cid = f"c{len(events)}"
            events.append(Batch((Call(cid, "bash", {"command": command}),), "", None, None))
            events.append(Answers((Answer(cid, answer),), None))
    return events


def _first_halt(events: list) -> int | None:
    """1-based call position of the default progress policy's first halt."""
    n = 0
    for step in replay(events, make_policy(PolicySpec.parse("progress"))):
        for c in step.checks:
            if c.verdict == "halt":
                return n + c.idx + 1
        n += sum(1 for _ in step.checks)
    return None


def test_restores_further_apart_than_the_window_are_not_halted():
    # django-13964's shape (normal): 7 restores, each round debugging something new over 12 calls.
    assert _first_halt(_restore_rounds(7, gap=9)) is None


def test_a_user_turn_between_restores_is_not_halted():
    # each round asked for by the person: a success is not kept over a user turn
    assert _first_halt(_restore_rounds(6, turn=True)) is None


# ── shapes not in the corpora (issue 18): hand-made transcripts ──────────────────────────────


def test_tests_re_run_after_each_edit_with_a_moving_result_are_never_halted():
    calls = []
    for i in range(10):
        calls += [("bash", {"command": f"sed -i '{i + 1}s/x/y/' mod.py"}, ""),
                  ("bash", {"command": "python -m pytest -q"}, f"{10 - i} failed, {30 + i} passed in 0.{i}s", True)]
    assert "halt" not in actions(ProgressDetector(), calls)


def test_blocked_commands_of_every_kind_halt_as_one_failure_after_same_failure_at():
    # SWE-agent refusing interactive programs, each a different command (the reader's harness_error)
    blocked = ["vim a.py", "nano a.py", "emacs a.py", "less a.py", "python", "gdb ./a.out"]
    calls = [("harness_error", {"reason": "blocked_command", "rejected": c},
              f"Operation '{c}' is not supported by this environment.", True) for c in blocked]
    got = run(ProgressDetector(), calls)
    assert [a for a, _, _ in got][:5] == ["allow", "allow", "allow", "warn", "halt"]
    assert got[4][2] == "failures"


def test_a_poll_that_keeps_moving_is_never_halted():
    calls = [("bash", {"command": "tail -n 1 job.log"}, f"epoch {i // 2} loss 0.{90 - i}") for i in range(30)]
    assert "halt" not in actions(ProgressDetector(), calls)


# ── near repeats: a poll whose arguments differ only in their numbers ──────────────────────


def _sleep_poll(answers: list[str]) -> list:
    return [("bash", {"command": f"sleep {30 * (i + 1)} && gh run view 4242 --json status"}, a)
            for i, a in enumerate(answers)]


def test_a_poll_waiting_longer_each_time_whose_answer_moves_is_never_halted():
    answers = [f'{{"status": "in_progress", "jobs_done": {k // 2}}}' for k in range(12)]
    assert "halt" not in actions(ProgressDetector(), _sleep_poll(answers))


def test_near_repeats_need_a_success_and_no_edit_between():
    d = ProgressDetector()
    calls = []
    for i in range(6):
        calls += [("bash", {"command": f"sed -i 's/v{i}/v{i + 1}/' conf.py"}, ""),
                  ("bash", {"command": f"sleep {i + 1} && curl -s localhost/health"}, "ok")]
    assert "halt" not in actions(d, calls)
    fails = [("bash", {"command": f"sleep {i + 1} && curl localhost"}, "Error: refused", True) for i in range(4)]
    assert "halt" not in actions(ProgressDetector(), fails)  # a failure is the run-of-one-failure rule's


# ── pinned by mutants that survived `make mutants` (mutants/detectors-progress.txt) ─────────────


def test_a_copy_keeps_the_agent_steps_of_a_run_of_one_failure():
    # Rule 2b counts agent steps: four failing steps copied are still four (count 5: halt).
    d = ProgressDetector()
    for i in range(4):
        d.check("lookup", {"id": f"U{i}"})
        d.record_answer("Error: malformed request")
    v = copy.deepcopy(d).check("lookup", {"id": "U9"})
    assert (v.action, v.count, v.rule) == ("halt", 5, "failures")


def test_a_copy_remembers_no_more_than_the_window():
    snap = copy.deepcopy(ProgressDetector(window=3))
    for i in range(5):
        snap.check("t", {"i": i})
        snap.record_answer("ok")
    assert len(snap.state()["calls"]) == 3


def test_arguments_beyond_json_numbers_still_tell_calls_apart():
    # orjson refuses integers over 64 bits; the canonical form still holds them.
    got = run(ProgressDetector(), [("calc", {"n": 2**70}, "ok"), ("calc", {"n": 2**71}, "ok")])
    assert got[1] == ("allow", 1, "")


def test_no_error_patterns_means_only_flagged_answers_fail():
    d = ProgressDetector(errors=[])
    assert not d.is_failure("Error: x")
    assert d.is_failure("fine", is_error=True)


def test_a_pattern_that_matches_only_the_empty_answer_is_refused():
    with pytest.raises(ConfigError):
        ProgressDetector(volatile=["^$"])


def test_an_unknown_pattern_name_is_refused_with_the_names_known():
    with pytest.raises(ConfigError) as e:
        PolicySpec.parse("progress:volatile=timestmap")
    msg = str(e.value)
    assert "unknown pattern 'timestmap'" in msg
    assert "timestamp, clock, duration" in msg and msg.endswith(", or re:<regular expression>")
    assert "pattern names" in e.value.rule


def test_state_of_a_fresh_detector_names_every_threshold_and_no_verdict_yet():
    d = ProgressDetector(window=30, halt_at=4, ok_halt_at=5, same_failure_at=6, rerun_halt_at=7,
                         wait_limit=60, wait_halt_at=8, across_turns="errors")
    assert d.state() == {"calls": [], "count": 0, "rule": "", "window": 30, "halt_at": 4, "ok_halt_at": 5,
                         "rerun_halt_at": 7, "same_failure_at": 6, "wait_limit": 60.0, "wait_halt_at": 8,
                         "across_turns": "errors"}


def test_state_shows_arguments_and_answers_as_short_digests_of_one_length():
    d = ProgressDetector()
    run(d, [("read", {"p": 1}, "text")])
    call = d.state()["calls"][0]
    assert len(call["args"]) == len(call["answer"]) == 8


def _reasons(calls, spec="progress"):
    events = [UserTurn("go")]
    for i, (name, args, text) in enumerate(calls):
        events += [Batch((Call(str(i), name, args),)), Answers((Answer(str(i), text),))]
    return [c.reason for s in replay(events, PolicySpec.parse(spec)) for c in s.checks]


_EDIT = ("edit", {"path": "a.py", "old_str": "x", "new_str": "y"}, "ok")


def test_a_read_repeated_around_calls_that_are_not_reads_keeps_the_success_threshold():
    # Rule 1's read exception needs every call since to only read: a script run between (not a
    # known read, not a known write) may have changed the file, so the 3rd equal view only warns.
    view = ("str_replace_editor", {"command": "view", "path": "/w/gen.c"}, "1\tint x;")
    calls = [view, ("bash", {"command": "python gen.py"}, "done"), view,
             ("bash", {"command": "python gen2.py"}, "done"), view]
    assert run(ProgressDetector(), calls)[-1] == ("warn", 3, "repeat")


# ── pinned by the survivors of the run on the merged rules (near repeats, writes between) ───────


def _poll(n: int) -> dict:
    return {"command": f"sleep {n} && gh run view 4242 --json status"}


def test_a_status_repeated_beside_a_log_that_advances_is_no_loop():
    # a job watched: its status line repeats (only its age moves), its log advances each time —
    # the world moving is progress, as an answer that changed is
    calls = []
    for i in range(8):
        calls += [("shell", {"command": "kubectl get job backfill --no-headers"}, f"backfill 0/1 {i}m0{i}s"),
                  ("shell", {"command": "kubectl logs job/backfill --tail=1"}, f"batch {40 * (i + 1)}/400 written")]
    assert set(actions(ProgressDetector(), calls)) == {"allow"}
    # without the moving log, the status poll halts at ok_halt_at … and once the log stalls too
    assert actions(ProgressDetector(), calls[::2])[3] == "halt"
    stalled = calls[:4] + [c for _ in range(4) for c in (calls[0], calls[3])]
    assert "halt" in actions(ProgressDetector(), stalled)


def test_a_repeated_write_answered_otherwise_is_the_agents_own_doing_not_the_world_moving():
    # the same append again and again: its answer moves because the agent writes, so the `cat`
    # repeated between the appends is still a repeat (halted at ok_halt_at), not a world moving
    append = ("bash", {"command": "echo hi >> notes.txt && wc -l notes.txt"})
    calls = []
    for n in range(4):
        calls += [(*append, f"{n + 1} notes.txt"), ("bash", {"command": "cat log.txt"}, "L")]
    assert actions(ProgressDetector(), calls)[7] == "halt"


def test_an_action_answered_pending_with_a_new_id_each_time_is_no_wait():
    # the same mail sent again and again: "queued" each time, each time a new message id
    sends = [("send_email", {"to": "m@x.net", "template": "reset"},
              f'{{"message_id": "<{n:04d}cfb71a86300cb2b@mail>", "status": "queued"}}') for n in range(5)]
    got = run(ProgressDetector(), sends)
    assert got[2] == ("halt", 3, "repeat")  # back to back, nothing between: halted at the third


# ── round 4 (corpus_d, a held-out set): harness refusals between commands that ran ───────────

_REFUSED = "Please always provide EXACTLY ONE action in triple backticks, found 2 actions."


def _refusal() -> tuple:
    # a reply the harness would not run, as the mini-swe-agent reader emits it: its arguments are
    # the harness's summary ("found 2 actions"), the same for any two replies it refused alike
    return ("harness_error", {"reason": "format_error", "actions": 2}, _REFUSED, True)


def test_refusals_with_commands_that_ran_between_are_not_one_repeated_call():
    # django-14155's shape (Gemini 3 Pro): now and then a reply with two bash blocks, refused alike,
    # between commands that ran and edits: each refusal follows the agent acting, a new reply
    calls = []
    for i in range(8):
        calls += [("bash", {"command": f"sed -n '{10 * i},{10 * i + 9}p' a.py"}, f"line {i}"),
                  ("bash", {"command": f"sed -i '{i + 1}s/a/b/' a.py"}, ""),
                  _refusal()]
    assert "halt" not in actions(ProgressDetector(), calls)


def test_a_command_that_failed_between_refusals_does_not_separate_them():
    # only a success shows the agent acting: a failing command between keeps the refusals linked
    calls = [("bash", {"command": "ls"}, "a.py"), _refusal(),
             ("bash", {"command": "cat missing.py"}, "<returncode>1</returncode>\ncat: missing.py: No such file"),
             _refusal(), _refusal()]
    assert actions(ProgressDetector(), calls)[-1] == "halt"


def test_refusals_in_a_row_still_halt_by_the_run_rule_whatever_they_count():
    # django-11299's shape: eight replies in a row refused, "found 3/5/7/2 actions"
    counts = [3, 5, 7, 2, 5, 2, 2, 3]
    calls = [("bash", {"command": "ls"}, "a.py")] + [
        ("harness_error", {"reason": "format_error", "actions": n},
         f"Please always provide EXACTLY ONE action in triple backticks, found {n} actions.", True)
        for n in counts]
    got = actions(ProgressDetector(), calls)
    assert got.index("halt") == 5  # the 5th refusal in a row (same_failure_at)


# ── rule 1: a call answered the same way again, with nothing new done between ─────────────────


def _other(i: int) -> tuple:
    """A call of another tool whose effect nobody can tell (not a read, not a write)."""
    return ("lookup", {"i": i}, f"o{i}")


def test_the_same_change_made_back_to_back_is_warned_at_the_third_and_halted_at_ok_halt_at_whatever_it_answers():
    sed = ("bash", {"command": "sed -i 's/a/b/' app.py"})
    calls = [("bash", {"command": "sed -i 's/x/y/' other.py"}, "done")] + [(*sed, f"done {i}") for i in range(4)]
    got = _play(ProgressDetector(), [(*c, False, None) for c in calls])
    assert got == [
        ("allow", 1, "", ""),  # the first of a tool: nothing to compare
        ("allow", 1, "", ""),
        ("allow", 2, "repeat", ""),  # the answers differ: no stale repeat, and two are not yet a run
        ("warn", 3, "repeat", "bash: sed -i 's/a/b/' app.py made the same change twice in a row"),
        ("halt", 4, "repeat", "bash: sed -i 's/a/b/' app.py made the same change 3 times in a row")]
    longer = [a for a, *_ in _play(ProgressDetector(ok_halt_at=5), [(*c, False, None) for c in calls[1:]]
                                       + [(*sed, "done 9", False, None)])]
    assert longer == ["allow", "allow", "allow", "warn", "halt"]


def test_the_same_answer_back_to_back_halts_at_the_third_call():
    # nothing between could have changed it: the third identical call never runs
    assert run(ProgressDetector(), [("read", {"p": "a"}, "same")] * 4)[:3] == [
        ("allow", 1, ""), ("allow", 2, "repeat"), ("halt", 3, "repeat")]


def test_the_same_success_with_other_calls_between_halts_at_ok_halt_at_warned_once_before():
    calls = [("read", {"p": "a"}, "same"), _other(1), ("read", {"p": "a"}, "same"), _other(2),
             ("read", {"p": "a"}, "same"), _other(3), ("read", {"p": "a"}, "same")]
    assert actions(ProgressDetector(), calls) == ["allow", "allow", "allow", "allow", "warn", "allow", "halt"]


def _swe_agent_round(new_goto: bool = False) -> list[tuple]:
    """SWE-agent's navigation, as the jackson-databind runs (corpus_c) go round: reopen a file,
    search it, search the repository, reopen the other file, go to a line."""
    return [("bash", {"command": "open ObjectNode.java"}, "[File: ObjectNode.java (1143 lines total)]"),
            ("bash", {"command": 'search_file "withArray(String)"'}, "No matches found in ObjectNode.java"),
            ("bash", {"command": 'search_dir "withArray(String)"'}, "Found 1 matches in JsonNode.java"),
            ("bash", {"command": "open JsonNode.java"}, "[File: JsonNode.java (1566 lines total)]"),
            ("bash", {"command": "goto 1310" if new_goto else "goto 1260"}, "(1244 more lines above)")]


def test_steps_retaken_between_repeats_are_nothing_new():
    # Once every call since a repeat's first run is a read or a step retaken with the answer it
    # had, its third run with the same answer halts, as with nothing between (not at ok_halt_at).
    # Round 1's steps are all first runs: round 3's goto is the first call whose first run came
    # after them (call 4 → 9 → 14).
    got = run(ProgressDetector(), _swe_agent_round() * 3)
    assert [a for a, _, _ in got].index("halt") == 14
    assert got[14] == ("halt", 3, "repeat")


def test_a_step_taken_for_the_first_time_between_repeats_is_something_new():
    # The second round goes to a new line: the third search is not yet stale by "nothing
    # between"; it halts at ok_halt_at, the fourth, like any success with other calls between.
    calls = _swe_agent_round() + _swe_agent_round(new_goto=True) + _swe_agent_round(new_goto=True)
    d = ProgressDetector()
    got = run(d, calls)
    search = [got[i] for i in (1, 6, 11)]
    assert search == [("allow", 1, ""), ("allow", 2, "repeat"), ("warn", 3, "repeat")]


def test_opening_a_file_for_the_first_time_lets_a_search_answer_anew():
    # search, scroll, search, open another file: the search after it is not halted though its two
    # earlier answers were the same (the jackson run's `open ObjectNode.java` at its call 7)
    calls = [("bash", {"command": 'search_file "x"'}, "Found 1 match in A"), ("bash", {"command": "goto 9"}, "view"),
             ("bash", {"command": 'search_file "x"'}, "Found 1 match in A"), ("bash", {"command": "open B"}, "[File: B]"),
             ("bash", {"command": 'search_file "x"'}, "No matches found in B")]
    assert "halt" not in actions(ProgressDetector(), calls)


def test_a_write_made_again_with_the_same_answer_is_not_a_step_retaken():
    # `cp f.bak f` restores the file each time: the check after it may answer anew, so its third
    # run is warned and its fourth halted (ok_halt_at), not halted at the third
    calls = [("bash", {"command": "cp f.bak f"}, ""), ("bash", {"command": "python t.py"}, "ok")] * 4
    got = actions(ProgressDetector(), calls)
    assert (got[5], got[7]) == ("warn", "halt")


def test_the_same_failure_halts_at_halt_at():
    got = run(ProgressDetector(), [("submit", {"f": "x"}, "Error: wrong flag")] * 3)
    assert got == [("allow", 1, ""), ("allow", 2, "repeat"), ("halt", 3, "repeat")]


def test_a_changed_answer_is_progress_and_restarts_the_count():
    calls = []
    for i, answer in enumerate(("v1", "v1", "v2", "v2", "v2")):
        calls += [("status", {}, answer), _other(i)]
    got = run(ProgressDetector(), calls)[::2]
    assert [c for _, c, _ in got] == [1, 2, 3, 2, 3]  # the 3rd answer changed: the run restarts at it
    assert "halt" not in [a for a, _, _ in got]


def test_repeats_further_apart_than_the_window_are_forgotten():
    filler = [("grep", {"n": i}, f"hit {i}") for i in range(4)]
    calls = [("read", {}, "same"), *filler, ("read", {}, "same"), *filler, ("read", {}, "same"),
             *filler, ("read", {}, "same")]
    assert actions(ProgressDetector(window=20), calls)[-1] == "halt"
    # window=4 holds the 4 calls between two reads, not the read before them
    assert set(actions(ProgressDetector(window=4), calls)) == {"allow"}


def test_a_new_change_makes_the_next_check_of_a_success_a_new_experiment():
    # edit → build → edit → build …: each edit new, the build passing with the same words
    calls = []
    for i in range(6):
        calls += [("Edit", {"file_path": "lib.rs", "old_string": f"a{i}", "new_string": f"b{i}"}, "updated"),
                  ("bash", {"command": "cargo build"}, "Finished dev profile")]
    assert [c for _, c, _ in run(ProgressDetector(), calls)[1::2]] == [1] * 6


def test_the_same_change_made_again_is_no_new_experiment():
    same_edit = ("Edit", {"file_path": "lib.rs", "old_string": "a", "new_string": "b"}, "updated")
    build = ("bash", {"command": "cargo build"}, "Finished dev profile")
    got = actions(ProgressDetector(), [same_edit, build] * 4)[:7]
    # the build counts on (2, 3 …) across edits that change nothing new; the 4th same edit halts
    assert got == ["allow", "allow", "allow", "allow", "warn", "warn", "halt"]


def test_a_failure_repeated_after_new_changes_gets_one_attempt_more():
    fail = ("bash", {"command": "pytest -q"}, "Exit code 1\nFAILED test_parse - KeyError: 'id'", True)
    calls = [fail]
    for i in range(3):
        calls += [("Edit", {"file_path": "p.py", "old_string": "x", "new_string": f"y{i}"}, "updated"), fail]
    assert actions(ProgressDetector(), calls) == ["allow", "allow", "allow", "allow", "warn", "allow", "halt"]
    # with nothing changed between, the third run already halts
    assert actions(ProgressDetector(), [fail] * 3)[-1] == "halt"


def test_the_same_file_viewed_three_times_with_only_reads_between_halts_at_the_third():
    # ponyc-4595: view parser.c, grep, view, grep, view — the same truncated view each time.
    view = ("str_replace_editor", {"command": "view", "path": "/w/parser.c"}, "1\tDEF(x);\n<truncated>")
    calls = [view, ("execute_bash", {"command": "grep -n A /w/parser.c"}, "29:A"), view,
             ("execute_bash", {"command": "grep -n B /w/parser.c"}, "666:B"), view]
    assert actions(ProgressDetector(), calls) == ["allow", "allow", "allow", "allow", "halt"]


def test_the_same_write_back_to_back_halts_whatever_it_answers():
    # the same insertion again and again: the file grows, so its answer moves, but nothing else does
    calls = [("str_replace_editor", {"command": "insert", "path": "R.java", "insert_line": 1, "new_str": "x"},
              f"edited ({23 + 15 * n} lines)") for n in range(5)]
    assert actions(ProgressDetector(), calls)[:4] == ["allow", "allow", "warn", "halt"]


# ── rule 2: waiting on something outside ──────────────────────────────────────────────────────


def _poll(d: ProgressDetector, n: int, answer: str, *, every: float | None = None, command=None) -> list[str]:
    out = []
    for k in range(n):
        cmd = command(k) if command else "gh run view 1 --json status"
        v = d.check("bash", {"command": cmd}, at=None if every is None else 1_764_000_000 + every * k)
        out.append(v.action)
        d.record_answer(answer)
    return out


def test_a_quick_pending_poll_is_warned_at_its_fourth_poll_and_halted_at_wait_halt_at():
    # every poll is a model turn: asked for no wait of its own, a pending answer again and again
    # is a loop however few minutes it took (a Claude Code subagent polling BashOutput every 3 s)
    got = _poll(ProgressDetector(), 10, '{"status":"in_progress"}')
    assert got[:6] == ["allow", "allow", "allow", "warn", "warn", "halt"]
    assert _poll(ProgressDetector(wait_halt_at=8), 10, '{"status":"in_progress"}')[:8] == (
        ["allow"] * 3 + ["warn"] * 4 + ["halt"])


def test_a_quick_poll_is_halted_by_its_count_even_with_a_clock_that_says_minutes_passed():
    # polled every 3 s (BashOutput of a hung job): 6 polls in 15 s are the loop, the clock is not
    got = _poll(ProgressDetector(), 10, "<status>running</status>", every=3)
    assert got.index("halt") == 5
    # and a minute apart with no wait asked for: the same count, not the 15 minutes
    assert _poll(ProgressDetector(), 20, '{"status":"queued"}', every=60).index("halt") == 5


def test_a_sleeping_poll_is_judged_by_the_clock_where_there_is_one():
    # `sleep 60 && gh run view`: the agent asked to wait; its minutes are judged (limit 900 s)
    got = _poll(ProgressDetector(), 20, '{"status":"queued"}', every=60,
                command=lambda k: "sleep 60 && gh run view 1 --json status")
    assert got.index("warn") == 15 and got.index("halt") == 16  # warned when the next poll would pass it
    assert _poll(ProgressDetector(wait_limit=120), 5, '{"status":"queued"}', every=60,
                 command=lambda k: "sleep 60 && gh run view 1")[:4] == ["allow", "allow", "warn", "halt"]


def test_a_wait_the_tool_itself_makes_counts_as_asked_for():
    # Codex's write_stdin waiting `yield_time_ms` for output, `kubectl wait --timeout=300s`
    d = ProgressDetector()
    out = []
    for k in range(12):
        v = d.check("write_stdin", {"session_id": 7, "chars": "", "yield_time_ms": 30000},
                    at=1_764_000_000 + 31 * k)
        out.append(v.action)
        d.record_answer("Process running with session ID 7\nOutput:\n")
    assert "halt" not in out  # 6 minutes of patient polling
    assert asked_wait({"command": "kubectl wait --for=condition=ready pod/x --timeout=300s"}) == 300
    assert asked_wait({"chars": "", "yield_time_ms": 1500}) == 1.5
    assert asked_wait({"command": "sleep 2 && tail -3 build.log"}) == 2
    assert asked_wait({"args": ["rollout", "status", "deployment/api", "--timeout=30s"]}) == 30


def test_codex_process_running_is_a_pending_answer():
    assert is_pending("Command: /bin/bash -lc ./run_tests.sh\nProcess running with session ID 52896\nOutput:\n")
    assert not is_pending("Command: /bin/bash -lc ./run_tests.sh\nProcess exited with code 1\nOutput:\nFAIL")


def test_an_edit_between_quick_polls_restarts_their_count():
    d = ProgressDetector()
    calls = []
    for i in range(8):
        calls += [("bash", {"command": f"sed -i 's/v{i}/v{i + 1}/' conf.py"}, ""),
                  ("bash", {"command": "tail -3 /tmp/worker.log"}, "waiting for worker 2")]
    assert "halt" not in actions(d, calls)


def test_a_transient_failure_is_a_wait_and_never_a_retry_or_a_run_of_one_failure():
    d = ProgressDetector()
    got = run(d, [("get_order", {"id": "#W1"}, "Error: 503 Service Unavailable", True)] * 9)
    assert [a for a, _, _ in got][:6] == ["allow", "allow", "allow", "warn", "warn", "halt"]
    assert {r for _, _, r in got[1:6]} == {"wait"}


# ── rule 3: the same error, retried without addressing it ─────────────────────────────────────


def test_same_error_with_arguments_that_keep_what_the_error_names_is_a_stale_retry():
    # tau-bench task 13: the agent adds a segment, HAT030 stays, the error stays.
    calls = [("update", _update("HAT030", "HAT223"), FAIL),
             ("update", _update("HAT030", "HAT223", "HAT052"), FAIL),
             ("update", _update("HAT030", "HAT052"), FAIL)]
    assert run(ProgressDetector(), calls) == [("allow", 1, ""), ("allow", 2, "retry"), ("halt", 3, "retry")]


def test_going_back_to_arguments_already_tried_with_that_error_is_a_stale_retry():
    err = "Error: payment amount does not add up"  # names nothing in the arguments
    calls = [("book", {"amount": 299}, err), ("book", {"amount": 310}, err), ("book", {"amount": 299}, err),
             ("book", {"amount": 310}, err)]
    assert run(ProgressDetector(), calls) == [("allow", 1, ""), ("allow", 2, "failures"), ("warn", 2, "retry"),
                                              ("halt", 3, "retry")]


def test_a_success_of_the_tool_ends_the_retry_run():
    calls = [("update", _update("HAT030"), FAIL), ("update", _update("HAT030", "X"), FAIL),
             ("update", _update("HAT052"), '{"ok": true}'), ("update", _update("HAT030", "Y"), FAIL)]
    assert run(ProgressDetector(), calls)[3] == ("allow", 1, "")


# ── rule 4: one tool failing the same way in a row, whatever its arguments ────────────────────


def test_ids_guessed_one_after_another_each_not_found_halt_at_same_failure_at():
    calls = [("get_order", {"id": f"#W{n:04d}"}, f"Error: order #W{n:04d} not found") for n in range(6)]
    got = run(ProgressDetector(), calls)
    assert [a for a, _, _ in got][:5] == ["allow", "allow", "allow", "warn", "halt"] and got[4][2] == "failures"


def test_searches_that_found_nothing_are_answers_not_failures():
    calls = [("search_dir", {"command": f"search_dir Guess{n}.java"}, f'No matches found for "Guess{n}.java" in /r')
             for n in range(8)]
    assert set(actions(ProgressDetector(), calls)) == {"allow"}
    greps = [("bash", {"command": f"grep -rn word{n} src"}, "Exit code 1", True) for n in range(8)]
    assert set(actions(ProgressDetector(), greps)) == {"allow"}
    # the same search again and again is still a repeat
    assert actions(ProgressDetector(), [calls[0]] * 3)[-1] == "halt"


# ── thresholds, validation, state, reasons ────────────────────────────────────────────────────


def test_thresholds_are_parameters():
    spaced = [x for i in range(6) for x in (("r", {}, "same"), _other(i))]
    assert actions(ProgressDetector(ok_halt_at=5), spaced)[::2][:5] == ["allow", "allow", "allow", "warn", "halt"]
    assert actions(ProgressDetector(halt_at=4), [("r", {}, "Error: x")] * 4) == ["allow", "allow", "warn", "halt"]


@pytest.mark.parametrize(("spec", "field"), [
    ("progress:window=1", "window"),
    ("progress:window=10001", "window"),
    ("progress:halt_at=2", "halt_at"),
    ("progress:ok_halt_at=2", "ok_halt_at"),
    ("progress:rerun_halt_at=2", "rerun_halt_at"),
    ("progress:same_failure_at=2", "same_failure_at"),
    ("progress:wait_halt_at=2", "wait_halt_at"),
    ("progress:wait_limit=0", "wait_limit"),
    ("progress:wait_limit=soon", "wait_limit"),
    ("progress:across_turns=sometimes", "across_turns"),
    ("progress:volatile=timestmap", "volatile"),
    ("progress:volatile=re:(unclosed", "volatile"),
    ("progress:volatile=re:x*", "volatile"),  # matches the empty string
    ("progress:errors=warning", "errors"),
    ("progress:errors=re:(", "errors"),
    ("progress:window=many", "window"),
])
def test_bad_parameters_are_config_errors_naming_the_field(spec, field):
    with pytest.raises(ConfigError) as e:
        PolicySpec.parse(spec)
    assert e.value.field == field


# The detector's own checks: what a Python caller of ProgressDetector(...) meets (a PolicySpec is
# checked against the parameter table first, with its own messages, tested above).
@pytest.mark.parametrize("kw, field, rule, message", [
    (dict(window=1), "window", "window >= 2", "window: must be >= 2, got 1"),
    (dict(window=10_001), "window", "window <= 10000", "window: must be <= 10000, got 10001"),
    (dict(window="20"), "window", "window is an integer", "window: must be an integer, got '20'"),
    (dict(halt_at=2), "halt_at", "halt_at >= 3", "halt_at: must be >= 3, got 2"),
    (dict(ok_halt_at=True), "ok_halt_at", "ok_halt_at is an integer", "ok_halt_at: must be an integer, got True"),
    (dict(same_failure_at=2), "same_failure_at", "same_failure_at >= 3", "same_failure_at: must be >= 3, got 2"),
    (dict(same_failure_at=4.0), "same_failure_at", "same_failure_at is an integer",
     "same_failure_at: must be an integer, got 4.0"),
    (dict(rerun_halt_at=2), "rerun_halt_at", "rerun_halt_at >= 3", "rerun_halt_at: must be >= 3, got 2"),
    (dict(rerun_halt_at="4"), "rerun_halt_at", "rerun_halt_at is an integer",
     "rerun_halt_at: must be an integer, got '4'"),
    (dict(wait_halt_at=2), "wait_halt_at", "wait_halt_at >= 3", "wait_halt_at: must be >= 3, got 2"),
    (dict(wait_halt_at=False), "wait_halt_at", "wait_halt_at is an integer",
     "wait_halt_at: must be an integer, got False"),
    (dict(wait_limit=0), "wait_limit", "wait_limit > 0", "wait_limit: must be a number of seconds > 0, got 0"),
    (dict(wait_limit=-5.0), "wait_limit", "wait_limit > 0", "wait_limit: must be a number of seconds > 0, got -5.0"),
    (dict(wait_limit="900"), "wait_limit", "wait_limit > 0",
     "wait_limit: must be a number of seconds > 0, got '900'"),
    (dict(wait_limit=True), "wait_limit", "wait_limit > 0", "wait_limit: must be a number of seconds > 0, got True"),
    (dict(across_turns="sometimes"), "across_turns", "across_turns is one of none|errors|all|answers",
     "across_turns: must be one of none, errors, all, answers, got 'sometimes'"),
])
def test_bad_parameters_name_the_field_the_rule_and_the_value(kw, field, rule, message):
    with pytest.raises(ConfigError) as info:
        ProgressDetector(**kw)
    assert (info.value.field, info.value.rule, str(info.value)) == (field, rule, message)


@pytest.mark.parametrize("kw", [dict(window=2), dict(window=10_000), dict(halt_at=3, ok_halt_at=3),
                                dict(same_failure_at=3, rerun_halt_at=3, wait_halt_at=3),
                                dict(wait_limit=0.5), dict(wait_limit=1), dict(across_turns="none")])
def test_parameters_on_their_bounds_are_accepted(kw):
    d = ProgressDetector(**kw)
    assert all(getattr(d, k) == v for k, v in kw.items())


def test_unset_thresholds_take_their_defaults_and_set_ones_are_kept():
    from loopledger.detectors import progress

    d = ProgressDetector()
    assert (d.same_failure_at, d.rerun_halt_at, d.wait_halt_at, d.wait_limit) == (
        progress.DEFAULT_SAME_FAILURE_AT, progress.DEFAULT_RERUN_HALT_AT, progress.DEFAULT_WAIT_HALT_AT,
        progress.DEFAULT_WAIT_LIMIT)
    d = ProgressDetector(same_failure_at=7, rerun_halt_at=8, wait_halt_at=9, wait_limit=30)
    assert (d.same_failure_at, d.rerun_halt_at, d.wait_halt_at, d.wait_limit) == (7, 8, 9, 30)


def test_spec_defaults_round_trip_and_name_the_patterns():
    from loopledger.detectors.answers import DEFAULT_ERROR_NAMES, VOLATILE_PATTERNS

    spec = PolicySpec("progress")
    assert spec.params["volatile"] == tuple(VOLATILE_PATTERNS)
    assert spec.params["errors"] == DEFAULT_ERROR_NAMES and "test_summary" in DEFAULT_ERROR_NAMES
    assert PolicySpec.parse(spec.text) == spec
    assert PolicySpec.parse("progress:volatile=uuid|re:pid \\d+").params["volatile"] == ("uuid", "re:pid \\d+")


def test_a_stored_policy_naming_a_retired_parameter_still_loads_without_it():
    old = PolicySpec("progress", {"warn_at": 2, "poll_span": 5, "halt_at": 3})
    assert old == PolicySpec("progress") and "poll_span" not in old.params


def test_state_shows_each_tracked_call_and_its_answer_digest():
    d = ProgressDetector()
    run(d, [("read", {"p": 1}, "same"), ("read", {"p": 1}, "same"), ("update", {"x": 1}, "Error: no"),
            ("poll", {}, '{"status":"queued"}')])
    d.check("read", {"p": 1})
    s = json.loads(json.dumps(d.state()))
    assert [c["tool"] for c in s["calls"]] == ["read", "read", "update", "poll", "read"]
    assert s["calls"][0]["answer"] == s["calls"][1]["answer"] and len(s["calls"][0]["answer"]) == 8
    assert s["calls"][2]["answer"].endswith("!") and s["calls"][3]["answer"].endswith("~")
    assert s["calls"][4]["answer"] is None and s["calls"][0]["args"] == s["calls"][4]["args"]
    assert (s["count"], s["rule"], s["window"], s["halt_at"], s["ok_halt_at"], s["wait_limit"]) == (
        3, "repeat", 20, 3, 4, 900.0)


def test_the_policy_reads_answers_per_call_and_steps_like_a_replay():
    p = make_policy("progress")
    assert p.reads_answers and p.per_call
    events = []
    for i in range(5):
        events += [Batch((Call(f"c{i}", "read", {"p": 1}),)), Answers((Answer(f"c{i}", "same"),))]
    scratch = list(replay(events, PolicySpec("progress"), with_state=True))
    r = Replayer(events, PolicySpec("progress"), snapshot_every=2)
    for target in (9, 3, 7, 1, 10):
        r.jump_to(target)
        assert r.current == scratch[target - 1]
    halt = next(c for s in scratch for c in s.checks if c.verdict == "halt")
    assert (halt.count, halt.threshold) == (3, 3) and halt.reason == (
        "read ran twice with the same answer, and nothing between could change it")


def test_each_reason_says_what_repeated_and_how_often_without_parameter_names():
    def reasons(calls):
        events = [UserTurn("go")]
        for i, (name, args, text) in enumerate(calls):
            events += [Batch((Call(str(i), name, args),)), Answers((Answer(str(i), text),))]
        return [c.reason for s in replay(events, PolicySpec("progress")) for c in s.checks]

    assert reasons([("Bash", {"command": "make test"}, "Error: no rule")] * 3)[-1] == (
        "Bash: make test ran twice with the same failure")
    got = reasons([("update", _update("HAT030", f"HAT0{50 + i}"), FAIL) for i in range(3)])
    assert got[-1] == "update failed twice with the same error, and this retry changes nothing the error is about"
    got = reasons([("get", {"id": f"#W0{i}"}, f"Error: #W0{i} not found") for i in range(5)])
    assert got[-2:] == ["get failed the same way 3 times in a row, whatever its arguments",
                        "get failed the same way 4 times in a row, whatever its arguments"]


def test_a_wait_is_judged_by_the_batch_clock_in_a_replay():
    events = []
    for k in range(20):
        ts = f"2026-11-30T09:{k:02d}:00Z"
        events += [Batch((Call(f"c{k}", "bash", {"command": "gh run view 1"}),), ts=ts),
                   Answers((Answer(f"c{k}", '{"status":"queued"}'),))]
    halts = [i for i, s in enumerate(replay(events, PolicySpec("progress"))) for c in s.checks if c.verdict == "halt"]
    assert halts and halts[0] == 2 * 5  # the 6th poll: none of them asked to wait
    events = []
    for k in range(20):
        ts = f"2026-11-30T09:{k:02d}:00Z"
        events += [Batch((Call(f"c{k}", "bash", {"command": "sleep 55; gh run view 1"}),), ts=ts),
                   Answers((Answer(f"c{k}", '{"status":"queued"}'),))]
    halts = [i for i, s in enumerate(replay(events, PolicySpec("progress"))) for c in s.checks if c.verdict == "halt"]
    assert halts and halts[0] == 2 * 16  # sleeping polls: the 17th, 16 minutes after the first


def test_a_shell_command_run_again_with_another_description_is_the_same_call():
    # Claude Code writes a new `description` beside the same `command` each time (corpus_g: `git
    # remote -v` ×8, each "described" anew): the action is the command
    calls = [("Bash", {"command": "npm run build", "description": d, "timeout": t}, "Exit code 1\nBuild error", True)
             for d, t in (("Build the app", 60000), ("Build from the right folder", 120000), ("Build again", 60000))]
    assert run(ProgressDetector(), calls)[-1] == ("halt", 3, "repeat")
    # … while a ticket's description is what the call is about
    tickets = [("create_ticket", {"title": "t", "description": f"body {n}"}, "ok") for n in range(4)]
    assert set(actions(ProgressDetector(), tickets)) == {"allow"}
    # the policy keys the same way (canonical.action_key)
    events = []
    for i, (name, args, text, err) in enumerate(calls):
        events += [Batch((Call(str(i), name, args),)), Answers((Answer(str(i), text, err),))]
    assert [c.verdict for s in replay(events, PolicySpec("progress")) for c in s.checks] == ["allow", "allow", "halt"]


def test_a_refused_edit_retried_after_the_read_it_asked_for_is_a_new_attempt():
    # Claude Code refuses an Edit of a file not read yet; twice, then the agent reads it and the
    # same Edit (which would now work) is a new attempt, not the third of a loop
    edit = ("Edit", {"file_path": "/r/page.tsx", "old_string": "a", "new_string": "b"},
            "<tool_use_error>File has not been read yet. Read it first before writing to it.</tool_use_error>", True)
    read = ("Read", {"file_path": "/r/page.tsx"}, "     1→a")
    assert actions(ProgressDetector(), [edit, edit, read, edit]) == ["allow", "allow", "allow", "allow"]
    # without the read between, the third identical refusal halts
    assert actions(ProgressDetector(), [edit, edit, edit])[-1] == "halt"
    # and an error the tool itself gave (not a refusal) stays linked across a success
    fail = ("bash", {"command": "make"}, "Exit code 2\nmake: *** [all] Error 1", True)
    assert actions(ProgressDetector(), [fail, fail, ("bash", {"command": "ls"}, "Makefile"), fail])[-1] == "halt"


# ── rule 4 for replies the harness refused: five of the last seven ──────────────────────────────

REFUSED = "Please always provide EXACTLY ONE action in triple backticks, found {} actions."


def _replies(pattern: str) -> list[str]:
    """Feed a reply pattern to a fresh detector, R a refused reply and c a command that ran; the
    action of each reply's check, in order (_refusal_verdicts's)."""
    return [v.action for v in _refusal_verdicts(pattern)]


def test_the_fifth_refusal_within_seven_replies_halts_and_one_outside_them_does_not():
    # RRRR cc R: the 7th reply's six before it hold four refusals — the fifth of seven halts.
    assert _replies("RRRRccR")[-1] == "halt"
    # RRRR ccc R: the first refusal is eight replies back — four of seven, not halted.
    assert _replies("RRRRcccR")[-1] == "allow"


def test_refusals_warn_only_while_in_a_row():
    assert _replies("RRRR") == ["allow", "allow", "allow", "warn"]  # the 4th in a row: warned
    assert _replies("RRRcR")[-1] == "allow"  # four of five, but a reply just ran: no warning yet


def _refusal_verdicts(pattern: str) -> list:
    """Each reply's verdict: R a refused reply, T one refused another way (a timeout), c a command
    that ran."""
    d = ProgressDetector()
    out = []
    for i, kind in enumerate(pattern):
        if kind == "R":
            out.append(d.check("harness_error", {"reason": "format_error", "actions": 2 + i % 3}))
            d.record_answer(REFUSED.format(2 + i % 3), is_error=True)
        elif kind == "T":
            out.append(d.check("harness_error", {"reason": "timeout"}))
            d.record_answer("The command timed out after 60 seconds; interrupt it and try another.", is_error=True)
        else:
            out.append(d.check("bash", {"command": f"cat f{i}.py"}))
            d.record_answer(f"line {i}")
    return out


@pytest.mark.parametrize("pattern, last", [
    ("RRRRR", ("halt", 5, "failures", "the harness refused 4 of the last 7 replies the same way")),
    # a refusal eight replies back is outside the seven: the four inside still halt with this one
    ("RcccRRcRRR", ("halt", 5, "failures", "the harness refused 4 of the last 7 replies the same way")),
    # refused another way between: not counted, and not the end of the count either
    ("RRTRRR", ("halt", 5, "failures", "the harness refused 4 of the last 7 replies the same way")),
    ("RRTTRR", ("warn", 4, "failures", "the harness refused 3 of the last 7 replies the same way")),
])
def test_refusals_are_counted_among_the_last_seven_replies_and_say_so(pattern, last):
    v = _refusal_verdicts(pattern)[-1]
    assert (v.action, v.count, v.rule, v.reason) == last


# ── across_turns=answers (the default): a person speaking does not make a lookup new ─────────


def test_a_lookup_answered_the_same_across_user_turns_halts_one_later():
    # tau-bench: the same flight search, the simulated user saying something new between each pair
    d = ProgressDetector()
    search = ("search_direct_flight", {"origin": "JFK", "destination": "SEA", "date": "2024-05-20"}, '[{"flight": "HAT069"}]')
    got = []
    for _ in range(3):
        got += [a for a, _, _ in run(d, [search, search])]
        d.user_turn()
    assert got == ["allow", "allow", "allow", "warn", "halt", "halt"]  # the 5th: ok_halt_at + 1
    # the mode before it forgot every success at a user turn: never halted
    d = ProgressDetector(across_turns="errors")
    got = []
    for _ in range(3):
        got += [a for a, _, _ in run(d, [search, search])]
        d.user_turn()
    assert "halt" not in got


def test_a_change_asked_for_again_after_the_user_spoke_is_new():
    # aider: the same file edited reply after reply, each reply a new request of the person's
    d = ProgressDetector()
    edit = ("edit", {"path": "backend/app.py"}, "Applied edit to backend/app.py")
    got = []
    for _ in range(6):
        got += [a for a, _, _ in run(d, [edit])]
        d.user_turn()
    assert set(got) == {"allow"}


def test_a_thought_is_what_a_think_call_does():
    # the `think` tool's only argument is its thought: two thoughts are two calls
    d = ProgressDetector()
    calls = [("think", {"thought": f"The user now wants March {k}."}, "") for k in range(10, 16)]
    assert set(actions(d, calls)) == {"allow"}


def test_a_call_the_person_asks_for_again_by_its_values_is_a_new_request():
    # tau2: "#12345 and #67890. Check again." — the same lookups fail again, at the person's word
    d = ProgressDetector()
    lookups = [("get_order_details", {"order_id": "#12345"}, "Error: Order not found", True),
               ("get_order_details", {"order_id": "#67890"}, "Error: Order not found", True)]
    got = [a for a, _, _ in run(d, lookups)]
    for text in ("#12345 and #67890. Check again.", "I told you: 12345 and 67890!"):
        d.user_said(text)
        d.user_turn()
        got += [a for a, _, _ in run(d, lookups)]
    assert "halt" not in got
    # without being asked, the third identical failure halts as before
    d = ProgressDetector()
    got = [a for a, _, _ in run(d, lookups)]
    for _ in range(2):
        d.user_said("Why can't you find them?")
        d.user_turn()
        got += [a for a, _, _ in run(d, lookups)]
    assert "halt" in got


def test_a_value_the_person_mentions_beside_others_does_not_make_a_call_theirs():
    # "my user ID is aarav_1177, please book it" before the same failing booking again
    d = ProgressDetector()
    book = ("book_reservation", {"user_id": "aarav_1177", "flight": "HAT063", "payment_id": "card_7815826"},
            "Error: Payment method card_7815826 not found", True)
    got = []
    for _ in range(3):
        got += [a for a, _, _ in run(d, [book])]
        d.user_said("Yes, my user ID is aarav_1177. Please go ahead and book that flight.")
        d.user_turn()
    assert got[-1] == "halt"


# ── edges a mutation run of progress.py found unpinned ───────────────────────────────────────


def test_a_run_of_one_failure_ends_at_another_failure_and_counts_what_came_after():
    # The walk back stops at a failure of another kind, or at a transient one, and keeps the
    # run it has: five lookups not found after a 503 or a refused permission still halt.
    for first in ("Error: 503 Service Unavailable", "Error: permission denied for user"):
        d = ProgressDetector()
        actions(d, [("lookup", {"id": "#A"}, first, True)])
        calls = [("lookup", {"id": f"#W{i:02d}"}, "Error: order not found", True) for i in range(5)]
        assert run(d, calls)[-2:] == [("warn", 4, "failures"), ("halt", 5, "failures")], first


def test_the_person_s_value_starts_the_count_at_their_turn_not_one_call_before():
    # After a success, one guess fails; the person then names a card, and the agent's tries of
    # it fail: the count (the number the model reads) starts with their try, not the guess before.
    d = ProgressDetector()
    actions(d, [("get_user", {"id": "u1"}, "{\"name\": \"Ann\"}"),
                ("pay", {"card": "gift_card_1", "amount": "99.00"}, "Error: card declined", True)])
    d.user_said("Then try gift_card_2.")
    d.user_turn()
    tries = [("pay", {"card": "gift_card_2", "amount": f"{100 + i}.00"}, "Error: card declined", True)
             for i in range(5)]
    got = run(d, tries)
    assert [c for _, c, _ in got] == [1, 2, 3, 4, 5]
    assert got[-1] == ("halt", 5, "failures")
    assert "failed the same way 4 times in a row" in d.last.reason


def test_an_attempt_whose_answer_never_came_is_passed_over_when_looking_for_the_person_s_value():
    d = _four_guesses_then("Try #W42 then.")
    actions(d, [("get", {"id": "#W42", "note": "first"}, "Error: #W42 not found")])
    d.check("get", {"id": "#W42", "note": "second"})  # its answer lost (a batch cut short)
    # the run still starts at the person's turn: two answered tries of theirs, not six
    assert run(d, [("get", {"id": "#W42", "note": "third"}, "Error: #W42 not found")])[0][:2] == ("allow", 2)


def test_a_value_the_person_gave_that_every_attempt_already_carried_is_no_new_try():
    # The user id the person gave rides along in every guess: only a value new in this attempt,
    # and theirs, starts the count anew.
    guess = [("get_order", {"user_id": "aarav_1177", "order_id": f"#W{i:02d}"}, "Error: order not found", True)
             for i in range(6)]
    d = ProgressDetector()
    actions(d, guess[:4])
    d.user_said("My user id is aarav_1177, I do not remember the order.")
    d.user_turn()
    assert actions(d, guess[4:6]) == ["warn", "halt"]


def test_a_call_the_person_asks_for_counts_from_their_turn_not_from_the_call_just_before():
    d = ProgressDetector()
    check = ("bash", {"command": "make check"}, "checks: 12 passed")
    actions(d, [check, check])
    d.user_said("Please run make check again.")
    d.user_turn()
    # their request: counted from their turn, then halted as any quiet repeat (halt_at)
    assert run(d, [check, check, check]) == [("allow", 1, ""), ("allow", 2, "repeat"), ("halt", 3, "repeat")]


def test_a_claude_code_refusal_after_a_blank_line_is_a_refusal():
    unread = ("Edit", {"file_path": "a.py", "old_string": "x", "new_string": "y"},
              "\n<tool_use_error>File has not been read yet. Read it first.</tool_use_error>", True)
    assert actions(ProgressDetector(), [unread, unread]) == ["allow", "allow"]  # no warning: refused


def test_answers_that_come_back_out_of_order_are_all_counted():
    # Parallel calls come back in the order they finish: the newest answered call is the
    # newest position, not the answer recorded last.
    d = ProgressDetector(window=3)
    for _ in range(3):
        d.check("get_status", {"job": "42"})
    for position in (2, 1, 0):
        d.record_answer("Error: job 42 not found", True, position=position)
    actions(d, [("read", {"path": "notes.md"}, "notes")])  # the window moves past call 0
    assert d.check("get_status", {"job": "42"}).action == "halt"


def test_the_window_s_first_calls_still_count_once_the_window_has_moved():
    # window 3: the 4th call sees calls 0..2; the two answered at positions 0 and 1 count.
    d = ProgressDetector(window=3)
    calls = [("get_status", {"job": "42"}, "Error: job 42 not found", True),
             ("get_status", {"job": "42"}, "Error: job 42 not found", True),
             ("read", {"path": "notes.md"}, "notes"),
             ("get_status", {"job": "42"}, "Error: job 42 not found", True)]
    assert actions(d, calls)[-1] == "halt"


def test_a_repeat_whose_answer_was_lost_between_is_still_the_same_call():
    # Nothing between but this call itself, one of its runs unanswered: quiet, halted at halt_at.
    d = ProgressDetector()
    actions(d, [("run_tests", {"k": "a"}, "3 passed")])
    d.check("run_tests", {"k": "a"})  # no answer recorded
    actions(d, [("run_tests", {"k": "a"}, "3 passed")])
    assert d.check("run_tests", {"k": "a"}).action == "halt"


@pytest.mark.parametrize("calls, said", [
    ([("make", {"t": "build"}, FAIL, True), ("bash", {"command": "sed -i s/a/b/ a.py"}, ""),
      ("make", {"t": "build"}, FAIL, True), ("bash", {"command": "sed -i s/b/c/ a.py"}, ""),
      ("make", {"t": "build"}, FAIL, True), ("make", {"t": "build"}, None)],
     "make ran 3 times with the same failure, though files were changed between"),
    ([("status", {"id": "1"}, "done"), ("ls", {"p": "."}, "a b"), ("status", {"id": "1"}, "done"),
      ("ls", {"p": "src"}, "c"), ("status", {"id": "1"}, "done"), ("status", {"id": "1"}, None)],
     "status ran 3 times with the same answer"),
])
def test_a_halt_s_reason_says_what_repeated_how_often_and_what_happened_between(calls, said):
    d = ProgressDetector()
    got = run(d, calls)
    assert got[-1][0] == "halt" and d.last.reason == said


def test_a_repeat_asked_for_again_says_the_user_spoke_between():
    d = ProgressDetector()
    status = ("status", {"id": "1"}, "done")
    actions(d, [status, ("ls", {"p": "."}, "a b"), status])
    d.user_said("Is it done?")
    d.user_turn()
    got = run(d, [("ls", {"p": "src"}, "c"), status, ("ls", {"p": "t"}, "d"), status])
    assert got[-1][0] == "warn"
    assert d.last.reason == "status ran 3 times with the same answer, though the user spoke between"


def test_a_wait_s_reason_names_the_command_it_polls():
    d = ProgressDetector()
    poll = ("bash", {"command": "gh run view 42"}, "status: in_progress")
    actions(d, [poll] * 3)
    assert d.check(*poll[:2]).reason.startswith("bash: gh run view 42 was polled 3 times")


def _stdin_polls(n: int) -> list[ProgressVerdict]:
    """Codex's write_stdin asking 30 s of waiting each, no clock in the transcript."""
    d, out = ProgressDetector(), []
    for _ in range(n):
        out.append(d.check("write_stdin", {"session_id": 7, "chars": "", "yield_time_ms": 30000}))
        d.record_answer("Process running with session ID 7\nOutput:\n")
    return out


def test_a_patient_poll_with_no_clock_to_judge_is_judged_by_its_count():
    # A `--timeout` or a tool's own wait is at most that long; with no clock to say how long
    # each took, the polls are counted as quick ones are: warned at the 5th, halted at the 6th.
    got = _stdin_polls(7)
    assert [v.action for v in got[:6]] == ["allow", "allow", "allow", "allow", "warn", "halt"]
    assert (got[5].count, got[5].threshold, got[5].rule) == (6, 6, "wait")
    assert got[5].reason == "write_stdin was polled 5 times with the same answer"


def test_a_poll_that_sleeps_five_seconds_each_time_is_patient_one_that_sleeps_one_is_not():
    patient = _poll(ProgressDetector(), 20, '{"status":"queued"}',
                    command=lambda k: "sleep 5 && gh run view 1 --json status")
    assert "halt" not in patient  # 100 s asked for in all: far from the 900 s limit
    quick = _poll(ProgressDetector(), 8, '{"status":"queued"}',
                  command=lambda k: "sleep 1 && gh run view 1 --json status")
    assert quick.index("halt") == 5


def test_a_wait_s_reason_says_how_many_polls_and_how_long():
    # (a reason comes with a warning: the next patient poll would pass a 200 s limit)
    d = ProgressDetector(wait_limit=200)
    _poll(d, 3, '{"status":"queued"}', every=60, command=lambda k: "sleep 60 && gh run view 1 --json status")
    v = d.check("bash", {"command": "sleep 60 && gh run view 1 --json status"}, at=1_764_000_000 + 180)
    assert (v.action, v.count, v.rule) == ("warn", 4, "wait")
    assert v.reason == "bash: sleep 60 && gh run view 1 --json status has waited 3 min with the same answer (3 times)"
    d = ProgressDetector()
    _poll(d, 3, '{"status":"queued"}', every=40)
    v = d.check("bash", {"command": "gh run view 1 --json status"}, at=1_764_000_000 + 120)
    assert v.reason == ("bash: gh run view 1 --json status was polled 3 times with the same answer, "
                        "without waiting between (2 min)")
    d = ProgressDetector()
    _poll(d, 3, '{"status":"queued"}', every=0.25)  # under a second, still said
    v = d.check("bash", {"command": "gh run view 1 --json status"}, at=1_764_000_000 + 0.75)
    assert v.reason.endswith("without waiting between (1 s)")
    d = ProgressDetector()
    _poll(d, 3, '{"status":"queued"}')
    v = d.check("bash", {"command": "gh run view 1 --json status"})
    assert v.reason == "bash: gh run view 1 --json status was polled 3 times with the same answer, without waiting between"


def test_a_quick_poll_whose_answer_has_not_moved_for_longer_than_the_limit_is_halted_early():
    # three polls asking no wait, each 8 minutes apart (a turn that thought a long time): the
    # unchanged answer spans more than wait_limit, so the third is halted, not the sixth
    assert _poll(ProgressDetector(), 3, '{"status":"queued"}', every=480) == ["allow", "allow", "halt"]


def test_a_poll_after_the_agent_s_own_change_waits_anew_by_count_and_by_clock():
    # CI polled for two minutes, a fix written, CI polled again 13 minutes later: the wait for
    # the fix starts at the fix (it was halted with no reason, timed from the first poll).
    d, t0 = ProgressDetector(), 1_764_000_000
    poll = {"command": "gh run view 1"}
    for k in range(3):
        d.check("bash", poll, at=t0 + 60 * k)
        d.record_answer('{"status":"queued"}')
    d.check("bash", {"command": "sed -i s/a/b/ ci.yml"}, at=t0 + 200)
    d.record_answer("")
    got = []
    for at in (t0 + 1000, t0 + 1060):
        v = d.check("bash", poll, at=at)
        got.append((v.action, v.count))
        d.record_answer('{"status":"queued"}')
    assert got == [("allow", 1), ("allow", 2)]


def test_a_poll_timed_only_from_some_call_on_is_judged_by_its_sleeps():
    # a transcript that starts stamping its calls part way through: no clock to span the run
    d = ProgressDetector()
    poll = {"command": "sleep 5 && gh run view 1"}
    for k in range(8):
        v = d.check("bash", poll, at=None if k < 4 else 1_764_000_000 + 5 * k)
        assert v.action == "allow", k  # 40 s of sleeping asked for: patient, far from the limit
        d.record_answer('{"status":"queued"}')


# ── the small words and clocks the reasons are made of ──


@pytest.mark.parametrize("n, text", [(1, "once"), (2, "twice"), (3, "3 times"), (12, "12 times")])
def test_counts_read_as_words(n, text):
    from loopledger.detectors.progress import _times

    assert _times(n) == text


@pytest.mark.parametrize("seconds, text", [(0, "0 s"), (89, "89 s"), (90, "2 min"), (900, "15 min"),
                                           (3600, "60 min")])
def test_waits_read_in_seconds_below_a_minute_and_a_half_then_in_minutes(seconds, text):
    from loopledger.detectors.progress import _minutes

    assert _minutes(seconds) == text


@pytest.mark.parametrize("at, seconds", [
    (None, None), (True, None), ("not a time", None), (1_700_000_000, 1_700_000_000.0), (12.5, 12.5),
    ("2026-01-01T00:00:00+00:00", 1_767_225_600.0),
    ("2026-01-01T00:00:00Z", 1_767_225_600.0),
    ("2026-01-01T00:00:00", 1_767_225_600.0),  # no zone: read as UTC, as transcripts write them
    ("2026-01-01T01:00:00+01:00", 1_767_225_600.0),
    (" 2026-01-01T00:00:00Z\n", 1_767_225_600.0),
])
def test_times_are_epoch_seconds_whatever_the_transcript_wrote(at, seconds):
    from loopledger.detectors.progress import _seconds

    assert _seconds(at) == seconds


def test_command_words_are_stripped_of_quotes_and_kept_from_four_characters():
    from loopledger.detectors.progress import _words

    assert _words("""grep -n 'main' "src/app.py" `date` ab abcd XRAY""") == {
        "grep", "main", "src/app.py", "date", "abcd", "XRAY"}


def test_a_time_without_a_zone_is_read_as_utc_whatever_the_machine_s_zone(monkeypatch):
    import time

    from loopledger.detectors.progress import _seconds

    monkeypatch.setenv("TZ", "America/New_York")
    time.tzset()
    try:
        assert _seconds("2026-01-01T00:00:00") == 1_767_225_600.0
    finally:
        monkeypatch.undo()
        time.tzset()


def test_a_spec_s_thresholds_all_reach_the_detector():
    spec = PolicySpec.parse("progress:window=30,halt_at=4,ok_halt_at=5,same_failure_at=6,rerun_halt_at=7,"
                            "wait_limit=60,wait_halt_at=9,across_turns=errors")
    d = make_policy(spec).detector
    assert (d.window, d.halt_at, d.ok_halt_at, d.same_failure_at, d.rerun_halt_at, d.wait_limit, d.wait_halt_at,
            d.across_turns) == (30, 4, 5, 6, 7, 60.0, 9, "errors")
