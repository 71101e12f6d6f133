"""Run an iterator in a thread, a few items ahead of its consumer.

Ingest computes in pure Python and writes through sqlite3/psycopg, which release the GIL while
the database works (sqlite3_step, a PostgreSQL round trip): a computing thread and a writing
thread then overlap on two cores, where one thread would alternate. Items are handed over in
order, so what is written does not change; an exception raised by the iterator is raised in
the consumer, at the point it would have been without the thread.
"""

from __future__ import annotations

import queue
import threading
from collections.abc import Iterable, Iterator
from typing import TypeVar

T = TypeVar("T")

_DONE = object()
_POLL_S = 0.5  # how often a blocked producer looks whether the consumer gave up


def prefetched(items: Iterable[T], ahead: int = 2, name: str = "loopledger-prefetch") -> Iterator[T]:
    """`items`, produced by a daemon thread at most `ahead` items before they are consumed
    (bounded: memory stays what `ahead` items hold). Closing the generator early (break, an
    error in the consumer) stops the producer at its next item."""
    q: queue.Queue = queue.Queue(maxsize=max(1, ahead))
    stop = threading.Event()

    def put(x: object) -> bool:
        while not stop.is_set():
            try:
                q.put(x, timeout=_POLL_S)
                return True
            except queue.Full:
                continue
        return False

    def produce() -> None:
        try:
            for item in items:
                if not put((item, None)):
                    return
        except BaseException as exc:  # noqa: BLE001  (handed to the consumer, raised there)
            put((_DONE, exc))
            return
        put((_DONE, None))

    worker = threading.Thread(target=produce, name=name, daemon=True)
    worker.start()
    try:
        while True:
            item, exc = q.get()
            if item is _DONE:
                if exc is not None:
                    raise exc
                return
            yield item
    finally:
        stop.set()
        worker.join()
