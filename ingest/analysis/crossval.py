"""Grouped cross-validation: the score to expect from a chosen setting on sessions nobody tuned it on.

A person (or the project, choosing its defaults) picks, among several settings, the one that
scores best on the labelled sessions. Scored on those same sessions, the pick flatters itself: it
was picked because it fits them. Here the labelled sessions are split by group — the source
repository or agent they came from, a project folder — and for each group in turn the setting is
chosen on every *other* group (`choose`, the training folds) and scored on the held-out one. The
held-out tallies, pooled over the groups, are the figure to expect on the next source; the
in-sample tally (the setting chosen on all of them, scored on all of them) stands beside it, and
the gap between the two is how much the choice fits what it has seen.

The choice puts precision first, as design.md asks (a false halt stops good work): fewest normal
sessions halted, then most loops halted inside the loop, then fewest halts before the loop; a tie
goes to the candidate listed first (list the shipped default first); among candidates that
tie on all three, the one that saves more of the calls spent inside loops. Warnings are reported,
not chosen on: a handful of warnings more or less on a few dozen sessions is noise a choice would
fit. The unit is the session, as labels are given.

Beside the sessions, each tally counts in the user's currency (loopledger.analysis.scoring's
`calls_saved`, `calls_lost`, `flagged_inside`): the calls inside labelled loops its halts saved,
of all calls spent inside them (with a session-bootstrap interval); the calls of normal sessions
after a false halt, of all their calls; the loops whose first warn, block or halt came inside
them. Every tally is also kept per family (loopledger.analysis.families: coding agents,
harnesses, other) — in sample, and held out pooled over the folds.

Pure: candidates are any hashable names, and what each did to each session (`Verdicts`) is
computed by the caller (the bench replays them; `loopledger score --cv` reads the ledger).
"""

from __future__ import annotations

import posixpath
from collections.abc import Hashable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Generic, TypeVar

from loopledger.analysis.families import FAMILIES as FAMILY_ORDER
from loopledger.analysis.scoring import (
    CAUGHT,
    EARLY,
    FALSE_HALT,
    LOOP,
    NORMAL,
    Judged,
    any_of,
    bootstrap_ratio,
    calls_lost,
    calls_saved,
    flagged_inside,
    interval_text,
    loop_length,
    outcome,
    rank,
    score,
    share_text,
    wilson,
)

C = TypeVar("C", bound=Hashable)


@dataclass(frozen=True, slots=True)
class Case:
    """One labelled session (loop or normal; unclear sessions are left out before)."""

    session: Hashable
    group: str
    label: str
    first: int | None = None  # the labelled loop's calls, 1-based (loop only)
    last: int | None = None
    calls: int = 0  # the session's tool calls (what a false halt's calls lost are counted against)
    family: str = ""  # loopledger.analysis.families.family of the session ("": not told)


@dataclass(frozen=True, slots=True)
class Verdicts:
    """What one setting did to one session: its first halt (a 1-based call position, None: never),
    how many warnings it gave before that halt (all of them when it never halted), and where it
    first warned, blocked or halted (None: never; the halt when not told)."""

    halt_at: int | None = None
    warnings: int = 0
    flag_at: int | None = None

    @property
    def first_flag(self) -> int | None:
        known = [p for p in (self.flag_at, self.halt_at) if p is not None]
        return min(known) if known else None


NEVER = Verdicts()


@dataclass(slots=True)
class Tally:
    """Per-session outcomes of one setting over some cases."""

    loops: int = 0
    caught: int = 0  # halted inside the labelled loop
    early: int = 0  # halted before the loop began
    missed: int = 0  # never halted, or only after the loop
    normal: int = 0
    false_halts: int = 0  # normal sessions halted
    normal_warned: int = 0  # normal sessions given any warning
    warnings: int = 0  # warnings on normal sessions, in all
    flagged: int = 0  # loop sessions whose first warn, block or halt fell inside the loop
    saved: int = 0  # calls inside labelled loops after a halt inside them …
    loop_calls: int = 0  # … of the calls spent inside the loops (last − first + 1, summed)
    lost: int = 0  # calls of normal sessions after a false halt …
    normal_calls: int = 0  # … of the normal sessions' calls
    # (saved, loop calls) per loop session and (lost, calls) per normal one: what the bootstrap
    # intervals resample
    loop_pairs: list[tuple[int, int]] = field(default_factory=list)
    normal_pairs: list[tuple[int, int]] = field(default_factory=list)

    def add(self, case: Case, v: Verdicts) -> None:
        o = outcome(case.label, case.first, case.last, v.halt_at)
        if case.label == LOOP:
            self.loops += 1
            if o == CAUGHT:
                self.caught += 1
            elif o == EARLY:
                self.early += 1
            else:
                self.missed += 1
            self.flagged += flagged_inside(case.first, case.last, v.first_flag)
            saved, spent = calls_saved(case.label, case.first, case.last, v.halt_at), loop_length(case.first, case.last)
            self.saved += saved
            self.loop_calls += spent
            self.loop_pairs.append((saved, spent))
        elif case.label == NORMAL:
            self.normal += 1
            self.false_halts += o == FALSE_HALT
            self.normal_warned += v.warnings > 0
            self.warnings += v.warnings
            lost = calls_lost(case.label, v.halt_at, case.calls)
            self.lost += lost
            self.normal_calls += case.calls
            self.normal_pairs.append((lost, case.calls))

    def merge(self, other: Tally) -> None:
        for name in self.__slots__:
            setattr(self, name, getattr(self, name) + getattr(other, name))

    def rank_key(self) -> tuple[int, ...]:
        """Smaller is better: precision first (see the module docstring), then calls saved."""
        return self.false_halts, -self.caught, self.early, -self.saved

    @property
    def caught_interval(self) -> tuple[float, float] | None:
        return wilson(self.caught, self.loops)

    @property
    def false_halt_interval(self) -> tuple[float, float] | None:
        return wilson(self.false_halts, self.normal)

    @property
    def warned_interval(self) -> tuple[float, float] | None:
        return wilson(self.normal_warned, self.normal)

    def cells(self) -> tuple[str, str, str]:
        """(loops halted inside, normal sessions halted, normal sessions warned), each as
        `k/n [low, high]` with its Wilson 95% interval."""
        return (f"{self.caught}/{self.loops} {interval_text(self.caught_interval)}",
                f"{self.false_halts}/{self.normal} {interval_text(self.false_halt_interval)}",
                f"{self.normal_warned}/{self.normal} {interval_text(self.warned_interval)}"
                + (f", {self.warnings} warnings" if self.warnings else ""))

    @property
    def flagged_interval(self) -> tuple[float, float] | None:
        return wilson(self.flagged, self.loops)

    @property
    def saved_interval(self) -> tuple[float, float] | None:
        """Session-bootstrap 95% interval of saved / loop_calls (scoring.bootstrap_ratio)."""
        return bootstrap_ratio(self.loop_pairs)

    @property
    def lost_interval(self) -> tuple[float, float] | None:
        return bootstrap_ratio(self.normal_pairs)

    def currency_cells(self) -> tuple[str, str, str, str, str, str]:
        """The figures in the user's currency, in CURRENCY_HEADS' order: loops halted inside,
        flagged inside, calls saved, normal sessions halted, calls lost, normal sessions warned."""
        caught, halted, warned = self.cells()
        return (caught, f"{self.flagged}/{self.loops} {interval_text(self.flagged_interval)}",
                share_text(self.saved, self.loop_calls, self.saved_interval), halted,
                share_text(self.lost, self.normal_calls, self.lost_interval), warned)


CURRENCY_HEADS = ("loops halted inside", "flagged inside", "calls saved", "normal halted", "calls lost",
                  "normal warned")


def tally(cases: Iterable[Case], verdicts: Mapping[Hashable, Verdicts]) -> Tally:
    """One setting's outcomes over `cases` (`verdicts` by session; a session absent: never halted)."""
    t = Tally()
    for case in cases:
        t.add(case, verdicts.get(case.session, NEVER))
    return t


def choose(candidates: Sequence[C], cases: Sequence[Case],
           table: Mapping[C, Mapping[Hashable, Verdicts]], margin: int = 0) -> tuple[C, Tally]:
    """The candidate that scores best on `cases` (precision first; ties: listed first), with its
    tally. `margin`: another candidate replaces the first (the default) only when it halts fewer
    normal sessions, or as few and catches at least `margin` loops more — a session or two either
    way is what any sample of labels moves by chance."""
    if not candidates:
        raise ValueError("no candidate setting to choose from")
    first = tally(cases, table[candidates[0]])
    best: tuple[C, Tally] = (candidates[0], first)
    for c in candidates[1:]:
        t = tally(cases, table[c])
        clearly = t.false_halts < first.false_halts or (t.false_halts == first.false_halts
                                                        and t.caught >= first.caught + margin)
        if t.rank_key() < best[1].rank_key() and (margin <= 0 or clearly):
            best = (c, t)
    return best


@dataclass(slots=True)
class Fold(Generic[C]):
    group: str
    chosen: C  # chosen on every other group
    held_out: Tally  # its outcomes on this group's sessions


@dataclass(slots=True)
class CrossValidated(Generic[C]):
    chosen: C  # chosen on every labelled session (what would ship)
    in_sample: Tally  # that choice scored on the sessions it was chosen on
    held_out: Tally = field(default_factory=Tally)  # pooled over the folds
    folds: list[Fold[C]] = field(default_factory=list)
    # the same two tallies per family (Case.family), in the order the families first appear
    in_sample_by: dict[str, Tally] = field(default_factory=dict)
    held_out_by: dict[str, Tally] = field(default_factory=dict)

    @property
    def stable(self) -> bool:
        """Every fold chose what the whole set chose."""
        return all(f.chosen == self.chosen for f in self.folds)


def cross_validate(candidates: Sequence[C], cases: Sequence[Case],
                   table: Mapping[C, Mapping[Hashable, Verdicts]], margin: int = 0) -> CrossValidated[C]:
    """Leave one group out: choose on the rest, score on it; pool the held-out tallies.

    With a single group there is nothing to hold out: the held-out tally stays empty (zero
    sessions) rather than repeating the in-sample one. A fold is formed only for a group with at
    least one scored session."""
    cases = [c for c in cases if c.label in (LOOP, NORMAL)]
    chosen, in_sample = choose(candidates, cases, table, margin)
    result = CrossValidated(chosen, in_sample)
    families = list(dict.fromkeys(c.family for c in cases))
    result.in_sample_by = {f: tally([c for c in cases if c.family == f], table[chosen]) for f in families}
    groups = list(dict.fromkeys(c.group for c in cases))
    if len(groups) < 2:
        return result
    result.held_out_by = {f: Tally() for f in families}
    for g in groups:
        train = [c for c in cases if c.group != g]
        test = [c for c in cases if c.group == g]
        pick, _ = choose(candidates, train, table, margin)
        held = tally(test, table[pick])
        result.folds.append(Fold(g, pick, held))
        result.held_out.merge(held)
        for f in families:
            result.held_out_by[f].merge(tally([c for c in test if c.family == f], table[pick]))
    return result


def fixed(candidate: C, cases: Sequence[Case], table: Mapping[C, Mapping[Hashable, Verdicts]]) -> CrossValidated[C]:
    """A setting nobody tunes (a peer at its upstream defaults): held out = in sample, by fold."""
    return cross_validate([candidate], cases, table)


# ── from a ledger's judged rows ───────────────────────────────────────────────────────────────

GROUP_BY = ("folder", "agent", "file")


def group_of(path: str, fmt: str | None, by: str = "folder") -> str:
    """The group a labelled session is held out with: its source file's folder (a project: what
    ~/.claude/projects keeps apart), its agent's format, or the file itself."""
    if by == "agent":
        return fmt or "?"
    norm = posixpath.normpath(str(path).replace("\\", "/"))
    if by == "file":
        return norm
    if by == "folder":
        return posixpath.dirname(norm) or "."
    raise ValueError(f"group by {by!r}: expected one of {', '.join(GROUP_BY)}")


def from_judged(judged: Iterable[Judged], groups: Mapping[int, str],
                families: Mapping[int, str] | None = None) -> tuple[list[Case], dict[str, dict]]:
    """Cases and verdicts (policy id → session id → Verdicts) from judged rows; a session without
    a group is its own; `families`: session id → its family (loopledger.analysis.families)."""
    cases: dict[int, Case] = {}
    table: dict[str, dict] = {}
    families = families or {}
    for j in judged:
        if j.label not in (LOOP, NORMAL):
            continue
        cases.setdefault(j.session_id, Case(j.session_id, groups.get(j.session_id, f"session {j.session_id}"),
                                            j.label, j.first, j.last, j.calls or 0,
                                            families.get(j.session_id, "")))
        table.setdefault(j.policy_id, {})[j.session_id] = Verdicts(j.halt_at, j.warnings, j.flag_at)
    return list(cases.values()), table


DEFAULT_SET = "the default set"


def leaderboard_choices(judged: list[Judged], order: Sequence[tuple[str, str]], groups: Mapping[int, str],
                        default_ids: Sequence[str],
                        families: Mapping[int, str] | None = None) -> list[tuple[str, CrossValidated]]:
    """The choices a person makes from a leaderboard, each scored by grouped cross-validation:
    its top (every policy a candidate, in ranking order), the best setting of each detector with
    several stored, and the default set as shipped (its policies as one guard, when all are
    stored). `order`: (policy id, label) of every policy; labels start with the detector's name."""
    labels = dict(order)
    if default_ids and all(pid in labels for pid in default_ids):
        judged = judged + any_of(judged, list(default_ids), DEFAULT_SET)
    cases, table = from_judged(judged, groups, families)
    ranked = [s.policy_id for s in rank(score(judged, list(labels.items()))) if s.policy_id in table]
    rows: list[tuple[str, CrossValidated]] = []
    if ranked:
        rows.append(("the top of this leaderboard", cross_validate(ranked, cases, table)))
    by_detector: dict[str, list[str]] = {}
    for pid in ranked:
        by_detector.setdefault(labels[pid].split(" ", 1)[0], []).append(pid)
    rows += [(f"the best {det} setting", cross_validate(pids, cases, table))
             for det, pids in by_detector.items() if len(pids) > 1]
    if DEFAULT_SET in table:
        rows.append((f"{DEFAULT_SET} (as shipped)", fixed(DEFAULT_SET, cases, table)))
    return rows


def family_tallies(judged: Iterable[Judged], policy_ids: Sequence[str],
                   families: Mapping[int, str]) -> dict[str, dict[str, Tally]]:
    """In sample, per family present (in loopledger.analysis.families' order) and per policy (in
    the order given), its Tally over the sessions of that family it judged: the leaderboard's and
    `loopledger score`'s tables in the user's currency. `families`: session id → family."""
    judged = list(judged)
    cases, table = from_judged(judged, {}, families)
    present = [f for f in FAMILY_ORDER if any(c.family == f for c in cases)]
    present += sorted({c.family for c in cases} - set(present))
    out: dict[str, dict[str, Tally]] = {}
    for fam in present:
        mine = [c for c in cases if c.family == fam]
        out[fam] = {pid: tally([c for c in mine if c.session in table.get(pid, {})], table.get(pid, {}))
                    for pid in policy_ids}
    return out


def group_count(cases_groups: Mapping[int, str], judged: Iterable[Judged]) -> int:
    """How many groups hold a session labelled loop or normal."""
    return len({cases_groups.get(j.session_id, f"session {j.session_id}") for j in judged
                if j.label in (LOOP, NORMAL)})
