"""What the real-client tests expect, computed by the replay engine (never a hand-counted
number, so they hold whatever the default policies become): the verdict on each call when a
transcript is replayed, and where an unguarded agent repeating one call would first be warned,
refused and halted."""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from loopledger import formats, vocab
from loopledger.detectors.policy import PolicySpec
from loopledger.events import Answer, Answers, Batch, Call, ReadError, SessionStart, UserTurn
from loopledger.live.enforce import LIVE_DEFAULT
from loopledger.replay import PolicySet, replay

REFUSED = (vocab.BLOCK, vocab.HALT, vocab.AFTER_HALT)
STOPS = (vocab.HALT, vocab.AFTER_HALT)
# The policies a test enforces: the live default set (nothing chosen), and ladder with explicit
# thresholds (count-only: warn, block and halt all happen on a stuck call).
LADDER = "ladder:warn_at=2,block_at=3,halt_at=4"
POLICIES = ("default", LADDER)


def specs_of(policy: str) -> tuple[PolicySpec, ...]:
    return tuple(LIVE_DEFAULT) if policy == "default" else (PolicySpec.parse(policy),)


def enforce_args(policy: str) -> list[str]:
    """`loopledger enforce …` arguments choosing `policy`."""
    return ["--default"] if policy == "default" else [policy]


def replayed(path: Path, fmt: str, specs: Sequence[PolicySpec], key: str | None = None) -> list[tuple[str, str]]:
    """(call id, verdict) for each call of the transcript's session (`key`, else its only one),
    as the replay engine judges them with `specs` as one set."""
    events, current = [], None
    for item in formats.read(path, fmt):
        if isinstance(item, SessionStart):
            current = item.info.key
        elif not isinstance(item, ReadError) and (key is None or current == key):
            events.append(item)
    out = []
    for step in replay(events, PolicySet.of(tuple(specs))):
        for c in step.checks:
            if isinstance(step.event, Batch):
                out.append((step.event.calls[max(c.idx, 0)].id, c.verdict))
    return out


def unguarded(call: Call, answer: Answer, n: int, specs: Sequence[PolicySpec], prompt: str) -> list[str]:
    """The verdicts on n repeats of `call`, each answered `answer`: what an agent nobody refuses
    would get. Until the first refusal a guarded run is exactly this one."""
    events: list = [UserTurn(prompt)]
    for i in range(n):
        cid = f"u{i}"
        events += [Batch((Call(cid, call.name, call.args),)), Answers((Answer(cid, answer.text, answer.is_error),))]
    return [c.verdict for step in replay(events, PolicySet.of(tuple(specs))) for c in step.checks
            if isinstance(step.event, Batch)]


def first(verdicts: Sequence[str], kinds: Sequence[str]) -> int | None:
    """The 1-based position of the first verdict among `kinds` (None: none)."""
    return next((i for i, v in enumerate(verdicts, 1) if v in kinds), None)


@dataclass(frozen=True)
class Prediction:
    warn: int | None
    refusal: int | None  # the first block or halt
    halt: int | None

    @classmethod
    def of(cls, verdicts: Sequence[str]) -> Prediction:
        return cls(first(verdicts, (vocab.WARN,)), first(verdicts, REFUSED), first(verdicts, STOPS))


def enforced(ledger: Path) -> list[tuple[str, str, str]]:
    """(call id, verdict, origin) of every enforced decision, in order."""
    with sqlite3.connect(ledger) as db:
        return db.execute("SELECT call_id, verdict, origin FROM enforced_checks ORDER BY session_id, seq").fetchall()


def first_answer(path: Path, fmt: str) -> tuple[Call, Answer]:
    """The first call of a transcript and the answer it got."""
    calls, answers = {}, {}
    for item in formats.read(path, fmt):
        if isinstance(item, Batch):
            calls.update({c.id: c for c in item.calls})
        elif isinstance(item, Answers):
            answers.update({a.call_id: a for a in item.answers})
            break
    cid = next(iter(answers))
    return calls[cid], answers[cid]


def beside(ledger: Path) -> list[tuple[str, str, str | None]]:
    """(call id, enforced verdict, the same policy's replayed verdict on that call) for every
    enforced decision, once `loopledger watch` has read the agent's transcript: what the Session
    page shows side by side (None: that call has no replayed check)."""
    with sqlite3.connect(ledger) as db:
        return db.execute(
            "SELECT e.call_id, e.verdict, (SELECT ch.verdict FROM calls c JOIN checks ch ON ch.session_id = c.session_id "
            "AND ch.seq = c.seq AND (ch.idx = c.idx OR ch.idx = -1) WHERE c.session_id = e.session_id "
            "AND c.call_id = e.call_id AND ch.policy_id = e.policy_id) FROM enforced_checks e "
            "ORDER BY e.session_id, e.seq").fetchall()


class Watch:
    """A real `loopledger watch` process following `paths` into `ledger` while an agent runs (the
    agent's HOME, so it reads what the agent writes); stopped with SIGTERM on exit."""

    def __init__(self, ledger: Path, paths: Sequence[Path], env: dict, policy: str) -> None:
        import subprocess
        import sys

        extra = [] if policy == "default" else ["--policy", policy]
        self.proc = subprocess.Popen([str(Path(sys.executable).parent / "loopledger"), "watch", *map(str, paths),
                                      "--db", str(ledger), "--interval", "0.2", *extra],
                                     env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)

    def __enter__(self) -> Watch:
        return self

    def __exit__(self, *exc: object) -> None:
        import signal

        self.proc.send_signal(signal.SIGTERM)
        self.out, self.err = self.proc.communicate(timeout=60)

    def wait_beside(self, ledger: Path, n: int, hang: float = 60.0) -> list[tuple[str, str, str | None]]:
        """`beside(ledger)` once all of the `n` enforced calls have a replayed check."""
        import time

        t0 = time.monotonic()
        while True:
            try:
                rows = beside(ledger)
                if len(rows) >= n and all(r[2] is not None for r in rows):
                    return rows
            except sqlite3.Error:
                pass
            if time.monotonic() - t0 > hang or self.proc.poll() is not None:
                return beside(ledger)
            time.sleep(0.2)


def judged_as_replayed(ledger: Path, transcript: Path, fmt: str, policy: str, turns: int, prompt: str,
                       by_id: bool = True) -> tuple[list[str], Prediction]:
    """A guarded run of a stuck failing call, checked against the replay engine: every enforced
    verdict is the one a replay of the transcript the client wrote gives (call for call; by call
    id unless the client gives hooks none), and the first warning and the first refusal come
    where an unguarded agent repeating the first call (with the answer it got) would get them.
    Returns the verdicts and where they first warned, refused and halted."""
    specs = specs_of(policy)
    live = enforced(ledger)
    again = replayed(transcript, fmt, specs)
    if by_id:
        assert [(c, v) for c, v, _ in live] == again
    else:
        assert [v for _, v, _ in live] == [v for _, v in again]
    verdicts = [v for _, v, _ in live]
    call, answer = first_answer(transcript, fmt)
    expected = Prediction.of(unguarded(call, answer, turns, specs, prompt))
    got = Prediction.of(verdicts)
    assert expected.refusal is not None, "the replay must refuse a call stuck on one failure"
    assert (got.warn, got.refusal) == (expected.warn, expected.refusal), (verdicts, expected)
    assert got.halt is not None, verdicts
    return verdicts, got
