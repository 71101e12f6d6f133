"""LoopLedger dashboard: the Streamlit entry point (`streamlit run app/main.py`).

Page paths are stable so links can be shared: / (Sessions), /session?session=ID&run=IDX,
/replay?session=…&run=…&policy=…&step=…, /compare,
/leaderboard?policy=…&cell=… (the sessions behind a number) or ?a=…&b=… (two policies), /health (app/nav.py holds the list and serves it).
"""

from __future__ import annotations

from loopledger.app import nav

nav.serve()
