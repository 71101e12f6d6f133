"""Who changed the enforced setting, and when: the guard leaderboard's small section of it (the
Session page says who labelled a session and who chose what is enforced now)."""

from __future__ import annotations

import streamlit as st
from loopledger.app import data, safe


def enforcement_history() -> None:
    """Every change of the enforced setting, newest first: when, what, from where, by whom."""
    with data.connect() as conn:
        from loopledger.ledger import read_live

        history = read_live.enforcement_history(conn)
    with st.expander(f"Who changed the enforced setting ({len(history)})", expanded=False):
        if len(history):
            safe.table(history, key="lb_enforcement_history")
        else:
            st.caption("Never changed: the default set is enforced.")
