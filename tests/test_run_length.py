"""Seed 000's LoopDetector, rule by rule (design.md, "run-length")."""

from __future__ import annotations

import pytest
from loopledger.detectors import (
    DEFAULT_OBSERVATION_TOOLS,
    BatchRecord,
    LoopDetected,
    LoopDetector,
    RepeatOutcome,
    answers_hash,
    batch_signature,
    is_costly_batch,
    is_observation_batch,
)

EDIT = [("edit_file", {"path": "a.py", "text": "x"})]
READ = [("read_file", {"path": "a.py"})]
OBS = ("read", "grep")


def run(detector: LoopDetector, calls, times: int, **kw) -> int:
    """Check `calls` up to `times` times; return the 1-based occurrence that raised (0 if none)."""
    for i in range(1, times + 1):
        try:
            detector.check(calls, **kw)
        except LoopDetected:
            return i
    return 0


def test_max_strikes_two_allows_two_identical_batches_and_errors_on_the_third():
    assert run(LoopDetector(), EDIT, 10, max_strikes=2) == 3


def test_max_strikes_zero_errors_on_the_first():
    assert run(LoopDetector(), EDIT, 1, max_strikes=0) == 1


@pytest.mark.parametrize("s", [1, 3, 5])
def test_count_increments_before_compare(s):
    assert run(LoopDetector(), EDIT, 20, max_strikes=s, max_observation_steps=None) == s + 1


def test_error_carries_signature_and_counts():
    d = LoopDetector()
    d.check(EDIT)
    d.check(EDIT)
    with pytest.raises(LoopDetected) as info:
        d.check(EDIT)
    e = info.value
    assert e.signature == batch_signature(EDIT)
    assert (e.count, e.total, e.threshold) == (3, 3, 2)
    assert e.record == BatchRecord(e.signature)
    assert d.run.count == 3  # the occurrence stays counted


def test_different_signature_starts_a_new_run():
    d = LoopDetector()
    d.check(EDIT)
    d.check(EDIT)
    d.check(READ)
    assert (d.run.count, d.run.total) == (1, 1)
    d.check(EDIT)  # EDIT again: a new run, not the third occurrence
    assert d.run.count == 1


def test_call_order_and_ids_ignored_duplicates_kept():
    a, b = ("edit", {"x": 1}), ("run", {"c": "make"})
    d = LoopDetector()
    d.check([a, b])
    d.check([b, a])
    assert d.run.count == 2
    d.check([a, b, b])
    assert d.run.count == 1  # [a, b] != [a, b, b]


def test_identical_calls_within_one_batch_are_one_signature():
    d = LoopDetector()
    assert run(d, [("edit", {"x": 1}), ("edit", {"x": 1})], 5) == 3


def test_observation_classification():
    assert is_observation_batch([("Read", {}), ("grep_search", {})], OBS)
    assert not is_observation_batch([("Read", {}), ("edit", {})], OBS)
    assert not is_observation_batch([("read", {})], ())
    assert is_observation_batch([("MCP__FS__READ_TEXT", {})], ("read_text",))


@pytest.mark.parametrize("name", ["browser_navigate", "mcp__playwright__click", "fetch_webpage",
                                  "tools.fetch-webpage", "Browser_Click_Element", "navigate"])
def test_costly_names(name):
    assert is_costly_batch([("read_file", {}), (name, {})])


@pytest.mark.parametrize("name", ["get_clickable_elements", "clickhouse_query", "webfetch",
                                  "fetch", "webpage_fetch", "navigator", "read_file"])
def test_not_costly_names(name):
    assert not is_costly_batch([(name, {})])


def test_observation_batch_uses_max_observation_steps():
    assert run(LoopDetector(), READ, 30, max_strikes=2, observation_tools=OBS,
               max_observation_steps=15) == 16


def test_observation_batch_with_m_none_falls_back_to_max_strikes():
    assert run(LoopDetector(), READ, 30, max_strikes=2, observation_tools=OBS,
               max_observation_steps=None) == 3


def test_observation_allowance_lower_than_strikes_is_used_for_count():
    # effective_max = M for observation batches, even when M < S.
    assert run(LoopDetector(), READ, 30, max_strikes=5, observation_tools=OBS,
               max_observation_steps=1) == 2


def changing(d: LoopDetector, calls, times: int, answers=None, **kw) -> int:
    """Check + record a different (or given) answer each time; 1-based index that raised."""
    for i in range(1, times + 1):
        try:
            rec = d.check(calls, **kw)
        except LoopDetected:
            return i
        ans = answers(i) if answers else answers_hash(calls, [f"out {i}"] * len(calls))
        d.record_results(rec, ans)
    return 0


def test_changed_answers_reset_count_but_ceiling_holds_for_mutating_batches():
    # S=2, M=15: ceiling = 15; a mutating batch carried by changing answers stops at total 16.
    assert changing(LoopDetector(), EDIT, 40, max_strikes=2, observation_tools=OBS,
                    max_observation_steps=15) == 16


def test_with_m_none_ceiling_collapses_to_max_strikes():
    assert changing(LoopDetector(), EDIT, 40, max_strikes=2, observation_tools=OBS,
                    max_observation_steps=None) == 3


def test_exempt_observation_batch_with_changing_answers_never_errors():
    assert changing(LoopDetector(), READ, 200, max_strikes=2, observation_tools=OBS,
                    max_observation_steps=15) == 0


def test_costly_observation_batch_is_not_exempt():
    nav = [("browser_navigate", {"url": "http://x"})]
    assert changing(LoopDetector(), nav, 40, max_strikes=2, observation_tools=("browser",),
                    max_observation_steps=15) == 16


def test_costly_never_changes_the_threshold():
    nav = [("browser_navigate", {"url": "http://x"})]
    same = answers_hash(nav, ["page"])
    assert changing(LoopDetector(), nav, 40, answers=lambda i: same, max_strikes=2,
                    observation_tools=("browser",), max_observation_steps=15) == 16


def test_same_answers_are_strikes_and_unknown_answers_never_rescue():
    d = LoopDetector()
    rec = d.check(EDIT)
    assert d.record_results(rec, None) == RepeatOutcome.NOT_COMPARABLE
    rec = d.check(EDIT)
    assert d.record_results(rec, None) == RepeatOutcome.NOT_COMPARABLE
    with pytest.raises(LoopDetected):
        d.check(EDIT)


def test_record_results_outcomes():
    d = LoopDetector()
    assert d.record_results(BatchRecord("x"), "h") == RepeatOutcome.NOT_CURRENT
    rec = d.check(EDIT)
    assert d.record_results(rec, "h1") == RepeatOutcome.NOT_COMPARABLE  # nothing to compare yet
    rec = d.check(EDIT)
    assert d.record_results(rec, "h1") == RepeatOutcome.REPEATED
    assert d.run.count == 2


def test_changed_resets_count_to_one_total_untouched_and_none_is_remembered():
    d = LoopDetector()
    kw = dict(max_strikes=5, max_observation_steps=None)
    rec = d.check(EDIT, **kw)
    d.record_results(rec, "h1")
    rec = d.check(EDIT, **kw)
    assert d.record_results(rec, "h2") == RepeatOutcome.CHANGED
    assert (d.run.count, d.run.total) == (1, 2)
    rec = d.check(EDIT, **kw)
    assert d.record_results(rec, None) == RepeatOutcome.NOT_COMPARABLE
    rec = d.check(EDIT, **kw)
    # the previous answers are now unknown (None was remembered): not comparable, not repeated
    assert d.record_results(rec, "h2") == RepeatOutcome.NOT_COMPARABLE
    assert d.run.count == 3


def test_record_for_an_older_signature_is_not_current_and_changes_nothing():
    d = LoopDetector()
    old = d.check(EDIT)
    d.check(READ)
    assert d.record_results(old, "h") == RepeatOutcome.NOT_CURRENT
    assert d.run.answers is None


def test_break_run_forgets_everything():
    d = LoopDetector()
    d.check(EDIT)
    d.check(EDIT)
    d.break_run()
    assert d.run is None
    assert run(d, EDIT, 5) == 3


def test_empty_batch_is_refused():
    with pytest.raises(ValueError, match="empty batch"):
        LoopDetector().check([])


def test_state_reports_limits():
    d = LoopDetector()
    d.check(READ, max_strikes=2, observation_tools=OBS, max_observation_steps=15)
    s = d.state()
    assert s["observation"] and s["exempt"] and not s["costly"]
    assert (s["effective_max"], s["ceiling"], s["count"]) == (15, 15, 1)


def test_changing_the_configuration_between_checks_is_honoured():
    d = LoopDetector()
    tools = ["read"]
    d.check(READ, max_strikes=2, observation_tools=tools, max_observation_steps=15)
    assert d.state()["observation"]
    tools[0] = "grep"  # the same list, mutated: no stale classification
    d.check(READ, max_strikes=2, observation_tools=tools, max_observation_steps=15)
    assert not d.state()["observation"]
    with pytest.raises(LoopDetected):
        d.check(READ, max_strikes=2, observation_tools=tools, max_observation_steps=15)


def test_default_patterns_class_browser_reads_as_costly_observations():
    """With the defaults, a browser page load is read-only (allowance M) but never exempt."""
    nav = [("browser_navigate", {"url": "http://x"})]
    assert is_observation_batch(nav, DEFAULT_OBSERVATION_TOOLS) and is_costly_batch(nav)
    same = answers_hash(nav, ["page"])
    assert changing(LoopDetector(), nav, 40, answers=lambda i: same) == 16  # quiet: count > M = 15
    assert changing(LoopDetector(), nav, 40) == 16  # changing pages: total > ceiling 15
    snap = [("browser_snapshot", {})]
    assert is_observation_batch(snap, DEFAULT_OBSERVATION_TOOLS) and not is_costly_batch(snap)
    assert changing(LoopDetector(), snap, 200) == 0  # read-only, not costly: exempt
    click = [("browser_click", {"ref": "e12"})]
    assert not is_observation_batch(click, DEFAULT_OBSERVATION_TOOLS)
