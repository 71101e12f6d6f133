"""Gemini CLI's tool-call loop check, ported (detector `gemini-cli`).

Source: `@google/gemini-cli-core` 0.61.0, `packages/core/src/services/loopDetectionService.ts`
(`LoopDetectionService.checkToolCallLoop`, `addAndCheck`, `reset`, `clearDetection`) and its
caller `core/client.ts` (`processTurn`, `_recoverFromLoop`, `sendMessageStream`).

Upstream rules, as that source has them:

- Every tool call request's key (`sha256(name + ":" + JSON.stringify(args))`) is appended to a
  history of at most `5 × TOOL_CALL_LOOP_THRESHOLD` = 25 keys.
- A loop is found when, for some cycle length k from 1 to 5, the last `k × 5` keys are the last
  k keys repeated 5 times (`TOOL_CALL_LOOP_THRESHOLD` = 5): one call 5 times in a row, an A-B
  pair 5 times, … up to a 5-call cycle 5 times.
- The first detection in a prompt (count 1) does not stop the agent: the client injects
  "System: Potential loop detected … take a step back" and continues (`_recoverFromLoop`,
  `clearDetection` keeps the count and the history). The second (count 2) ends the turn
  (`LoopDetected`). Stored here: the first as a warn, the second as a halt.
- A new user prompt (a new prompt id) resets everything: history, detection count.

Parameters: `repeats` (TOOL_CALL_LOOP_THRESHOLD, 5) and `max_cycle` (the loop bound 5; the
history keeps `max_cycle × repeats` keys as upstream keeps 5 × 5). Earlier releases counted only
the same call back to back (`max_cycle=1` gives that rule); the port follows 0.61.0.

Where the port differs, and why:

- Keys use the project's canonical arguments (object keys sorted) where upstream hashes
  `JSON.stringify(args)`, which depends on key order: a model that writes the same arguments in
  another key order repeats a call here but not there. Models rarely do; one definition of
  "same arguments" across every detector matters more for comparing them.
- On the first detection upstream also drops the call that completed the cycle (the stream is
  cut before it is scheduled) and re-prompts the model; a transcript shows what the agent did
  instead, so the call stays in the history and the warn does not count as saved calls.
- The content-chanting check (repeated 50-character chunks of one streamed reply) is left
  out: it reads the reply as it streams, chunk by chunk (its fences, tables and lists reset it
  per chunk), which a transcript's finished text does not reproduce faithfully. The LLM-based
  check (after 30 turns, asking a model) is left out: it needs the model.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from loopledger import vocab
from loopledger.detectors.base import INT, Check, Param, Policy
from loopledger.detectors.canonical import call_key
from loopledger.detectors.errors import ConfigError
from loopledger.detectors.registry import Detector
from loopledger.events import Batch

if TYPE_CHECKING:  # pragma: no cover — the spec grammar imports the detectors, not the reverse
    from loopledger.detectors.policy import PolicySpec

DEFAULT_REPEATS = 5  # TOOL_CALL_LOOP_THRESHOLD
DEFAULT_MAX_CYCLE = 5


def validate(params: dict[str, Any]) -> None:
    for name in ("repeats", "max_cycle"):
        value = params.get(name)
        if not isinstance(value, int) or isinstance(value, bool):
            raise ConfigError(name, f"{name} is an integer", f"gemini-cli: {name} must be an integer, got {value!r}")
    if params["repeats"] < 2:
        raise ConfigError("repeats", "repeats >= 2",
                          f"gemini-cli: repeats must be >= 2 (one occurrence is no repeat), got {params['repeats']}")
    if params["max_cycle"] < 1:
        raise ConfigError("max_cycle", "max_cycle >= 1", f"gemini-cli: max_cycle must be >= 1, got {params['max_cycle']}")


def repetitions(history: list[str], k: int) -> int:
    """How many times the last k keys repeat back-to-back at the end of `history` (0 when it
    holds fewer than k keys). `repetitions(h, k) >= R` ⇔ upstream's pattern match for k and R."""
    n = len(history)
    if n < k:
        return 0
    matched = 0
    while matched + k < n and history[n - 1 - matched] == history[n - 1 - matched - k]:
        matched += 1
    return (matched + k) // k


class ToolCallLoopCheck:
    """The key history of one prompt and its detection count."""

    __slots__ = ("repeats", "max_cycle", "history", "detections")

    def __init__(self, repeats: int = DEFAULT_REPEATS, max_cycle: int = DEFAULT_MAX_CYCLE) -> None:
        validate({"repeats": repeats, "max_cycle": max_cycle})
        self.repeats = repeats
        self.max_cycle = max_cycle
        self.history: list[str] = []
        self.detections = 0

    def __deepcopy__(self, memo: dict[int, Any]) -> ToolCallLoopCheck:
        new = ToolCallLoopCheck.__new__(ToolCallLoopCheck)
        new.repeats, new.max_cycle, new.detections = self.repeats, self.max_cycle, self.detections
        new.history = list(self.history)
        return new

    def reset(self) -> None:
        self.history.clear()
        self.detections = 0

    def add(self, key: str) -> tuple[int, int, bool]:
        """Record one call: (repetitions, cycle length, loop found). On a loop the cycle length
        is the smallest k that matched (upstream tries k = 1, 2, … and stops at the first)."""
        history = self.history
        history.append(key)
        keep = self.max_cycle * self.repeats
        if len(history) > keep:
            del history[: len(history) - keep]
        best, best_k = 0, 0
        for k in range(1, self.max_cycle + 1):
            r = repetitions(history, k)
            if r >= self.repeats:
                self.detections += 1
                return r, k, True
            if r > best and r >= 2:
                best, best_k = r, k
        return best, best_k, False

    def state(self) -> dict[str, Any]:
        return {"calls_remembered": len(self.history), "detections": self.detections,
                "repeats": self.repeats, "max_cycle": self.max_cycle,
                "repetitions_by_cycle": {str(k): repetitions(self.history, k)
                                         for k in range(1, self.max_cycle + 1)}}


class GeminiCliPolicy(Policy):
    """Per call: the check runs on each tool call request as it streams."""

    _shared = (*Policy._shared, "_names")

    def __init__(self, spec: PolicySpec) -> None:
        super().__init__(spec)
        self.loop = ToolCallLoopCheck(spec.params["repeats"], spec.params["max_cycle"])
        self._names: tuple[str, ...] = ()

    def user_turn(self) -> None:
        self.loop.reset()
        self._names = ()

    def check(self, batch: Batch) -> list[Check]:
        out = []
        loop = self.loop
        names = list(self._names)
        for i, call in enumerate(batch.calls):
            names.append(call.name)
            r, k, found = loop.add(call.name + ":" + call_key(call)[1])
            if not found:
                out.append(Check(i, vocab.ALLOW, r, k, loop.repeats, ""))
                continue
            cycle = " → ".join(names[-k:])
            if loop.detections == 1:
                out.append(Check(i, vocab.WARN, r, k, loop.repeats,
                                 f"potential loop: {cycle} ×{r} (first detection: the model is told)"))
                continue
            out.append(Check(i, vocab.HALT, r, k, loop.repeats,
                             f"loop detected again: {cycle} ×{r} (the turn ends)"))
            break
        self._names = tuple(names[-self.loop.max_cycle:])
        return out

    def state(self) -> dict[str, Any]:
        return self.loop.state()


PARAMS: tuple[Param, ...] = (
    Param("repeats", INT, DEFAULT_REPEATS, 2, "times a cycle of calls must repeat (TOOL_CALL_LOOP_THRESHOLD)"),
    Param("max_cycle", INT, DEFAULT_MAX_CYCLE, 1, "longest cycle of calls looked for"),
)

DETECTOR = Detector('gemini-cli', PARAMS, GeminiCliPolicy, validate,
                    "Gemini CLI's tool-call loop check (gemini-cli-core 0.61.0): a cycle of 1-5 calls repeated 5 times; warn, then halt")
