"""Sessions (home): which sessions looped, how often, under which guard.

Filters live in the sidebar; everything that reads the ledger sits in a fragment that re-runs
every REFRESH_S seconds, so a session the worker is still writing shows up and its counters move.
Titles and paths are transcript text: they appear only inside st.dataframe and the chart.
"""

from __future__ import annotations

import datetime as dt

import streamlit as st
from loopledger.app import access, charts, cost_view, data, safe, when
from loopledger.app.label_form import label_form
from loopledger.ledger import read

PAGE_SIZE = 50
METRICS = (("sessions", "Sessions"), ("runs", "Runs"), ("calls", "Tool calls"), ("warnings", "Warnings"),
           ("blocks", "Blocks"), ("halts", "Halts"), ("saved", "Calls saved"))
ANY = "any"


def _filters() -> read.SessionFilter:
    pols = data.q("policies")
    labels = dict(zip(pols["id"], pols["label"], strict=True))
    default = [i for i, d in zip(pols["id"], pols["is_default"], strict=True) if d] or list(labels)
    sb = st.sidebar
    chosen = sb.multiselect("Policies", list(labels), default=default, format_func=labels.get, key="f_policies",
                            help="Counters are summed over these policies.")
    fmts = sb.multiselect("Format", data.q("formats"), key="f_formats")
    source = sb.text_input("Source path contains", key="f_source")
    lo, hi = data.q("date_bounds")
    dates = sb.date_input("Started between", value=(lo, hi) if lo and hi else (), key="f_dates") if lo else ()
    outcome = sb.selectbox("Outcome", (ANY, *read.OUTCOME_FILTERS), key="f_outcome")
    tool = sb.selectbox("Called tool", ("", *data.q("tools")), key="f_tool", format_func=lambda t: t or "any tool")
    text = sb.text_input("Search titles and paths", key="f_text")
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
        outcome="" if outcome == ANY else outcome, tool=tool, text=text.strip(), member=access.member_choice())


def _file(path: str | None, keep: int = 2) -> str:
    """A path cut to its last `keep` parts ("…/runs/session.jsonl"); the full path is the `path` column."""
    if not isinstance(path, str):
        return ""
    parts = path.replace("\\", "/").rstrip("/").split("/")
    return path if len(parts) <= keep else "…/" + "/".join(parts[-keep:])


# The title right after the id: what a person looks for is readable without scrolling sideways.
TABLE_ORDER = ["id", "title", "halts", "runs", "calls", "warnings", "blocks", "saved", "strikes", "started_at",
               "format", "file", "path"]


def _table_config() -> dict:
    num = {m: st.column_config.NumberColumn(m, format="%d", help=charts.MEASURE_HELP.get(m, ""), width="small")
           for m in ("halts", "runs", "calls", "strikes", "warnings", "blocks", "saved")}
    num["saved"] = st.column_config.NumberColumn("calls saved", format="%d", help=charts.MEASURE_HELP["saved"],
                                                 width="small")
    return num | {
        "id": st.column_config.NumberColumn("id", format="%d", width="small", pinned=True,
                                            help="click a row to open the session"),
        "started_at": st.column_config.TextColumn("started", width="medium"),
        "title": st.column_config.TextColumn("title", width="large"),
        "file": st.column_config.TextColumn("file", width="medium", help="the source file, shortened; "
                                            "the full path is in the last column"),
        "path": st.column_config.TextColumn("full path", width="large"),
    }


@st.fragment(run_every=data.REFRESH_S)
def _live(f: read.SessionFilter) -> None:
    head = data.q("headline", f)
    cols = st.columns(len(METRICS))
    for col, (key, label) in zip(cols, METRICS, strict=True):
        col.metric(label, f"{head[key]:,}", help=charts.MEASURE_HELP.get(key, None))
    if head["sessions"] == 0:
        st.info("No session matches these filters.")
        return
    cost_view.sessions_cost(f)  # what the loops cost (app/cost_view.py)

    c = st.columns(4)
    by = c[0].selectbox("Chart ranks by", ("halts", "strikes", "warnings", "blocks", "saved"), key="chart_by",
                        help="the first panel; the others keep its session order")
    top_n = c[1].slider("Sessions in chart", 5, 50, 20, key="chart_n")
    sort = c[2].selectbox("Table sorted by", read.SORTABLE, key="table_sort")
    pages = max(1, -(-head["sessions"] // PAGE_SIZE))
    page = int(c[3].number_input("Page", 1, pages, 1, key="table_page")) if pages > 1 else 1
    top = data.q("top_sessions", f, top_n, by, head)
    rows = data.q("sessions_page", f, sort, True, PAGE_SIZE, (page - 1) * PAGE_SIZE)

    if head["halts"]:
        # Reuse a ranking already read when it is by halts; ask only otherwise.
        ranked = top if by == "halts" else rows if sort == "halts" and page == 1 else \
            data.q("sessions_page", f, "halts", True, 1)
        worst = int(ranked["id"].iloc[0])
        # Label carries only the id: titles are transcript text and a link label is markdown.
        st.page_link("views/session.py", label=f"Open the most halted session (#{worst}): why it halted",
                     query_params={"session": str(worst)}, icon=":material/report:")
    with st.expander("Per policy", expanded=False):
        safe.table(data.q("per_policy", f).drop(columns=["policy_id"]), key="per_policy", column_config={
            "sessions_halted": st.column_config.NumberColumn("sessions halted", help="sessions with a halt"),
            **{m: st.column_config.NumberColumn(m, help=charts.MEASURE_HELP.get(m, "")) for m in read.MEASURES}})
    st.caption(f"Top {min(top_n, head['sessions'])} sessions by {by}; each panel has its own scale "
               "(click a bar to open the session)." + (f" {head['sessions'] - top_n:,} more are in the table."
                                                       if head["sessions"] > top_n else ""))
    st.altair_chart(charts.sessions_bar(top, by), key="sessions_chart")

    table = rows.assign(file=[_file(p) for p in rows["path"]], started_at=when.moments(rows["started_at"]))[TABLE_ORDER]
    event = safe.table(table, key="sessions_table", column_config=_table_config(), on_select="rerun",
                       selection_mode="single-row")
    picked = event.selection.rows if event is not None and hasattr(event, "selection") else []
    if picked:
        # A row opens its session here, in the same tab.
        st.switch_page("views/session.py", query_params={"session": str(int(table["id"].iloc[picked[0]]))})

    st.download_button(f"Download all {head['sessions']:,} matching rows (CSV)", lambda: data.sessions_csv(f, sort),
                       file_name="loopledger-sessions.csv", mime="text/csv", key="csv")
    st.caption(f"{head['sessions']:,} sessions · page {page} of {pages} · click a row to open it · "
               f"refreshes every {data.REFRESH_S} s")
    with st.expander("Label a session of this page", expanded=False):
        label_form(rows["id"].tolist(), "sessions")


st.header("Sessions")
_live(_filters())
