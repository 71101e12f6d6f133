"""The label form any list of runs can show: pick a session of the list, say what it is.

A label judges the session (loopledger.analysis.scoring): loop with the loop's calls, normal or unclear.
Session titles are transcript text: the picker shows ids and call counts only.
"""

from __future__ import annotations

from collections.abc import Sequence

import streamlit as st
from loopledger.analysis import scoring
from loopledger.app import data
from loopledger.ledger import schema as t


def label_form(session_ids: Sequence[int], key: str, runs: dict[int, int] | None = None) -> bool:
    """Render the form under a list; True when a label was saved. `runs`: session → the run the
    list showed (its calls are a loop label's default); otherwise the whole session is meant."""
    ids = [int(i) for i in dict.fromkeys(session_ids)]
    if not ids:
        return False
    runs = runs or {}
    with st.form(f"label_form_{key}"):
        st.write("Label a session of this list (the leaderboard scores against labels):")
        c1, c2, c3 = st.columns([1, 1, 1])
        sid = c1.selectbox("Session", ids, key=f"{key}_session", format_func=lambda i: f"#{i}")
        # Nothing chosen until the person chooses: a pre-selected label gets saved by accident.
        label = c2.radio("Label", scoring.LABELS, index=None, horizontal=True, key=f"{key}_label")
        loop_calls = c3.text_input("Loop calls (FIRST-LAST)", key=f"{key}_loop_calls",
                                   help="1-based positions of the looping calls in the session; loop only. "
                                        "Empty: the calls of the run shown in the list.")
        reason = st.text_input("Reason", key=f"{key}_reason")
        if not st.form_submit_button("Save label"):
            return False
    if label is None:
        st.error("Not saved: choose loop, normal or unclear.")
        return False
    try:
        rng = scoring.parse_loop_calls(loop_calls) if label == scoring.LOOP else None
        run = runs.get(int(sid), t.SESSION_LEVEL)
        if label == scoring.LOOP and rng is None and run == t.SESSION_LEVEL:
            raise ValueError("say which calls loop (FIRST-LAST)")
        data.save_label(int(sid), run, label, reason, *(rng or (None, None)))
    except ValueError as exc:
        st.error(f"Not saved: {exc}")
        return False
    st.success(f"Saved: session #{int(sid)} is {label}.")
    return True
