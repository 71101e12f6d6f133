"""Our cycle detector: the loops of period two or more that no seed catches (A→B→A→B, A→A→B…).

Per call, before it executes. For each period p in 2..max_period, k_p is the number of
back-to-back repetitions of the last p calls (the new one included) that end the history: keys
`(tool, canonical args hash)` match at every position, and at each position all answers already
known across those repetitions are equal (a repetition whose answer differs is progress; an
unknown answer neither breaks nor joins). The p-call pattern must be primitive (not a repetition
of a shorter pattern), so a run of one identical call is left to the other detectors.

The verdict takes the period with the largest k_p, the smallest period on a tie, when k ≥ 2:
warn at k ≥ warn_repeats, halt at k ≥ halt_repeats. Repeats are counted up to halt_repeats
(all the verdict needs), so the history holds max_period × halt_repeats calls and the verdict
never depends on anything older.
"""

from __future__ import annotations

from collections import deque
from typing import TYPE_CHECKING, Any, NamedTuple

import orjson
import xxhash
from loopledger import vocab
from loopledger.detectors.base import INT, Check, Param, PerCallAnswers
from loopledger.detectors.canonical import answer_key, call_key, canonical_bytes
from loopledger.detectors.errors import ConfigError
from loopledger.detectors.registry import Detector

if TYPE_CHECKING:  # pragma: no cover — the spec grammar imports the detectors, not the reverse
    from loopledger.detectors.policy import PolicySpec

ALLOW, WARN, HALT = "allow", "warn", "halt"
DEFAULT_MAX_PERIOD = 6
DEFAULT_WARN_REPEATS = 3
DEFAULT_HALT_REPEATS = 4
MAX_PERIOD_LIMIT = 64
_dumps, _SORT, _hash, _new = orjson.dumps, orjson.OPT_SORT_KEYS, xxhash.xxh3_128_hexdigest, tuple.__new__


class CycleVerdict(NamedTuple):
    action: str  # allow | warn | halt
    period: int  # 0 when no pattern repeats at least twice
    repeats: int  # k of that period (0 when none), counted up to halt_repeats
    pattern: tuple[str, ...]  # tool names of the repeating pattern, oldest first
    position: int  # this call's position, for record_answer


def validate(max_period: Any, warn_repeats: Any, halt_repeats: Any) -> None:
    for name, value in (("max_period", max_period), ("warn_repeats", warn_repeats),
                        ("halt_repeats", halt_repeats)):
        if not isinstance(value, int) or isinstance(value, bool):
            raise ConfigError(name, f"{name} is an integer", f"{name}: must be an integer, got {value!r}")
    if max_period < 2:
        raise ConfigError("max_period", "max_period >= 2", f"max_period: must be >= 2, got {max_period}")
    if max_period > MAX_PERIOD_LIMIT:
        # Each check may compare up to max_period² × halt_repeats keys: keep it bounded.
        raise ConfigError("max_period", f"max_period <= {MAX_PERIOD_LIMIT}",
                          f"max_period: must be <= {MAX_PERIOD_LIMIT}, got {max_period}")
    if warn_repeats < 2:
        raise ConfigError("warn_repeats", "warn_repeats >= 2",
                          f"warn_repeats: must be >= 2, got {warn_repeats}")
    if halt_repeats < warn_repeats:
        raise ConfigError("halt_repeats", "halt_repeats >= warn_repeats",
                          f"halt_repeats: must be >= warn_repeats ({warn_repeats}), got {halt_repeats}")


def is_primitive(keys: list[Any]) -> bool:
    """Not a repetition of a shorter pattern."""
    p = len(keys)
    for d in range(1, p // 2 + 1):
        if p % d == 0 and keys == keys[:d] * (p // d):
            return False
    return True


def repeats(keys: list[Any], answers: list[Any], p: int, cap: int) -> int:
    """k_p for the history (keys, answers), counted up to `cap`, for a history of at least 2p calls
    (the only ones `check` asks about: a shorter one cannot hold two repetitions, and 1 or 0 is
    the same verdict)."""
    n = len(keys)
    if keys[n - 1 - p] != keys[n - 1]:  # fast reject: the newest call's key p calls back
        return 1
    known = answers[n - p:]
    k = 1
    while k < cap:
        start = n - (k + 1) * p
        if start < 0:
            break
        merged = list(known)
        for j in range(p):
            if keys[start + j] != keys[n - p + j]:
                return k
            a = answers[start + j]
            if a is not None:
                if merged[j] is None:
                    merged[j] = a
                elif merged[j] != a:
                    return k
        known = merged
        k += 1
    return k


class CycleDetector:
    __slots__ = ("max_period", "warn_repeats", "halt_repeats", "_keys", "_answers", "_last_seen",
                 "_next", "last")

    def __init__(self, max_period: int = DEFAULT_MAX_PERIOD, warn_repeats: int = DEFAULT_WARN_REPEATS,
                 halt_repeats: int = DEFAULT_HALT_REPEATS) -> None:
        validate(max_period, warn_repeats, halt_repeats)
        self.max_period = max_period
        self.warn_repeats = warn_repeats
        self.halt_repeats = halt_repeats
        size = max_period * halt_repeats
        self._keys: deque[tuple[str, str]] = deque(maxlen=size)  # (tool, args hash), oldest first
        self._answers: deque[str | None] = deque(maxlen=size)
        self._last_seen: dict[tuple[str, str], int] = {}  # key → its latest position
        self._next = 0  # position of the next call checked
        self.last: CycleVerdict | None = None

    def check(self, name: str, args: Any, canonical: bytes | None = None,
              args_digest: str | None = None) -> CycleVerdict:
        if canonical is None:
            try:
                canonical = _dumps(args, option=_SORT) if args is not None else b"{}"
            except TypeError:
                canonical = canonical_bytes(args)
        key = (name, args_digest if args_digest is not None else _hash(canonical))
        keys = self._keys
        keys.append(key)
        self._answers.append(None)
        position = self._next
        self._next = position + 1
        seen = self._last_seen
        previous = seen.get(key)
        seen[key] = position
        if len(seen) > 4 * keys.maxlen:  # keep it bounded: only keys still in the history matter
            base = position - len(keys) + 1
            self._last_seen = {k: base + i for i, k in enumerate(keys)}
        best_k, best_p = 0, 0
        # Fast reject: any period p needs this key p calls back; if its latest earlier occurrence
        # is further back than max_period, no period can repeat.
        if previous is not None and position - previous <= self.max_period:
            keys_l = list(keys)
            n = len(keys_l)
            answers = list(self._answers)
            for p in range(2, min(self.max_period, n // 2) + 1):
                k = repeats(keys_l, answers, p, self.halt_repeats)
                if k >= 2 and k > best_k and is_primitive(keys_l[n - p:]):
                    best_k, best_p = k, p
        if best_k >= self.halt_repeats:
            action = HALT
        elif best_k >= self.warn_repeats:
            action = WARN
        elif best_k:
            action = ALLOW
        else:
            self.last = _new(CycleVerdict, (ALLOW, 0, 0, (), position))  # hot path: no Python __new__
            return self.last
        n = len(keys)
        pattern = tuple(keys[i][0] for i in range(n - best_p, n))
        self.last = CycleVerdict(action, best_p, best_k, pattern, position)
        return self.last

    def record_answer(self, text: Any, is_error: bool = False, position: int | None = None) -> None:
        """Record the answer of the call at `position` (default: the call last checked).

        `text`: the answer text, an `loopledger.events.Answer`, or None (unknown). An answer for a
        call that has left the history is ignored."""
        if position is None:
            position = self._next - 1
        i = len(self._keys) - (self._next - position)
        if position < 0 or not 0 <= i < len(self._keys):
            return
        key = answer_key(text)
        if key is not None and is_error and isinstance(text, str):
            key += "!"
        self._answers[i] = key

    def __deepcopy__(self, memo: dict[int, Any]) -> CycleDetector:
        # Entries are immutable (tuples of str, str or None): shallow copies of the containers.
        new = CycleDetector.__new__(CycleDetector)
        new.max_period, new.warn_repeats, new.halt_repeats = self.max_period, self.warn_repeats, self.halt_repeats
        new._keys = self._keys.copy()
        new._answers = self._answers.copy()
        new._last_seen = dict(self._last_seen)
        new._next, new.last = self._next, self.last
        return new

    def break_run(self) -> None:
        self._keys.clear()
        self._answers.clear()
        self._last_seen.clear()
        self.last = None

    user_turn = break_run  # a user turn is a run boundary (the name PerCallAnswers calls)

    def state(self) -> dict[str, Any]:
        last = self.last
        return {
            "history": [[key[0], key[1][:8], (ans or "")[:8] or None]
                        for key, ans in zip(self._keys, self._answers, strict=True)],
            "period": last.period if last else 0,
            "repeats": last.repeats if last else 0,
            "pattern": list(last.pattern) if last else [],
            "warn_repeats": self.warn_repeats,
            "halt_repeats": self.halt_repeats,
        }


# ── the Policy adapter and its registration ─────────────────────────────────────────────────

class CyclePolicy(PerCallAnswers):
    def __init__(self, spec: PolicySpec) -> None:
        super().__init__(spec)
        self.detector = CycleDetector(spec.params["max_period"], spec.params["warn_repeats"], spec.params["halt_repeats"])

    def _judge(self, i: int, call: Any) -> tuple[Check, int]:
        d = self.detector
        canon, h = call_key(call)
        v = d.check(call.name, call.args, canon, h)
        threshold = d.halt_repeats if v.action == vocab.HALT else d.warn_repeats
        # plain words: the model reads them in a live warning
        reason = (f"{' → '.join(v.pattern)}: the same {v.period} calls {v.repeats} times in a row, answered the "
                  "same each time") if v.action != vocab.ALLOW else ""
        return Check(i, v.action, v.repeats, v.period, threshold, reason), v.position


DETECTOR = Detector(
    "cycle",
    (
        Param("max_period", INT, DEFAULT_MAX_PERIOD, 2, "longest cycle looked for"),
        Param("warn_repeats", INT, DEFAULT_WARN_REPEATS, 2, "repetitions that warn"),
        Param("halt_repeats", INT, DEFAULT_HALT_REPEATS, 2, "repetitions that halt"),
    ),
    CyclePolicy,
    validate=lambda p: validate(p["max_period"], p["warn_repeats"], p["halt_repeats"]),
    summary="A→B→A→B and longer cycles of calls, answers taken into account",
)
