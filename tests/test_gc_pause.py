"""loopledger.gc_pause: the cyclic collector is off inside a pause and back after the last one."""

from __future__ import annotations

import gc
import threading

from loopledger import gc_pause


def test_nested_and_concurrent_pauses_restore_the_collector_after_the_last():
    assert gc.isenabled()
    inside, release = threading.Event(), threading.Event()

    def other() -> None:
        with gc_pause.paused():
            inside.set()
            release.wait(10)

    t = threading.Thread(target=other)
    with gc_pause.paused():
        assert not gc.isenabled()
        with gc_pause.paused():
            assert not gc.isenabled()
        assert not gc.isenabled()  # the outer pause still holds
        t.start()
        assert inside.wait(10)
    assert not gc.isenabled()  # the other thread's pause still holds
    release.set()
    t.join(10)
    assert gc.isenabled()


def test_an_exception_inside_still_restores_and_a_disabled_collector_stays_off():
    try:
        with gc_pause.paused():
            raise KeyError("x")
    except KeyError:
        pass
    assert gc.isenabled()
    gc.disable()
    try:
        with gc_pause.paused():
            pass
        assert not gc.isenabled()  # it was off before: a pause does not turn it on
    finally:
        gc.enable()
