"""The replay engine: runs, answer assembly, after_halt, replay_many, Replayer, tally."""

from __future__ import annotations

import json
import random
import zlib

import pytest
from loopledger.detectors import BUILTIN_SPECS, PolicySpec
from loopledger.events import Answer, Answers, Batch, Call, Prose, SessionInfo, SessionStart, UserTurn
from loopledger.replay import Replayer, replay, replay_many, tally


def call(name: str, cid: str | None = None, **args) -> Call:
    return Call(cid, name, args)


def answers(*pairs) -> Answers:
    return Answers(tuple(Answer(cid, text) for cid, text in pairs))


def verdicts(steps) -> list[list[str]]:
    return [[c.verdict for c in s.checks] for s in steps]


def random_session(rng: random.Random, n: int, deep: bool = False) -> list:
    """A plausible session: user turns, prose, batches of 1-3 calls from a small pool, answers
    by id, without id, split, partial or missing."""
    pool = [("read", {"p": 1}), ("read", {"p": 2}), ("edit", {"p": 1, "t": "x"}), ("run", {"c": "make"}),
            ("browser_navigate", {"url": "u"}), ("grep", {"q": "z"})]
    if deep:
        value: object = 0
        for _ in range(5000):
            value = [value]
        pool.append(("deep", {"v": value}))
    texts = ["same", "other", "again"]
    events: list = []
    cid = 0
    for _ in range(n):
        r = rng.random()
        if r < 0.08:
            events.append(UserTurn(f"please {rng.randint(0, 3)}"))
        elif r < 0.18:
            events.append(Prose(rng.choice(texts)))
        else:
            calls = []
            for _ in range(rng.choice([1, 1, 1, 2, 3])):
                cid += 1
                name, args = rng.choice(pool)
                calls.append(Call(f"c{cid}" if rng.random() < 0.9 else None, name, args))
            events.append(Batch(tuple(calls)))
            mode = rng.random()
            if mode < 0.7:
                events.append(Answers(tuple(Answer(c.id, rng.choice(texts), rng.random() < 0.1) for c in calls)))
            elif mode < 0.85:
                for _ in calls:
                    events.append(Answers((Answer(None, rng.choice(texts)),)))
            # else: unanswered, judged when superseded
    return events


def test_runs_are_zero_based_and_a_user_turn_starts_a_new_run_only_after_events():
    events = [UserTurn("a"), Prose("p"), UserTurn("b"), UserTurn("c"), Prose("q")]
    assert [s.run for s in replay(events, "window")] == [0, 0, 1, 2, 2]
    events = [Prose("before"), UserTurn("a"), Prose("p")]
    assert [s.run for s in replay(events, "window")] == [0, 1, 1]
    assert [s.seq for s in replay(events, "window")] == [0, 1, 2]


def test_answers_matched_by_id_in_any_order_and_judged_when_complete():
    b = Batch((call("edit", "1", x=1), call("read", "2", p=1)))
    events = [UserTurn("go"), b, answers(("2", "r")), Prose("thinking"), answers(("1", "e")), b,
              answers(("1", "e"), ("2", "r"))]
    steps = list(replay(events, "run-length:max_strikes=5"))
    assert [(r.seq, r.outcome) for s in steps for r in s.results] == [(1, "not_comparable"), (5, "repeated")]
    assert steps[4].results and not steps[2].results  # judged at the completing Answers event


def test_answers_without_id_go_to_the_oldest_unanswered_call():
    b = Batch((call("a", None), call("b", None)))
    swapped_ids = [UserTurn("go"), b, answers((None, "A")), answers((None, "B")),
                   b, answers((None, "A"), (None, "B"))]
    outcomes = [r.outcome for s in replay(swapped_ids, "run-length:max_strikes=5") for r in s.results]
    assert outcomes == ["not_comparable", "repeated"]
    wrong_order = swapped_ids[:4] + [b, answers((None, "B"), (None, "A"))]
    outcomes = [r.outcome for s in replay(wrong_order, "run-length:max_strikes=5") for r in s.results]
    assert outcomes == ["not_comparable", "changed"]


def test_an_unknown_id_goes_to_a_call_without_id():
    b = Batch((call("a", None),))
    events = [b, answers(("x1", "A")), b, answers(("x2", "A"))]
    outcomes = [r.outcome for s in replay(events, "run-length:max_strikes=5") for r in s.results]
    assert outcomes == ["not_comparable", "repeated"]


def test_unknown_ids_are_ignored_and_the_first_answer_wins():
    b = Batch((call("a", "1"),))
    events = [b, answers(("zzz", "X"), ("1", "A"), ("1", "B")), b, answers(("1", "A"))]
    outcomes = [r.outcome for s in replay(events, "run-length:max_strikes=5") for r in s.results]
    assert outcomes == ["not_comparable", "repeated"]


@pytest.mark.parametrize("superseder", ["batch", "user", "end"])
def test_partly_answered_batch_is_judged_when_superseded(superseder):
    b = Batch((call("a", "1"), call("b", "2")))
    events = [b, answers(("1", "A"))]
    if superseder == "batch":
        events.append(Batch((call("c", "3"),)))
    elif superseder == "user":
        events.append(UserTurn("next"))
    steps = list(replay(events, "run-length"))
    judged = [(s.seq, r.seq, r.outcome) for s in steps for r in s.results if r.seq == 0]
    assert judged == [(len(events) - 1, 0, "not_comparable")]


def test_unanswered_batches_never_rescue_a_run():
    b = Batch((call("edit", "1", x=1),))
    steps = list(replay([UserTurn("go"), b, b, b], "run-length"))
    assert verdicts(steps) == [[], ["allow"], ["allow"], ["halt"]]


def test_after_halt_until_the_next_user_turn_batch_level():
    b = Batch((call("edit", "1", x=1), call("edit", "2", x=2)))
    events = [UserTurn("go"), b, b, b, Prose("hm"), b, UserTurn("again"), b]
    steps = list(replay(events, "run-length"))
    assert verdicts(steps) == [[], ["allow"], ["allow"], ["halt"], [], ["after_halt"], [], ["allow"]]
    assert steps[5].checks[0].idx == -1
    t = tally(steps)
    assert t.saved == 2 and t.halts == 1 and t.halted_runs == 1 and t.first_halt_seq == 3
    assert [(r.run, r.outcome, r.halt_seq, r.halt_idx, r.saved, r.calls) for r in t.runs] == [
        (0, "halted", 3, -1, 2, 8), (1, "clean", None, None, 0, 2)]


def test_after_halt_per_call_one_check_per_call():
    a = call("t", "1")
    events = [Batch((a,)), Batch((a, a, call("u", "2"))), Batch((a, call("v", "3")))]
    steps = list(replay(events, "window:window=8,threshold=3"))
    assert verdicts(steps) == [["allow"], ["allow", "halt", "after_halt"], ["after_halt", "after_halt"]]
    t = tally(steps)
    assert (t.saved, t.calls, t.runs[0].halt_seq, t.runs[0].halt_idx) == (3, 6, 1, 1)


def test_tally_counts_warnings_blocks_strikes_and_worst_outcome():
    w = call("write", "1", p=1)
    events = [UserTurn("a"), Batch((w,)), answers(("1", "same")), Batch((w,)), answers(("1", "same")),
              Batch((w,)), answers(("1", "same")), UserTurn("b"), Batch((w,)), Batch((w,))]
    ladder = tally(replay(events, "ladder"))
    assert [(r.outcome, r.warnings, r.blocks) for r in ladder.runs] == [("blocked", 1, 1), ("warned", 1, 0)]
    assert (ladder.warnings, ladder.blocks, ladder.halts, ladder.strikes) == (2, 1, 0, 0)
    rl = tally(replay(events, "run-length:max_strikes=5"))
    assert [r.strikes for r in rl.runs] == [2, 0] and rl.strikes == 2
    assert rl.totals()["runs"] == 2 and rl.totals()["calls"] == 5


def test_strikes_count_in_the_run_of_the_judged_batch():
    w = call("write", "1", p=1)
    events = [Batch((w,)), answers(("1", "x")), Batch((w,)), answers(("1", "x")), Batch((w,)), UserTurn("b")]
    steps = list(replay(events, "run-length:max_strikes=5"))
    t = tally(steps)
    assert [r.strikes for r in t.runs] == [1, 0]


def test_empty_batch_is_a_prose_turn_and_session_items_are_refused():
    events = [Batch(()), Batch((), text="same"), Batch((), text="same")]
    assert verdicts(replay(events, "stagnation:max_steps=1")) == [[], ["allow"], ["halt"]]
    with pytest.raises(TypeError, match="SessionStart"):
        list(replay([SessionStart(SessionInfo("k", "x"))], "window"))


def test_empty_session_gives_no_steps():
    assert list(replay([], "window")) == []
    assert tally([]).totals()["runs"] == 0


def test_replay_many_equals_one_replay_per_policy():
    events = random_session(random.Random(7), 300)
    together = list(replay_many(events, BUILTIN_SPECS, with_state=True))
    assert len(together) == len(events)
    for i, spec in enumerate(BUILTIN_SPECS):
        alone = list(replay(events, spec, with_state=True))
        assert [steps[i] for steps in together] == alone


@pytest.mark.parametrize("spec", [*BUILTIN_SPECS, PolicySpec.parse("cycle:max_period=3,warn_repeats=2"),
                                  PolicySpec.parse("stagnation:max_steps=1")], ids=lambda s: s.label)
def test_replayer_matches_a_replay_from_scratch_at_every_position(spec):
    # A seed of the spec's own (crc32: `hash` of a str changes with every process, so each run
    # walked another session and a failure could not be replayed).
    _walk_and_compare(spec, zlib.crc32(spec.id.encode()))


@pytest.mark.parametrize("seed", [14, 455, 1365])
def test_a_progress_replay_resumed_from_a_snapshot_matches_one_that_never_stopped(seed):
    """Sessions where a write's answer is judged against a call of the same tool older than the
    window, still in progress' per-tool index: a snapshot once rebuilt that index from the window
    alone, and the replay resumed from it read the write as new (found by the walk above)."""
    _walk_and_compare(PolicySpec("progress"), seed)


def _walk_and_compare(spec: PolicySpec, seed: int) -> None:
    rng = random.Random(seed)
    events = random_session(rng, 260)
    scratch = list(replay(events, spec, with_state=True))
    r = Replayer(events, spec, snapshot_every=16)
    assert r.current is None and r.state()["run"] == 0
    for _ in range(120):
        move = rng.random()
        if move < 0.4:
            r.forward()
        elif move < 0.6:
            r.back()
        else:
            r.jump_to(rng.randint(0, len(events)))
        if r.position:
            assert r.current == scratch[r.position - 1]
            assert r.steps == [replace_state(s) for s in scratch[: r.position]]
        json.dumps(r.state())
    r.jump_to(len(events))
    assert r.forward() is None and r.current == scratch[-1]
    r.jump_to(0)
    assert r.current is None and r.steps == []


def replace_state(step):
    return step._replace(state=None)


def test_replayer_snapshots_cope_with_deeply_nested_arguments():
    events = random_session(random.Random(3), 120, deep=True)
    scratch = list(replay(events, "cycle", with_state=True))
    r = Replayer(events, "cycle", snapshot_every=8)
    r.jump_to(len(events))
    r.jump_to(37)
    assert r.current == scratch[36]


def write_openai_chat(path, n_repeats: int, user: str = "fix it") -> None:
    messages = [{"role": "system", "content": "be brief"}, {"role": "user", "content": user}]
    for i in range(n_repeats):
        messages.append({"role": "assistant", "content": None, "tool_calls": [
            {"id": f"call_{i}", "type": "function",
             "function": {"name": "run_tests", "arguments": '{"path": "tests", "verbose": true}'}}]})
        messages.append({"role": "tool", "tool_call_id": f"call_{i}", "content": "1 failed"})
    messages.append({"role": "assistant", "content": "I give up"})
    path.write_text(json.dumps({"messages": messages}))


def cli(*args: str):
    from loopledger.cli.app import app
    from typer.testing import CliRunner

    return CliRunner().invoke(app, ["replay", *args], env={"COLUMNS": "250"})


def test_cli_replay_prints_every_step_with_verdicts_and_totals(tmp_path):
    f = tmp_path / "chat.json"
    write_openai_chat(f, 4)
    res = cli(str(f), "--policy", "run-length")
    assert res.exit_code == 0, res.output
    lines = [line for line in res.output.splitlines() if "│" in line]
    batch_rows = [line for line in lines if "run_tests" in line]
    assert len(batch_rows) == 4
    assert [row.split("│")[5].strip() for row in batch_rows] == ["allow", "allow", "halt", "after_halt"]
    assert "repeated #2" in res.output  # the answer to call #2 repeats the first's
    assert "totals: runs 1, calls 4, strikes 2" in res.output and "saved 1" in res.output
    res = cli(str(f), "--policy", "window", "--param", "threshold=2")
    assert res.exit_code == 0 and "threshold=2" in res.output


def test_cli_replay_errors(tmp_path):
    f = tmp_path / "chat.json"
    write_openai_chat(f, 1)
    res = cli(str(f), "--policy", "window:threshold=99")
    assert res.exit_code == 2 and "threshold" in res.output
    res = cli(str(f), "--session", "nope")
    assert res.exit_code == 1 and "no session 'nope'" in res.output
    res = cli(str(tmp_path / "missing.json"))
    assert res.exit_code != 0


def test_cli_replay_shows_transcript_text_inert(tmp_path):
    f = tmp_path / "chat.json"
    write_openai_chat(f, 1, user="[bold red]boom[/] \x1b[31mred\x1b[0m <script>x</script>")
    res = cli(str(f))
    assert res.exit_code == 0, res.output
    assert "[bold red]boom[/]" in res.output  # not parsed as rich markup
    assert "\x1b[31m" not in res.output and "\\x1b[31m" in res.output


def test_plain_caps_and_escapes():
    from loopledger.analysis.replay_table import plain

    assert plain("a\nb\tc\x00") == "a⏎b\\x09c\\x00"
    assert len(plain("x" * 1000)) == 70 and plain("x" * 1000).endswith("…")


@pytest.mark.corpus
def test_real_corpus_replays_under_every_default_policy(corpus_dir):
    from loopledger.analysis.replay_table import sessions_of
    from loopledger.formats import read

    files = [f for f in sorted(corpus_dir.rglob("*")) if f.is_file() and not f.name.startswith("README") and f.suffix != ".csv"]
    assert files
    total_calls = 0
    for f in files:
        for _info, events, _errors in sessions_of(read(f)):
            for steps in replay_many(events, BUILTIN_SPECS, with_state=True):
                for step in steps:
                    json.dumps(step.state)
            total_calls += sum(len(e.calls) for e in events if isinstance(e, Batch))
    assert total_calls > 1000


@pytest.mark.corpus
def test_corpus_submit_loop_is_caught_where_each_guard_says(corpus_dir):
    """ctf-crypto-eps-submit-loop.traj: the same `submit flag{…}` four times in a row (README's
    max run 4), each answered "Wrong flag!"."""
    from loopledger.analysis.replay_table import sessions_of
    from loopledger.formats import read

    [(_info, events, _errors)] = list(sessions_of(read(corpus_dir / "swe-agent-traj/ctf-crypto-eps-submit-loop.traj")))
    batches = [s for s in replay(events, "ladder") if isinstance(s.event, Batch)]
    submits = [s for s in batches if s.event.calls[0].name == "submit"]
    # the first submit has a typo (flat{…}); the next four are identical
    assert [c.verdict for s in submits for c in s.checks] == ["allow", "allow", "warn", "block", "halt",
                                                              "after_halt"]
    assert max(c.count for s in batches for c in s.checks if c.count) == 4
    rl = [s for s in replay(events, "run-length") if isinstance(s.event, Batch) and s.event.calls[0].name == "submit"]
    assert [s.checks[0].verdict for s in rl[:4]] == ["allow", "allow", "allow", "halt"]
    assert tally(replay(events, "run-length")).strikes >= 2


def test_huge_and_deep_arguments_through_every_policy_are_bounded():
    deep: object = "leaf"
    for _ in range(10_000):
        deep = {"k": deep}
    big = {"content": "x" * (10 * 1024 * 1024)}
    calls = [Call("1", "write_file", big), Call("2", "deep_tool", deep)]
    events = [UserTurn("go")]
    for _ in range(5):
        events += [Batch((calls[0],)), answers(("1", "ok")), Batch((calls[1],)), answers(("2", "ok"))]
    for steps in replay_many(events, BUILTIN_SPECS, with_state=True):
        for step in steps:
            text = json.dumps(step.state)
            assert len(text) < 20_000  # states show digests and short excerpts, never the arguments
            assert all(len(c.reason) < 500 for c in step.checks)
    verdicts = {spec.detector: [c.verdict for s in replay(events, spec) for c in s.checks] for spec in BUILTIN_SPECS}
    assert "halt" in verdicts["cycle"] and "halt" in verdicts["window"]
