"""Sessions page (AppTest, real SQLite ledger): metrics, chart, table, filters, safe titles."""

from __future__ import annotations

import pytest
import sqlalchemy as sa
from app_support import app, charts, ledger_env, make_ledger, markdown_texts, metrics, read_model
from loopledger.app import charts as charts_mod
from loopledger.ledger import read
from loopledger.ledger import schema as t
from loopledger.ledger.engine import make_engine

from bench.gen_ledger import HOSTILE, generate


@pytest.fixture(scope="module")
def ledger(tmp_path_factory):
    url, written = make_ledger(tmp_path_factory.mktemp("sessions") / "ledger.sqlite")
    with ledger_env(url):
        yield url, written




def _table(at):
    (df,) = [d.value for d in at.dataframe if "path" in d.value.columns]
    return df


def test_home_shows_headline_metrics_for_all_default_policies(ledger):
    url, written = ledger
    at = app()
    assert not at.exception
    m = metrics(at)
    expect = read_model(url, "headline", read.SessionFilter())
    assert m["Sessions"] == f"{written['sessions']:,}"
    assert m["Tool calls"] == f"{written['calls']:,}"
    # Halts: runs the default policies halted, a run halted by several of them once (counted here in
    # plain SQL, apart from the read model).
    eng = make_engine(url, readonly=True)
    with eng.connect() as conn:
        ro, p = t.run_outcomes.c, t.policies.c
        halted_runs = conn.execute(
            sa.select(sa.func.count()).select_from(
                sa.select(ro.session_id, ro.run_idx).where(ro.outcome == "halted", ro.policy_id.in_(
                    sa.select(p.id).where(p.is_default))).distinct().subquery())).scalar_one()
    eng.dispose()
    assert m["Halts"] == f"{expect['halts']:,}" and expect["halts"] == halted_runs <= written["halts"]
    assert m["Calls saved"] == f"{expect['saved']:,}"
    # Every measure says what it counts where it is shown.
    helps = {x.label: x.proto.help for x in at.metric}
    assert helps["Halts"] == charts_mod.MEASURE_HELP["halts"] and "counts once" in helps["Halts"]
    assert "would not have run" in helps["Calls saved"] and "not a sum over policies" in helps["Calls saved"]


def test_a_run_halted_by_two_policies_counts_once_and_saves_what_one_guard_would(tmp_path):
    """score_support's six sessions under WINDOW and LADDER (both default there), one run each:

        session  calls  WINDOW halts at, saves     LADDER halts at, saves    as one guard
        task-1   7      5, calls 6-7: 2            6, call 7: 1              halted once, saves 2
        task-2   8      4, calls 5-8: 4            8: 0                      once, 4
        task-3   7      6, call 7: 1               never                     once, 1
        task-4   4      never                      never                     —
        task-5   6      6: 0                       never                     once, 0
        task-6   4      3, call 4: 1               4: 0                      once, 1

    Halts 5 (not 5 + 3 = 8), calls saved 8 (not 8 + 1 = 9); each policy alone in the expander."""
    from score_support import LADDER, WINDOW, build

    url, _ = build(tmp_path)
    with ledger_env(url):
        at = app()
        assert not at.exception, at.exception
        m = metrics(at)
        assert (m["Halts"], m["Calls saved"]) == ("5", "8")
        assert any("as one guard" in c.value for c in at.caption)
        table = _table(at)
        assert dict(zip(table.title.str[:6], table.halts, strict=True))["Task 1"] == 1  # halted by both: once
        assert dict(zip(table.title.str[:6], table.saved, strict=True))["Task 1"] == 2  # WINDOW's earlier halt
        per = next(d.value for d in at.dataframe if "sessions_halted" in d.value.columns)
        assert dict(zip(per.policy, zip(per.halts, per.saved, strict=True), strict=True)) == {
            WINDOW.label: (5, 8), LADDER.label: (3, 1)}
    assert read_model(url, "headline", read.SessionFilter(policies=(LADDER.id,)))["saved"] == 1


def test_table_lists_sessions_most_halted_first_with_links(ledger):
    url, _ = ledger
    at = app()
    assert not at.exception
    df = _table(at)
    assert len(df) == 50  # one page of 60 sessions
    assert list(df.halts) == sorted(df.halts, reverse=True)
    top = read_model(url, "sessions_page", read.SessionFilter(), "halts", True, 1)
    assert int(df.id.iloc[0]) == int(top.id.iloc[0])
    # The title beside the id (readable without scrolling sideways), then the counters, the path after them.
    assert list(df.columns[:8]) == ["id", "title", "halts", "runs", "calls", "warnings", "blocks", "saved"]
    assert list(df.columns[-2:]) == ["file", "path"]
    assert all(len(f) <= len(p) for f, p in zip(df.file, df.path, strict=True))
    assert all(f == p or (f.startswith("…/") and p.endswith(f[2:])) for f, p in zip(df.file, df.path, strict=True))
    assert at.get("download_button")[0].label == "Download all 60 matching rows (CSV)"
    # The second page holds the remaining ten.
    at.number_input(key="table_page").set_value(2).run()
    assert not at.exception
    assert len(_table(at)) == 10


def test_chart_is_small_multiples_of_the_top_sessions_ranked_by_the_chosen_measure(ledger):
    url, _ = ledger
    at = app()
    assert not at.exception
    (spec, data), = [c for c in charts(at) if "hconcat" in c[0]]
    panels = spec["hconcat"]
    assert [p["encoding"]["x"]["field"] for p in panels][0] == "halts"
    assert len(panels) == 5 and spec["resolve"] == {"scale": {"x": "independent"}}
    assert all(p["encoding"]["href"]["field"] == "link" for p in panels)
    top = read_model(url, "sessions_page", read.SessionFilter(), "halts", True, 20)
    assert list(data.link) == [f"./session?session={i}" for i in top.id]
    assert list(data.halts) == list(top.halts)  # the ranking measure, in the table's order
    assert any("40 more are in the table" in c.value for c in at.caption)
    at.selectbox(key="chart_by").set_value("warnings").run()
    assert not at.exception
    (spec, data), = [c for c in charts(at) if "hconcat" in c[0]]
    assert spec["hconcat"][0]["encoding"]["x"]["field"] == "warnings"
    assert list(data.warnings) == sorted(data.warnings, reverse=True)
    at.slider(key="chart_n").set_value(5).run()
    assert not at.exception
    (_, data), = [c for c in charts(at) if "hconcat" in c[0]]
    assert data.session.nunique() == 5


def test_csv_holds_every_filtered_row_not_only_the_page(ledger):
    url, _ = ledger
    import io

    import pandas as pd
    from loopledger.app import data

    at = app()
    (button,) = at.get("download_button")
    assert "60" in button.label  # the page shows 50 of them
    back = pd.read_csv(io.StringIO(data.sessions_csv(read.SessionFilter())))
    assert len(back) == 60 and set(back.id) == set(range(1, 61))
    halted = pd.read_csv(io.StringIO(data.sessions_csv(read.SessionFilter(outcome="halted"))))
    assert len(halted) == read_model(url, "count_sessions", read.SessionFilter(outcome="halted")) < 60
    assert (halted.halts > 0).all()


def test_outcome_filter_changes_what_is_shown(ledger):
    at = app()
    before = metrics(at)["Sessions"]
    at.selectbox(key="f_outcome").set_value("clean").run()
    assert not at.exception
    m = metrics(at)
    assert m["Halts"] == "0" and m["Warnings"] == "0" and m["Sessions"] != before
    df = _table(at)
    assert len(df) > 0 and (df.halts == 0).all() and (df.blocks == 0).all()
    at.selectbox(key="f_outcome").set_value("halted").run()
    assert not at.exception
    assert (_table(at).halts > 0).all()


def test_policy_filter_narrows_counters(ledger):
    url, _ = ledger
    pols = read_model(url, "policies")
    window = pols[pols.detector == "window"].id.iloc[0]
    at = app()
    at.multiselect(key="f_policies").set_value([window]).run()
    assert not at.exception
    # Independent of read.headline (what the page calls): the stored per-session counts, summed.
    eng = make_engine(url, readonly=True)
    with eng.connect() as conn:
        halts = conn.execute(sa.text("SELECT coalesce(sum(halts), 0) FROM session_stats WHERE policy_id = :p"),
                             {"p": window}).scalar()
    eng.dispose()
    assert halts > 0 and metrics(at)["Halts"] == f"{halts:,}"
    assert metrics(at)["Blocks"] == "0"  # window never blocks


def test_text_tool_and_format_filters(ledger):
    url, _ = ledger
    at = app()
    at.text_input(key="f_text").set_value("hostile").run()
    assert not at.exception
    df = _table(at)
    assert list(df.id) == [1]
    assert metrics(at)["Sessions"] == "1"
    at.text_input(key="f_text").set_value("").run()
    at.selectbox(key="f_tool").set_value("fetch_webpage").run()
    assert not at.exception
    expect = read_model(url, "count_sessions", read.SessionFilter(tool="fetch_webpage"))
    assert metrics(at)["Sessions"] == f"{expect:,}" and 0 < expect < 60
    at.selectbox(key="f_tool").set_value("").run()
    fmt = read_model(url, "formats")[0]
    at.multiselect(key="f_formats").set_value([fmt]).run()
    assert not at.exception
    assert set(_table(at).format) == {fmt}


def test_no_match_says_so(ledger):
    at = app()
    at.text_input(key="f_text").set_value("no such session anywhere").run()
    assert not at.exception
    assert metrics(at)["Sessions"] == "0"
    assert any("No session matches" in i.value for i in at.info)


def test_an_empty_ledger_says_it_is_empty_not_that_filters_matched_nothing(tmp_path):
    """Issue 37, friction 10: a new team ledger said "No session matches these filters." """
    from loopledger.ledger import migrate

    url = f"sqlite:///{tmp_path / 'team.sqlite'}"
    eng = make_engine(url)
    migrate.upgrade(eng)
    eng.dispose()
    with ledger_env(url):
        at = app()
    assert not at.exception, at.exception
    said = [i.value for i in at.info]
    assert any(v.startswith("No session in this ledger yet: ingest one") for v in said), said
    assert not any("No session matches" in v for v in said)


def test_titles_are_shown_only_as_table_cells(ledger):
    at = app()
    at.text_input(key="f_text").set_value("hostile").run()
    assert not at.exception
    assert _table(at).title.iloc[0] == "hostile " + HOSTILE
    assert not any("<script>" in t or "pwn.png" in t for t in markdown_texts(at))


def test_missing_ledger_is_a_clear_error(tmp_path):
    with ledger_env(f"sqlite:///{tmp_path / 'absent.sqlite'}"):
        at = app()
    assert not at.exception
    assert [e.value for e in at.error] == ["The ledger cannot be shown:"]
    assert any("Cannot read the ledger" in t.value and "absent.sqlite" in t.value for t in at.text)


def test_link_to_the_most_halted_session(ledger):
    url, _ = ledger
    at = app()
    assert not at.exception
    top = int(read_model(url, "sessions_page", read.SessionFilter(), "halts", True, 1).id.iloc[0])
    (link,) = at.get("page_link")
    assert link.proto.label == f"Open the most halted session (#{top}): why it halted"
    assert link.proto.query_string == f"session={top}"


def test_date_range_filter(ledger):
    url, _ = ledger
    lo, hi = read_model(url, "date_bounds")
    mid = lo + (hi - lo) / 2
    at = app()
    at.date_input(key="f_dates").set_value((lo, mid)).run()
    assert not at.exception
    expect = read_model(url, "count_sessions", read.SessionFilter(date_to=mid))
    assert metrics(at)["Sessions"] == f"{expect:,}" and 0 < expect < 60
    df = _table(at)
    assert all(s[:10] <= mid.isoformat() for s in df.started_at)


def test_pages_on_both_backends(db_url):
    """The same pages through the read-only engine of each backend (PostgreSQL: read-only sessions)."""
    written = generate(db_url, sessions=12, calls=600, seed=2, hostile=True)
    with ledger_env(db_url):
        at = app()
        assert not at.exception
        eng = make_engine(db_url, readonly=True)
        with eng.connect() as conn:  # halted runs, each once however many default policies halted it
            halted = conn.execute(sa.text(
                "SELECT count(*) FROM (SELECT DISTINCT c.session_id, c.run_idx FROM checks c JOIN policies p "
                "ON p.id = c.policy_id WHERE c.verdict = 'halt' AND p.is_default) AS r")).scalar()
        eng.dispose()
        assert metrics(at)["Sessions"] == "12" and metrics(at)["Halts"] == f"{halted:,}"
        assert 0 < halted <= written["halts"]
        top = int(_table(at).id.iloc[0])
        at = app("views/session.py", session=str(top))
        assert not at.exception
        assert at.header[0].value == f"Session #{top}"
        at = app("views/health.py")
        assert not at.exception
        assert metrics(at)["Sources"] == "12"


def test_a_row_click_opens_its_session_in_the_same_tab(ledger):
    url, _ = ledger
    at = app()
    assert not at.exception
    df = _table(at)
    want = int(df.id.iloc[3])
    at.session_state["sessions_table"] = {"selection": {"rows": [3], "columns": [], "cells": []}}
    at.run()
    assert not at.exception
    # The same app session moved to the Session page of that row (no new tab, no link to follow).
    assert at.header[0].value == f"Session #{want}"
    assert at.query_params["session"] == str(want)
