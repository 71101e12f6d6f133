"""The receiver's in-memory handoff (the writer gives the flusher the spans it just fsync'd, already
decoded and redacted) and its warm resume points: the rows equal those of the other path, the spool
replayed after a crash, and both equal `loopledger ingest` of an export file of the same spans that
the test writes itself (the expected rows never come from the receiver)."""

from __future__ import annotations

import json

import pytest
from loopledger import receive, worker
from loopledger.ledger import migrate
from loopledger.ledger.engine import make_engine
from test_receive import _served, calls_of, every_text, post, request, tool_span
from test_worker import dump

SECRET = "sk-ant-" + "Q" * 30
# Only the reader reveals this one: the argument string holds it JSON-escaped, so the spool's
# redaction of the request's strings cannot see it; the arguments parsed into a dict by the
# reader hold it plainly, and the flush's redaction of the events (kept for that) replaces it.
ESCAPED = "sk-ant-\\u0051" + "Q" * 29


def rounds() -> list[list[dict]]:
    """Requests as an exporter sends them: interleaved conversations, continued across requests,
    a span sorting before its session's last (a rewrite), secrets in a result and in arguments."""
    out = []
    for r in range(4):
        spans = [tool_span(f"conv-{c}", r * 3 + i, "run_tests" if i % 2 else "read_file",
                           json.dumps({"path": f"src/m{(r + i) % 3}.py"}), "1 failed" if c % 2 else "ok")
                 for c in range(3) for i in range(3)]
        out.append(spans)
    out.append([tool_span("conv-0", 20, "cat", '{"token": "' + ESCAPED + '"}', f"key {SECRET}"),
                tool_span("conv-1", 4.5, "cat", '{"f": "b.py"}', "B")])  # conv-1: sorts before its last
    out.append([tool_span("conv-2", 30 + i, "run_tests", '{"path": "tests"}', "1 failed") for i in range(4)])
    return out


def engine_at(url: str):
    engine = make_engine(url)
    migrate.upgrade(engine)
    return engine


def export_file(path, requests: list[list[dict]]) -> None:
    """The spans as a Collector file export, one span per line (as the spool cuts them, so line
    numbers agree), written here from the test's own requests."""
    lines = []
    for spans in requests:
        for sp in spans:
            lines.append(request([sp]).decode())
    path.write_text("\n".join(lines) + "\n")


# warm 1: most sessions continue from the ledger's snapshot (out of the warm LRU); hand_bytes: what
# the writer may leave handed over, 1 byte: nothing handed, every span read back from the spool;
# 2,500: a 9-span request is not handed, a 2- or 4-span one is (the flush reads across the gaps).
# live 1: one live point a flush at most, the other sessions unseal their snapshot.
@pytest.mark.parametrize(("warm", "hand_bytes", "live_points"), [(256, None, 128), (1, None, 128), (256, None, 1),
                                                          (256, 1, 128), (256, 2500, 128)])
def test_handoff_and_spool_replay_after_a_crash_give_the_rows_of_ingest_of_the_same_spans(tmp_path, monkeypatch,
                                                                                          warm, hand_bytes, live_points):
    from loopledger.receive import flush as flushing

    monkeypatch.setattr(flushing, "LIVE_POINTS", live_points)

    if hand_bytes is not None:
        monkeypatch.setattr(flushing, "HAND_BYTES", hand_bytes)
    requests = rounds()
    spool_day = None

    # 1. The in-memory path: a flush after every request (sessions continued from warm points).
    live = engine_at(f"sqlite:///{tmp_path / 'live.sqlite'}")
    rec = receive.Receiver(live, tmp_path / "spool-live", worker.Options(), flush_interval=None, keep_days=None)
    rec.flusher.warm_snapshots = warm
    with _served(rec) as (url, _):
        for spans in requests:
            assert post(url, request(spans), "application/json")[0] == 200
            rec.flush()
            fs = next(iter(rec.flusher.files.values()))
            # One warm LRU of `warm` sessions; the newest of them live (never sealed while kept),
            # the others sealed, in memory and in the ledger.
            assert sum(k.warm for k in fs.known.values()) <= warm
            assert all(k.stored for k in fs.known.values() if k.snap is not None)
            assert sum(k.live is not None for k in fs.known.values()) <= min(warm, flushing.LIVE_POINTS)
            assert rec.flusher._handed_bytes == 0  # all taken by the flush
        st = rec.flusher.stats
        total = sum(len(r) for r in requests)
        if hand_bytes is None:
            # Every span taken from memory; read back from the spool only the 12 earlier spans
            # of conv-1, the session rewritten (by their byte ranges), nothing else.
            assert (st.spans_handed, st.spans_read) == (total, 4 * 3)
            # Continued from live points when they stay warm (3 sessions x 3 later rounds, less
            # conv-1's rewrite), from the ledger when not.
            assert st.sessions_continued_live >= (6 if warm > 1 and live_points > 1 else 0)
            if live_points == 1:
                assert 0 < st.sessions_continued_live <= st.flushes
        elif hand_bytes == 1:
            assert st.spans_handed == 0 and st.spans_read >= total
        else:
            assert 0 < st.spans_handed < total and st.spans_read >= total - st.spans_handed
        assert st.sessions_continued >= 6 and st.sessions_rewritten >= 4
        assert rec.stats.last_error == ""
        spool_day = next(rec.spool.glob("otlp-*.jsonl")).name

    # 2. The spool path: every request acknowledged, the receiver gone before any flush (what a
    # kill -9 leaves: the spool, nothing in the ledger); a new receiver on that spool writes it.
    crashed = engine_at(f"sqlite:///{tmp_path / 'crashed.sqlite'}")
    first = receive.Receiver(crashed, tmp_path / "spool-crash", worker.Options(), flush_interval=None, keep_days=None)
    with _served(first) as (url, _):
        first.close = lambda: None  # no closing flush: it died
        for spans in requests:
            assert post(url, request(spans), "application/json")[0] == 200
    assert calls_of(crashed) == []
    first.spooler.close()
    again = receive.Receiver(crashed, tmp_path / "spool-crash", worker.Options(), flush_interval=None, keep_days=None)
    again.flush()
    assert (again.flusher.stats.spans_handed, again.flusher.stats.spans_read) == (0, total)
    again.close()

    # 3. The expected rows: `ingest` of an export file of the same spans, written by the test.
    (tmp_path / "export").mkdir()
    export = tmp_path / "export" / spool_day
    export_file(export, requests)
    want_engine = engine_at(f"sqlite:///{tmp_path / 'want.sqlite'}")
    worker.ingest_file(want_engine, export, worker.Options())
    want = dump(want_engine)
    assert len(calls_of(want_engine)) == total

    for engine in (live, crashed):
        got = dump(engine)
        for table in want:
            if table != "sources":  # the files' own sizes and hashes: the export is another file
                assert got[table] == want[table], table
        text = every_text(engine)
        assert SECRET not in text and "Q" * 29 not in text  # neither secret, escaped or not
    for e in (live, crashed, want_engine):
        e.dispose()


def test_a_failed_flush_after_a_warm_continuation_leaves_the_next_flush_the_same_rows(tmp_path, monkeypatch):
    """The warm point is fed by one flush only: when that flush's write fails, the next flush
    continues from the sealed snapshot instead, and the rows are those of one ingest."""
    from loopledger.receive import flush as flushing

    requests = rounds()[:4]
    engine = engine_at(f"sqlite:///{tmp_path / 'l.sqlite'}")
    rec = receive.Receiver(engine, tmp_path / "spool", worker.Options(), flush_interval=None, keep_days=None)
    with _served(rec) as (url, _):
        for n, spans in enumerate(requests):
            assert post(url, request(spans), "application/json")[0] == 200
            if n == 2:
                real = flushing.Flusher._write

                def broken(self, fs, plan, upto):
                    raise RuntimeError("disk on fire")

                monkeypatch.setattr(flushing.Flusher, "_write", broken)
                rec.flush()  # continues every session from its live point, then fails to write
                assert rec.flusher.stats.pending == len(spans)
                monkeypatch.setattr(flushing.Flusher, "_write", real)
            rec.flush()
        assert rec.flusher.stats.pending == 0
        day = next(rec.spool.glob("otlp-*.jsonl")).name
    (tmp_path / "export").mkdir()
    export_file(tmp_path / "export" / day, requests)
    want_engine = engine_at(f"sqlite:///{tmp_path / 'want.sqlite'}")
    worker.ingest_file(want_engine, tmp_path / "export" / day, worker.Options())
    got, want = dump(engine), dump(want_engine)
    for table in want:
        if table != "sources":
            assert got[table] == want[table], table
    engine.dispose()
    want_engine.dispose()
