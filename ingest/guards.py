"""LoopLedger's public Python API: the loop guards, and the enforced policy for a live agent.

    from loopledger.guards import LiveGuard, Policy

    guard = LiveGuard(Policy.enforced("ledger.sqlite"), db="ledger.sqlite", session="run-42")
    decision = guard.call("Bash", {"command": "npm test"}, call_id="c1")
    if decision.refused:          # block / halt: do not run it
        result = decision.message()
    ...
    guard.answer("c1", result_text, is_error=True)

Everything named in `__all__` is the public API, versioned by API_VERSION (semantic versioning:
a name, signature or verdict word changes only with a new major version). Anything else under
`loopledger` is internal and may change.

- The seed guards and ours, as standalone objects: LadderGuard (graded warn → block → halt),
  LoopGuard (sliding window), LoopDetector (run-length strikes) and StagnationDetector (prose),
  CycleDetector (A → B → A → B); their rules are in docs/architecture.md.
- Policy / PolicySpec: one detector with one set of parameters behind one interface;
  `Policy.enforced(db)` is the setting chosen on the dashboard's Compare page.
- LiveGuard: feed a running agent's calls, results and user turns one at a time and get a
  Decision per call, judged by the replay engine exactly as a replay of the same session would,
  and (with `db`) written to the ledger as enforced decisions the dashboard shows.
"""

from __future__ import annotations

from typing import Any

from loopledger.detectors.canonical import answers_hash, canonical_json
from loopledger.detectors.cycle import CycleDetector, CycleVerdict
from loopledger.detectors.errors import ConfigError
from loopledger.detectors.ladder import BLOCK_MESSAGE, WARN_NOTICE, LadderGuard, LadderVerdict, Thresholds
from loopledger.detectors.policy import DEFAULT_SPECS, Check, PolicySpec, Result, make_policy
from loopledger.detectors.policy import Policy as _Policy
from loopledger.detectors.run_length import (
    BatchRecord,
    LoopDetected,
    LoopDetector,
    RepeatOutcome,
    StagnationDetected,
    StagnationDetector,
    is_costly_batch,
    is_observation_batch,
)
from loopledger.detectors.window import LoopDetectedError, LoopGuard, default_key_fn
from loopledger.live.enforce import LIVE_DEFAULT
from loopledger.live.session import Decision
from loopledger.replay import PolicySet

API_VERSION = "1.2"  # 1.1: LIVE_DEFAULT, PolicySet; the live default is the scored default set.
# 1.2: RepeatOutcome, BatchRecord, is_observation_batch, is_costly_batch (seed 000's record_results
# and classifiers, for code ported from its upstream tests)

# Kept for API 1.x: the ladder at its defaults, which was the live default before the scored set. What the
# live paths enforce until a person chooses is LIVE_DEFAULT (= DEFAULT_SPECS, the scored set).
DEFAULT_SPEC = PolicySpec("ladder")


class Policy(_Policy):
    """The detectors' `Policy` (subclass it for a plugin), plus `Policy.enforced(db)`.

    The detectors' base knows nothing of live enforcement (the layers in pyproject.toml);
    the enforced setting is looked up here, where the live API lives."""

    @classmethod
    def enforced(cls, db: str | None = None) -> _Policy:
        """A fresh policy for the ledger's enforced setting (Compare's "Enforce on live agents",
        `loopledger enforce`): the policy itself, or a PolicySet for a set; LIVE_DEFAULT (the
        scored default set ingest uses) when none is chosen. `db`: a SQLite path or a database
        URL, as `--db` takes (default: $LOOPLEDGER_DATABASE_URL, $LOOPLEDGER_DB,
        ./ledger.sqlite). Raises loopledger.live.db.LedgerUnavailable when there is no ledger,
        loopledger.live.enforce.NotRegistered when an enforced stored policy's detector is not
        registered in this process (a ledger row never names code to import)."""
        from loopledger.live import db as live_db
        from loopledger.live import enforce

        with live_db.open_db(db) as conn:
            specs = enforce.enforced_or_default(conn)
        return PolicySet.of(specs)


__all__ = [
    "API_VERSION", "BatchRecord", "BLOCK_MESSAGE", "WARN_NOTICE", "answers_hash", "canonical_json", "default_key_fn",
    "DEFAULT_SPEC", "DEFAULT_SPECS", "LIVE_DEFAULT", "PolicySet", "Check", "ConfigError", "CycleDetector", "CycleVerdict",
    "Decision", "LadderGuard", "LadderVerdict", "LiveGuard", "LoopDetected", "LoopDetectedError",
    "LoopDetector", "LoopGuard", "Policy", "PolicySpec", "RepeatOutcome", "Result", "StagnationDetected",
    "StagnationDetector", "Thresholds", "is_costly_batch", "is_observation_batch", "make_policy",
]


class LiveGuard:
    """One agent session guarded by a policy or a set (default: the ledger's enforced setting,
    else LIVE_DEFAULT, the scored default set).

    With `db` every call's decision is written to that ledger as enforced (origin "python"),
    under the same per-session lock the hooks take; `transcript` names the agent's transcript
    file so the decisions land in the session the transcript reader gives it. Without `db`
    nothing is written. Use it as a context manager, or call close()."""

    def __init__(self, policy: Policy | PolicySpec | str | None = None, *, db: str | None = None,
                 session: str = "python", transcript: str | None = None, format: str | None = None) -> None:
        from loopledger.live import db as live_db
        from loopledger.live.guard_server import Guard

        if isinstance(policy, PolicySet):
            spec: Any = policy.specs
        elif isinstance(policy, _Policy):
            spec = policy.spec
        elif isinstance(policy, str):
            spec = PolicySpec.parse(policy, trusted=True)  # the caller's own text: may name module:factory
        else:
            spec = policy
        self._db = live_db.open_db(db) if db is not None else None
        self._guard = Guard(self._db, spec, origin="python")
        self._base = {"session": session, **({"transcript": transcript} if transcript else {}),
                      **({"format": format} if format else {})}

    @property
    def policy(self) -> PolicySpec:
        """The (first) policy judging the last call: `policies` gives a set's members."""
        return self.policies[0]

    @property
    def policies(self) -> tuple[PolicySpec, ...]:
        state = self._guard.last
        return state.specs if state is not None else (self._guard.fixed or LIVE_DEFAULT)

    def call(self, tool: str, args: Any = None, call_id: str | None = None) -> Decision:
        """Judge a tool call before it runs. `decision.refused`: do not run it (its result is
        `decision.message()`); `decision.stops`: stop the agent; warn: run it and show the message."""
        import time

        out = self._guard.event({**self._base, "event": "call", "tool": tool, "args": args, "id": call_id},
                                time.perf_counter())
        assert out is not None
        return Decision(out["verdict"], out["tool"], out["id"], out["reason"], out["count"], out["threshold"],
                        out["policy"])

    def answer(self, call_id: str | None, text: Any, is_error: bool = False) -> None:
        """The call's result came back (policies that read results judge it)."""
        self._guard.event({**self._base, "event": "answer", "id": call_id, "text": text, "error": is_error}, 0.0)

    def user(self, text: str = "") -> None:
        """The person spoke: a new run; every policy starts fresh."""
        self._guard.event({**self._base, "event": "user", "text": text}, 0.0)

    def close(self) -> None:
        if self._db is not None:
            self._db.close()
            self._db = None

    def __enter__(self) -> LiveGuard:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()
