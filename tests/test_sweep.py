"""loopledger.analysis.sweep (grid, settings, flips, precision/recall, saving) and the Replay/Compare charts."""

from __future__ import annotations

import json

import pytest
import sqlalchemy as sa
from loopledger import vocab, worker
from loopledger.analysis import scoring, sweep
from loopledger.app import charts_replay as charts
from loopledger.app import replay_view as rv
from loopledger.detectors.policy import PolicySpec
from loopledger.events import Answer, Answers, Batch, Call, Prose, UserTurn
from loopledger.ledger import schema as t
from loopledger.ledger import store
from loopledger.ledger.engine import make_engine
from loopledger.ledger.migrate import upgrade
from loopledger.replay import replay, tally

_n = iter(range(10**9))


def call(name: str, **args) -> Call:
    return Call(f"id{next(_n)}", name, args)


def batch_and_answer(c: Call, text: str = "same") -> list:
    return [Batch((c,)), Answers((Answer(c.id, text),))]


def repeat_session(times: int, name: str = "grep", arg: str = "x") -> list:
    """A user turn, then the same call `times` times with the same answer."""
    events: list = [UserTurn("find x")]
    for _ in range(times):
        events += batch_and_answer(call(name, q=arg))
    return events


def abab_session(reps: int) -> list:
    events: list = [UserTurn("fix it")]
    for _ in range(reps):
        events += batch_and_answer(call("edit", f="a.py"), "ok")
        events += batch_and_answer(call("test"), "1 failed")
    return events


def clean_session() -> list:
    events: list = [UserTurn("look around"), Prose("sure")]
    for i in range(6):
        events += batch_and_answer(call("read", path=f"f{i}.py"), f"content {i}")
    return events


SESSIONS = [
    sweep.SessionEvents(1, repeat_session(6)),
    sweep.SessionEvents(2, abab_session(5)),
    sweep.SessionEvents(3, clean_session()),
    sweep.SessionEvents(4, repeat_session(3) + repeat_session(5, "ls", "y")),  # two runs
]


# ── parsing ──────────────────────────────────────────────────────────────────────────────────


def test_parse_values_forms():
    assert sweep.parse_values("2..6") == (2, 3, 4, 5, 6)
    assert sweep.parse_values("2..10:4") == (2, 6, 10)
    assert sweep.parse_values("4, 8,12") == (4, 8, 12)
    assert sweep.parse_values("none,5") == (None, 5)
    assert sweep.parse_axis("threshold=2..3") == sweep.Axis("threshold", (2, 3))


@pytest.mark.parametrize("bad, words", [
    ("6..2", "below the start"), ("2..x", "integers"), ("2..6:0", "positive"), ("", "empty"), (",", "no values"),
])
def test_parse_values_rejects(bad, words):
    with pytest.raises(sweep.SweepError, match=words):
        sweep.parse_values(bad)


def test_parse_axis_needs_name():
    with pytest.raises(sweep.SweepError, match="NAME=RANGE"):
        sweep.parse_axis("2..6")


def test_make_grid_validates_detector_and_params():
    with pytest.raises(sweep.SweepError, match="unknown detector 'nope'"):
        sweep.make_grid("nope", [sweep.Axis("x", (1,))])
    with pytest.raises(sweep.SweepError, match="window has no parameter 'max_strikes'"):
        sweep.make_grid("window", [sweep.Axis("max_strikes", (1,))])
    with pytest.raises(sweep.SweepError, match="both axes"):
        sweep.make_grid("window", [sweep.Axis("window", (4,)), sweep.Axis("window", (8,))])
    g = sweep.make_grid("window", [sweep.Axis("threshold", (2, 3)), sweep.Axis("window", (4, 8))])
    assert sweep.grid_points(g) == [(2, 4), (2, 8), (3, 4), (3, 8)]
    assert sweep.spec_for(g, (3, 4)) == PolicySpec("window", {"threshold": 3, "window": 4})


# ── the sweep against hand-worked answers and against loopledger.replay ──────────────────────────


def test_window_threshold_sweep_hand_worked():
    """Six identical calls: the window guard halts on the threshold-th occurrence (seed 003)."""
    sess = [sweep.SessionEvents(1, repeat_session(6))]
    result = sweep.sweep(sess, sweep.make_grid("window", [sweep.parse_axis("threshold=2..7")],
                                               {"window": 8}))
    by = {s.values[0]: s for s in result.settings}
    for th in range(2, 7):
        s = by[th]
        assert s.error is None
        # events: 0 user, then batch at 1, 3, 5, …: the th-th call is at seq 2*th - 1
        assert s.first_halt[1] == 2 * th - 1
        assert s.totals["halts"] == 1
        assert s.totals["saved"] == 6 - th  # the calls after the halt
        assert s.runs[(1, 0)].outcome == vocab.HALTED
    assert by[7].first_halt[1] is None and by[7].runs[(1, 0)].outcome == vocab.CLEAN


def test_sweep_equals_direct_replay_per_session():
    grid = sweep.make_grid("ladder", [sweep.parse_axis("halt_at=4..6"), sweep.parse_axis("block_at=3,4")])
    result = sweep.sweep(SESSIONS, grid)
    assert len(result.settings) == 6
    for s in result.settings:
        spec = sweep.spec_for(grid, s.values) if s.error is None else None
        if s.values[1] >= s.values[0]:  # block_at must stay below halt_at
            assert s.error and "block_at" in s.error
            continue
        want = dict.fromkeys(sweep.TOTALS, 0)
        for sess in SESSIONS:
            tl = tally(replay(sess.events, spec))
            for k in sweep.TOTALS:
                want[k] += tl.totals()[k]
            assert s.first_halt[sess.session_id] == tl.first_halt_seq
            for r in tl.runs:
                assert s.runs[(sess.session_id, r.run)].outcome == r.outcome
                assert s.runs[(sess.session_id, r.run)].halt_seq == r.halt_seq
        assert s.totals == want


def _same(a: sweep.SweepResult, b: sweep.SweepResult) -> None:
    assert a.session_ids == b.session_ids
    for x, y in zip(a.settings, b.settings, strict=True):
        assert (x.values, x.error, x.totals, x.runs, x.first_halt) == (y.values, y.error, y.totals, y.runs, y.first_halt)


def test_a_cached_sweep_replays_only_the_pairs_it_lacks_and_folds_to_the_direct_answer(monkeypatch):
    cache = sweep.TallyCache()
    small = sweep.make_grid("window", [sweep.parse_axis("threshold=2..4")])
    wide = sweep.make_grid("window", [sweep.parse_axis("threshold=2..6")])
    versions = [sweep.version_of(sess) for sess in SESSIONS]
    assert sweep.fold(versions, small, cache) is None and sweep.missing(versions, small, cache) == versions
    _same(sweep.sweep(SESSIONS, small, cache=cache), sweep.sweep(SESSIONS, small))
    assert len(cache) == 3 * len(SESSIONS) and sweep.missing(versions, small, cache) == []
    _same(sweep.fold(versions, small, cache), sweep.sweep(SESSIONS, small))  # no events needed
    replayed: list[int] = []
    real = sweep.replay_many
    monkeypatch.setattr(sweep, "replay_many", lambda events, policies: replayed.append(len(policies))
                        or real(events, policies))
    _same(sweep.sweep(SESSIONS, wide, cache=cache), sweep.sweep(SESSIONS, wide))
    assert replayed[:len(SESSIONS)] == [2] * len(SESSIONS)  # thresholds 5 and 6 only, with the cache
    grown = [sweep.SessionEvents(1, SESSIONS[0].events + repeat_session(2))]  # a new version of session 1
    assert sweep.missing([sweep.version_of(grown[0])], wide, cache) == [sweep.version_of(grown[0])]
    small_cache = sweep.TallyCache(max_entries=4)
    sweep.sweep(SESSIONS, small, cache=small_cache)
    assert len(small_cache) == 4 and sweep.fold(versions, small, small_cache) is None  # the oldest went


def test_cycle_sweep_catches_abab_and_not_clean():
    result = sweep.sweep(SESSIONS, sweep.make_grid("cycle", [sweep.parse_axis("halt_repeats=4,6")],
                                                   {"warn_repeats": 3}))
    low, high = result.settings
    assert low.runs[(2, 0)].outcome == vocab.HALTED  # (edit, test) ×5 reaches 4 repeats
    assert high.runs[(2, 0)].outcome == vocab.WARNED  # never 6 repeats, but ≥ 3
    assert low.runs[(3, 0)].outcome == vocab.CLEAN and high.runs[(3, 0)].outcome == vocab.CLEAN
    flips = sweep.flipped(low, high)
    assert [(f.session_id, f.run_idx, f.outcome_a, f.outcome_b) for f in flips] == [
        (2, 0, vocab.HALTED, vocab.WARNED)]
    assert flips[0].halt_seq_a is not None and flips[0].halt_seq_b is None


def test_progress_is_called_per_session_and_empty_sessions_count():
    seen = []
    sessions = [*SESSIONS[:2], sweep.SessionEvents(9, [])]
    result = sweep.sweep(sessions, sweep.make_grid("window", [sweep.parse_axis("threshold=2..4")]),
                         progress=lambda d, n, label: seen.append((d, n, label)))
    assert seen == [(1, 3, "session 1"), (2, 3, "session 2"), (3, 3, "session 9")]
    assert all(s.first_halt[9] is None and s.first_halt[1] is not None for s in result.settings)


def test_rows_for_tables_and_heatmaps():
    result = sweep.sweep(SESSIONS, sweep.make_grid("window", [sweep.parse_axis("threshold=3,9")]))
    rows = sweep.totals_rows(result)
    assert rows[1]["error"] and rows[1]["halts"] is None  # threshold 9 > window 8
    assert rows[0]["threshold"] == 3 and rows[0]["halts"] == result.settings[0].totals["halts"]
    fh = sweep.first_halt_rows(result)
    assert {r["session_id"] for r in fh} == {1, 2, 3, 4} and len(fh) == 4


def test_first_pass_takes_labelled_then_newest_that_fit_within_the_event_budget():
    # (session, events), newest first; budget 100 events.
    sizes = [(9, 60), (8, 50), (7, 30), (6, 10), (1, 25)]
    # Labelled 1 first (25, 75 left); then 9 (60, 15 left); 8 and 7 do not fit; 6 does (5 left).
    assert sweep.first_pass(sizes, labelled={1}, max_events=100) == [9, 6, 1]
    # Unlabelled: 9 (40 left), 8 does not fit, 7 (10 left), 6 (0 left), 1 does not fit.
    assert sweep.first_pass(sizes, labelled=(), max_events=100) == [9, 7, 6]
    # All fit: every session, in the given order; a labelled session too big for the budget is passed over.
    assert sweep.first_pass(sizes, labelled={8}, max_events=1_000) == [9, 8, 7, 6, 1]
    assert sweep.first_pass([(3, 500), (2, 5)], labelled={3}, max_events=100) == [2]
    assert sweep.first_pass([], labelled={1}, max_events=100) == []


def test_cache_key_changes_when_a_session_grows():
    grid = sweep.make_grid("window", [sweep.parse_axis("threshold=2..3")])
    a = sweep.cache_key(SESSIONS, grid)
    grown = [sweep.SessionEvents(1, SESSIONS[0].events + [Prose("more")], 2.0), *SESSIONS[1:]]
    assert sweep.cache_key(SESSIONS, grid) == a
    assert sweep.cache_key(grown, grid) != a
    assert sweep.cache_key(SESSIONS, sweep.make_grid("window", [sweep.parse_axis("threshold=2..4")])) != a


def test_compare_scores_sessions_as_the_leaderboard_does():
    """One unit: a setting's score in Compare is scoring.score over the labelled sessions, each judged
    by its first halt's call position — what the leaderboard gives a stored policy (the expected
    rows are built from a plain replay of each session and scoring.judge_replay, not the sweep)."""
    result = sweep.sweep(SESSIONS, sweep.make_grid("window", [sweep.parse_axis("threshold=3,6")]))
    # Session 1: a loop over calls 1-6; 2: a loop over calls 3-10; 3: normal; 4: a loop in its second run.
    labels = {1: ("loop", 1, 6), 2: ("loop", 3, 10), 3: ("normal", None, None), 4: ("loop", 4, 8)}
    for setting in result.settings:
        got = sweep.judged(setting, labels)
        want = []
        for sess in SESSIONS:
            label, first, last = labels[sess.session_id]
            steps = list(replay(sess.events, setting.spec))
            saved = tally(steps).totals()["saved"]
            want.append(scoring.judge_replay(setting.spec.id, sess.session_id, label, first, last, sess.events,
                                             steps, saved))
        assert [(j.session_id, j.halt_at, j.saved, j.outcome) for j in got] == \
            [(j.session_id, j.halt_at, j.saved, j.outcome) for j in want]
        assert sweep.session_scores(result, labels)[result.settings.index(setting)].row() == \
            scoring.score(want, [(setting.spec.id, setting.label)])[0].row()
    strict, loose = sweep.session_scores(result, labels)
    assert strict.loops == 3 and strict.normal == 1  # sessions, not runs: session 4 has two runs, one loop
    assert strict.recall > loose.recall  # threshold 6 misses the shorter loops
    # Only labelled sessions count, and an unlabelled one changes nothing.
    assert sweep.session_scores(result, {3: ("normal", None, None)})[0].loops == 0


# ── saving a sweep as policies, on both backends ─────────────────────────────────────────────


def _ledger_with(db_url: str, sessions: list[list]) -> list[int]:
    from loopledger.events import SessionInfo
    from loopledger.worker import replay_session

    eng = make_engine(db_url)
    upgrade(eng)
    ids = []
    with eng.begin() as conn:
        src = conn.execute(t.sources.insert().values(path="mem.jsonl", size=0).returning(t.sources.c.id)).scalar()
        for i, events in enumerate(sessions):
            run_of, verdicts = replay_session(events, [])
            ids.append(store.write_session(conn, src, SessionInfo(str(i), "openai-chat"), events, run_of, verdicts))
    eng.dispose()
    return ids


def test_saving_policies_is_one_short_transaction_per_session(db_url, tmp_path):
    """The dashboard's "Save as policies" and `sweep --save` hold the write lock for one session at
    a time: another writer gets in between sessions (it used to wait for the whole ledger)."""
    import sqlite3

    ids = _ledger_with(db_url, [repeat_session(6), abab_session(5), repeat_session(4), abab_session(3)])
    eng = make_engine(db_url)
    commits: list[int] = []
    sa.event.listen(eng, "commit", lambda conn: commits.append(1))
    others: list[str] = []

    def another_writer(done: int, total: int, _sid: str) -> None:
        if not db_url.startswith("sqlite"):
            return
        other = sqlite3.connect(sa.engine.make_url(db_url).database, timeout=0, isolation_level=None)
        try:
            other.execute("BEGIN IMMEDIATE")  # takes the write lock at once, or fails: no waiting
            other.execute("ROLLBACK")
            others.append("ok")
        except sqlite3.OperationalError as exc:
            others.append(str(exc))
        finally:
            other.close()

    specs = [PolicySpec("window", {"threshold": 3}), PolicySpec("cycle")]
    try:
        assert worker.judge_stored(eng, specs, ids, progress=another_writer) == 2
    finally:
        eng.dispose()
    assert len(commits) == 1 + len(ids)  # the policies, then each session on its own
    if db_url.startswith("sqlite"):
        assert others == ["ok"] * len(ids)


def test_save_policies_writes_what_replay_computes(db_url):
    ids = _ledger_with(db_url, [repeat_session(6), abab_session(5)])
    eng = make_engine(db_url)
    specs = [PolicySpec("window", {"threshold": th}) for th in (3, 5)]
    assert worker.judge_stored(eng, specs + specs[:1], ids) == 2
    with eng.connect() as conn:
        stored = {r.id: r for r in conn.execute(sa.select(t.policies))}
        assert set(stored) == {sp.id for sp in specs}
        assert json.loads(stored[specs[0].id].params) == {"threshold": 3, "window": 8}
        for sid in ids:
            events = store.load_events(conn, sid)
            for sp in specs:
                tl = tally(replay(events, sp))
                row = conn.execute(sa.select(t.session_stats).where(
                    t.session_stats.c.session_id == sid, t.session_stats.c.policy_id == sp.id)).one()
                assert (row.halts, row.saved, row.first_halt_seq) == (tl.halts, tl.saved, tl.first_halt_seq)
                n_checks = conn.execute(sa.select(sa.func.count()).select_from(t.checks).where(
                    t.checks.c.session_id == sid, t.checks.c.policy_id == sp.id)).scalar()
                assert n_checks == sum(len(s.checks) for s in replay(events, sp))
    eng.dispose()


# ── replay_view helpers ──────────────────────────────────────────────────────────────────────


def test_next_seq_with_and_live_vs_stored():
    steps = list(replay(repeat_session(5, "deploy"), PolicySpec("ladder")))
    # ladder 2/3/4: 2nd call warns (seq 3), 3rd blocks (5), 4th halts (7)
    index = rv.verdict_index(steps)
    assert rv.next_seq_with(index, 0, vocab.WARN) == 3
    assert rv.next_seq_with(index, 3, vocab.WARN) is None  # the 3rd call blocks, it does not warn
    assert rv.next_seq_with(index, 3, vocab.BLOCK) == 5
    assert rv.next_seq_with(index, 0, vocab.HALT) == 7
    assert rv.next_seq_with(index, 0, vocab.HALT, last=6) is None
    assert rv.next_seq_with(index, 7, vocab.AFTER_HALT) == 9
    stored = [{"seq": s.seq, "idx": c.idx, "verdict": c.verdict}
              for s in replay(repeat_session(5, "deploy"), PolicySpec("ladder", {"halt_at": 5, "block_at": 4, "warn_at": 3}))
              for c in s.checks]
    events = repeat_session(5, "deploy")
    before = [sum(len(e.calls) for e in events[:i] if isinstance(e, Batch)) for i in range(len(events))]
    rows = rv.live_vs_stored(steps, stored, 0, len(steps) - 1, before)
    by = {r["call"]: r for r in rows}  # named by call number, as every page names a call
    assert by["call #4"]["live"] == vocab.HALT and by["call #4"]["stored"] == vocab.BLOCK and by["call #4"]["differs"]
    assert "call #1" not in by  # both allow on the first call


def test_replay_link_and_args_text():
    link = rv.replay_link(3, 1, "window:window=8,threshold=3", 7)
    assert link.startswith("./replay?session=3&run=1&policy=window%3A") and link.endswith("&step=7")
    assert rv.replay_link(3) == "./replay?session=3"
    assert json.loads(rv.args_text({"b": 1, "a": [1, 2]})) == {"a": [1, 2], "b": 1}
    assert rv.args_text("not json {") == "not json {"
    assert rv.clip("x" * 50, 10).startswith("x" * 10 + "…")


# ── charts ───────────────────────────────────────────────────────────────────────────────────


def test_counter_rows_and_chart():
    steps = list(replay(repeat_session(5), PolicySpec("window", {"threshold": 3})))
    rows = charts.counter_rows(steps)
    counts = [r for r in rows if r["series"] == "count"]
    assert [r["value"] for r in counts if r["value"] is not None] == [1, 2, 3]
    assert counts[2]["verdict"] == vocab.HALT and counts[2]["seq"] == 5
    assert {r["value"] for r in rows if r["series"] == "threshold"} == {3}
    assert counts[-1]["verdict"] == vocab.AFTER_HALT
    spec = charts.counters_chart(rows, cursor=5).to_dict()
    assert len(spec["layer"]) == 3  # lines, verdict dots, cursor rule
    assert charts.counters_chart([], cursor=None).to_dict()["layer"]


def test_sweep_charts_specs():
    result = sweep.sweep(SESSIONS, sweep.make_grid("window", [sweep.parse_axis("threshold=2..4"),
                                                              sweep.parse_axis("window=3,8")]))
    rows = sweep.totals_rows(result)
    line = charts.sweep_lines_chart(rows, "threshold").to_dict()
    data = next(iter(line["datasets"].values()))
    # window never warns: no panel of zeros (the page says so: zero_metrics).
    assert {d["metric"] for d in data} == {"halts", "saved"} and charts.zero_metrics(rows, ("warnings",)) == ["warnings"]
    assert all(d["value"] is not None for d in data)  # the invalid threshold 4 > window 3 is dropped
    heat = charts.grid_heatmap(rows, "threshold", "window").to_dict()
    hdata = next(iter(heat["datasets"].values()))
    rect, text = heat["layer"]
    assert len(hdata) == 5 and rect["encoding"]["color"]["field"] == "rank" and text["encoding"]["text"]["field"] == "halts"
    fh_in = sweep.first_halt_rows(result)
    fh = charts.first_halt_heatmap(fh_in, [s.label for s in result.settings]).to_dict()
    # Coloured and labelled by the call, as every page numbers calls; the step is in the tooltip.
    assert fh["layer"][1]["encoding"]["color"]["field"] == "first_halt_at"
    fh_rows = next(iter(fh["datasets"].values()))
    for r in fh_rows:
        if r["first_halt_at"] is None:
            assert r["first halt"] == "never" and r["call"] == ""
        else:
            assert r["call"] == f"#{int(r['first_halt_at'])}"
            assert r["first halt"] == f"call #{int(r['first_halt_at'])}"
    # The call number is the scoring rule's position of the first halt (from a plain replay).
    for r in fh_in:
        sess = next(x for x in SESSIONS if x.session_id == r["session_id"])
        spec = next(s.spec for s in result.settings if s.values == r["values"])
        fh1 = scoring.first_halt(list(replay(sess.events, spec)))
        want = None if fh1 is None else scoring.call_position(sess.events, fh1[1], fh1[2])
        assert r["first_halt_at"] == want


def test_first_halt_numbers_read_on_every_colour():
    """viridis runs dark → yellow: the numbers on its light end are dark, on its dark end white."""
    rows = [{"session_id": 1, "setting": "a", "first_halt_at": n, "first_halt_seq": n, "link": ""} for n in (2, 50, 100)]
    spec = charts.first_halt_heatmap(rows, ["a"]).to_dict()
    data = {r["first_halt_at"]: r["light"] for r in next(iter(spec["datasets"].values()))}
    assert data == {2: False, 50: False, 100: True}
    colour = spec["layer"][2]["encoding"]["color"]
    assert colour["condition"]["value"] == "#212529" and colour["value"] == "white"


def test_scatter_settings_on_one_point_share_one_label_inside_the_chart():
    from loopledger.analysis.scoring import PolicyScore
    from loopledger.app.score_table import score_rows  # the pure table both pages draw

    def ps(name, caught, halted, loops=4):
        return PolicyScore(name, name, loops=loops, caught=caught, missed=loops - caught, halted=halted)

    scores = score_rows([ps("halt_at=6", 1, 1), ps("halt_at=7", 1, 1), ps("halt_at=8", 1, 1), ps("halt_at=3", 4, 4),
                         ps("x", 0, 0)])
    spec = charts.pr_chart(scores).to_dict()
    data = next(iter(spec["datasets"].values()))
    labels = sorted(d["settings"] for d in data)
    assert labels == ["halt_at=3", "halt_at=6, 7, 8"]  # one label per point; "x" halted nothing: no precision
    top = next(d for d in data if d["settings"] == "halt_at=3")
    assert top["precision"] == 1.0 and top["dy"] > 0  # at the top edge: written below the point
    assert spec["layer"][0]["encoding"]["y"]["scale"]["domain"][1] > 1.0
    assert charts.point_label(["a=1", "b=2"]) == "a=1 · b=2"
    assert charts.point_label([f"k={i}" for i in range(9)]).endswith("(+3 more)")


# ── `loopledger sweep` ───────────────────────────────────────────────────────────────────────


def test_cli_sweep_prints_and_saves(db_url):
    from loopledger.cli.app import app
    from typer.testing import CliRunner

    ids = _ledger_with(db_url, [repeat_session(6), abab_session(5), clean_session()])
    runner = CliRunner()
    res = runner.invoke(app, ["sweep", "--detector", "window", "--param", "threshold=2..4",
                              "--param2", "window=3,8", "--db", db_url])
    assert res.exit_code == 0, res.output
    lines = [ln for ln in res.stdout.splitlines() if ln.startswith("│")]
    assert len(lines) == 6
    eng = make_engine(db_url)
    with eng.connect() as conn:
        events = [store.load_events(conn, sid) for sid in ids]
    for ln in lines:
        cells = [c.strip() for c in ln.strip("│").split("│")]
        th, win = int(cells[0]), int(cells[1])
        if th > win:
            assert cells[4] == "—"
            continue
        spec = PolicySpec("window", {"threshold": th, "window": win})
        halts = sum(tally(replay(ev, spec)).halts for ev in events)
        saved = sum(tally(replay(ev, spec)).saved for ev in events)
        assert (int(cells[4]), int(cells[6])) == (halts, saved)
    assert "threshold=4, window=3: skipped" in res.stdout

    res = runner.invoke(app, ["sweep", "--detector", "cycle", "--param", "halt_repeats=4,5", "--save", "--db", db_url])
    assert res.exit_code == 0, res.output
    with eng.connect() as conn:
        labels = {r.label for r in conn.execute(sa.select(t.policies))}
    assert {PolicySpec("cycle", {"halt_repeats": h}).label for h in (4, 5)} <= labels
    eng.dispose()

    res = runner.invoke(app, ["sweep", "--detector", "window", "--param", "thresh=2..4", "--db", db_url])
    assert res.exit_code == 2 and "no parameter 'thresh'" in res.stderr


def test_event_lines_are_plain_and_bounded():
    c = Call("c1", "Bash", {"cmd": "ls\nrm -rf /", "n": 1})
    lines = rv.event_lines(4, Batch((c,), text="running"))
    assert lines == ["assistant (step 4): running", 'call 0 (step 4): Bash {   "cmd": "ls\\nrm -rf /",   "n": 1 }']
    # With the calls before it, a call leads with its number over the session: call #N first.
    assert rv.event_lines(4, Batch((c,)), before=11) == ['call #12: Bash {   "cmd": "ls\\nrm -rf /",   "n": 1 }']
    assert rv.event_lines(5, UserTurn("go on"), before=12) == ["user (after call #12): go on"]
    ans = rv.event_lines(5, Answers((Answer("c1", "x" * 5000 + "\n<b>", is_error=True),)))
    assert len(ans) == 1 and ans[0].startswith("answer (error) (step 5): xxx") and len(ans[0]) < 700
    assert rv.event_lines(0, UserTurn("hi\nthere")) == ["user (step 0): hi\nthere"]


def test_replay_stops_at_calls_and_checked_prose_never_at_answers():
    from types import SimpleNamespace as NS

    events = [UserTurn("go"), Batch((Call("a", "ls", {}),)), Answers((Answer("a", "x"),)), Prose("thinking"),
              Batch((Call("b", "ls", {}),)), Answers((Answer("b", "x"),)), Prose("said, unchecked")]
    steps = [NS(seq=i, checks=[object()] if i in (1, 3, 4) else []) for i in range(len(events))]
    stops = rv.stops(events, steps)
    assert stops == [1, 3, 4]
    assert rv.next_stop(stops, 1, 0, 6) == 3 and rv.next_stop(stops, 3, 0, 6) == 4
    assert rv.next_stop(stops, 4, 0, 6) is None  # nothing checked after the last call
    assert rv.next_stop(stops, 4, 0, 6, forward=False) == 3 and rv.next_stop(stops, 1, 0, 6, forward=False) is None
    assert rv.next_stop(stops, 1, 0, 3) == 3 and rv.next_stop(stops, 3, 0, 3) is None  # within the run only


# ── the real corpus ──────────────────────────────────────────────────────────────────────────


@pytest.mark.corpus
def test_sweep_on_the_real_corpus(corpus_dir, tmp_path):
    """eps.traj submits the same flag four times in a row (corpus README: max run 4): the window
    guard halts it at thresholds 2..4 and never at 5; the sweep agrees with direct replays."""
    from loopledger import worker

    url = f"sqlite:///{tmp_path / 'corpus.sqlite'}"
    eng = make_engine(url)
    upgrade(eng)
    worker.ingest_paths(eng, [corpus_dir], worker.Options())
    with eng.connect() as conn:
        ids = store.session_ids(conn)
        sessions = [sweep.SessionEvents(sid, store.load_events(conn, sid)) for sid in ids]
        eps = conn.execute(sa.select(t.sessions.c.id).join(t.sources, t.sources.c.id == t.sessions.c.source_id)
                           .where(t.sources.c.path.like("%eps-submit-loop%"))).scalar_one()
    eng.dispose()
    assert len(sessions) >= 60  # 45 tau-bench episodes alone
    result = sweep.sweep(sessions, sweep.make_grid("window", [sweep.parse_axis("threshold=2..5")]))
    halted = {s.values[0]: s.first_halt[eps] is not None for s in result.settings}
    assert halted == {2: True, 3: True, 4: True, 5: False}
    for s in result.settings:
        spec = sweep.spec_for(result.grid, s.values)
        assert s.totals["halts"] == sum(tally(replay(x.events, spec)).halts for x in sessions)
