"""Ingest health page (AppTest, real SQLite ledger): counts, sources, quarantined lines, live rows."""

from __future__ import annotations

import re
import time

import pytest
import sqlalchemy as sa
from app_support import app, charts, ledger_env, make_ledger, metrics
from loopledger.ledger import schema as t
from loopledger.ledger.engine import make_engine

PAGE = "views/health.py"


@pytest.fixture
def ledger(tmp_path):
    url, written = make_ledger(tmp_path / "ledger.sqlite", sessions=30, calls=1500)
    with ledger_env(url):
        yield url, written


def _tables(at):
    return {tuple(d.value.columns)[:2]: d.value for d in at.dataframe}


def test_counts_sources_and_quarantined_lines(ledger):
    url, written = ledger
    at = app(PAGE)
    assert not at.exception
    m = metrics(at)
    assert m["Sources"] == "30"
    assert m["Quarantined lines"] == str(written["errors"]) and written["errors"] > 0
    assert m["Sources not ok"] == str(written["errors"])
    ((spec, data),) = charts(at)
    assert dict(zip(data.status, data.sources, strict=True)) == {"ok": 30 - written["errors"], "quarantined": written["errors"]}
    sources = next(d.value for d in at.dataframe if "status" in d.value.columns)
    assert len(sources) == 30 and set(sources.status) == {"ok", "quarantined"}
    errors = next(d.value for d in at.dataframe if "where" in d.value.columns)
    eng = make_engine(url, readonly=True)
    with eng.connect() as conn:
        expect = {f"{p}:{n}" for p, n in conn.execute(sa.text(
            "SELECT s.path, e.line FROM ingest_errors e JOIN sources s ON s.id = e.source_id"))}
    eng.dispose()
    assert set(errors["where"]) == expect
    assert set(errors.message) == {"invalid JSON: Expecting ',' delimiter"}


def test_status_filter(ledger):
    _, written = ledger
    at = app(PAGE)
    at.sidebar.selectbox(key="h_status").set_value("quarantined").run()
    assert not at.exception
    sources = next(d.value for d in at.dataframe if "status" in d.value.columns)
    assert len(sources) == written["errors"] and set(sources.status) == {"quarantined"}


def test_new_rows_show_up_on_the_next_refresh(ledger):
    url, written = ledger
    at = app(PAGE)
    assert metrics(at)["Quarantined lines"] == str(written["errors"])
    eng = make_engine(url)
    with eng.begin() as conn:
        conn.execute(sa.insert(t.ingest_errors).values(source_id=2, line=77, message="truncated record",
                                                      created_at=time.time()))
    eng.dispose()
    # The cached reads live for data.TTL_S; the live fragment re-reads after that.
    from loopledger.app import data

    data._query.clear()
    at.run()
    assert not at.exception
    assert metrics(at)["Quarantined lines"] == str(written["errors"] + 1)
    errors = next(d.value for d in at.dataframe if "where" in d.value.columns)
    assert errors["where"].iloc[0].endswith(":77") and errors.message.iloc[0] == "truncated record"


def test_a_failed_sources_message_is_shown_first_and_whole(tmp_path):
    url, _ = make_ledger(tmp_path / "failed.sqlite", sessions=8, calls=300)
    message = "cannot read: permission denied while opening the transcript " + "x" * 120
    eng = make_engine(url)
    with eng.begin() as conn:
        conn.execute(sa.update(t.sources).where(t.sources.c.id == 3).values(status="error", error=message))
    eng.dispose()
    with ledger_env(url):
        at = app("views/health.py")
    assert not at.exception
    assert any(s.value == "Sources that need attention" for s in at.subheader)
    assert any(x.value.startswith("error: ") and message in x.value for x in at.text)
    sources = next(d.value for d in at.dataframe if "path" in d.value.columns)
    assert list(sources.columns[:3]) == ["status", "error", "path"]  # the message is not off to the right
    # The whole timestamp, in the dashboard's one format, in the widest metric.
    assert re.fullmatch(r"\d{4}-\d\d-\d\d \d\d:\d\d UTC", metrics(at)["Last ingest"])
