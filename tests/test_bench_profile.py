"""bench_receive's reading of py-spy's raw (collapsed-stack) output: the figures in BENCHMARKS.md's
receiver profile come from it, so its counting is pinned here on a hand-made sample."""

from bench.bench_receive import profile_rows

RAW = """\
run (threading.py:1);flush (ingest/receive/flush.py:10);seal (ingest/snapshots.py:5) 6
run (threading.py:1);flush (ingest/receive/flush.py:10);feed (ingest/replay.py:7);seal (ingest/snapshots.py:5) 2
run (threading.py:1);decode (ingest/receive/http.py:3) 2
not a sample line
"""


def test_inclusive_counts_a_frame_once_per_stack_and_own_counts_the_leaf():
    total, ours, leaves = profile_rows(RAW)
    assert total == 10
    # run() is on every stack (entry point: left out); flush on 8 of 10, seal on 8 (own 8),
    # feed on 2 (own 0), decode on 2 (own 2)
    assert ours == [(8, 8, "seal (ingest/snapshots.py:5)"), (8, 0, "flush (ingest/receive/flush.py:10)"),
                    (2, 2, "decode (ingest/receive/http.py:3)"), (2, 0, "feed (ingest/replay.py:7)")]
    assert leaves == [(8, "seal (ingest/snapshots.py:5)"), (2, "decode (ingest/receive/http.py:3)")]


def test_a_recursive_frame_is_counted_once_in_its_stack():
    total, ours, _ = profile_rows("a (ingest/x.py:1);b (ingest/y.py:2);a (ingest/x.py:1) 3\nc (ingest/z.py:1) 7\n")
    assert total == 10
    assert (3, 3, "a (ingest/x.py:1)") in ours and (3, 0, "b (ingest/y.py:2)") in ours
