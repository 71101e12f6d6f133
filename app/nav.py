"""The app's pages and the one way they are served: through st.navigation, from app/main.py.

Streamlit keeps a legacy mode for apps with a `pages/` folder beside the main script: until some
run calls the public st.navigation, a request for /session runs app/pages/session.py on its own
(no page config, no ledger check, file-name navigation) — on a fresh server's first deep link,
and in every AppTest run. serve() marks the runs it drives; a page run without that mark turns
the legacy mode off and serves itself through serve() within the same run (a rerun would drop
the click or form submit that caused this run).
"""

from __future__ import annotations

import threading
from pathlib import Path

import streamlit as st

PAGES = Path(__file__).resolve().parent / "pages"
_run = threading.local()  # one thread per script run: the mark never leaks into another run


def pages() -> list:
    """Sessions at /, then session, replay and compare (when their files exist), health."""
    out = [
        st.Page(PAGES / "sessions.py", title="Sessions", default=True),
        st.Page(PAGES / "session.py", title="Session", url_path="session"),
    ]
    for name, title in (("replay", "Replay"), ("compare", "Compare")):
        if (PAGES / f"{name}.py").is_file():
            out.append(st.Page(PAGES / f"{name}.py", title=title, url_path=name))
    out.append(st.Page(PAGES / "health.py", title="Ingest health", url_path="health"))
    return out


def serve() -> None:
    from app import data

    st.set_page_config(page_title="LoopLedger", layout="wide")
    current = st.navigation(pages())
    problem = data.problem()
    if problem:
        st.error(problem)
        st.stop()
    _run.active = True
    try:
        current.run()
    finally:
        _run.active = False


def require_entry() -> None:
    """Call first in every page: outside serve(), serve this request properly and stop."""
    if getattr(_run, "active", False):
        return
    from streamlit.runtime.pages_manager import PagesManager  # the legacy-mode switch lives here

    PagesManager.uses_pages_directory = False
    serve()
    st.stop()
