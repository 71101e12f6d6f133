"""Ingest health: what was read, when, and which lines were quarantined (file:line and why).

Re-reads the ledger every REFRESH_S seconds while open, so a running worker's progress shows.
Paths and excerpts are transcript-side text: tables only.
"""

from __future__ import annotations

import streamlit as st
from loopledger.app import charts, data, safe, when, words

PAGE_SIZE = 100


@st.fragment(run_every=data.REFRESH_S)
def _live(status: str) -> None:
    totals = data.q("ingest_totals")
    counts = data.q("source_status_counts")
    c = st.columns([1, 1, 1, 2])  # the last metric holds a whole timestamp
    c[0].metric("Sources", f"{totals['sources']:,}")
    c[1].metric("Quarantined lines", f"{totals['quarantined_lines']:,}")
    c[2].metric("Sources not ok", f"{sum(v for k, v in counts.items() if k != 'ok'):,}")
    last = totals["last_ingest"]
    c[3].metric("Last ingest", when.moment(last) if last else "never")
    if counts:
        st.altair_chart(charts.source_status(counts), key="status_chart")

    sources = data.q("sources_page", status, PAGE_SIZE, 0)
    failed = sources[sources["status"].isin(["error", "quarantined", "missing", "truncated"])]
    if len(failed):
        # A failed source's message first and whole, not in the last column off to the right.
        st.subheader("Sources that need attention")
        for row in failed.itertuples(index=False):
            safe.text(f"{row.status}: {words.shown_path(row.path)}" + (f"\n    {row.error}" if isinstance(row.error, str) and row.error
                                                     else f"\n    {row.errors} quarantined line(s), listed below"
                                                     if row.errors else ""))
    st.subheader("Sources")
    cols = ["status", "error", "path", "format", "last_ingest", "sessions", "calls", "errors", "size", "id"]
    shown = sources[cols].assign(error=sources["error"].fillna(""), last_ingest=when.moments(sources["last_ingest"]),
                                 path=[words.shown_path(x) for x in sources["path"]])
    if not shown["error"].any():
        shown = shown.drop(columns=["error"])  # no message to show: the path takes the room
    safe.table(shown, key="sources_table",
               column_config={**words.column_titles(shown.columns),
                              "size": st.column_config.NumberColumn("bytes", format="%d"),
                              "error": st.column_config.TextColumn("message", width="large"),
                              "path": st.column_config.TextColumn("path", width="large")})
    st.subheader("Quarantined lines")
    errs = data.q("ingest_errors", PAGE_SIZE)
    if len(errs):
        safe.table(errs[["where", "message", "excerpt", "created_at"]].assign(
            created_at=when.moments(errs["created_at"]), where=[words.shown_path(w) for w in errs["where"]]),
                   key="errors_table", column_config={"created_at": st.column_config.TextColumn("quarantined")})
    else:
        st.write("No quarantined lines.")
    st.caption(f"Newest {PAGE_SIZE} shown · refreshes every {data.REFRESH_S} s")


words.tab_title("Ingest health")
st.header("Ingest health")
statuses = ["", *sorted(data.q("source_status_counts"))]
_live(st.sidebar.selectbox("Source status", statuses, format_func=lambda s: s or "any", key="h_status"))
