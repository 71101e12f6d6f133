"""Seed 000's LoopDetector, rule by rule (design.md, "run-length")."""

from __future__ import annotations

import copy

import pytest
import xxhash
from loopledger.detectors import (
    DEFAULT_OBSERVATION_TOOLS,
    BatchRecord,
    ConfigError,
    LoopDetected,
    LoopDetector,
    PolicySpec,
    RepeatOutcome,
    answers_hash,
    batch_signature,
    is_costly_batch,
    is_observation_batch,
    make_policy,
)
from loopledger.detectors import run_length as rl
from loopledger.detectors.base import BATCH, Check, Result
from loopledger.events import Answer, Answers, Batch, Call, Prose, UserTurn
from loopledger.replay import replay

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


# ── rules pinned for mutation testing (make mutants): each test names the rule it holds ──────


@pytest.fixture(autouse=True)
def _cold_classification_cache():
    """Each test starts with the module's classification memo empty, so the rules decide and
    not a value an earlier test left behind."""
    rl._LIMITS.clear()
    yield
    rl._LIMITS.clear()


def _sig(name: str, canonical: bytes) -> str:
    """Seed 000's per-call signature computed here from its definition: name:hash(canonical)."""
    return name + ":" + xxhash.xxh3_128_hexdigest(canonical)


def test_signature_of_one_call_event_is_name_colon_hash_of_sorted_args():
    d = LoopDetector()
    assert d.check([Call("1", "edit", {"b": 1, "a": 2})]).signature == _sig("edit", b'{"a":2,"b":1}')


def test_signature_of_a_call_without_args_is_that_of_empty_args():
    assert LoopDetector().check([Call("1", "edit", None)]).signature == _sig("edit", b"{}")


def test_signature_of_args_json_cannot_hold_natively_is_the_canonical_text():
    # an integer past 64 bits: the fast encoder refuses it, the canonical walk writes it
    rec = LoopDetector().check([Call("1", "edit", {"n": 2**70})])
    assert rec.signature == _sig("edit", b'{"n":1180591620717411303424}')


def test_signature_of_two_call_events_is_both_sorted_and_joined():
    a, b = Call("1", "b_tool", {}), Call("2", "a_tool", {"x": 1})
    expected = "|".join(sorted([_sig("b_tool", b"{}"), _sig("a_tool", b'{"x":1}')]))
    assert LoopDetector().check([a, b]).signature == expected


def test_a_given_signature_is_used_as_is():
    d = LoopDetector()
    assert d.check(EDIT, signature="mine").signature == "mine"
    d.check(READ, signature="mine")  # the same signature: the same run, whatever the calls
    assert d.run.count == 2


def test_loop_detected_carries_ceiling_exempt_and_which_limit_tripped():
    d = LoopDetector()
    d.check(EDIT)
    d.check(EDIT)
    with pytest.raises(LoopDetected) as info:
        d.check(EDIT)
    e = info.value
    assert (e.ceiling, e.exempt, e.by_ceiling) == (15, False, False)
    assert str(e) == f"loop detected: batch {e.signature} repeated 3 times (max 2)"


def test_a_run_carried_by_changing_answers_is_stopped_by_the_ceiling_and_says_so():
    d = LoopDetector()
    for i in range(15):
        d.record_results(d.check(EDIT), f"answer {i}")
    with pytest.raises(LoopDetected) as info:
        d.check(EDIT)
    e = info.value
    # the answers changed every time: count restarted at 1 and is 2 now; total 16 > ceiling 15
    assert (e.count, e.total, e.threshold, e.ceiling, e.by_ceiling) == (2, 16, 2, 15, True)
    assert str(e).endswith("carried past the ceiling 15 by changing answers (total 16)")


def test_a_long_signature_is_shortened_to_200_characters_in_the_message():
    sig = "s" * 201
    e = LoopDetected(sig, 3, 3, 2, 15, False)
    assert str(e) == f"loop detected: batch {'s' * 200}… repeated 3 times (max 2)"
    assert str(LoopDetected("s" * 200, 3, 3, 2, 15, False)) == \
        f"loop detected: batch {'s' * 200} repeated 3 times (max 2)"


def test_state_of_a_fresh_detector_and_after_break_run_has_no_limits():
    d = LoopDetector()
    empty = {"signature": None, "count": 0, "total": 0, "answers": None}
    assert d.state() == empty
    d.record_results(d.check(EDIT), "h")
    d.break_run()
    assert d.state() == empty


def test_state_reports_the_run_and_every_limit():
    d = LoopDetector()
    rec = d.check(EDIT, max_strikes=3, observation_tools=OBS, max_observation_steps=None)
    d.record_results(rec, "h1")
    assert d.state() == {"signature": batch_signature(EDIT), "count": 1, "total": 1, "answers": "h1",
                         "observation": False, "costly": False, "exempt": False,
                         "effective_max": 3, "ceiling": 3}


def test_a_deep_copy_continues_the_run_independently():
    d = LoopDetector()
    rec = d.check(EDIT)
    d.record_results(rec, "h1")
    twin = copy.deepcopy(d)
    assert twin.state() == d.state()
    twin.check(EDIT)
    with pytest.raises(LoopDetected):
        twin.check(EDIT)  # the copy kept count 1: its 3rd occurrence trips
    assert (d.run.count, d.run.total, d.run.answers) == (1, 1, "h1")  # the original is untouched
    d.check(EDIT)
    assert d.run.count == 2
    fresh = copy.deepcopy(LoopDetector())
    assert fresh.run is None and fresh.state()["count"] == 0


def test_limits_of_observation_and_mutating_batches():
    lim = rl.limits(READ, 2, OBS, 15)
    assert (lim.observation, lim.costly, lim.exempt, lim.effective_max, lim.ceiling) == (True, False, True, 15, 15)
    lim = rl.limits(EDIT, 4, OBS, 1)
    assert (lim.observation, lim.costly, lim.exempt, lim.effective_max, lim.ceiling) == (False, False, False, 4, 4)
    lim = rl.limits(READ, 4, OBS, None)  # M off: obs_max = S, no exemption
    assert (lim.observation, lim.exempt, lim.effective_max, lim.ceiling) == (True, False, 4, 4)
    lim = rl.limits([("read_file", {}), ("browser_navigate", {})], 2, ("read", "navigate"), 9)
    assert (lim.observation, lim.costly, lim.exempt, lim.effective_max, lim.ceiling) == (True, True, False, 9, 9)
    lim = rl.limits([("read_file", {}), ("edit", {})], 2, OBS, 9)  # one mutating call: not observation
    assert (lim.observation, lim.effective_max, lim.ceiling) == (False, 2, 9)
    assert rl.limits(READ, 2, ["read"], 15).observation  # a list of patterns works as a tuple does


def test_limits_are_recomputed_for_other_names_or_configuration():
    assert rl.limits(READ, 2, OBS, 15).observation
    assert not rl.limits(EDIT, 2, OBS, 15).observation
    assert rl.limits(READ, 2, OBS, 15).effective_max == 15
    assert rl.limits(READ, 2, OBS, 7).effective_max == 7
    assert rl.limits(READ, 3, OBS, None).effective_max == 3
    assert not rl.limits(READ, 2, ("grep",), 15).observation
    assert not rl.limits([("reply_to_thread", {})], 2, ("read",), 15, rl.NAME_PARTS).observation
    assert rl.limits([("reply_to_thread", {})], 2, ("read",), 15, rl.SUBSTRING).observation


def test_one_detector_follows_a_change_of_strikes_steps_or_match():
    d = LoopDetector()
    d.check(READ, max_strikes=2, observation_tools=OBS, max_observation_steps=15)
    assert d.state()["effective_max"] == 15
    d.check(READ, max_strikes=2, observation_tools=OBS, max_observation_steps=4)
    assert d.state()["effective_max"] == 4
    d.check(READ, max_strikes=7, observation_tools=OBS, max_observation_steps=None)
    assert d.state()["effective_max"] == 7
    d.check([("reply_to_thread", {})], 2, ("read",), 15)
    assert d.state()["observation"]
    d.check([("reply_to_thread", {})], 2, ("read",), 15, match=rl.NAME_PARTS)
    assert not d.state()["observation"]
    d.check([("Read", {}), ("grep", {})], 2, OBS, 15)
    assert d.state()["observation"]
    d.check([("Read", {}), ("edit", {})], 2, OBS, 15)
    assert not d.state()["observation"]


def test_name_parts_match_whole_words_split_on_separators_and_case():
    np = rl.NAME_PARTS
    assert rl.name_matches("read_file", ["read"], np)
    assert rl.name_matches("NotebookRead", ["read"], np)  # lower→upper starts a word
    assert rl.name_matches("tools.Read-File", ["read"], np)
    assert rl.name_matches("mcp__fs__read_text_file", ["read_text"], np)  # a run of words
    assert not rl.name_matches("mcp__fs__text_read", ["read_text"], np)  # in that order
    assert not rl.name_matches("reply_to_thread", ["read"], np)
    assert not rl.name_matches("set_budget_limit", ["get_"], np)
    assert rl.name_matches("get_issue", ["get_"], np)  # "get_" is the word "get"
    assert not rl.name_matches("anything", ["_"], np)  # a pattern of no words matches nothing
    assert rl.name_matches("Read", ["x", "READ"], np)  # any pattern, case-insensitive
    assert not rl.name_matches("read", [], np)


def test_substring_match_is_anywhere_case_insensitive():
    assert rl.name_matches("reply_to_thread", ["READ"])
    assert rl.name_matches("REPLY_TO_THREAD", ["x", "read"], rl.SUBSTRING)
    assert not rl.name_matches("edit", ["read"], rl.SUBSTRING)


def test_observation_batch_under_name_parts_needs_every_call_to_match_a_word():
    np = rl.NAME_PARTS
    assert is_observation_batch([("read_file", {}), ("grep_search", {})], OBS, np)
    assert not is_observation_batch([("read_file", {}), ("reply_to_thread", {})], OBS, np)
    assert not is_observation_batch([("read_file", {})], (), np)
    assert is_observation_batch([("READ", {}), ("Grep", {})], ("Read", "GREP"))


def test_inside_word_names_the_first_pattern_found_inside_a_word():
    assert rl.inside_word("reply_to_thread", ("view", "READ")) == "READ"
    assert rl.inside_word("REPLY_TO_THREAD", ("read",)) == "read"
    assert rl.inside_word("reply_to_thread", ()) is None
    assert rl.inside_word("edit", ("read",)) is None  # no match at all
    assert rl.inside_word("read_thread", ("read",)) is None  # a whole word


def test_costly_needs_the_whole_run_of_parts():
    assert rl.is_costly_batch([("tool_fetch_webpage_now", {})])
    assert not rl.is_costly_batch([("fetch_web_page", {})])
    assert not rl.is_costly_batch([("webpage", {})])
    assert rl.is_costly_batch([("__click__", {})])  # empty parts dropped


def test_match_must_be_substring_or_name_parts():
    with pytest.raises(ConfigError) as info:
        PolicySpec.parse("run-length:match=fuzzy")
    e = info.value
    assert (e.field, e.rule) == ("match", "match is substring or name-parts")
    assert str(e) == "run-length: match must be one of substring, name-parts, got 'fuzzy'"
    assert PolicySpec.parse("run-length:match=name-parts").params["match"] == "name-parts"


# the policy: Check and Result rows as the ledger stores them

def _answer(call: Call, text: str) -> Answer:
    return Answer(call.id, text)


def test_policy_allows_with_count_total_and_the_effective_max_then_halts_naming_the_run():
    p = make_policy("run-length")
    c = Call("1", "edit", {"p": 1})
    b = Batch((c,))
    assert p.check(b) == [Check(BATCH, "allow", 1, 1, 2, "")]
    assert p.answers(b, [_answer(c, "same")]) == [Result(BATCH, "not_comparable")]
    assert p.check(b) == [Check(BATCH, "allow", 2, 2, 2, "")]
    assert p.answers(b, [_answer(c, "same")]) == [Result(BATCH, "repeated")]
    assert p.check(b) == [Check(BATCH, "halt", 3, 3, 2, "same batch 3 times in a row (max 2)")]


def test_policy_halt_past_the_ceiling_says_changing_answers_carried_it():
    p = make_policy("run-length:max_observation_steps=3")
    c = Call("1", "edit", {"p": 1})
    b = Batch((c,))
    for i in range(3):
        assert p.check(b)[0].verdict == "allow"
        p.answers(b, [_answer(c, f"out {i}")])
    assert p.check(b) == [Check(BATCH, "halt", 2, 4, 2, "carried past the ceiling 3 by changing answers")]


def test_policy_changed_answers_are_progress():
    p = make_policy("run-length")
    c = Call("1", "edit", {"p": 1})
    b = Batch((c,))
    p.check(b)
    p.answers(b, [_answer(c, "one")])
    p.check(b)
    assert p.answers(b, [_answer(c, "two")]) == [Result(BATCH, "changed")]
    assert p.check(b) == [Check(BATCH, "allow", 2, 3, 2, "")]


def test_policy_answers_of_an_equal_batch_object_match_the_run():
    # the answers may come with another Batch object holding the same calls (a live hook)
    p = make_policy("run-length")
    c = Call("1", "edit", {"p": 1})
    p.check(Batch((c,)))
    p.answers(Batch((c,)), [_answer(c, "one")])
    p.check(Batch((c,)))
    assert p.answers(Batch((c,)), [_answer(c, "one")]) == [Result(BATCH, "repeated")]
    assert p.answers(Batch((Call("2", "other", {}),)), [None]) == [Result(BATCH, "not_current")]


def test_policy_ignores_empty_batches_and_a_user_turn_starts_over():
    p = make_policy("run-length")
    assert p.check(Batch(())) == [] and p.answers(Batch(()), []) == []
    c = Call("1", "edit", {"p": 1})
    p.check(Batch((c,)))
    p.check(Batch((c,)))
    p.user_turn()
    assert p.check(Batch((c,))) == [Check(BATCH, "allow", 1, 1, 2, "")]


def test_policy_honours_its_parameters():
    p = make_policy("run-length:max_strikes=1,observation_tools=grep,match=name-parts")
    c = Call("1", "read_file", {})
    assert p.check(Batch((c,)))[0].threshold == 1  # read_file is not an observation under "grep"
    assert p.check(Batch((c,)))[0].verdict == "halt"
    p = make_policy("run-length:max_observation_steps=none")
    c = Call("1", "read_file", {})
    assert p.check(Batch((c,)))[0].threshold == 2


def test_policy_state_names_its_parameters_and_patterns_inside_a_word():
    p = make_policy("run-length")
    assert p.state() == {"signature": None, "count": 0, "total": 0, "answers": None, "max_strikes": 2,
                         "max_observation_steps": 15, "match": "substring"}
    b = Batch((Call("1", "reply_to_thread", {}), Call("2", "read_file", {})))
    p.check(b)
    s = p.state()
    assert s["observation"] and s["inside_word"] == {"reply_to_thread": "read"}
    p = make_policy("run-length:match=name-parts")
    p.check(Batch((Call("1", "read_file", {}),)))
    assert p.state()["observation"] and "inside_word" not in p.state()
    p = make_policy("run-length")
    p.check(Batch((Call("1", "edit", {}),)))
    assert "inside_word" not in p.state()


def test_empty_batch_error_says_callers_skip_them():
    with pytest.raises(ValueError) as info:
        LoopDetector().check([])
    assert str(info.value) == "LoopDetector.check: empty batch (callers skip batches without calls)"


def test_a_change_of_max_strikes_alone_is_honoured():
    d = LoopDetector()
    d.check(EDIT, max_strikes=2)
    d.check(EDIT, max_strikes=5)
    assert d.state()["effective_max"] == 5
    d.check(EDIT, max_strikes=5)
    d.check(EDIT, max_strikes=5)  # the 4th: allowed under 5, it would halt under 2
    assert d.run.count == 4


def test_each_single_call_batch_is_classified_by_its_own_name():
    d = LoopDetector()
    d.check(READ)  # read_file: an observation, allowance 15
    assert run(d, EDIT, 5) == 3  # edit_file right after: mutating, S = 2 halts the third


def test_policy_keeps_its_spec():
    spec = PolicySpec("run-length")
    assert make_policy(spec).spec is spec
    spec = PolicySpec("stagnation")
    assert make_policy(spec).spec is spec


def test_policy_answers_before_any_check_or_after_a_user_turn_are_not_current():
    c = Call("1", "edit", {"p": 1})
    b = Batch((c,))
    p = make_policy("run-length")
    assert p.answers(b, [_answer(c, "x")]) == [Result(BATCH, "not_current")]
    p.check(b)
    p.user_turn()
    assert p.answers(b, [_answer(c, "x")]) == [Result(BATCH, "not_current")]


def test_policy_match_name_parts_gives_a_word_inside_a_name_no_allowance():
    b = Batch((Call("1", "reply_to_thread", {"t": 7}),))
    p = make_policy("run-length:match=name-parts")
    assert [p.check(b)[0].verdict for _ in range(3)] == ["allow", "allow", "halt"]
    p = make_policy("run-length")  # substring: read-only, allowance 15
    assert [p.check(b)[0].verdict for _ in range(3)] == ["allow"] * 3


def test_policy_state_holds_seed_000s_answers_hash():
    c, d = Call("1", "edit", {"p": 1}), Call("2", "run", {})
    b = Batch((c, d))
    p = make_policy("run-length")
    p.check(b)
    p.answers(b, [_answer(c, "one"), _answer(d, "two")])
    assert p.state()["answers"] == answers_hash([("edit", {"p": 1}), ("run", {})], ["one", "two"])


# ── Ported from seed 000's upstream, mmogr/gglib (crates/gglib-core/src/domain/agent/
# loop_detection/{tests,verdict_tests,observation_tests,results_tests}.rs and
# crates/gglib-proxy/src/loop_guard_user_turn_tests.rs). Upstream answers are u64 hashes; the
# detector only compares them for equality, so small ints stand in for them here. ──────────

def one(name: str) -> list[tuple[str, dict]]:
    return [(name, {})]


def turn(d: LoopDetector, calls, answers, max_strikes=2, tools=(), steps=15) -> None:
    """`check` then `record_results`, in the order both upstream call sites use them."""
    record = d.check(calls, max_strikes, tools, steps)
    d.record_results(record, answers)


# loop_detection/tests.rs
def test_loop_not_detected_within_limit():
    d = LoopDetector()
    d.check(one("t"), 2, (), None)
    d.check(one("t"), 2, (), None)


def test_loop_detected_on_third_identical_batch_with_max_strikes_2():
    d = LoopDetector()
    d.check(one("t"), 2, (), None)
    d.check(one("t"), 2, (), None)
    with pytest.raises(LoopDetected):
        d.check(one("t"), 2, (), None)


def test_interleaved_batches_never_trigger_a_loop():
    d = LoopDetector()
    for _ in range(50):
        d.check(one("a"), 2, (), None)
        d.check(one("b"), 2, (), None)


def test_a_run_broken_and_resumed_starts_over():
    d = LoopDetector()
    d.check(one("a"), 2, (), None)
    d.check(one("a"), 2, (), None)
    d.check(one("b"), 2, (), None)
    d.check(one("a"), 2, (), None)  # occurrence 1 of a new run, not 3 of the old
    d.check(one("a"), 2, (), None)
    with pytest.raises(LoopDetected):
        d.check(one("a"), 2, (), None)  # the resumed run trips at its own third


def test_the_batch_that_breaks_a_run_starts_its_own():
    d = LoopDetector()
    d.check(one("a"), 2, (), None)
    d.check(one("b"), 2, (), None)
    d.check(one("b"), 2, (), None)
    with pytest.raises(LoopDetected):
        d.check(one("b"), 2, (), None)


def test_loop_error_signature_matches_batch_sig():
    calls = [("x", {"k": "v"})]
    with pytest.raises(LoopDetected) as info:
        LoopDetector().check(calls, 0, (), None)
    assert info.value.signature == batch_signature(calls)


def test_same_name_different_args_do_not_trigger_loop():
    d = LoopDetector()
    for i in range(10):
        d.check([("search", {"q": i})], 2, (), None)


def test_upstream_max_strikes_zero_triggers_on_first_occurrence():
    with pytest.raises(LoopDetected):
        LoopDetector().check(one("instant_tool"), 0, (), None)


def test_is_observation_batch_ends_with_match():
    assert is_observation_batch(one("playwright_mcp_browser_snapshot"), ["snapshot"])


def test_is_observation_batch_contains_match():
    assert is_observation_batch(one("take_screenshot_full"), ["screenshot"])


def test_is_observation_batch_case_insensitive():
    assert is_observation_batch(one("BROWSER_SNAPSHOT"), ["snapshot"])


def test_is_observation_batch_mixed_returns_false():
    assert not is_observation_batch([("browser_snapshot", {}), ("do_thing", {})], ["snapshot"])


def test_is_observation_batch_empty_patterns_always_false():
    assert not is_observation_batch(one("browser_snapshot"), [])


def test_a_repeated_file_read_survives_past_the_standard_threshold():
    d = LoopDetector()  # the defaults: S = 2, M = 15, our default patterns
    for _ in range(DEFAULT_STRIKES + 1):
        d.check(one("read_file"))


DEFAULT_STRIKES = rl.DEFAULT_MAX_STRIKES


def test_loop_detector_observation_batch_uses_higher_threshold():
    d = LoopDetector()
    for _ in range(5):
        d.check(one("playwright_mcp_browser_snapshot"), 2, ["snapshot"], 5)
    with pytest.raises(LoopDetected):
        d.check(one("playwright_mcp_browser_snapshot"), 2, ["snapshot"], 5)


def test_loop_detector_mixed_batch_uses_standard_threshold():
    mixed = [("browser_snapshot", {}), ("do_thing", {})]
    d = LoopDetector()
    d.check(mixed, 2, ["snapshot"], 10)
    d.check(mixed, 2, ["snapshot"], 10)
    with pytest.raises(LoopDetected):
        d.check(mixed, 2, ["snapshot"], 10)


def test_tool_signature_includes_name_and_hash():
    sig = batch_signature([("fs_read", {"path": "/etc/hosts"})])
    assert sig == "fs_read:" + xxhash.xxh3_128_hexdigest(b'{"path":"/etc/hosts"}')


def test_batch_signature_is_sorted():
    parts = batch_signature([("b_tool", {}), ("a_tool", {})]).split("|")
    assert len(parts) == 2 and parts == sorted(parts)


def test_batch_signature_ignores_call_order():
    a, b = ("search", {"q": "rust"}), ("read", {"path": "/"})
    assert batch_signature([a, b]) == batch_signature([b, a])


def test_different_argument_key_order_produces_same_signature():
    assert batch_signature([("tool", {"a": 1, "b": 2})]) == batch_signature([("tool", {"b": 2, "a": 1})])


def test_nested_argument_objects_are_canonicalised():
    assert (batch_signature([("t", {"outer": {"x": 1, "y": 2}})])
            == batch_signature([("t", {"outer": {"y": 2, "x": 1}})]))


def test_deep_arguments_that_differ_below_depth_16_stay_different():
    # Upstream caps its canonical form at depth 16 (distinct deep args collide); design.md's rule
    # has no cap and ours never recurses, so two such arguments remain two signatures.
    def nested(depth, leaf):
        v = leaf
        for _ in range(depth):
            v = {"x": v}
        return v
    assert batch_signature([("t", nested(20, "a"))]) != batch_signature([("t", nested(20, "b"))])


# loop_detection/verdict_tests.rs
def test_a_repeat_whose_answer_changed_starts_the_run_over():
    d = LoopDetector()
    for i in range(10):
        turn(d, one("get_output"), i)


def test_a_run_whose_answer_alternates_never_trips():
    d = LoopDetector()
    for i in range(12):
        turn(d, one("get_output"), i % 2)


def test_a_repeat_whose_answer_is_identical_still_trips():
    d = LoopDetector()
    turn(d, one("write_file"), 7)
    turn(d, one("write_file"), 7)
    with pytest.raises(LoopDetected):
        turn(d, one("write_file"), 7)


def test_an_unrecorded_repeat_trips_exactly_as_before():
    d = LoopDetector()
    d.check(one("write_file"), 2, (), 15)
    d.check(one("write_file"), 2, (), 15)
    with pytest.raises(LoopDetected):
        d.check(one("write_file"), 2, (), 15)


def test_an_unjoinable_answer_does_not_rescue():
    d = LoopDetector()
    turn(d, one("write_file"), None)
    turn(d, one("write_file"), None)
    with pytest.raises(LoopDetected):
        turn(d, one("write_file"), None)


def test_a_changed_answer_rescues_only_the_occurrence_that_changed():
    d = LoopDetector()
    turn(d, one("write_file"), 1)
    turn(d, one("write_file"), 2)  # changed
    turn(d, one("write_file"), 2)  # stood
    with pytest.raises(LoopDetected):
        turn(d, one("write_file"), 2)


def test_a_mutating_run_rescued_by_new_answers_stops_at_the_read_only_allowance():
    d = LoopDetector()
    for i in range(15):
        turn(d, one("write_file"), i)
    with pytest.raises(LoopDetected) as info:
        turn(d, one("write_file"), 99)
    assert info.value.by_ceiling and info.value.total == 16


def test_an_observation_run_rescued_by_new_answers_has_no_ceiling():
    d = LoopDetector()
    for i in range(100):
        turn(d, one("read_file"), i, tools=["read_file"])


def test_a_rescue_ceiling_of_none_disables_the_rescue():
    d = LoopDetector()
    d.check(one("write_file"), 2, (), None)
    record = d.check(one("write_file"), 2, (), None)
    d.record_results(record, 1)
    with pytest.raises(LoopDetected):
        d.check(one("write_file"), 2, (), None)


def test_the_batch_that_breaks_a_run_clears_the_answers_it_recorded():
    d = LoopDetector()
    turn(d, one("a"), 1)
    record = d.check(one("b"), 2, (), 15)
    assert d.record_results(record, 1) == RepeatOutcome.NOT_COMPARABLE


def test_a_rescue_ceiling_of_none_disables_the_rescue_for_read_only_batches_too():
    d = LoopDetector()
    turn(d, one("read_file"), 1, tools=["read_file"], steps=None)
    turn(d, one("read_file"), 2, tools=["read_file"], steps=None)  # changed
    with pytest.raises(LoopDetected):
        turn(d, one("read_file"), 3, tools=["read_file"], steps=None)


@pytest.mark.parametrize("allowance", [0, 1])
def test_a_low_read_only_allowance_never_tightens_the_mutating_threshold(allowance):
    d = LoopDetector()
    turn(d, one("write_file"), 1)
    record = d.check(one("write_file"), 2, (), allowance)
    d.record_results(record, 1)
    with pytest.raises(LoopDetected):
        d.check(one("write_file"), 2, (), allowance)


def test_recording_for_a_batch_that_is_no_longer_the_run_changes_nothing():
    d = LoopDetector()
    stale = d.check(one("a"), 2, (), 15)
    d.check(one("b"), 2, (), 15)
    assert d.record_results(stale, 1) == RepeatOutcome.NOT_CURRENT


def test_the_outcome_names_what_happened():
    d = LoopDetector()
    assert d.record_results(d.check(one("write_file"), 2, (), 15), 1) == RepeatOutcome.NOT_COMPARABLE
    assert d.record_results(d.check(one("write_file"), 2, (), 15), 2) == RepeatOutcome.CHANGED
    assert d.record_results(d.check(one("write_file"), 2, (), 15), 2) == RepeatOutcome.REPEATED


def test_a_run_at_its_threshold_trips_before_the_next_answer_can_rescue_it():
    d = LoopDetector()
    turn(d, one("write_file"), 1)
    turn(d, one("write_file"), 1)
    with pytest.raises(LoopDetected):
        d.check(one("write_file"), 2, (), 15)


# loop_detection/observation_tests.rs
def test_an_uppercase_pattern_matches():
    assert is_observation_batch(one("readFile"), ["readFile"])
    assert is_observation_batch(one("mcp__fs__listDir"), ["listDir"])


@pytest.mark.parametrize(("name", "pattern"), [("READ_FILE", "read_file"), ("read_file", "READ_FILE"),
                                               ("ReAd_FiLe", "rEaD_fIlE")])
def test_case_does_not_matter_on_either_side(name, pattern):
    assert is_observation_batch(one(name), [pattern])


def test_lowercase_patterns_behave_exactly_as_before():
    assert is_observation_batch(one("read_file"), ["read_file"])
    assert is_observation_batch(one("mcp_read_file"), ["read_file"])
    assert not is_observation_batch(one("write_file"), ["read_file"])


def test_the_all_and_empty_rules_survive():
    assert not is_observation_batch([("read_file", {}), ("write_file", {})], ["read_file"])
    assert not is_observation_batch(one("read_file"), [])


@pytest.mark.parametrize("name", ["fetch_webpage", "browser_navigate", "playwright_browser_click",
                                  "mcp__playwright__click", "BROWSER_NAVIGATE", "click_element_by_index",
                                  "double_click_element", "navigate_to_url"])
def test_the_costly_defaults_are_recognised_under_real_client_names(name):
    assert is_costly_batch(one(name))


@pytest.mark.parametrize("name", ["get_clickable_elements", "browser_get_clickable_elements",
                                  "clickhouse_query"])
def test_read_only_tools_that_merely_contain_a_costly_word_keep_the_waiver(name):
    assert not is_costly_batch(one(name))


@pytest.mark.parametrize("name", ["browserNavigate", "clickElement", "fetchWebpage"])
def test_camel_case_names_are_missed_which_is_the_accepted_side_of_the_trade(name):
    assert not is_costly_batch(one(name))


@pytest.mark.parametrize("name", ["navigate_to_definition", "get_click_count", "ad_click_report",
                                  "click_house_query"])
def test_read_only_names_built_from_a_costly_word_are_bounded_too(name):
    assert is_costly_batch(one(name))


@pytest.mark.parametrize("name", ["read_file", "list_dir", "grep_search", "semantic_search", "get_errors"])
def test_ordinary_read_only_tools_are_not_costly(name):
    assert not is_costly_batch(one(name))


def test_one_costly_call_makes_the_whole_batch_costly():
    assert is_costly_batch([("read_file", {}), ("fetch_webpage", {})])
    assert not is_costly_batch([("read_file", {}), ("list_dir", {})])
    assert not is_costly_batch([])


def test_a_costly_observation_batch_is_bounded_at_the_allowance_however_its_answers_move():
    # observation.rs: navigate keeps the elevated threshold but loses the waiver.
    d = LoopDetector()
    for i in range(15):
        turn(d, one("browser_navigate"), i, tools=["navigate"])
    with pytest.raises(LoopDetected) as info:
        turn(d, one("browser_navigate"), 99, tools=["navigate"])
    assert info.value.by_ceiling and info.value.threshold == 15


# loop_detection/results_tests.rs (answers_hash is seed 000's batch_results_hash)
def test_the_same_batch_and_answers_hash_the_same():
    calls = [Call("c1", "read_file", {"path": "a.rs"})]
    assert answers_hash(calls, ["contents"]) == answers_hash(calls, ["contents"])


def test_a_two_call_batch_whose_answers_swap_is_not_identical():
    calls = [Call("c1", "read_file", {"path": "a.rs"}), Call("c2", "read_file", {"path": "b.rs"})]
    assert answers_hash(calls, ["alpha", "beta"]) != answers_hash(calls, ["beta", "alpha"])


def test_the_same_pairs_in_a_different_order_hash_alike():
    a, b = Call("c1", "read_file", {"path": "a.rs"}), Call("c2", "read_file", {"path": "b.rs"})
    assert answers_hash([a, b], ["alpha", "beta"]) == answers_hash([b, a], ["beta", "alpha"])


def test_an_unanswered_call_makes_the_whole_batch_unjoinable():
    calls = [Call("c1", "read_file", {"path": "a.rs"}), Call("c2", "read_file", {"path": "b.rs"})]
    assert answers_hash(calls, ["x", None]) is None


def test_a_length_mismatch_is_refused_rather_than_truncated():
    # Upstream returns None (unjoinable); ours raises, naming both lengths (test_canonical.py).
    calls = [Call("c1", "read_file", {"path": "a.rs"}), Call("c2", "read_file", {"path": "b.rs"})]
    for answers in (["1"], ["1", "2", "3"]):
        with pytest.raises(ValueError, match="2 calls but"):
            answers_hash(calls, answers)


def test_the_same_answer_to_a_different_call_is_a_different_batch():
    a, b = [Call("c1", "read_file", {"path": "a.rs"})], [Call("c1", "read_file", {"path": "b.rs"})]
    assert answers_hash(a, ["same"]) != answers_hash(b, ["same"])


def test_shuffled_argument_keys_hash_alike():
    a, b = [Call("c1", "write", {"a": 1, "b": 2})], [Call("c1", "write", {"b": 2, "a": 1})]
    assert answers_hash(a, ["ok"]) == answers_hash(b, ["ok"])


# gglib-proxy/src/loop_guard_user_turn_tests.rs, through the policy and the replay engine
def _build_attempt(i: int) -> list:
    return [Batch((Call(f"b{i}", "run_in_terminal", {"cmd": "make"}),)),
            Answers((Answer(f"b{i}", "error: 3 warnings emitted"),)), Prose("the build failed")]


def _verdicts(events, spec="run-length") -> list[str]:
    return [c.verdict for s in replay(events, spec) for c in s.checks if isinstance(s.event, Batch)]


def test_three_user_requests_for_the_same_failing_build_are_not_a_loop():
    events = [UserTurn("run the build"), *_build_attempt(0), UserTurn("try again please"),
              *_build_attempt(1), UserTurn("try again please"), *_build_attempt(2)]
    assert _verdicts(events) == ["allow"] * 3


def test_the_same_three_attempts_unprompted_are_still_a_loop():
    events = [x for i in range(3) for x in _build_attempt(i)]
    assert _verdicts(events) == ["allow", "allow", "halt"]


def test_a_leading_system_message_changes_nothing():
    # A system message is no turn boundary (design.md): readers emit no event for it at all,
    # so the session is the three unprompted attempts above.
    events = [x for i in range(3) for x in _build_attempt(i)]
    assert _verdicts(events)[-1] == "halt"


def test_a_user_turn_resets_the_read_only_allowance_as_well():
    def attempt(i):
        return [Batch((Call(f"w{i}", "write_file", {"path": "a.rs"}),)),
                Answers((Answer(f"w{i}", f"{i} changed"),))]
    first = [x for i in range(15) for x in attempt(i)]
    assert _verdicts(first) == ["allow"] * 15  # fifteen rescued repeats are inside the allowance
    more = [*first, UserTurn("carry on"), *[x for i in range(15, 29) for x in attempt(i)]]
    assert _verdicts(more) == ["allow"] * 29
    # and without the interjection the 16th is past the ceiling
    assert _verdicts([x for i in range(16) for x in attempt(i)])[-1] == "halt"


def test_break_run_resets_the_read_only_allowance_with_the_strike_count():
    d = LoopDetector()
    for i in range(15):
        turn(d, one("write_file"), i)
    d.break_run()
    for i in range(15):
        turn(d, one("write_file"), i)


# crates/gglib-proxy/src/loop_guard_{tests,costly_tests,rescue_tests}.rs: a replayed transcript,
# built here as our session events (the reader's job is the proxy's wire parsing, tested elsewhere).
def _call(name, args=None, cid="c1", malformed=False):
    return Batch((Call(cid, name, args, malformed),))


def _moving(tool, n, same=False):
    return [x for i in range(n) for x in (_call(tool, {}, f"c{i}"),
                                          Answers((Answer(f"c{i}", "same" if same else f"{i} changed"),)))]


def _outcomes(events, spec="run-length") -> list[str]:
    return [r.outcome for s in replay(events, spec) for r in s.results]


def test_non_assistant_roles_are_ignored():
    events = [x for _ in range(10) for x in (UserTurn("same"), Answers((Answer("c1", "same result"),)))]
    assert _verdicts(events) == []


def test_two_identical_batches_pass_at_default_threshold():
    assert _verdicts([_call("write_file", {"path": "a.rs"})] * 2) == ["allow", "allow"]


def test_distinct_arguments_never_trip():
    assert "halt" not in _verdicts([_call("write_file", {"path": f"file{i}.rs"}) for i in range(10)])


def test_third_identical_batch_trips_loop():
    assert _verdicts([_call("write_file", {"path": "a.rs"})] * 3)[-1] == "halt"


def test_a_batch_repeated_with_real_work_in_between_never_trips():
    events = [_call("write_file", {"path": "a.rs"}), _call("run_tests", {"suite": "unit"})] * 50
    assert "halt" not in _verdicts(events)


def test_a_cycle_that_never_exceeds_the_threshold_escapes_entirely():
    # Seed 000's stated gap (A, A, B repeating): run-length never halts it; our cycle detector does.
    events = [_call("run_tests", {"suite": "unit"}), _call("run_tests", {"suite": "unit"}),
              _call("write_file", {"path": "a.rs"})] * 40
    assert "halt" not in _verdicts(events)
    assert "halt" in _verdicts(events, "cycle")


def test_prose_and_results_between_identical_batches_do_not_break_the_run():
    events = []
    for i, note in enumerate(["that did not work, let me try again", "still not right", None]):
        events += [_call("write_file", {"path": "a.rs"}, f"c{i}"), Answers((Answer(f"c{i}", "1 file changed"),))]
        if note:
            events.append(Prose(note))
    assert _verdicts(events) == ["allow", "allow", "halt"]


def test_a_thrice_read_file_does_not_trip_the_loop_guard():
    assert _verdicts([_call("read_file", {"path": "a.rs"})] * 3) == ["allow"] * 3


def test_a_repeat_that_got_the_same_answer_is_reported():
    events = _moving("write_file", 2, same=True)
    assert _outcomes(events) == ["not_comparable", "repeated"]


def test_a_repeat_that_got_a_different_answer_is_not_reported():
    assert _outcomes(_moving("write_file", 2)) == ["not_comparable", "changed"]


def test_synthetic_ids_that_repeat_across_turns_still_compare_the_right_results():
    events = [_call("write_file", {"path": "a.rs"}, "call_qwen_0"), Answers((Answer("call_qwen_0", "FIRST CONTENT"),)),
              _call("write_file", {"path": "a.rs"}, "call_qwen_0"),
              Answers((Answer("call_qwen_0", "TOTALLY DIFFERENT CONTENT"),))]
    assert _outcomes(events) == ["not_comparable", "changed"]


def test_a_repeat_whose_results_are_missing_is_not_comparable():
    events = [_call("write_file", {"path": "a.rs"}, "c1"), _call("write_file", {"path": "a.rs"}, "c2")]
    assert _outcomes(events) == ["not_comparable", "not_comparable"]


def test_a_two_call_batch_whose_answers_swap_is_not_an_identical_repeat():
    def pair(i):
        return Batch((Call(f"a{i}", "get_errors", {"f": "a.rs"}), Call(f"b{i}", "get_errors", {"f": "b.rs"})))
    events = [pair(1), Answers((Answer("a1", "RESULT-ONE"),)), Answers((Answer("b1", "RESULT-TWO"),)),
              pair(2), Answers((Answer("a2", "RESULT-TWO"),)), Answers((Answer("b2", "RESULT-ONE"),))]
    assert _outcomes(events) == ["not_comparable", "changed"]


def test_shuffled_argument_keys_still_trip():
    events = [_call("edit", {"a": 1, "b": 2}), _call("edit", {"b": 2, "a": 1}), _call("edit", {"a": 1, "b": 2})]
    assert _verdicts(events)[-1] == "halt"


def test_batch_signature_ignores_call_order_in_a_transcript():
    def pair(x, y):
        return Batch((Call("c1", x, {}), Call("c2", y, {})))
    assert _verdicts([pair("a", "b"), pair("b", "a"), pair("a", "b")])[-1] == "halt"


def test_malformed_arguments_hash_as_raw_string():
    assert _verdicts([_call("edit", "{not valid json", malformed=True)] * 3)[-1] == "halt"


def test_observation_batches_use_elevated_threshold():
    assert _verdicts([_call("browser_snapshot", {})] * 3) == ["allow"] * 3
    assert _verdicts([_call("browser_snapshot", {})] * 16)[-1] == "halt"


def test_mixed_observation_action_batch_uses_standard_threshold():
    mixed = Batch((Call("c1", "browser_snapshot", {}), Call("c2", "do_thing", {})))
    assert _verdicts([mixed] * 3)[-1] == "halt"


def test_null_content_with_tool_calls_feeds_loop_only():
    assert _verdicts([_call("t", {})] * 3)[-1] == "halt"
    assert _verdicts([_call("t", {})] * 3, "stagnation") == []


@pytest.mark.parametrize("tool", ["fetch_webpage", "browser_navigate", "mcp__playwright__click"])
def test_a_costly_observation_batch_is_refused_at_the_ceiling(tool):
    assert "halt" not in _verdicts(_moving(tool, 15))
    assert _verdicts(_moving(tool, 16))[-1] == "halt"


@pytest.mark.parametrize("tool", ["fetch_webpage", "browser_click", "browser_navigate"])
def test_sixty_moving_costly_calls_no_longer_pass(tool):
    assert "halt" in _verdicts(_moving(tool, 60))


def test_a_costly_tool_keeps_the_elevated_threshold_it_was_classified_for():
    assert "halt" not in _verdicts(_moving("browser_navigate", 15, same=True))
    assert _verdicts(_moving("browser_navigate", 16, same=True))[-1] == "halt"


def test_a_genuinely_read_only_batch_still_has_no_ceiling():
    assert "halt" not in _verdicts(_moving("read_file", 100))


def test_a_mutating_batch_is_bounded_exactly_as_before():
    assert "halt" not in _verdicts(_moving("write_file", 15))
    assert _verdicts(_moving("write_file", 16))[-1] == "halt"


def test_the_first_occurrence_past_the_threshold_is_let_through_by_a_changed_answer():
    # rescue_tests: the 3rd moving write is the first the answers rescue (it passes; 16th refused).
    assert _verdicts(_moving("write_file", 3)) == ["allow"] * 3
    assert _verdicts([_call("write_file", {}, f"c{i}") for i in range(3)])[-1] == "halt"


def test_calls_shaped_like_seed_000s_tool_call_are_read_by_name_and_arguments():
    from collections import namedtuple
    from dataclasses import dataclass

    @dataclass
    class ToolCall:  # crates/gglib-core/src/domain/agent/tool_types.rs
        id: str
        name: str
        arguments: dict

    Named = namedtuple("Named", "id name arguments")
    for make in (ToolCall, Named):
        calls = [make("c1", "write_file", {"b": 2, "a": 1})]
        assert batch_signature(calls) == batch_signature([("write_file", {"a": 1, "b": 2})])
        assert answers_hash(calls, ["ok"]) == answers_hash([("write_file", {"a": 1, "b": 2})], ["ok"])
        d = LoopDetector()
        d.check(calls, 2, [], 15)
        d.check([make("c2", "write_file", {"a": 1, "b": 2})], 2, [], 15)  # ids play no part
        with pytest.raises(LoopDetected):
            d.check(calls, 2, [], 15)
    assert is_observation_batch([ToolCall("c1", "read_file", {})], ["read_file"])
    assert batch_signature([{"name": "t", "arguments": {"a": 1}}]) == batch_signature([("t", {"a": 1})])
