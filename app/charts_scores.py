"""Altair chart builders for the guard leaderboard: pure, rows in, chart out (no Streamlit, no database).

Policy labels are user-written spec text: Vega draws them as SVG text and escapes its tooltips,
so they stay inert.
"""

from __future__ import annotations

import altair as alt
import pandas as pd
from loopledger.analysis import scoring

# What each part of a policy's bar means, in the order it is stacked, and its colour.
PARTS = {scoring.CAUGHT: "#2b8a3e", scoring.EARLY: "#f08c00", scoring.MISSED: "#adb5bd",
         "false_halts": "#c92a2a"}
PART_TITLES = {scoring.CAUGHT: "caught", scoring.EARLY: "early", scoring.MISSED: "missed", "false_halts": "false halts"}


def outcome_bars(rows: pd.DataFrame) -> alt.Chart:
    """One bar per policy: its loops split into caught / early / missed, and its false halts on
    normal sessions beside them. `rows` has policy, caught, early, missed, false_halts and, per
    part, `link_<part>` (the sessions behind it); clicking a part follows its link."""
    long = []
    for order, r in enumerate(rows.itertuples(index=False)):
        for part in PARTS:
            value = int(getattr(r, part))
            if value:
                long.append({"policy": r.policy, "order": order, "part": PART_TITLES[part], "sessions": value,
                             "part_order": list(PARTS).index(part), "link": getattr(r, f"link_{part}")})
    data = pd.DataFrame(long, columns=["policy", "order", "part", "sessions", "part_order", "link"])
    return (
        alt.Chart(data, height=alt.Step(26))
        .mark_bar()
        .encode(
            y=alt.Y("policy:N", sort=alt.EncodingSortField("order", op="min"), title=None,
                    axis=alt.Axis(labelLimit=420)),
            x=alt.X("sum(sessions):Q", title="labelled sessions", axis=alt.Axis(format="d", tickMinStep=1)),
            color=alt.Color("part:N", scale=alt.Scale(domain=[PART_TITLES[p] for p in PARTS], range=list(PARTS.values())),
                            legend=alt.Legend(title=None, orient="top")),
            order=alt.Order("part_order:Q"),
            href=alt.Href("link:N"),
            tooltip=[alt.Tooltip("policy:N"), alt.Tooltip("part:N"), alt.Tooltip("sessions:Q")],
        )
    )
