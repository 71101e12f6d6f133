"""The replay engine: drives policies over a session's events, step by step.

THE detector driver — the ingest worker (`replay_many`), the Replay page (`Replayer`), the Compare
page and `loopledger replay` (`replay`) all go through `_Driver.feed`; no other code feeds
detectors.

Rules:
- seq = the event's 0-based index in the session (every kind); one `Step` per event.
- Runs are 0-based; a `UserTurn` starts a new run unless the current run has no events yet.
- A batch is checked before it runs. Its answers are collected as `Answers` events arrive
  (matched by call id; an answer without an id — or with an id the batch does not know, when
  some call has none — goes to the oldest unanswered such call). The batch is
  judged when every call is answered, or when superseded by the next batch, the next user turn or
  the end of the events — then with None for what never came. Results carry the judged batch's
  seq and sit on the step where the judging happened.
- After a halt the run's later steps get `after_halt` checks (one per call for per-call policies,
  one per batch otherwise; the halting batch's own later calls too; prose turns for policies that
  read prose) and the policy sees nothing until the next user turn, which starts fresh.
- A batch without calls is a prose turn. Prose and answers never break a run.
"""

from __future__ import annotations

import copy
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any, NamedTuple

from loopledger import vocab
from loopledger.detectors.policy import BATCH, Check, Policy, PolicySpec, Result, make_policy
from loopledger.events import Answer, Answers, Batch, Event, Prose, Retry, UserTurn


class Step(NamedTuple):
    """One event's outcome for one policy (a NamedTuple: one is built per event per policy)."""

    seq: int
    run: int
    event: Event
    checks: tuple[Check, ...] = ()
    results: tuple[Result, ...] = ()
    state: dict[str, Any] | None = None


_new = tuple.__new__


class PendingBatch:
    """A checked batch waiting for its answers: THE pairing of answers to calls (by id; an
    answer without an id, or with an id the batch does not know, takes the first free call).
    The ledger writer uses it too, so stored answers are the ones the detectors judged."""

    __slots__ = ("seq", "batch", "slots", "missing")

    def __init__(self, seq: int, batch: Batch) -> None:
        self.seq = seq
        self.batch = batch
        self.slots: list[Answer | None] = [None] * len(batch.calls)
        self.missing = len(batch.calls)

    def add(self, answer: Answer) -> None:
        calls = self.batch.calls
        slots = self.slots
        cid = answer.call_id
        if cid is None:
            targets: Sequence[int] = range(len(calls))
        else:
            known = False
            for i, c in enumerate(calls):  # the common case, without building a list
                if c.id == cid:
                    if slots[i] is None:  # the first answer for a call wins
                        slots[i] = answer
                        self.missing -= 1
                        return
                    known = True
            if known:
                return
            # an id this batch does not know goes to a call that has no id, if any
            targets = [i for i, c in enumerate(calls) if c.id is None]
        for i in targets:
            if slots[i] is None:  # the first answer for a call wins
                slots[i] = answer
                self.missing -= 1
                return

    def __deepcopy__(self, memo: dict[int, Any]) -> PendingBatch:
        new = PendingBatch.__new__(PendingBatch)
        new.seq, new.batch, new.slots, new.missing = self.seq, self.batch, list(self.slots), self.missing
        return new


_HALT = vocab.HALT
_ALLOW = vocab.ALLOW
_AFTER_HALT = vocab.AFTER_HALT
_AFTER_HALT_BATCH = (Check(BATCH, vocab.AFTER_HALT),)
_AFTER_HALT_CALLS: dict[int, tuple[Check, ...]] = {}


def _after_halt_calls(n: int) -> tuple[Check, ...]:
    """One after_halt check per call of an n-call batch (Checks are immutable: shared)."""
    out = _AFTER_HALT_CALLS.get(n)
    if out is None:
        out = tuple(Check(i, vocab.AFTER_HALT) for i in range(n))
        if n <= 256:
            _AFTER_HALT_CALLS[n] = out
    return out


class _Driver:
    """One policy's walk over one session: runs, pending answers, halts."""

    __slots__ = ("policy", "run", "in_run", "halted", "pending", "reads_prose", "reads_answers")

    def __init__(self, policy: Policy) -> None:
        self.policy = policy
        self.run = 0
        self.in_run = 0  # events seen in the current run
        self.halted = False
        self.pending: PendingBatch | None = None
        self.reads_prose = policy.reads_prose
        self.reads_answers = policy.reads_answers

    def _judge(self) -> tuple[Result, ...]:
        p = self.pending
        if p is None:
            return ()
        self.pending = None
        got = self.policy.answers(p.batch, p.slots)
        if not got:  # the common case: per-call policies judge nothing here
            return ()
        return tuple([Result(r.idx, r.outcome, p.seq) for r in got])

    def _after_halt(self, event: Event) -> tuple[Check, ...]:
        if isinstance(event, Batch) and event.calls:
            if self.policy.per_call:
                return _after_halt_calls(len(event.calls))
            return _AFTER_HALT_BATCH
        text = event.text if isinstance(event, Prose | Batch) else ""
        if self.reads_prose and text:
            return _AFTER_HALT_BATCH
        return ()

    def feed(self, seq: int, event: Event, last: bool = False, with_state: bool = False) -> Step:
        # The innermost loop of every replay (once per event per policy): no list is built unless
        # a policy returns one, and the empty tuple stands for "no checks" / "no results".
        checks: tuple[Check, ...] = ()
        results: tuple[Result, ...] = ()
        # Most events are batches and answers: test for them first.
        if isinstance(event, Batch) and event.calls:
            if self.pending is not None:
                results = self._judge()
            if self.halted:
                checks = self._after_halt(event)
            else:
                policy = self.policy
                got = policy.check(event)
                n = len(event.calls)
                if policy.per_call and len(got) < n:
                    got = [*got, *_after_halt_calls(n)[len(got):]]
                checks = tuple(got)
                if self.reads_answers:
                    self.pending = PendingBatch(seq, event)
                for c in checks:
                    if c.verdict == _HALT:
                        self.halted = True
                        break
        elif isinstance(event, Answers):
            p = self.pending
            if p is not None:
                for answer in event.answers:
                    p.add(answer)
                if p.missing == 0:
                    results = self._judge()
        elif isinstance(event, UserTurn):
            if self.in_run:
                self.run += 1
                self.in_run = 0
            results = self._judge()
            said = getattr(self.policy, "user_said", None)  # a policy that reads what was said
            if said is not None:
                said(event.text)
            self.policy.user_turn()
            self.halted = False
        elif isinstance(event, Retry):
            # The harness retrying a request: no check, no judgement, and not part of a run's
            # events (a retry before the first prompt must not make that prompt start run 1).
            if last and self.pending is not None:
                results = self._judge()
            return _new(Step, (seq, self.run, event, (), results,
                               self.state() if with_state else None))
        elif isinstance(event, Prose | Batch):
            if self.halted:
                checks = self._after_halt(event)
            else:
                checks = tuple(self.policy.prose(event.text))
                if any(c.verdict == _HALT for c in checks):
                    self.halted = True
        else:
            raise TypeError(f"replay: event {seq} is a {type(event).__name__}, not a session event "
                            "(UserTurn, Prose, Batch, Answers, Retry); pass one session's events")
        if last and self.pending is not None:
            results += self._judge()
        self.in_run += 1
        # tuple.__new__ skips the NamedTuple's Python-level __new__: one Step per event per policy.
        return _new(Step, (seq, self.run, event, checks, results,
                           self.state() if with_state else None))

    def finish(self) -> tuple[Result, ...]:
        """End of the session so far: judge the pending batch with unknowns (what `feed(...,
        last=True)` adds). A resumable snapshot is taken BEFORE this, since it forgets the batch."""
        return self._judge() if self.pending is not None else ()

    def state(self) -> dict[str, Any]:
        return {"run": self.run, "halted": self.halted, **self.policy.state()}


# The incremental walk of one policy, public for the live paths (hooks, `guard`, the Python API):
# they feed one event at a time as the agent reports it, through the same code as every replay.
Driver = _Driver


# Severity of a verdict when a set's members disagree on one call: the most severe is the set's.
_SEVERITY = {vocab.ALLOW: 0, vocab.WARN: 1, vocab.BLOCK: 2, vocab.HALT: 3, vocab.AFTER_HALT: 4}


class PolicySet(Policy):
    """Several policies enforced as one guard (the live default set, `loopledger enforce A B`).

    Each member walks the events with its own driver, exactly as it would alone; on each call
    the set's check is the most severe of the members' checks there (ties: the first member
    named), and `decided_by` says whose it was. So the set halts at the first call any member
    halts, which is how scoring judges a set (loopledger.analysis.scoring.any_of: the earliest
    first halt of any of them). After that halt the run is stopped for the whole set, as for
    any policy, until the next user turn."""

    _shared = (*Policy._shared, "specs")

    def __init__(self, policies: Sequence[Policy]) -> None:
        if not policies:
            raise ValueError("a policy set needs at least one policy")
        super().__init__(policies[0].spec)
        self.specs: tuple[PolicySpec, ...] = tuple(p.spec for p in policies)
        self.members = [_Driver(p) for p in policies]
        self.reads_answers = any(p.reads_answers for p in policies)
        self.reads_prose = any(p.reads_prose for p in policies)
        self.decided_by: list[int] = []  # per check of the last `check`/`prose`: the member's index
        self._seq = 0

    @classmethod
    def of(cls, specs: Sequence[PolicySpec]) -> Policy:
        """One policy for `specs`: the policy itself for one spec, a set for several."""
        policies = [make_policy(sp) for sp in specs]
        return policies[0] if len(policies) == 1 else cls(policies)

    def _feed(self, event: Event) -> list[tuple[Check, ...]]:
        seq, self._seq = self._seq, self._seq + 1
        return [m.feed(seq, event).checks for m in self.members]

    def _worst(self, candidates: Iterable[tuple[int, Check]]) -> tuple[int, Check] | None:
        best: tuple[int, Check] | None = None
        for who, c in candidates:
            if best is None or _SEVERITY.get(c.verdict, 0) > _SEVERITY.get(best[1].verdict, 0):
                best = (who, c)
        return best

    def user_turn(self) -> None:
        self._feed(UserTurn(""))

    def prose(self, text: str) -> list[Check]:
        found = self._worst((who, c) for who, cs in enumerate(self._feed(Prose(text))) for c in cs)
        self.decided_by = [found[0]] if found else []
        return [Check(BATCH, *found[1][1:])] if found else []

    def check(self, batch: Batch) -> list[Check]:
        per_member = self._feed(batch)
        out: list[Check] = []
        self.decided_by = []
        for i in range(len(batch.calls)):
            found = self._worst((who, c) for who, cs in enumerate(per_member) for c in cs
                                if c.idx in (i, BATCH))
            if found is None:
                who, c = 0, Check(i, vocab.ALLOW)
            else:
                who, c = found
            out.append(Check(i, *c[1:]))
            self.decided_by.append(who)
            if c.verdict in (vocab.HALT, vocab.AFTER_HALT):
                break  # per call: the engine marks the batch's later calls after_halt
        return out

    def answers(self, batch: Batch, answers: Sequence[Answer | None]) -> list[Result]:
        got = tuple(a for a in answers if a is not None)
        if got:
            self._feed(Answers(got))
        return []

    def state(self) -> dict[str, Any]:
        return {sp.label: m.state() for sp, m in zip(self.specs, self.members, strict=True)}


def _as_policy(policy: Policy | PolicySpec | str) -> Policy:
    return policy if isinstance(policy, Policy) else make_policy(policy)


def replay_many(events: Iterable[Event], policies: Sequence[Policy | PolicySpec | str],
                with_state: bool = False) -> Iterator[tuple[Step, ...]]:
    """Drive several policies over one session in one pass: one tuple of Steps (in `policies`
    order) per event. Each policy keeps its own state; give fresh policies per session."""
    drivers = [_Driver(_as_policy(p)) for p in policies]
    it = iter(events)
    try:
        current = next(it)
    except StopIteration:
        return
    seq = 0
    for following in it:
        yield tuple(d.feed(seq, current, False, with_state) for d in drivers)
        current = following
        seq += 1
    yield tuple(d.feed(seq, current, True, with_state) for d in drivers)


def replay(events: Iterable[Event], policy: Policy | PolicySpec | str,
           with_state: bool = False) -> Iterator[Step]:
    """Drive one policy over one session's events: one Step per event."""
    for (step,) in replay_many(events, [policy], with_state):
        yield step


class Replayer:
    """A cursor over one session for the Replay page: forward reuses the live state; back and
    jumps restart from the nearest deep-copied snapshot (one every `snapshot_every` steps) and
    re-step, so the state at any position is exactly what a replay from scratch gives."""

    def __init__(self, events: Sequence[Event], policy: Policy | PolicySpec | str,
                 snapshot_every: int = 64) -> None:
        self.events = list(events)
        self.snapshot_every = max(1, snapshot_every)
        self._driver = _Driver(_as_policy(policy))
        self._snapshots: dict[int, _Driver] = {0: self._copy(self._driver)}
        self._known: list[Step] = []  # every step computed so far: a replay is deterministic
        self.position = 0  # events applied so far

    @property
    def policy(self) -> Policy:
        return self._driver.policy

    @property
    def steps(self) -> list[Step]:
        """The steps up to the cursor (without state), oldest first."""
        return self._known[: self.position]

    def __len__(self) -> int:
        return len(self.events)

    @staticmethod
    def _copy(driver: _Driver) -> _Driver:
        # Policies and pending batches share the (immutable) events in their copies: see
        # Policy.__deepcopy__ and PendingBatch.__deepcopy__.
        return copy.deepcopy(driver)

    def forward(self) -> Step | None:
        """Apply the next event; None at the end."""
        seq = self.position
        if seq >= len(self.events):
            return None
        step = self._driver.feed(seq, self.events[seq], last=seq == len(self.events) - 1)
        if seq == len(self._known):
            self._known.append(step)
        self.position = seq + 1
        if self.position % self.snapshot_every == 0 and self.position not in self._snapshots:
            self._snapshots[self.position] = self._copy(self._driver)
        return step

    def back(self) -> Step | None:
        return self.jump_to(self.position - 1)

    def fork(self) -> Replayer:
        """A new cursor at position 0 sharing this one's computed steps and snapshots, so a page can
        replay a session once (cached) and give every viewer their own cursor without replaying it
        again. Shared read-only: a move deep-copies the snapshot it restarts from, and a replayer
        that has reached the end appends no step and takes no snapshot any more."""
        new = Replayer.__new__(Replayer)
        new.events, new.snapshot_every = self.events, self.snapshot_every
        new._snapshots, new._known = self._snapshots, self._known
        new._driver = self._copy(self._snapshots[0])
        new.position = 0
        return new

    def jump_to(self, position: int) -> Step | None:
        """Move to `position` events applied (clamped to 0..len); return the last step taken."""
        position = max(0, min(position, len(self.events)))
        base = max(k for k in self._snapshots if k <= position)
        if position < self.position or base > self.position:
            # Back, or ahead past a snapshot: restart from the nearest one at or before.
            self._driver = self._copy(self._snapshots[base])
            self.position = base
        while self.position < position:
            self.forward()
        return self.current

    @property
    def current(self) -> Step | None:
        """The last step taken, with the policy's state after it."""
        if not self.position:
            return None
        return self._known[self.position - 1]._replace(state=self.state())

    def state(self) -> dict[str, Any]:
        return self._driver.state()


@dataclass(slots=True)
class RunTally:
    run: int
    outcome: str = vocab.CLEAN
    halt_seq: int | None = None
    halt_idx: int | None = None
    calls: int = 0
    strikes: int = 0
    warnings: int = 0
    blocks: int = 0
    saved: int = 0


@dataclass(slots=True)
class Tally:
    runs: list[RunTally] = field(default_factory=list)
    calls: int = 0
    strikes: int = 0
    warnings: int = 0
    blocks: int = 0
    halts: int = 0
    saved: int = 0
    halted_runs: int = 0
    first_halt_seq: int | None = None

    @property
    def n_runs(self) -> int:
        return len(self.runs)

    def totals(self) -> dict[str, Any]:
        """Per-session counts, named as in the ledger's session_stats table."""
        return {"runs": len(self.runs), "calls": self.calls, "strikes": self.strikes,
                "warnings": self.warnings, "blocks": self.blocks, "halts": self.halts,
                "saved": self.saved, "halted_runs": self.halted_runs,
                "first_halt_seq": self.first_halt_seq}


_RANK = {vocab.CLEAN: 0, vocab.WARNED: 1, vocab.BLOCKED: 2, vocab.HALTED: 3}
_OUTCOME = {vocab.WARN: vocab.WARNED, vocab.BLOCK: vocab.BLOCKED, vocab.HALT: vocab.HALTED}


class Tallier:
    """`tally` as a fold: add steps one at a time (a resumed session adds only its new ones).

    Its state is small (the session's RunTally rows and the runs of the last two batches, the
    only ones a result can judge), so it is kept in a resume snapshot (loopledger.resume)."""

    __slots__ = ("out", "by_run", "batch_run")

    def __init__(self) -> None:
        self.out = Tally()
        self.by_run: dict[int, RunTally] = {}
        self.batch_run: dict[int, int] = {}  # batch seq -> run, for the last batches only

    def add(self, step: Step) -> None:
        seq, run, event, checks, results, _ = step  # unpacked once: once per event per policy
        rt = self.by_run.get(run)
        if rt is None:
            rt = self.by_run[run] = RunTally(run)
            self.out.runs.append(rt)
        if type(event) is Answers and not results:  # the common event that counts nothing
            return
        out = self.out
        if isinstance(event, Batch):
            n = len(event.calls)
            rt.calls += n
            out.calls += n
            batch_run = self.batch_run
            if n:
                batch_run[seq] = run
            if len(batch_run) > 2:  # a result judges the pending batch: the last one with calls
                del batch_run[next(iter(batch_run))]
        for c in checks:
            v = c.verdict
            if v == _ALLOW:
                continue
            if v == _AFTER_HALT:
                n = 1 if c.idx >= 0 else (len(event.calls) if isinstance(event, Batch) else 0)
                rt.saved += n
                out.saved += n
                continue
            if v == vocab.WARN:
                rt.warnings += 1
                out.warnings += 1
            elif v == vocab.BLOCK:
                rt.blocks += 1
                out.blocks += 1
            elif v == _HALT:
                out.halts += 1
                if rt.halt_seq is None:
                    rt.halt_seq, rt.halt_idx = seq, c.idx
                    out.halted_runs += 1
                if out.first_halt_seq is None:
                    out.first_halt_seq = seq
            outcome = _OUTCOME[v]
            if _RANK[outcome] > _RANK[rt.outcome]:
                rt.outcome = outcome
        if results:
            self.add_results(run, results)

    def add_results(self, run: int, results: Iterable[Result]) -> None:
        """Results judged at a step of `run` (also: the end-of-session judging, `finish`)."""
        rt = self.by_run[run]
        for r in results:
            if r.outcome == vocab.REPEATED:
                target = self.by_run.get(self.batch_run.get(r.seq, run), rt)
                target.strikes += 1
                self.out.strikes += 1


def tally(steps: Iterable[Step]) -> Tally:
    """Per-run outcomes (worst verdict wins) and session totals for one policy's steps.

    saved = calls in after_halt checks: one per per-call check, the batch's calls per
    batch-level check; strikes = `repeated` results (counted in the run of the judged batch)."""
    t = Tallier()
    for step in steps:
        t.add(step)
    return t.out
