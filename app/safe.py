"""The only ways transcript text reaches the screen: plain text, code blocks and data tables.

Transcript text (titles, paths, tool names, arguments, answers, prose) is untrusted. st.text,
st.code and st.dataframe show it verbatim and never interpret HTML or markdown, so a `<script>`
or a markdown image in an answer stays inert. Never pass it to st.markdown, st.write, st.caption,
headers or widget labels (they render markdown).
"""

from __future__ import annotations

from typing import Any

import pandas as pd
import streamlit as st

MAX_CHARS = 4000  # per block: the ledger caps texts already; this keeps one page light


def _cut(value: Any, limit: int = MAX_CHARS) -> str:
    s = "" if value is None or (isinstance(value, float) and pd.isna(value)) else str(value)
    return s if len(s) <= limit else s[:limit] + f"\n… ({len(s) - limit} more characters)"


def text(value: Any) -> None:
    st.text(_cut(value))


def code(value: Any, language: str | None = None) -> None:
    # language=None: no highlighting, shown verbatim in a monospace block.
    st.code(_cut(value), language=language, wrap_lines=True)


def table(df: pd.DataFrame, **kwargs: Any) -> Any:
    kwargs.setdefault("hide_index", True)
    return st.dataframe(df, **kwargs)


def clicked_row(event: Any) -> int | None:
    """The row a person clicked in a table drawn with selection_mode=["single-row", "single-cell"]:
    its checkbox (a row selection) or any of its cells (a cell selection), else None."""
    sel = getattr(event, "selection", None) if event is not None else None
    if sel is None:
        return None
    rows = list(sel.get("rows", []) if isinstance(sel, dict) else getattr(sel, "rows", []))
    if rows:
        return int(rows[0])
    cells = list(sel.get("cells", []) if isinstance(sel, dict) else getattr(sel, "cells", []))
    return int(cells[0][0]) if cells else None
