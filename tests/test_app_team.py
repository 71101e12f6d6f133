"""The dashboard's team parts (AppTest, real SQLite ledger): without [auth] nothing of them shows
(today's single-user dashboard); with it, nothing of the ledger before sign-in; the Sessions
page filters forwarded sessions by member; the leaderboard says who changed the enforced
setting; the Session page says who labelled the session."""

from __future__ import annotations

import getpass

import pytest
import sqlalchemy as sa
from app_support import MAIN, TIMEOUT, app, ledger_env, make_ledger, metrics
from loopledger.ledger import schema as t
from loopledger.ledger import writes
from loopledger.ledger.engine import make_engine
from loopledger.live import enforce
from streamlit.testing.v1 import AppTest

AUTH = {"redirect_uri": "http://127.0.0.1:8501/oauth2callback", "cookie_secret": "x" * 32, "client_id": "c",
        "client_secret": "s", "server_metadata_url": "http://127.0.0.1:9/.well-known/openid-configuration"}


@pytest.fixture(scope="module")
def ledger(tmp_path_factory):
    url, written = make_ledger(tmp_path_factory.mktemp("team") / "ledger.sqlite", sessions=12, calls=600)
    engine = make_engine(url)
    with engine.begin() as conn:  # three sessions forwarded by two members
        for sid, member in ((1, "alice@example.com"), (2, "alice@example.com"), (3, "bob@example.com")):
            conn.execute(sa.update(t.sessions).where(t.sessions.c.id == sid).values(member=member))
        enforce.set_enforced(conn, "cycle:halt_repeats=5", origin="cli")
    writes.save_label(engine, 4, -1, "normal", "fine")
    engine.dispose()
    with ledger_env(url):
        yield url, written


def test_without_auth_nothing_of_sign_in_shows(ledger):
    at = app()
    assert not at.exception
    assert not [b for b in at.button if b.label in ("Sign in", "Sign out")]
    assert not [x for x in at.text if "Signed in as" in str(x.value)]
    assert "Sessions" in metrics(at)


def test_with_auth_nothing_of_the_ledger_before_sign_in(ledger):
    at = AppTest.from_file(str(MAIN), default_timeout=TIMEOUT)
    at.secrets["auth"] = AUTH
    at.secrets["loopledger"] = {"allow": ["example.com"]}
    at.run()
    assert not at.exception
    assert [b.label for b in at.button] == ["Sign in"]
    assert not at.metric and not at.dataframe  # no figure, no table of the ledger


def test_sessions_filter_by_member(ledger):
    url, written = ledger
    at = app()
    (box,) = [s for s in at.selectbox if s.label == "Member"]
    assert list(box.options) == ["every member", "alice@example.com", "bob@example.com"]
    assert metrics(at)["Sessions"] == f"{written['sessions']:,}"
    box.set_value("alice@example.com").run()
    assert not at.exception
    assert metrics(at)["Sessions"] == "2"


def test_leaderboard_and_session_page_say_who(ledger):
    me = getpass.getuser()
    at = app("views/leaderboard.py")
    assert not at.exception
    (history,) = [d.value for d in at.dataframe if "by" in d.value.columns and "enforced" in d.value.columns]
    assert history["by"].iloc[0] == me and "halt_repeats=5" in history["enforced"].iloc[0]
    labels = [d.value for d in at.dataframe if "by_user" in d.value.columns]
    assert labels and me in labels[0]["by_user"].tolist()
    at = app("views/session.py", session="4")
    assert not at.exception
    (rows,) = [d.value for d in at.dataframe if "labelled by" in d.value.columns]
    assert rows["labelled by"].iloc[0] == f"{me} (dashboard)"
