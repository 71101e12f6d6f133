"""What a file's ingest asks the ledger before computing, and the claim's row: a file read whole
is computed from its source row alone (no query), and a claim makes the row when none is there."""

from __future__ import annotations

import itertools
from pathlib import Path

from loopledger import file_ingest, worker
from loopledger.changes import STATUS_ERROR, STATUS_MISSING, STATUS_OK, STATUS_QUARANTINED, decide, scan
from loopledger.ledger import migrate
from loopledger.ledger import schema as s
from loopledger.ledger.engine import make_engine
from sqlalchemy import event, func, select, update

from bench.gen_chat import write_corpus


def _row(**kw):
    row = {"id": 1, "byte_offset": 0, "content_hash": None, "status": "new", "size": 0, "mtime": None}
    row.update(kw)
    return row


def test_read_whole_rows_are_never_appended_nor_truncated(tmp_path):
    """read_whole(row) promises that decide() reads the file whole: the stored keys, checkpoint
    and resume point it skips are used by appends (and truncations) only."""
    (f,) = write_corpus(tmp_path, 1, 20, seed=3)
    size = f.stat().st_size
    sc = scan(f, 0)
    hashes = (None, sc.full_hash, scan(f, size // 2).prefix_hash)
    for status, offset, h, stored_size in itertools.product(
            ("new", STATUS_OK, STATUS_QUARANTINED, STATUS_ERROR, STATUS_MISSING, "truncated"),
            (0, size // 2, size, size + 10), hashes, (0, size // 2, size)):
        row = _row(status=status, byte_offset=offset, content_hash=h, size=stored_size, mtime=None)
        if file_ingest.read_whole(row):
            assert decide(row, scan(f, offset)) in ("new", "rewritten"), row
    assert file_ingest.read_whole(None) and file_ingest.read_whole({"id": None})
    assert not file_ingest.read_whole(_row(status=STATUS_OK, byte_offset=10))


def _statements(engine):
    seen: list[str] = []
    event.listen(engine, "before_cursor_execute",
                 lambda conn, cur, stmt, params, ctx, many: seen.append(" ".join(stmt.split())))
    return seen


def test_new_file_computed_without_reading_the_ledger(fresh_db, tmp_path):
    """A first ingest: no read of stored session keys, no read transaction before the claim."""
    files = write_corpus(tmp_path / "c", 2, 30, seed=4)
    engine = make_engine(fresh_db)
    migrate.upgrade(engine)
    seen = _statements(engine)
    totals = worker.ingest_paths(engine, [tmp_path / "c"], worker.Options())
    assert totals.changed == 2 and not totals.errors
    assert not [q for q in seen if q.startswith('SELECT sessions."key"')]
    # An append does read them (and resumes from the checkpoint).
    with open(files[0], "ab") as fh:
        fh.write(Path(files[1]).read_bytes().split(b"\n", 1)[1])
    seen.clear()
    r = file_ingest.ingest_file(engine, files[0], worker.Options())
    assert r.action == "appended"
    assert [q for q in seen if q.startswith('SELECT sessions."key"')]


def test_error_row_is_read_whole_again(fresh_db, tmp_path):
    """A file recorded as failed is read whole on the next ingest, as before (no stored state asked)."""
    (f,) = write_corpus(tmp_path / "c", 1, 30, seed=5)
    engine = make_engine(fresh_db)
    migrate.upgrade(engine)
    opts = worker.Options()
    first = file_ingest.ingest_file(engine, f, opts)
    with engine.begin() as conn:
        before = conn.execute(select(func.count()).select_from(s.calls)).scalar_one()
        conn.execute(update(s.sources).values(status=STATUS_ERROR, error="x"))
    again = file_ingest.ingest_file(engine, f, opts)
    assert (first.action, again.action) == ("new", "new") and first.calls == again.calls
    with engine.connect() as conn:
        assert conn.execute(select(func.count()).select_from(s.calls)).scalar_one() == before
        assert conn.execute(select(s.sources.c.status)).scalar_one() == STATUS_OK


def test_claim_makes_the_row_when_missing_and_claims_an_existing_one(fresh_db):
    engine = make_engine(fresh_db)
    migrate.upgrade(engine)
    with engine.begin() as conn:
        row = file_ingest.claim(conn, "/no/such/row", "w1")
        assert row is not None and row["claimed_by"] == "w1" and row["status"] == "new"
    with engine.begin() as conn:
        again = file_ingest.claim(conn, "/no/such/row", "w2")
        assert again is not None and again["id"] == row["id"] and again["claimed_by"] == "w2"
        assert conn.execute(select(func.count()).select_from(s.sources)).scalar_one() == 1
