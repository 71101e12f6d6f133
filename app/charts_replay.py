"""Altair chart builders for the Replay and Compare pages: pure functions, rows in, chart out.

No Streamlit here, so every chart is unit-tested by its spec (tests/test_sweep.py). Transcript
text never reaches a chart: only numbers, verdict words, setting labels and session ids.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import altair as alt
import pandas as pd
from loopledger import vocab

VERDICT_COLORS = {
    vocab.ALLOW: "#9aa5b1",
    vocab.WARN: "#f2a900",
    vocab.BLOCK: "#e8590c",
    vocab.HALT: "#c92a2a",
    vocab.AFTER_HALT: "#ced4da",
}
METRICS = ("halts", "warnings", "blocks", "saved", "halted_runs")


_RANK = {v: i for i, v in enumerate((vocab.ALLOW, vocab.AFTER_HALT, vocab.WARN, vocab.BLOCK, vocab.HALT))}
MAX_POINTS = 600  # steps drawn per series; longer runs are bucketed (max count, min threshold)


def counter_rows(steps: Sequence[Any], max_points: int = MAX_POINTS) -> list[dict[str, Any]]:
    """Per step with checks: the largest count/total and the smallest threshold, plus the verdict.

    Per-call policies check several calls in one batch; the most advanced counter is what a
    person watching the guard wants to see against the threshold. Runs longer than `max_points`
    checked steps are bucketed (a bucket keeps its largest counters, its smallest threshold and
    its worst verdict, at its first step), so a 10k-step run still draws in a few milliseconds
    and no halt or spike disappears from the picture.
    """
    points = []
    for step in steps:
        if not step.checks:
            continue
        checks = [c for c in step.checks if c.verdict != vocab.AFTER_HALT]
        if not checks:
            points.append((step.seq, vocab.AFTER_HALT, None, None, None))
            continue
        verdict = max((c.verdict for c in checks), key=lambda v: _RANK.get(v, 0))
        vals = {}
        for name in ("count", "total", "threshold"):
            xs = [getattr(c, name) for c in checks if getattr(c, name) is not None]
            vals[name] = (min(xs) if name == "threshold" else max(xs)) if xs else None
        points.append((step.seq, verdict, vals["count"], vals["total"], vals["threshold"]))
    size = max(1, -(-len(points) // max_points))
    rows = []
    for i in range(0, len(points), size):
        bucket = points[i:i + size]
        seq = bucket[0][0]
        verdict = max((p[1] for p in bucket), key=lambda v: _RANK.get(v, 0))
        for col, name in ((2, "count"), (3, "total"), (4, "threshold")):
            xs = [p[col] for p in bucket if p[col] is not None]
            if xs:
                rows.append({"seq": seq, "series": name, "value": min(xs) if name == "threshold" else max(xs),
                             "verdict": verdict})
            elif name == "count" and verdict == vocab.AFTER_HALT:
                rows.append({"seq": seq, "series": "count", "value": None, "verdict": verdict})
    return rows


def counters_chart(rows: Sequence[dict[str, Any]], cursor: int | None, height: int = 180) -> alt.LayerChart:
    """Counters against the threshold over every step, verdict dots, the cursor as a rule."""
    df = pd.DataFrame(list(rows), columns=["seq", "series", "value", "verdict"])
    # Steps and counters are whole numbers: ticks at integers only (never 101.5).
    base = alt.Chart(df).encode(x=alt.X("seq:Q", title="step (event seq)", scale=alt.Scale(zero=False),
                                        axis=alt.Axis(format="d", tickMinStep=1)))
    lines = base.mark_line(interpolate="step-after").encode(
        y=alt.Y("value:Q", title="count", axis=alt.Axis(format="d", tickMinStep=1)),
        # Neutral colours: red, orange and amber mean halt, block and warn on every page.
        color=alt.Color("series:N", title=None, scale=alt.Scale(domain=["count", "total", "threshold"],
                                                                range=["#343a40", "#74c0fc", "#868e96"])),
        strokeDash=alt.condition(alt.datum.series == "threshold", alt.value([4, 3]), alt.value([1, 0])),
    )
    dots = base.transform_filter(
        (alt.datum.series == "count") & (alt.datum.verdict != vocab.ALLOW)
    ).mark_point(filled=True, size=50).encode(
        y="value:Q",
        fill=alt.Fill("verdict:N", scale=alt.Scale(domain=list(VERDICT_COLORS), range=list(VERDICT_COLORS.values()))),
        tooltip=["seq:Q", "verdict:N", "value:Q"],
    )
    layers = [lines, dots]
    if cursor is not None:
        layers.append(alt.Chart(pd.DataFrame({"seq": [cursor]})).mark_rule(color="#1c7ed6", strokeWidth=2)
                      .encode(x="seq:Q"))
    return alt.layer(*layers).properties(height=height)


def counters_spec(rows: Sequence[dict[str, Any]], height: int = 180) -> dict[str, Any]:
    """The counters chart as a Vega-Lite dict, without the cursor: built once per run and policy.

    Validating and serialising an Altair chart costs far more than a Replay click's budget, so
    the page caches this dict and only adds the cursor per click (with_cursor).
    """
    with alt.data_transformers.disable_max_rows():
        return counters_chart(rows, None, height).to_dict()


def with_cursor(spec: dict[str, Any], cursor: int) -> dict[str, Any]:
    """A copy of a counters spec with the cursor drawn as a vertical rule at step `cursor`."""
    rule = {"mark": {"type": "rule", "color": "#1c7ed6", "strokeWidth": 2},
            "encoding": {"x": {"datum": cursor, "type": "quantitative"}}}
    return {**spec, "layer": [*spec["layer"], rule]}


# One colour meaning on every page: halts red, blocks orange, warnings amber (the verdicts'
# colours); calls saved, not a verdict, blue.
METRIC_COLORS = {"halts": VERDICT_COLORS[vocab.HALT], "halted_runs": VERDICT_COLORS[vocab.HALT],
                 "blocks": VERDICT_COLORS[vocab.BLOCK], "warnings": VERDICT_COLORS[vocab.WARN], "saved": "#1c7ed6"}
METRIC_TITLES = {"halts": "halts", "saved": "calls saved", "warnings": "warnings", "blocks": "blocks",
                 "halted_runs": "halted runs"}


def sweep_lines_chart(rows: Sequence[dict[str, Any]], param: str,
                      metrics: Sequence[str] = ("halts", "saved", "warnings")) -> alt.HConcatChart:
    """Each metric against the swept parameter, one small chart per metric, each with its own
    y scale (halts in tens and calls saved in thousands on one axis would flatten the halts),
    coloured as that measure is on every page (invalid settings dropped). A metric that is 0 under
    every setting gets no chart (a flat line at zero says nothing; `zero_metrics` names them)."""
    metrics = [m for m in metrics if m not in zero_metrics(rows, metrics)] or list(metrics[:1])
    long = [{param: r[param], "metric": m, "value": r[m]}
            for r in rows if r.get("error") is None for m in metrics]
    df = pd.DataFrame(long, columns=[param, "metric", "value"])
    df[param] = _values(list(df[param]))
    order = list(dict.fromkeys(df[param]))
    width = max(160, min(200, 36 * len(order)))  # three panels side by side fit a 1400 px page
    panels = [
        alt.Chart(title=METRIC_TITLES.get(m, m)).transform_filter(alt.datum.metric == m)
        .mark_line(point=alt.OverlayMarkDef(color=METRIC_COLORS.get(m, "#495057")),
                   color=METRIC_COLORS.get(m, "#495057"))
        .encode(x=alt.X(f"{param}:O", title=param, sort=order, axis=alt.Axis(labelAngle=0)),
                y=alt.Y("value:Q", title=METRIC_TITLES.get(m, m), axis=alt.Axis(format="d", tickMinStep=1)),
                tooltip=[alt.Tooltip(f"{param}:O"), alt.Tooltip("value:Q", title=METRIC_TITLES.get(m, m))])
        .properties(height=220, width=width)
        for m in metrics]
    return alt.hconcat(*panels, data=df, spacing=24).resolve_scale(y="independent")


def zero_metrics(rows: Sequence[dict[str, Any]], metrics: Sequence[str]) -> list[str]:
    """The metrics that are 0 (or missing) under every valid setting: said in words, not drawn."""
    valid = [r for r in rows if r.get("error") is None]
    return [m for m in metrics if valid and all(not r.get(m) for r in valid)]


def _values(values: list[Any]) -> list[Any]:
    """Swept values for an axis: numbers stay numbers; with an unset limit among them, all become
    labels and None reads as the dashboard's one word for it ("no limit")."""
    from loopledger.analysis.explain import param_value

    if all(v is not None and not (isinstance(v, float) and pd.isna(v)) for v in values):
        return values
    return [param_value(None if v is None or (isinstance(v, float) and pd.isna(v)) else int(v)) for v in values]


def _rank(values: Sequence[Any]) -> list[int | None]:
    """Dense rank of each value (None stays None): colour by rank so one extreme setting cannot
    take the whole colour scale and the middle settings still differ in colour."""
    order = {v: i for i, v in enumerate(sorted({v for v in values if v is not None}))}
    return [order.get(v) if v is not None else None for v in values]


def grid_heatmap(rows: Sequence[dict[str, Any]], param: str, param2: str, metric: str = "halts") -> alt.LayerChart:
    """Two swept parameters → a heatmap of one metric, its value written in every cell.

    Colour follows the value's rank among the cells (the legend would lie, so there is none:
    the numbers are in the cells); a cell's `link` (when rows carry one) opens Replay.
    """
    cols = [param, param2, metric, "link"]
    df = pd.DataFrame([{c: r.get(c) for c in cols} for r in rows if r.get("error") is None], columns=cols)
    df[param] = _values(list(df[param]))
    df[param2] = _values(list(df[param2]))
    df["rank"] = _rank(list(df[metric]))
    top = max((x for x in df["rank"] if x is not None), default=0)
    df["dark"] = [r is not None and top > 0 and r > top * 0.6 for r in df["rank"]]
    n1, n2 = df[param].nunique(), df[param2].nunique()
    base = alt.Chart(df).encode(
        x=alt.X(f"{param}:O", sort=list(dict.fromkeys(df[param])), axis=alt.Axis(labelAngle=0)),
        y=alt.Y(f"{param2}:O", sort=list(dict.fromkeys(df[param2]))),
        tooltip=[f"{param}:O", f"{param2}:O", f"{metric}:Q"],
    )
    # Halts in reds (red means halt on every page); any other measure in blues.
    scheme = "reds" if metric in ("halts", "halted_runs") else "blues"
    rect = base.mark_rect(cursor="pointer").encode(
        color=alt.Color("rank:O", scale=alt.Scale(scheme=scheme), legend=None), href=alt.Href("link:N"))
    text = base.mark_text(fontSize=12).encode(
        text=alt.Text(f"{metric}:Q", format="d"),
        color=alt.condition(alt.datum.dark, alt.value("white"), alt.value("#212529")), href=alt.Href("link:N"))
    return alt.layer(rect, text).properties(title=metric, width=max(200, 52 * n1), height=max(120, 30 * n2))


def first_halt_heatmap(rows: Sequence[dict[str, Any]], settings_order: Sequence[str]) -> alt.LayerChart:
    """Sessions × settings coloured by the call (#N over the session, as every page numbers calls)
    of the first halt; never-halted cells grey.

    `rows`: session_id, setting (a short label), first_halt_at (the call), first_halt_seq (its
    step, in the tooltip), link (Replay at that halt). Sized by the data: one band per session and
    per setting, so 64 sessions are 64 readable rows and a few settings are not stretched into a
    strip; call numbers are written in the cells when they fit, dark on the light end of the
    colour scale and white on the dark end, so every number reads.
    """
    df = pd.DataFrame(list(rows), columns=["session_id", "setting", "first_halt_at", "first_halt_seq", "link"])
    df["halted"] = df["first_halt_at"].notna()
    df["call"] = [f"#{int(v)}" if pd.notna(v) else "" for v in df["first_halt_at"]]
    df["first halt"] = [f"call #{int(v)}" if pd.notna(v) and pd.notna(s) else "never"  # not null; one number
                        for v, s in zip(df["first_halt_at"], df["first_halt_seq"], strict=True)]
    calls = [float(v) for v in df["first_halt_at"] if pd.notna(v)]
    lo, hi = (min(calls), max(calls)) if calls else (0.0, 1.0)
    # viridis runs from dark purple (low) to yellow (high): the upper part takes dark text.
    df["light"] = [pd.notna(v) and hi > lo and (float(v) - lo) / (hi - lo) > LIGHT_FROM for v in df["first_halt_at"]]
    n_settings = max(1, len(settings_order))
    cell_w = max(34, min(90, 900 // n_settings))
    base = alt.Chart(df).encode(
        x=alt.X("setting:N", sort=list(settings_order), title="setting",
                axis=alt.Axis(labelAngle=-30 if n_settings > 6 else 0, labelLimit=160, orient="top")),
        y=alt.Y("session_id:N", title="session", sort="ascending", axis=alt.Axis(labelOverlap=False)),
        tooltip=[alt.Tooltip("session_id:N", title="session"), "setting:N", alt.Tooltip("first halt:N")],
        href=alt.Href("link:N"),
    )
    never = base.transform_filter(alt.datum.halted == False).mark_rect(color="#eceff1", cursor="pointer")  # noqa: E712
    halted = base.transform_filter(alt.datum.halted == True).mark_rect(cursor="pointer").encode(  # noqa: E712
        color=alt.Color("first_halt_at:Q", title="first halt at call #", scale=alt.Scale(scheme="viridis")))
    layers = [never, halted]
    if cell_w >= 34:
        layers.append(base.transform_filter(alt.datum.halted == True).mark_text(fontSize=10)  # noqa: E712
                      .encode(text="call:N", color=alt.condition(alt.datum.light, alt.value("#212529"),
                                                                 alt.value("white"))))
    return alt.layer(*layers).properties(width=alt.Step(cell_w), height=alt.Step(18))


LIGHT_FROM = 0.55  # from here up, viridis is light enough (green to yellow) for dark text


def pr_chart(scores: pd.DataFrame) -> alt.LayerChart:
    """Each setting as a point on precision (y) against recall (x). Settings on the same point
    share one label ("halt_at=3, 4, 5"), written below the point near the top edge, so labels
    never overprint or leave the chart. `scores`: app.score_table.score_rows (policy = the
    setting's short name; precision and recall as text, "—" for none)."""
    pts: dict[tuple[float, float], list[str]] = {}
    for r in scores.itertuples(index=False):
        try:
            key = (float(r.recall), float(r.precision))
        except (TypeError, ValueError):
            continue  # "—": nothing to place
        pts.setdefault(key, []).append(str(r.policy))
    df = pd.DataFrame([{"recall": x, "precision": y, "settings": point_label(names), "n": len(names),
                        "dy": 12 if y > 0.9 else -10} for (x, y), names in pts.items()],
                      columns=["recall", "precision", "settings", "n", "dy"])
    base = alt.Chart(df).encode(
        x=alt.X("recall:Q", scale=alt.Scale(domain=[0, 1.05]), title="recall (of loop sessions)"),
        y=alt.Y("precision:Q", scale=alt.Scale(domain=[0, 1.05]), title="precision (of sessions halted)"),
    )
    points = base.mark_point(filled=True, size=80).encode(
        size=alt.Size("n:Q", legend=None, scale=alt.Scale(range=[80, 240])),
        tooltip=[alt.Tooltip("settings:N"), "precision:Q", "recall:Q", alt.Tooltip("n:Q", title="settings here")])
    below = base.transform_filter(alt.datum.dy > 0).mark_text(align="center", dy=16, fontSize=11, limit=260) \
        .encode(text="settings:N")
    above = base.transform_filter(alt.datum.dy < 0).mark_text(align="left", dx=8, dy=-8, fontSize=11, limit=260) \
        .encode(text="settings:N")
    return alt.layer(points, below, above).properties(height=320, width=520)


def point_label(names: Sequence[str]) -> str:
    """The settings on one point as one label: "halt_at=3, 4, 5" when they differ in one value of
    the same parameter, else their names joined ("a · b"), and "(+N more)" past four."""
    names = list(dict.fromkeys(names))
    parts = [n.partition("=") for n in names]
    if len(names) > 1 and all(sep and head == parts[0][0] for head, sep, _ in parts):
        text = f"{parts[0][0]}=" + ", ".join(tail for _, _, tail in parts[:6])
        return text + (f" (+{len(names) - 6} more)" if len(names) > 6 else "")
    return " · ".join(names[:4]) + (f" (+{len(names) - 4} more)" if len(names) > 4 else "")
