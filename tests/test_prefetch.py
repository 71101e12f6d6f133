"""prefetched(): an iterator run in a thread ahead of its consumer, in order, bounded, errors kept."""

from __future__ import annotations

import threading
import time

import pytest
from loopledger.prefetch import prefetched


def test_items_arrive_in_order_from_another_thread():
    here = threading.get_ident()
    made_in: list[int] = []

    def gen():
        for i in range(50):
            made_in.append(threading.get_ident())
            yield i

    assert list(prefetched(gen(), ahead=3)) == list(range(50))
    assert set(made_in) and here not in made_in


def test_the_producer_runs_at_most_ahead_items_before_the_consumer():
    made: list[int] = []

    def gen():
        for i in range(20):
            made.append(i)
            yield i

    it = prefetched(gen(), ahead=2)
    for consumed, _ in enumerate(it, start=1):
        time.sleep(0.01)  # give the producer every chance to run further ahead
        # queued (2) + the one it holds while blocked on the full queue (1) + those consumed
        assert len(made) <= consumed + 3


def test_an_error_in_the_iterator_is_raised_in_the_consumer_after_the_items_before_it():
    def gen():
        yield 1
        yield 2
        raise ValueError("line 3 is bad")

    got = []
    with pytest.raises(ValueError, match="line 3 is bad"):
        for x in prefetched(gen()):
            got.append(x)
    assert got == [1, 2]


def test_closing_early_stops_the_producer():
    made: list[int] = []

    def gen():
        for i in range(10_000):
            made.append(i)
            yield i

    it = prefetched(gen(), ahead=1)
    assert next(it) == 0
    it.close()  # joins the producer: it has stopped by now
    stopped_at = len(made)
    time.sleep(0.05)
    assert len(made) == stopped_at < 10
