"""Replay page (AppTest, a ledger filled by the real ingest pipeline from sample_data).

The page's state at every position it is moved to must equal a replay from the start to that
step; parameters typed into the form must change verdicts exactly as the detector does.
"""

from __future__ import annotations

import json

import pytest
import sqlalchemy as sa
from app_support import ledger_env, make_ledger, markdown_texts, metrics, plain_texts
from loopledger import vocab
from loopledger.analysis.scoring import call_position
from loopledger.detectors.policy import BUILTIN_SPECS, DETECTORS, INT, PARAMS, PolicySpec
from loopledger.events import Batch
from loopledger.ledger import schema as t
from loopledger.ledger.engine import make_engine
from loopledger.replay import replay
from replay_support import (
    SAMPLE_DATA,
    append_rest,
    as_json,
    copy_head,
    ingest,
    open_page,
    pipeline_ledger,
    runs_of,
    session_events,
)

PAGE = "views/replay.py"


@pytest.fixture(scope="module")
def ledger(tmp_path_factory):
    url = pipeline_ledger(tmp_path_factory.mktemp("replay") / "ledger.sqlite")
    with ledger_env(url):
        yield url, session_events(url)


def _state(at) -> object:
    assert len(at.json) == 1
    return json.loads(at.json[0].value)


def _run_box(at):
    """The run picker (one widget per spec: its labels name that spec's halts)."""
    return next(s for s in at.selectbox if s.label == "Run")


def _run_label(at, run: int) -> str:
    # Runs are counted from 1 on screen, as calls are: the run of index 0 is "run #1".
    return next(o for o in _run_box(at).options if o.startswith((f"run #{run + 1} —", f"run #{run + 1}:")))


def _apply(at) -> None:
    next(b for b in at.button if b.label == "Apply parameters").click().run()


def _call_no(events, seq: int) -> int:
    """The session's 1-based number of the first call of the batch at `seq`, counted here."""
    return 1 + sum(len(e.calls) for e in events[:seq] if isinstance(e, Batch))


def _longest_run(url: str, sid: int) -> tuple[int, int, int]:
    return max(runs_of(url, sid), key=lambda r: (r[2] - r[1], -r[0]))


STEP_SHARES = 5  # each detector steps a fifth of the sample sessions, every session is stepped by two


def _stepped(sessions: dict, detector: str, spec: PolicySpec) -> dict:
    """This detector's share of the sessions (rotating with its place in DETECTORS, so that
    together the detectors step every session), plus the first session it halts in."""
    share = DETECTORS.index(detector) % STEP_SHARES
    mine = {sid: ev for k, (sid, ev) in enumerate(sorted(sessions.items())) if k % STEP_SHARES == share}
    halting = next((sid for sid, ev in sorted(sessions.items())
                    if any(c.verdict == vocab.HALT for st in replay(ev, spec) for c in st.checks)), None)
    if halting is not None:
        mine[halting] = sessions[halting]
    return mine


def test_the_detectors_shares_step_every_sample_session(ledger):
    url, sessions = ledger
    covered = set()
    for detector in DETECTORS:
        covered |= set(_stepped(sessions, detector, PolicySpec(detector)))
    assert covered == set(sessions)


@pytest.mark.parametrize("detector", DETECTORS)
def test_stepping_equals_replay_from_start(ledger, detector):
    """The detector's share of the sample sessions: slider jumps, forward, back (across
    snapshots), next halt."""
    url, every = ledger
    spec = PolicySpec(detector)
    sessions = _stepped(every, detector, spec)
    first_sid = min(sessions)
    at = open_page(PAGE, session=str(first_sid), policy=spec.text)
    assert not at.exception, at.exception
    checked = 0

    def check(seq: int) -> None:
        nonlocal checked
        assert not at.exception, at.exception
        assert at.session_state["rp_step"] == seq
        assert _state(at) == as_json(ref[seq]), (sid, seq)
        checked += 1

    for sid, events in sorted(sessions.items()):
        ref = [s.state for s in replay(events, spec, with_state=True)]
        verdicts = [[c.verdict for c in s.checks] for s in replay(events, spec)]
        run, first, last = _longest_run(url, sid)
        if at.selectbox(key="rp_session").value != sid:
            at.selectbox(key="rp_session").set_value(sid).run()
        if _run_box(at).value != run:
            _run_box(at).set_value(run).run()
        check(first)
        if last == first:
            continue
        rp = at.session_state["rp_replayer"]
        # The slider moves in calls, as the buttons do: a call picked lands on the batch holding it.
        batches = [s for s in range(first, last + 1) if isinstance(events[s], Batch)]
        mid = first
        if len(batches) >= 2:
            at.slider(key="rp_call").set_value(_call_no(events, batches[-1]) + len(events[batches[-1]].calls) - 1).run()
            check(batches[-1])
            mid = batches[len(batches) // 2]
            at.slider(key="rp_call").set_value(_call_no(events, mid)).run()  # backwards: from the nearest snapshot
            check(mid)
            assert at.slider(key="rp_call").value == _call_no(events, mid)
        # Forward and Back go from call to call (a batch, or a step some check judged), never to an answer.
        stops = [s for s in range(first, last + 1) if isinstance(events[s], Batch) or verdicts[s]]
        fwd = next((s for s in stops if s > mid), None)
        assert at.button(key="rp_fwd").disabled == (fwd is None)
        if fwd is not None:
            at.button(key="rp_fwd").click().run()
            check(fwd)
        here = at.session_state["rp_step"]
        back = [s for s in stops if s < here][-2:]
        for want in reversed(back):
            at.button(key="rp_back").click().run()
            check(want)
        # Stepping reuses the Replayer kept in the session: no replay from the start per click.
        assert at.session_state["rp_replayer"] is rp
        # Next halt looks across every run of the session; within this run it lands on the step.
        cur = at.session_state["rp_step"]
        anywhere = next((s for s in range(cur + 1, len(verdicts)) if vocab.HALT in verdicts[s]), None)
        assert at.button(key="rp_next_halt").disabled == (anywhere is None)
        halt = anywhere if anywhere is not None and anywhere <= last else None
        if halt is not None:
            at.button(key="rp_next_halt").click().run()
            check(halt)
            assert metrics(at)["Verdict at this call"] == vocab.HALT
    assert checked >= len(sessions)


def _window_case(ledger) -> tuple[int, int, int, int, int | None]:
    """A run the default window guard halts, and where threshold=4 moves or removes that halt."""
    url, sessions = ledger
    base, looser = PolicySpec("window"), PolicySpec("window", {"threshold": 4})
    for sid, events in sorted(sessions.items()):
        a, b = list(replay(events, base)), list(replay(events, looser))
        for run, first, last in runs_of(url, sid):
            h1 = next((s.seq for s in a[first:last + 1] if any(c.verdict == vocab.HALT for c in s.checks)), None)
            h2 = next((s.seq for s in b[first:last + 1] if any(c.verdict == vocab.HALT for c in s.checks)), None)
            if h1 is not None and h1 != h2:
                return sid, run, first, h1, h2
    pytest.fail("no sample run where window threshold 3 → 4 moves a halt")


def test_editing_a_parameter_moves_the_halt(ledger):
    url, sessions = ledger
    sid, run, first, h1, h2 = _window_case(ledger)
    base = PolicySpec("window")
    at = open_page(PAGE, session=str(sid), run=str(run), policy=base.text, step=str(first))
    assert not at.exception, at.exception
    at.button(key="rp_next_halt").click().run()
    assert at.session_state["rp_step"] == h1 and metrics(at)["Verdict at this call"] == vocab.HALT

    at.number_input(key=f"rp_p_window_threshold_{base.id}").set_value(4)
    _apply(at)
    assert not at.exception, at.exception
    looser = PolicySpec("window", {"threshold": 4})
    assert at.session_state["rp_spec"] == looser
    assert at.session_state["rp_step"] == h1  # the cursor stays where it was
    assert metrics(at)["Verdict at this call"] != vocab.HALT
    live = {c.verdict for c in list(replay(sessions[sid], looser))[h1].checks}
    assert metrics(at)["Verdict at this call"] in live
    # The stored default's halt is shown beside the live verdict that no longer halts.
    table = next(d.value for d in at.dataframe if "stored" in d.value.columns)
    # Rows are named by call number: the calls of the batch at h1.
    numbers = {f"call #{_call_no(sessions[sid], h1) + k}" for k in range(len(sessions[sid][h1].calls))}
    row = table[table["call"].str.split(" ").str[:2].str.join(" ").isin(numbers) & (table["stored"] == vocab.HALT)]
    assert len(row) == 1 and row.iloc[0]["live"] != vocab.HALT and bool(row.iloc[0]["differs"])
    at.slider(key="rp_call").set_value(_call_no(sessions[sid], next(
        s for s in range(first, h1 + 1) if isinstance(sessions[sid][s], Batch)))).run()
    if h2 is not None:
        at.button(key="rp_next_halt").click().run()
        assert at.session_state["rp_step"] == h2
    assert at.query_params["policy"] == looser.text  # not stored: the link carries the spec itself


def test_apply_says_what_changed(ledger):
    url, sessions = ledger
    sid, run, first, h1, h2 = _window_case(ledger)
    base = PolicySpec("window")
    at = open_page(PAGE, session=str(sid), run=str(run), policy=base.text, step=str(first))
    at.number_input(key=f"rp_p_window_threshold_{base.id}").set_value(4)
    _apply(at)
    assert not at.exception, at.exception
    looser = PolicySpec("window", {"threshold": 4})
    runs = runs_of(url, sid)

    def halts(spec):
        steps = list(replay(sessions[sid], spec))
        out = {}
        for r, lo, hi in runs:
            h = next((s.seq for s in steps[lo:hi + 1] if any(c.verdict == vocab.HALT for c in s.checks)), None)
            if h is not None:
                out[r] = h
        return out

    old, new = halts(base), halts(looser)
    (info,) = [i.value for i in at.info]

    def ref(seq: int) -> str:  # the session's 1-based call number, as labels and the leaderboard count it
        return f"call #{call_position(sessions[sid], seq, 0)}"

    if h2 is not None:
        assert f"halt moved from {ref(h1)} to {ref(h2)}" in info
    else:
        later = sorted(r for r in new if r > run) or sorted(new)
        tail = f"the next one is in run #{later[0] + 1} ({ref(new[later[0]])})" if later else "no run of this session halts"
        assert f"no halt in this run any more (it was at {ref(h1)}); {tail}" in info
    assert f"Halted runs in this session: {len(old)} → {len(new)}" in info


def test_next_and_previous_halt_cross_runs(ledger):
    url, sessions = ledger
    spec = PolicySpec("run-length")
    for sid, events in sorted(sessions.items()):  # noqa: B007 (sid is used after the break)
        steps = list(replay(events, spec))
        halts = [s.seq for s in steps if any(c.verdict == vocab.HALT for c in s.checks)]
        runs_with = sorted({s.run for s in steps if s.seq in halts})
        if len(runs_with) >= 2:
            break
    else:
        pytest.fail("no sample session where run-length halts two runs")
    run_of = {s.seq: s.run for s in steps}
    first_run = runs_with[0]
    lo = next(lo for r, lo, _ in runs_of(url, sid) if r == first_run)
    at = open_page(PAGE, session=str(sid), run=str(first_run), policy=spec.text, step=str(lo))
    assert not at.exception, at.exception
    # The run picker marks the runs this policy halts.
    options = _run_box(at).options
    assert [i for i, o in enumerate(options) if " — halts at call #" in o] == [r for r, *_ in runs_of(url, sid) if r in runs_with]
    seen = []
    for _ in range(min(4, len(halts))):
        at.button(key="rp_next_halt").click().run()
        assert not at.exception, at.exception
        seen.append(at.session_state["rp_step"])
        assert _run_box(at).value == run_of[seen[-1]]
        assert metrics(at)["Verdict at this call"] == vocab.HALT
    assert seen == halts[:len(seen)] and len({run_of[s] for s in seen}) >= 2
    at.button(key="rp_prev_halt").click().run()
    assert at.session_state["rp_step"] == seen[-2] and _run_box(at).value == run_of[seen[-2]]


def test_state_fields_and_steps_read_for_people(ledger):
    url, sessions = ledger
    at = open_page(PAGE, session=str(min(sessions)), policy="run-length")
    helps = {m.label: m.proto.help for m in at.metric}
    for name in ("count", "total", "effective max", "ceiling"):
        assert helps[name], name
    assert "max_observation_steps" in helps["effective max"] and "max(" in helps["ceiling"]
    # The one word for an unset limit, in the form and the label.
    spec = PolicySpec("run-length", {"max_observation_steps": None})
    at = open_page(PAGE, session=str(min(sessions)), policy=spec.text)
    assert at.text_input(key=f"rp_p_run-length_max_observation_steps_{spec.id}").value == "no limit"
    assert any("max_observation_steps=no limit" in t for t in plain_texts(at))  # inert text, never markdown
    (chart,) = [c for c in at.get("vega_lite_chart") if c.proto.spec]
    spec_json = json.loads(chart.proto.spec)
    x = spec_json["layer"][0]["encoding"]["x"]
    assert x["axis"]["format"] == "d" and x["axis"]["tickMinStep"] == 1


def test_invalid_parameters_are_shown_in_place(ledger):
    url, sessions = ledger
    base = PolicySpec("window")
    at = open_page(PAGE, session=str(min(sessions)), policy=base.text)
    at.number_input(key=f"rp_p_window_threshold_{base.id}").set_value(9)
    _apply(at)
    assert not at.exception, at.exception
    errors = [e.value for e in at.error]
    # The reason quotes the values typed, so it is plain text under the error, never markdown.
    assert errors == ["Not applied:"]
    assert any("threshold" in p and "window" in p for p in plain_texts(at))
    assert at.session_state["rp_spec"] == base


def test_deep_link_lands_on_the_stored_halt(ledger):
    url, sessions = ledger
    eng = make_engine(url, readonly=True)
    with eng.connect() as conn:
        sid, run, seq, pid, detector = conn.execute(
            sa.select(t.run_outcomes.c.session_id, t.run_outcomes.c.run_idx, t.run_outcomes.c.halt_seq,
                      t.policies.c.id, t.policies.c.detector)
            .join(t.policies, t.policies.c.id == t.run_outcomes.c.policy_id)
            .where(t.run_outcomes.c.outcome == vocab.HALTED, t.run_outcomes.c.run_idx > 0)
            .order_by(t.run_outcomes.c.session_id.desc(), t.run_outcomes.c.run_idx)).first()
        stored = {r.verdict for r in conn.execute(sa.select(t.checks.c.verdict).where(
            t.checks.c.session_id == sid, t.checks.c.policy_id == pid, t.checks.c.seq == seq))}
    eng.dispose()
    at = open_page(PAGE, session=str(sid), run=str(run), policy=pid, step=str(seq))
    assert not at.exception, at.exception
    assert at.selectbox(key="rp_session").value == sid
    assert _run_box(at).value == run
    assert at.selectbox(key="rp_detector").value == detector
    assert at.session_state["rp_spec"].id == pid
    assert at.session_state["rp_step"] == seq
    if isinstance(sessions[sid][seq], Batch):  # the slider, in calls, stands on the halting batch's first call
        assert at.slider(key="rp_call").value == _call_no(sessions[sid], seq)
    assert vocab.HALT in stored and metrics(at)["Verdict at this call"] == vocab.HALT
    assert dict(at.query_params) == {"session": str(sid), "run": str(run), "policy": pid, "step": str(seq)}
    # Live verdicts equal the stored ones: no side-by-side table for the same policy.
    assert not any("stored" in d.value.columns for d in at.dataframe)


def test_play_advances_and_stops_at_the_end(ledger):
    url, sessions = ledger
    sid = min(sessions)
    run, first, last = _longest_run(url, sid)
    at = open_page(PAGE, session=str(sid), run=str(run), policy="window", step=str(last - 1))
    at.toggle(key="rp_play").set_value(True).run()
    assert not at.exception, at.exception
    # Play goes call to call: to the run's last step when it is a call, else it stays and stops.
    events = sessions[sid]
    last_call = isinstance(events[last], Batch)
    assert at.session_state["rp_step"] == (last if last_call else last - 1)
    for _ in range(3):
        at.run()
        assert not at.exception, at.exception
    assert at.session_state["rp_step"] == (last if last_call else last - 1) and at.toggle(key="rp_play").value is False


def test_a_growing_session_replays_its_new_events(tmp_path):
    src = SAMPLE_DATA / "claude_code" / "3f9c1e62-58a4-4d0b-9b7e-2a6d41c0e8f3.jsonl"
    n_lines = len(src.read_bytes().splitlines())
    live = tmp_path / "live" / src.name
    live.parent.mkdir()
    copy_head(src, live, n_lines // 2)
    url = pipeline_ledger(tmp_path / "ledger.sqlite", [live])
    spec = PolicySpec("run-length")
    with ledger_env(url):
        (sid, before), = session_events(url).items()
        at = open_page(PAGE, session=str(sid), policy=spec.text)
        assert not at.exception, at.exception
        run, first, last = runs_of(url, sid)[-1]
        _run_box(at).set_value(run).run()
        at.button(key="rp_fwd").click().run()
        append_rest(src, live, n_lines // 2)
        ingest(url, [live])
        (sid2, after), = session_events(url).items()
        assert sid2 == sid and len(after) > len(before)
        at.run()
        assert not at.exception, at.exception
        run2, first2, last2 = runs_of(url, sid)[-1]
        _run_box(at).set_value(run2).run()
        # The run's last call, on the slider that moves in calls: its batch is where the cursor lands.
        last_batch = max(s for s in range(first2, last2 + 1) if isinstance(after[s], Batch))
        at.slider(key="rp_call").set_value(_call_no(after, last_batch) + len(after[last_batch].calls) - 1).run()
        assert not at.exception, at.exception
        assert at.session_state["rp_step"] == last_batch
        ref = list(replay(after, spec, with_state=True))
        assert _state(at) == as_json(ref[last_batch].state)


def test_transcript_text_is_never_markdown(tmp_path):
    """gen_ledger puts script tags and a remote markdown image in session 1's title and an answer."""
    from bench.gen_ledger import HOSTILE

    url, _ = make_ledger(tmp_path / "hostile.sqlite", sessions=6, calls=300)
    with ledger_env(url):
        run, first, last = runs_of(url, 1)[0]
        at = open_page(PAGE, session="1", run=str(run), policy="ladder", step=str(min(last, first + 8)))
        assert not at.exception, at.exception
        assert any(HOSTILE in p for p in plain_texts(at))  # shown, as plain text
        assert not any("<script>" in m or "pwn.png" in m for m in markdown_texts(at))


def test_bad_link_values_are_named_not_fatal(ledger):
    url, sessions = ledger
    at = open_page(PAGE, session="999999", policy="nope:x=1", step="soon")
    assert not at.exception, at.exception
    warnings = " ".join(w.value for w in at.warning)
    assert "no session #999999" in warnings and "not understood" in warnings
    assert any("policy=nope:x=1" in x and "step=soon" in x for x in plain_texts(at))
    assert at.selectbox(key="rp_session").value in sessions  # the page still works on a real session
    at.run()  # the page has written its own, valid link: the warning was about the one followed
    assert not at.exception and not at.warning


HOSTILE_LINK_VALUES = ["![x](http://127.0.0.1:9/pwn.png)", "<img src=http://127.0.0.1:9/pwn.png>",
                       ":red[pwn] $x^2$ **bold** [pwn](http://127.0.0.1:9/pwn.png)"]


@pytest.mark.parametrize("value", HOSTILE_LINK_VALUES)
def test_a_policy_from_a_link_is_never_markdown(ledger, value):
    """A link anyone can write puts its text into the replayed policy's label and parameters."""
    url, sessions = ledger
    with ledger_env(url):
        at = open_page(PAGE, session=str(next(iter(sessions))), policy=f"run-length:observation_tools={value}")
        assert not at.exception, at.exception
        assert any("pwn" in p for p in plain_texts(at))  # the policy is shown, as plain text
        assert not any("pwn" in m for m in markdown_texts(at))


def test_a_link_never_imports_a_module(ledger):
    """`module:factory` names a plugin by import path; from a URL anyone can write, that would run
    a module's callable (`os:abort`). A link may only name registered detectors or stored policies."""
    from loopledger.detectors import registry

    url, sessions = ledger
    at = open_page(PAGE, session=str(min(sessions)), policy="os:getpid")
    assert not at.exception, at.exception
    assert "os:getpid" not in registry.names()
    assert any("policy=os:getpid" in x for x in plain_texts(at))
    assert at.session_state["rp_spec"].detector in registry.builtin_names()


def test_a_second_apply_keeps_the_run_and_step(ledger):
    """The issue: a second Apply (same values, or Enter then Apply) jumped to run 0, step 0 and said
    "Halted runs in this session: 0 → 0"; then (issue 37) it said "halt unchanged", as if the edit
    Enter had applied did nothing. The place holds, and the second Apply says what the first said."""
    url, sessions = ledger
    sid, run, first, h1, h2 = _window_case(ledger)
    base = PolicySpec("window")
    at = open_page(PAGE, session=str(sid), run=str(run), policy=base.text, step=str(h1))
    at.number_input(key=f"rp_p_window_threshold_{base.id}").set_value(4)
    _apply(at)  # what Enter in the parameter does: it submits the form
    looser = PolicySpec("window", {"threshold": 4})
    (first_said,) = [i.value for i in at.info]
    _apply(at)  # the same values again: the Apply click after Enter
    assert not at.exception, at.exception
    assert (at.session_state["rp_run"], at.session_state["rp_step"]) == (run, h1)
    assert _run_box(at).value == run
    n_base = len({s.run for s in replay(sessions[sid], base) if any(c.verdict == vocab.HALT for c in s.checks)})
    n_looser = len({s.run for s in replay(sessions[sid], looser) if any(c.verdict == vocab.HALT for c in s.checks)})
    (info,) = [i.value for i in at.info]
    assert info == first_said and "unchanged" not in info
    assert f"Halted runs in this session: {n_base} → {n_looser}." in info


def test_apply_without_an_edit_says_what_is_applied(ledger):
    """Apply pressed on the parameters in effect (nothing typed since): what is applied and where it
    halts, never "unchanged"."""
    url, sessions = ledger
    sid, run, first, h1, h2 = _window_case(ledger)
    base = PolicySpec("window")
    at = open_page(PAGE, session=str(sid), run=str(run), policy=base.text, step=str(h1))
    _apply(at)
    assert not at.exception, at.exception
    (info,) = [i.value for i in at.info]
    assert info.startswith("Applied: window ") and "unchanged" not in info
    assert f"Run #{run + 1} halts at call #{call_position(sessions[sid], h1, 0)}" in info


def test_after_apply_the_run_picker_reads_the_new_halt(ledger):
    """The issue: after Apply moved a halt to step 179 the run picker still read "halts at step 183"."""
    url, sessions = ledger
    sid, run, first, h1, h2 = _window_case(ledger)
    base = PolicySpec("window")
    at = open_page(PAGE, session=str(sid), run=str(run), policy=base.text, step=str(first))
    label = _run_label(at, run)
    assert f"halts at call #{call_position(sessions[sid], h1, 0)}:" in label
    at.number_input(key=f"rp_p_window_threshold_{base.id}").set_value(4)
    _apply(at)
    label = _run_label(at, run)
    if h2 is not None:
        assert f"halts at call #{call_position(sessions[sid], h2, 0)}:" in label
    else:
        assert "halts at" not in label


@pytest.mark.parametrize("spec", BUILTIN_SPECS, ids=[s.detector for s in BUILTIN_SPECS])
def test_every_built_in_detector_steps_applies_its_parameters_and_shows_its_state(ledger, spec):
    """Each built-in at its defaults: its form reads back as the same policy (every kind of
    parameter: numbers, decimals, yes/no, lists, text), a changed number applies, and its state at
    a call is on the page."""
    url, sessions = ledger
    sid = max(sessions, key=lambda s: sum(isinstance(e, Batch) for e in sessions[s]))
    at = open_page(PAGE, session=str(sid), policy=spec.text)
    assert not at.exception, at.exception
    assert at.session_state["rp_spec"] == spec
    for _ in range(2):  # to the second call of the first run
        at.button(key="rp_fwd").click().run()
    assert not at.exception, at.exception
    step = at.session_state["rp_step"]
    assert isinstance(sessions[sid][step], Batch)
    ref = list(replay(sessions[sid], spec, with_state=True))
    assert _state(at) == as_json(ref[step].state)
    _apply(at)  # nothing edited
    assert not at.exception, at.exception
    assert [e.value for e in at.error] == [] and at.session_state["rp_spec"] == spec
    looser, param = None, None
    for param in (p for p in PARAMS[spec.detector] if p.kind == INT):
        try:
            looser = spec.with_params(**{param.name: spec.params[param.name] + 1})
        except ValueError:  # a rule between parameters (warn_at < block_at …): the next one
            continue
        break
    assert looser is not None and param is not None
    at.number_input(key=f"rp_p_{spec.detector}_{param.name}_{spec.id}").set_value(looser.params[param.name])
    _apply(at)
    assert not at.exception, at.exception
    assert [e.value for e in at.error] == [] and at.session_state["rp_spec"] == looser
    assert at.session_state["rp_step"] == step
