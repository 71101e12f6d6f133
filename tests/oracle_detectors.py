"""An independent oracle for the sample_data golden table: each detector at its defaults, written
from ../shared/design.md ("Detectors") and the replay rules in docs/architecture.md, sharing no
code with loopledger.detectors or loopledger.replay (only the events the readers produce).

Deliberately plain and slow: lists and dicts, no memo, no hashing (keys compare canonical JSON
text). If it and the pipeline disagree, one of them misreads the design: find out which.

Each oracle is a class with `check(calls) -> list[(idx, verdict)]` (idx -1 = the whole batch),
`answers(calls, texts)` (texts[i] = the answer to calls[i] or None), `prose(text) -> verdict`,
and `user_turn()`. `where_cells(events)` drives one as the replay rules say and renders the
README's notation.
"""

from __future__ import annotations

import json
from typing import Any

from loopledger.events import Answers, Batch, Prose, UserTurn

FLAGS = ("warn", "block", "halt")
MAX_RUNS_SHOWN = 3


def canon(args: Any) -> str:
    """design.md: JSON with object keys sorted recursively, arrays in order, no whitespace;
    null/missing ≡ {}."""
    return json.dumps({} if args is None else args, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def key(call) -> tuple[str, str]:
    return (call.name, canon(call.args))


# ── run-length (seed 000), S = 2, M = 15, the default patterns, substring match ─────────────

PATTERNS = ("read", "grep", "glob", "search", "list", "view", "find", "get_", "fetch", "inspect",
            "navigate", "snapshot", "screenshot")


def _parts(name: str) -> list[str]:
    out, word = [], ""
    for ch in name.lower():
        if ch in "_-.":
            if word:
                out.append(word)
            word = ""
        else:
            word += ch
    return out + ([word] if word else [])


def _costly(name: str) -> bool:
    parts = _parts(name)
    for run in (["navigate"], ["click"], ["fetch", "webpage"]):
        for i in range(len(parts) - len(run) + 1):
            if parts[i:i + len(run)] == run:
                return True
    return False


class RunLength:
    per_call = False
    S, M = 2, 15

    def __init__(self) -> None:
        self.user_turn()

    def user_turn(self) -> None:
        self.sig = None
        self.count = self.total = 0
        self.known = None  # the answers of the current run's last judged batch

    def check(self, calls) -> list:
        sig = sorted(key(c) for c in calls)
        observation = all(any(p in c.name.lower() for p in PATTERNS) for c in calls)
        costly = any(_costly(c.name) for c in calls)
        effective = self.M if observation else self.S
        exempt = observation and not costly
        ceiling = max(self.M, self.S)
        if sig == self.sig:
            self.count += 1
            self.total += 1
        else:
            self.sig, self.count, self.total, self.known = sig, 1, 1, None
        halt = self.count > effective or (not exempt and self.total > ceiling)
        return [(-1, "halt" if halt else "allow")]

    def answers(self, calls, texts) -> None:
        if self.sig is None or sorted(key(c) for c in calls) != self.sig:
            return  # not_current
        new = None if any(t is None for t in texts) else sorted(zip([key(c) for c in calls], texts, strict=True))
        if self.known is not None and new is not None and self.known != new:
            self.count = 1  # changed: progress
        self.known = new

    def prose(self, text: str) -> str:
        return "allow"


# ── stagnation (seed 000's companion), max_steps = 5 ──────────────────────────────────────────


class Stagnation:
    per_call = False
    MAX = 5

    def __init__(self) -> None:
        self.user_turn()

    def user_turn(self) -> None:
        self.recorded: list[str] = []

    def check(self, calls) -> list:
        return []

    def answers(self, calls, texts) -> None:
        pass

    def prose(self, text: str) -> str:
        if not text:
            return "allow"
        self.recorded.append(text)
        recent = self.recorded[-max(4 * self.MAX, 1):]
        return "halt" if recent.count(text) > self.MAX else "allow"


# ── ladder (seed 002), 2 / 3 / 4 for both classes: the classifier does not matter ─────────────


class Ladder:
    per_call = True

    def __init__(self) -> None:
        self.user_turn()

    def user_turn(self) -> None:
        self.last, self.count = None, 0

    def check(self, calls) -> list:
        out = []
        for i, c in enumerate(calls):
            k = key(c)
            self.count = self.count + 1 if k == self.last else 1
            self.last = k
            v = "halt" if self.count >= 4 else "block" if self.count >= 3 else "warn" if self.count >= 2 else "allow"
            out.append((i, v))
            if v == "halt":
                break
        return out

    def answers(self, calls, texts) -> None:
        pass

    def prose(self, text: str) -> str:
        return "allow"


# ── window (seed 003), window 8, threshold 3 ──────────────────────────────────────────────────


class Window:
    per_call = True

    def __init__(self) -> None:
        self.user_turn()

    def user_turn(self) -> None:
        self.fifo: list = []

    def check(self, calls) -> list:
        out = []
        for i, c in enumerate(calls):
            self.fifo.append(key(c))
            if len(self.fifo) > 8:
                self.fifo.pop(0)
            v = "halt" if self.fifo.count(key(c)) >= 3 else "allow"
            out.append((i, v))
            if v == "halt":
                break
        return out

    def answers(self, calls, texts) -> None:
        pass

    def prose(self, text: str) -> str:
        return "allow"


# ── cycle (ours), max_period 6, warn 3, halt 4 ────────────────────────────────────────────────


class Cycle:
    per_call = True
    MAX_PERIOD, WARN, HALT = 6, 3, 4

    def __init__(self) -> None:
        self.user_turn()

    def user_turn(self) -> None:
        self.history: list[list] = []  # [key, answer or None]

    @staticmethod
    def _primitive(pattern: list) -> bool:
        p = len(pattern)
        return not any(p % d == 0 and pattern == pattern[:d] * (p // d) for d in range(1, p))

    def _k(self, p: int) -> int:
        h = self.history
        if len(h) < p or not self._primitive([e[0] for e in h[-p:]]):
            return 0
        last = h[-p:]
        k = 1
        while len(h) >= (k + 1) * p:
            block = h[len(h) - (k + 1) * p: len(h) - k * p]
            if [e[0] for e in block] != [e[0] for e in last]:
                break
            ok = True
            for pos in range(p):
                seen = {h[len(h) - (j + 1) * p + pos][1] for j in range(k + 1)} - {None}
                if len(seen) > 1:
                    ok = False
            if not ok:
                break
            k += 1
        return k

    def check(self, calls) -> list:
        out = []
        for i, c in enumerate(calls):
            self.history.append([key(c), None])
            self.history = self.history[-self.MAX_PERIOD * self.HALT:]
            best = 0
            for p in range(2, self.MAX_PERIOD + 1):
                best = max(best, self._k(p))
            v = "halt" if best >= self.HALT else "warn" if best >= self.WARN else "allow"
            out.append((i, v))
            if v == "halt":
                break
        self.batch_entries = self.history[-len(calls):]
        return out

    def answers(self, calls, texts) -> None:
        entries = getattr(self, "batch_entries", [])
        for entry, c, t in zip(entries, calls, texts, strict=False):  # a halt may cut the batch
            if entry[0] == key(c) and entry in self.history:
                entry[1] = t

    def prose(self, text: str) -> str:
        return "allow"


ORACLES = {"run-length": RunLength, "stagnation": Stagnation, "ladder": Ladder, "window": Window, "cycle": Cycle}


def _match(calls, answers) -> list:
    """Answers to calls: by call id, else the oldest unanswered call (the replay rule)."""
    texts: list = [None] * len(calls)
    ids = [c.id for c in calls]
    for a in answers:
        if a.call_id is not None and a.call_id in ids and texts[ids.index(a.call_id)] is None:
            texts[ids.index(a.call_id)] = a.text
        else:
            free = [i for i, t in enumerate(texts) if t is None]
            if free:
                texts[free[0]] = a.text
    return texts


def where_cell(events: list, detector: str) -> str:
    """Drive one oracle over a session as the replay rules say; render the README's cell."""
    o = ORACLES[detector]()
    run, in_run, halted = 0, 0, False
    pending = None  # (calls, answers so far)
    calls_seen = prose_seen = 0
    first: dict[int, dict[str, str]] = {}

    def judge():
        nonlocal pending
        if pending is not None:
            o.answers(pending[0], _match(pending[0], pending[1]))
            pending = None

    def flag(verdict: str, where: str) -> None:
        if verdict in FLAGS:
            first.setdefault(run, {}).setdefault(verdict, where)

    for seq, ev in enumerate(events):
        if isinstance(ev, Batch) and ev.calls:
            judge()
            base = calls_seen
            calls_seen += len(ev.calls)
            if not halted:
                for idx, verdict in o.check(list(ev.calls)):
                    flag(verdict, f"c{base + max(idx, 0) + 1} s{seq}")
                    halted = halted or verdict == "halt"
                pending = (list(ev.calls), [])
        elif isinstance(ev, Answers):
            if pending is not None:
                pending[1].extend(ev.answers)
                if all(t is not None for t in _match(pending[0], pending[1])):
                    judge()
        elif isinstance(ev, UserTurn):
            if in_run:
                run, in_run = run + 1, 0
            judge()
            o.user_turn()
            halted = False
        elif isinstance(ev, Prose | Batch):
            prose_seen += isinstance(ev, Prose)  # the README numbers prose turns (`p6`)
            if not halted:
                verdict = o.prose(ev.text)
                flag(verdict, f"p{prose_seen} s{seq}")
                halted = verdict == "halt"
        in_run += 1
    n_runs = run + 1
    if not first:
        return "—"
    parts = []
    for r in sorted(first)[:MAX_RUNS_SHOWN]:
        text = ", ".join(f"{v} {first[r][v]}" for v in FLAGS if v in first[r])
        parts.append(f"r{r}: {text}" if n_runs > 1 else text)
    if len(first) > MAX_RUNS_SHOWN:
        parts.append(f"+{len(first) - MAX_RUNS_SHOWN} more runs")
    return "; ".join(parts)
