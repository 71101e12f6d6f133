"""Property tests (hypothesis) for the detectors and the replay engine."""

from __future__ import annotations

import json
import random

import orjson
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from loopledger.detectors import (
    BUILTIN_SPECS,
    CycleDetector,
    LadderGuard,
    LoopDetected,
    LoopDetectedError,
    LoopDetector,
    LoopGuard,
    PolicySpec,
    ProgressDetector,
    batch_signature,
    canonical_json,
)
from loopledger.detectors.canonical import _walk
from loopledger.events import Answer, Answers, Batch, Call, Prose, UserTurn
from loopledger.replay import Replayer, replay, replay_many
from test_cycle import reference

SETTINGS = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])

scalars = st.one_of(st.none(), st.booleans(), st.integers(-(2**63), 2**63 - 1),
                    st.floats(allow_nan=False, allow_infinity=False), st.text(max_size=8))
json_values = st.recursive(
    scalars,
    lambda inner: st.one_of(st.lists(inner, max_size=4), st.dictionaries(st.text(max_size=5), inner, max_size=4)),
    max_leaves=25,
)


def shuffled(value, rnd: random.Random):
    """The same JSON value with every object's keys inserted in a random order."""
    if isinstance(value, dict):
        items = list(value.items())
        rnd.shuffle(items)
        return {k: shuffled(v, rnd) for k, v in items}
    if isinstance(value, list):
        return [shuffled(v, rnd) for v in value]
    return value


@SETTINGS
@given(json_values, st.randoms(use_true_random=False))
def test_canonical_key_invariant_under_key_permutation(value, rnd):
    assert canonical_json(shuffled(value, rnd)) == canonical_json(value)


@SETTINGS
@given(json_values)
def test_iterative_walk_prints_exactly_what_the_fast_path_prints(value):
    assert _walk(value) == orjson.dumps(value, option=orjson.OPT_SORT_KEYS).decode()


@SETTINGS
@given(json_values)
def test_canonical_json_parses_back_to_the_same_value(value):
    expected = {} if value is None else value
    assert json.loads(canonical_json(value)) == expected


names = st.sampled_from(["read", "edit", "grep", "run", "browser_navigate"])
small_args = st.dictionaries(st.sampled_from("abc"), st.integers(0, 2), max_size=2)
calls = st.tuples(names, small_args)


@SETTINGS
@given(st.lists(st.lists(calls, min_size=1, max_size=3), min_size=2, max_size=40),
       st.integers(1, 4), st.one_of(st.none(), st.integers(0, 5)))
def test_run_length_never_errors_on_strictly_alternating_signatures(batches, s, m):
    d = LoopDetector()
    previous = None
    for batch in batches:
        sig = batch_signature(batch)
        if sig == previous:
            continue  # keep the sequence strictly alternating
        previous = sig
        if m is not None and m < 1:
            m = 1  # M = 0 would refuse a first read-only batch by design
        try:
            d.check(batch, max_strikes=s, observation_tools=("read", "grep"), max_observation_steps=m)
        except LoopDetected:
            raise AssertionError(f"errored on a batch that differs from its predecessor: {batch}") from None


@SETTINGS
@given(st.lists(calls, max_size=60), st.integers(2, 6), st.data())
def test_window_count_never_exceeds_window_and_would_raise_predicts_record(seq, window, data):
    threshold = data.draw(st.integers(2, window))
    g = LoopGuard(window, threshold)
    for name, args in seq:
        before, size = g.recent_keys(), len(g)
        predicted = g.would_raise(name, args)
        assert g.recent_keys() == before and len(g) == size  # peeking changed nothing
        try:
            count = g.record(name, args)
            raised = False
        except LoopDetectedError as e:
            count, raised = e.count, True
        assert raised == predicted
        assert 1 <= count <= window and len(g) <= window
        assert count == g.recent_keys().count(g.key_fn(name, args))


@SETTINGS
@given(st.lists(st.tuples(st.sampled_from("ABC"), st.sampled_from([None, "x", "y"])), max_size=40),
       st.integers(2, 5), st.integers(2, 4), st.data())
def test_cycle_agrees_with_the_brute_force_reference(seq, max_period, warn, data):
    halt = data.draw(st.integers(warn, 5))
    d = CycleDetector(max_period, warn, halt)
    keys: list = []
    answers: list = []
    for name, answer in seq:
        v = d.check(name, {})
        keys.append(name)
        answers.append(None)
        assert (v.action, v.period, v.repeats) == reference(keys, answers, max_period, warn, halt)
        if v.period:
            assert list(v.pattern) == keys[-v.period:]
        if answer is not None:
            d.record_answer(answer)
            answers[-1] = answer


@SETTINGS
@given(st.lists(st.tuples(names, small_args), max_size=40))
def test_ladder_count_is_the_run_of_identical_keys(seq):
    g = LadderGuard()
    run = 0
    for i, (name, args) in enumerate(seq):
        same = i > 0 and seq[i - 1][0] == name and canonical_json(seq[i - 1][1]) == canonical_json(args)
        run = run + 1 if same else 1
        assert g.check(name, args).count == run


def session_events():
    call = st.builds(lambda n, a, i: Call(f"c{i}", n, a), names, small_args, st.integers(0, 3))
    answer = st.builds(lambda i, t, e: Answer(i, t, e), st.one_of(st.none(), st.sampled_from(["c0", "c1", "c2", "c9"])),
                       st.sampled_from(["ok", "no", ""]), st.booleans())
    event = st.one_of(
        st.builds(UserTurn, st.just("go")),
        st.builds(Prose, st.sampled_from(["same", "other", ""])),
        st.builds(lambda cs: Batch(tuple(cs)), st.lists(call, max_size=3)),
        st.builds(lambda ans: Answers(tuple(ans)), st.lists(answer, min_size=1, max_size=3)),
    )
    return st.lists(event, max_size=40)


@SETTINGS
@given(session_events())
def test_state_is_always_json_serializable_and_replay_many_matches(events):
    together = list(replay_many(events, BUILTIN_SPECS, with_state=True))
    for i, spec in enumerate(BUILTIN_SPECS):
        alone = list(replay(events, spec, with_state=True))
        assert [steps[i] for steps in together] == alone
        for step in alone:
            json.dumps(step.state)
            assert all(r.seq >= 0 for r in step.results)


@settings(max_examples=60, deadline=None)
@given(session_events(), st.sampled_from(BUILTIN_SPECS), st.lists(st.integers(0, 40), max_size=6))
def test_replayer_jumps_equal_replay_from_scratch(events, spec, targets):
    scratch = list(replay(events, spec, with_state=True))
    r = Replayer(events, spec, snapshot_every=3)
    for t in targets:
        r.jump_to(t)
        pos = min(t, len(events))
        assert r.position == pos
        assert r.current == (scratch[pos - 1] if pos else None)


def simple_sessions():
    """User turns and batches each followed by complete answers (by id): the shape where the
    replay engine's verdicts can be re-derived by driving a detector by hand."""
    answer_text = st.sampled_from(["ok", "ok", "no"])
    few = st.sampled_from([("read", {"a": 1}), ("edit", {"b": 2}), ("read", {"a": 2})])  # loops likely
    batch = st.lists(st.builds(lambda c, t: (c[0], c[1], t), few, answer_text), min_size=1, max_size=2)
    return st.lists(st.one_of(st.just("user"), batch), max_size=30)


def build(session):
    events, plan, cid = [], [], 0
    for item in session:
        if item == "user":
            events.append(UserTurn("go"))
            plan.append("user")
            continue
        calls = []
        for name, args, _ in item:
            cid += 1
            calls.append(Call(f"c{cid}", name, args))
        events.append(Batch(tuple(calls)))
        events.append(Answers(tuple(Answer(c.id, text) for c, (_, _, text) in zip(calls, item, strict=True))))
        plan.append((calls, [text for _, _, text in item]))
    return events, plan


@SETTINGS
@given(simple_sessions())
def test_replay_verdicts_equal_driving_each_detector_by_hand(session):
    by_hand(session)


def by_hand(session) -> dict[str, list[str]]:
    """Assert the replay engine's verdicts equal the detectors driven by hand; return them."""
    from loopledger.detectors import answers_hash

    events, plan = build(session)
    got = {spec.detector: [c.verdict for s in replay(events, spec) for c in s.checks] for spec in BUILTIN_SPECS}

    expected: dict[str, list[str]] = {"run-length": [], "ladder": [], "window": [], "cycle": [], "progress": []}
    rl, lad, win, cyc, prog = LoopDetector(), LadderGuard(), LoopGuard(8, 3), CycleDetector(), ProgressDetector()
    halted = dict.fromkeys(expected, False)
    for step in plan:
        if step == "user":
            rl.break_run(), lad.break_run(), win.reset(), cyc.break_run(), prog.user_turn()
            halted = dict.fromkeys(expected, False)
            continue
        calls, texts = step
        if halted["run-length"]:
            expected["run-length"].append("after_halt")
        else:
            try:
                record = rl.check(calls)
                expected["run-length"].append("allow")
            except LoopDetected as e:
                record = e.record
                expected["run-length"].append("halt")
                halted["run-length"] = True
            rl.record_results(record, answers_hash(calls, texts))
        for name, guard in (("ladder", lad), ("window", win)):
            for call in calls:
                if halted[name]:
                    expected[name].append("after_halt")
                    continue
                if name == "window":
                    try:
                        guard.record(call.name, call.args)
                        verdict = "allow"
                    except LoopDetectedError:
                        verdict = "halt"
                else:
                    verdict = guard.check(call.name, call.args).action
                expected[name].append(verdict)
                halted[name] = verdict == "halt"
        positions = []
        for call in calls:
            if halted["cycle"]:
                expected["cycle"].append("after_halt")
                continue
            v = cyc.check(call.name, call.args)
            expected["cycle"].append(v.action)
            positions.append(v.position)
            halted["cycle"] = v.action == "halt"
        # answers reach the cycle detector once the whole batch was checked, by position
        for position, text in zip(positions, texts, strict=False):
            cyc.record_answer(Answer(None, text), position=position)
        positions = []
        for call in calls:
            if halted["progress"]:
                expected["progress"].append("after_halt")
                continue
            v = prog.check(call.name, call.args)
            expected["progress"].append(v.action)
            positions.append(v.position)
            halted["progress"] = v.action == "halt"
        for position, text in zip(positions, texts, strict=False):
            prog.record_answer(Answer(None, text), position=position)
    for name, verdicts in expected.items():
        assert got[name] == verdicts, name
    return expected


def test_the_by_hand_examples_halt_every_detector():
    same = [[("edit", {"b": 2}, "ok")]] * 5
    cycle = [[("read", {"a": 1}, "ok")], [("edit", {"b": 2}, "ok")]] * 5
    halted = set()
    for session in (["user", *same], ["user", *cycle, "user", *same]):
        expected = by_hand(session)
        halted |= {name for name, verdicts in expected.items() if "halt" in verdicts}
    assert halted == {"run-length", "ladder", "window", "cycle", "progress"}


# ── progress: a repeat is a loop only when nothing changed ──────────────────────────────────

progress_specs = st.builds(
    lambda w, warn, extra, ok, across: PolicySpec("progress", {
        "window": w, "warn_at": warn, "halt_at": max(3, warn + extra), "ok_halt_at": max(3, warn + ok),
        "across_turns": across}),
    st.integers(2, 30), st.integers(2, 4), st.integers(0, 2), st.integers(0, 2),
    st.sampled_from(["none", "errors", "all"]))


def unique_answer_sessions():
    """Sessions of repeats (few tools, few arguments, user turns) where every answer differs."""
    call = st.tuples(st.sampled_from(["read", "update", "bash"]), small_args, st.booleans(),
                     st.sampled_from(["", "Error: ", "<returncode>1</returncode> "]))
    item = st.one_of(st.just("user"), st.lists(call, min_size=1, max_size=3))
    return st.lists(item, max_size=40)


@SETTINGS
@given(unique_answer_sessions(), progress_specs)
def test_progress_never_halts_a_session_whose_answers_change_on_every_call(session, spec):
    events, n = [], 0
    for item in session:
        if item == "user":
            events.append(UserTurn("go on"))
            continue
        calls, answers = [], []
        for name, args, is_error, prefix in item:
            n += 1
            calls.append(Call(f"c{n}", name, args))
            # a new word every time (no digits: nothing a volatile pattern could remove)
            word = "".join("abcdefghij"[int(d)] for d in str(n))
            answers.append(Answer(f"c{n}", f"{prefix}result {word}", is_error))
        events += [Batch(tuple(calls)), Answers(tuple(answers))]
    verdicts = [c.verdict for s in replay(events, spec) for c in s.checks]
    assert "halt" not in verdicts


@SETTINGS
@given(st.lists(st.tuples(names, json_values, st.sampled_from(["same", "Error: same", "other"])), max_size=30),
       st.randoms(use_true_random=False))
def test_progress_verdicts_do_not_depend_on_the_order_of_argument_keys(seq, rnd):
    a, b = ProgressDetector(), ProgressDetector()
    for name, args, answer in seq:
        va, vb = a.check(name, args), b.check(name, shuffled(args, rnd))
        assert (va.action, va.count, va.rule) == (vb.action, vb.count, vb.rule)
        a.record_answer(answer)
        b.record_answer(answer)


def agent_days():
    """Steps of an agent at work: polls (quick and sleeping) of something pending or done,
    edits, failures, reads, user turns, each some seconds after the one before."""
    step = st.sampled_from([
        ("bash", {"command": "gh run view 1"}, '{"status":"queued"}', False),
        ("bash", {"command": "gh run view 1"}, '{"status":"completed"}', False),
        ("bash", {"command": "sleep 30 && gh run view 1"}, '{"status":"queued"}', False),
        ("write_stdin", {"session_id": 7, "chars": "", "yield_time_ms": 10000}, "Process running with session ID 7", False),
        ("bash", {"command": "curl -s localhost:8080/health"}, "Error: 503 Service Unavailable", True),
        ("bash", {"command": "sed -i s/a/b/ a.py"}, "", False),
        ("bash", {"command": "sed -i s/b/c/ a.py"}, "", False),
        ("bash", {"command": "pytest -q"}, "1 failed, 3 passed", True),
        ("bash", {"command": "cat a.py"}, "print('a')", False),
        "user",
    ])
    return st.lists(st.tuples(step, st.integers(0, 600)), max_size=40)


@SETTINGS
@given(agent_days())
def test_every_warning_and_halt_of_progress_says_why(days):
    # the reason is what the model reads in a live warning and what a person reads in the ledger
    d, at = ProgressDetector(), 1_764_000_000
    for step, gap in days:
        at += gap
        if step == "user":
            d.user_said("go on")
            d.user_turn()
            continue
        name, args, answer, is_error = step
        v = d.check(name, args, at=at)
        assert v.action == "allow" or v.reason, (v, d.state())
        d.record_answer(answer, is_error)
