"""LoopLedger dashboard: the Streamlit entry point (`streamlit run app/main.py`).

Page paths are stable so links can be shared: / (Sessions), /session?session=ID&run=IDX,
/replay?session=…&run=…&policy=…&step=…, /compare, /health. Replay and Compare are registered
when their page files exist.
"""

from __future__ import annotations

from pathlib import Path

import streamlit as st

from app import data

PAGES = Path(__file__).resolve().parent / "pages"

st.set_page_config(page_title="LoopLedger", layout="wide")

pages = [
    st.Page(PAGES / "sessions.py", title="Sessions", default=True),
    st.Page(PAGES / "session.py", title="Session", url_path="session"),
]
for name, title in (("replay", "Replay"), ("compare", "Compare")):
    if (PAGES / f"{name}.py").is_file():
        pages.append(st.Page(PAGES / f"{name}.py", title=title, url_path=name))
pages.append(st.Page(PAGES / "health.py", title="Ingest health", url_path="health"))

current = st.navigation(pages)
problem = data.problem()
if problem:
    st.error(problem)
    st.stop()
current.run()
