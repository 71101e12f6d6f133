"""Kilo Code's `LoopDetector.checkToolCall`, ported (detector `kilo`).

Source: Kilo-Org/kilocode `packages/opencode/src/session/loop-detection.ts` at commit
9b65079630d702cdb3f1f4824d6438473a73b001 (the Kilo CLI, `@kilocode/cli`, MIT). The class is
carried but not called: the session processor (`session/processor.ts`) runs OpenCode's own
doom-loop check instead, so this is the guard Kilo ships switched off. No upstream test covers
it; tests/test_kilo_port.py follows the source line by line.

Upstream rules, as that source has them:

- Before a tool call runs, the session's last `TOOL_SCAN_LIMIT` = `TOOL_THRESHOLD × 10` = 30
  parts are read, oldest first. Parts are everything a session stores: a user message's text,
  each model step's `step-start`, its text (and reasoning), one part per tool call, its
  `step-finish`. The current call's own part is among them, still running.
- Walking them, a finished tool part (completed or error) of the same tool with the same input
  (`JSON.stringify`) adds one to `run`. Once one has matched, a part of a write tool (`edit`,
  `multiedit`, `write`, `apply_patch`, whatever its state) or a finished part of the same tool
  with other input sets `run` back to 0: the agent changed something (an edit → test → edit →
  test cycle is not a loop). Other tools, text and user messages in between change nothing.
- `run >= TOOL_THRESHOLD - 1` (two earlier identical calls since the last reset, in the window):
  the user is asked (`doom_loop` permission, "Loop detected: "<tool>" has been called N times
  with identical input. Please try a different approach to make progress."); a refusal writes
  that error on the call and ends the turn. Stored here as a halt (the refusal), on the third
  identical call.
- A write tool's own running part resets the run: a write is never flagged.
- Nothing resets at a user message: the window is the session's last 30 parts.

Where the port differs, and why:

- A transcript holds events, not parts. Parts are counted as Kilo would have written them: one
  for a user turn; for a model step a `step-start`, one text part when the step wrote text, one
  part per call, a `step-finish`. Reasoning parts and `patch` parts (file changes after a step)
  are not in the events and are not counted, so the window reaches a little further back than
  upstream's where a session has them.
- Arguments compare in the project's canonical form (keys sorted at every level) where upstream
  compares `JSON.stringify` of the input as the model wrote it: two calls differing only in key
  order are identical here, not there.
- `write_tools` is a parameter, upstream's four names by default (exact, case-sensitive, as
  upstream): a transcript of another agent names its writes otherwise (`Edit`, `write_file`,
  `str_replace_editor`), and a sweep may say so.
- While halted (after a refusal, until the next user turn) the replay engine shows this guard
  no calls: upstream's turn would have ended there.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from loopledger import vocab
from loopledger.detectors.base import INT, NAMES, Check, Param, Policy
from loopledger.detectors.canonical import call_key
from loopledger.detectors.errors import ConfigError
from loopledger.detectors.registry import Detector
from loopledger.events import Answer, Batch

if TYPE_CHECKING:  # pragma: no cover — the spec grammar imports the detectors, not the reverse
    from loopledger.detectors.policy import PolicySpec

DEFAULT_THRESHOLD = 3  # TOOL_THRESHOLD
SCAN_PER_THRESHOLD = 10  # TOOL_SCAN_LIMIT = TOOL_THRESHOLD * 10
WRITE_TOOLS = ("edit", "multiedit", "write", "apply_patch")

# A part: [kind, tool, key, finished]. Lists, not tuples: a tool part finishes when its answer
# comes back (upstream's status moves from running to completed / error). Parts are found again
# by serial number (how many were stored before them), which a deep copy keeps.
TOOL, OTHER = "tool", "other"


def validate(params: dict[str, Any]) -> None:
    value = params.get("threshold")
    if not isinstance(value, int) or isinstance(value, bool):
        raise ConfigError("threshold", "threshold is an integer", f"kilo: threshold must be an integer, got {value!r}")
    if value < 2:
        raise ConfigError("threshold", "threshold >= 2",
                          f"kilo: threshold must be >= 2 (at 1 every call would be a loop), got {value}")


class LoopDetector:
    """The parts Kilo would have stored, newest last, and `check_tool_call` over them."""

    __slots__ = ("threshold", "write_tools", "parts", "stored", "last_run")

    def __init__(self, threshold: int = DEFAULT_THRESHOLD, write_tools: Sequence[str] = WRITE_TOOLS) -> None:
        validate({"threshold": threshold})
        self.threshold = threshold
        self.write_tools = frozenset(write_tools)
        self.parts: deque[list[Any]] = deque(maxlen=threshold * SCAN_PER_THRESHOLD)
        self.stored = 0  # parts ever stored (the next part's serial)
        self.last_run = 0

    def __deepcopy__(self, memo: dict[int, Any]) -> LoopDetector:
        new = LoopDetector.__new__(LoopDetector)
        new.threshold, new.write_tools, new.last_run = self.threshold, self.write_tools, self.last_run
        new.stored = self.stored
        new.parts = deque((list(p) for p in self.parts), maxlen=self.parts.maxlen)
        return new

    def other(self, n: int = 1) -> None:
        """Parts that are not tool calls (text, step-start, step-finish)."""
        for _ in range(n):
            self.parts.append([OTHER, None, None, False])
        self.stored += n

    def start_call(self, tool: str, key: str) -> int:
        """Store the call's part, running until `finish`; its serial."""
        self.parts.append([TOOL, tool, key, False])
        self.stored += 1
        return self.stored - 1

    def finish(self, serial: int) -> None:
        """The call's answer came back (completed or error: both count)."""
        at = serial - (self.stored - len(self.parts))
        if at >= 0:  # still in the window
            self.parts[at][3] = True

    def check_tool_call(self, tool: str, key: str) -> int:
        """Upstream's scan for the call whose part was just started: `run`, the earlier finished
        identical calls since the last reset (flagged when >= threshold - 1)."""
        run = 0
        matched = False
        for kind, name, part_key, finished in self.parts:
            if kind != TOOL:
                continue
            same_tool_new_input = name == tool and finished and part_key != key
            if (name in self.write_tools or same_tool_new_input) and matched:
                run, matched = 0, False
                continue
            if finished and name == tool and part_key == key:
                run += 1
                matched = True
        self.last_run = run
        return run

    def flagged(self, run: int) -> bool:
        return run >= self.threshold - 1

    def state(self) -> dict[str, Any]:
        return {"parts_remembered": len(self.parts), "scan_parts": self.parts.maxlen,
                "identical_before": self.last_run, "threshold": self.threshold}


class KiloPolicy(Policy):
    """Per call, before it runs; answers finish the calls' parts."""

    reads_answers = True

    def __init__(self, spec: PolicySpec) -> None:
        super().__init__(spec)
        self.detector = LoopDetector(spec.params["threshold"], spec.params["write_tools"])
        self._positions: tuple[Batch, list[int]] | None = None  # the last batch, its calls' serials

    def user_turn(self) -> None:
        self.detector.other()  # the user message's text part; nothing resets
        self._positions = None

    def prose(self, text: str) -> list[Check]:
        self.detector.other(3)  # step-start, text, step-finish
        return []

    def check(self, batch: Batch) -> list[Check]:
        d = self.detector
        d.other(2 if batch.text.strip() else 1)  # step-start (+ its text)
        out: list[Check] = []
        serials: list[int] = []
        for i, call in enumerate(batch.calls):
            key = call_key(call)[1]
            serials.append(d.start_call(call.name, key))
            run = d.check_tool_call(call.name, key)
            if d.flagged(run):
                out.append(Check(i, vocab.HALT, run + 1, None, d.threshold,
                                 f'Loop detected: "{call.name}" has been called {run + 1} times with identical '
                                 "input (the user is asked; a refusal ends the turn)"))
                break  # the stream breaks: no later call, no step-finish
            out.append(Check(i, vocab.ALLOW, run + 1, None, d.threshold, ""))
        else:
            d.other()  # step-finish
        self._positions = (batch, serials)
        return out

    def answers(self, batch: Batch, answers: Sequence[Answer | None]) -> list:
        if self._positions is not None and self._positions[0] is batch:
            for serial, answer in zip(self._positions[1], answers, strict=False):
                if answer is not None:
                    self.detector.finish(serial)
        self._positions = None
        return []

    def state(self) -> dict[str, Any]:
        return self.detector.state()


PARAMS: tuple[Param, ...] = (
    Param("threshold", INT, DEFAULT_THRESHOLD, 2,
          "identical calls (this one included) that make a loop (TOOL_THRESHOLD); the scan reads 10x as many parts"),
    Param("write_tools", NAMES, WRITE_TOOLS, 0,
          "tools whose call resets the count (exact names; upstream's edit|multiedit|write|apply_patch)"),
)

DETECTOR = Detector('kilo', PARAMS, KiloPolicy, validate,
                    "Kilo Code's LoopDetector: the 3rd identical call since a write or a new input of the same tool; halt")
