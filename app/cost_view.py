"""What loops cost, on the Sessions and Session pages: spend, and what each policy's halts would
have saved (tokens, dollars, wall time). Numbers come formatted from loopledger.analysis.pricing
and read_cost.saved_text: an unknown spend reads "unknown", never 0."""

from __future__ import annotations

import pandas as pd
import streamlit as st
from loopledger.analysis import explain, pricing
from loopledger.app import charts_cost, data, safe, when
from loopledger.ledger import read, read_cost

SAVED_HELP = ("Spend after the halt in each halted run: the model turns the agent took after the guard would "
              "have stopped it (a halt ends its run; the next prompt starts fresh).")


def saved_frame(frame: pd.DataFrame) -> pd.DataFrame:
    """saved_by_policy rows as text for people (pure)."""
    rows = []
    for _, r in frame.iterrows():
        tokens, usd = read_cost.saved_text(r)
        rows.append({"policy": r["policy"], "halted runs": int(r["halted_runs"]), "calls saved": int(r["calls_saved"]),
                     "tokens saved": tokens, "$ saved": usd,
                     "time in loops": pricing.seconds_text(r["loop_seconds"]) if r["halted_runs"] else "0s"})
    return pd.DataFrame(rows, columns=["policy", "halted runs", "calls saved", "tokens saved", "$ saved",
                                       "time in loops"])


def _prices_caption(versions: list[str]) -> str:
    return ("Prices: " + ", ".join(versions) + " (offline table, at each turn's date; cache reads and writes "
            "priced as the provider prices them).") if versions else "No turn could be priced."


def sessions_cost(f: read.SessionFilter) -> None:
    total = data.cost("total_spend", f)
    c = st.columns(3)
    c[0].metric("Spend", pricing.usd_text(total["usd"], total["unpriced"] or total["no_usage"]),
                help="what the model turns of the matching sessions cost, where their transcripts report usage")
    c[1].metric("Tokens", pricing.tokens_text(total["tokens"], total["turns"]) if total["turns"] else pricing.UNKNOWN,
                help="input (cache reads and writes included) plus output tokens")
    c[2].metric("Sessions without usage", f"{total['no_usage']:,}",
                help="their transcripts report no token usage: their spend is unknown")
    with st.expander("What the loops cost: spend saved per policy", expanded=False):
        safe.table(saved_frame(data.cost("saved_by_policy", f)), key="cost_saved")
        st.caption(SAVED_HELP + " " + _prices_caption(total["priced_with"]))


def _run_frame(runs: pd.DataFrame) -> pd.DataFrame:
    return pd.DataFrame({"run": [explain.run_ref(r) for r in runs["run_idx"]], "model turns": runs["turns"],
                         "tokens": [pricing.tokens_text(x) for x in runs["tokens"]],
                         "spend": [pricing.usd_text(u, n) for u, n in zip(runs["usd"], runs["unpriced"], strict=True)]})


def _count(v) -> str:
    """A token count as the page writes numbers; "—" when the transcript does not say (never None)."""
    return when.MISSING if v is None or v != v else f"{int(v):,}"


def _turn_frame(turns: pd.DataFrame) -> pd.DataFrame:
    # Calls by their one number (a model turn with no call: "—"); no step beside it.
    return pd.DataFrame({
        "call #": [("—" if c is None or c != c else f"#{int(c)}") for c in turns["call"]],
        "run": [explain.run_ref(r) for r in turns["run_idx"]],
        "model": turns["model"].fillna("unknown"),
        **{name: [_count(v) for v in turns[col]] for name, col in (
            ("input", "input_tokens"), ("cache reads", "cache_read_tokens"), ("cache writes", "cache_write_tokens"),
            ("output", "output_tokens"))},
        "spend": [pricing.usd_text(u) for u in turns["usd"]],
        "why unpriced": turns["price_note"].fillna("")})


def session_cost(sid: int, run: int | None = None, run_halts: pd.DataFrame | None = None,
                 bounds: tuple[int, int] | None = None) -> None:
    st.subheader("What it cost")
    runs = data.cost("run_spend", sid)
    if runs.empty:
        st.caption("This transcript reports no token usage: its spend is unknown.")
        return
    usd = runs["usd"].dropna()
    unpriced = int(runs["unpriced"].sum())
    c = st.columns(3)
    c[0].metric("Spend", pricing.usd_text(float(usd.sum()) if len(usd) else None, unpriced))
    c[1].metric("Tokens", pricing.tokens_text(int(runs["tokens"].sum())))
    c[2].metric("Model turns", int(runs["turns"].sum()))
    left, _ = st.columns([2, 3])
    with left:
        st.caption("Per run")
        safe.table(_run_frame(runs), key="cost_runs")
    # The whole width: a policy's name (its parameters) is long, and its numbers sit beside it.
    st.caption("Saved per policy (" + SAVED_HELP[0].lower() + SAVED_HELP[1:] + ")")
    safe.table(saved_frame(data.cost("saved_by_policy", session_id=sid)), key="cost_session_saved",
               column_config={"policy": st.column_config.TextColumn("policy", width="large")})
    turns = data.cost("turn_spend", sid)
    if run is not None and bounds is not None:
        mine = turns[turns["run_idx"] == run]
        halt = None
        if run_halts is not None and len(run_halts):
            first = run_halts.sort_values("halt_seq").iloc[0]
            halt = (int(first["halt_seq"]), str(first["policy"]))
        if len(mine):
            st.caption(f"{explain.run_ref(run).capitalize()}: tokens per model turn"
                       + (" — shaded: after the first halt" if halt else ""))
            st.altair_chart(charts_cost.spend_chart(charts_cost.spend_frame(mine), halt, bounds), key="cost_chart")
    with st.expander("Per model turn", expanded=False):
        safe.table(_turn_frame(turns), key="cost_turns")
        versions = sorted({v for v in turns["priced_with"] if isinstance(v, str)})
        st.caption(_prices_caption(versions))


def saved_spend_on_labelled() -> dict[str, tuple[str, str]]:
    """policy id → ("tokens saved", "$ saved") over the labelled sessions, as the leaderboard
    counts (read here; the table is built by a pure function: with_saved_spend)."""
    return {r["policy_id"]: read_cost.saved_text(r) for _, r in data.cost("saved_on_labelled").iterrows()}


def with_saved_spend(rows: pd.DataFrame, spend: dict[str, tuple[str, str]]) -> pd.DataFrame:
    """The leaderboard's rows with "tokens saved" and "$ saved" beside calls saved (pure); a
    policy without spend figures shows unknown."""
    if rows.empty or "policy_id" not in rows:
        return rows
    got = [spend.get(pid, (pricing.UNKNOWN, pricing.UNKNOWN)) for pid in rows["policy_id"]]
    at = list(rows.columns).index("saved") + 1 if "saved" in rows else len(rows.columns)
    rows = rows.copy()
    rows.insert(at, "tokens saved", [g[0] for g in got])
    rows.insert(at + 1, "$ saved", [g[1] for g in got])
    return rows


def add_sweep_spend(rows: list[dict], settings: list, session_ids: list[int]) -> None:
    """Compare's rows (one per setting) get "tokens saved" and "$ saved" beside calls saved: the
    spend after each replayed halt (pricing.spend_after), from the stored turns' usage."""
    turns, with_usage = data.cost("turns_of", tuple(session_ids))
    for r, s in zip(rows, settings, strict=True):
        if s.error is not None:
            r["tokens saved"] = r["$ saved"] = when.MISSING  # a skipped setting: no totals
            continue
        halts = [(sid, run, row.halt_seq) for (sid, run), row in s.runs.items() if row.halt_seq is not None]
        r["tokens saved"], r["$ saved"] = pricing.saved_texts(pricing.spend_after(halts, turns, set(with_usage)))
