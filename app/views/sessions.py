"""Sessions (home): which sessions looped, how often, under which guard.

Filters live in the sidebar; everything that reads the ledger sits in a fragment that re-runs
every REFRESH_S seconds, so a session the worker is still writing shows up and its counters move.
Titles and paths are transcript text: they appear only inside st.dataframe and the chart.
"""

from __future__ import annotations

import streamlit as st
from loopledger.app import charts, cost_view, data, filters, safe, when, words
from loopledger.app.label_form import label_form
from loopledger.ledger import read

PAGE_SIZE = 50
METRICS = (("sessions", "Sessions"), ("runs", "Runs"), ("calls", "Tool calls"), ("warnings", "Warnings"),
           ("blocks", "Blocks"), ("halts", "Halts"), ("saved", "Calls saved"))


def _file(path: str | None, keep: int = 2) -> str:
    """A path cut to its last `keep` parts ("…/runs/session.jsonl"); the full path is the `path` column."""
    if not isinstance(path, str):
        return ""
    parts = words.shown_path(path).replace("\\", "/").rstrip("/").split("/")
    return path if len(parts) <= keep else "…/" + "/".join(parts[-keep:])


# The title right after the id: what a person looks for is readable without scrolling sideways.
TABLE_ORDER = ["id", "title", "halts", "runs", "calls", "warnings", "blocks", "saved", "strikes", "started_at",
               "format", "file", "path"]


def _table_config() -> dict:
    # Widths in pixels: the columns shown by default fit the page at 1400 px beside the sidebar.
    num = {m: st.column_config.NumberColumn(m, format="%d", help=charts.MEASURE_HELP.get(m, ""), width=58)
           for m in ("halts", "runs", "calls", "strikes", "warnings", "blocks", "saved")}
    num["warnings"] = st.column_config.NumberColumn("warnings", format="%d", help=charts.MEASURE_HELP["warnings"],
                                                    width=68)
    num["saved"] = st.column_config.NumberColumn("calls saved", format="%d", help=charts.MEASURE_HELP["saved"],
                                                 width=82)
    return num | {
        "id": st.column_config.NumberColumn("id", format="%d", width=56, pinned=True,
                                            help="click any cell of a row to open the session"),
        "started_at": st.column_config.TextColumn("started", width=140),
        "title": st.column_config.TextColumn("title", width=210),
        "file": st.column_config.TextColumn("file", width=150, help="the source file, shortened; "
                                            "the full path is a hidden column (the table's eye icon shows it)"),
        "format": st.column_config.TextColumn("format", width=110),
        "path": st.column_config.TextColumn("full path", width="large"),
    }


def shown_columns(table) -> list[str]:
    """The columns drawn by default: a measure 0 on every row of the page has none (strikes and blocks,
    on most ledgers), and the format and full path are hidden columns (the table's eye icon shows
    them; the filters and the CSV have them): the rest fits 1400 px without scrolling sideways."""
    zero = {m for m in ("strikes", "warnings", "blocks", "saved") if m in table and not table[m].fillna(0).any()}
    return [c for c in TABLE_ORDER if c not in zero and c not in ("format", "path")]


@st.fragment(run_every=data.REFRESH_S)
def _live(f: read.SessionFilter) -> None:
    head = data.q("headline", f)
    cols = st.columns(len(METRICS))
    for col, (key, label) in zip(cols, METRICS, strict=True):
        col.metric(label, f"{head[key]:,}", help=charts.MEASURE_HELP.get(key, None))
    n = len(f.policies) if f.policies else len(data.q("policies"))
    st.caption(f"Halts and calls saved are what the {n} chosen polic{'y' if n == 1 else 'ies'} (sidebar) deliver "
               "together, as one guard: a run several of them halted counts once, and saves the calls after the "
               "earliest halt. Per policy, each on its own: the expander below.")
    if head["sessions"] == 0:
        if data.q("headline", read.SessionFilter())["sessions"] == 0:
            # An empty ledger is not a filter that matched nothing: say what fills it.
            st.info("No session in this ledger yet: ingest one (`loopledger ingest PATH`), or forward one from a "
                    "live agent (`loopledger hook install claude-code`, `loopledger forward`).")
        else:
            st.info("No session matches these filters.")
        return
    cost_view.sessions_cost(f)  # what the loops cost (app/cost_view.py)

    c = st.columns(4)
    # Only measures something counted on these sessions (halts always): a ranking by zeros says nothing.
    ranks = [m for m in ("halts", "strikes", "warnings", "blocks", "saved") if m == "halts" or head.get(m)]
    by = c[0].selectbox("Chart ranks by", ranks, key="chart_by",
                        format_func=words.title, help="the first panel; the others keep its session order")
    top_n = c[1].slider("Sessions in chart", 5, 50, 20, key="chart_n")
    with_zero = c[0].toggle(f"Also sessions with no {words.title(by)}", value=False, key="chart_zero",
                            help="off: the chart draws the sessions the ranking measure counts; the table lists all")
    sort = c[2].selectbox("Table sorted by", read.SORTABLE, key="table_sort", format_func=words.title)
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
            **{m: st.column_config.NumberColumn(words.title(m), help=charts.MEASURE_HELP.get(m, ""))
               for m in read.MEASURES},
            "halts": st.column_config.NumberColumn("halts", help=charts.MEASURE_HELP["halts_per_policy"]),
            "saved": st.column_config.NumberColumn("calls saved", help="calls after this policy's own halts, "
                                                   "each halted run's calls after its halt")})
    drawn = charts.chart_rows(top, by, with_zero)
    if len(drawn):
        st.caption(f"Top {len(drawn)} sessions by {words.title(by)}; each panel has its own scale, a measure that is "
                   "0 on every session drawn has none (click a bar to open the session)."
                   + (f" {head['sessions'] - len(drawn):,} more are in the table." if head["sessions"] > len(drawn)
                      else ""))
        st.altair_chart(charts.sessions_bar(top, by, with_zero), key="sessions_chart")
    else:
        st.caption(f"No chart: no session here has {words.title(by)}; the table lists them all.")

    table = rows.assign(file=[_file(p) for p in rows["path"]], path=[words.shown_path(p) for p in rows["path"]],
                        started_at=when.moments(rows["started_at"]))[TABLE_ORDER]
    # A click on any cell selects it (single-cell), and so opens its row's session; the row's
    # checkbox (single-row) does the same.
    event = safe.table(table, key="sessions_table", column_config=_table_config(), on_select="rerun",
                       column_order=shown_columns(table),
                       selection_mode=["single-row", "single-cell"])
    picked = safe.clicked_row(event)
    if picked is not None:
        # A row opens its session here, in the same tab.
        st.switch_page("views/session.py", query_params={"session": str(int(table["id"].iloc[picked]))})

    st.download_button(f"Download all {head['sessions']:,} matching rows (CSV)", lambda: data.sessions_csv(f, sort),
                       file_name="loopledger-sessions.csv", mime="text/csv", key="csv")
    st.caption(f"{head['sessions']:,} sessions · page {page} of {pages} · click a row (any cell) to open it · "
               f"refreshes every {data.REFRESH_S} s")
    with st.expander("Label a session of this page", expanded=False):
        label_form(rows["id"].tolist(), "sessions")


words.tab_title("Sessions")
st.header("Sessions")
_live(filters.sidebar("sessions"))
