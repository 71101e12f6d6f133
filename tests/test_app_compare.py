"""Compare page (AppTest, ledgers filled by the real ingest pipeline from sample_data).

Every number on the page must equal a direct computation with loopledger.replay on the same
sessions' events (rebuilt from the ledger).
"""

from __future__ import annotations

import re
from urllib.parse import parse_qs, urlparse

import pytest
import sqlalchemy as sa
from app_support import charts, ledger_env
from loopledger import vocab
from loopledger.analysis import scoring
from loopledger.analysis.scoring import call_position
from loopledger.detectors.policy import PolicySpec
from loopledger.events import Batch
from loopledger.ledger import read
from loopledger.ledger import schema as t
from loopledger.ledger.engine import make_engine
from loopledger.replay import replay, tally
from replay_support import (
    SAMPLE_DATA,
    append_rest,
    copy_head,
    ingest,
    open_page,
    pipeline_ledger,
    session_events,
)

PAGE = "views/compare.py"


@pytest.fixture(scope="module")
def ledger(tmp_path_factory):
    url = pipeline_ledger(tmp_path_factory.mktemp("compare") / "ledger.sqlite")
    with ledger_env(url):
        yield url, session_events(url)


def _sweep(at, detector: str, param: str, rng: str, param2: str | None = None, rng2: str = ""):
    at.selectbox(key="cp_detector").set_value(detector).run()
    at.selectbox(key=f"cp_param_{detector}").set_value(param).run()
    at.text_input(key=f"cp_range_{detector}_{param}").input(rng).run()
    if param2:
        at.selectbox(key=f"cp_param2_{detector}").set_value(param2).run()
        at.text_input(key=f"cp_range2_{detector}_{param2}").input(rng2).run()
    at.button(key="cp_run").click().run()
    assert not at.exception, at.exception
    return at


def _table(at, column: str):
    return next(d.value for d in at.dataframe if column in d.value.columns)


def _run(cell) -> int:
    """A run as the tables write it ("#3", counted from 1 like calls) → its index (2)."""
    return int(str(cell).lstrip("#")) - 1


def _direct(sessions: dict, spec: PolicySpec) -> dict:
    out = dict.fromkeys(("halts", "warnings", "blocks", "saved", "halted_runs", "runs", "calls"), 0)
    for events in sessions.values():
        tot = tally(replay(events, spec)).totals()
        for k in out:
            out[k] += tot[k]
    return out


def test_numbers_equal_a_direct_replay(ledger):
    url, sessions = ledger
    at = open_page(PAGE)
    assert not at.exception, at.exception
    assert [i.value for i in at.info]  # nothing swept yet: the page says what to do
    _sweep(at, "window", "threshold", "2..5")
    totals = _table(at, "halts")
    assert list(totals["threshold"]) == [2, 3, 4, 5]
    for _, row in totals.iterrows():
        want = _direct(sessions, PolicySpec("window", {"threshold": int(row["threshold"])}))
        for k, v in want.items():
            if k in row:
                assert row[k] == v, (row["threshold"], k)
            elif k == "runs":  # the same under every setting: said once, not a column
                assert any(f"Every setting replayed the same {v:,} runs." in c.value for c in at.caption), k
            else:  # 0 under every setting: no column of zeros (issue 37), the caption says so
                said = [c.value for c in at.caption if "under any setting (no column for them)" in c.value]
                assert v == 0 and said and k in said[0].split(" under any setting")[0], (k, v, said)
    # The line chart plots the same numbers.
    spec, df = next((s, d) for s, d in charts(at) if "metric" in d.columns)
    halts = df[df["metric"] == "halts"].sort_values("threshold")
    assert list(halts["value"]) == list(totals["halts"])
    # Sessions × setting heatmap: each cell is the session's first halt under that setting.
    _, fh = next((s, d) for s, d in charts(at) if "first_halt_seq" in d.columns)
    for _, cell in fh.iterrows():
        th = int(cell["setting"].split("threshold=")[1])
        first = tally(replay(sessions[int(cell["session_id"])], PolicySpec("window", {"threshold": th}))).first_halt_seq
        assert (None if cell["first_halt_seq"] != cell["first_halt_seq"] else cell["first_halt_seq"]) == first


def test_two_parameters_make_a_heatmap_and_skip_invalid_pairs(ledger):
    url, sessions = ledger
    at = _sweep(open_page(PAGE), "window", "threshold", "2..5", "window", "4,8")
    grids = [d for s, d in charts(at) if {"threshold", "window"} <= set(d.columns)]
    assert len(grids) == 2  # halts and saved
    halts = grids[0]
    assert len(halts) == 7  # 8 pairs, threshold 5 > window 4 is invalid
    row = halts[(halts["threshold"] == 3) & (halts["window"] == 4)].iloc[0]
    assert row["halts"] == _direct(sessions, PolicySpec("window", {"threshold": 3, "window": 4}))["halts"]
    assert any("threshold" in t.value and "window (4)" in t.value for t in at.text)


def test_flipped_runs_link_to_replay(ledger):
    url, sessions = ledger
    at = _sweep(open_page(PAGE), "window", "threshold", "2..6")
    at.selectbox(key="cp_flip_a").set_value("threshold=3").run()
    at.selectbox(key="cp_flip_b").set_value("threshold=5").run()
    flips = _table(at, "replay B")
    a, b = PolicySpec("window", {"threshold": 3}), PolicySpec("window", {"threshold": 5})
    want = set()
    for sid, events in sessions.items():
        ra = {r.run: r.outcome for r in tally(replay(events, a)).runs}
        rb = {r.run: r.outcome for r in tally(replay(events, b)).runs}
        want |= {(sid, run) for run in ra if ra[run] != rb.get(run, vocab.CLEAN)}
    assert want and {(int(r["session"]), _run(r["run"])) for _, r in flips.iterrows()} == want
    row = flips.iloc[0]
    # The buttons under the table open the picked (by default the first) flipped run.
    # Page links, not link buttons: Replay opens in this tab, through the app's navigation.
    buttons = {p.proto.label: f"./{p.proto.page}?{p.proto.query_string}" for p in at.get("page_link")
               if p.proto.label.startswith("Replay under")}
    assert buttons == {"Replay under A": row["replay A"], "Replay under B": row["replay B"]}
    link = urlparse(row["replay A"])
    assert link.path == "./replay"
    q = {k: v[0] for k, v in parse_qs(link.query).items()}
    assert q["session"] == str(row["session"]) and q["run"] == str(_run(row["run"]))
    assert PolicySpec.parse(q["policy"]) == a
    # Follow it: Replay opens that run, that policy, at A's halt.
    rp = open_page("views/replay.py", **q)
    assert not rp.exception, rp.exception
    assert rp.session_state["rp_spec"] == a and next(s for s in rp.selectbox if s.label == "Run").value == _run(row["run"])
    verdict = next(m.value for m in rp.metric if m.label == "Verdict at this call")

    def number_of(cell: str) -> int:  # "call #N": one number, counted over the session
        m = re.fullmatch(r"call #(\d+)", cell)
        assert m, cell
        return int(m.group(1))

    here = call_position(sessions[int(row["session"])], rp.session_state["rp_step"], 0)
    if row["A"] == vocab.HALTED:
        assert here == number_of(row["A halts at"]) == rp.slider(key="rp_call").value and verdict == vocab.HALT
    elif row["B"] == vocab.HALTED:  # A did not halt: the link lands where B halted, and A lets it pass
        assert here == number_of(row["B halts at"]) == rp.slider(key="rp_call").value and verdict != vocab.HALT


def test_filters_narrow_the_sessions(ledger):
    url, sessions = ledger
    eng = make_engine(url, readonly=True)
    with eng.connect() as conn:
        fmt, = conn.execute(sa.select(t.sessions.c.format).group_by(t.sessions.c.format)
                            .order_by(sa.func.count().desc())).first()
        ids = set(conn.execute(sa.select(t.sessions.c.id).where(t.sessions.c.format == fmt)).scalars())
    eng.dispose()
    at = open_page(PAGE)
    # The sidebar's filters, the ones Sessions draws (and keeps across pages: app/filters.py).
    at.multiselect(key="f_formats").select(fmt).run()
    assert any(c.value == f"{len(ids)} session(s) selected: those the sidebar's filters match (format {fmt})."
               for c in at.text)
    _sweep(at, "cycle", "halt_repeats", "4,5")
    totals = _table(at, "halts")
    for _, row in totals.iterrows():
        want = _direct({s: sessions[s] for s in ids}, PolicySpec("cycle", {"halt_repeats": int(row["halt_repeats"])}))
        assert (row["halts"], row["calls"]) == (want["halts"], want["calls"])


def test_bad_range_is_an_error_not_a_crash(ledger):
    at = _sweep(open_page(PAGE), "window", "threshold", "6..2")
    assert [e.value for e in at.error] == ["Cannot sweep:"] and any("below the start" in t.value for t in at.text)


def test_precision_and_recall_count_sessions_as_the_leaderboard_does(tmp_path):
    """One unit: labels judge sessions, and Compare scores a setting on them by the leaderboard's
    rule — expected numbers from a direct replay of each labelled session (scoring.judge_replay)."""
    url = pipeline_ledger(tmp_path / "ledger.sqlite")
    sessions = session_events(url)
    spec3 = PolicySpec("window", {"threshold": 3})
    halts = {sid: scoring.first_halt(list(replay(ev, spec3))) for sid, ev in sessions.items()}
    halted = sorted(sid for sid, h in halts.items() if h is not None)
    clean = sorted(sid for sid, h in halts.items() if h is None and any(isinstance(e, Batch) for e in sessions[sid]))
    # Two loop sessions (one threshold 3 halts, one it does not), two normal ones (one halted).
    n_calls = {sid: sum(len(e.calls) for e in ev if isinstance(e, Batch)) for sid, ev in sessions.items()}
    labels = {halted[0]: ("loop", 1, n_calls[halted[0]]), clean[0]: ("loop", 1, n_calls[clean[0]]),
              halted[1]: ("normal", None, None), clean[1]: ("normal", None, None)}
    eng = make_engine(url)
    with eng.begin() as conn:
        for sid, (label, first, last) in labels.items():
            read.write_label(conn, sid, -1, label, loop_first=first, loop_last=last)
    eng.dispose()
    with ledger_env(url):
        at = _sweep(open_page(PAGE), "window", "threshold", "3,8")
        scores = _table(at, "precision")
        assert list(scores["setting"]) == ["threshold=3", "threshold=8"]
        for _, row in scores.iterrows():
            spec = PolicySpec("window", {"threshold": int(row["setting"].split("=")[1])})
            judged = []
            for sid, (label, first, last) in labels.items():
                steps = list(replay(sessions[sid], spec))
                judged.append(scoring.judge_replay(spec.id, sid, label, first, last, sessions[sid], steps,
                                                   tally(steps).totals()["saved"]))
            (want,) = scoring.score(judged, [(spec.id, row["setting"])])
            assert (row["loops"], row["caught"], row["missed"], row["normal"], row["false_halts"]) == \
                (2, want.caught, want.missed, 2, want.false_halts)
            assert row["recall"] == f"{want.caught / 2:.2f}"
            assert row["precision"] == (f"{want.precision:.2f}" if want.precision is not None else "—")
            assert row["recall 95% CI"] == scoring.interval_text(scoring.wilson(want.caught, 2))
        row3 = scores.iloc[0]
        assert row3["caught"] == 1 and row3["missed"] == 1 and row3["false_halts"] == 1
        pr = [d for s, d in charts(at) if "recall" in d.columns]
        assert pr and "threshold=3" in set(pr[0]["settings"])


def test_save_as_policies(tmp_path):
    url = pipeline_ledger(tmp_path / "ledger.sqlite")
    sessions = session_events(url)
    with ledger_env(url):
        at = _sweep(open_page(PAGE), "ladder", "halt_at", "4..6")
        chosen = [PolicySpec("ladder", {"halt_at": h}) for h in (5, 6)]
        at.multiselect(key="cp_save_sel").set_value([s.label for s in chosen]).run()
        at.button(key="cp_save").click().run()
        assert not at.exception, at.exception
        assert any("Stored 2 policies" in s.value for s in at.success)
    eng = make_engine(url, readonly=True)
    with eng.connect() as conn:
        stored = set(conn.execute(sa.select(t.policies.c.id)).scalars())
        for sp in chosen:
            assert sp.id in stored
            halts = dict(conn.execute(sa.select(t.session_stats.c.session_id, t.session_stats.c.halts)
                                      .where(t.session_stats.c.policy_id == sp.id)).all())
            assert halts == {sid: tally(replay(ev, sp)).halts for sid, ev in sessions.items()}
    eng.dispose()


def test_a_growing_session_is_swept_again(tmp_path):
    src = SAMPLE_DATA / "claude_code" / "3f9c1e62-58a4-4d0b-9b7e-2a6d41c0e8f3.jsonl"
    n_lines = len(src.read_bytes().splitlines())
    live = tmp_path / "live" / src.name
    live.parent.mkdir()
    copy_head(src, live, n_lines // 2)
    url = pipeline_ledger(tmp_path / "ledger.sqlite", [live])
    with ledger_env(url):
        at = _sweep(open_page(PAGE), "run-length", "max_strikes", "0..2")
        before = list(_table(at, "halts")["calls"])
        append_rest(src, live, n_lines // 2)
        ingest(url, [live])
        sessions = session_events(url)
        at.run()
        assert not at.exception, at.exception
        after = _table(at, "halts")
        assert list(after["calls"]) != before
        for _, row in after.iterrows():
            want = _direct(sessions, PolicySpec("run-length", {"max_strikes": int(row["max_strikes"])}))
            assert (row["halts"], row["calls"], row["saved"]) == (want["halts"], want["calls"], want["saved"])


def test_settings_read_short_charts_follow_the_data_and_cells_link_to_replay(ledger):
    url, sessions = ledger
    at = _sweep(open_page(PAGE), "run-length", "max_strikes", "1..4")
    totals = _table(at, "halts")
    assert list(totals["setting"]) == ["strikes=1", "strikes=2", "strikes=3", "strikes=4"]
    assert "error" not in totals.columns  # no column of None when every setting is valid
    ((spec, cells),) = [(s, d) for s, d in charts(at) if "first_halt_seq" in d.columns]
    # Short labels on the x axis; one band per session and per setting (no 2-pixel strip).
    assert set(cells["setting"]) <= set(totals["setting"])
    assert spec["height"] == {"step": 18} and spec["width"]["step"] >= 34
    assert spec["layer"][0]["encoding"]["y"]["axis"]["labelOverlap"] is False  # every session labelled
    # Every cell opens Replay on that session under that setting (at its first halt when it halts).
    for _, c in cells.iterrows():
        q = {k: v[0] for k, v in parse_qs(urlparse(c["link"]).query).items()}
        assert urlparse(c["link"]).path == "./replay" and q["session"] == str(c["session_id"])
        spec_ = PolicySpec.parse(q["policy"])
        assert spec_ == PolicySpec("run-length", {"max_strikes": int(c["setting"].split("=")[1])})
        if c["first_halt_seq"] == c["first_halt_seq"]:  # not NaN: it halts
            assert q["step"] == str(int(c["first_halt_seq"]))
            steps = list(replay(sessions[int(c["session_id"])], spec_))
            assert any(ch.verdict == vocab.HALT for ch in steps[int(q["step"])].checks)


def test_heatmap_cells_carry_their_values_and_rank_colours(ledger):
    at = _sweep(open_page(PAGE), "window", "threshold", "2..5", "window", "4,8")
    grids = [(s, d) for s, d in charts(at) if {"threshold", "window", "rank"} <= set(d.columns)]
    assert len(grids) == 2
    spec, d = grids[0]
    rect, text = spec["layer"]
    assert text["mark"]["type"] == "text" and text["encoding"]["text"]["field"] == "halts"
    assert rect["encoding"]["color"]["field"] == "rank"  # rank: one extreme cannot flatten the rest
    assert sorted(set(d["rank"])) == list(range(d["halts"].nunique()))
    assert all(str(link).startswith("./replay?") for link in d["link"])


def test_flip_table_defaults_to_the_stored_default_against_a_setting(ledger):
    url, sessions = ledger
    at = _sweep(open_page(PAGE), "run-length", "max_strikes", "1..4")
    a = at.selectbox(key="cp_flip_a")
    # Issue 37: "live policy" named both this and what live agents are judged by (the enforced set).
    assert a.value.startswith("stored default (") and "max_strikes=2" in a.value
    assert not any("live policy" in str(o).lower() for o in a.options)
    assert at.selectbox(key="cp_flip_b").value == "strikes=4"
    flips = _table(at, "replay B")
    live, b = PolicySpec("run-length"), PolicySpec("run-length", {"max_strikes": 4})
    want = set()
    for sid, events in sessions.items():
        ra = {r.run: r.outcome for r in tally(replay(events, live)).runs}
        rb = {r.run: r.outcome for r in tally(replay(events, b)).runs}
        want |= {(sid, run) for run in ra if ra[run] != rb.get(run, vocab.CLEAN)}
    assert want and {(int(r["session"]), _run(r["run"])) for _, r in flips.iterrows()} == want
    # A missing halt reads as a dash, never None / null.
    assert not {"None", "nan", "null"} & {str(v) for v in flips["B halts at"]}
    # The picked flipped run can be labelled right here, with no pre-selected label.
    assert at.radio(key="cp_label").value is None


def test_each_detector_sweeps_its_own_halt_threshold_by_default(ledger):
    """Switching the detector to progress must not keep window's parameter or range: progress'
    `window` only bounds its memory (six identical rows); its first sweep is halt_at from 3."""
    at = open_page(PAGE)
    at.selectbox(key="cp_detector").set_value("window").run()
    assert at.selectbox(key="cp_param_window").value == "threshold"
    assert at.text_input(key="cp_range_window_threshold").value == "2..7"  # default 3, minimum 2
    at.selectbox(key="cp_detector").set_value("progress").run()
    assert not at.exception, at.exception
    assert at.selectbox(key="cp_param_progress").value == "halt_at"
    assert at.text_input(key="cp_range_progress_halt_at").value == "3..8"  # default 3 = its minimum


def test_one_chart_per_measure_with_its_own_scale_and_halts_red(ledger):
    from loopledger.app.charts_replay import VERDICT_COLORS

    at = _sweep(open_page(PAGE), "cycle", "halt_repeats", "4..6")
    (spec, df) = next((s, d) for s, d in charts(at) if "hconcat" in s)
    panels = spec["hconcat"]
    assert [p["title"] for p in panels] == ["halts", "calls saved", "warnings"]
    assert spec["resolve"]["scale"]["y"] == "independent"
    assert panels[0]["mark"]["color"] == VERDICT_COLORS[vocab.HALT] == "#c92a2a"
    assert panels[2]["mark"]["color"] == VERDICT_COLORS[vocab.WARN]
    assert all(p["encoding"]["y"]["axis"]["format"] == "d" for p in panels)  # counts: integer ticks
    # window never warns: no flat chart of zeros, and the page says why there is none.
    at = _sweep(open_page(PAGE), "window", "threshold", "2..5")
    (spec, _) = next((s, d) for s, d in charts(at) if "hconcat" in s)
    assert [p["title"] for p in spec["hconcat"]] == ["halts", "calls saved"]
    assert "No chart of warnings: 0 under every setting on these sessions." in [c.value for c in at.caption]


def _wait_for_the_rest(at, seconds: float = 120.0) -> None:
    """Until the background job sweeping the rest of the selection is done."""
    from loopledger.app import sweep_jobs

    job = sweep_jobs.wait(at.session_state["cp_job"], seconds)
    assert job is not None and not job.running, "the background sweep did not finish"
    assert job.error is None and job.done == job.total


def test_first_view_sweeps_a_bounded_first_pass_and_the_rest_follows_in_the_background(tmp_path):
    from loopledger.ledger import writes

    from bench.gen_ledger import generate

    url = f"sqlite:///{tmp_path / 'big.sqlite'}"
    generate(url, sessions=40, calls=9_000, seed=3, big=4_000)
    writes.save_label(make_engine(url), 1, 0, "not_loop")  # the oldest session, labelled
    sessions = session_events(url)
    # run-length's first sweep: max_strikes, 6 settings → a first pass of 36,000 / 6 = 6,000 events.
    # Events per session of this generated ledger (seed 3): #40 holds 7,532 (never fits); labelled #1
    # (244) first, then newest first #39..#17 fill 5,921 events, leaving 79: smaller than any of #2..#16.
    first = {1, *range(17, 40)}
    assert sum(len(sessions[s]) for s in first) <= 6_000 < sum(len(sessions[s]) for s in first) + 81
    with ledger_env(url):
        at = open_page(PAGE)
        at.selectbox(key="cp_detector").set_value("run-length").run()  # the page opens on the default set's first
        at.button(key="cp_run").click().run()
        assert not at.exception, at.exception
        (note,) = [w.value for w in at.warning if "First pass" in w.value]
        assert f"swept {len(first)} of the 40 selected sessions" in note
        spec = lambda v: PolicySpec("run-length", {"max_strikes": v})  # noqa: E731
        totals = _table(at, "halts")
        for _, row in totals.iterrows():
            want = _direct({s: sessions[s] for s in first}, spec(int(row["max_strikes"])))
            # A column the page leaves out is one that says nothing: the same, or 0, under every setting.
            assert {k: row[k] for k in want if k in row} == {k: v for k, v in want.items() if k in row}
            assert all(want[k] == 0 or k == "runs" for k in want if k not in row), want
        assert "being swept in the background" in note
        _wait_for_the_rest(at)
        at.run()  # what the page's progress fragment does once the job is done
        assert not at.exception, at.exception
        assert not [w for w in at.warning if "First pass" in w.value]
        assert at.session_state["cp_job"] is None
        totals = _table(at, "halts")
        for _, row in totals.iterrows():
            assert {k: row[k] for k in ("calls", "halts", "saved")} == {
                k: v for k, v in _direct(sessions, spec(int(row["max_strikes"]))).items()
                if k in ("calls", "halts", "saved")}
        assert totals["calls"].iloc[0] == sum(n for n in (sum(len(b.calls) for b in ev if hasattr(b, "calls"))
                                                          for ev in sessions.values()))
