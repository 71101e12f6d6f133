"""Policies: one detector with one set of parameters, behind one interface for the ledger.

This module is the spec grammar (`PolicySpec`) and `make_policy`; the detectors themselves are
registered in registry.py (each detector module holds its logic, its Policy adapter and its
`Detector` registration), and what they share (`Param`, `Check`, `Result`, `Policy`) is base.py.

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
    progress     window [20], halt_at [3], ok_halt_at [4], rerun_halt_at [4], same_failure_at [5],
                 wait_limit [900 seconds], wait_halt_at [8], across_turns [errors: none | errors |
                 all], volatile [timestamp|clock|duration|uuid|hex_id|shell_line|temp_path], errors
                 [error_prefix|nonzero_returncode|exit_code|traceback|command_not_found|
                 no_such_file|rejected|test_summary; also failed_prefix] (pattern names or
                 re:<expression>; see progress.py and answers.py)
    openhands    action_observation [4], action_error [3], monologue [3], alternating_pattern [6]
                 (OpenHands' StuckDetectionThresholds, each >= 1; see openhands.py)
    gemini-cli   repeats [5], max_cycle [5] (Gemini CLI's tool-call loop check; gemini_cli.py)
    roo          limit [3; 0 = never refuse] (Roo Code's ToolRepetitionDetector; roo.py)
    kilo         threshold [3], write_tools [edit|multiedit|write|apply_patch] (Kilo Code's
                 LoopDetector; kilo.py)

Plugins bring their own (`loopledger policies` lists every registered detector; docs/plugins.md).

Every policy speaks the shared words: checks `allow | warn | block | halt` (`after_halt` is the
replay engine's), results `repeated | changed | not_comparable | not_current` (run-length only:
cycle and progress read answers but judge them inside their next check).

What a Check's numbers mean, per detector (idx -1 = the whole batch):

    run-length   idx -1; count = run length, total = run total, threshold = effective max
    stagnation   idx -1 on prose turns; count = occurrences in the window, threshold = max_steps
    ladder       per call; count = identical calls in a row, threshold = the rung reached
    window       per call; count = occurrences in the window, threshold = threshold
    cycle        per call; count = repetitions k, total = period p (0: none), threshold =
                 warn_repeats (halt_repeats on a halt)
    progress     per call; count = the attempt this call would be without progress (the rule
                 nearest its halt: repeat, wait, retry or failures), threshold = the attempt that
                 rule halts at (none for a wait, judged by the time it waited); reason = what
                 repeated and how often, in plain words
    openhands    idx -1 on batches and prose turns (asked before each agent step); allow:
                 count = identical action+observation pairs in a row, threshold =
                 action_observation; warn (the nudge) / halt: count and threshold of the rule
                 that fired, named at the start of `reason`
    gemini-cli   per call; count = repetitions of the best cycle, total = its length,
                 threshold = repeats
    roo          per call; count = identical repeats of the previous call, threshold = limit
                 (a block when count reaches it)
    kilo         per call; count = identical finished calls since the last reset in the scanned
                 parts, this one included, threshold = threshold (a halt when count reaches it)
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from loopledger.detectors import registry
from loopledger.detectors.base import (  # re-exported: the names callers have always used
    BATCH,
    BOOL,
    FLOAT,
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
from loopledger.detectors.canonical import canonical_bytes, canonical_json, digest
from loopledger.detectors.errors import ConfigError

__all__ = [
    "BATCH", "BOOL", "BUILTIN_SPECS", "DEFAULT_DETECTORS", "DEFAULT_SPECS", "DETECTORS", "FLOAT", "INT", "NAMES", "OPT_INT", "PARAMS", "TEXT",
    "Check", "Param", "Policy", "PolicySpec", "Result", "complete_params", "default_set_words", "make_policy", "signature",
]

# Every registered detector's parameters (plugins too, once loaded): PARAMS[name] -> (Param, …).
PARAMS: Mapping[str, tuple[Param, ...]] = registry.ParamsView()

_BOOL_WORDS = {"true": True, "yes": True, "on": True, "1": True,
               "false": False, "no": False, "off": False, "0": False}


def _text(p: Param, v: Any) -> str:
    """A value as the spec grammar writes it (`parse` reads it back)."""
    if p.kind == NAMES:
        return "|".join(v)
    if p.kind == BOOL:
        return "true" if v else "false"
    return "none" if v is None else str(v)


def _coerce(detector: str, param: Param, value: Any) -> Any:
    field = param.name
    if param.kind == TEXT:
        if not isinstance(value, str):
            raise ConfigError(field, f"{field} is text", f"{detector}: {field} must be text, got {value!r}")
        return value
    if param.kind == BOOL:
        if isinstance(value, str) and value.strip().lower() in _BOOL_WORDS:
            return _BOOL_WORDS[value.strip().lower()]
        if not isinstance(value, bool):
            raise ConfigError(field, f"{field} is true or false",
                              f"{detector}: {field} must be true or false, got {value!r}")
        return value
    if param.kind == FLOAT:
        try:
            number = float(value.strip() if isinstance(value, str) else value)
        except (TypeError, ValueError):
            raise ConfigError(field, f"{field} is a number",
                              f"{detector}: {field} must be a number, got {value!r}") from None
        if isinstance(value, bool) or number != number or number < param.minimum:
            raise ConfigError(field, f"{field} >= {param.minimum}",
                              f"{detector}: {field} must be a number >= {param.minimum}, got {value!r}")
        return number
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
    det = registry.get(detector)  # ConfigError naming the known detectors
    schema = {p.name: p for p in det.params}
    params = {k: v for k, v in (params or {}).items() if k in schema or k not in det.retired}
    unknown = sorted(set(params) - set(schema))
    if unknown:
        raise ConfigError(unknown[0], "known parameter",
                          f"{detector}: unknown parameter {unknown[0]!r}; "
                          f"known: {', '.join(schema)}")
    out = {name: _coerce(detector, p, params[name]) if name in params else p.default
           for name, p in schema.items()}
    if det.validate is not None:
        det.validate(out)  # cross-field rules (block_at > warn_at, threshold <= window …)
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
            elif p.kind == TEXT:
                if value != p.default:
                    parts.append(f"{p.name}={value}")
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
            items.append(f"{p.name}={_text(p, v)}")
        return f"{self.detector}:{','.join(items)}"

    @classmethod
    def parse(cls, text: str, extra: Sequence[str] = (), *, trusted: bool = False) -> PolicySpec:
        """`DETECTOR[:NAME=VALUE,...]`, plus `extra` `NAME=VALUE` strings (the CLI's --param).

        `trusted`: the text comes from the person running this process (their command line,
        their config file, their own Python), so a `pkg.module:factory` detector is imported.
        Otherwise (a ledger row, a link) only registered detectors are found (registry.py)."""
        detector, _, rest = text.strip().partition(":")
        detector = detector.strip()
        if detector not in registry.names() and ":" in text:
            # `pkg.module:factory[:NAME=VALUE,...]`: a plugin named by its import path.
            head, _, tail = rest.partition(":")
            if registry.is_factory_name(f"{detector}:{head.strip()}"):
                detector, rest = f"{detector}:{head.strip()}", tail
                if trusted:
                    registry.import_factory(detector)
        params: dict[str, Any] = {}
        items = [i for i in rest.split(",") if i.strip()] + list(extra)
        for item in items:
            name, eq, value = item.partition("=")
            if not eq or not name.strip():
                raise ConfigError(name.strip() or "spec", "NAME=VALUE",
                                  f"policy spec {text!r}: {item.strip()!r} is not NAME=VALUE")
            params[name.strip()] = value
        return cls(detector, params)


def make_policy(spec: PolicySpec | str, *, trusted: bool = False) -> Policy:
    """A fresh policy (its own detector state) for a spec or a spec string (`trusted`: as
    PolicySpec.parse, a string of the person's own that may name `module:factory`)."""
    if isinstance(spec, str):
        spec = PolicySpec.parse(spec, trusted=trusted)
    return registry.get(spec.detector).factory(spec)


# The built-in detectors, in display order (plugins are in `registry.names()` once loaded).
DETECTORS: tuple[str, ...] = registry.builtin_names()

# Every built-in detector at its own defaults (the seeds' exactly as the seeds define them):
# what Replay lists and what the sample_data tables show. Built on first use (PEP 562, below):
# a spec imports its detector's module, and a live hook needs only the enforced ones.
BUILTIN_SPECS: tuple[PolicySpec, ...]

# What the worker runs when the user configures nothing (`make run`, `ingest`, the live default):
# progress and cycle (they read answers: a repeat whose answer changed is progress) plus
# stagnation (prose loops no tool guard sees), each at its defaults. Chosen by scoring against
# the labelled sets (docs/detection.md): ladder and window judge keys only, so they halt repeats
# that make progress; run-length (the seed's semantics) halts a poll whose output grows as soon as
# two polls in a row answer the same. All three stay available by name, exactly as seeded.
DEFAULT_DETECTORS: tuple[str, ...] = ("progress", "stagnation", "cycle")
DEFAULT_SPECS: tuple[PolicySpec, ...]

_LAZY_SPECS = {"BUILTIN_SPECS": DETECTORS, "DEFAULT_SPECS": DEFAULT_DETECTORS}


def default_set_words() -> str:
    """The default set in words, from DEFAULT_SPECS — "progress, stagnation, cycle" (a member
    not at its detector's defaults also names what it changes: "progress halt_at=4"). The one
    description `--help`, the pages and `loopledger policies` give; docs point at
    docs/detection.md, which says why these."""
    specs = globals().get("DEFAULT_SPECS") or __getattr__("DEFAULT_SPECS")
    words = []
    for sp in specs:
        base = PolicySpec(sp.detector).params
        changed = [f"{p.name}={_text(p, sp.params[p.name])}" for p in PARAMS[sp.detector]
                   if base[p.name] != sp.params[p.name]]
        words.append(" ".join([sp.detector, *changed]))
    return ", ".join(words)


def __getattr__(name: str) -> Any:
    detectors = _LAZY_SPECS.get(name)
    if detectors is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    specs = tuple(PolicySpec(d) for d in detectors)
    globals()[name] = specs  # built once
    return specs
