"""The dashboard's words for what it shows: a column or measure as a person names it (never the
read model's `halted_runs`, `last_ingest`, `false_halts`), a source path as a person reads it,
and the browser tab's title. Pure, except `tab_title`, which sets the page's config."""

from __future__ import annotations

import os

import streamlit as st

# Column and measure names of the read model and the scoring rule → their titles on screen.
TITLES = {
    "halted_runs": "halted runs", "sessions_halted": "sessions halted", "last_ingest": "last ingest",
    "false_halts": "false halts", "false_halt": "false halt", "into_loop": "calls into the loop",
    "started_at": "started", "saved": "calls saved", "calls_saved": "calls saved", "session_id": "session",
    "run_idx": "run", "policy_id": "policy id", "loop_calls": "loop calls", "labelled_at": "labelled",
    "labelled_by": "labelled by", "n_calls": "calls", "created_at": "created",
}


def title(name: str) -> str:
    """`halted_runs` → "halted runs": a known name's title, else its underscores as spaces."""
    return TITLES.get(name, name.replace("_", " "))


def column_titles(names) -> dict[str, str]:
    """name → title for every name that needs one (st.dataframe's column_config takes plain strings)."""
    return {n: title(n) for n in names if title(n) != n}


def shown_path(path: str | None) -> str:
    """A source path as a person reads it: `/work/main/../shared/corpus/x.jsonl` →
    `/work/shared/corpus/x.jsonl` (normalised lexically, as stored paths may come from a relative
    argument; the ledger keeps the path it was given)."""
    if not isinstance(path, str) or not path:
        return "" if path is None or not isinstance(path, str) else path
    if "://" in path or path.startswith("live:"):  # a live session's source or a URL: not a file path
        return path
    return os.path.normpath(path)


def tab_title(text: str) -> None:
    """The browser tab names the page and what it shows ("Session #18 · LoopLedger", "Replay
    #18 run #1 · LoopLedger"), so a person with several tabs open finds the one they want."""
    st.set_page_config(page_title=f"{text} · LoopLedger")
