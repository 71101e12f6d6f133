"""The "Why" sentences and positions (loopledger.analysis.explain): hand-written expectations per detector."""

from __future__ import annotations

import math

from loopledger.analysis import explain
from loopledger.analysis.explain import CallRow
from loopledger.detectors.policy import make_policy
from loopledger.events import Batch, Call


def test_run_length_halt_reads_as_the_issue_asks():
    assert explain.sentence("run-length", "halt", 3, 3, 2, "same batch 3 times in a row (max 2)", "run_tests") == (
        "run_tests — the same batch 3 times in a row with unchanged answers; at most 2 allowed")


def test_run_length_ceiling_halt_names_the_ceiling_from_its_reason():
    text = explain.sentence("run-length", "halt", 1, 16, 15, "carried past the ceiling 15 by changing answers", "Read")
    assert text == "Read — the same batch 16 times in this run; its answers kept changing, but at most 15 are " \
                   "allowed in one run"


def test_the_sentence_uses_the_detectors_own_numbers():
    # Built by the real policy: the sentence carries the check's count and threshold.
    pol = make_policy("ladder")
    pol.user_turn()
    batch = Batch((Call("1", "Bash", {"cmd": "make"}),))
    checks = [pol.check(batch)[0] for _ in range(4)]
    halt = checks[-1]
    assert halt.verdict == "halt"
    text = explain.sentence("ladder", halt.verdict, halt.count, halt.total, halt.threshold, halt.reason, "Bash")
    assert text == "Bash — the same call with the same arguments 4 times in a row (mutating tool); halts at 4"
    warn = checks[1]
    assert explain.sentence("ladder", warn.verdict, warn.count, None, warn.threshold, warn.reason, "Bash") == \
        "Bash — the same call with the same arguments 2 times in a row (mutating tool); warns at 2"


def test_window_cycle_stagnation():
    assert explain.sentence("window", "halt", 3, None, 3, "grep 3 times in the last 8 calls", "grep") == \
        "grep — the same call 3 times among the last 8 calls; halts at 3"
    said = "edit → test: the same 2 calls 3 times in a row, answered the same each time"
    assert explain.sentence("cycle", "warn", 3, 2, 3, said, "test") == \
        explain.sentence("cycle", "warn", 3, 2, 3, "period 2 ×3: edit → test", "test") == \
        "edit → test — the same 2 calls repeated 3 times in a row with unchanged answers; warns at 3"
    assert explain.sentence("stagnation", "halt", 6, None, 5, "the same reply 6 times in the last 20 prose turns") == \
        "the same reply 6 times in the last 20 replies; at most 5 allowed"


def test_progress_sentence_is_its_own_reason_and_where_it_stops():
    said = "Bash: npm test ran twice with the same failure"
    assert explain.sentence("progress", "halt", 3, None, 3, said, "Bash") == f"{said}; stopped before attempt 3"
    said = "Bash: npm test ran twice with the same answer"
    assert explain.sentence("progress", "warn", 3, None, 4, said, "Bash") == f"{said}; attempt 4 will be stopped"
    # a wait is judged by the time it waited: no attempt to name
    said = "Bash: gh run view 1 has waited 16 min with the same answer (16 times)"
    assert explain.sentence("progress", "halt", 17, None, None, said, "Bash") == said


def test_a_progress_reason_from_an_older_ledger_is_read_as_it_was_written():
    # older versions tagged the threshold's name: count 2 = the 2nd attempt, 1 earlier; 4 is where it halts.
    text = explain.sentence("progress", "warn", 2, None, 4, "run_tests: the same answer 1 times [ok_halt_at]",
                            "run_tests")
    assert text == ("run_tests — the same call with the same arguments got the same answer once before: this is "
                    "attempt 2; halts at attempt 4 (ok_halt_at = 4)")
    assert "warns at" not in text and "1 times" not in text
    retry = explain.sentence("progress", "halt", 3, None, 3,
                             "pytest: the same error, retried 2 times without addressing it [halt_at]", "pytest")
    assert retry == ("pytest — the same error twice before, each time retried without addressing it: this is "
                     "attempt 3; halts at attempt 3 (halt_at = 3)")


def test_a_shell_call_is_named_by_its_command():
    assert explain.tool_words("bash", '{"command": "git commit -am fix"}') == "bash: git commit -am fix"
    assert explain.tool_words("exec_command", {"cmd": ["bash", "-lc", "pytest -x"]}) == "exec_command: pytest -x"
    assert explain.tool_words("Read", '{"file_path": "a.py"}') == "Read"
    assert explain.tool_words("bash", "not json") == "bash"
    # Arguments the timeline read cut short (their first characters): the command's start still names it.
    assert explain.tool_words("bash", '{"timeout": 5, "command": "git push origin ma') == "bash: git push origin ma"
    long = explain.tool_words("bash", {"command": "x" * 200})
    assert len(long) == len("bash: ") + explain.COMMAND_CHARS and long.endswith("…")


def test_calls_are_named_by_their_session_number():
    # One number per call (issue 37: "call #205 (step 171, record 103)" gave it three); the line of
    # the source file only where a page passes it (where a person opens the file).
    assert explain.call_ref(12, 35, 37) == "call #12 (line 37)"
    assert explain.call_ref(1, 0) == "call #1"
    assert explain.call_ref(None, 7) == "step 7"
    assert explain.call_list([4, 7, 10]) == "calls #4, #7 and #10"
    assert explain.call_list([3]) == "call #3"


def test_unknown_detector_gets_the_generic_sentence_and_never_raises():
    assert explain.sentence("gemini-cli", "halt", 4, None, 3, "stale retry: same error", "write_file") == \
        "write_file — gemini-cli said halt: stale retry: same error (count 4, threshold 3)"
    assert explain.sentence("my-plugin", "warn") == "my-plugin said warn"
    # NaN and None from a DataFrame are "no number", never "nan".
    text = explain.sentence("openhands", "halt", math.nan, None, float("nan"), None, None)
    assert text == "openhands said halt" and "nan" not in text


def test_a_broken_explainer_falls_back(monkeypatch):
    def boom(w):
        raise RuntimeError("bug")

    monkeypatch.setitem(explain.EXPLAINERS, "boom", boom)
    assert explain.sentence("boom", "halt", 2, None, 2, "", "x") == "x — boom said halt (count 2, threshold 2)"


def test_register_a_plugin_sentence(monkeypatch):
    monkeypatch.setitem(explain.EXPLAINERS, "roo", explain.EXPLAINERS.get("roo"))
    explain.register("roo", lambda w: f"{w.tool} repeated {w.count}×")
    assert explain.sentence("roo", "halt", 3, None, 3, "", "apply_diff") == "apply_diff repeated 3×"


def test_positions_never_show_minus_one():
    assert explain.position(13, -1) == "step 13 (whole batch)"
    assert explain.position(13, 0) == "step 13"
    assert explain.position(13, 2) == "step 13 call 2"
    assert explain.position(None) == "—"
    assert explain.positions([(101, 0), (103, 0), (105, 0)]) == "steps 101, 103 and 105"
    assert explain.positions([(7, 1)]) == "step 7 call 1"
    assert explain.positions([(i, 0) for i in range(20)], limit=3) == "steps 0, 1 and 2 (and 17 more)"


def _calls(*specs) -> list[CallRow]:
    return [CallRow(seq, idx, tool, args, ans) for seq, idx, tool, args, ans in specs]


def test_repeated_batches_for_a_batch_level_halt_start_at_the_first_of_the_run():
    calls = _calls((1, 0, "ls", "a", "x"), (3, 0, "test", "t", "fail"), (5, 0, "test", "t", "fail"),
                   (7, 0, "test", "t", "fail"))
    assert explain.repeated_calls("run-length", calls, 7, -1, 3, 3) == [(3, 0), (5, 0), (7, 0)]
    # A different batch in between ends the run of identical batches.
    calls = _calls((1, 0, "test", "t", "f"), (3, 0, "ls", "a", "x"), (5, 0, "test", "t", "f"), (7, 0, "test", "t", "f"))
    assert explain.repeated_calls("run-length", calls, 7, -1, 2, 2) == [(5, 0), (7, 0)]


def test_repeated_calls_per_call_and_cycle():
    calls = _calls((1, 0, "grep", "g", "1"), (2, 0, "edit", "e", "ok"), (3, 0, "grep", "g", "1"),
                   (4, 0, "edit", "e", "ok"), (5, 0, "grep", "g", "1"), (6, 0, "edit", "e2", "ok"))
    assert explain.repeated_calls("window", calls, 5, 0, 3) == [(1, 0), (3, 0), (5, 0)]
    assert explain.repeated_calls("some-plugin", calls, 5, 0) == [(1, 0), (3, 0), (5, 0)]
    assert explain.repeated_calls("cycle", calls, 5, 0, 2, 2) == [(2, 0), (3, 0), (4, 0), (5, 0)]
    assert explain.repeated_calls("stagnation", calls, 9, -1) == []  # a prose halt has no calls
    # Retries whose arguments moved (progress' stale retry): the tool's last `count` calls.
    moved = _calls((1, 0, "write", "a", "E"), (2, 0, "ls", "l", "x"), (3, 0, "write", "b", "E"), (4, 0, "write", "c", "E"))
    assert explain.repeated_calls("progress", moved, 4, 0, 3) == [(1, 0), (3, 0), (4, 0)]


def test_identical_marks_name_the_first_occurrence():
    calls = _calls((1, 0, "grep", "g", "A"), (3, 0, "grep", "g", "B"), (5, 0, "grep", "g", "B"), (6, 1, "ls", "g", "A"))
    marks = explain.identical_marks(calls)
    assert (1, 0) not in marks
    assert marks[(3, 0)] == ("arguments identical to step 1", "")
    assert marks[(5, 0)] == ("arguments identical to step 1", "answer identical to step 3")
    assert (6, 1) not in marks  # another tool with the same hashes is not the same call


def test_setting_labels_are_short_and_none_is_no_limit():
    assert explain.short_setting({"max_strikes": 3}) == "strikes=3"
    assert explain.short_setting({"max_strikes": 2, "max_observation_steps": None}) == \
        "strikes=2 observation_steps=no limit"
    assert explain.short_setting({"read_only_halt_at": 5, "window": 8}) == "ro_halt_at=5 window=8"
