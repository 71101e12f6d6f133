"""The sidebar's session filters: one set, drawn by Sessions and Compare, kept across pages.

Streamlit forgets a widget's value once a page that does not draw it has run, so the values are
also kept under one plain session-state entry (KEPT) and put back before the widgets are drawn
again: Outcome = halted on Sessions is still halted after a visit to a session, and Compare sweeps
the sessions Sessions lists.
"""

from __future__ import annotations

import datetime as dt
from typing import Any

import streamlit as st
from loopledger.app import access, data
from loopledger.ledger import read

ANY = "any"
KEPT = "kept_filters"
DRAWN_ON = "filters_drawn_on"  # the page that drew them last: a widget of another page starts anew
KEYS = ("f_policies", "f_formats", "f_source", "f_dates", "f_outcome", "f_tool", "f_text", "f_member")


def _restore(valid: dict[str, Any], page: str) -> None:
    """Put the kept values back for widgets not drawn yet this run — all of them on the first run
    of another page, whose widgets are new ones even under the same keys (a value no longer
    offered, a format gone from the ledger, is dropped, never handed to a widget that would
    refuse it)."""
    moved = st.session_state.get(DRAWN_ON) != page
    st.session_state[DRAWN_ON] = page
    for key, value in st.session_state.get(KEPT, {}).items():
        if key in st.session_state and not moved:
            continue
        ok = valid.get(key)
        if ok is None:
            st.session_state[key] = value
        elif isinstance(value, list):
            st.session_state[key] = [v for v in value if v in ok]
        elif value in ok:
            st.session_state[key] = value


def _keep() -> None:
    kept = dict(st.session_state.get(KEPT, {}))
    kept.update({k: st.session_state[k] for k in KEYS if k in st.session_state})
    st.session_state[KEPT] = kept


def _given(key: str, **default: Any) -> dict[str, Any]:
    """A widget's default only when the person has not set it (setting both makes Streamlit warn)."""
    return {} if key in st.session_state else default


def sidebar(page: str, policies: bool = True) -> read.SessionFilter:
    """Draw the filters in the sidebar of `page` and return them. `policies=False` (Compare, which
    sweeps a detector of its own): the policy choice, which only chooses what counters sum, is not
    drawn and kept as it was."""
    pols = data.q("policies")
    labels = dict(zip(pols["id"], pols["label"], strict=True))
    default = [i for i, d in zip(pols["id"], pols["is_default"], strict=True) if d] or list(labels)
    tools = ("", *data.q("tools"))
    formats = data.q("formats")
    _restore({"f_policies": list(labels), "f_formats": list(formats), "f_outcome": (ANY, *read.OUTCOME_FILTERS),
              "f_tool": tools, "f_member": ("", *data.q("session_members"))}, page)
    sb = st.sidebar
    sb.caption("Filters (kept while you move between pages; Compare sweeps the sessions they match)")
    chosen = list(labels)
    if policies:
        chosen = sb.multiselect("Policies", list(labels), format_func=labels.get, key="f_policies",
                                help="Counters are summed over these policies.", **_given("f_policies", default=default))
    fmts = sb.multiselect("Format", formats, key="f_formats")
    source = sb.text_input("Source path contains", key="f_source")
    lo, hi = data.q("date_bounds")
    dates = sb.date_input("Started between", key="f_dates", **_given("f_dates", value=(lo, hi) if lo and hi else ())) \
        if lo else ()
    outcome = sb.selectbox("Outcome", (ANY, *read.OUTCOME_FILTERS), key="f_outcome")
    tool = sb.selectbox("Called tool", tools, key="f_tool", format_func=lambda t: t or "any tool")
    text = sb.text_input("Search titles and paths", key="f_text")
    member = access.member_choice()  # a team's ledger: whose guard forwarded the session
    _keep()
    date_from = dates[0] if isinstance(dates, tuple | list) and len(dates) >= 1 else None
    date_to = dates[1] if isinstance(dates, tuple | list) and len(dates) == 2 else None
    # The full range is no filter: sessions without a start time stay listed, and the SQL is lighter.
    date_from = None if date_from == lo else date_from
    date_to = None if date_to == hi else date_to
    return read.SessionFilter(
        # Every policy chosen = no policy filter: the same sums, and the SQL skips an IN list.
        policies=() if set(chosen) == set(labels) else tuple(chosen), formats=tuple(fmts), source=source.strip(),
        date_from=date_from if isinstance(date_from, dt.date) else None,
        date_to=date_to if isinstance(date_to, dt.date) else None,
        outcome="" if outcome == ANY else outcome, tool=tool, text=text.strip(), member=member)


def describe(f: read.SessionFilter) -> str:
    """The filters in force, in words ("outcome halted, format codex"), or "" for none."""
    parts = [f"outcome {f.outcome}" if f.outcome else "", f"format {', '.join(f.formats)}" if f.formats else "",
             f"source path contains “{f.source}”" if f.source else "", f"called tool {f.tool}" if f.tool else "",
             f"search “{f.text}”" if f.text else "",
             f"started from {f.date_from}" if f.date_from else "", f"started until {f.date_to}" if f.date_to else ""]
    return ", ".join(p for p in parts if p)
