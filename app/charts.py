"""Altair chart builders for the Sessions, Session and Ingest health pages: pure, DataFrame in, chart out.

No Streamlit and no database here, so each chart is unit-tested on its spec (tests/test_charts.py).
Session titles and arguments are transcript text: Vega draws them as SVG/canvas text and its
tooltip handler escapes HTML, so they are inert; they are also cut short to keep charts readable.
"""

from __future__ import annotations

import re
from urllib.parse import urlencode

import altair as alt
import pandas as pd
from loopledger import vocab
from loopledger.app.charts_replay import VERDICT_COLORS  # one palette for every page

BAR_MEASURES = ("runs", "strikes", "warnings", "blocks", "halts")
MEASURE_COLORS = {"runs": "#74c0fc", "strikes": "#9775fa", "warnings": VERDICT_COLORS[vocab.WARN],
                  "blocks": VERDICT_COLORS[vocab.BLOCK], "halts": VERDICT_COLORS[vocab.HALT]}
STATUS_COLORS = {"ok": "#2b8a3e", "new": "#74c0fc", "quarantined": "#f2a900", "error": "#c92a2a", "missing": "#868e96",
                 "truncated": "#9c36b5"}
LABEL_CHARS = 48


def session_link(session_id: int, run: int | None = None) -> str:
    """The deep link to the Session page (relative, so it works under any base URL)."""
    q = {"session": int(session_id)}
    if run is not None:
        q["run"] = int(run)
    return "./session?" + urlencode(q)


def _short(text: str | None, n: int = LABEL_CHARS) -> str:
    text = " ".join(text.split()) if isinstance(text, str) else ""  # None/NaN: a prose check has no call
    return text if len(text) <= n else text[: n - 1] + "…"


MEASURE_HELP = {
    "runs": "runs in the session (one per user message)",
    "strikes": "repeated batches whose answers did not change (run-length's strikes), summed over the chosen policies",
    "warnings": "checks that said warn, summed over the chosen policies",
    "blocks": "checks that said block (the call was refused), summed over the chosen policies",
    "halts": "halted runs: the runs the chosen policies, as one guard, halted (a run two of them halted counts once)",
    "halts_per_policy": "halts, counted once per policy that halted a run (a run two policies halted counts 2)",
    "saved": "tool calls that would not have run: in each halted run, the calls after the chosen policies' earliest "
             "halt — what they save together as one guard, not a sum over policies",
    "calls": "tool calls in the session",
}


_MONTHS = "Jan Feb Mar Apr May Jun Jul Aug Sep Oct Nov Dec".split()
_HOME = re.compile(r"^-(?:home|Users)-[^-]+-")  # Claude Code's project folder: /home/dev/ledger → -home-dev-ledger


def project_of(path: str | None) -> str:
    """The project a Claude Code transcript belongs to, from its folder under ~/.claude/projects
    (`-home-dev-ledger` → `ledger`; the folder name as written when it is not under a home); ""
    for any other source (its title and date tell it apart)."""
    if not isinstance(path, str):
        return ""
    parts = path.replace("\\", "/").split("/")
    for i, part in enumerate(parts[:-2]):
        if part == ".claude" and parts[i + 1] == "projects":
            return _HOME.sub("", parts[i + 2]).strip("-")
    return ""


def day_of(started_at: str | None) -> str:
    """"Mar 7" from an ISO time ("" when unknown): short enough to sit beside a title."""
    m = re.match(r"(\d{4})-(\d{2})-(\d{2})", started_at) if isinstance(started_at, str) else None
    if m is None or not 1 <= int(m.group(2)) <= 12:
        return ""
    return f"{_MONTHS[int(m.group(2)) - 1]} {int(m.group(3))}"


def session_name(session_id: int, title: str | None, started_at: str | None = None, path: str | None = None,
                 n: int = 40) -> str:
    """"#12 Mar 7 ledger · load claude.md": the id, the day and the project lead, so sessions with the
    same first prompt (three "load claude.md" in one week) are told apart before the title is cut."""
    where = " ".join(x for x in (day_of(started_at), project_of(path)) if x)
    return f"#{int(session_id)} " + (f"{where} · " if where else "") + _short(title, n)


def drawn_measures(rows: pd.DataFrame, by: str) -> list[str]:
    """The panels worth drawing: the ranking measure first, then every other measure that is not 0
    on every row drawn (a column of zeros says nothing: "strikes" and "blocks" on most ledgers)."""
    measures = [by, *[m for m in BAR_MEASURES if m != by]]
    return [m for i, m in enumerate(measures) if i == 0 or (m in rows and rows[m].fillna(0).astype(int).any())]


def chart_rows(top: pd.DataFrame, by: str = "halts", with_zero: bool = False) -> pd.DataFrame:
    """The sessions the chart draws: read.top_sessions() without its summary row (id None) and,
    unless `with_zero`, without the sessions whose ranking measure is 0 (a session with no halt says
    nothing in a chart of halts; the table lists every session)."""
    rows = top[top["id"].notna()]
    if not with_zero and by in rows:
        rows = rows[rows[by].fillna(0) > 0]
    return rows.reset_index(drop=True)


def sessions_bar(top: pd.DataFrame, by: str = "halts", with_zero: bool = False) -> alt.HConcatChart:
    """Small multiples: one bar chart per measure, side by side, sharing the session order.

    Each measure keeps its own x axis (runs and halts are different units), the ranking
    measure comes first, and every panel lists the sessions in the same order, so a row reads
    across. Only the measures that say something are drawn (drawn_measures) and only the
    sessions the ranking measure counts (chart_rows); `top` is read.top_sessions(), its summary
    row of the other sessions (id None) left out (the page says how many are not drawn). Clicking
    a bar follows its `link` (Vega's href) to the Session page.
    """
    rows = chart_rows(top, by, with_zero).copy()
    rows["order"] = range(len(rows))
    rows["session"] = [session_name(i, title, rows["started_at"].iloc[k] if "started_at" in rows else None,
                                    rows["path"].iloc[k] if "path" in rows else None)
                       for k, (i, title) in enumerate(zip(rows["id"], rows["title"], strict=True))]
    rows["link"] = [session_link(int(i)) for i in rows["id"]]
    measures = drawn_measures(rows, by)
    for m in measures:
        rows[m] = rows[m].fillna(0).astype(int) if m in rows else 0
    rows = rows[["order", "session", "link", *measures]]
    panels = []
    y_sort = alt.EncodingSortField("order", op="min")
    for i, m in enumerate(measures):
        panel = (
            alt.Chart(rows, height=alt.Step(22), width=110 if i else 140)  # fits 1400 px with the sidebar
            .mark_bar(color=MEASURE_COLORS.get(m, "#495057"))
            .encode(
                y=alt.Y("session:N", sort=y_sort, title=None,
                        axis=alt.Axis(labelLimit=280, labelOverlap=False) if i == 0 else None),
                x=alt.X(f"{m}:Q", title=m, axis=alt.Axis(tickMinStep=1, format="d", orient="top")),
                href=alt.Href("link:N"),
                tooltip=[alt.Tooltip("session:N"), *[alt.Tooltip(f"{x}:Q") for x in measures]],
            )
        )
        panels.append(panel)
    return alt.hconcat(*panels, spacing=8).resolve_scale(x="independent")


def timeline(df: pd.DataFrame, width: int = 760, domain: tuple[float, float] | None = None) -> alt.FacetChart:
    """Calls on x (call #N, as every page numbers them), tool names on y, one lane per policy,
    marks coloured by verdict.

    `df` is read.timeline() numbered by session_view.number_timeline (`call`, and `at`: the call
    number, a prose turn half-way to the next call) with a `why` column (the sentence for each
    loud check); without `at`, steps are on x. Blocks and halts are also drawn as vertical rules
    across the lane, so the call where one guard stops and another lets the agent go on stands
    out. `domain` = the calls shown (the chosen run's), so one run fills the width instead of
    sitting at the edge of the session. A click on a mark selects it (selection `mark_pick`: its
    seq and run), so the page can jump there.
    """
    data = df.copy()
    data["args"] = data["args"].map(lambda a: _short(a, 160))
    if "why" not in data:
        data["why"] = ""
    color = alt.Color("verdict:N", scale=alt.Scale(domain=list(VERDICT_COLORS), range=list(VERDICT_COLORS.values())),
                      legend=alt.Legend(title="verdict", orient="top"))
    tooltip = [*([alt.Tooltip("call:N")] if "call" in data else []), alt.Tooltip("seq:Q", title="step"),
               alt.Tooltip("tool:N"), alt.Tooltip("args:N"), alt.Tooltip("policy:N"), alt.Tooltip("verdict:N"),
               alt.Tooltip("why:N")]
    scale = alt.Scale(domain=list(domain), zero=False, nice=False) if domain else alt.Scale(zero=False)
    by_call = "at" in data
    x = alt.X("at:Q" if by_call else "seq:Q", scale=scale, axis=alt.Axis(tickMinStep=1, format="d"),
              title=("call #" if by_call else "step") + " (click a mark to read the transcript there)")
    pick = alt.selection_point(name="mark_pick", fields=["seq", "run_idx"], on="click", clear=False)
    base = alt.Chart(width=width)
    points = base.mark_point(filled=True, size=60, cursor="pointer").encode(
        # Whole tool names (update_reservation_flight, not update_reservati…): they are what a lane is.
        x=x, y=alt.Y("tool:N", title=None, axis=alt.Axis(labelLimit=360)), color=color, tooltip=tooltip,
        opacity=alt.condition(alt.datum.verdict == vocab.AFTER_HALT, alt.value(0.35), alt.value(1.0))
    ).add_params(pick)
    rules = base.transform_filter(
        alt.FieldOneOfPredicate(field="verdict", oneOf=[vocab.BLOCK, vocab.HALT])
    ).mark_rule(strokeWidth=2).encode(x=x, color=color, tooltip=tooltip)
    return alt.layer(points, rules, data=data).facet(
        # Lane names above their lanes, not beside them: the steps keep the page's width.
        row=alt.Row("policy:N", title=None, header=alt.Header(labelOrient="top", labelAnchor="start", labelLimit=600,
                                                              labelFontWeight="bold"))
    ).resolve_scale(y="independent")


def source_status(counts: dict[str, int]) -> alt.LayerChart:
    """One bar per source status (ok / quarantined / error / …), its count written at its end.

    A fixed band per status and a fixed width keep it readable with one status or five (a
    stretched chart of one bar read as a thin line), and the labels are never cut.
    """
    data = pd.DataFrame({"status": list(counts), "sources": [int(v) for v in counts.values()]})
    base = alt.Chart(data, height=alt.Step(34), width=420).encode(
        y=alt.Y("status:N", title=None, sort="-x", axis=alt.Axis(labelLimit=200, labelFontSize=13)),
        x=alt.X("sources:Q", title="sources", axis=alt.Axis(tickMinStep=1, format="d"),
                scale=alt.Scale(domainMin=0, nice=True)),
        tooltip=["status:N", "sources:Q"],
    )
    bars = base.mark_bar(size=24).encode(
        color=alt.Color("status:N", legend=None,
                        scale=alt.Scale(domain=list(STATUS_COLORS), range=list(STATUS_COLORS.values()))))
    text = base.mark_text(align="left", dx=4, fontSize=13).encode(text="sources:Q")
    return alt.layer(bars, text)
