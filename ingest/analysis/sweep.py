"""Parameter sweeps: one detector, one or two parameter ranges, many sessions.

Pure logic over already-loaded events; the Compare page and `loopledger sweep` are its callers.
Every verdict comes from loopledger.replay (replay + tally): this module only arranges settings and
adds up what the engine reports, so a sweep can never disagree with the worker or the Replay page.
"""

from __future__ import annotations

import itertools
import threading
from collections import OrderedDict
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from loopledger import vocab
from loopledger.analysis import scoring
from loopledger.detectors.errors import ConfigError
from loopledger.detectors.policy import PolicySpec, make_policy
from loopledger.events import Event
from loopledger.replay import Tally, replay_many, tally

TOTALS = ("runs", "calls", "strikes", "warnings", "blocks", "halts", "saved", "halted_runs")


class SweepError(ValueError):
    """A sweep request that cannot run (unknown detector or parameter, empty or bad range)."""


@dataclass(frozen=True, slots=True)
class SessionEvents:
    """One session's events as read from the ledger; `updated_at` and the event count key caches."""

    session_id: int
    events: Sequence[Event]
    updated_at: float | None = None
    title: str = ""


@dataclass(frozen=True, slots=True)
class Axis:
    param: str
    values: tuple[Any, ...]


@dataclass(frozen=True, slots=True)
class Grid:
    """A detector, the parameters held fixed (`base`), and one or two swept axes."""

    detector: str
    axes: tuple[Axis, ...]
    base: tuple[tuple[str, Any], ...] = ()

    def key(self) -> tuple:
        return (self.detector, self.base, tuple((a.param, a.values) for a in self.axes))


@dataclass(slots=True)
class RunRow:
    outcome: str
    halt_seq: int | None = None
    saved: int = 0


@dataclass(slots=True)
class Setting:
    """One point of the grid and what the engine made of every session under it."""

    values: tuple[Any, ...]  # one value per axis
    spec: PolicySpec | None
    error: str | None = None  # the ConfigError text when this combination is invalid
    totals: dict[str, int] = field(default_factory=lambda: dict.fromkeys(TOTALS, 0))
    runs: dict[tuple[int, int], RunRow] = field(default_factory=dict)
    first_halt: dict[int, int | None] = field(default_factory=dict)  # session → seq of 1st halt
    # session → the 1-based call position of its first halt, as labels and the leaderboard count
    # calls (scoring.call_position); None: never halted
    first_halt_at: dict[int, int | None] = field(default_factory=dict)
    calls: dict[int, int] = field(default_factory=dict)  # session → its tool calls (what a false halt loses of)

    @property
    def sessions_halted(self) -> int:
        """Sessions this setting halts at all (the unit labels, the leaderboard and Compare count)."""
        return sum(1 for v in self.first_halt.values() if v is not None)

    @property
    def label(self) -> str:
        return self.spec.label if self.spec is not None else "invalid"


@dataclass(slots=True)
class SweepResult:
    grid: Grid
    settings: list[Setting]
    session_ids: list[int]

    def setting(self, values: Sequence[Any]) -> Setting:
        for s in self.settings:
            if s.values == tuple(values):
                return s
        raise KeyError(tuple(values))


# ── parsing (CLI and page inputs) ──────────────────────────────────────────────────────────────


def _scalar(text: str) -> Any:
    text = text.strip()
    low = text.lower()
    if low in ("true", "false"):
        return low == "true"
    if low in ("none", "null"):
        return None
    for kind in (int, float):
        try:
            return kind(text)
        except ValueError:
            pass
    return text


def parse_values(text: str) -> tuple[Any, ...]:
    """`2..6` (inclusive), `2..10:2` (with a step), or a comma list `4,8,12`."""
    text = text.strip()
    if not text:
        raise SweepError("empty range")
    if ".." in text:
        lo_s, _, rest = text.partition("..")
        hi_s, _, step_s = rest.partition(":")
        lo, hi = _scalar(lo_s), _scalar(hi_s)
        step = _scalar(step_s) if step_s else 1
        if not all(isinstance(v, int) and not isinstance(v, bool) for v in (lo, hi, step)):
            raise SweepError(f"range {text!r}: bounds and step must be integers")
        if step <= 0:
            raise SweepError(f"range {text!r}: step must be positive")
        if hi < lo:
            raise SweepError(f"range {text!r}: the end is below the start")
        return tuple(range(lo, hi + 1, step))
    values = tuple(_scalar(v) for v in text.split(",") if v.strip())
    if not values:
        raise SweepError(f"range {text!r}: no values")
    return values


def parse_axis(text: str) -> Axis:
    """`threshold=2..6` → Axis('threshold', (2, 3, 4, 5, 6))."""
    name, sep, rng = text.partition("=")
    if not sep or not name.strip():
        raise SweepError(f"{text!r}: expected NAME=RANGE, e.g. threshold=2..6 or window=4,8,12")
    return Axis(name.strip(), parse_values(rng))


def default_params(detector: str) -> dict[str, Any]:
    """Every registered detector's defaults: built-ins, installed plugins, `module:factory`."""
    try:
        return dict(PolicySpec(detector).params)
    except ConfigError as e:
        raise SweepError(str(e)) from None


def make_grid(detector: str, axes: Sequence[Axis], base: dict[str, Any] | None = None) -> Grid:
    params = default_params(detector)
    if not 1 <= len(axes) <= 2:
        raise SweepError("sweep one parameter, or two for a heatmap")
    if len(axes) == 2 and axes[0].param == axes[1].param:
        raise SweepError(f"both axes sweep {axes[0].param!r}")
    for a in axes:
        if a.param not in params:
            raise SweepError(f"{detector} has no parameter {a.param!r}; it has: {', '.join(sorted(params))}")
    fixed = {k: v for k, v in (base or {}).items() if k not in {a.param for a in axes}}
    for k in fixed:
        if k not in params:
            raise SweepError(f"{detector} has no parameter {k!r}; it has: {', '.join(sorted(params))}")
    return Grid(detector, tuple(axes), tuple(sorted(fixed.items())))


def grid_points(grid: Grid) -> list[tuple[Any, ...]]:
    return list(itertools.product(*(a.values for a in grid.axes)))


def spec_for(grid: Grid, values: Sequence[Any]) -> PolicySpec:
    params = default_params(grid.detector)
    params.update(dict(grid.base))
    params.update({a.param: v for a, v in zip(grid.axes, values, strict=True)})
    return PolicySpec(grid.detector, params)


# ── a first, bounded pass (the Compare page) ──────────────────────────────────────────────────


def first_pass(sizes: Sequence[tuple[int, int]], labelled: Iterable[int], max_events: int) -> list[int]:
    """The sessions a first, bounded sweep covers: at most `max_events` events in all, the
    labelled sessions first (a sweep is scored on them), then the others in the order given
    (`sizes`: (session id, its event count), e.g. newest first); a session that does not fit is
    passed over for smaller ones behind it. Returned in the order of `sizes`; every session when
    they all fit. Deterministic, so a first view and its cache key never depend on the machine."""
    marked = set(labelled)
    picked: set[int] = set()
    left = max_events
    for want_labelled in (True, False):
        for sid, n in sizes:
            if (sid in marked) == want_labelled and sid not in picked and n <= left:
                picked.add(sid)
                left -= n
    return [sid for sid, _ in sizes if sid in picked]


# ── the sweep ──────────────────────────────────────────────────────────────────────────────────


def cache_key(sessions: Iterable[SessionEvents], grid: Grid) -> tuple:
    """What a sweep's answer depends on: which sessions, at which version, and the grid."""
    return (tuple((s.session_id, s.updated_at, len(s.events)) for s in sessions), grid.key())


@dataclass(frozen=True, slots=True)
class SessionTally:
    """What one session gave one setting, as a sweep folds it in: tally()'s per-session counts
    (in TOTALS order), each run's row, the seq of the first halt and its call position."""

    totals: tuple[int, ...]
    runs: tuple[tuple[int, RunRow], ...]
    first_halt: int | None
    first_halt_at: int | None = None


NOTHING = SessionTally((0,) * len(TOTALS), (), None)  # a session without events


def session_tally(summary: Tally, halt_at: int | None = None) -> SessionTally:
    totals = summary.totals()
    return SessionTally(tuple(int(totals[name] or 0) for name in TOTALS),
                        tuple((r.run, RunRow(r.outcome, r.halt_seq, r.saved)) for r in summary.runs),
                        summary.first_halt_seq, halt_at)


Version = tuple[int, float | None, int]  # (session id, updated_at, event count): what a session's verdicts depend on


class TallyCache:
    """One SessionTally per (session version, setting), shared by every sweep that is given it
    (the Compare page keeps one per server): a sweep replays only the pairs it lacks, so the rest
    of a selection, a range overlapping the last one, or the ledger after an ingest (a grown
    session has a new version) cost only what is new. Bounded: past `max_entries` the least
    recently used pairs go. Thread-safe (a page and a background sweep share it)."""

    def __init__(self, max_entries: int = 200_000) -> None:
        self.max_entries = max_entries
        self._items: OrderedDict[tuple, SessionTally] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, version: Version, spec_id: str) -> SessionTally | None:
        key = (*version, spec_id)
        with self._lock:
            got = self._items.get(key)
            if got is not None:
                self._items.move_to_end(key)
            return got

    def put(self, version: Version, spec_id: str, value: SessionTally) -> None:
        with self._lock:
            self._items[(*version, spec_id)] = value
            self._items.move_to_end((*version, spec_id))
            while len(self._items) > self.max_entries:
                self._items.popitem(last=False)

    def clear(self) -> None:
        with self._lock:
            self._items.clear()

    def __len__(self) -> int:
        return len(self._items)


def _settings(grid: Grid) -> list[Setting]:
    out: list[Setting] = []
    for values in grid_points(grid):
        try:
            out.append(Setting(values=tuple(values), spec=spec_for(grid, values)))  # validates the combination
        except ValueError as exc:
            out.append(Setting(values=tuple(values), spec=None, error=str(exc)))
    return out


def _add_session(setting: Setting, session_id: int, t: SessionTally) -> None:
    # One session's counts and per-run outcomes, folded into the setting's totals.
    for name, n in zip(TOTALS, t.totals, strict=True):
        setting.totals[name] += n
    setting.first_halt[session_id] = t.first_halt
    setting.first_halt_at[session_id] = t.first_halt_at
    setting.calls[session_id] = t.totals[TOTALS.index("calls")]
    for run, row in t.runs:
        setting.runs[(session_id, run)] = row


def version_of(sess: SessionEvents) -> Version:
    return (sess.session_id, sess.updated_at, len(sess.events))


def sweep(
    sessions: Sequence[SessionEvents],
    grid: Grid,
    progress: Callable[[int, int, str], None] | None = None,
    cache: TallyCache | None = None,
) -> SweepResult:
    """Replay every session under every grid point. `progress(done, total, label)` after each
    session (invalid grid points are reported in their Setting, not raised). With `cache`, the
    (session version, setting) pairs it holds are taken from it and the others replayed into it."""
    out = _settings(grid)
    valid = [st for st in out if st.spec is not None]
    for n, sess in enumerate(sessions, 1):
        version = version_of(sess)
        have = {st.spec.id: cache.get(version, st.spec.id) for st in valid} if cache is not None else {}
        todo = [st for st in valid if have.get(st.spec.id) is None]
        if todo and sess.events:
            # One pass over the session drives every setting (fresh policies: no state leaks across
            # sessions); replay_many saves the per-setting walk over the events.
            per_policy = zip(*replay_many(sess.events, [make_policy(st.spec) for st in todo]), strict=True)
            before = scoring.calls_before(sess.events)
            for setting, steps in zip(todo, per_policy, strict=True):
                fh = scoring.first_halt(steps)
                have[setting.spec.id] = got = session_tally(
                    tally(steps), None if fh is None else before[fh[1]] + max(fh[2], 0) + 1)
                if cache is not None:
                    cache.put(version, setting.spec.id, got)
        for setting in valid:
            _add_session(setting, sess.session_id, have.get(setting.spec.id) or NOTHING)
        if progress is not None:
            progress(n, len(sessions), f"session {sess.session_id}")
    return SweepResult(grid, out, [s.session_id for s in sessions])


def missing(versions: Sequence[Version], grid: Grid, cache: TallyCache) -> list[Version]:
    """The sessions (by version) for which `cache` lacks some valid setting of the grid."""
    specs = [st.spec.id for st in _settings(grid) if st.spec is not None]
    return [v for v in versions if any(cache.get(v, sp) is None for sp in specs)]


def fold(versions: Sequence[Version], grid: Grid, cache: TallyCache) -> SweepResult | None:
    """The sweep of these sessions from the cache alone (no events needed), or None when a pair
    is not in it: what `sweep` over them gives, without replaying anything."""
    out = _settings(grid)
    for setting in out:
        if setting.spec is None:
            continue
        for v in versions:
            got = cache.get(v, setting.spec.id)
            if got is None:
                return None
            _add_session(setting, v[0], got)
    return SweepResult(grid, out, [v[0] for v in versions])


# ── reading a sweep ────────────────────────────────────────────────────────────────────────────


def totals_rows(result: SweepResult) -> list[dict[str, Any]]:
    """One row per setting: the axis values, the label, every total (None where invalid)."""
    rows = []
    for s in result.settings:
        row: dict[str, Any] = {a.param: v for a, v in zip(result.grid.axes, s.values, strict=True)}
        row["setting"] = s.label
        row["error"] = s.error
        for name in TOTALS:
            row[name] = None if s.error else s.totals[name]
        rows.append(row)
    return rows


def first_halt_rows(result: SweepResult) -> list[dict[str, Any]]:
    """Session × setting → the first halt's seq and its call position (None: never halted), for the heatmap."""
    return [
        {"session_id": sid, "setting": s.label, "values": s.values, "first_halt_seq": s.first_halt.get(sid),
         "first_halt_at": s.first_halt_at.get(sid)}
        for s in result.settings if s.error is None
        for sid in result.session_ids
    ]


def halted_then_succeeded(setting: Setting, ended_well: Iterable[int]) -> int:
    """Sessions whose transcript ends in success (or a submission) where this setting halted a
    run: the work a guard at this setting would have cut off before it succeeded."""
    good = set(ended_well)
    return len({sid for (sid, _), row in setting.runs.items() if sid in good and row.outcome == vocab.HALTED})


@dataclass(frozen=True, slots=True)
class Flip:
    session_id: int
    run_idx: int
    outcome_a: str
    outcome_b: str
    halt_seq_a: int | None
    halt_seq_b: int | None


def flipped(a: Setting, b: Setting) -> list[Flip]:
    """Runs whose outcome differs between two settings, in (session, run) order."""
    out = []
    for key in sorted(set(a.runs) | set(b.runs)):
        ra, rb = a.runs.get(key), b.runs.get(key)
        oa = ra.outcome if ra else vocab.CLEAN
        ob = rb.outcome if rb else vocab.CLEAN
        if oa != ob:
            out.append(Flip(key[0], key[1], oa, ob, ra.halt_seq if ra else None, rb.halt_seq if rb else None))
    return out


def judged(setting: Setting, labels: Mapping[int, tuple[str, int | None, int | None]]) -> list[scoring.Judged]:
    """The setting on each labelled session it swept, as the guard leaderboard judges a stored
    policy (scoring.Judged: its first halt's call position against the label's loop calls), so
    Compare and the leaderboard count the same unit — the session, as labels are given — and give
    the same precision and recall for the same setting. `labels`: session → (label, first, last).
    A sweep keeps no warning position: "flagged inside" counts its halts only (Compare does not
    show it; the leaderboard, from the ledger's checks, does)."""
    saved: dict[int, int] = {}
    halt_run: dict[int, int] = {}
    for (sid, run), row in setting.runs.items():
        saved[sid] = saved.get(sid, 0) + row.saved
        if row.halt_seq is not None and row.halt_seq == setting.first_halt.get(sid):
            halt_run[sid] = run
    pid = setting.spec.id if setting.spec is not None else ""
    return [scoring.Judged(pid, sid, label, first, last, setting.first_halt_at.get(sid), saved.get(sid, 0),
                           halt_run.get(sid), setting.first_halt.get(sid), calls=setting.calls.get(sid))
            for sid, (label, first, last) in sorted(labels.items()) if sid in setting.first_halt]


def session_scores(result: SweepResult, labels: Mapping[int, tuple[str, int | None, int | None]],
                   names: Mapping[str, str] | None = None) -> list[scoring.PolicyScore]:
    """Every valid setting scored on the labelled sessions it swept (scoring.score, the
    leaderboard's rule), in grid order; `names`: setting label → the name shown."""
    out = []
    for s in result.settings:
        if s.error is None:
            name = (names or {}).get(s.label, s.label)
            out.extend(scoring.score(judged(s, labels), [(s.spec.id, name)]))
    return out
