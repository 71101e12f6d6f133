"""Scoring loop guards against people's labels: THE rule behind the guard leaderboard page,
`loopledger score` and the bench table (pure: no database, no Streamlit).

A label judges a whole session: `loop` (with the loop's calls, 1-based positions `first..last`
among the session's tool calls in order), `normal`, or `unclear`. A policy's FIRST halt in the
session is placed at a call position: the first call it stopped (a per-call halt: that call; a
batch-level halt: the batch's first call; a halt on a prose turn: the next call after it). Then

    loop session:   halt in [first, last] → caught · halt before first → early (it stopped good
                    work and never saw the loop) · no halt, or a halt after last → missed
    normal session: any halt → false_halt · none → clean
    unclear:        left out.

Per policy: precision = caught / sessions it halted (loop and normal ones), recall = caught /
loops, and for each catch how many calls into the loop it came (halt position − first + 1). In
the user's currency, calls (`calls_saved`, `calls_lost`, `flagged_inside`):

    calls saved:    a loop session caught at call h saves the loop's calls after it, last − h (a
                    halt on the loop's last call saves none; an early halt saves none of the loop:
                    it is counted apart, as early); out of the calls spent inside loops, the sum
                    of last − first + 1
    calls lost:     a normal session halted at call h loses the calls it made after, n − h (n: its
                    calls); out of the normal sessions' calls
    flagged inside: a loop session whose first warn, block or halt falls inside [first, last]

"After the halt" is what the ledger's per-run `saved` counts too (the calls of the halted run
after its halting call): the same count, ended at the loop's last call instead of the run's.

Each ratio comes with its Wilson 95% interval (`wilson`): 11 loops caught out of 11 is a recall
of 1.00 that a true recall of 0.74 would also produce often enough, and a person choosing a
setting should see how much the labels can tell.
"""

from __future__ import annotations

import math
import re
import statistics
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np
from loopledger import vocab
from loopledger.events import Batch, Event

LOOP, NORMAL, UNCLEAR = "loop", "normal", "unclear"
LABELS = (LOOP, NORMAL, UNCLEAR)
# The words the dashboard wrote before labels judged sessions (ledgers from before 0003).
ALIASES = {"real_loop": LOOP, "not_loop": NORMAL}

CAUGHT, EARLY, MISSED, FALSE_HALT, CLEAN = "caught", "early", "missed", "false_halt", "clean"
OUTCOMES = (CAUGHT, EARLY, MISSED, FALSE_HALT, CLEAN)

IMPORTED, DASHBOARD = "imported", "dashboard"  # who labelled: a CSV import, or a person in the dashboard
LABELLED_BY = (IMPORTED, DASHBOARD)

# The leaderboard's columns, in order; COUNT_COLUMNS are the numbers that link to their sessions.
COUNT_COLUMNS = ("loops", CAUGHT, EARLY, MISSED, NORMAL, "false_halts")
COLUMNS = ("policy", *COUNT_COLUMNS, "precision", "recall", "saved", "into_loop")


Z95 = 1.959963984540054  # the standard normal's 97.5% quantile: a two-sided 95% interval


def wilson(successes: int, n: int, z: float = Z95) -> tuple[float, float] | None:
    """The Wilson score interval for a proportion `successes`/`n` (None when n is 0).

    Chosen over the normal (Wald) interval because it stays inside [0, 1] and does not shrink
    to a point at 0/n or n/n, which is exactly where small label sets sit: 11/11 gives
    (0.741, 1.0), not (1.0, 1.0)."""
    if n <= 0:
        return None
    if not 0 <= successes <= n:
        raise ValueError(f"{successes} successes out of {n}")
    p = successes / n
    z2 = z * z
    denom = 1 + z2 / n
    centre = (p + z2 / (2 * n)) / denom
    half = z * math.sqrt(p * (1 - p) / n + z2 / (4 * n * n)) / denom
    # p = 0 or 1 puts one end exactly on the boundary; rounding must not push it past (inside,
    # 0 < p < 1, both ends lie strictly within (0, 1): no clamp needed)
    low = centre - half if successes else 0.0
    high = centre + half if successes < n else 1.0
    return low, high


BOOTSTRAP_SEED, BOOTSTRAP_REPS = 20261206, 2000


def bootstrap_ratio(pairs: Sequence[tuple[int, int]], reps: int = BOOTSTRAP_REPS,
                    seed: int = BOOTSTRAP_SEED) -> tuple[float, float] | None:
    """A 95% percentile-bootstrap interval for sum(part) / sum(whole) over `pairs` (part, whole),
    one pair per session (None without a call to count).

    Calls saved is a ratio of calls, not of sessions: the calls of one long loop are not
    independent draws, so a Wilson interval on calls would be far too narrow. Sessions are
    resampled instead, `reps` times with a fixed seed (the same labels print the same interval);
    a resample with no call in its denominator is skipped."""
    arr = np.asarray([(int(a), int(b)) for a, b in pairs], dtype=np.int64).reshape(-1, 2)
    if not len(arr) or arr[:, 1].sum() <= 0:
        return None
    # every resample at once (a page draws dozens of these): reps × n draws of a session
    draws = np.random.default_rng(seed).integers(0, len(arr), size=(reps, len(arr)))
    part, whole = arr[draws, 0].sum(axis=1), arr[draws, 1].sum(axis=1)
    ratios = sorted((part[whole > 0] / whole[whole > 0]).tolist())
    lo = ratios[int(0.025 * (len(ratios) - 1))]
    hi = ratios[int(math.ceil(0.975 * (len(ratios) - 1)))]
    return lo, hi


def share_text(part: int, whole: int, bounds: tuple[float, float] | None = None) -> str:
    """`500/594 (84%) [0.80, 0.88]`; `0/0` without a call to count."""
    if not whole:
        return f"{part}/{whole}"
    return f"{part}/{whole} ({100 * part / whole:.0f}%)" + (f" {interval_text(bounds)}" if bounds else "")


def interval_text(bounds: tuple[float, float] | None) -> str:
    """`[0.74, 1.00]`, or `—` without labels to tell."""
    return "—" if bounds is None else f"[{bounds[0]:.2f}, {bounds[1]:.2f}]"


def normalize_label(text: str) -> str:
    """`loop` / `normal` / `unclear` (any case; the old `real_loop` / `not_loop` too)."""
    word = (text or "").strip().lower()
    word = ALIASES.get(word, word)
    if word not in LABELS:
        raise ValueError(f"unknown label {text!r}; expected one of {', '.join(LABELS)}")
    return word


_RANGE = re.compile(r"^\s*#?(\d+)\s*(?:[-–—]|\.\.)\s*#?(\d+)\s*$|^\s*#?(\d+)\s*$")


def parse_loop_calls(text: str | None) -> tuple[int, int] | None:
    """`133-147` (also `133..147`, `133–147`, or one call `12`) → (133, 147); empty → None."""
    if text is None or not str(text).strip():
        return None
    m = _RANGE.match(str(text))
    if not m:
        raise ValueError(f"loop_calls {text!r}: expected FIRST-LAST, 1-based call positions, e.g. 6-12")
    first, last = (int(m[1]), int(m[2])) if m[1] else (int(m[3]), int(m[3]))
    if first < 1 or last < first:
        raise ValueError(f"loop_calls {text!r}: positions start at 1 and the last is not before the first")
    return first, last


def format_loop_calls(first: int | None, last: int | None) -> str:
    return "" if first is None or last is None else f"{first}-{last}"


def check_label(label: str, first: int | None, last: int | None, n_calls: int | None = None) -> None:
    """Raise ValueError unless (label, loop range) is one a session can carry."""
    if label not in LABELS:
        raise ValueError(f"unknown label {label!r}; expected one of {', '.join(LABELS)}")
    if label == LOOP:
        if first is None or last is None:
            raise ValueError("a loop label needs the loop's calls (loop_calls FIRST-LAST)")
        if first < 1 or last < first:
            raise ValueError(f"loop calls {first}-{last}: positions start at 1 and the last is not before the first")
        if n_calls is not None and last > n_calls:
            raise ValueError(f"loop calls {first}-{last} go past the session's {n_calls} call(s)")
    elif first is not None or last is not None:
        raise ValueError(f"only a loop label has loop calls (this one is {label!r})")


def calls_after(halt_at: int | None, end: int | None) -> int:
    """Calls after a halt at call `halt_at` up to call `end` (both 1-based, inclusive end): what
    the halt saved of them. 0 without a halt, or when the halt comes at or after `end`."""
    if halt_at is None or end is None:
        return 0
    return max(0, end - halt_at)


def calls_saved(label: str, first: int | None, last: int | None, halt_at: int | None) -> int:
    """The loop's calls a halt saved: after a halt inside the labelled loop, up to its last call
    (a halt before the loop, after it, or on a normal session saves none of a loop)."""
    if outcome(label, first, last, halt_at) != CAUGHT:
        return 0
    return calls_after(halt_at, last)


def calls_lost(label: str, halt_at: int | None, n_calls: int | None) -> int:
    """The calls a false halt cost a normal session: those it made after the halt."""
    return calls_after(halt_at, n_calls) if label == NORMAL else 0


def loop_length(first: int | None, last: int | None) -> int:
    """Calls spent inside a labelled loop (0: no loop)."""
    return 0 if first is None or last is None else last - first + 1


def flagged_inside(first: int | None, last: int | None, flag_at: int | None) -> bool:
    """The first warn, block or halt (call `flag_at`) falls inside the labelled loop."""
    return flag_at is not None and first is not None and last is not None and first <= flag_at <= last


def outcome(label: str, first: int | None, last: int | None, halt_at: int | None) -> str | None:
    """One session's outcome for one policy (None: unclear, left out of the score)."""
    if label == LOOP:
        if halt_at is None or last is None or halt_at > last:
            return MISSED
        return EARLY if first is not None and halt_at < first else CAUGHT
    if label == NORMAL:
        return CLEAN if halt_at is None else FALSE_HALT
    return None


@dataclass(frozen=True, slots=True)
class Judged:
    """One policy on one labelled session: where it first halted (call position), and what it saved."""

    policy_id: str
    session_id: int
    label: str
    first: int | None = None  # the labelled loop's calls (loop only)
    last: int | None = None
    halt_at: int | None = None  # 1-based call position of the first halt; None: never halted
    saved: int = 0
    halt_run: int | None = None  # where Replay should open (the halting run and event seq)
    halt_seq: int | None = None
    warnings: int = 0  # warning checks the policy gave in the session
    calls: int | None = None  # the session's tool calls (None: not known)
    flag_at: int | None = None  # 1-based call position of its first warn, block or halt

    @property
    def outcome(self) -> str | None:
        return outcome(self.label, self.first, self.last, self.halt_at)

    @property
    def loop_saved(self) -> int:
        """Calls inside the labelled loop after the halt (`calls_saved`)."""
        return calls_saved(self.label, self.first, self.last, self.halt_at)

    @property
    def lost(self) -> int:
        """Calls of a normal session after a false halt (`calls_lost`)."""
        return calls_lost(self.label, self.halt_at, self.calls)

    @property
    def first_flag(self) -> int | None:
        """Its first warn, block or halt (the halt, when no warning position is known)."""
        known = [p for p in (self.flag_at, self.halt_at) if p is not None]
        return min(known) if known else None

    @property
    def into_loop(self) -> int | None:
        """Calls into the loop when the halt came (a catch only): 1 = on the loop's first call."""
        return self.halt_at - self.first + 1 if self.outcome == CAUGHT else None


@dataclass(slots=True)
class PolicyScore:
    policy_id: str
    policy: str
    loops: int = 0
    caught: int = 0
    early: int = 0
    missed: int = 0
    normal: int = 0
    false_halts: int = 0
    halted: int = 0  # scored sessions it halted at all (precision's denominator)
    saved: int = 0  # calls inside labelled loops after its halts (calls_saved) …
    loop_calls: int = 0  # … of the calls spent inside them
    lost: int = 0  # calls of normal sessions after its false halts (calls_lost) …
    normal_calls: int = 0  # … of the normal sessions' calls (those whose count is known)
    flagged: int = 0  # loop sessions whose first warn, block or halt falls inside the loop
    into_loop: list[int] = field(default_factory=list)

    @property
    def precision(self) -> float | None:
        """caught / sessions halted (None: it halted no labelled loop or normal session)."""
        return self.caught / self.halted if self.halted else None

    @property
    def recall(self) -> float | None:
        """caught / loops (None: no loop among the sessions it judged)."""
        return self.caught / self.loops if self.loops else None

    @property
    def precision_interval(self) -> tuple[float, float] | None:
        """Wilson 95% interval of the precision (None where the precision is None)."""
        return wilson(self.caught, self.halted)

    @property
    def recall_interval(self) -> tuple[float, float] | None:
        """Wilson 95% interval of the recall (None where the recall is None)."""
        return wilson(self.caught, self.loops)

    @property
    def into_loop_median(self) -> float | None:
        return statistics.median(self.into_loop) if self.into_loop else None

    def row(self) -> dict:
        """The leaderboard's row (precision and recall as fractions, into_loop as the sorted list)."""
        return {"policy_id": self.policy_id, "policy": self.policy, "loops": self.loops, CAUGHT: self.caught,
                EARLY: self.early, MISSED: self.missed, NORMAL: self.normal, "false_halts": self.false_halts,
                "precision": self.precision, "recall": self.recall, "saved": self.saved,
                "loop_calls": self.loop_calls, "lost": self.lost, "normal_calls": self.normal_calls,
                "flagged": self.flagged,
                "into_loop": sorted(self.into_loop)}


def score(judged: Iterable[Judged], policies: Mapping[str, str] | Sequence[tuple[str, str]]) -> list[PolicyScore]:
    """Per policy (in the order given: id → label), its counts over the judged sessions.

    A policy counts only the sessions it judged (a Judged row), so one added after some sessions
    were ingested shows fewer loops/normal sessions rather than misses it never had a chance at.
    """
    order = list(policies.items()) if isinstance(policies, Mapping) else list(policies)
    out = {pid: PolicyScore(pid, label) for pid, label in order}
    for j in judged:
        ps = out.get(j.policy_id)
        if ps is None:
            continue
        o = j.outcome
        if o is None:
            continue
        if j.halt_at is not None:
            ps.halted += 1
        if j.label == LOOP:
            ps.loops += 1
            ps.saved += j.loop_saved
            ps.loop_calls += loop_length(j.first, j.last)
            ps.flagged += flagged_inside(j.first, j.last, j.first_flag)
            if o == CAUGHT:
                ps.caught += 1
                ps.into_loop.append(j.into_loop)
            elif o == EARLY:
                ps.early += 1
            else:
                ps.missed += 1
        else:
            ps.normal += 1
            ps.normal_calls += j.calls or 0
            if o == FALSE_HALT:
                ps.false_halts += 1
                ps.lost += j.lost
    return list(out.values())


def cell_outcomes(column: str) -> tuple[str, ...]:
    """The session outcomes behind one leaderboard number (what its link lists)."""
    return {"loops": (CAUGHT, EARLY, MISSED), CAUGHT: (CAUGHT,), EARLY: (EARLY,), MISSED: (MISSED,),
            NORMAL: (FALSE_HALT, CLEAN), "false_halts": (FALSE_HALT,)}[column]


def disagreements(a: Iterable[Judged], b: Iterable[Judged]) -> list[tuple[Judged, Judged]]:
    """Sessions both policies judged where their outcomes differ (in session order)."""
    by_a = {j.session_id: j for j in a}
    out = []
    for j in sorted(b, key=lambda x: x.session_id):
        other = by_a.get(j.session_id)
        if other is not None and other.outcome is not None and other.outcome != j.outcome:
            out.append((other, j))
    return out


@dataclass(frozen=True, slots=True)
class LabelNext:
    """An unlabelled session the top policies split on: labelling it moves their scores apart."""

    session_id: int
    halting: tuple[str, ...]  # the policies that halted it
    quiet: tuple[str, ...]  # the ones that did not


def label_next(halts: Iterable[tuple[int, str, bool]], policy_ids: Sequence[str],
               limit: int = 20) -> list[LabelNext]:
    """Which unlabelled sessions to label next: those where some of `policy_ids` (the top of the
    ranking) halt and others do not. Whatever the label turns out to be, it adds a catch or a
    false halt to one side and not the other, so it moves the ranking; a session they all halt,
    or all leave alone, changes every one of them alike. Most even splits first (they tell the
    most policies apart), then session order; only sessions every policy judged."""
    wanted = list(dict.fromkeys(policy_ids))
    by_session: dict[int, dict[str, bool]] = {}
    for sid, pid, halted in halts:
        if pid in wanted:
            by_session.setdefault(int(sid), {})[pid] = bool(halted)
    out = []
    for sid, got in by_session.items():
        if len(got) < len(wanted):
            continue
        halting = tuple(p for p in wanted if got[p])
        quiet = tuple(p for p in wanted if not got[p])
        if halting and quiet:
            out.append(LabelNext(sid, halting, quiet))
    out.sort(key=lambda x: (-min(len(x.halting), len(x.quiet)), x.session_id))
    return out[:limit]


# ── positions from events (a policy replayed rather than read from the ledger) ─────────────────


def call_position(events: Sequence[Event], seq: int, idx: int) -> int:
    """1-based position of the call a check at (seq, idx) stopped: the calls before it, plus one.

    idx < 0 (a batch-level check) is the batch's first call; a check on a prose turn stands for
    the next call after it. The ledger's read model counts the same way in SQL."""
    before = 0
    for ev in events[:seq]:
        if isinstance(ev, Batch):
            before += len(ev.calls)
    return before + max(idx, 0) + 1


def calls_before(events: Sequence[Event]) -> list[int]:
    """seq → how many tool calls the session made before that step: `call_position` for every
    step in one pass (call #N = this + the call's place in its batch + 1)."""
    out, n = [], 0
    for ev in events:
        out.append(n)
        if isinstance(ev, Batch):
            n += len(ev.calls)
    return out


def first_halt(steps: Iterable) -> tuple[int, int, int] | None:
    """(run, seq, idx) of a replay's first halt check, or None."""
    for step in steps:
        for c in step.checks:
            if c.verdict == vocab.HALT:
                return step.run, step.seq, c.idx
    return None


FLAGS = (vocab.WARN, vocab.BLOCK, vocab.HALT)  # what "flagged" means: the model or the person was told


def first_flag(steps: Iterable) -> tuple[int, int] | None:
    """(seq, idx) of a replay's first warn, block or halt check, or None."""
    for step in steps:
        for c in step.checks:
            if c.verdict in FLAGS:
                return step.seq, c.idx
    return None


def judge_replay(policy_id: str, session_id: int, label: str, first: int | None, last: int | None,
                 events: Sequence[Event], steps: Sequence, saved: int) -> Judged:
    """A Judged row from a replay (`steps` from loopledger.replay, `saved` from its tally)."""
    steps = list(steps)
    fh = first_halt(steps)
    warned = sum(1 for s in steps for c in s.checks if c.verdict == vocab.WARN)
    ff = first_flag(steps)
    flag_at = call_position(events, *ff) if ff else None
    if fh is None:
        return Judged(policy_id, session_id, label, first, last, None, saved, warnings=warned, calls=n_calls(events),
                      flag_at=flag_at)
    run, seq, idx = fh
    return Judged(policy_id, session_id, label, first, last, call_position(events, seq, idx), saved, run, seq,
                  warned, n_calls(events), flag_at)


def _calls_in(ev: Event) -> int:
    return len(ev.calls) if isinstance(ev, Batch) else 0


def n_calls(events: Sequence[Event]) -> int:
    """The session's tool calls."""
    return sum(_calls_in(ev) for ev in events)


# ── runs (the dashboard labels from a run) ──────────────────────────────────


def run_span(calls_per_run: Sequence[int], run: int) -> tuple[int, int] | None:
    """The 1-based call positions of run `run`, given each run's call count (None: no calls)."""
    if not 0 <= run < len(calls_per_run) or calls_per_run[run] <= 0:
        return None
    first = sum(calls_per_run[:run]) + 1
    return first, first + calls_per_run[run] - 1


def ratio(value: float | None) -> str:
    return "—" if value is None else f"{value:.2f}"


SORTABLE = ("rank", *COUNT_COLUMNS, "precision", "recall", "saved", "into_loop", "policy")


def rank(scores: Iterable[PolicyScore], by: str = "rank") -> list[PolicyScore]:
    """The leaderboard order. `rank`: precision first, as a false halt stops good work — fewest
    false halts, then most loops caught, fewest early halts, most calls saved (the order
    cross-validation chooses in: loopledger.analysis.crossval); any other column: highest first
    (policy: A→Z; into_loop: soonest first, none last)."""
    scores = list(scores)
    if by == "rank":
        return sorted(scores, key=lambda s: (s.false_halts, -s.caught, s.early, -s.saved, s.policy))
    if by == "policy":
        return sorted(scores, key=lambda s: s.policy)
    if by == "into_loop":
        return sorted(scores, key=lambda s: (s.into_loop_median is None, s.into_loop_median or 0, s.policy))
    if by not in SORTABLE:
        raise ValueError(f"cannot sort by {by!r}; expected one of {', '.join(SORTABLE)}")
    return sorted(scores, key=lambda s: (-(s.row()[by] if s.row()[by] is not None else -1), s.policy))


def into_loop_text(values: Sequence[int]) -> str:
    """`2 (1, 2, 4)`: the median calls into the loop, then each catch's; empty when none."""
    if not values:
        return ""
    med = statistics.median(values)
    med_s = f"{med:g}"
    return med_s if len(values) == 1 else f"{med_s} ({', '.join(map(str, sorted(values)))})"


def any_of(judged: Iterable[Judged], policy_ids: Sequence[str], combined_id: str) -> list[Judged]:
    """The set of policies as one guard: per session the earliest first halt of any of them, and the
    calls that halting policy saved (every policy must have judged the session)."""
    wanted = set(policy_ids)
    by_session: dict[int, list[Judged]] = {}
    for j in judged:
        if j.policy_id in wanted:
            by_session.setdefault(j.session_id, []).append(j)
    out = []
    for sid, js in sorted(by_session.items()):
        if len({j.policy_id for j in js}) < len(wanted):
            continue
        halted = [j for j in js if j.halt_at is not None]
        first = min(halted, key=lambda j: j.halt_at) if halted else js[0]
        # without a halt `first` is a row whose halt_at is None already
        flags = [j.flag_at for j in js if j.flag_at is not None]
        out.append(Judged(combined_id, sid, first.label, first.first, first.last, first.halt_at,
                          first.saved if halted else 0, first.halt_run if halted else None,
                          first.halt_seq if halted else None, sum(j.warnings for j in js),
                          next((j.calls for j in js if j.calls is not None), None), min(flags) if flags else None))
    return out
