"""Altair chart builders for the Sessions, Session and Ingest health pages: pure, DataFrame in, chart out.

No Streamlit and no database here, so each chart is unit-tested on its spec (tests/test_charts.py).
Session titles and arguments are transcript text: Vega draws them as SVG/canvas text and its
tooltip handler escapes HTML, so they are inert; they are also cut short to keep charts readable.
"""

from __future__ import annotations

from urllib.parse import urlencode

import altair as alt
import pandas as pd
from loopledger import vocab
from loopledger.app.charts_replay import VERDICT_COLORS  # one palette for every page

BAR_MEASURES = ("runs", "strikes", "warnings", "blocks", "halts")
MEASURE_COLORS = {"runs": "#74c0fc", "strikes": "#9775fa", "warnings": VERDICT_COLORS[vocab.WARN],
                  "blocks": VERDICT_COLORS[vocab.BLOCK], "halts": VERDICT_COLORS[vocab.HALT]}
STATUS_COLORS = {"ok": "#2b8a3e", "new": "#74c0fc", "quarantined": "#f2a900", "error": "#c92a2a", "missing": "#868e96"}
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


def sessions_bar(top: pd.DataFrame) -> alt.Chart | alt.VConcatChart:
    """Stacked horizontal bars of runs/strikes/warnings/blocks/halts per session.

    `top` is read.top_sessions(): id (None for the summary row), title, runs and the measures.
    Clicking a session's bar follows its `link` (Vega's href channel) to the Session page. The
    summary of the other sessions is a second bar on its own x scale below: on the sessions'
    scale it would dwarf every bar above it.
    """
    rows = top.reset_index(drop=True).copy()
    rows["order"] = range(len(rows))
    rows["session"] = [
        f"#{int(i)} {_short(title, 40)}" if pd.notna(i) else _short(title)
        for i, title in zip(rows["id"], rows["title"], strict=True)
    ]
    rows["link"] = [session_link(int(i)) if pd.notna(i) else None for i in rows["id"]]
    long = rows.melt(id_vars=["order", "session", "link"], value_vars=list(BAR_MEASURES),
                     var_name="measure", value_name="value")
    long["value"] = long["value"].fillna(0).astype(int)
    long["measure_order"] = long["measure"].map(BAR_MEASURES.index)
    long = long[long["value"] > 0]
    sessions = _bars(long[long["link"].notna()], "count")
    rest = long[long["link"].isna()]
    if rest.empty:
        return sessions
    return alt.vconcat(sessions, _bars(rest, "count, all other sessions together")).resolve_scale(x="independent")


def _bars(data: pd.DataFrame, x_title: str) -> alt.Chart:
    return (
        alt.Chart(data, height=alt.Step(24))  # one fixed band per session: every label shows
        .mark_bar()
        .encode(
            y=alt.Y("session:N", sort=alt.EncodingSortField("order", op="min"), title=None,
                    axis=alt.Axis(labelLimit=320, labelOverlap=False)),
            x=alt.X("sum(value):Q", title=x_title),
            color=alt.Color("measure:N", scale=alt.Scale(domain=list(MEASURE_COLORS), range=list(MEASURE_COLORS.values())),
                            legend=alt.Legend(title=None, orient="top")),
            order=alt.Order("measure_order:Q"),
            href=alt.Href("link:N"),
            tooltip=[alt.Tooltip("session:N"), alt.Tooltip("measure:N"), alt.Tooltip("value:Q")],
        )
    )


def timeline(df: pd.DataFrame, width: int = 760) -> alt.FacetChart:
    """Steps on x, tool names on y, one lane per policy, marks coloured by verdict.

    `df` is read.timeline(). Blocks and halts are also drawn as vertical rules across the lane,
    so the step where one guard stops and another lets the agent go on stands out.
    """
    data = df.copy()
    data["args"] = data["args"].map(lambda a: _short(a, 160))
    color = alt.Color("verdict:N", scale=alt.Scale(domain=list(VERDICT_COLORS), range=list(VERDICT_COLORS.values())),
                      legend=alt.Legend(title="verdict", orient="top"))
    tooltip = [alt.Tooltip("seq:Q", title="step"), alt.Tooltip("tool:N"), alt.Tooltip("args:N"),
               alt.Tooltip("policy:N"), alt.Tooltip("verdict:N"), alt.Tooltip("count:Q"), alt.Tooltip("reason:N")]
    base = alt.Chart(width=width)
    points = base.mark_point(filled=True, size=60).encode(
        x=alt.X("seq:Q", title="step"), y=alt.Y("tool:N", title=None), color=color, tooltip=tooltip,
        opacity=alt.condition(alt.datum.verdict == vocab.AFTER_HALT, alt.value(0.35), alt.value(1.0)))
    rules = base.transform_filter(
        alt.FieldOneOfPredicate(field="verdict", oneOf=[vocab.BLOCK, vocab.HALT])
    ).mark_rule(strokeWidth=2).encode(x="seq:Q", color=color, tooltip=tooltip)
    return alt.layer(points, rules, data=data).facet(
        # Lane names above their lanes, not beside them: the steps keep the page's width.
        row=alt.Row("policy:N", title=None, header=alt.Header(labelOrient="top", labelAnchor="start", labelLimit=600,
                                                              labelFontWeight="bold"))
    ).resolve_scale(y="independent")


def source_status(counts: dict[str, int]) -> alt.Chart:
    """One bar per source status (ok / quarantined / error / …)."""
    data = pd.DataFrame({"status": list(counts), "sources": [int(v) for v in counts.values()]})
    return (
        alt.Chart(data, height=40 + 24 * max(1, len(data)))
        .mark_bar()
        .encode(
            y=alt.Y("status:N", title=None, sort="-x"),
            x=alt.X("sources:Q", title="sources"),
            color=alt.Color("status:N", legend=None,
                            scale=alt.Scale(domain=list(STATUS_COLORS), range=list(STATUS_COLORS.values()))),
            tooltip=["status:N", "sources:Q"],
        )
    )
