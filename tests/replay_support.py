"""Helpers for the Replay/Compare tests (not a test module): ledgers built by the real pipeline."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import sqlalchemy as sa
from loopledger import worker
from loopledger.detectors.policy import BUILTIN_SPECS
from loopledger.ledger import schema as t
from loopledger.ledger import store
from loopledger.ledger.engine import make_engine
from loopledger.ledger.migrate import upgrade

ROOT = Path(__file__).resolve().parent.parent
SAMPLE_DATA = ROOT / "sample_data"


def open_page(page: str, **params: str):
    """Open a page through main.py (st.navigation), with deep-link query params."""
    from streamlit.testing.v1 import AppTest

    at = AppTest.from_file(str(ROOT / "app" / "main.py"), default_timeout=60).run()
    for k, v in params.items():
        at.query_params[k] = v
    return at.switch_page(page).run()


def pipeline_ledger(db_path: Path, paths: list[Path] | None = None) -> str:
    """A SQLite ledger filled by the ingest worker (readers → replay → writer) from sample_data,
    with every built-in detector at its defaults stored (the default set is a subset of them)."""
    url = f"sqlite:///{db_path}"
    eng = make_engine(url)
    upgrade(eng)
    totals = worker.ingest_paths(eng, paths or [SAMPLE_DATA], worker.Options(specs=BUILTIN_SPECS))
    eng.dispose()
    assert totals.sessions > 0 and not totals.errors, totals
    return url


def ingest(url: str, paths: list[Path]) -> None:
    eng = make_engine(url)
    worker.ingest_paths(eng, paths, worker.Options(specs=BUILTIN_SPECS))
    eng.dispose()


def session_events(url: str) -> dict[int, list]:
    """Every session's events, rebuilt from the ledger as the pages rebuild them."""
    eng = make_engine(url, readonly=True)
    with eng.connect() as conn:
        out = {sid: store.load_events(conn, sid) for sid in store.session_ids(conn)}
    eng.dispose()
    return out


def runs_of(url: str, session_id: int) -> list[tuple[int, int, int]]:
    eng = make_engine(url, readonly=True)
    with eng.connect() as conn:
        rows = conn.execute(sa.select(t.runs.c.idx, t.runs.c.first_seq, t.runs.c.last_seq)
                            .where(t.runs.c.session_id == session_id).order_by(t.runs.c.idx)).all()
    eng.dispose()
    return [tuple(r) for r in rows]


def as_json(value) -> object:
    """What st.json shows for a value (tuples become lists)."""
    return json.loads(json.dumps(value, default=str))


def copy_head(src: Path, dst: Path, lines: int) -> None:
    """The first `lines` lines of a JSONL transcript: a session caught while still being written."""
    with src.open("rb") as fin, dst.open("wb") as fout:
        for i, line in enumerate(fin):
            if i >= lines:
                break
            fout.write(line)


def append_rest(src: Path, dst: Path, skip: int) -> None:
    with src.open("rb") as fin, dst.open("ab") as fout:
        for i, line in enumerate(fin):
            if i >= skip:
                fout.write(line)


__all__ = ["open_page", "pipeline_ledger", "ingest", "session_events", "runs_of", "as_json", "copy_head", "append_rest",
           "shutil"]
