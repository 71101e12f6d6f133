"""Issue 21, receiver memory: what the receiver keeps per span stays small as the day's spool
grows, and what it drops (frozen index entries, evicted resume snapshots) gives the same rows
as never dropping it. Real receivers (writer thread, flusher, spool files), real ledgers."""

from __future__ import annotations

import gc
import json
import tracemalloc

import pytest
from loopledger import receive, worker
from loopledger.ledger import migrate
from loopledger.ledger.engine import make_engine
from loopledger.receive.digests import DigestIndex, digest
from test_receive import calls_of, request, tool_span


@pytest.fixture
def ledger(tmp_path, db_url):
    engine = make_engine(db_url)
    migrate.upgrade(engine)
    yield engine
    engine.dispose()


def receiver(ledger, tmp_path, warm: int | None = None) -> receive.Receiver:
    rec = receive.Receiver(ledger, tmp_path / "spool", worker.Options(), flush_interval=None)
    if warm is not None:
        rec.flusher.warm_snapshots = warm
    return rec


def send(rec: receive.Receiver, spans: list[dict]) -> int:
    """What POST /v1/traces does after decoding: spooled (fsync'd) by the writer thread; new spans."""
    return rec.submit(receive.prepare(receive.decode(request(spans), receive.JSON))).result()


def the_file(rec: receive.Receiver):
    (fs,) = rec.flusher.files.values()
    return fs


def fill(rec: receive.Receiver, first: int, n_convs: int, per: int) -> None:
    """n_convs conversations of `per` calls, interleaved 8 calls of each per request (concurrent agents)."""
    for lo in range(0, per, 8):
        spans = [tool_span(f"c{c}", i, "read_file", json.dumps({"path": f"m{i % 7}.py"}), "x" * 300,
                           trace=f"{c + 1:032x}", span_id=f"{c + 1:08x}{i + 1:08x}")
                 for c in range(first, first + n_convs) for i in range(lo, min(per, lo + 8))]
        assert send(rec, spans) == len(spans)
        rec.flush()


def _held_by_receive() -> int:
    """Bytes still allocated by the receiver's own modules (the frame that allocated them is in
    loopledger.receive): what its index, spool and warm state hold. Not the process's whole
    traced total, which under xdist also counts whatever other threads and earlier tests in the
    same worker allocate meanwhile."""
    snap = tracemalloc.take_snapshot().filter_traces([tracemalloc.Filter(True, "*/receive/*.py")])
    return sum(stat.size for stat in snap.statistics("filename"))


def test_the_receivers_per_span_state_stays_small_as_the_day_grows(ledger, tmp_path, db_url):
    """Before issue 21 the receiver held about 1.1 KB of Python objects per spooled span (a
    Ref per span, its id tuples in three dicts and the spool's seen-set, a snapshot per
    conversation): 4 KB of RSS. Now spans in the ledger are frozen out of the index and the
    snapshots are an LRU; what stays is a few dozen bytes a span."""
    if not db_url.startswith("sqlite"):
        pytest.skip("the structures are the same on PostgreSQL; one backend is enough for a size")
    rec = receiver(ledger, tmp_path, warm=16)
    try:
        gc.collect()
        tracemalloc.start(1)
        fill(rec, 0, 20, 50)  # 1,000 spans: warms every code path and cache
        gc.collect()
        small = _held_by_receive()
        fill(rec, 20, 80, 50)  # 4,000 more, in 80 more conversations
        gc.collect()
        big = _held_by_receive()
        tracemalloc.stop()
        fs = the_file(rec)
        # Every span is in the ledger (an independent count), none of them is held as an object.
        assert len(calls_of(ledger)) == 5000 and rec.flusher.stats.pending == 0
        assert rec.flusher.stats.ingested == 5000
        assert (len(fs.refs), len(fs.children), len(fs.sessions), len(fs.fresh)) == (0, 0, 0, 0)
        assert fs.n_cold == 5000 and len(fs.cold) == 100
        # Snapshots kept: at most the bound, however many conversations the day has.
        assert sum(k.warm for k in fs.known.values()) <= 16  # live or sealed
        # Digests: one entry a span in the spool's and the index's; 12 bytes each once merged.
        assert len(rec.spooler.seen) == 5000 and len(fs.cold_spans) == 5000
        # Bytes per span kept: generous (the old index alone was ~1,100); measured: about 0.
        per_span = (big - small) / 4000
        print(f"{per_span:.0f} bytes kept per span")
        assert per_span < 400, f"{per_span:.0f} bytes kept per span"
    finally:
        rec.close()


def test_digest_index_is_a_multimap_across_merges():
    idx = DigestIndex()
    for i in range(10_000):  # past several merges
        idx.add(digest("t", str(i)), i % 7)
    idx.add(digest("t", "5"), 99)
    assert sorted(idx.values(digest("t", "5"))) == [5, 99]
    assert idx.values(digest("t", "x")) == [] and digest("t", "x") not in idx
    assert all(digest("t", str(i)) in idx for i in range(0, 10_000, 97))
    assert len(idx) == 10_001 and idx.nbytes() <= 12 * 10_001
    bare = DigestIndex()  # no values: the spool's set of spooled spans
    bare.update(digest("s", str(i)) for i in range(10_000))
    assert all(digest("s", str(i)) in bare for i in range(0, 10_000, 89)) and digest("s", "-1") not in bare
    assert bare.values(digest("s", "7")) == [0] and len(bare) == 10_000


def test_a_span_resent_after_its_session_froze_and_its_snapshot_was_evicted_is_stored_once(ledger, tmp_path):
    """The span's index entry frozen, its session's snapshot evicted (warm bound 1, other
    conversations written after it): a retry adds nothing — nor after a restart."""
    first = tool_span("resent", 0, span_id="00000000000000a1")
    rec = receiver(ledger, tmp_path, warm=1)
    try:
        assert send(rec, [first, tool_span("resent", 1, span_id="00000000000000a2")]) == 2
        rec.flush()
        for c in range(3):
            send(rec, [tool_span(f"other-{c}", 0, trace=f"{c + 9:032x}")])
            rec.flush()
        fs = the_file(rec)
        assert "resent" in fs.cold and not fs.known["resent"].warm
        assert send(rec, [first]) == 0 and rec.stats.duplicates == 1
        rec.flush()
    finally:
        rec.close()
    again = receiver(ledger, tmp_path, warm=1)  # a restart: the index and the digests rebuilt from the spool
    try:
        assert send(again, [first, tool_span("resent", 2, span_id="00000000000000a3")]) == 1
        again.flush()
    finally:
        again.close()
    assert [c for k, c in calls_of(ledger) if k == "resent"] == ["call_resent_0", "call_resent_1", "call_resent_2"]


def test_a_frozen_spans_second_copy_in_the_spool_file_adds_nothing(ledger, tmp_path):
    """A spool line repeating a span already in the ledger (an older receiver wrote retries too):
    first seen wins, as a whole-file read has it, though the first copy is frozen."""
    rec = receiver(ledger, tmp_path)
    try:
        send(rec, [tool_span("dup", 0, span_id="00000000000000b1"), tool_span("dup", 1, span_id="00000000000000b2")])
        rec.flush()
        path = the_file(rec).path
        first_line = path.read_bytes().splitlines(keepends=True)[0]
        with open(path, "ab") as fh:  # the same span again, as its own line
            fh.write(first_line)
        rec.flush()
        assert rec.flusher.stats.last_error == ""
    finally:
        rec.close()
    assert [c for k, c in calls_of(ledger) if k == "dup"] == ["call_dup_0", "call_dup_1"]


def test_conversations_continued_after_eviction_have_the_rows_of_file_ingest_of_the_same_spans(ledger, tmp_path):
    """Warm bound 1: every continuation but the latest conversation's loads its snapshot from the
    ledger, and every session's spans are frozen between flushes; with a rewrite (a span sorting
    before the last) and an agent span arriving after its children (they move to its session).
    Expected rows: `loopledger ingest` of a file written here, one span a line in the order sent."""
    from test_worker import dump

    trace = "7" * 32
    failing = ("run_tests", '{"path": "tests"}', "1 failed: test_refund")
    rounds = [[tool_span(f"conv-{c}", i, *failing, trace=f"{c + 1:032x}") for c in range(4) for i in range(r * 3, r * 3 + 3)]
              for r in range(3)]
    rounds.insert(2, [tool_span("conv-1", 1.5, "cat", '{"f": "b.py"}', "B", trace=f"{2:032x}")])  # a rewrite
    rounds.insert(1, [tool_span(None, i, "gh", '{"run": 1}', f"{i}/3 done", trace=trace, span_id=f"{i + 1:016x}",
                                parent="a" * 16) for i in range(3)])
    rounds.insert(3, [{"traceId": trace, "spanId": "a" * 16, "name": "invoke_agent",
                       "startTimeUnixNano": "1764500000000000000", "endTimeUnixNano": "1764500009000000000",
                       "attributes": [{"key": "gen_ai.operation.name", "value": {"stringValue": "invoke_agent"}},
                                      {"key": "gen_ai.conversation.id", "value": {"stringValue": "late-parent"}}]}])
    rec = receiver(ledger, tmp_path, warm=1)
    try:
        for spans in rounds:
            assert send(rec, spans) == len(spans)
            rec.flush()
            assert rec.stats.last_error == "" and rec.flusher.stats.last_error == ""
        st = rec.flusher.stats
        assert st.sessions_continued >= 8 and st.sessions_rewritten >= 2
        name = the_file(rec).path.name
    finally:
        rec.close()
    # An independent count: 4 conversations x 9 calls + the rewrite's one + 3 children.
    got_calls = calls_of(ledger)
    assert len(got_calls) == 40 and {k for k, _ in got_calls} == {"conv-0", "conv-1", "conv-2", "conv-3", "late-parent"}
    whole = tmp_path / "whole" / name
    whole.parent.mkdir()
    whole.write_bytes(b"".join(request([sp]).replace(b"\n", b"") + b"\n" for spans in rounds for sp in spans))
    other = make_engine(f"sqlite:///{tmp_path / 'whole.sqlite'}")
    migrate.upgrade(other)
    worker.ingest_file(other, whole, worker.Options())
    got, want = dump(ledger), dump(other)
    other.dispose()
    assert want["checks"], "the policies judged something"
    for table in want:
        if table != "sources":  # the file's size and hash: its JSON spelled by another encoder
            assert got[table] == want[table], table


def test_a_backlog_is_written_in_steps_with_the_rows_of_file_ingest_and_a_restart_rebuilds_in_steps(
        ledger, tmp_path, monkeypatch):
    """A flush with more spooled than one step (CHUNK_BYTES, made 4 KB here; a line longer than
    that goes alone): several transactions, no span lost or doubled, the rows of one file ingest;
    a restart rebuilds the index in steps too, and still drops a retry."""
    from loopledger.receive import flush as flushing
    from test_worker import dump

    monkeypatch.setattr(flushing, "CHUNK_BYTES", 4096)
    spans = [tool_span(f"b{c}", i, "read_file", json.dumps({"i": i}), "y" * (9000 if i == 3 else 200),
                       trace=f"{c + 1:032x}", span_id=f"{c + 1:08x}{i + 1:08x}") for i in range(12) for c in range(3)]
    rec = receiver(ledger, tmp_path)
    try:
        for lo in range(0, len(spans), 9):
            assert send(rec, spans[lo:lo + 9]) == 9
        reports = rec.flush()  # one flush of the whole backlog
        assert len(reports) > 3 and rec.flusher.stats.pending == 0
        name = the_file(rec).path.name
    finally:
        rec.close()
    assert len(calls_of(ledger)) == 36 and len(set(calls_of(ledger))) == 36
    again = receiver(ledger, tmp_path)
    try:
        assert the_file(again).n_cold == 36
        assert send(again, [spans[0], tool_span("b0", 12, trace=f"{1:032x}", span_id=f"{1:08x}{13:08x}")]) == 1
        again.flush()
    finally:
        again.close()
    whole = tmp_path / "whole" / name
    whole.parent.mkdir()
    sent = spans + [tool_span("b0", 12, trace=f"{1:032x}", span_id=f"{1:08x}{13:08x}")]
    whole.write_bytes(b"".join(request([sp]) + b"\n" for sp in sent))
    other = make_engine(f"sqlite:///{tmp_path / 'whole.sqlite'}")
    migrate.upgrade(other)
    worker.ingest_file(other, whole, worker.Options())
    got, want = dump(ledger), dump(other)
    other.dispose()
    assert len(want["calls"]) == 37
    for table in want:
        if table != "sources":
            assert got[table] == want[table], table
