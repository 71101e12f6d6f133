"""The hard deadline of a live decision: a hook answers within LOOPLEDGER_HOOK_DEADLINE seconds
of its start (default 20) whatever the ledger, the network or the input does — a busy ledger
under parallel hooks, a PostgreSQL server that accepts and never answers, a hung resident, a
stdin that never closes. Past it the call is allowed and one line is logged. 20 s: well past
what a decision takes (tens of milliseconds; a busy ledger is waited for 5 s), well within the
30 s `hook install` gives the agent to wait for a hook (loopledger.live.hook_settings.TIMEOUT_S).

Three layers, each bounded by the time left rather than by its own constant:
- every wait the decision makes (SQLite's busy timeout, PostgreSQL's connect_timeout and
  lock_timeout, the wait for the resident's reply) is cut to what is left of the deadline, so
  it normally ends by itself and logs its own reason;
- a hook process arms SIGALRM for the deadline (`arm`): its handler prints the agent's "allow",
  logs one line and ends the process, whatever the process was waiting on;
- should the main thread be stuck where no Python handler runs (inside a C call that ignores
  EINTR), faulthandler's own C thread ends the process BACKSTOP_S later, with exit status 1:
  both agents take a status other than 0 and 2 as a non-blocking error and run the call.

The resident (loopledger.live.resident) cannot be ended per request: each request carries the
time its hook stops waiting (FALLBACK_RESERVE_S before the hook's deadline), the waits are cut
to it, a request past it or whose hook has gone is dropped unjudged, and a request stuck past it
ends the resident (its hooks answer themselves, and the next one starts a fresh resident).

Stdlib only, and only what a bare interpreter already holds: every hook process imports this.
"""

from __future__ import annotations

import os
import time

ENV = "LOOPLEDGER_HOOK_DEADLINE"
DEFAULT_S = 20.0
# Kept for the in-process path when the resident does not answer in time: the client stops
# waiting this long before the deadline, so a quiet ledger can still judge the call itself.
FALLBACK_RESERVE_S = 1.0
MARGIN_S = 0.25  # a wait ends this long before the deadline, leaving time to answer and log
BACKSTOP_S = 1.0
MIN_WAIT_S = 0.05


def seconds() -> float:
    try:
        value = float(os.environ.get(ENV, DEFAULT_S))
    except ValueError:
        return DEFAULT_S
    return value if value > 0 else DEFAULT_S


def at(start: float | None = None) -> float:
    """The deadline (a time.time() value) of a decision that started at `start` (default now)."""
    return (time.time() if start is None else start) + seconds()


def left(deadline: float) -> float:
    return deadline - time.time()


def wait_s(deadline: float | None, cap: float) -> float:
    """How long one wait may last: `cap`, cut to the deadline (less MARGIN_S), at least MIN_WAIT_S."""
    if deadline is None:
        return cap
    return max(MIN_WAIT_S, min(cap, left(deadline) - MARGIN_S))


_armed = False


def arm(deadline: float, on_expiry) -> None:
    """In a process of its own (a hook): call `on_expiry()` at the deadline (it must end the
    process), and end the process BACKSTOP_S later should the handler never get to run."""
    global _armed
    import _signal

    def handler(signum, frame):
        on_expiry()

    _signal.signal(_signal.SIGALRM, handler)
    _signal.setitimer(_signal.ITIMER_REAL, max(MIN_WAIT_S, left(deadline)))
    backstop(deadline)
    _armed = True


def backstop(deadline: float) -> None:
    """End this process (exit status 1) BACKSTOP_S past the deadline, from faulthandler's C
    thread: it needs neither the GIL nor the main thread."""
    import faulthandler

    global _null
    if _null is None:
        _null = open(os.devnull, "w")  # noqa: SIM115 (the C thread writes here; kept for the process)
    faulthandler.dump_traceback_later(max(MIN_WAIT_S, left(deadline)) + BACKSTOP_S, exit=True, file=_null)


_null = None


class Expired(Exception):
    """No decision within the deadline (raised in the main thread by `within`)."""


class within:  # noqa: N801 (used as a context manager, like contextlib's)
    """In the main thread of a long-lived process (`loopledger guard`): raise Expired in the
    block once `deadline` passes (SIGALRM), whatever it waits on that lets Python run."""

    def __init__(self, deadline: float) -> None:
        self.deadline = deadline

    def __enter__(self) -> within:
        import _signal

        def handler(signum, frame):
            raise Expired(f"no decision within the {seconds():g} s deadline (${ENV})")

        self._old = _signal.signal(_signal.SIGALRM, handler)
        _signal.setitimer(_signal.ITIMER_REAL, max(MIN_WAIT_S, left(self.deadline)))
        return self

    def stop(self) -> None:
        """No Expired from here on in the block (the decision is stored: it must be answered)."""
        import _signal

        _signal.setitimer(_signal.ITIMER_REAL, 0)

    def __exit__(self, *exc) -> None:
        import _signal

        _signal.setitimer(_signal.ITIMER_REAL, 0)
        _signal.signal(_signal.SIGALRM, self._old)


def silence() -> None:
    """No SIGALRM from here on (the answer is decided; what is left is to log and write it); the
    backstop stays armed until `disarm`. A no-op when not armed (the resident)."""
    if not _armed:
        return
    import _signal

    _signal.setitimer(_signal.ITIMER_REAL, 0)


def disarm() -> None:
    """The answer is about to be written: no expiry from here on (a no-op when not armed)."""
    global _armed
    if not _armed:
        return
    import _signal
    import faulthandler

    _signal.setitimer(_signal.ITIMER_REAL, 0)
    faulthandler.cancel_dump_traceback_later()
    _armed = False
