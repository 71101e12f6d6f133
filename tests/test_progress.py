"""The progress detector: one test (at least) per rule of docs/architecture.md, "progress"."""

from __future__ import annotations

import copy
import csv
import json
from pathlib import Path

import pytest
from loopledger.detectors import ConfigError, PolicySpec, ProgressDetector, make_policy
from loopledger.detectors.progress import VOLATILE_PATTERNS, classify, classify_shell, reads_only, writes
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


def test_identical_call_with_the_same_successful_answer_halts_at_ok_halt_at():
    # Judged before it runs: the 4th identical call, after three equal answers, never executes.
    got = run(ProgressDetector(), [("read", {"p": "a"}, "same")] * 5)
    assert got[:4] == [("allow", 1, ""), ("warn", 2, "repeat"), ("warn", 3, "repeat"), ("halt", 4, "repeat")]


def test_identical_call_with_the_same_failure_halts_at_halt_at():
    got = run(ProgressDetector(), [("submit", {"f": "x"}, "Error: wrong flag")] * 3)
    assert got == [("allow", 1, ""), ("warn", 2, "repeat"), ("halt", 3, "repeat")]


def test_a_changed_answer_is_progress_and_clears_the_count():
    d = ProgressDetector()
    got = run(d, [("test", {}, "3 failed"), ("test", {}, "3 failed"), ("test", {}, "1 failed"),
                  ("test", {}, "1 failed"), ("test", {}, "1 failed")])
    assert [c for _, c, _ in got] == [1, 2, 3, 2, 3]  # the 3rd answer changed: the run restarts at it
    assert "halt" not in [a for a, _, _ in got]


def test_repeats_count_across_other_calls_inside_the_window():
    # Not only back to back: the django fix.patch written 4x with a sed between.
    calls = [("bash", {"c": "write"}, "ok"), ("bash", {"c": "write"}, "ok"), ("bash", {"c": "sed 1"}, "x"),
             ("bash", {"c": "write"}, "ok"), ("bash", {"c": "write"}, "ok")]
    assert actions(ProgressDetector(), calls)[-1] == "halt"


def test_repeats_further_apart_than_the_window_are_forgotten():
    filler = [("grep", {"n": i}, f"hit {i}") for i in range(4)]
    calls = [("read", {}, "same"), *filler, ("read", {}, "same"), *filler, ("read", {}, "same"),
             *filler, ("read", {}, "same")]
    assert actions(ProgressDetector(window=20), calls)[-1] == "halt"
    # window=4 holds the 4 calls between two reads, not the read before them
    assert set(actions(ProgressDetector(window=4), calls)) == {"allow"}
    assert actions(ProgressDetector(window=5), calls)[5] == "warn"


# ── rule 2: stale retry ───────────────────────────────────────────────────────────────────────


def _update(*flights: str, payment: str = "gift_card_1") -> dict:
    return {"flights": [{"flight_number": f, "date": "2024-05-13"} for f in flights],
            "payment_id": payment, "reservation_id": "XEWRD9"}


def test_same_error_with_arguments_that_keep_what_the_error_names_is_a_stale_retry():
    # tau-bench task 13: the agent adds a segment, HAT030 stays, the error stays.
    calls = [("update", _update("HAT030", "HAT223"), FAIL),
             ("update", _update("HAT030", "HAT223", "HAT052"), FAIL),
             ("update", _update("HAT030", "HAT052"), FAIL)]
    assert run(ProgressDetector(), calls) == [("allow", 1, ""), ("warn", 2, "retry"), ("halt", 3, "retry")]


def test_going_back_to_arguments_already_tried_with_that_error_is_a_stale_retry():
    err = "Error: payment amount does not add up"  # names nothing in the arguments
    calls = [("book", {"amount": 299}, err), ("book", {"amount": 310}, err), ("book", {"amount": 299}, err),
             ("book", {"amount": 310}, err)]
    assert [c for _, c, _ in run(ProgressDetector(), calls)] == [1, 1, 2, 3]


def test_trying_something_new_each_time_the_user_asks_is_not_a_loop():
    # tau-bench task 23 (normal): a different payment method each time, each asked for by the
    # user (a user turn between), the same error.
    err = "Error: gift card balance is not enough"
    d, got = ProgressDetector(), []
    for i in range(6):
        got += actions(d, [("update", _update("HAT072", payment=f"gift_card_{i}"), err)])
        d.user_turn()
    assert got == ["allow"] * 6


def test_a_new_attempt_ends_the_run_of_stale_retries():
    err = "Error: payment amount does not add up"
    calls = [("book", {"a": 1}, err), ("book", {"a": 1}, err), ("book", {"a": 2}, err), ("book", {"a": 2}, err)]
    assert [c for _, c, _ in run(ProgressDetector(), calls)] == [1, 2, 1, 2]


def test_a_success_of_the_tool_ends_the_retry_run():
    calls = [("update", _update("HAT030"), FAIL), ("update", _update("HAT030", "X"), FAIL),
             ("update", _update("HAT052"), '{"ok": true}'), ("update", _update("HAT030", "Y"), FAIL)]
    assert [c for _, c, _ in run(ProgressDetector(), calls)] == [1, 2, 1, 1]


def test_other_tools_failing_the_same_way_are_not_retries_of_this_one():
    calls = [("a", {"x": "HAT030"}, FAIL), ("b", {"x": "HAT030"}, FAIL), ("c", {"x": "HAT030"}, FAIL)]
    assert actions(ProgressDetector(), calls) == ["allow"] * 3


def test_values_shorter_than_four_characters_are_not_named_by_an_error():
    err = "Error: seat 12 is taken"
    calls = [("book", {"seat": 12, "n": i}, err) for i in range(3)]
    # never a stale retry (12 is not named): each retry counts 1, nearer its halt (3) than the run
    # of one failure (2 and 3 of same_failure_at 5)
    assert run(ProgressDetector(), calls) == [("allow", 1, ""), ("allow", 1, "retry"), ("allow", 1, "retry")]


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
    d = ProgressDetector(errors=[r"\AWrong flag"])
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
    only = ProgressDetector(volatile=[VOLATILE_PATTERNS[name]])
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


@pytest.mark.parametrize(("name", "args", "reads"), [
    ("str_replace_editor", {"command": "view", "path": "/w/parser.c"}, True),  # OpenHands
    ("str_replace_editor", {"command": "str_replace", "path": "/w/parser.c"}, False),
    ("execute_bash", {"command": 'grep -n "DEF(pattern);" /w/parser.c'}, True),  # ; inside quotes
    ("bash", {"command": "sed -n '220,260p' ./pvlib/pvsystem.py"}, True),
    ("bash", {"command": "sed -i 's/a/b/' x.py"}, False),
    ("bash", {"command": "cat > fix.py << 'EOF'\nprint(1)\nEOF"}, False),  # a write that starts with cat
    ("bash", {"command": "cat a.py && python a.py"}, False),
    ("bash", {"command": "grep -rn foo src | head -20"}, True),
    ("bash", {"command": "grep foo src 2>/dev/null"}, True),
    ("bash", {"command": "grep foo src > hits.txt"}, False),
    ("bash", {"command": "git diff -- a.py"}, True),
    ("bash", {"command": "git commit -am x"}, False),
    ("bash", {"command": "find . -name '*.pyc' -delete"}, False),
    ("bash", {"command": "tail -n 20 build.log"}, False),  # how agents poll a log
    ("shell", {"command": ["bash", "-lc", "cat setup.py"]}, True),  # Codex
    ("Read", {"file_path": "/w/a.py"}, False),  # a name alone does not say what it reads
    ("get_workflow_run", {"run_id": 1}, False),
    ("bash", {"command": "cat 'unbalanced"}, False),
])
def test_a_call_reads_only_when_its_arguments_say_so(name, args, reads):
    assert reads_only(name, args) is reads


def test_the_same_file_viewed_three_times_with_only_reads_between_halts_at_the_third():
    # ponyc-4595: view parser.c, grep, view, grep, view — the same truncated view each time.
    view = ("str_replace_editor", {"command": "view", "path": "/w/parser.c"}, "1\tDEF(x);\n<truncated>")
    calls = [view, ("execute_bash", {"command": "grep -n A /w/parser.c"}, "29:A"), view,
             ("execute_bash", {"command": "grep -n B /w/parser.c"}, "666:B"), view]
    assert actions(ProgressDetector(), calls) == ["allow", "allow", "warn", "allow", "halt"]


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


def test_a_repeated_call_answered_differently_clears_every_count():
    # A polled job: the status line moves only in its age (a duration), the logs move for real.
    calls = []
    for i in range(6):
        calls += [("shell", {"c": "kubectl get job"}, f"job 0/1 {i}m{10 + i}s"),
                  ("shell", {"c": "kubectl logs"}, f"batch {40 * i}/200 written")]
    assert "halt" not in actions(ProgressDetector(), calls)
    # Without the moving logs the status poll halts on its 4th identical answer.
    assert actions(ProgressDetector(), calls[::2])[3] == "halt"


# ── user turns ────────────────────────────────────────────────────────────────────────────────


def _turns(d: ProgressDetector, answer: str) -> list[str]:
    out = []
    for _ in range(4):
        out += actions(d, [("update", {"seg": "HAT030"}, answer)])
        d.user_turn()
    return out


def test_a_retry_the_user_asks_for_after_fixing_something_is_not_halted():
    # "I fixed the credentials, try again": the retry is the 2nd attempt (a warn at most), and
    # its answer changed, so the call starts afresh.
    d = ProgressDetector()  # across_turns=errors: the failure is kept over the user turn
    deploy = ("deploy", {"env": "prod"})
    got = actions(d, [(*deploy, "Error: invalid credentials for registry.example.com")])
    d.user_turn()
    got += actions(d, [(*deploy, "deployed build 412 to prod"), (*deploy, "deployed build 412 to prod"),
                       ("status", {"env": "prod"}, "prod: build 412 healthy")])
    assert got == ["allow", "warn", "warn", "allow"]  # the 3rd: the 1st repeat of the new answer
    # The same after two failures in the agent's own run: the fixed retry is its 3rd attempt with
    # the same error on record, which is what a "try again" loop looks like — halted (a known
    # limit, docs/detection.md "Beyond the corpus"); across_turns=none lets it through.
    for across, want in (("errors", "halt"), ("none", "allow")):
        d = ProgressDetector(across_turns=across)
        actions(d, [(*deploy, "Error: invalid credentials")] * 2)
        d.user_turn()
        assert actions(d, [(*deploy, "deployed")])[0] == want


def test_across_turns_errors_keeps_failures_but_forgets_successes():
    assert _turns(ProgressDetector(), FAIL)[2] == "halt"  # "try again" from the user changes nothing
    assert "halt" not in _turns(ProgressDetector(), '{"flights": []}')  # a re-search after user input


def test_across_turns_none_forgets_everything_and_all_keeps_everything():
    assert "halt" not in _turns(ProgressDetector(across_turns="none"), FAIL)
    assert _turns(ProgressDetector(across_turns="all"), '{"flights": []}')[3] == "halt"


def test_user_turns_in_replay_reach_the_detector():
    events = []
    for i in range(3):
        events += [UserTurn("try again"), Batch((Call(f"c{i}", "update", {"seg": "HAT030"}),)),
                   Answers((Answer(f"c{i}", FAIL),))]
    verdicts = [c.verdict for s in replay(events, PolicySpec("progress")) for c in s.checks]
    assert verdicts == ["allow", "warn", "halt"]
    verdicts = [c.verdict for s in replay(events, PolicySpec.parse("progress:across_turns=none"))
                for c in s.checks]
    assert verdicts == ["allow", "allow", "allow"]


# ── thresholds and validation ─────────────────────────────────────────────────────────────────


def test_thresholds_are_parameters():
    calls = [("r", {}, "same")] * 6
    assert actions(ProgressDetector(warn_at=3, ok_halt_at=5), calls)[:5] == [
        "allow", "allow", "warn", "warn", "halt"]
    assert actions(ProgressDetector(warn_at=4, halt_at=4), [("r", {}, "Error: x")] * 4) == [
        "allow", "allow", "allow", "halt"]


@pytest.mark.parametrize(("spec", "field"), [
    ("progress:window=1", "window"),
    ("progress:window=10001", "window"),
    ("progress:warn_at=1", "warn_at"),
    ("progress:halt_at=2", "halt_at"),
    ("progress:ok_halt_at=2", "ok_halt_at"),
    ("progress:warn_at=4,halt_at=3", "halt_at"),
    ("progress:warn_at=5,halt_at=5,ok_halt_at=4", "ok_halt_at"),
    ("progress:across_turns=sometimes", "across_turns"),
    ("progress:volatile=timestmap", "volatile"),
    ("progress:volatile=re:(unclosed", "volatile"),
    ("progress:volatile=re:x*", "volatile"),  # matches the empty string
    ("progress:errors=warning", "errors"),
    ("progress:window=many", "window"),
])
def test_bad_parameters_are_config_errors_naming_the_field(spec, field):
    with pytest.raises(ConfigError) as e:
        PolicySpec.parse(spec)
    assert e.value.field == field


def test_spec_defaults_round_trip_and_name_the_patterns():
    spec = PolicySpec("progress")
    assert spec.params["volatile"] == tuple(VOLATILE_PATTERNS)
    assert spec.params["errors"] == ("error_prefix", "nonzero_returncode", "exit_code", "traceback",
                                     "command_not_found", "nothing_found", "rejected")
    assert PolicySpec.parse(spec.text) == spec
    assert PolicySpec.parse("progress:volatile=uuid|re:pid \\d+").params["volatile"] == ("uuid", "re:pid \\d+")


# ── state, snapshots, the policy ──────────────────────────────────────────────────────────────


def test_state_shows_each_tracked_call_its_answer_digest_and_stale_count():
    d = ProgressDetector()
    run(d, [("read", {"p": 1}, "same"), ("read", {"p": 1}, "same"), ("update", {"x": 1}, "Error: no")])
    d.check("read", {"p": 1})
    s = json.loads(json.dumps(d.state()))
    assert [c["tool"] for c in s["calls"]] == ["read", "read", "update", "read"]
    assert [c["stale"] for c in s["calls"]] == [1, 2, 1, 3]
    assert s["calls"][0]["answer"] == s["calls"][1]["answer"] and len(s["calls"][0]["answer"]) == 8
    assert s["calls"][2]["answer"].endswith("!") and s["calls"][3]["answer"] is None
    assert s["calls"][0]["args"] == s["calls"][3]["args"] != s["calls"][2]["args"]
    assert (s["count"], s["rule"], s["window"], s["halt_at"], s["ok_halt_at"]) == (3, "repeat", 20, 3, 4)


def test_a_deep_copy_is_an_independent_snapshot():
    d = ProgressDetector()
    run(d, [("r", {}, "same"), ("r", {}, "same")])
    snap = copy.deepcopy(d)
    d.check("r", {})
    d.record_answer("changed")
    assert snap.state()["calls"] != d.state()["calls"]
    assert snap.check("r", {}).count == 3


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
    assert (halt.count, halt.threshold) == (4, 4) and "same answer 3 times" in halt.reason


# ── the labelled corpus (../shared, when present) ─────────────────────────────────────────────

CORPUS = Path(__file__).resolve().parent.parent.parent / "shared" / "corpus"


@pytest.mark.skipif(not (CORPUS / "labels.csv").exists(), reason="../shared/corpus is not here")
def test_progress_halts_the_labelled_loops_inside_and_no_normal_session():
    """The measured result docs/detection.md reports, as a regression check against a person's
    labels (not against anything the detector computed)."""
    from loopledger.analysis.replay_table import sessions_of
    from loopledger.formats import read

    inside, early, normal = [], [], []
    files: dict[str, dict[str, list]] = {}
    for row in csv.DictReader((CORPUS / "labels.csv").open()):
        if row["label"] not in ("loop", "normal"):
            continue
        if row["file"] not in files:
            files[row["file"]] = {(i.key if i else ""): ev for i, ev, _ in sessions_of(read(CORPUS / row["file"]))}
        sessions = files[row["file"]]
        events = sessions.get(row["session_key"]) or next(iter(sessions.values()))
        position, halt = 0, None
        for step in replay(events, PolicySpec("progress")):
            if isinstance(step.event, Batch):
                halt = next((position + c.idx + 1 for c in step.checks if c.verdict == "halt"), None)
                if halt:
                    break
                position += len(step.event.calls)
        name = f"{row['file']}#{row['session_key']}"
        if row["label"] == "normal" and halt:
            normal.append(name)
        elif row["label"] == "loop" and halt:
            first, last = map(int, row["loop_calls"].split("-"))
            (inside if first <= halt <= last else early).append(name)
    assert normal == [] and early == []
    assert len(inside) == 11


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


@pytest.mark.parametrize("command", [
    "cat a >& out.txt",  # >& FILE sends both streams into a file
    "sed -n 'w out' a",  # sed's w command writes a file
    "sed -ni p a",  # -i inside a cluster of short options
    "find . -name x -fprintf out %p",
    "git diff --output=p",
    "git grep -Ovim foo",  # runs a pager program on the hits
    "rg --pre ./x.sh foo",  # runs ./x.sh on every file
    "tree -o listing.txt",
    "cat `ls *.py`",  # a command substitution runs something: not vouched for
    "cat $(find . -name x)",
    "cat a; rm a",  # chained
    "sed -n -i 1p a",
    "sed -n --in-place 1p a",
])
def test_a_reading_program_told_to_write_or_run_something_is_not_a_read(command):
    assert not reads_only("bash", {"command": command})


@pytest.mark.parametrize("command", ["cat a 2>&1", "sed -n '220,260p' a", "sed -n '/def f/p' a",
                                     "git diff HEAD~1", "rg -n foo src | head -5", "find . -name '*.py'"])
def test_reads_stay_reads(command):
    assert reads_only("bash", {"command": command})


@pytest.mark.parametrize("name,args,wrote", [
    ("bash", {"command": "cat > fix.py << 'EOF'\nx = 1\nEOF"}, True),
    ("bash", {"command": "sed -i 's/a/b/' src/x.py"}, True),
    ("bash", {"command": "cd /repo && git checkout -- src"}, True),
    ("bash", {"command": "cat a >& out.txt"}, True),
    ("Edit", {"file_path": "a.py", "old_string": "x", "new_string": "y"}, True),
    ("str_replace_editor", {"command": "str_replace", "path": "a.py", "old_str": "x", "new_str": "y"}, True),
    ("Write", {"file_path": "a.py", "content": "x"}, True),
    ("bash", {"command": "pytest -q"}, False),
    ("bash", {"command": "npm start > /dev/null 2>&1 &"}, False),
    ("think", {"thought": "the amount does not add up"}, False),
    ("send_message", {"content": "hello"}, False),  # content without a path is not a file
])
def test_a_write_is_told_by_its_arguments(name, args, wrote):
    assert writes(name, args) is wrote


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


def test_a_stale_retry_needs_the_same_error():
    # the same arguments, a different error each time: each retry goes back to tried arguments
    # but the error moved, so the retry run and the repeat restart at the newest (counts 2, 2)
    calls = [("book", {"amount": 299}, f"Error: {why}") for why in ("card declined", "seat taken", "no fare")]
    assert run(ProgressDetector(), calls) == [("allow", 1, ""), ("warn", 2, "repeat"), ("warn", 2, "repeat")]


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


def test_a_poll_that_moved_lately_halts_only_after_poll_span_equal_answers():
    # answers A B B B B B B: at each call the newest run of B is r long; B moved from A at the
    # 2nd call, so the threshold is poll_span + 1 = 6 until the run of B's reaches 5
    answers = ["A"] + ["B"] * 6
    calls = [("get_status", {"id": 7}, a) for a in answers]
    got = run(ProgressDetector(), calls)
    assert [a for a, _, _ in got] == ["allow", "warn", "warn", "warn", "warn", "warn", "halt"]



@pytest.mark.parametrize("command,reads,wrote", [
    ("sed -n -e 1,5p a", True, False),
    ("sed -n --expression=1,5p a", True, False),
    ("sed -nE '/x/p' a", True, False),
    ("sed -n -e 1p -e 'w x' a", False, False),
    ("sed 1,5p a", False, False),  # without -n sed prints every line: not vouched for
    ("sed -n -f script.sed a", False, False),
    ("sed -n", False, False),
    ("sed -n 's/a/b/p' a", False, False),  # only printing commands are vouched for
    ("sed -i.bak s/a/b/ f", False, True),
    ("perl -pi -e s/a/b/ f", False, True),
    ("perl -ne print f", False, False),
    ("tee out.txt", False, True),
    ("cp a b", False, True),
    ("/bin/rm -f a", False, True),
    ("git apply x.patch", False, True),
    ("git log --output=x", False, True),
    ("find . -name '*.pyc' -delete", False, True),
    ("git status", True, False),
    ("git", False, False),
    ("cat a > /dev/null", True, False),
    ("cat a >> out", False, True),
    ("cat a &> log", False, True),
    ("grep x a >&2", True, False),
    ("echo 'unbalanced", False, False),
    ("", False, False),
    ("ls -la", False, False),
])
def test_shell_commands_are_classified_by_what_they_do(command, reads, wrote):
    assert classify_shell(command) == (reads, wrote)


@pytest.mark.parametrize("args,expected", [
    ({"command": "view", "path": "a.py"}, (True, False)),
    ({"command": "create", "path": "a.py"}, (False, True)),
    ({"cmd": ["cat", "x"]}, (True, False)),
    ({"command": ["bash", "-lc", "cat x"]}, (True, False)),
    ({"command": ["bash", "-lc", "cat x > y"]}, (False, True)),
    ({"input": "*** Begin Patch\n*** Update File: a.py\n"}, (False, True)),
    ({"path": "a.py"}, (False, False)),
    (["cat", "x"], (False, False)),
    (None, (False, False)),
])
def test_a_call_is_classified_by_its_arguments(args, expected):
    assert classify("tool", args) == expected


# ── shapes from the corpus engineer's labelled sessions (corpus/labels.csv) ──────────────────


def test_a_transient_failure_gets_one_attempt_more():
    # tau-bench with injected 503s (task-12, normal): retried twice, the 3rd attempt runs
    calls = [("get_order_details", {"order_id": "#W5490111"}, "Error: 503 Service Unavailable")] * 4
    assert actions(ProgressDetector(), calls) == ["allow", "warn", "warn", "halt"]
    # not transient: the 3rd is halted
    calls = [("get_order_details", {"order_id": "#W5490111"}, "Error: order not found")] * 3
    assert actions(ProgressDetector(), calls)[-1] == "halt"


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


def test_the_same_write_back_to_back_halts_whatever_it_answers():
    # jackson-databind-4072 (loop): the identical `edit 1:1` insertion, the file growing each time
    edit = {"command": "edit 1:1\nclass A {}\nend_of_edit"}
    calls = [("edit", edit, f"[File: /r/A.java ({8 + 15 * i} lines total)]") for i in range(5)]
    assert actions(ProgressDetector(), calls)[:4] == ["allow", "warn", "warn", "halt"]
    # with another call between each, it is an edit → check cycle: no halt from this rule
    between = []
    for i, c in enumerate(calls):
        between += [c, ("bash", {"command": f"javac A{i}.java"}, f"compiled {i}")]
    assert "halt" not in actions(ProgressDetector(), between)


def test_a_check_after_another_call_changed_files_gets_one_more():
    # django-13964 (normal): `cat patch.txt` after regenerating it with a `git diff > patch.txt`
    calls = []
    for i in range(5):
        calls += [("bash", {"command": f"git diff HEAD~{i} > patch.txt"}, ""),
                  ("bash", {"command": "cat patch.txt"}, "diff --git a/x b/x")]
    got = actions(ProgressDetector(), calls)
    assert got[1::2] == ["allow", "warn", "warn", "warn", "halt"]  # the 5th check: ok_halt_at + 1


def test_the_per_tool_index_stays_bounded():
    # 1,000 distinct tool names through a window of 5: only tools still in the window are kept
    d = ProgressDetector(window=5)
    for i in range(1000):
        d.check(f"tool_{i}", {})
        d.record_answer("ok")
    assert len(d._by_tool) <= 4 * 5


def test_a_late_answer_of_an_older_call_does_not_move_progress_back():
    # two polls in one batch (answers recorded after both checks, the newer first): the poll
    # moved at the newer position; the older answer arriving late must not reset that
    d = ProgressDetector()
    for text in ("a", "a", "a"):
        d.check("st", {"job": 1})
        d.record_answer(text)
    p1 = d.check("st", {"job": 1}).position
    p2 = d.check("st", {"job": 1}).position
    d.record_answer("b", position=p2)
    d.record_answer("c", position=p1)  # moved too, but before p2: the latest move stays p2
    assert d._moved["st"] == p2


@pytest.mark.parametrize("command,reads", [
    ("sed -n -e", False),  # -e without its script
    ("sed -n --expression='/a=b/p' f", True),  # the script is everything after the first =
    ("sed -n -e 1p -e '$p' f", True),
    ("/usr/bin/cat a", True),  # a program named by its path
    ("./bin/grep x a", True),
    ("find -exec grep x {} +", False),
    ("find . -execdir cat {} +", False),
    ("git grep --open-files-in-pager=vim foo", False),
    ("rg --pre=./x.sh foo", False),
])
def test_reads_are_told_by_every_option(command, reads):
    assert reads_only("bash", {"command": command}) is reads


@pytest.mark.parametrize("command", ["tree -o out.txt", "tree -oout.txt", "file -C -m magic",
                                     "file --compile -m magic", "git log --output=x",
                                     "find . -fprint0 out", "find . -fls out"])
def test_options_that_write_files_are_writes(command):
    assert classify_shell(command) == (False, True)


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


def test_state_names_every_parameter():
    d = ProgressDetector(window=9, warn_at=2, halt_at=4, ok_halt_at=5, across_turns="none",
                         same_failure_at=6, poll_span=3, rerun_halt_at=7)
    st = d.state()
    assert {k: st[k] for k in ("window", "warn_at", "halt_at", "ok_halt_at", "across_turns", "same_failure_at",
                               "poll_span", "rerun_halt_at")} == {
        "window": 9, "warn_at": 2, "halt_at": 4, "ok_halt_at": 5, "across_turns": "none",
        "same_failure_at": 6, "poll_span": 3, "rerun_halt_at": 7}
    assert (st["count"], st["rule"], st["calls"]) == (0, "", [])
    d.check("t", {})
    d.record_answer("Error: x")
    d.check("t", {})
    st = d.state()
    assert (st["count"], st["rule"]) == (2, "repeat")
    assert [(c["tool"], c["stale"], c["answer"] is None) for c in st["calls"]] == [("t", 1, False), ("t", 2, True)]
    assert st["calls"][0]["answer"].endswith("!")  # a failure


@pytest.mark.parametrize("kwargs,field,rule,message", [
    ({"window": 1}, "window", "window >= 2", "window: must be >= 2, got 1"),
    ({"window": 10_001}, "window", "window <= 10000", "window: must be <= 10000, got 10001"),
    ({"window": "5"}, "window", "window is an integer", "window: must be an integer, got '5'"),
    ({"halt_at": True}, "halt_at", "halt_at is an integer", "halt_at: must be an integer, got True"),
    ({"warn_at": 1}, "warn_at", "warn_at >= 2", "warn_at: must be >= 2, got 1"),
    ({"halt_at": 2}, "halt_at", "halt_at >= 3", "halt_at: must be >= 3, got 2"),
    ({"ok_halt_at": 2}, "ok_halt_at", "ok_halt_at >= 3", "ok_halt_at: must be >= 3, got 2"),
    ({"same_failure_at": 2}, "same_failure_at", "same_failure_at >= 3", "same_failure_at: must be >= 3, got 2"),
    ({"warn_at": 4, "halt_at": 3}, "halt_at", "halt_at >= warn_at", "halt_at: must be >= warn_at (4), got 3"),
    ({"warn_at": 4, "halt_at": 4, "ok_halt_at": 3}, "ok_halt_at", "ok_halt_at >= warn_at",
     "ok_halt_at: must be >= warn_at (4), got 3"),
    ({"warn_at": 4, "halt_at": 4, "ok_halt_at": 4, "same_failure_at": 3}, "same_failure_at",
     "same_failure_at >= warn_at", "same_failure_at: must be >= warn_at (4), got 3"),
    ({"poll_span": 1}, "poll_span", "poll_span >= 2", "poll_span: must be >= 2, got 1"),
    ({"warn_at": "2"}, "warn_at", "warn_at is an integer", "warn_at: must be an integer, got '2'"),
    ({"ok_halt_at": "4"}, "ok_halt_at", "ok_halt_at is an integer", "ok_halt_at: must be an integer, got '4'"),
    ({"same_failure_at": "5"}, "same_failure_at", "same_failure_at is an integer",
     "same_failure_at: must be an integer, got '5'"),
    ({"rerun_halt_at": "4"}, "rerun_halt_at", "rerun_halt_at is an integer",
     "rerun_halt_at: must be an integer, got '4'"),
    ({"poll_span": 2.5}, "poll_span", "poll_span is an integer", "poll_span: must be an integer, got 2.5"),
    ({"rerun_halt_at": 2}, "rerun_halt_at", "rerun_halt_at >= 3", "rerun_halt_at: must be >= 3, got 2"),
    ({"across_turns": "x"}, "across_turns",
     "across_turns is one of none|errors|all", "across_turns: must be one of none, errors, all, got 'x'"),
    ({"errors": "error_prefix"}, "errors", "errors is a list of patterns",
     "errors: must be a list of regular expressions, got 'error_prefix'"),
    ({"volatile": [""]}, "volatile", "volatile holds non-empty patterns",
     "volatile: every pattern must be a non-empty string, got ''"),
    ({"volatile": [3]}, "volatile", "volatile holds non-empty patterns",
     "volatile: every pattern must be a non-empty string, got 3"),
    ({"errors": ["("]}, "errors", "errors holds valid regular expressions", None),
    ({"volatile": ["a*"]}, "volatile", "volatile patterns match something", "volatile: 'a*' matches the empty string"),
])
def test_each_bad_setting_is_named_with_its_rule_and_message(kwargs, field, rule, message):
    from loopledger.detectors.progress import validate  # noqa: F401 — the rules live there

    with pytest.raises(ConfigError) as got:
        ProgressDetector(**kwargs)
    assert (got.value.field, got.value.rule) == (field, rule)
    if message is not None:
        assert str(got.value) == message
    else:
        assert str(got.value).startswith("errors: '(' is not a valid regular expression (")


# ── pinned by mutation testing (bench/mutants.py): each asserts a rule's exact edge ───────────


@pytest.fixture(autouse=True)
def _fresh_classification_cache():
    # reads/writes are cached by tool + arguments digest across detectors; a test must see its
    # own classification, not one an earlier test left
    from loopledger.detectors import progress

    progress._CLASSES.clear()


def test_the_policy_names_the_rule_that_halted():
    def reasons(calls):
        events = [UserTurn("go")]
        for i, (name, args, text) in enumerate(calls):
            events += [Batch((Call(str(i), name, args),)), Answers((Answer(str(i), text),))]
        return [c.reason for s in replay(events, PolicySpec("progress")) for c in s.checks]

    got = reasons([("t", {"a": 1}, "Error: no")] * 3)
    # each reason names the threshold as the form names it: a repeated failure halts at halt_at
    assert got == ["", "t: the same answer 1 times [halt_at]", "t: the same answer 2 times [halt_at]"]
    got = reasons([("update", _update("HAT030", f"HAT0{50 + i}"), FAIL) for i in range(3)])
    assert got[-1] == "update: the same error, retried 2 times without addressing it [halt_at]"
    got = reasons([("get", {"id": f"#W0{i}"}, f"Error: #W0{i} not found") for i in range(5)])
    assert got[-1] == "get: the same failure 4 times in a row, whatever the arguments [same_failure_at]"


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


def test_a_transient_repeat_and_a_transient_retry_each_get_one_more():
    # the repeat alone (a success of the tool between ends the retry chain and the run)
    calls = []
    for _ in range(4):
        calls += [("get", {"id": "x"}, "Error: 503 Service Unavailable"), ("get", {"id": "y"}, "ok")]
    assert actions(ProgressDetector(), calls)[0::2] == ["allow", "warn", "warn", "halt"]
    # the retry alone (new arguments that keep the value the error names)
    calls = [("get", {"id": "#W5490111", "try": i}, "Error: 503 Service Unavailable for #W5490111")
             for i in range(4)]
    assert actions(ProgressDetector(), calls) == ["allow", "warn", "warn", "halt"]


def test_a_poll_reports_the_threshold_it_is_held_to():
    d = ProgressDetector()
    thresholds = []
    for a in ["A"] + ["B"] * 6:
        thresholds.append(d.check("get_status", {"id": 7}).threshold)
        d.record_answer(a)
    # moving (B moved from A within the last 5 answers): poll_span + 1; then ok_halt_at
    assert thresholds[2:] == [6, 6, 6, 6, 4]


def test_a_run_of_one_failure_starts_after_the_user_turn():
    d = ProgressDetector()
    guess = [("get", {"id": f"#W{i:02d}"}, f"Error: #W{i:02d} not found") for i in range(20)]
    actions(d, guess[:4])
    d.user_turn()
    assert actions(d, guess[4:9]) == ["allow", "allow", "allow", "warn", "halt"]


def test_a_kept_failure_and_a_new_call_after_a_user_turn_count_one():
    d = ProgressDetector()
    actions(d, [("book", {"a": 1}, "Error: declined")])
    d.user_turn()  # the failure is kept (across_turns=errors) but the run ends at the turn
    assert run(d, [("book", {"a": 2}, "Error: declined")]) == [("allow", 1, "")]


def test_ties_go_to_the_repeat_only_when_there_is_one():
    d = ProgressDetector(ok_halt_at=3)
    got = run(d, [("book", {"a": 1}, "Error: declined"), ("book", {"a": 2}, "Error: declined")])
    assert got[1] == ("allow", 1, "retry")


def test_the_run_of_one_failure_warns_one_before_it_halts():
    calls = [("book", {"seat": 12, "n": i}, "Error: seat 12 is taken") for i in range(5)]
    assert actions(ProgressDetector(), calls) == ["allow", "allow", "allow", "warn", "halt"]


def test_writes_in_a_row_count_only_from_ok_halt_at():
    edit = {"command": "edit 1:1\nclass A {}\nend_of_edit"}
    d = ProgressDetector()
    got = []
    for i in range(3):
        v = d.check("edit", edit)
        got.append((v.count, v.threshold))
        d.record_answer(f"[File: /r/A.java ({8 + 15 * i} lines total)]")
    assert got[2] == (2, 6)  # two in a row before it: below ok_halt_at, the repeat rule reports


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


@pytest.mark.parametrize("command,reads", [
    ("sed 1p main.py", False),  # an "n" in a file name is not -n
    ("sed -E 1p a", False),  # another option is not -n
    ("sed --expression=1p a", False),  # a long option holding an n is not -n
    ("sed '1,5p' -n a", True),  # the script first, the option after
    ("sed -n -f p a", False),  # a script file, whatever its name
    ("sed -n --file=x p", False),
    ("cat a |", False),  # an empty stage
    ("cat a | python x.py", False),  # every stage must read
    ("cat a && cat b", False),  # chained
])
def test_sed_and_pipelines_edge_cases(command, reads):
    assert reads_only("bash", {"command": command}) is reads


@pytest.mark.parametrize("command", ["find -fls out", "git stash"])
def test_short_writes(command):
    assert classify_shell(command) == (False, True)


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


def test_the_boundaries_of_each_setting_are_allowed():
    from loopledger.detectors.progress import validate

    d = ProgressDetector(window=10_000, poll_span=2, rerun_halt_at=3)
    assert (d.window, d.poll_span, d.rerun_halt_at) == (10_000, 2, 3)
    validate(20, 2, 3, 4, "errors")  # the new rules' settings default when not given


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


def test_a_different_error_ends_the_retry_chain_for_good():
    calls = [("update", _update("HAT030", "HAT050"), FAIL),
             ("update", _update("HAT030", "HAT051"), "Error: payment declined"),
             ("update", _update("HAT030", "HAT052"), FAIL),
             ("update", _update("HAT030", "HAT053"), FAIL)]
    assert actions(ProgressDetector(), calls)[3] == "warn"  # the chain is the 3rd only: retry 2


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


def test_a_restore_repeated_between_different_edits_halts_at_its_fifth():
    # The view's answer changes every round, but only because the agent's own sed -i changed the
    # file: no evidence the world moves by itself. The restore answered alike after writes by
    # other calls halts at ok_halt_at + 1 = 5: the 5th checkout is call 13 (3 calls a round).
    assert _first_halt(_restore_rounds(6)) == 13


def test_restores_further_apart_than_the_window_are_not_halted():
    # django-13964's shape (normal): 7 restores, each round debugging something new over 12 calls.
    assert _first_halt(_restore_rounds(7, gap=9)) is None


def test_a_user_turn_between_restores_is_not_halted():
    # each round asked for by the person: a success is not kept over a user turn
    assert _first_halt(_restore_rounds(6, turn=True)) is None


def test_a_repeat_answered_differently_with_no_write_between_still_shows_the_world_moving():
    # `ps` whose pid moves by itself (no write between its calls) rescues the tool's other
    # successful repeats, as before: a server polled while it starts.
    d = ProgressDetector()
    calls = []
    for i in range(6):
        calls += [("bash", {"command": "ps aux | grep server"}, f"pid {1000 + i * 7} server"),
                  ("bash", {"command": "curl -s localhost:8080/health"}, "starting")]
    assert "halt" not in actions(d, calls)


def test_a_repeat_answered_differently_after_a_write_rescues_nothing():
    d = ProgressDetector()
    calls = []
    for i in range(6):
        calls += [("bash", {"command": f"sed -i 's/a{i}/b{i}/' x.py"}, ""),
                  ("bash", {"command": "cat x.py"}, f"b{i}"),
                  ("bash", {"command": "curl -s localhost:8080/health"}, "starting")]
    got = actions(d, calls)
    assert got.index("halt") == 3 * 4 + 2  # the 5th curl: a success after writes by other calls


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


def test_a_poll_whose_only_change_is_the_clock_halts_at_ok_halt_at():
    calls = [("bash", {"command": "tail -n 3 job.log; date"},
              f"epoch 3 loss 0.41\nTue Dec  1 12:{10 + i:02d}:0{i} UTC 2026") for i in range(6)]
    assert actions(ProgressDetector(), calls)[:4] == ["allow", "warn", "warn", "halt"]


def test_a_poll_that_keeps_moving_is_never_halted():
    calls = [("bash", {"command": "tail -n 1 job.log"}, f"epoch {i // 2} loss 0.{90 - i}") for i in range(30)]
    assert "halt" not in actions(ProgressDetector(), calls)


def test_guessed_names_each_found_nowhere_halt_as_one_failure():
    # jackson-databind-4360's shape: a search over guessed class names, "No matches found" each
    # time (the tool's own words, not flagged), the guess a word of the command string
    names = ["SerializedString", "EnumValues", "EnumSerializer", "ObjectWriter", "ObjectMapper", "MapperConfig"]
    calls = [("search_dir", {"command": f"search_dir {n}.java"}, f'No matches found for "{n}.java" in /repo')
             for n in names]
    got = run(ProgressDetector(), calls)
    assert [a for a, _, _ in got][:5] == ["allow", "allow", "allow", "warn", "halt"]
    assert got[4][2] == "failures"


@pytest.mark.parametrize(("text", "failed"), [
    ('No matches found for "x.java" in /repo', True),
    ("No files found", True),
    ("ls: cannot access 'build/': No such file or directory", True),
    ("/bin/bash: line 12: cd: fastxml/: No such file or directory", True),
    ("Found 3 matches for \"x\"", False),
    ("src/a.py:10: # no matches found here means nothing", False),
    ("log line 1\nlog line 2\nls: cannot access 'x': No such file or directory", False),  # not at the opening
])
def test_nothing_found_is_a_failure_at_the_opening(text, failed):
    assert ProgressDetector().is_failure(text) is failed


def test_a_wrong_answer_from_a_checker_is_a_failure():
    # the ctf eps loop: `submit flag{…}` answered "Wrong flag!" — a rejection opening the answer
    d = ProgressDetector()
    assert d.is_failure("Wrong flag!") and d.is_failure("Incorrect answer, try again")
    assert d.is_failure("Invalid reservation id")
    assert not d.is_failure("The wrong flag was submitted earlier; this one is right: flag{x}")
    assert actions(d, [("submit", {"command": "submit flag{a}"}, "Wrong flag!")] * 3) == ["allow", "warn", "halt"]


# ── near repeats: a poll whose arguments differ only in their numbers ──────────────────────


def _sleep_poll(answers: list[str]) -> list:
    return [("bash", {"command": f"sleep {30 * (i + 1)} && gh run view 4242 --json status"}, a)
            for i, a in enumerate(answers)]


def test_a_poll_waiting_longer_each_time_on_an_answer_that_never_moves_halts_at_its_fifth():
    # each call's arguments are new (the sleep grows), so no exact repeat exists; the answer is
    # the same five times: max(ok_halt_at, same_failure_at) = 5
    got = run(ProgressDetector(), _sleep_poll(['{"status": "in_progress"}'] * 6))
    assert [a for a, _, _ in got][:5] == ["allow", "allow", "warn", "warn", "halt"]
    assert got[4] == ("halt", 5, "repeat")


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


def test_every_sed_script_given_by_a_long_expression_option_must_only_print():
    # `--expression S` is `-e S`: a later `-e p` does not make a script that writes a copy a read.
    assert classify_shell("sed -n --expression '1w copy.txt' -e p notes.txt")[0] is False
    assert classify_shell("sed -n --expression 1p -e 2p notes.txt") == (True, False)
    # one word to the shell, one script to sed: `1,3w` writes lines 1-3 to copy.txt, whatever
    # its first characters look like
    assert classify_shell("sed -n 1,3w copy.txt notes.txt")[0] is False


def test_a_quoted_command_substitution_runs_another_program_so_is_no_read():
    # shlex keeps "$(pwd)" as one word: it is still a program run, not an argument to vouch for.
    assert classify_shell('tree "$(pwd)"') == (False, False)
    assert classify_shell('cat "$(ls)"') == (False, False)


def test_an_input_redirect_and_a_quoted_angle_bracket_are_not_writes():
    assert classify_shell("cat < notes.txt") == (True, False)
    assert classify_shell('grep -n "<X>" page.xml') == (True, False)


def test_a_redirect_with_no_target_is_no_read():
    assert classify_shell("grep x a.py >")[0] is False


def test_closing_a_stream_is_not_a_write():
    assert classify_shell("grep x a.py 2>&-") == (True, False)


@pytest.mark.parametrize(("argv", "reads"), [
    (["bash", "-c", "cat x"], True),  # a shell given a script: the script is the command
    (["bash", "-c", "rm x"], False),
    (["cat", "a.txt", "b.txt"], True),  # three words without -c: an argv, not a script
])
def test_an_argv_is_a_shell_script_only_after_dash_c(argv, reads):
    assert reads_only("shell", {"command": argv}) is reads


def test_an_edit_is_a_write_and_never_a_read():
    assert classify("str_replace_based_edit_tool", {"path": "a.py", "old_str": "x", "new_str": "y"}) == (False, True)
    assert classify("Write", {"file_path": "a.py", "content": "x = 1\n"}) == (False, True)


def test_a_patch_is_a_write_even_after_leading_blank_lines():
    assert writes("apply_patch", {"input": "\n  *** Begin Patch\n*** Update File: a.py\n"})


def test_a_copy_keeps_the_arguments_of_a_call_still_waiting_for_its_answer():
    # A snapshot taken between a call and its answer: the error that comes back names the flight
    # the copied call asked for, so a retry that keeps that flight is stale (rule 2).
    d = ProgressDetector()
    d.check("book", {"flight": "HAT030", "seat": "12A"})
    snap = copy.deepcopy(d)
    snap.record_answer(FAIL)
    v = snap.check("book", {"flight": "HAT030", "seat": "14C"})
    assert (v.action, v.count, v.rule) == ("warn", 2, "retry")


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


def test_an_error_pattern_with_global_flags_is_still_case_insensitive():
    # `(?s)` cannot sit inside one alternation of them all: such patterns are searched one by one,
    # and still ignore case (rule 3).
    d = ProgressDetector(errors=[r"(?s)\Afatal.*aborted"])
    assert d.is_failure("FATAL: disk full\nABORTED")
    assert not d.is_failure("all fine")


def test_no_error_patterns_means_only_flagged_answers_fail():
    d = ProgressDetector(errors=[])
    assert not d.is_failure("Error: x")
    assert d.is_failure("fine", is_error=True)


def test_a_pattern_that_matches_only_the_empty_answer_is_refused():
    with pytest.raises(ConfigError):
        ProgressDetector(volatile=["^$"])


def test_a_late_answer_of_an_older_call_keeps_the_tools_newer_answer_in_view():
    d = ProgressDetector(window=3)
    p0 = d.check("api", {"q": "a"}).position
    d.check("api", {"q": "b"})
    d.record_answer("same")
    d.record_answer("other", position=p0)  # the first call's answer arrives last
    run(d, [("x", {}, "1"), ("y", {}, "2")])
    v = d.check("api", {"q": "b"})  # the window (3) still holds the answered {"q": "b"}
    assert (v.action, v.count, v.rule) == ("warn", 2, "repeat")


def test_the_policy_builds_its_detector_with_every_parameter_of_its_spec():
    spec = PolicySpec.parse("progress:same_failure_at=6,poll_span=3,rerun_halt_at=5")
    p = make_policy(spec)
    assert p.spec == spec
    assert (p.detector.same_failure_at, p.detector.poll_span, p.detector.rerun_halt_at) == (6, 3, 5)


def test_an_unknown_pattern_name_is_refused_with_the_names_known():
    with pytest.raises(ConfigError) as e:
        PolicySpec.parse("progress:volatile=timestmap")
    msg = str(e.value)
    assert "unknown pattern 'timestmap'" in msg
    assert "timestamp, clock, duration" in msg and msg.endswith(", or re:<regular expression>")
    assert "pattern names" in e.value.rule


def test_a_success_before_its_tool_moved_ends_the_repeat_and_an_older_failure_does_not_join():
    # Rule 5 then rule 1: status(job 1) failed, then succeeded; the tool moved later (job 2 polled
    # with a new answer). The success is no evidence, and the older failure is not this call's
    # latest answer: nothing repeats.
    calls = [("status", {"job": 1}, "Error: x"), ("status", {"job": 1}, "ok"),
             ("status", {"job": 2}, "a"), ("status", {"job": 2}, "b"), ("status", {"job": 1}, None)]
    assert run(ProgressDetector(), calls)[-1] == ("allow", 1, "")


def test_equal_answers_before_the_tool_moved_do_not_make_a_settled_poll_look_moving():
    # job 1 answered A once, then S ever after; job 2 moved at the 5th call. Only job 1's three S
    # after that move count (4th call: ok_halt_at), and within its last poll_span (5) answers
    # (S S S S S) nothing changed: the poll rule gives no extra rope.
    one, two = {"job": 1}, {"job": 2}
    calls = [("status", one, "A"), ("status", one, "S"), ("status", one, "S"), ("status", two, "x"),
             ("status", two, "y"), ("status", one, "S"), ("status", one, "S"), ("status", one, "S")]
    d = ProgressDetector()
    run(d, calls)
    v = d.check("status", one)
    assert (v.action, v.count, v.rule, v.threshold) == ("halt", 4, "repeat", 4)


def test_an_answer_from_before_a_changed_answer_does_not_join_the_run():
    # Rule 1: A, B, A — the run restarts at B and again at the last A: count 2, not 3 (a halt).
    calls = [("submit", {"f": "x"}, "Error: A"), ("submit", {"f": "x"}, "Error: B"),
             ("submit", {"f": "x"}, "Error: A"), ("submit", {"f": "x"}, None)]
    assert run(ProgressDetector(), calls)[-1] == ("warn", 2, "repeat")


def test_a_write_anywhere_inside_a_retry_chain_gives_it_rerun_halt_at():
    # Rule 2: pay A, (edit), pay B, pay A, pay B — all declined. The 3rd stale attempt (B again
    # after A again) would halt at halt_at; a file changed after the chain's first failure, so
    # rerun_halt_at (4) applies: a warn, whatever failure came after the edit.
    edit = ("edit", {"path": "a.py", "old_str": "x", "new_str": "y"}, "ok")
    calls = [("pay", {"card": "A"}, "Error: declined"), edit, ("pay", {"card": "B"}, "Error: declined"),
             ("pay", {"card": "A"}, "Error: declined")]
    d = ProgressDetector()
    run(d, calls)
    v = d.check("pay", {"card": "B"})
    assert (v.action, v.count, v.rule) == ("warn", 2, "repeat")  # the retry: 3 of rerun_halt_at 4


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


def test_each_reason_names_the_parameter_its_threshold_comes_from():
    # A success repeated: ok_halt_at.
    assert _reasons([("read", {"p": 1}, "same")] * 2)[-1] == "read: the same answer 1 times [ok_halt_at]"
    # A re-read after another call changed files: one more than ok_halt_at.
    cat = ("bash", {"command": "cat patch.txt"}, "diff")
    assert _reasons([cat, _EDIT, cat])[-1] == "bash: the same answer 1 times [ok_halt_at + 1]"
    # A poll whose answer moved within its last poll_span answers: poll_span + 1.
    poll = [("status", {"job": 1}, a) for a in ["A", "B", "B"]]
    assert _reasons(poll)[-1] == "status: the same answer 1 times [poll_span + 1]"
    # A retry of the same error with a file changed since its first failure: rerun_halt_at.
    pay = [("pay", {"card": "VISA0001", "try": i}, "Error: card VISA0001 declined") for i in range(3)]
    assert _reasons([pay[0], _EDIT, pay[1], pay[2]])[-1] == (
        "pay: the same error, retried 2 times without addressing it [rerun_halt_at]")
    # A failure repeated after an edit (rerun_halt_at=7: no other parameter is 7 or 6; the run of
    # one failure pushed out of the way).
    fail = ("test", {"k": "all"}, "Error: 1 failed")
    assert _reasons([fail, _EDIT, fail, fail], "progress:rerun_halt_at=7,same_failure_at=9")[-1] == (
        "test: the same answer 2 times [rerun_halt_at]")


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


def test_a_near_repeat_run_starts_no_earlier_than_where_the_tool_last_moved():
    # sleep 1 is asked again at #3 and answered otherwise ("x" then "y", nothing written between):
    # the tool moved at #3. The near run of #5 is #4 and #3 (the moved call itself counts, the
    # equal answers #2 and #1 before it do not): count 3, warned, not the 5 that halts.
    calls = [("bash", _poll(1), "x"), ("bash", _poll(2), "y"), ("bash", _poll(3), "y"),
             ("bash", _poll(1), "y"), ("bash", _poll(4), "y"), ("bash", _poll(5), "y")]
    assert run(ProgressDetector(), calls)[5] == ("warn", 3, "repeat")


def test_an_unanswered_poll_neither_breaks_a_near_repeat_run_nor_joins_it():
    # #3 has no answer: the run of #5 is #4, #2, #1 (three equal answers): count 4, warned
    calls = [("bash", _poll(1), "x"), ("bash", _poll(2), "x"), ("bash", _poll(3), None),
             ("bash", _poll(4), "x"), ("bash", _poll(5), "x")]
    assert run(ProgressDetector(), calls)[4] == ("warn", 4, "repeat")


def test_a_near_repeat_needs_two_equal_answers_of_its_own_shape():
    # #2 is a near repeat of #1 only (#0 has another shape, though the same answer): one answer
    # before it, so no near repeat yet
    calls = [("bash", {"command": "ls /tmp"}, "ok"), ("bash", _poll(1), "ok"), ("bash", _poll(2), "ok")]
    assert run(ProgressDetector(), calls)[2] == ("allow", 1, "")


_EDIT = ("Edit", {"file_path": "ci.yml", "old_string": "a", "new_string": "b"}, "ok")


def test_a_write_from_the_near_runs_oldest_call_on_ends_it_one_just_before_does_not():
    # an edit between #1 and #2 polls: the world may have changed, no near repeat
    assert run(ProgressDetector(), [("bash", _poll(1), "x"), _EDIT, ("bash", _poll(2), "x"),
                                    ("bash", _poll(3), "x")])[3] == ("allow", 1, "")
    # the edit before the first poll: polls 1, 2 answered alike, the third warned (count 3)
    assert run(ProgressDetector(), [_EDIT, ("bash", _poll(1), "x"), ("bash", _poll(2), "x"),
                                    ("bash", _poll(3), "x")])[3] == ("warn", 3, "repeat")


def test_a_repeated_write_answered_otherwise_moves_its_tool():
    # the append at #2 is #1 again, answered otherwise with no write strictly between them: the
    # bash world moved at #2, so `cat log` (#0) asked again at #3 has no earlier answer since: a
    # first ask (allow, 1), not a repeat
    append = {"command": "echo hi >> notes.txt && wc -l notes.txt"}
    calls = [("bash", {"command": "cat log.txt"}, "L"), ("bash", append, "1 notes.txt"),
             ("bash", append, "2 notes.txt"), ("bash", {"command": "cat log.txt"}, "L")]
    assert run(ProgressDetector(), calls)[3] == ("allow", 1, "")


def test_a_run_of_one_failure_ignores_guessed_words_quoted_in_a_command_string():
    # every guess is named by the error (quotes stripped from the command's words; a 4-character
    # word counts; a word's own letters are kept, X included): one failure five steps running
    names = ["alpha_config", "Xbeta.java", "conf", "delta_cfg", "omega_set"]
    calls = [("bash", {"command": f"search_dir '{n}'"}, f'No matches found for "{n}"', True) for n in names]
    assert actions(ProgressDetector(), calls)[4] == "halt"


def test_a_near_repeat_is_found_only_when_the_two_newest_answers_are_word_for_word_equal():
    # the cheap first test of near repeats (progress.py _near_repeats): polls whose answers differ
    # in a clock reading are not near repeats, whatever normalizing would make of them
    calls = [("bash", _poll(i), f"in_progress at 10:00:0{i}") for i in range(1, 5)]
    assert run(ProgressDetector(), calls) == [("allow", 1, "")] * 4


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


def test_refusals_back_to_back_still_halt_as_before():
    # nothing ran between: the identical refusal is still a failure repeated (halt_at, the 3rd)
    got = run(ProgressDetector(), [("bash", {"command": "ls"}, "a.py")] + [_refusal()] * 3)
    assert [a for a, _, _ in got] == ["allow", "allow", "warn", "halt"]
    assert got[-1][1:] == (3, "repeat")


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
