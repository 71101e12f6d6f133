"""The three seed guards and the stagnation companion through the public API (loopledger.guards),
called the way a user porting the upstream tests would call them: the standalone objects with the
seeds' own signatures, and LiveGuard (no ledger) with each seed's policy, one call at a time.

Upstreams: seed 000 = mmogr/gglib (crates/gglib-core/src/domain/agent/{loop_detection,stagnation},
crates/gglib-proxy/src/loop_guard_*_tests.rs); seed 003 = MukundaKatta/tool-loop-guard
(tests/test_guard.py); seed 002's article names no public suite (its text is the reference).
"""

from __future__ import annotations

import pytest
from loopledger import guards
from loopledger.guards import (
    ConfigError,
    LadderGuard,
    LiveGuard,
    LoopDetected,
    LoopDetectedError,
    LoopDetector,
    LoopGuard,
    PolicySpec,
    RepeatOutcome,
    StagnationDetected,
    StagnationDetector,
    Thresholds,
    answers_hash,
    default_key_fn,
    is_costly_batch,
    is_observation_batch,
)


def test_every_seed_name_an_upstream_test_imports_is_public():
    for name in ("LoopDetector", "LoopDetected", "RepeatOutcome", "BatchRecord", "is_observation_batch",
                 "is_costly_batch", "StagnationDetector", "StagnationDetected", "LadderGuard", "LadderVerdict",
                 "Thresholds", "WARN_NOTICE", "BLOCK_MESSAGE", "LoopGuard", "LoopDetectedError",
                 "default_key_fn", "ConfigError", "canonical_json", "answers_hash"):
        assert name in guards.__all__ and hasattr(guards, name), name


# ── seed 000: LoopDetector.check(calls, max_strikes, observation_tools, max_observation_steps) ──

def test_run_length_check_then_record_results_as_the_agent_loop_does():
    d = LoopDetector()
    calls = [{"name": "get_output", "args": {}}]  # dict calls, as a JSON-minded port writes them
    for i in range(10):  # a poll whose answer moves every time is progress
        record = d.check(calls, 2, [], 15)
        d.record_results(record, answers_hash(calls, [f"line {i}"]))
    record = d.check(calls, 2, [], 15)
    assert d.record_results(record, answers_hash(calls, ["line 9"])) == RepeatOutcome.REPEATED
    with pytest.raises(LoopDetected) as info:
        d.check(calls, 2, [], 15)
    assert info.value.count == 3


def test_run_length_outcomes_are_the_ledger_words():
    assert [o.value for o in RepeatOutcome] == ["changed", "repeated", "not_comparable", "not_current"]
    assert RepeatOutcome.CHANGED == "changed"


def test_run_length_break_run_is_the_user_turn():
    d = LoopDetector()
    d.check([("make", {})], 2, [], 15)
    d.check([("make", {})], 2, [], 15)
    d.break_run()
    d.check([("make", {})], 2, [], 15)
    d.check([("make", {})], 2, [], 15)
    with pytest.raises(LoopDetected):
        d.check([("make", {})], 2, [], 15)


def test_run_length_classifiers_are_public():
    assert is_observation_batch([("playwright_mcp_browser_snapshot", {})], ["snapshot"])
    assert not is_observation_batch([("browser_snapshot", {})], [])
    assert is_costly_batch([("read_file", {}), ("mcp__playwright__click", {})])
    assert not is_costly_batch([("clickhouse_query", {})])


def test_stagnation_record_text_called_tool_max_steps():
    d = StagnationDetector()
    for _ in range(50):
        d.record("Let me look at the file.", True, 5)  # narration on a tool turn: never recorded
    for _ in range(5):
        d.record("I cannot proceed.", False, 5)
    with pytest.raises(StagnationDetected) as info:
        d.record("I cannot proceed.", False, 5)
    assert (info.value.count, info.value.max_steps, info.value.window) == (6, 5, 20)


# ── seed 003: LoopGuard, exactly its README ─────────────────────────────────────────────────

def test_window_readme_example_routes_on_the_structured_fields():
    guard = LoopGuard(8, 3)  # with_capacity(8, 3)
    seen = []
    try:
        for _ in range(5):
            guard.record("search_web", {"q": "anthropic prompt cache"})
            seen.append("ran")
    except LoopDetectedError as e:
        assert (e.tool_name, e.tool_args, e.count, e.window, e.threshold) == (
            "search_web", {"q": "anthropic prompt cache"}, 3, 8, 3)
    assert seen == ["ran", "ran"]  # "The guard catches it on the third repeat"


def test_window_readme_api_lines():
    guard = LoopGuard(8, 3)
    guard.record("search", {"q": "x"})
    assert guard.would_raise("search", {"q": "x"}) is False
    assert len(guard) == 1 and guard.recent_keys() == [default_key_fn("search", {"q": "x"})]
    guard.reset()
    assert len(guard) == 0 and guard.recent_keys == []


def test_window_readme_stable_key_ignores_request_id_and_ts():
    def stable_key(tool_name, args):
        cleaned = {k: v for k, v in args.items() if k not in ("request_id", "ts")} if isinstance(args, dict) else args
        return default_key_fn(tool_name, cleaned)

    guard = LoopGuard(10, 3, stable_key)  # with_key_fn(10, 3, stable_key)
    guard.record("search", {"q": "x", "request_id": 1, "ts": 10})
    guard.record("search", {"q": "x", "request_id": 2, "ts": 11})
    with pytest.raises(LoopDetectedError):
        guard.record("search", {"q": "x", "request_id": 3, "ts": 12})


def test_window_try_new_threshold_exceeds_window_is_a_config_error():
    with pytest.raises(ConfigError) as info:
        LoopGuard(3, 4)
    assert (info.value.field, info.value.rule) == ("threshold", "threshold <= window")
    assert isinstance(info.value, ValueError)


# ── seed 002: LadderGuard ────────────────────────────────────────────────────────────────────

def test_ladder_allow_warn_block_halt_and_the_halt_diagnostics():
    g = LadderGuard()
    v = [g.check("grep_search", {"query": "x"}) for _ in range(4)]
    assert [x.action for x in v] == ["allow", "warn", "block", "halt"]
    assert (v[-1].reason, v[-1].tool, v[-1].args, v[-1].count) == ("repeated_tool_calls", "grep_search",
                                                                   '{"query":"x"}', 4)


def test_ladder_bad_thresholds_name_the_field():
    with pytest.raises(ConfigError) as info:
        LadderGuard(read_only=Thresholds(2, 4, 3))
    assert info.value.field == "read_only_halt_at"


# ── LiveGuard with each seed's policy (no ledger): what an agent loop sees ───────────────────

def _verdicts(guard: LiveGuard, calls, answer=lambda i: "no matches") -> list[str]:
    out = []
    for i, (tool, args) in enumerate(calls):
        d = guard.call(tool, args, call_id=f"c{len(out)}-{i}")
        out.append(d.verdict)
        if not d.refused:
            guard.answer(f"c{len(out) - 1}-{i}", answer(i))
    return out


def test_live_ladder_warns_blocks_then_halts_and_a_user_turn_starts_over():
    with LiveGuard(PolicySpec("ladder")) as g:
        decisions = [g.call("grep_search", {"pattern": "foo"}, call_id=f"c{i}") for i in range(5)]
        assert [d.verdict for d in decisions] == ["allow", "warn", "block", "halt", "after_halt"]
        assert [(d.refused, d.stops) for d in decisions[1:4]] == [(False, False), (True, False), (True, True)]
        assert decisions[3].reason.startswith("repeated_tool_calls: grep_search")
        assert decisions[0].message() == ""
        # seed 002's own words for the warn notice and the blocked call, verbatim (the seed's text)
        assert decisions[1].message().endswith(
            "[System Notice] You have executed this tool repeatedly with identical arguments without "
            "progress. Do not repeat identical calls. Adjust your search pattern, change the target path, "
            "or switch tools.")
        assert "was not executed" in decisions[2].message() and "grep_search" in decisions[2].message()
        g.user("try another pattern")
        assert g.call("grep_search", {"pattern": "foo"}, call_id="c9").verdict == "allow"


def test_live_run_length_is_result_aware():
    with LiveGuard("run-length") as g:
        # a poll whose output moves is progress; the same answer twice is a strike
        assert _verdicts(g, [("build_status", {})] * 6, answer=lambda i: f"{i} of 6 done") == ["allow"] * 6
    with LiveGuard("run-length") as g:
        assert _verdicts(g, [("build_status", {})] * 3, answer=lambda i: "failed") == ["allow", "allow", "halt"]


def test_live_window_halts_on_the_threshold_th_occurrence_in_the_window():
    with LiveGuard("window:window=4,threshold=3") as g:
        calls = [("search", {"q": "x"}), ("fetch", {"u": 1}), ("search", {"q": "x"}), ("search", {"q": "x"})]
        assert _verdicts(g, calls) == ["allow", "allow", "allow", "halt"]


def test_live_guard_rejects_a_bad_seed_configuration_naming_the_field():
    with pytest.raises(ConfigError) as info:
        LiveGuard("window:window=3,threshold=4")
    assert info.value.field == "threshold"
    with pytest.raises(ConfigError) as info:
        LiveGuard("ladder:warn_at=3,block_at=3")
    assert info.value.field == "block_at"
