"""The Session page's spend chart: tokens per model turn along the run's steps, the part after
the run's first halt shaded in the halt colour (what the guard would have saved). Pure: frames in,
an Altair chart out."""

from __future__ import annotations

import altair as alt
import pandas as pd
from loopledger import vocab
from loopledger.analysis import pricing
from loopledger.app.charts_replay import VERDICT_COLORS


def spend_frame(turns: pd.DataFrame) -> pd.DataFrame:
    """turn_spend rows as the chart reads them: step, tokens, spend text, model."""
    return pd.DataFrame({
        "seq": turns["seq"].astype(int),
        "tokens": (turns["input_tokens"].fillna(0) + turns["output_tokens"].fillna(0)).astype(int),
        "spend": [pricing.usd_text(u) for u in turns["usd"]],
        "model": turns["model"].fillna("unknown"),
        "call": [("—" if c is None or c != c else f"#{int(c)}") for c in turns["call"]],
    })


def spend_chart(frame: pd.DataFrame, halt: tuple[int, str] | None, domain: tuple[int, int],
                width: int = 760) -> alt.LayerChart:
    """Bars of tokens per turn over steps `domain`; with `halt` = (first halt's step, policy), the
    steps after it are shaded red: the spend after the halt."""
    scale = alt.Scale(domain=list(domain), zero=False, nice=False)
    x = alt.X("seq:Q", title="step", scale=scale, axis=alt.Axis(tickMinStep=1, format="d"))
    bars = alt.Chart(frame, width=width, height=140).mark_bar(color="#495057").encode(
        x=x, y=alt.Y("tokens:Q", title="tokens"),
        tooltip=[alt.Tooltip("call:N", title="call"), alt.Tooltip("seq:Q", title="step"), "model:N",
                 alt.Tooltip("tokens:Q", format=","), "spend:N"])
    if halt is None:
        return alt.layer(bars)
    band = pd.DataFrame({"start": [halt[0] + 0.5], "end": [domain[1] + 0.5],
                         "what": [f"after {halt[1]}'s halt at step {halt[0]}: what it would have saved"]})
    shade = alt.Chart(band).mark_rect(color=VERDICT_COLORS[vocab.HALT], opacity=0.15).encode(
        x=alt.X("start:Q", scale=scale), x2="end:Q", tooltip=[alt.Tooltip("what:N", title="")])
    return alt.layer(shade, bars)
