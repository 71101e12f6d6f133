"""The Session page's pure helpers: halted-run navigation, the runs × policies table, the
timeline's "why" column, the transcript excerpt's ranges. No Streamlit, no database."""

from __future__ import annotations

import bisect
from collections.abc import Sequence
from typing import Any
from urllib.parse import urlencode

import pandas as pd
from loopledger import vocab
from loopledger.analysis import explain, scoring
from loopledger.app import when
from loopledger.app.replay_view import replay_link  # noqa: F401  (one link builder for every page)
from loopledger.ledger import read


def halted_by(halts: pd.DataFrame) -> dict[int, list[str]]:
    """run → the detectors that halted it (in the order they halted)."""
    out: dict[int, list[str]] = {}
    for run, det in zip(halts["run_idx"], halts["detector"], strict=True):
        names = out.setdefault(int(run), [])
        if det not in names:
            names.append(det)
    return out


def most_halted_run(halts: pd.DataFrame) -> int | None:
    """The run the most policies halted (the earliest on a tie), or None."""
    by = halted_by(halts)
    if not by:
        return None
    return min(by, key=lambda r: (-len(by[r]), r))


def run_choice(run: int, by_run: dict[int, list[str]]) -> str:
    """The run picker's text: halted runs say who halted them."""
    names = by_run.get(run)
    return f"{explain.run_ref(run)} — halted by {', '.join(names)}" if names else explain.run_ref(run)


def neighbours(halted: Sequence[int], run: int) -> tuple[int | None, int | None]:
    """The halted runs just before and just after `run` (None at either end)."""
    i = bisect.bisect_left(halted, run)
    prev = halted[i - 1] if i > 0 else None
    j = bisect.bisect_right(halted, run)
    nxt = halted[j] if j < len(halted) else None
    return prev, nxt


def where_to(run: int | None, other: tuple[int, int] | None) -> str:
    """The help of a previous/next halted run button: where it goes."""
    if run is not None:
        return explain.run_ref(run)
    if other is not None:
        return f"no more halted runs here: session #{other[0]}, {explain.run_ref(other[1])}"
    return "no other halted run"


def outcome_matrix(long: pd.DataFrame, halts: pd.DataFrame) -> pd.DataFrame:
    """Runs × policies with a "halted by" column up front; the policies that halted something
    first (most halts first), so the halting guards are never off-screen."""
    wide = read.outcome_matrix(long)
    if long.empty:
        return wide.assign(**{"halted by": pd.Series(dtype=str)})
    counts = long[long["outcome"] == vocab.HALTED].groupby("policy").size()
    pols = [c for c in wide.columns if c not in ("run", "calls")]
    pols.sort(key=lambda p: (-int(counts.get(p, 0)), p))
    by = halted_by(halts)
    wide.insert(1, "halted by", [", ".join(by.get(int(r), [])) for r in wide["run"]])
    return wide[["run", "halted by", "calls", *pols]]


def with_why(tl: pd.DataFrame) -> pd.DataFrame:
    """The timeline rows with a `why` sentence on every check that said more than allow."""
    out = tl.copy()
    loud = out["verdict"].isin([vocab.WARN, vocab.BLOCK, vocab.HALT])
    out["why"] = ""
    if loud.any():
        sub = out[loud]
        args = sub["args"] if "args" in sub else [None] * len(sub)
        out.loc[loud, "why"] = [
            explain.sentence(d, v, c, t, th, r, explain.tool_words(tool, a) if tool != read.PROSE_TOOL else "")
            for d, v, c, t, th, r, tool, a in zip(sub["detector"], sub["verdict"], sub["count"], sub["total"],
                                                  sub["threshold"], sub["reason"], sub["tool"], args, strict=True)]
    return out


def number_timeline(tl: pd.DataFrame, before: int) -> pd.DataFrame:
    """Timeline rows (read.timeline) with `call`: "call #N" over the session for a call's checks
    ("" for a prose turn's), and `at`, where the chart draws it: N for a call, half-way to the next
    call for a prose turn (N.5 after call #N). `before`: the calls before the first step drawn.
    Every call of the drawn steps has checks (batch-level ones are spread over each call of their
    batch)."""
    out = tl.copy()
    is_call = out["tool"] != read.PROSE_TOOL
    keys = sorted({(int(s), int(i)) for s, i in zip(out["seq"][is_call], out["idx"][is_call], strict=True)})
    n = {k: before + i + 1 for i, k in enumerate(keys)}
    call_seqs = [k[0] for k in keys]
    out["call"] = [f"call #{n[(int(s), int(i))]}" if c else "" for s, i, c in zip(out["seq"], out["idx"], is_call,
                                                                                   strict=True)]
    out["at"] = [float(n[(int(s), int(i))]) if c else before + bisect.bisect_left(call_seqs, int(s)) + 0.5
                 for s, i, c in zip(out["seq"], out["idx"], is_call, strict=True)]
    return out


def verdict_notes(tl: pd.DataFrame) -> dict[tuple[int, int], str]:
    """(seq, idx) → "detector verdict: why; …" for every check that said more than allow."""
    rows = tl if "why" in tl else with_why(tl)
    loud = rows[rows["verdict"].isin([vocab.WARN, vocab.BLOCK, vocab.HALT])]
    notes: dict[tuple[int, int], list[str]] = {}
    for seq, idx, det, verdict, why in zip(loud["seq"], loud["idx"], loud["detector"], loud["verdict"], loud["why"],
                                           strict=True):
        notes.setdefault((int(seq), int(idx)), []).append(f"{det} {verdict}: {why}")
    return {k: "; ".join(v) for k, v in notes.items()}


def picked_mark(event: Any) -> tuple[int, int] | None:
    """(seq, run) of the timeline mark a person clicked, from st.altair_chart's selection event."""
    try:
        points = event["selection"]["mark_pick"]
    except (KeyError, TypeError):
        return None
    if isinstance(points, dict):  # some versions give {field: [values]}
        seqs, runs = points.get("seq") or [], points.get("run_idx") or []
        points = [{"seq": s, "run_idx": r} for s, r in zip(seqs, runs, strict=False)]
    if not points:
        return None
    p = points[-1]
    try:
        return int(p["seq"]), int(p["run_idx"])
    except (KeyError, TypeError, ValueError):
        return None


CALL_LINKS_HELP = ("Every call this verdict rests on, by its number over the whole session (as labels and the "
                   "leaderboard count calls); a link opens that call's run at its step.")


def call_links(sid: int, calls: Sequence[tuple[int, int]], numbers: dict[tuple[int, int], tuple[int, int]],
               run: int, limit: int = 24) -> str:
    """Markdown links to each call ("[call #4 (run #3)](./session?…) · [call #7](…)"), built from
    numbers only, so it carries no transcript text. Calls of another run say their run."""
    parts = []
    for seq, idx in calls[-limit:]:
        n, r = numbers.get((seq, max(idx, 0)), (None, run))
        name = f"call #{n}" if n is not None else f"step {seq}"
        q = urlencode({"session": int(sid), "run": int(r), "step": int(seq)})
        parts.append(f"[{name}{f' ({explain.run_ref(r)})' if r != run else ''}](./session?{q})")
    more = len(calls) - limit
    return " · ".join(parts) + (f" (and {more} earlier)" if more > 0 else "")


def number_calls(rows: pd.DataFrame, before: int) -> pd.DataFrame:
    """Transcript rows (read.transcript) with `n`, each call's 1-based number over the session,
    given how many calls came before the first row's step."""
    out = rows.copy()
    is_call = (out["kind"] == vocab.KIND_BATCH) & out["idx"].notna() if len(out) else pd.Series(dtype=bool)
    out["n"] = (is_call.cumsum() + before).where(is_call) if len(out) else pd.Series(dtype=float)
    return out


def call_rows(df: pd.DataFrame) -> list[explain.CallRow]:
    return [explain.CallRow(int(s), int(i), t, a, b if isinstance(b, str) else None)
            for s, i, t, a, b in zip(df["seq"], df["idx"], df["tool"], df["args_hash"], df["answer_hash"], strict=True)]


def shown_calls(rows: pd.DataFrame) -> list[explain.CallRow]:
    """The calls among transcript rows (read.transcript), in order, as the identical marks need them."""
    calls = rows[(rows["kind"] == vocab.KIND_BATCH) & rows["idx"].notna()] if len(rows) else rows
    return call_rows(calls) if len(calls) else []


def excerpt_ranges(start: int, end: int, limit: int) -> list[tuple[int, int]]:
    """[start, end] if it holds at most `limit` steps, else its first and last limit/2 steps."""
    if end - start + 1 <= limit:
        return [(start, end)]
    half = limit // 2
    return [(start, start + half - 1), (end - half + 1, end)]


def join_excerpts(frames: Sequence[pd.DataFrame], ranges: Sequence[tuple[int, int]]) -> pd.DataFrame:
    """The excerpts one after another, a `gap` row (seq = steps left out) between them."""
    parts = []
    for i, df in enumerate(frames):
        if i:
            gap = ranges[i][0] - ranges[i - 1][1] - 1
            parts.append(pd.DataFrame([{"seq": gap, "kind": "gap"}], columns=df.columns))
        parts.append(df)
    return pd.concat(parts, ignore_index=True) if len(parts) > 1 else (parts[0] if parts else pd.DataFrame())


ENDING_WORDS = {"success": "succeeded", "submitted": "submitted", "failure": "failed"}


def ending_text(head: dict, run: int | None = None) -> str:
    """How the transcript says the session ended ("Ended: succeeded — reward 1.0 (run #4)"), or ""."""
    status = head.get("outcome")
    if not status:
        return ""
    if run is not None and head.get("outcome_run") is not None and int(head["outcome_run"]) != run:
        return ""
    detail = head.get("outcome_detail") or ""
    where = f" ({explain.run_ref(head['outcome_run'])})" if head.get("outcome_run") is not None and run is None else ""
    return f"Ended: {ENDING_WORDS.get(status, status)}" + (f" — {detail}" if detail else "") + where


def label_rows(labels: pd.DataFrame) -> pd.DataFrame:
    """A session's label (read.run_labels) for people: the run it was given from ("whole session",
    never -1; "run #N" counted from 1), its loop calls as FIRST-LAST, who, and when in the dashboard's one time format."""
    return pd.DataFrame({
        "label": labels["label"],
        "given from": ["whole session" if int(r) == -1 else explain.run_ref(r) for r in labels["run_idx"]],
        "loop calls": [scoring.format_loop_calls(_opt(a), _opt(b)) or when.MISSING
                       for a, b in zip(labels["loop_first"], labels["loop_last"], strict=True)],
        "reason": [n if isinstance(n, str) and n else when.MISSING for n in labels["note"]],
        "labelled by": [_who(u, b) for u, b in zip(labels.get("by_user", labels["labelled_by"]),
                                                   labels["labelled_by"], strict=True)],
        "labelled": when.moments(labels["created_at"]),
    })


def _who(user: Any, how: Any) -> str:
    """The person who labelled (an email, a local user) and how (dashboard, imported)."""
    how = how if isinstance(how, str) and how else ""
    if isinstance(user, str) and user and user != how:
        return f"{user} ({how})" if how else user
    return how or when.MISSING


def _opt(v: Any) -> int | None:
    return None if v is None or (isinstance(v, float) and pd.isna(v)) else int(v)
