"""OpenHands' stuck detector, ported: what that guard would have done on a user's own history.

Source: openhands-sdk 1.58.2, `openhands/sdk/conversation/stuck_detector.py` (`StuckDetector`)
and `conversation/types.py` (`StuckDetectionThresholds`), driven from
`impl/local_conversation.py` (`_check_stuck_or_nudge`, called before every agent step).

Upstream rules, as that source has them:

- Only the last 20 events are looked at (`MAX_EVENTS_TO_SCAN_FOR_STUCK_DETECTION`), and of
  those only the ones after the last user message; fewer than min(action_observation,
  action_error, monologue) events: not stuck.
- The last `max(action_observation, action_error + 1)` actions and observations (errors count as
  observations) are collected, most recent first. Stuck when
  1. the last `action_observation` [4] actions are all equal and the last `action_observation`
     observations are all equal ("repeating_action_observation");
  2. the action-error streak (pairs of the same action answered by an agent error, counted from
     the most recent pair back) is longer than `action_error` [3]; a streak of exactly
     `action_error` gets one corrective nudge instead (once per streak), which the agent sees
     as an environment message ("repeating_action_error");
  3. the last `monologue` [3] events are agent messages with nothing between (environment
     messages, such as that nudge, neither count nor break the run) ("monologue");
  4. with at least `alternating_pattern` [6] events, the last `alternating_pattern` actions and
     observations each equal the one two before (A-B-A-B-A-B) ("alternating_pattern").
- Action equality: tool name, arguments and the thought (the text the model wrote with the
  call; in a parallel batch only the first action carries it). Observation equality: tool name
  and content; agent-error equality: the error text. An observation never equals an error.
- The detector is asked before each agent step, so a verdict lands on the next thing the agent
  does: the next batch (all of its calls) or prose turn. "Stuck" ends the conversation
  (status STUCK): stored here as a halt. The nudge is stored as a warn.

Where the port differs, and why:

- Events come from transcripts of any agent, not OpenHands' event log: a `Batch` is one
  ActionEvent per call (the first carrying `Batch.text` as its thought), each answer one
  ObservationEvent, an answer flagged `is_error` an AgentErrorEvent (OpenHands raises those when a
  tool fails; a transcript only has the flag), a prose turn an agent MessageEvent, a `UserTurn`
  the user message. Observations are compared by the full answer text's digest plus the tool
  name (upstream compares the observation object, e.g. a terminal's command and exit code too,
  which a transcript has only as text). Errors are compared by the answer text.
- Observations enter the history in call order once the batch's answers are in; OpenHands
  appends them as each tool finishes. A call that never got an answer adds no observation.
- Arguments are compared in the project's canonical form (object keys sorted); upstream
  compares the parsed Action models, which is the same thing for JSON arguments.
- Events a transcript does not have (system prompts, condensations, state updates) take no
  slot in the 20-event window; the nudge, which upstream appends as an environment message,
  does take one, as it does there.
- A loop that ends the transcript gets no verdict: upstream would have stopped before a next
  step that, here, does not exist, so no call would have been saved.
- The context-window-error scenario is a stub upstream (always False) and is left out.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from loopledger import vocab
from loopledger.detectors.base import BATCH, INT, Check, Param, Policy, Result
from loopledger.detectors.canonical import call_key, digest
from loopledger.detectors.errors import ConfigError
from loopledger.detectors.registry import Detector
from loopledger.events import Answer, Batch

if TYPE_CHECKING:  # pragma: no cover — the spec grammar imports the detectors, not the reverse
    from loopledger.detectors.policy import PolicySpec

MAX_EVENTS = 20  # MAX_EVENTS_TO_SCAN_FOR_STUCK_DETECTION
DEFAULT_ACTION_OBSERVATION = 4
DEFAULT_ACTION_ERROR = 3
DEFAULT_MONOLOGUE = 3
DEFAULT_ALTERNATING_PATTERN = 6

# History entry kinds: the event types StuckDetector tells apart.
ACTION, OBSERVATION, ERROR, MESSAGE, NUDGE = "action", "observation", "error", "message", "nudge"

REPEATING_ACTION_OBSERVATION = "repeating_action_observation"
REPEATING_ACTION_ERROR = "repeating_action_error"
MONOLOGUE = "monologue"
ALTERNATING_PATTERN = "alternating_pattern"

THRESHOLDS = ("action_observation", "action_error", "monologue", "alternating_pattern")


@dataclass(frozen=True, slots=True)
class Entry:
    """One event of the history: its kind, what makes it equal to another, a short label."""

    kind: str
    key: str
    label: str
    serial: int  # unique per detector: the nudge is given once per error event (upstream: its id)


@dataclass(frozen=True, slots=True)
class Verdict:
    action: str  # allow | warn | halt
    rule: str  # one of the four rule names, "" on allow
    count: int
    threshold: int


def validate(params: dict[str, Any]) -> None:
    """StuckDetectionThresholds: every threshold an integer >= 1 (pydantic `ge=1` upstream)."""
    for name in THRESHOLDS:
        value = params.get(name)
        if not isinstance(value, int) or isinstance(value, bool):
            raise ConfigError(name, f"{name} is an integer", f"openhands: {name} must be an integer, got {value!r}")
        if value < 1:
            raise ConfigError(name, f"{name} >= 1", f"openhands: {name} must be >= 1, got {value}")


def action_key(tool: str, canonical_args: bytes, thought: str) -> str:
    return digest(b"%s\x00%s\x00%s" % (tool.encode("utf-8", "surrogatepass"), canonical_args,
                                       thought.encode("utf-8", "surrogatepass")))


class StuckDetector:
    """The history since the last user message (at most 20 events) and the four rules."""

    __slots__ = ("action_observation", "action_error", "monologue", "alternating_pattern",
                 "events", "_serial", "_nudged")

    def __init__(self, action_observation: int = DEFAULT_ACTION_OBSERVATION,
                 action_error: int = DEFAULT_ACTION_ERROR, monologue: int = DEFAULT_MONOLOGUE,
                 alternating_pattern: int = DEFAULT_ALTERNATING_PATTERN) -> None:
        validate({"action_observation": action_observation, "action_error": action_error,
                  "monologue": monologue, "alternating_pattern": alternating_pattern})
        self.action_observation = action_observation
        self.action_error = action_error
        self.monologue = monologue
        self.alternating_pattern = alternating_pattern
        self.events: deque[Entry] = deque(maxlen=MAX_EVENTS)
        self._serial = 0
        self._nudged: int | None = None

    def __deepcopy__(self, memo: dict[int, Any]) -> StuckDetector:
        new = StuckDetector.__new__(StuckDetector)
        for name in StuckDetector.__slots__:
            setattr(new, name, getattr(self, name))
        new.events = self.events.copy()  # entries are immutable
        return new

    # -- the history ------------------------------------------------------------------------

    def _add(self, kind: str, key: str, label: str) -> None:
        self._serial += 1
        self.events.append(Entry(kind, key, label, self._serial))

    def user_message(self) -> None:
        """Only events after the last user message are looked at."""
        self.events.clear()

    def add_action(self, tool: str, canonical_args: bytes, thought: str = "") -> None:
        self._add(ACTION, action_key(tool, canonical_args, thought), tool)

    def add_observation(self, tool: str, text_digest: str, is_error: bool = False) -> None:
        if is_error:
            self._add(ERROR, text_digest, tool)
        else:
            self._add(OBSERVATION, tool + "\x00" + text_digest, tool)

    def add_message(self, text_digest: str) -> None:
        self._add(MESSAGE, text_digest, "agent message")

    # -- the rules --------------------------------------------------------------------------

    def _collect(self, events: Sequence[Entry], needed: int,
                 observation_kinds: tuple[str, ...] = (OBSERVATION, ERROR)) -> tuple[list[Entry], list[Entry]]:
        """The last `needed` actions and observations, most recent first."""
        actions: list[Entry] = []
        observations: list[Entry] = []
        for e in reversed(events):
            if e.kind == ACTION and len(actions) < needed:
                actions.append(e)
            elif e.kind in observation_kinds and len(observations) < needed:
                observations.append(e)
            if len(actions) >= needed and len(observations) >= needed:
                break
        return actions, observations

    @staticmethod
    def _same(a: Entry, b: Entry) -> bool:
        return a.kind == b.kind and a.key == b.key

    def _error_streak(self, actions: list[Entry], observations: list[Entry]) -> int:
        if not actions or not observations:
            return 0
        reference = actions[0]
        streak = 0
        for action, observation in zip(actions, observations, strict=False):  # shortest wins, as upstream
            if not self._same(reference, action) or observation.kind != ERROR:
                break
            streak += 1
        return streak

    def _leading_equal(self, entries: list[Entry], limit: int) -> int:
        """How many of the first `limit` entries equal the first (0 when there are none)."""
        n = 0
        for e in entries[:limit]:
            if not self._same(entries[0], e):
                break
            n += 1
        return n

    def _monologue_count(self, events: Sequence[Entry]) -> int:
        count = 0
        for e in reversed(events):
            if e.kind == MESSAGE:
                count += 1
            elif e.kind == NUDGE:
                continue  # an environment message: neither agent nor user
            else:
                break
        return count

    def _recent(self) -> tuple[list[Entry], list[Entry]]:
        """The recent actions and observations every rule reads, collected once per step: as
        many as the most demanding rule needs (each rule reads the first k of them, which are
        the ones upstream's own, shorter collection would hold)."""
        return self._collect(self.events, max(self.action_observation, self.action_error + 1,
                                              self.alternating_pattern))

    def _alternating(self, actions: list[Entry], observations: list[Entry]) -> int:
        """How many of the last `alternating_pattern` actions and observations follow the
        A-B-A-B rule from the most recent back (== the threshold: stuck)."""
        n = self.alternating_pattern
        if len(actions) < n or len(observations) < n:
            return 0
        matched = 0
        for i in range(n - 2):
            if not (self._same(actions[i], actions[i + 2])
                    and self._same(observations[i], observations[i + 2])):
                break
            matched += 1
        # Upstream checks all(... for i in range(n - 2)): vacuously true for n <= 2.
        return n if matched >= n - 2 else matched

    def stuck_rule(self, recent: tuple[list[Entry], list[Entry]] | None = None) -> Verdict | None:
        """StuckDetector.is_stuck, naming the rule that fired (None: not stuck)."""
        events = self.events
        if len(events) < min(self.action_observation, self.action_error, self.monologue):
            return None
        actions, observations = recent or self._recent()
        ao = self.action_observation
        if len(actions) >= ao and len(observations) >= ao:
            if (self._leading_equal(actions, ao) == ao and self._leading_equal(observations, ao) == ao):
                return Verdict(vocab.HALT, REPEATING_ACTION_OBSERVATION, ao, ao)
        streak = self._error_streak(actions, observations)
        if streak > self.action_error:
            return Verdict(vocab.HALT, REPEATING_ACTION_ERROR, streak, self.action_error)
        if len(events) >= self.monologue:
            count = self._monologue_count(events)
            if count >= self.monologue:
                return Verdict(vocab.HALT, MONOLOGUE, count, self.monologue)
        if (len(events) >= self.alternating_pattern
                and self._alternating(actions, observations) == self.alternating_pattern):
            return Verdict(vocab.HALT, ALTERNATING_PATTERN, self.alternating_pattern, self.alternating_pattern)
        return None

    def nudge(self, recent: tuple[list[Entry], list[Entry]] | None = None) -> int | None:
        """get_action_error_nudge: the streak length when it has just reached `action_error`
        and this error was not nudged for yet (None otherwise)."""
        actions, observations = recent or self._recent()
        if self._error_streak(actions, observations) != self.action_error:
            return None
        error = observations[0]
        if error.serial == self._nudged:
            return None
        self._nudged = error.serial
        return self.action_error

    def before_step(self) -> Verdict:
        """What `_check_stuck_or_nudge` decides before the agent's next step: a nudge (and no
        stuck check that time), stuck, or go on."""
        recent = self._recent()
        streak = self.nudge(recent)
        if streak is not None:
            self._add(NUDGE, "", "nudge")
            return Verdict(vocab.WARN, REPEATING_ACTION_ERROR, streak, self.action_error)
        stuck = self.stuck_rule(recent)
        if stuck is not None:
            return stuck
        actions, observations = recent
        repeats = min(self._leading_equal(actions, self.action_observation),
                      self._leading_equal(observations, self.action_observation))
        return Verdict(vocab.ALLOW, "", repeats, self.action_observation)

    def state(self) -> dict[str, Any]:
        events = list(self.events)
        actions, observations = self._recent()
        return {
            "events": [{"kind": e.kind, "label": e.label} for e in events],
            "window": MAX_EVENTS,
            "identical_actions": self._leading_equal(actions, self.action_observation),
            "identical_observations": self._leading_equal(observations, self.action_observation),
            "action_error_streak": self._error_streak(actions, observations),
            "agent_messages_in_a_row": self._monologue_count(events),
            "alternating": self._alternating(actions, observations),
            "action_observation": self.action_observation,
            "action_error": self.action_error,
            "monologue": self.monologue,
            "alternating_pattern": self.alternating_pattern,
        }


_REASONS = {
    REPEATING_ACTION_OBSERVATION: "the last {c} actions and observations identical",
    REPEATING_ACTION_ERROR: "the same action answered by an agent error {c} times in a row",
    MONOLOGUE: "{c} agent messages in a row",
    ALTERNATING_PATTERN: "the last {c} actions and observations alternate A-B-A-B",
}


def _reason(v: Verdict) -> str:
    if v.action == vocab.ALLOW:
        return ""
    text = _REASONS[v.rule].format(c=v.count)
    return f"{v.rule}: {text}" + (" (nudge)" if v.action == vocab.WARN else "")


class OpenHandsPolicy(Policy):
    """Batch-level: the verdict is taken once per agent step (a batch or a prose turn)."""

    per_call = False
    reads_answers = True
    reads_prose = True

    def __init__(self, spec: PolicySpec) -> None:
        super().__init__(spec)
        p = spec.params
        self.detector = StuckDetector(p["action_observation"], p["action_error"], p["monologue"],
                                      p["alternating_pattern"])

    def user_turn(self) -> None:
        self.detector.user_message()

    def _verdict(self) -> Check:
        v = self.detector.before_step()
        return Check(BATCH, v.action, v.count, None, v.threshold, _reason(v))

    def prose(self, text: str) -> list[Check]:
        check = self._verdict()
        if check.verdict != vocab.HALT:
            self.detector.add_message(digest(text.encode("utf-8", "surrogatepass")))
        return [check] if text or check.verdict != vocab.ALLOW else []

    def check(self, batch: Batch) -> list[Check]:
        if not batch.calls:
            return []
        check = self._verdict()
        if check.verdict != vocab.HALT:
            d = self.detector
            for i, call in enumerate(batch.calls):
                d.add_action(call.name, call_key(call)[0], batch.text if i == 0 else "")
        return [check]

    def answers(self, batch: Batch, answers: Sequence[Answer | None]) -> list[Result]:
        d = self.detector
        for call, answer in zip(batch.calls, answers, strict=True):
            if answer is not None:
                d.add_observation(call.name, answer.digest, answer.is_error)
        return []

    def state(self) -> dict[str, Any]:
        return self.detector.state()


PARAMS: tuple[Param, ...] = (
    Param("action_observation", INT, DEFAULT_ACTION_OBSERVATION, 1,
          "identical action+observation pairs in a row that halt"),
    Param("action_error", INT, DEFAULT_ACTION_ERROR, 1,
          "same action answered by an error: nudge at this many, halt past it"),
    Param("monologue", INT, DEFAULT_MONOLOGUE, 1, "agent messages in a row that halt"),
    Param("alternating_pattern", INT, DEFAULT_ALTERNATING_PATTERN, 1,
          "last N actions and observations alternating A-B-A-B halt"),
)

DETECTOR = Detector('openhands', PARAMS, OpenHandsPolicy, validate,
                    "OpenHands' stuck detector (openhands-sdk 1.58.2): 4 identical action/observation pairs, repeated agent errors, 3 agent messages in a row, A-B-A-B")
