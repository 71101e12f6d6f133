"""Seed 003's sliding-window guard (`tool-loop-guard`'s `LoopGuard`).

The same `(tool, canonical args)` key `threshold` times among the last `window` calls raises,
counting the new call: the upstream code and tests raise on the threshold-th occurrence (its
README's "more than" is wrong; design.md follows the code). The call stays recorded when it raises.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from loopledger import vocab
from loopledger.detectors.base import INT, Check, Param, Policy
from loopledger.detectors.canonical import call_key, canonical_json, fast_canonical
from loopledger.detectors.errors import ConfigError
from loopledger.detectors.registry import Detector
from loopledger.events import Batch

if TYPE_CHECKING:  # pragma: no cover — the spec grammar imports the detectors, not the reverse
    from loopledger.detectors.policy import PolicySpec

DEFAULT_WINDOW = 8
DEFAULT_THRESHOLD = 3

KeyFn = Callable[[str, Any], Any]


def default_key_fn(tool_name: str, args: Any) -> tuple[str, str]:
    """`(tool_name, canonical_json(args))`: object keys sorted recursively, None ≡ {}."""
    return tool_name, canonical_json(args)


class LoopDetectedError(RuntimeError):
    """The same key `threshold` times in the window (a RuntimeError, as in the Python port)."""

    def __init__(self, tool_name: str, tool_args: Any, count: int, window: int, threshold: int) -> None:
        self.tool_name = tool_name
        self.tool_args = tool_args
        self.count = count
        self.window = window
        self.threshold = threshold
        # The message shows canonical text, never repr(args): repr of 10,000-deep args recurses.
        shown = canonical_json(tool_args)
        shown = shown if len(shown) <= 200 else shown[:200] + "…"
        super().__init__(f"agent looping on {tool_name}({shown}): occurred {count} times in the "
                         f"last {window} calls (threshold {threshold})")


def validate(window: Any, threshold: Any) -> None:
    for name, value in (("window", window), ("threshold", threshold)):
        if not isinstance(value, int) or isinstance(value, bool):
            raise ConfigError(name, f"{name} is an integer", f"{name}: must be an integer, got {value!r}")
    if window < 2:
        raise ConfigError("window", "window >= 2", f"window: must be >= 2, got {window}")
    if threshold < 2:
        raise ConfigError("threshold", "threshold >= 2", f"threshold: must be >= 2, got {threshold}")
    if threshold > window:
        raise ConfigError("threshold", "threshold <= window",
                          f"threshold: must be <= window ({window}), got {threshold}")


class LoopGuard:
    """A FIFO of the last `window` call keys; `record` raises `LoopDetectedError` when the new
    call's key occurs `threshold` times in it (the new call included)."""

    __slots__ = ("window", "threshold", "key_fn", "_buf", "_counts")

    def __init__(self, window: int = DEFAULT_WINDOW, threshold: int = DEFAULT_THRESHOLD,
                 key_fn: KeyFn | None = None) -> None:
        validate(window, threshold)
        self.window = window
        self.threshold = threshold
        self.key_fn: KeyFn = key_fn or default_key_fn
        self._buf: deque[Any] = deque()
        # Occurrences per key in the buffer; None once a key_fn returned an unhashable key (then
        # the buffer is counted by equality, as the seed does).
        self._counts: dict[Any, int] | None = {}

    # The crate's constructors (seed 003), for code ported from it: `try_new` raises ConfigError
    # where the crate returns Err(ConfigError); `with_capacity` raises it where the crate panics.
    @classmethod
    def with_capacity(cls, window: int, threshold: int) -> LoopGuard:
        return cls(window, threshold)

    @classmethod
    def try_new(cls, window: int, threshold: int) -> LoopGuard:
        return cls(window, threshold)

    @classmethod
    def with_key_fn(cls, window: int, threshold: int, key_fn: KeyFn) -> LoopGuard:
        return cls(window, threshold, key_fn)

    def record(self, tool_name: str, tool_args: Any = None, key: Any = None) -> int:
        """Record one call; return its count in the window; raise when count >= threshold.

        `key` lets a caller pass the key it already computed with this guard's key_fn."""
        if key is None:
            if self.key_fn is default_key_fn:  # inlined: the hot path
                key = (tool_name, fast_canonical(tool_args).decode("utf-8", "surrogatepass"))
            else:
                key = self.key_fn(tool_name, tool_args)
        buf = self._buf
        counts = self._counts
        if len(buf) == self.window:  # evict the oldest first
            old = buf.popleft()
            if counts is not None:
                left = counts[old] - 1
                if left:
                    counts[old] = left
                else:
                    del counts[old]
        buf.append(key)
        if counts is not None:
            try:
                seen = counts.get(key, 0)  # only hashing the key may raise here
            except TypeError:  # unhashable: count by equality from now on
                self._counts = counts = None
            else:
                count = counts[key] = seen + 1
        if counts is None:
            count = buf.count(key)
        if count >= self.threshold:
            raise LoopDetectedError(tool_name, tool_args, count, self.window, self.threshold)
        return count

    def would_raise(self, tool_name: str, tool_args: Any = None) -> bool:
        """Whether `record` would raise for this call, without recording it."""
        return self.count_if_recorded(self.key_fn(tool_name, tool_args)) >= self.threshold

    def count_if_recorded(self, key: Any) -> int:
        buf = self._buf
        evicted = 1 if len(buf) == self.window and buf[0] == key else 0
        return buf.count(key) - evicted + 1

    def __deepcopy__(self, memo: dict[int, Any]) -> LoopGuard:
        # Keys are never mutated here: shallow copies of the buffer and the counts suffice.
        new = LoopGuard.__new__(LoopGuard)
        new.window, new.threshold, new.key_fn = self.window, self.threshold, self.key_fn
        new._buf = self._buf.copy()
        new._counts = None if self._counts is None else dict(self._counts)
        return new

    def reset(self) -> None:
        self._buf.clear()
        if self._counts is not None:
            self._counts.clear()

    def __len__(self) -> int:
        return len(self._buf)

    @property
    def recent_keys(self) -> RecentKeys:
        """Buffered keys, oldest first: a fresh list that is also callable (returning itself),
        because the crate (seed 003) spells it `recent_keys()` and its Python port a property."""
        return RecentKeys(self._buf)


class RecentKeys(list):
    """A list of keys that can also be called, returning itself (see LoopGuard.recent_keys)."""

    __slots__ = ()

    def __call__(self) -> RecentKeys:
        return self


# ── the Policy adapter and its registration ─────────────────────────────────────────────────

class WindowPolicy(Policy):
    def __init__(self, spec: PolicySpec) -> None:
        super().__init__(spec)
        self.guard = LoopGuard(spec.params["window"], spec.params["threshold"])

    def user_turn(self) -> None:
        self.guard.reset()

    def check(self, batch: Batch) -> list[Check]:
        out = []
        g = self.guard
        for i, call in enumerate(batch.calls):
            try:
                count = g.record(call.name, call.args, (call.name, call_key(call)[0].decode("utf-8", "surrogatepass")))
            except LoopDetectedError as e:
                out.append(Check(i, vocab.HALT, e.count, None, e.threshold,
                                 f"{e.tool_name} {e.count} times in the last {e.window} calls"))
                break
            out.append(Check(i, vocab.ALLOW, count, None, g.threshold, ""))
        return out

    def state(self) -> dict[str, Any]:
        keys = self.guard.recent_keys()
        buffer = []
        for name, canon in keys:
            shown = canon if len(canon) <= 80 else canon[:80] + "…"
            buffer.append({"tool": name, "args": shown, "count": keys.count((name, canon))})
        return {"buffer": buffer, "window": self.guard.window, "threshold": self.guard.threshold}


DETECTOR = Detector(
    "window",
    (
        Param("window", INT, DEFAULT_WINDOW, 2, "calls remembered"),
        Param("threshold", INT, DEFAULT_THRESHOLD, 2, "occurrences in the window that halt"),
    ),
    WindowPolicy,
    validate=lambda p: validate(p["window"], p["threshold"]),
    summary="the same call threshold times among the last window calls (tool-loop-guard's window)",
)
