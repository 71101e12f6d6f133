"""Roo Code's `ToolRepetitionDetector`, ported (detector `roo`).

Source: RooCodeInc/Roo-Code `src/core/tools/ToolRepetitionDetector.ts` and its spec
`src/core/tools/__tests__/ToolRepetitionDetector.spec.ts`; the caller is
`src/core/assistant-message/presentAssistantMessage.ts`, the limit is the task's
`consecutiveMistakeLimit` (default 3).

Upstream rules, as that source has them:

- Each complete tool call is serialized (name + parameters); the same serialization as the
  previous call raises a counter, another one resets it to 0 and becomes "the previous call".
- When the counter reaches `limit` the call is refused: with the default 3 the 1st, 2nd and 3rd
  identical calls in a row run and the 4th is refused. The counter and the previous call are
  then cleared, so a 5th identical call runs again and the 8th is refused next.
- Refused means: not executed, the user is asked (`mistake_limit_reached`), and the model gets
  the tool error "Tool call repetition limit reached … try a different approach"; the task goes
  on. Stored here as a block.
- `limit` 0 never refuses. `browser_action` with `action` `scroll_down`/`scroll_up` is always
  allowed and leaves the counter untouched.
- The detector lives as long as the task: a user message does not reset it.

Where the port differs, and why:

- Upstream sorts only the top-level parameter names (and `nativeArgs`' top level) before
  `JSON.stringify`; the port uses the project's canonical arguments, sorted at every level. Two
  calls that differ only in the key order of a nested object are identical here, not there.
- Upstream treats a negative limit as 0 (unlimited); the port rejects it (ConfigError), since
  a sweep asking for one is a mistake.
- Calls upstream refuses earlier (an unknown tool, a tool not allowed in the mode) never reach
  the detector there; a transcript cannot tell those apart, so every call is checked.
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

DEFAULT_LIMIT = 3
SCROLL_ACTIONS = ("scroll_down", "scroll_up")


def validate(params: dict[str, Any]) -> None:
    value = params.get("limit")
    if not isinstance(value, int) or isinstance(value, bool):
        raise ConfigError("limit", "limit is an integer", f"roo: limit must be an integer, got {value!r}")
    if value < 0:
        raise ConfigError("limit", "limit >= 0", f"roo: limit must be >= 0 (0 = never refuse), got {value}")


def is_browser_scroll(name: str, args: Any) -> bool:
    return name == "browser_action" and isinstance(args, dict) and args.get("action") in SCROLL_ACTIONS


class ToolRepetitionDetector:
    """`check` answers (allowed, repeats): repeats = identical calls right before this one."""

    __slots__ = ("limit", "previous", "count")

    def __init__(self, limit: int = DEFAULT_LIMIT) -> None:
        validate({"limit": limit})
        self.limit = limit
        self.previous: str | None = None
        self.count = 0

    def __deepcopy__(self, memo: dict[int, Any]) -> ToolRepetitionDetector:
        new = ToolRepetitionDetector.__new__(ToolRepetitionDetector)
        new.limit, new.previous, new.count = self.limit, self.previous, self.count
        return new

    def check(self, name: str, args: Any, key: str) -> tuple[bool, int]:
        if is_browser_scroll(name, args):
            return True, 0
        if self.previous == key:
            self.count += 1
        else:
            self.count = 0
            self.previous = key
        repeats = self.count
        if self.limit > 0 and self.count >= self.limit:
            self.count = 0  # cleared so the user can guide the agent past this point
            self.previous = None
            return False, repeats
        return True, repeats

    def state(self) -> dict[str, Any]:
        return {"repeats": self.count, "limit": self.limit,
                "previous_call": None if self.previous is None else self.previous.split(":", 1)[0]}


class RooPolicy(Policy):
    def __init__(self, spec: PolicySpec) -> None:
        super().__init__(spec)
        self.detector = ToolRepetitionDetector(spec.params["limit"])

    def user_turn(self) -> None:
        pass  # the task's detector outlives user messages

    def check(self, batch: Batch) -> list[Check]:
        out = []
        d = self.detector
        for i, call in enumerate(batch.calls):
            allowed, repeats = d.check(call.name, call.args, call.name + ":" + call_key(call)[1])
            if allowed:
                out.append(Check(i, vocab.ALLOW, repeats, None, d.limit, ""))
            else:
                out.append(Check(i, vocab.BLOCK, repeats, None, d.limit,
                                 f"{call.name}: {repeats + 1} identical calls in a row (limit {d.limit})"))
        return out

    def state(self) -> dict[str, Any]:
        return self.detector.state()


PARAMS: tuple[Param, ...] = (
    Param("limit", INT, DEFAULT_LIMIT, 0,
          "identical repeats allowed; the next one is refused (0 = never)"),
)

DETECTOR = Detector('roo', PARAMS, RooPolicy, validate,
                    "Roo Code's ToolRepetitionDetector: refuses the call after 3 identical ones in a row")
