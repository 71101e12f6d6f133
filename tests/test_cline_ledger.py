"""Cline task folders through the real worker into a real ledger (SQLite and PostgreSQL): one
source and one session per folder, retries stored as `retry` events that reload as Retry and
judge nothing, and a recheck from the ledger equal to the ingest."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from loopledger import formats, vocab, worker
from loopledger.events import Batch, Retry
from loopledger.ledger import migrate, schema, store
from loopledger.ledger.engine import make_engine
from loopledger.redact import redact_event
from loopledger.replay import replay, tally
from sqlalchemy import select

FIX = Path(__file__).parent / "fixtures" / "formats" / "cline"


@pytest.fixture
def engine(db_url):
    eng = make_engine(db_url)
    migrate.upgrade(eng)
    yield eng
    eng.dispose()


def test_task_folders_ingest_as_one_session_each(engine, tmp_path):
    root = tmp_path / "globalStorage"
    shutil.copytree(FIX, root)
    totals = worker.ingest_paths(engine, [root], worker.Options())
    assert totals.exit_code == 0
    with engine.connect() as conn:
        sources = [Path(p).name for p in conn.execute(select(schema.sources.c.path)).scalars()]
        sessions = {k: sid for sid, k in conn.execute(select(schema.sessions.c.id, schema.sessions.c.key))}
        assert sources == ["ui_messages.json"] * 3
        assert set(sessions) == {"1772614800000", "1772800000000", "0b9e6c1a-5f1e-4c55-9a3e-7d2c1b0a9f88"}
        kinds = list(conn.execute(select(schema.events.c.kind, schema.events.c.text)
                                  .where(schema.events.c.session_id == sessions["0b9e6c1a-5f1e-4c55-9a3e-7d2c1b0a9f88"])
                                  .order_by(schema.events.c.seq)))
        assert [k for k, _ in kinds].count(vocab.KIND_RETRY) == 2
        for key, sid in sessions.items():
            stored = store.load_events(conn, sid)
            unit = next(root.rglob(f"{key}/ui_messages.json"))
            read = [redact_event(e) for e in formats.read(unit) if not hasattr(e, "info")]
            assert stored == read, key  # Retry events round-trip with text, ts, line
            # a retry is never checked by any policy
            for spec in worker.Options().specs:
                steps = list(replay(stored, spec))
                assert all(not s.checks for s in steps if isinstance(s.event, Retry))
                n_calls = sum(len(e.calls) for e in stored if isinstance(e, Batch))
                assert tally(steps).totals()["calls"] == n_calls
