"""The app's pages and the one way they are served: through st.navigation, from app/main.py.

The page scripts live in app/views/, not app/pages/: a folder named `pages` beside the main
script switches Streamlit into its legacy file-based mode, where a fresh server's first deep link
(and every AppTest run) would execute a page alone, without page config or the ledger check.
"""

from __future__ import annotations

from pathlib import Path

import streamlit as st
from loopledger import gc_pause

PAGES = Path(__file__).resolve().parent / "views"


def pages() -> list:
    """Sessions at / (the default), then the named pages at stable, deep-linkable paths; with
    sign-in on, the team's Members page too (app/signin.py)."""
    from loopledger.app import signin

    return [
        st.Page(PAGES / "sessions.py", title="Sessions", default=True),
        st.Page(PAGES / "session.py", title="Session", url_path="session"),
        st.Page(PAGES / "replay.py", title="Replay", url_path="replay"),
        st.Page(PAGES / "compare.py", title="Compare", url_path="compare"),
        st.Page(PAGES / "leaderboard.py", title="Guard leaderboard", url_path="leaderboard"),
        st.Page(PAGES / "health.py", title="Ingest health", url_path="health"),
        *([st.Page(PAGES / "members.py", title="Members", url_path="members")] if signin.configured() else []),
    ]


def same_tab_link(container, label: str, link: str) -> None:
    """A button-like link to one of the app's pages (`./replay?session=…`, as replay_view builds
    them) that opens it in this tab, through the app's own navigation: st.link_button opens a new
    tab, which starts a new Streamlit session (its imports and caches) before the page draws."""
    from urllib.parse import parse_qsl

    path, _, query = link.partition("?")
    page = next(p for p in pages() if p.url_path == path.removeprefix("./"))
    container.page_link(page, label=label, query_params=dict(parse_qsl(query)))


def serve() -> None:
    from loopledger.app import access, data

    st.set_page_config(page_title="LoopLedger", layout="wide")
    access.gate()  # sign-in, when configured: nothing of the ledger is drawn before it
    current = st.navigation(pages())
    problem = data.problem()
    if problem:
        st.error("The ledger cannot be shown:")
        # It quotes a path and a database's own error text: plain text, never markdown.
        st.text(problem)
        st.stop()
    # A page run builds mostly objects that outlive it (events, replay steps, tables, charts): with the
    # cyclic collector on, its full collections rescan the whole server heap every few thousand of
    # them. Paused for the run (loopledger.gc_pause; fragment reruns are short and not paused).
    with gc_pause.paused():
        current.run()

