"""No raw value reaches a person (issue 19, point 6): a label given to the whole session reads
"whole session" (never run_idx -1), its time "2026-11-30 14:02 UTC" (never an epoch float), a
missing value "—" (never None), and every page writes times one way."""

from __future__ import annotations

import datetime as dt
import re

import pytest
from app_support import app, ledger_env
from loopledger.ledger import read
from loopledger.ledger import schema as t
from loopledger.ledger.engine import make_engine
from replay_support import pipeline_ledger

TIME = re.compile(r"^\d{4}-\d\d-\d\d \d\d:\d\d UTC$")


@pytest.fixture(scope="module")
def ledger(tmp_path_factory):
    url = pipeline_ledger(tmp_path_factory.mktemp("raw") / "ledger.sqlite")
    eng = make_engine(url)
    with eng.begin() as conn:  # a label on the whole session, as `loopledger labels import` gives it
        sid = conn.execute(t.sessions.select().with_only_columns(t.sessions.c.id)
                           .where(t.sessions.c.n_runs > 0).order_by(t.sessions.c.id)).scalar()
        read.write_label(conn, sid, t.SESSION_LEVEL, "normal", labelled_by="imported")
        created = conn.execute(t.labels.select().with_only_columns(t.labels.c.created_at)).scalar()
    eng.dispose()
    with ledger_env(url):
        yield url, sid, created


def test_a_session_label_reads_for_people(ledger):
    url, sid, created = ledger
    at = app("views/session.py", session=str(sid))
    assert not at.exception, at.exception
    (table,) = [d.value for d in at.dataframe if "given from" in d.value.columns]
    row = table.iloc[0]
    assert row["given from"] == "whole session" and row["loop calls"] == "—" and row["reason"] == "—"
    # The stored epoch seconds, written independently here: minutes, UTC.
    assert row["labelled"] == dt.datetime.fromtimestamp(created, dt.UTC).strftime("%Y-%m-%d %H:%M UTC")
    assert "run_idx" not in table.columns and "created_at" not in table.columns
    header = next(d.value for d in at.dataframe if "started" in d.value.columns and "agent" in d.value.columns)
    assert all(TIME.match(v) or v == "—" for v in header[["started", "ended"]].iloc[0])


def test_times_read_one_way_on_sessions_and_the_leaderboard(ledger):
    url, sid, created = ledger
    at = app()
    assert not at.exception, at.exception
    table = next(d.value for d in at.dataframe if "started_at" in d.value.columns)
    assert all(TIME.match(v) or v == "—" for v in table["started_at"])
    at = app("views/leaderboard.py")
    assert not at.exception, at.exception
    labels = next(d.value for d in at.dataframe if "labelled_at" in d.value.columns)
    assert list(labels["labelled_at"]) == [dt.datetime.fromtimestamp(created, dt.UTC).strftime("%Y-%m-%d %H:%M UTC")]
    for d in at.dataframe:
        for col in d.value.columns:
            assert not d.value[col].astype(str).isin(["None", "nan", "NaT", "-1"]).any(), col


def _headers(el) -> list[str]:
    """The column titles a person reads: each column's configured label, else its name."""
    import json

    config = json.loads(el.proto.columns or "{}")
    return [str((config.get(c) or {}).get("label") or c) for c in el.value.columns
            if not (config.get(c) or {}).get("hidden")]


@pytest.mark.parametrize("page", ["views/sessions.py", "views/session.py", "views/health.py", "views/leaderboard.py"])
def test_no_table_shows_a_raw_column_name(ledger, page):
    """`halted_runs`, `last_ingest`, `false_halts`, `tp`/`fp`: the read model's names stay in the code."""
    url, sid, _ = ledger
    at = app(page, session=str(sid)) if page == "views/session.py" else app(page)
    assert not at.exception, at.exception
    shown = [(el.key, h) for el in at.dataframe for h in _headers(el)]
    assert shown
    # (a policy heading a column is its spec label, `max_strikes=2`: what a person types in --policy)
    assert not [(k, h) for k, h in shown if ("_" in h and "=" not in h) or h in ("tp", "fp", "fn", "tn")], shown
    for box in at.selectbox:  # sort and rank pickers name their columns for people too (tool names are data)
        if box.key in ("chart_by", "table_sort", "lb_sort", "lb_open_cell"):
            assert not [o for o in box.options if re.fullmatch(r"[a-z]+_[a-z_]+", o)], (box.key, box.options)


def _empty_cells(at) -> list[str]:
    """Every table cell a person would read as None / nan (issue 37: "None" where docs promise "—")."""
    import pandas as pd

    out = []
    for d in at.dataframe:
        for col in d.value.columns:
            for v in d.value[col]:
                if v is None or (isinstance(v, float) and pd.isna(v)) or str(v) in ("None", "nan", "<NA>"):
                    out.append(str(col))
    return out


def test_empty_cells_read_a_dash_on_every_session_and_replay_page(ledger):
    """Every sample session's page (the per-turn token table: a transcript that reports no cache
    writes) and Replay of run-length at a run's first event (its flags, before any batch)."""
    from replay_support import open_page

    url, _, _ = ledger
    eng = make_engine(url, readonly=True)
    with eng.connect() as conn:
        ids = [r.id for r in conn.execute(t.sessions.select().with_only_columns(t.sessions.c.id))]
    eng.dispose()
    for sid in ids:
        at = app("views/session.py", session=str(sid))
        assert not at.exception, at.exception
        assert not _empty_cells(at), (sid, _empty_cells(at))
    at = open_page("views/replay.py", session=str(ids[0]), run="0", policy="run-length", step="0")
    assert not at.exception, at.exception
    assert not _empty_cells(at), _empty_cells(at)
    (flags,) = [d.value for d in at.dataframe if "observation" in d.value.columns]
    assert set(flags.iloc[0]) <= {"—", "yes", "no"}
