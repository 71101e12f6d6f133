"""Helpers shared by the dashboard's AppTest tests (not a test module)."""

from __future__ import annotations

import json
import os
from contextlib import contextmanager
from pathlib import Path

import pandas as pd
from streamlit.dataframe_util import convert_arrow_bytes_to_pandas_df
from streamlit.testing.v1 import AppTest

from bench.gen_ledger import generate

MAIN = Path(__file__).resolve().parent.parent / "app" / "main.py"
TIMEOUT = 60  # a loaded CI machine can be slow; no test asserts on time


@contextmanager
def ledger_env(url: str):
    old = os.environ.get("LOOPLEDGER_DATABASE_URL")
    os.environ["LOOPLEDGER_DATABASE_URL"] = url
    try:
        yield url
    finally:
        if old is None:
            os.environ.pop("LOOPLEDGER_DATABASE_URL", None)
        else:
            os.environ["LOOPLEDGER_DATABASE_URL"] = old


def make_ledger(path: Path, sessions: int = 60, calls: int = 4000) -> tuple[str, dict]:
    url = f"sqlite:///{path}"
    return url, generate(url, sessions=sessions, calls=calls, seed=5, hostile=True)


def app(page: str | None = None, **params: str) -> AppTest:
    """Run main.py (the Sessions page), then switch to `page` with query params, and run it."""
    at = AppTest.from_file(str(MAIN), default_timeout=TIMEOUT).run()
    assert not at.exception, at.exception
    if page:
        for k, v in params.items():
            at.query_params[k] = v
        at.switch_page(page).run()
    return at


def charts(at: AppTest) -> list[tuple[dict, pd.DataFrame]]:
    """Each Vega-Lite chart on the page: its spec and all its datasets' rows as one DataFrame."""
    out = []
    for el in at.get("vega_lite_chart"):
        spec = json.loads(el.proto.spec)
        frames = [convert_arrow_bytes_to_pandas_df(d.data.data) for d in el.proto.datasets]
        out.append((spec, pd.concat(frames, ignore_index=True) if frames else pd.DataFrame()))
    return out


def units(spec: dict) -> list[dict]:
    """The single-view specs inside a (possibly concatenated) chart spec."""
    return spec.get("vconcat", [spec])


def metrics(at: AppTest) -> dict[str, str]:
    return {m.label: m.value for m in at.metric}


def markdown_texts(at: AppTest) -> list[str]:
    """Everything Streamlit would render as markdown: none of it may carry transcript text."""
    out = []
    for kind in ("markdown", "caption", "header", "subheader", "title", "info", "error", "success", "warning"):
        out += [str(e.value) for e in at.get(kind)]
    for kind in ("selectbox", "multiselect", "radio", "text_input", "number_input", "button", "toggle"):
        out += [str(getattr(e, "label", "")) for e in at.get(kind)]
    return out


def plain_texts(at: AppTest) -> list[str]:
    return [str(e.value) for e in at.text] + [str(e.value) for e in at.code]


def read_model(url: str, name: str, *args):
    """Call loopledger.ledger.read.<name>(conn, *args) on a fresh read-only engine: the expected side
    of a page assertion, computed straight from the read model."""
    from loopledger.ledger import read
    from loopledger.ledger.engine import make_engine

    eng = make_engine(url, readonly=True)
    try:
        with eng.connect() as conn:
            return getattr(read, name)(conn, *args)
    finally:
        eng.dispose()
