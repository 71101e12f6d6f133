"""Seed 000's run-length detector (`LoopDetector`) and its prose companion (`StagnationDetector`).

Exactly design.md's rules: a run is an unbroken sequence of batches with one batch signature;
`check` counts before it compares; answers that come back decide whether an occurrence was a
strike (`repeated`) or progress (`changed`, which restarts the count but not the total).

Default observation patterns (substrings, case-insensitive; a batch is an observation batch when
EVERY call's name contains one of them): see DEFAULT_OBSERVATION_TOOLS. They cover Claude Code's
Read / Grep / Glob / WebSearch / WebFetch / NotebookRead, and generic names such as read_file,
view_file, grep_search, search_dir, list_dir, find_file, get_issue, fetch_webpage, and the
browser's reads: browser_navigate, browser_snapshot, browser_take_screenshot. A page load only
observes, but it is not free to repeat: `navigate` (like `click` and `fetch_webpage`) is also a
costly name, so such a batch gets the read-only allowance M yet never the waiver from the ceiling
— the case seed 000's costly rule exists for. `ls` and `cat` are deliberately not patterns: as substrings they would match `tools`, `calls`,
`duplicate`, `concatenate` and loosen the guard on mutating tools.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from enum import StrEnum
from typing import TYPE_CHECKING, Any, NamedTuple

import orjson
import xxhash
from loopledger import vocab
from loopledger.detectors.base import (
    BATCH,
    INT,
    NAMES,
    OPT_INT,
    TEXT,
    Check,
    Param,
    Policy,
    Result,
    signature,
)
from loopledger.detectors.canonical import answers_hash, batch_signature, call_key, fast_canonical, name_args
from loopledger.detectors.errors import ConfigError
from loopledger.detectors.registry import Detector
from loopledger.events import Answer, Batch, Call, text_digest

if TYPE_CHECKING:  # pragma: no cover — the spec grammar imports the detectors, not the reverse
    from loopledger.detectors.policy import PolicySpec

DEFAULT_MAX_STRIKES = 2
DEFAULT_MAX_OBSERVATION_STEPS = 15
DEFAULT_OBSERVATION_TOOLS: tuple[str, ...] = (
    "read", "grep", "glob", "search", "list", "view", "find", "get_", "fetch", "inspect",
    "navigate", "snapshot", "screenshot",
)
DEFAULT_STAGNATION_MAX_STEPS = 5
# How observation patterns meet a tool name. `substring` is seed 000's rule, kept as the default
# for fidelity: a pattern anywhere in the name, even inside a word (`reply_to_thread` holds
# "read", `submit_review` "view", `set_budget_limit` "get_"), so such mutating tools count as
# read-only and get no ceiling. `name-parts` matches whole parts of the name (split on `_ - .`
# and lower→upper case changes): `read_file`, `NotebookRead`, `get_issue`, not `reply_to_thread`.
SUBSTRING, NAME_PARTS = "substring", "name-parts"
MATCHES = (SUBSTRING, NAME_PARTS)
DEFAULT_MATCH = SUBSTRING

# Tools whose repetition is never free even when read-only (a page load, a click, a fetch).
_COSTLY_PARTS = (("navigate",), ("click",), ("fetch", "webpage"))
_SPLIT = re.compile(r"[_.\-]+")
_CASE = re.compile(r"(?<=[a-z0-9])(?=[A-Z])")
_new = tuple.__new__
_dumps, _SORT, _hash = orjson.dumps, orjson.OPT_SORT_KEYS, xxhash.xxh3_128_hexdigest


class RepeatOutcome(StrEnum):
    CHANGED = "changed"
    REPEATED = "repeated"
    NOT_COMPARABLE = "not_comparable"
    NOT_CURRENT = "not_current"


class BatchRecord(NamedTuple):
    """Names the batch `check` counted, for the later `record_results`."""

    signature: str


class LoopDetected(Exception):
    """The run passed its threshold (or a non-exempt batch passed the ceiling)."""

    def __init__(self, signature: str, count: int, total: int, threshold: int, ceiling: int,
                 exempt: bool) -> None:
        self.signature = signature
        self.count = count
        self.total = total
        self.threshold = threshold
        self.ceiling = ceiling
        self.exempt = exempt
        self.by_ceiling = count <= threshold  # only the ceiling tripped
        self.record = BatchRecord(signature)
        why = (f"carried past the ceiling {ceiling} by changing answers (total {total})"
               if self.by_ceiling else f"repeated {count} times (max {threshold})")
        shown = signature if len(signature) <= 200 else signature[:200] + "…"
        super().__init__(f"loop detected: batch {shown} {why}")


def _name_parts(name: str) -> list[str]:
    return [p for p in _SPLIT.split(name.lower()) if p]


def _is_costly_name(name: str) -> bool:
    parts = _name_parts(name)
    for run in _COSTLY_PARTS:
        n = len(run)
        for i in range(len(parts) - n + 1):
            if tuple(parts[i:i + n]) == run:
                return True
    return False


def _word_parts(text: str) -> tuple[str, ...]:
    """A name's words: split on `_ - .` and where lower case turns to upper, lowercased."""
    return tuple(p for p in _SPLIT.split(_CASE.sub("_", text).lower()) if p)


def _parts_match(name: str, pattern: str) -> bool:
    """The pattern's words occur as a contiguous run of the name's words (`get_` is `get`)."""
    want, parts = _word_parts(pattern), _word_parts(name)
    n = len(want)
    return bool(n) and any(parts[i:i + n] == want for i in range(len(parts) - n + 1))


def name_matches(name: str, patterns: Sequence[str], match: str = DEFAULT_MATCH) -> bool:
    """Does one tool name match some observation pattern under the `match` rule?"""
    if match == NAME_PARTS:
        return any(_parts_match(name, p) for p in patterns)
    low = name.lower()
    return any(p.lower() in low for p in patterns)


def inside_word(name: str, patterns: Sequence[str]) -> str | None:
    """The pattern that makes `name` read-only under the substring rule only from inside a word
    (`read` in `reply_to_thread`), or None when some pattern matches whole name parts or none
    matches at all. What Replay and the Session page point out."""
    if not patterns or not name_matches(name, patterns, SUBSTRING) or name_matches(name, patterns, NAME_PARTS):
        return None
    low = name.lower()
    return next(p for p in patterns if p.lower() in low)


def is_observation_batch(calls: Iterable[Any], patterns: Sequence[str], match: str = DEFAULT_MATCH) -> bool:
    """Non-empty patterns and EVERY call's name matches some pattern (case-insensitive; as a
    substring, seed 000's rule, or as whole name parts)."""
    if not patterns:
        return False
    if match == NAME_PARTS:
        return all(name_matches(name_args(c)[0], patterns, NAME_PARTS) for c in calls)
    lowered = [p.lower() for p in patterns]
    for call in calls:
        name = name_args(call)[0].lower()
        if not any(p in name for p in lowered):
            return False
    return True


def is_costly_batch(calls: Iterable[Any]) -> bool:
    """ANY call's name, lowercased and split on `_ - .`, contains navigate / click /
    fetch_webpage as a contiguous run of parts."""
    return any(_is_costly_name(name_args(c)[0]) for c in calls)


@dataclass(slots=True)
class _Run:
    signature: str
    count: int
    total: int
    answers: str | None


@dataclass(frozen=True, slots=True)
class Limits:
    """How one batch was classified and what it is held to (for state and explanations)."""

    observation: bool
    costly: bool
    exempt: bool
    effective_max: int
    ceiling: int

    def __deepcopy__(self, memo: dict[int, Any]) -> Limits:
        return self  # immutable, and many are memoized per detector


def limits(calls: Sequence[Any], max_strikes: int, observation_tools: Sequence[str],
           max_observation_steps: int | None, match: str = DEFAULT_MATCH) -> Limits:
    """The classification and thresholds of one batch (memoized across detectors; `check`
    memoizes per detector in front of this, so this is reached once per new name set)."""
    names = tuple(name_args(c)[0] for c in calls)
    tools = tuple(observation_tools)  # (a tuple stays the same object)
    key = (names, max_strikes, tools, max_observation_steps, match)
    lim = _LIMITS.get(key)
    if lim is None:
        if len(_LIMITS) >= 8192:
            _LIMITS.clear()  # bounded: tool names in a corpus are few, but never trust that
        lim = _LIMITS[key] = _limits(names, max_strikes, tools, max_observation_steps, match)
    return lim


_LIMITS: dict[tuple, Limits] = {}


def _limits(names: tuple[str, ...], max_strikes: int, observation_tools: tuple[str, ...],
            max_observation_steps: int | None, match: str = DEFAULT_MATCH) -> Limits:
    calls = [(n, None) for n in names]
    observation = is_observation_batch(calls, observation_tools, match)
    costly = is_costly_batch(calls)
    obs_max = max_observation_steps if max_observation_steps is not None else max_strikes
    return Limits(
        observation=observation,
        costly=costly,
        exempt=observation and max_observation_steps is not None and not costly,
        effective_max=obs_max if observation else max_strikes,
        ceiling=max(obs_max, max_strikes),
    )


class LoopDetector:
    """Stateful guard: the same batch back to back, getting the same answers back.

    Create one per agent run (or call `break_run` on each user turn). Call `check` before
    executing a batch and `record_results` once its answers are known.
    """

    __slots__ = ("run", "last_limits", "_cfg", "_lims")

    def __init__(self) -> None:
        self.run: _Run | None = None
        self.last_limits: Limits | None = None
        self._cfg: tuple | None = None
        self._lims: dict[tuple[str, ...], Limits] = {}

    def check(self, calls: Sequence[Any], max_strikes: int = DEFAULT_MAX_STRIKES,
              observation_tools: Sequence[str] = DEFAULT_OBSERVATION_TOOLS,
              max_observation_steps: int | None = DEFAULT_MAX_OBSERVATION_STEPS,
              signature: str | None = None, match: str = DEFAULT_MATCH) -> BatchRecord:
        """Count this batch, then raise `LoopDetected` if it has now repeated too often.

        `calls`: `loopledger.events.Call`s or `(name, args)` pairs; must be non-empty (a prose turn
        or a tool result is transparent: callers skip empty batches). `signature` lets a caller
        that already computed `batch_signature(calls)` pass it in.
        """
        if not calls:
            raise ValueError("LoopDetector.check: empty batch (callers skip batches without calls)")
        if signature is not None:
            sig = signature
        elif len(calls) == 1 and type(calls[0]) is Call:  # the common case, inlined
            args = calls[0].args
            try:
                canon = _dumps(args, option=_SORT) if args is not None else b"{}"
            except TypeError:
                canon = fast_canonical(args)
            sig = calls[0].name + ":" + _hash(canon)
        else:
            sig = batch_signature(calls)
        # Classification depends only on the names and the configuration: memoized per detector
        # (the configuration is compared by identity first, the common case of one policy).
        tools = tuple(observation_tools)  # (a tuple stays the same object: compared by identity below)
        cfg = self._cfg
        if (cfg is None or (cfg[1] is not tools and cfg[1] != tools) or cfg[0] != max_strikes
                or cfg[2] != max_observation_steps or cfg[3] != match):
            self._cfg = (max_strikes, tools, max_observation_steps, match)
            self._lims = {}
        if len(calls) == 1:
            c = calls[0]
            names: tuple[str, ...] = (c.name if type(c) is Call else name_args(c)[0],)
        else:
            names = tuple(name_args(c)[0] for c in calls)
        lim = self._lims.get(names)
        if lim is None:
            if len(self._lims) >= 4096:
                self._lims.clear()
            lim = self._lims[names] = limits(calls, max_strikes, observation_tools, max_observation_steps, match)
        self.last_limits = lim
        run = self.run
        if run is None:
            run = self.run = _Run(sig, 1, 1, None)
        elif run.signature == sig:
            run.count += 1
            run.total += 1
        else:  # a new run: reuse the object, forget count, total and answers
            run.signature, run.count, run.total, run.answers = sig, 1, 1, None
        if run.count > lim.effective_max or (not lim.exempt and run.total > lim.ceiling):
            raise LoopDetected(sig, run.count, run.total, lim.effective_max, lim.ceiling, lim.exempt)
        return _new(BatchRecord, (sig,))  # tuple.__new__: no Python-level __new__ on the hot path

    def record_results(self, record: BatchRecord, answers: str | None) -> RepeatOutcome:
        """Record what the batch named by `record` got back (`answers` = `answers_hash(...)`,
        None when any answer is unknown)."""
        run = self.run
        if run is None or record.signature != run.signature:
            return RepeatOutcome.NOT_CURRENT
        previous = run.answers
        if previous is not None and answers is not None:
            if previous != answers:
                run.count = 1
                outcome = RepeatOutcome.CHANGED
            else:
                outcome = RepeatOutcome.REPEATED
        else:
            outcome = RepeatOutcome.NOT_COMPARABLE
        run.answers = answers
        return outcome

    def __deepcopy__(self, memo: dict[int, Any]) -> LoopDetector:
        # The run is the only mutable state; limits and their memo are immutable or pure caches.
        new = LoopDetector.__new__(LoopDetector)
        run = self.run
        new.run = None if run is None else _Run(run.signature, run.count, run.total, run.answers)
        new.last_limits, new._cfg, new._lims = self.last_limits, self._cfg, self._lims
        return new

    def break_run(self) -> None:
        """Forget the current run, as a user turn does."""
        self.run = None
        self.last_limits = None

    def state(self) -> dict[str, Any]:
        run, lim = self.run, self.last_limits
        out: dict[str, Any] = {
            "signature": run.signature if run else None,
            "count": run.count if run else 0,
            "total": run.total if run else 0,
            "answers": run.answers if run else None,
        }
        if lim is not None:
            out.update(observation=lim.observation, costly=lim.costly, exempt=lim.exempt,
                       effective_max=lim.effective_max, ceiling=lim.ceiling)
        return out


class StagnationDetected(Exception):
    """The same prose turn came back more than `max_steps` times in the recent window."""

    def __init__(self, text: str, count: int, max_steps: int, window: int) -> None:
        self.text = text
        self.count = count
        self.max_steps = max_steps
        self.window = window
        shown = text if len(text) <= 80 else text[:80] + "…"
        super().__init__(f"stagnation: the same reply {count} times in the last {window} prose "
                         f"turns (max {max_steps}): {shown!r}")


class StagnationDetector:
    """Prose loops (seed 000's ADR 0011 companion): the same assistant reply over and over.

    A turn that called a tool is not recorded at all; empty text is ignored; a user turn clears.
    Texts are compared exactly, through their digest (long replies are not kept)."""

    __slots__ = ("recent",)

    def __init__(self) -> None:
        self.recent: list[str] = []  # digests, oldest first

    def record(self, text: str, called_tool: bool, max_steps: int = DEFAULT_STAGNATION_MAX_STEPS,
               ) -> int:
        """Record one assistant turn; return the text's count in the window (0 when not
        recorded); raise `StagnationDetected` when that count exceeds `max_steps`."""
        if called_tool or not text:
            return 0
        window = max(4 * max_steps, 1)
        key = text_digest(text)
        self.recent.append(key)
        if len(self.recent) > window:
            del self.recent[: len(self.recent) - window]
        count = self.recent.count(key)
        if count > max_steps:
            raise StagnationDetected(text, count, max_steps, window)
        return count

    def break_run(self) -> None:
        self.recent.clear()

    def state(self) -> dict[str, Any]:
        counts: dict[str, int] = {}
        for key in self.recent:
            counts[key] = counts.get(key, 0) + 1
        top = sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))[:5]
        return {"recorded": len(self.recent),
                "top": [{"text_hash": k[:12], "count": c} for k, c in top]}


# ── the Policy adapter and its registration ─────────────────────────────────────────────────


class RunLengthPolicy(Policy):
    per_call = False
    reads_answers = True

    def __init__(self, spec: PolicySpec) -> None:
        super().__init__(spec)
        p = spec.params
        self.max_strikes: int = p["max_strikes"]
        self.max_obs: int | None = p["max_observation_steps"]
        self.tools: tuple[str, ...] = tuple(p["observation_tools"])
        self.match: str = p["match"]
        self.detector = LoopDetector()
        self._last: tuple[Batch, BatchRecord] | None = None

    def user_turn(self) -> None:
        self.detector.break_run()
        self._last = None

    def check(self, batch: Batch) -> list[Check]:
        if not batch.calls:
            return []
        sig = signature(batch)
        self._last = (batch, BatchRecord(sig))
        try:
            self.detector.check(batch.calls, self.max_strikes, self.tools, self.max_obs, signature=sig,
                                match=self.match)
        except LoopDetected as e:
            reason = (f"carried past the ceiling {e.ceiling} by changing answers"
                      if e.by_ceiling else f"same batch {e.count} times in a row (max {e.threshold})")
            return [Check(BATCH, vocab.HALT, e.count, e.total, e.threshold, reason)]
        run, lim = self.detector.run, self.detector.last_limits
        assert run is not None and lim is not None
        return [Check(BATCH, vocab.ALLOW, run.count, run.total, lim.effective_max, "")]

    def answers(self, batch: Batch, answers: Sequence[Answer | None]) -> list[Result]:
        if not batch.calls:
            return []
        if self._last is not None and self._last[0] is batch:
            record = self._last[1]
        else:
            record = BatchRecord(signature(batch))
        sigs = [c.name + ":" + call_key(c)[1] for c in batch.calls]
        outcome = self.detector.record_results(record, answers_hash(batch.calls, answers, sigs))
        return [Result(BATCH, outcome.value)]

    def state(self) -> dict[str, Any]:
        out = {**self.detector.state(), "max_strikes": self.max_strikes,
               "max_observation_steps": self.max_obs, "match": self.match}
        last = self._last
        if out.get("observation") and self.match == SUBSTRING and last is not None:
            # Read-only only because a pattern sits inside a word: say which, and where.
            found = {c.name: inside_word(c.name, self.tools) for c in last[0].calls}
            out["inside_word"] = {n: p for n, p in found.items() if p is not None}
        return out


class StagnationPolicy(Policy):
    per_call = False
    reads_prose = True

    def __init__(self, spec: PolicySpec) -> None:
        super().__init__(spec)
        self.max_steps: int = spec.params["max_steps"]
        self.detector = StagnationDetector()

    def user_turn(self) -> None:
        self.detector.break_run()

    def prose(self, text: str) -> list[Check]:
        if not text:
            return []
        try:
            count = self.detector.record(text, False, self.max_steps)
        except StagnationDetected as e:
            return [Check(BATCH, vocab.HALT, e.count, None, e.max_steps,
                          f"the same reply {e.count} times in the last {e.window} prose turns")]
        return [Check(BATCH, vocab.ALLOW, count, None, self.max_steps, "")]

    def check(self, batch: Batch) -> list[Check]:
        # A turn that called a tool is not recorded at all (seed 000, ADR 0011).
        return []

    def state(self) -> dict[str, Any]:
        return {**self.detector.state(), "max_steps": self.max_steps,
                "window": max(4 * self.max_steps, 1)}


def _validate_match(params: dict[str, Any]) -> None:
    if params["match"] not in MATCHES:
        raise ConfigError("match", "match is substring or name-parts",
                          f"run-length: match must be one of {', '.join(MATCHES)}, got {params['match']!r}")


RUN_LENGTH = Detector(
    "run-length",
    (
        Param("max_strikes", INT, DEFAULT_MAX_STRIKES, 0, "identical batches allowed in a run"),
        Param("max_observation_steps", OPT_INT, DEFAULT_MAX_OBSERVATION_STEPS, 0,
              "read-only allowance; none turns the tier off"),
        Param("observation_tools", NAMES, DEFAULT_OBSERVATION_TOOLS, 0,
              "name patterns that make a call read-only"),
        Param("match", TEXT, DEFAULT_MATCH, 0,
              "how observation_tools meet a tool name: substring (seed 000: anywhere, even inside a "
              "word, so reply_to_thread counts as read) or name-parts (whole words of the name)"),
    ),
    RunLengthPolicy,
    validate=_validate_match,
    summary="the same batch of calls back to back with the same answers (gglib's loop detector)",
)

STAGNATION = Detector(
    "stagnation",
    (Param("max_steps", INT, DEFAULT_STAGNATION_MAX_STEPS, 0,
           "times one prose reply may recur in the last 4×max_steps"),),
    StagnationPolicy,
    summary="the same prose reply over and over (gglib's stagnation check)",
)
