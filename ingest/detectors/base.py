"""What every detector shares: its parameters' schema (`Param`), the words it answers in
(`Check`, `Result`) and the `Policy` interface the replay engine drives.

Kept apart from the spec grammar (policy.py) and the registry (registry.py) so a detector module —
ours, a peer's port or a plugin — imports only this to plug in.
"""

from __future__ import annotations

import copy
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, NamedTuple

from loopledger.detectors.canonical import call_key
from loopledger.events import Answer, Batch

if TYPE_CHECKING:  # pragma: no cover — the spec grammar imports the detectors, not the reverse
    from loopledger.detectors.policy import PolicySpec

INT, OPT_INT, NAMES = "int", "int_or_none", "names"
# Further kinds a parameter may take (plugins and newer detectors): free text, a yes/no switch,
# and a fraction written as a decimal.
TEXT, BOOL, FLOAT = "text", "bool", "float"


@dataclass(frozen=True, slots=True)
class Param:
    name: str
    kind: str  # INT | OPT_INT | NAMES | TEXT | BOOL | FLOAT
    default: Any
    minimum: int = 0
    help: str = ""


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


class PerCallAnswers(Policy):
    """A per-call policy whose detector reads each call's answer by the position `check` gave it
    (cycle, progress). Subclasses set `self.detector` and implement `_judge(i, call) -> (Check,
    position)`; the detector has `record_answer(answer, position=…)` and `state()`."""

    reads_answers = True
    detector: Any

    def __init__(self, spec: PolicySpec) -> None:
        super().__init__(spec)
        self._positions: tuple[Batch, list[int]] | None = None

    def _judge(self, i: int, call: Any) -> tuple[Check, int]:
        raise NotImplementedError

    def user_turn(self) -> None:
        self.detector.user_turn()
        self._positions = None

    def check(self, batch: Batch) -> list[Check]:
        out: list[Check] = []
        positions: list[int] = []
        for i, call in enumerate(batch.calls):
            check, position = self._judge(i, call)
            positions.append(position)
            out.append(check)
            if check.verdict == "halt":
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
