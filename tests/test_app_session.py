"""Session page (AppTest, real SQLite ledger): deep links, runs × policies, timeline, halt, labels."""

from __future__ import annotations

import re

import pytest
import sqlalchemy as sa
from app_support import app, charts, ledger_env, make_ledger, markdown_texts, metrics, plain_texts, read_model
from loopledger import vocab
from loopledger.ledger import schema as t
from loopledger.ledger.engine import make_engine

from bench.gen_ledger import HOSTILE

PAGE = "views/session.py"


@pytest.fixture(scope="module")
def ledger(tmp_path_factory):
    url, written = make_ledger(tmp_path_factory.mktemp("session") / "ledger.sqlite")
    with ledger_env(url):
        yield url, written




def _halted(url) -> tuple[int, int, int]:
    """(session, run, halt seq) of the most halted session's first halted run, read independently."""
    eng = make_engine(url, readonly=True)
    with eng.connect() as conn:
        sid = conn.execute(sa.text("SELECT session_id FROM session_stats GROUP BY session_id "
                                   "ORDER BY sum(halts) DESC, session_id DESC LIMIT 1")).scalar()
        run, seq = conn.execute(sa.text("SELECT run_idx, min(halt_seq) FROM run_outcomes WHERE session_id = :s "
                                        "AND outcome = 'halted' GROUP BY run_idx ORDER BY run_idx LIMIT 1"), {"s": sid}).one()
    eng.dispose()
    return sid, run, seq


def test_deep_link_opens_session_and_run(ledger):
    url, _ = ledger
    sid, _, _ = _halted(url)
    head = read_model(url, "session_header", sid)
    run = head["n_runs"] - 1
    at = app(PAGE, session=str(sid), run=str(run))
    assert not at.exception
    assert at.header[0].value == f"Session #{sid}"
    assert metrics(at)["Runs"] == str(head["n_runs"]) and metrics(at)["Tool calls"] == str(head["n_calls"])
    halted_runs = read_model(url, "halts", sid).run_idx.nunique()
    assert metrics(at)["Halted runs"] == str(halted_runs) and halted_runs > 0
    assert at.selectbox(key="run_pick").value == run
    assert at.query_params["session"] == str(sid) and at.query_params["run"] == str(run)
    assert at.subheader[-2].value == f"Run #{run + 1}: transcript"  # runs counted from 1, like calls
    # The session's header table names its source file.
    assert any(head["path"] in set(d.value.get("source file", [])) for d in at.dataframe)


def test_without_run_opens_the_first_halted_run_at_its_halt(ledger):
    url, _ = ledger
    sid, run, seq = _halted(url)
    at = app(PAGE, session=str(sid))
    assert not at.exception
    assert at.selectbox(key="run_pick").value == run
    assert at.query_params["run"] == str(run)
    assert at.session_state[f"focus_{sid}_{run}"] == seq
    texts = [x.value for x in at.text]
    # The halting call, by its one number (call #N over the session), marked in plain words.
    n = read_model(url, "calls_before", sid, seq) + 1
    assert any(re.match(rf"▶ halted here · call #{n}\b", x) and "halt" in x for x in texts)
    assert not any("step" in x.split(":")[0] or "HALTING" in x for x in texts if x.startswith("▶"))
    # Replay opens in this tab: a page link through the app's navigation, not a link button (new tab).
    assert not at.get("link_button")
    (link,) = [p.proto for p in at.get("page_link") if p.proto.label == "Replay this run at the halt"]
    assert link.page.endswith("replay") and link.query_string.startswith(f"session={sid}&run={run}&policy=")
    assert link.query_string.endswith(f"&step={seq}")


def test_runs_by_policies_matrix(ledger):
    url, _ = ledger
    sid, run, _ = _halted(url)
    at = app(PAGE, session=str(sid))
    pols = read_model(url, "policies")
    (matrix,) = [d.value for d in at.dataframe if "run" in d.value.columns and "calls" in d.value.columns]
    assert len(matrix) == read_model(url, "session_header", sid)["n_runs"]
    # Default policies are headed by their detector's name alone.
    heads = [d if dflt else lb for lb, d, dflt in zip(pols.label, pols.detector, pols.is_default, strict=True)]
    assert set(heads) <= set(matrix.columns)
    row = matrix[matrix.run == f"#{run + 1}"].iloc[0]
    assert vocab.HALTED in set(row[heads])


def test_timeline_chart_lanes_and_verdicts(ledger):
    url, _ = ledger
    sid, _, _ = _halted(url)
    at = app(PAGE, session=str(sid))
    ((spec, data),) = [c for c in charts(at) if "facet" in c[0]]
    assert spec["facet"]["row"]["field"] == "policy"
    assert spec["spec"]["layer"][0]["encoding"]["color"]["field"] == "verdict"
    run = at.selectbox(key="run_pick").value
    # The chosen run only, and the x axis spans exactly that run.
    tl = read_model(url, "timeline", sid, run)
    assert len(data) == len(tl) and set(data.run_idx) == {run}
    # x: the run's calls (call #N), from just before its first to just after its last.
    lo, hi = read_model(url, "run_bounds", sid, run)
    calls = [read_model(url, "calls_before", sid, lo) + 0.5, read_model(url, "calls_before", sid, hi + 1) + 0.5]
    assert spec["spec"]["layer"][0]["encoding"]["x"]["scale"]["domain"] == calls
    assert (data.verdict == vocab.HALT).sum() == (tl.verdict == vocab.HALT).sum() > 0
    assert all(w for w, v in zip(data.why, data.verdict, strict=True) if v == vocab.HALT)
    at.toggle(key="timeline_run_only").set_value(False).run()
    assert not at.exception
    ((spec, data),) = [c for c in charts(at) if "facet" in c[0]]
    tl = read_model(url, "timeline", sid)
    assert len(data) == len(tl)
    assert (data.verdict == vocab.HALT).sum() == (tl.verdict == vocab.HALT).sum() > 0
    assert set(data.tool) == set(tl.tool)


def test_jump_to_halt_moves_the_transcript_back(ledger):
    url, _ = ledger
    sid, run, seq = _halted(url)
    at = app(PAGE, session=str(sid))
    lo, _ = read_model(url, "run_bounds", sid, run)
    # The run's first call, picked by its number (the input moves in calls, as every page numbers them).
    eng = make_engine(url, readonly=True)
    with eng.connect() as conn:
        n_before, first_seq = conn.execute(sa.text(
            "SELECT (SELECT count(*) FROM calls WHERE session_id = :s AND seq < :lo), "
            "(SELECT min(seq) FROM calls WHERE session_id = :s AND seq >= :lo)"), {"s": sid, "lo": lo}).one()
    eng.dispose()
    at.number_input(key=f"around_{sid}_{run}").set_value(n_before + 1).run()
    assert not at.exception
    assert at.session_state[f"focus_{sid}_{run}"] == first_seq
    shown = any(x.value.startswith("▶ halted here · call #") for x in at.text)
    assert shown == (seq - first_seq <= 6)  # the page shows 6 events either side of the focused one
    at.button(key="jump_halt").click().run()
    assert not at.exception
    assert at.session_state[f"focus_{sid}_{run}"] == seq
    assert at.number_input(key=f"around_{sid}_{run}").value == read_model(url, "calls_before", sid, seq) + 1
    n = read_model(url, "calls_before", sid, seq) + 1
    assert any(re.match(rf"▶ halted here · call #{n}\b", x.value) for x in at.text)


def test_label_a_run(ledger):
    url, _ = ledger
    sid, run, _ = _halted(url)
    at = app(PAGE, session=str(sid))
    radio = at.radio(key=f"label_choice_{sid}_{run}")
    assert radio.value is None  # nobody labelled it: nothing is pre-selected
    at.button[-1].click().run()  # saving without a choice stores nothing
    assert not at.exception and any("Choose" in w.value for w in at.warning)
    at.radio(key=f"label_choice_{sid}_{run}").set_value("normal")
    at.text_input(key=f"label_note_{sid}_{run}").set_value("waits for CI on purpose")
    at.button[-1].click().run()  # the form's submit button
    assert not at.exception
    assert any(s.value == "Saved." for s in at.success)
    eng = make_engine(url, readonly=True)
    with eng.connect() as conn:
        rows = conn.execute(sa.select(t.labels.c.label, t.labels.c.note)
                            .where(t.labels.c.session_id == sid, t.labels.c.run_idx == run)).all()
    eng.dispose()
    assert rows == [("normal", "waits for CI on purpose")]
    (labels,) = [d.value for d in at.dataframe if "label" in d.value.columns]
    assert list(labels.label) == ["normal"]


def test_answers_with_html_and_markdown_stay_plain_text(ledger):
    at = app(PAGE, session="1", run="0")
    assert not at.exception
    at.number_input(key="around_1_0").set_value(1).run()
    assert not at.exception
    plain = plain_texts(at)
    assert any(HOSTILE in x for x in plain)  # the answer and the title are shown, verbatim
    assert not any("<script>" in x or "pwn.png" in x or "onerror" in x for x in markdown_texts(at))
    assert not at.get("html")


def test_unknown_or_missing_session(ledger):
    at = app(PAGE, session="999999")
    assert not at.exception
    assert any("No session #999999" in e.value for e in at.error)
    at = app(PAGE)
    assert not at.exception
    assert any("Pick a session" in i.value for i in at.info)
    at = app(PAGE, session="not-a-number")
    assert not at.exception
    assert any("Pick a session" in i.value for i in at.info)
