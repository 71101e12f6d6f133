"""Policies: one detector with one set of parameters, behind one interface for the ledger.

A spec is written `DETECTOR[:NAME=VALUE,NAME=VALUE...]`, e.g.

    run-length                                  (every parameter at its default)
    run-length:max_strikes=3,max_observation_steps=none,observation_tools=read|grep
    window:window=10,threshold=4
    ladder:warn_at=2,block_at=3,halt_at=4,read_only_halt_at=6

Values: integers; `none` for "off" where a parameter allows it; name lists separated by `|`
(an empty value is an empty list). Unknown detectors or parameters, bad values and broken rules
raise `ConfigError` naming the field.

Detectors and parameters (defaults in brackets):

    run-length   max_strikes [2], max_observation_steps [15; none = no read-only tier],
                 observation_tools [read|grep|glob|search|list|view|find|get_|fetch|inspect]
                 (substrings, case-insensitive; see run_length.py)
    stagnation   max_steps [5]
    ladder       warn_at [2], block_at [3], halt_at [4] (mutating tools),
                 read_only_warn_at [2], read_only_block_at [3], read_only_halt_at [4],
                 read_only_tools [default classifier: exact names and get_/list_/read_/search_/
                 find_/view_ prefixes, see ladder.py; a list replaces it with exact names]
    window       window [8], threshold [3]
    cycle        max_period [6], warn_repeats [3], halt_repeats [4]

Every policy speaks the shared words: checks `allow | warn | block | halt` (`after_halt` is the
replay engine's), results `repeated | changed | not_comparable | not_current` (run-length only:
the others do not judge answers).

What a Check's numbers mean, per detector (idx -1 = the whole batch):

    run-length   idx -1; count = run length, total = run total, threshold = effective max
    stagnation   idx -1 on prose turns; count = occurrences in the window, threshold = max_steps
    ladder       per call; count = identical calls in a row, threshold = the rung reached
    window       per call; count = occurrences in the window, threshold = threshold
    cycle        per call; count = repetitions k, total = period p (0: none), threshold =
                 warn_repeats (halt_repeats on a halt)
"""

from __future__ import annotations

import copy
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, NamedTuple

from loopledger import vocab
from loopledger.detectors import cycle as cycle_mod
from loopledger.detectors import ladder as ladder_mod
from loopledger.detectors import run_length as rl
from loopledger.detectors import window as window_mod
from loopledger.detectors.canonical import (
    answers_hash,
    call_key,
    canonical_bytes,
    canonical_json,
    digest,
)
from loopledger.detectors.errors import ConfigError
from loopledger.events import Answer, Batch

INT, OPT_INT, NAMES = "int", "int_or_none", "names"


@dataclass(frozen=True, slots=True)
class Param:
    name: str
    kind: str  # INT | OPT_INT | NAMES
    default: Any
    minimum: int = 0
    help: str = ""


PARAMS: dict[str, tuple[Param, ...]] = {
    "run-length": (
        Param("max_strikes", INT, rl.DEFAULT_MAX_STRIKES, 0, "identical batches allowed in a run"),
        Param("max_observation_steps", OPT_INT, rl.DEFAULT_MAX_OBSERVATION_STEPS, 0,
              "read-only allowance; none turns the tier off"),
        Param("observation_tools", NAMES, rl.DEFAULT_OBSERVATION_TOOLS, 0,
              "name substrings that make a call read-only"),
    ),
    "stagnation": (
        Param("max_steps", INT, rl.DEFAULT_STAGNATION_MAX_STEPS, 0,
              "times one prose reply may recur in the last 4×max_steps"),
    ),
    "ladder": (
        Param("warn_at", INT, 2, 2, "mutating: warn at this many identical calls in a row"),
        Param("block_at", INT, 3, 2, "mutating: block at"),
        Param("halt_at", INT, 4, 2, "mutating: halt at"),
        Param("read_only_warn_at", INT, 2, 2, "read-only: warn at"),
        Param("read_only_block_at", INT, 3, 2, "read-only: block at"),
        Param("read_only_halt_at", INT, 4, 2, "read-only: halt at"),
        Param("read_only_tools", NAMES, (), 0,
              "exact read-only tool names; empty = the default classifier"),
    ),
    "window": (
        Param("window", INT, window_mod.DEFAULT_WINDOW, 2, "calls remembered"),
        Param("threshold", INT, window_mod.DEFAULT_THRESHOLD, 2, "occurrences in the window that halt"),
    ),
    "cycle": (
        Param("max_period", INT, cycle_mod.DEFAULT_MAX_PERIOD, 2, "longest cycle looked for"),
        Param("warn_repeats", INT, cycle_mod.DEFAULT_WARN_REPEATS, 2, "repetitions that warn"),
        Param("halt_repeats", INT, cycle_mod.DEFAULT_HALT_REPEATS, 2, "repetitions that halt"),
    ),
}
DETECTORS = tuple(PARAMS)


def _coerce(detector: str, param: Param, value: Any) -> Any:
    field = param.name
    if isinstance(value, str):
        text = value.strip()
        if param.kind == NAMES:
            return tuple(n.strip() for n in text.split("|") if n.strip())
        if text.lower() in ("none", "null", "off"):
            if param.kind != OPT_INT:
                raise ConfigError(field, f"{field} is required",
                                  f"{detector}: {field} cannot be none (an integer >= {param.minimum})")
            return None
        try:
            value = int(text)
        except ValueError:
            raise ConfigError(field, f"{field} is an integer",
                              f"{detector}: {field} must be an integer, got {text!r}") from None
    if param.kind == NAMES:
        if not isinstance(value, list | tuple) or not all(isinstance(v, str) for v in value):
            raise ConfigError(field, f"{field} is a list of names",
                              f"{detector}: {field} must be a list of tool names, got {value!r}")
        return tuple(value)
    if value is None and param.kind == OPT_INT:
        return None
    if not isinstance(value, int) or isinstance(value, bool):
        raise ConfigError(field, f"{field} is an integer",
                          f"{detector}: {field} must be an integer, got {value!r}")
    if value < param.minimum:
        raise ConfigError(field, f"{field} >= {param.minimum}",
                          f"{detector}: {field} must be >= {param.minimum}, got {value}")
    return value


def complete_params(detector: str, params: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """Defaults filled, values coerced and validated (ConfigError names the field)."""
    if detector not in PARAMS:
        raise ConfigError("detector", "known detector",
                          f"unknown detector {detector!r}; known: {', '.join(DETECTORS)}")
    schema = {p.name: p for p in PARAMS[detector]}
    params = dict(params or {})
    unknown = sorted(set(params) - set(schema))
    if unknown:
        raise ConfigError(unknown[0], "known parameter",
                          f"{detector}: unknown parameter {unknown[0]!r}; "
                          f"known: {', '.join(schema)}")
    out = {name: _coerce(detector, p, params[name]) if name in params else p.default
           for name, p in schema.items()}
    _build(detector, out)  # cross-field rules (block_at > warn_at, threshold <= window …)
    return out


@dataclass(frozen=True, eq=False)
class PolicySpec:
    """A detector and its complete parameters. Equal specs have equal `id`s."""

    detector: str
    params: Mapping[str, Any] = None  # type: ignore[assignment]

    def __post_init__(self) -> None:
        params = complete_params(self.detector, self.params)
        object.__setattr__(self, "params", params)
        # Computed once: the worker and the pages ask for the id of every spec often.
        object.__setattr__(self, "_id", digest(canonical_bytes({"detector": self.detector, "params": params})))

    @property
    def params_json(self) -> str:
        return canonical_json(self.params)

    @property
    def id(self) -> str:
        """Digest of the canonical JSON of {"detector", "params"} (32 hex digits)."""
        return self._id  # type: ignore[attr-defined]

    @property
    def label(self) -> str:
        parts = [self.detector]
        for p in PARAMS[self.detector]:
            value = self.params[p.name]
            if p.kind == NAMES:
                if tuple(value) != tuple(p.default):
                    parts.append(f"{p.name}={'|'.join(value) or '(none)'}")
            else:
                parts.append(f"{p.name}={'none' if value is None else value}")
        return " ".join(parts)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, PolicySpec) and other.id == self.id

    def __deepcopy__(self, memo: dict[int, Any]) -> PolicySpec:
        return self  # immutable

    def __hash__(self) -> int:
        return hash(self.id)

    def __repr__(self) -> str:
        return f"PolicySpec({self.label!r})"

    def with_params(self, **changes: Any) -> PolicySpec:
        return PolicySpec(self.detector, {**self.params, **changes})

    @property
    def text(self) -> str:
        """The spec in the syntax `parse` reads (round-trips)."""
        items = []
        for p in PARAMS[self.detector]:
            v = self.params[p.name]
            items.append(f"{p.name}={'|'.join(v) if p.kind == NAMES else ('none' if v is None else v)}")
        return f"{self.detector}:{','.join(items)}"

    @classmethod
    def parse(cls, text: str, extra: Sequence[str] = ()) -> PolicySpec:
        """`DETECTOR[:NAME=VALUE,...]`, plus `extra` `NAME=VALUE` strings (the CLI's --param)."""
        detector, _, rest = text.strip().partition(":")
        detector = detector.strip()
        params: dict[str, Any] = {}
        items = [i for i in rest.split(",") if i.strip()] + list(extra)
        for item in items:
            name, eq, value = item.partition("=")
            if not eq or not name.strip():
                raise ConfigError(name.strip() or "spec", "NAME=VALUE",
                                  f"policy spec {text!r}: {item.strip()!r} is not NAME=VALUE")
            params[name.strip()] = value
        return cls(detector, params)


class Check(NamedTuple):
    """A verdict on a batch (idx = -1) or on one call (idx = its index), taken before it runs.

    A NamedTuple rather than a frozen dataclass: one is built per call per policy, and a frozen
    dataclass costs several times more to construct."""

    idx: int
    verdict: str
    count: int | None = None
    total: int | None = None
    threshold: int | None = None
    reason: str = ""


class Result(NamedTuple):
    """What a policy made of a batch's answers; `seq` is the judged batch's (set by replay)."""

    idx: int
    outcome: str
    seq: int = -1


BATCH = -1


class Policy:
    """Base: a policy sees run boundaries, prose turns, batches (before they run) and answers."""

    per_call = True
    reads_answers = False  # False: the replay engine need not collect answers for it
    reads_prose = False  # True: prose turns are checked (and after a halt, marked after_halt)

    # Attributes a deep copy shares instead of copying: immutable, or holding an event (events
    # are immutable, and copying one with 10,000-deep arguments would overflow deepcopy).
    _shared: tuple[str, ...] = ("spec", "_last", "_positions", "tools")

    def __init__(self, spec: PolicySpec) -> None:
        self.spec = spec

    @classmethod
    def enforced(cls, db: str | None = None) -> Policy:
        """A fresh policy for the ledger's enforced setting ("Enforce this setting" on Compare,
        `loopledger enforce`); the default (ladder) when none is chosen. `db`: a SQLite path or
        a database URL, as `--db` takes (default: $LOOPLEDGER_DATABASE_URL, $LOOPLEDGER_DB,
        ./ledger.sqlite). Raises loopledger.live_db.LedgerUnavailable when there is no ledger."""
        from loopledger import enforce, live_db

        with live_db.open_db(db) as conn:
            spec = enforce.enforced_or_default(conn)
        return make_policy(spec)

    def __deepcopy__(self, memo: dict[int, Any]) -> Policy:
        """A snapshot for the Replay page: detector state copied, spec and events shared."""
        new = copy.copy(self)
        for name, value in vars(self).items():
            if name not in self._shared:
                setattr(new, name, copy.deepcopy(value, memo))
        return new

    def user_turn(self) -> None:
        raise NotImplementedError

    def prose(self, text: str) -> list[Check]:
        return []

    def check(self, batch: Batch) -> list[Check]:
        """Checks in call order; a per-call policy stops after a halt (replay marks the rest)."""
        raise NotImplementedError

    def answers(self, batch: Batch, answers: Sequence[Answer | None]) -> list[Result]:
        return []

    def state(self) -> dict[str, Any]:
        raise NotImplementedError


def signature(batch: Batch) -> str:
    """batch_signature(batch.calls), from the canonical forms shared by all policies."""
    calls = batch.calls
    if len(calls) == 1:
        return calls[0].name + ":" + call_key(calls[0])[1]
    return "|".join(sorted(c.name + ":" + call_key(c)[1] for c in calls))


class RunLengthPolicy(Policy):
    per_call = False
    reads_answers = True

    def __init__(self, spec: PolicySpec) -> None:
        super().__init__(spec)
        p = spec.params
        self.max_strikes: int = p["max_strikes"]
        self.max_obs: int | None = p["max_observation_steps"]
        self.tools: tuple[str, ...] = tuple(p["observation_tools"])
        self.detector = rl.LoopDetector()
        self._last: tuple[Batch, rl.BatchRecord] | None = None

    def user_turn(self) -> None:
        self.detector.break_run()
        self._last = None

    def check(self, batch: Batch) -> list[Check]:
        if not batch.calls:
            return []
        sig = signature(batch)
        self._last = (batch, rl.BatchRecord(sig))
        try:
            self.detector.check(batch.calls, self.max_strikes, self.tools, self.max_obs, signature=sig)
        except rl.LoopDetected as e:
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
            record = rl.BatchRecord(signature(batch))
        sigs = [c.name + ":" + call_key(c)[1] for c in batch.calls]
        outcome = self.detector.record_results(record, answers_hash(batch.calls, answers, sigs))
        return [Result(BATCH, outcome.value)]

    def state(self) -> dict[str, Any]:
        return {**self.detector.state(), "max_strikes": self.max_strikes,
                "max_observation_steps": self.max_obs}


class StagnationPolicy(Policy):
    per_call = False
    reads_prose = True

    def __init__(self, spec: PolicySpec) -> None:
        super().__init__(spec)
        self.max_steps: int = spec.params["max_steps"]
        self.detector = rl.StagnationDetector()

    def user_turn(self) -> None:
        self.detector.break_run()

    def prose(self, text: str) -> list[Check]:
        if not text:
            return []
        try:
            count = self.detector.record(text, False, self.max_steps)
        except rl.StagnationDetected as e:
            return [Check(BATCH, vocab.HALT, e.count, None, e.max_steps,
                          f"the same reply {e.count} times in the last {e.window} prose turns")]
        return [Check(BATCH, vocab.ALLOW, count, None, self.max_steps, "")]

    def check(self, batch: Batch) -> list[Check]:
        # A turn that called a tool is not recorded at all (seed 000, ADR 0011).
        return []

    def state(self) -> dict[str, Any]:
        return {**self.detector.state(), "max_steps": self.max_steps,
                "window": max(4 * self.max_steps, 1)}


class LadderPolicy(Policy):
    def __init__(self, spec: PolicySpec) -> None:
        super().__init__(spec)
        self.guard = _build("ladder", spec.params)

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


class WindowPolicy(Policy):
    def __init__(self, spec: PolicySpec) -> None:
        super().__init__(spec)
        self.guard = _build("window", spec.params)

    def user_turn(self) -> None:
        self.guard.reset()

    def check(self, batch: Batch) -> list[Check]:
        out = []
        g = self.guard
        for i, call in enumerate(batch.calls):
            try:
                count = g.record(call.name, call.args, (call.name, call_key(call)[0].decode("utf-8", "surrogatepass")))
            except window_mod.LoopDetectedError as e:
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


class CyclePolicy(Policy):
    reads_answers = True
    def __init__(self, spec: PolicySpec) -> None:
        super().__init__(spec)
        self.detector = _build("cycle", spec.params)
        self._positions: tuple[Batch, list[int]] | None = None

    def user_turn(self) -> None:
        self.detector.break_run()
        self._positions = None

    def check(self, batch: Batch) -> list[Check]:
        out = []
        positions: list[int] = []
        d = self.detector
        for i, call in enumerate(batch.calls):
            canon, h = call_key(call)
            v = d.check(call.name, call.args, canon, h)
            positions.append(v.position)
            threshold = d.halt_repeats if v.action == vocab.HALT else d.warn_repeats
            reason = (f"period {v.period} ×{v.repeats}: {' → '.join(v.pattern)}"
                      if v.action != vocab.ALLOW else "")
            out.append(Check(i, v.action, v.repeats, v.period, threshold, reason))
            if v.action == vocab.HALT:
                break
        self._positions = (batch, positions)
        return out

    def answers(self, batch: Batch, answers: Sequence[Answer | None]) -> list[Result]:
        if self._positions is None or self._positions[0] is not batch:
            return []  # the history moved on; an answer for an older batch changes nothing
        for i, position in enumerate(self._positions[1]):
            self.detector.record_answer(answers[i], position=position)
        return []

    def state(self) -> dict[str, Any]:
        return self.detector.state()


_POLICIES: dict[str, type[Policy]] = {
    "run-length": RunLengthPolicy,
    "stagnation": StagnationPolicy,
    "ladder": LadderPolicy,
    "window": WindowPolicy,
    "cycle": CyclePolicy,
}


def _build(detector: str, p: Mapping[str, Any]) -> Any:
    """The runtime guard for params (raises ConfigError on cross-field rules)."""
    if detector == "ladder":
        return ladder_mod.LadderGuard(
            ladder_mod.Thresholds(p["warn_at"], p["block_at"], p["halt_at"]),
            ladder_mod.Thresholds(p["read_only_warn_at"], p["read_only_block_at"], p["read_only_halt_at"]),
            p["read_only_tools"] or None,
        )
    if detector == "window":
        return window_mod.LoopGuard(p["window"], p["threshold"])
    if detector == "cycle":
        return cycle_mod.CycleDetector(p["max_period"], p["warn_repeats"], p["halt_repeats"])
    return None


def make_policy(spec: PolicySpec | str) -> Policy:
    """A fresh policy (its own detector state) for a spec or a spec string."""
    if isinstance(spec, str):
        spec = PolicySpec.parse(spec)
    return _POLICIES[spec.detector](spec)


DEFAULT_SPECS: tuple[PolicySpec, ...] = tuple(PolicySpec(d) for d in DETECTORS)
