"""The dashboard's one way to write a moment and a missing value: "2026-11-30 14:02 UTC" and "—".

The ledger holds times as the transcripts wrote them (ISO 8601 text, with or without a zone) and as
epoch seconds (labels, ingest, live decisions); pages pass every one of them through `moment` so a
person reads one format everywhere, never an epoch float or a literal None.
"""

from __future__ import annotations

import datetime as dt
import math
from typing import Any

import pandas as pd

MISSING = "—"
FORMAT = "%Y-%m-%d %H:%M UTC"


def _missing(value: Any) -> bool:
    if value is None or value is pd.NaT:
        return True
    if isinstance(value, float) and math.isnan(value):
        return True
    return isinstance(value, str) and not value.strip()


def moment(value: Any) -> str:
    """Epoch seconds, an ISO 8601 string, a datetime or a pandas Timestamp → "YYYY-MM-DD HH:MM UTC"
    (a time without a zone is taken as UTC); missing → "—"; text that is no time is returned as is."""
    if _missing(value):
        return MISSING
    try:
        if isinstance(value, bool):
            return str(value)
        if isinstance(value, int | float):
            t = dt.datetime.fromtimestamp(float(value), dt.UTC)
        elif isinstance(value, dt.datetime):
            t = value
        else:
            t = dt.datetime.fromisoformat(str(value).strip().replace("Z", "+00:00"))
    except (ValueError, OverflowError, OSError):
        return str(value)
    if t.tzinfo is None:
        t = t.replace(tzinfo=dt.UTC)
    return t.astimezone(dt.UTC).strftime(FORMAT)


def moments(values: Any) -> list[str]:
    return [moment(v) for v in values]


def number(value: Any, fmt: str = "{:.2f}") -> str:
    """A number that may be missing (precision with nothing flagged, a median of no catches): "—"."""
    if _missing(value):
        return MISSING
    try:
        return fmt.format(value)
    except (TypeError, ValueError):
        return str(value)
