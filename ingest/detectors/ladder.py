"""Seed 002's graded ladder: warn → block → halt on consecutive identical calls.

Judged per call (a batch of k calls is k checks in emission order). `count` is the length of the
run of identical `(tool, canonical args)` keys ending at this call; a different key restarts it at
1, blocked calls count, a user turn resets. Read-only tools may get looser thresholds; a tool the
classifier does not know is mutating.

Default read-only classifier (`is_read_only_default`): the lowercased name is one of
DEFAULT_READ_ONLY_TOOLS (Claude Code's Read, Grep, Glob, LS, WebSearch, NotebookRead; generic
read_file, view_file, view, cat, ls, grep, grep_search, search, list, find, open, goto, scroll_*),
or starts with one of READ_ONLY_PREFIXES (get_, list_, read_, search_, find_, view_). Names are
matched whole, not as substrings, so `delete_list` or `thread_post` are not read-only.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, NamedTuple

import orjson
import xxhash
from loopledger import vocab
from loopledger.detectors.base import INT, NAMES, Check, Param, Policy
from loopledger.detectors.canonical import call_key, canonical_bytes
from loopledger.detectors.errors import ConfigError
from loopledger.detectors.registry import Detector
from loopledger.events import Batch

if TYPE_CHECKING:  # pragma: no cover — the spec grammar imports the detectors, not the reverse
    from loopledger.detectors.policy import PolicySpec

DEFAULT_READ_ONLY_TOOLS: tuple[str, ...] = (
    "read", "grep", "glob", "ls", "websearch", "notebookread", "read_file", "view_file", "view",
    "cat", "grep_search", "search", "list", "list_dir", "list_files", "find", "find_file",
    "search_dir", "search_file", "open", "goto", "scroll_up", "scroll_down",
)
READ_ONLY_PREFIXES: tuple[str, ...] = ("get_", "list_", "read_", "search_", "find_", "view_")

ALLOW, WARN, BLOCK, HALT = "allow", "warn", "block", "halt"
REASON = "repeated_tool_calls"
# What a live agent loop tells the model (seed 002): appended to the real result on warn; the
# synthetic error result for that call id on block (every call id gets exactly one result).
WARN_NOTICE = ("[System Notice] You have executed this tool repeatedly with identical arguments "
               "without progress. Do not repeat identical calls. Adjust your search pattern, change "
               "the target path, or switch tools.")
BLOCK_MESSAGE = ("Blocked: this exact call (same tool, same arguments) was repeated too many times "
                 "in a row and was not executed. Change the arguments or use another tool.")
_dumps, _SORT, _hash, _new = orjson.dumps, orjson.OPT_SORT_KEYS, xxhash.xxh3_128_hexdigest, tuple.__new__
READ_ONLY, MUTATING = "read_only", "mutating"


@dataclass(frozen=True, slots=True)
class Thresholds:
    """`warn_at < block_at < halt_at`, each ≥ 2 (defaults 2 / 3 / 4: the seed's HALT_AFTER = 4)."""

    warn_at: int = 2
    block_at: int = 3
    halt_at: int = 4

    def __deepcopy__(self, memo: dict[int, Any]) -> Thresholds:
        return self  # immutable

    def validate(self, prefix: str = "") -> Thresholds:
        for name in ("warn_at", "block_at", "halt_at"):
            value = getattr(self, name)
            if not isinstance(value, int) or value < 2:  # (True and False are < 2 too)
                raise ConfigError(prefix + name, f"{name} >= 2",
                                  f"{prefix}{name}: must be an integer >= 2, got {value!r}")
        if not self.warn_at < self.block_at:
            raise ConfigError(prefix + "block_at", "warn_at < block_at",
                              f"{prefix}block_at: must be greater than warn_at "
                              f"({self.warn_at}), got {self.block_at}")
        if not self.block_at < self.halt_at:
            raise ConfigError(prefix + "halt_at", "block_at < halt_at",
                              f"{prefix}halt_at: must be greater than block_at "
                              f"({self.block_at}), got {self.halt_at}")
        return self

    def action(self, count: int) -> str:
        if count >= self.halt_at:
            return HALT
        if count >= self.block_at:
            return BLOCK
        if count >= self.warn_at:
            return WARN
        return ALLOW


class LadderVerdict(NamedTuple):
    action: str  # allow | warn | block | halt
    count: int
    tool: str
    args: str  # canonical JSON of the arguments
    reason: str  # "repeated_tool_calls" unless allowed
    tool_class: str  # read_only | mutating
    threshold: int  # the rung reached (or warn_at when allowed)


def is_read_only_default(name: str) -> bool:
    low = name.lower()
    return low in _READ_ONLY_SET or low.startswith(READ_ONLY_PREFIXES)


_READ_ONLY_SET = frozenset(DEFAULT_READ_ONLY_TOOLS)


def classifier(read_only: Iterable[str] | Callable[[str], bool] | None) -> Callable[[str], bool]:
    """A read-only test from a callable, a list of names (exact, case-insensitive) or None."""
    if read_only is None:
        return is_read_only_default
    if callable(read_only):
        return read_only
    names = frozenset(n.lower() for n in read_only)
    return lambda name: name.lower() in names


class LadderGuard:
    """Graded escalation on consecutive identical calls (seed 002)."""

    __slots__ = ("mutating", "read_only", "_is_read_only", "_classes", "_tables", "key", "args", "count")

    def __init__(self, mutating: Thresholds | None = None, read_only: Thresholds | None = None,
                 read_only_tools: Iterable[str] | Callable[[str], bool] | None = None) -> None:
        self.mutating = (mutating or Thresholds()).validate("")
        self.read_only = (read_only or Thresholds()).validate("read_only_")
        self._is_read_only = classifier(read_only_tools)
        self._classes: dict[str, bool] = {}
        # (action, rung) by count, up to halt_at: one lookup per call instead of three compares.
        # Bounded (a halt_at of 10**9 is legal): counts past the table are computed.
        self._tables = {cls: [(t.action(n), _rung(t, n)) for n in range(min(t.halt_at, 64) + 1)]
                        for cls, t in ((MUTATING, self.mutating), (READ_ONLY, self.read_only))}
        self.key: tuple[str, str] | None = None
        self.args = ""
        self.count = 0

    def tool_class(self, name: str) -> str:
        ro = self._classes.get(name)
        if ro is None:
            ro = bool(self._is_read_only(name))
            if len(self._classes) < 4096:
                self._classes[name] = ro
        return READ_ONLY if ro else MUTATING

    def check(self, name: str, args: Any, canonical: bytes | None = None,
              args_digest: str | None = None) -> LadderVerdict:
        """Judge one call before it executes. `canonical` / `args_digest` let a caller pass
        `canonical_bytes(args)` and its digest when it already has them."""
        if canonical is None:
            try:
                canonical = _dumps(args, option=_SORT) if args is not None else b"{}"
            except TypeError:
                canonical = canonical_bytes(args)
        canon = canonical
        h = args_digest if args_digest is not None else _hash(canon)
        key = self.key
        if key is not None and key[1] == h and key[0] == name:
            self.count += 1
        else:
            self.key, self.count = (name, h), 1
            self.args = canon.decode("utf-8", "surrogatepass")
        ro = self._classes.get(name)
        if ro is None:
            ro = self.tool_class(name) == READ_ONLY
        cls = READ_ONLY if ro else MUTATING
        table = self._tables[cls]
        count = self.count
        if count < len(table):
            action, rung = table[count]
        else:
            t = self.read_only if ro else self.mutating
            action, rung = t.action(count), _rung(t, count)
        # tuple.__new__ skips the NamedTuple's Python-level __new__: this is the hot path.
        return _new(LadderVerdict, (action, count, name, self.args, "" if action == ALLOW else REASON,
                                    cls, rung))

    def break_run(self) -> None:
        self.key, self.args, self.count = None, "", 0

    def state(self) -> dict[str, Any]:
        if self.key is None:
            return {"tool": None, "args_hash": None, "count": 0, "class": None}
        cls = self.tool_class(self.key[0])
        t = self.read_only if cls == READ_ONLY else self.mutating
        return {"tool": self.key[0], "args_hash": self.key[1], "count": self.count, "class": cls,
                "warn_at": t.warn_at, "block_at": t.block_at, "halt_at": t.halt_at,
                "next": t.action(self.count + 1)}


def _rung(t: Thresholds, count: int) -> int:
    if count >= t.halt_at:
        return t.halt_at
    if count >= t.block_at:
        return t.block_at
    return t.warn_at


# ── the Policy adapter and its registration ─────────────────────────────────────────────────

class LadderPolicy(Policy):
    def __init__(self, spec: PolicySpec) -> None:
        super().__init__(spec)
        self.guard = _guard(spec.params)

    def user_turn(self) -> None:
        self.guard.break_run()

    def check(self, batch: Batch) -> list[Check]:
        out = []
        for i, call in enumerate(batch.calls):
            canon, h = call_key(call)
            v = self.guard.check(call.name, call.args, canon, h)
            out.append(Check(i, v.action, v.count, None, v.threshold,
                             f"{v.reason}: {v.tool} ×{v.count} ({v.tool_class})" if v.reason else ""))
            if v.action == vocab.HALT:
                break
        return out

    def state(self) -> dict[str, Any]:
        return self.guard.state()


def _guard(p: Any) -> LadderGuard:
    return LadderGuard(
        Thresholds(p["warn_at"], p["block_at"], p["halt_at"]),
        Thresholds(p["read_only_warn_at"], p["read_only_block_at"], p["read_only_halt_at"]),
        p["read_only_tools"] or None,
    )


DETECTOR = Detector(
    "ladder",
    (
        Param("warn_at", INT, 2, 2, "mutating: warn at this many identical calls in a row"),
        Param("block_at", INT, 3, 2, "mutating: block at"),
        Param("halt_at", INT, 4, 2, "mutating: halt at"),
        Param("read_only_warn_at", INT, 2, 2, "read-only: warn at"),
        Param("read_only_block_at", INT, 3, 2, "read-only: block at"),
        Param("read_only_halt_at", INT, 4, 2, "read-only: halt at"),
        Param("read_only_tools", NAMES, (), 0,
              "exact read-only tool names; empty = the default classifier"),
    ),
    LadderPolicy,
    validate=_guard,  # Thresholds raise ConfigError naming the field (warn < block < halt)
    summary="warn, then block, then halt on consecutive identical calls (a graded ladder guard)",
)
