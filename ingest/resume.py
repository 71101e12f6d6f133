"""Each policy's replay state kept per session, and resumed: the replay engine continued from a
stored snapshot instead of from a session's first event.

Two users: the worker (an appended transcript replays only its new events) and the live hook /
guard (a tool call is judged on top of the session's stored state). Both see exactly what a
replay from scratch gives — same Steps, same seq numbering, same tallies (property-tested).

    fresh(specs) -> ResumePoint                      nothing applied yet (seq 0)
    load(conn, session_id, specs, *, rebuild=True, seq=None) -> ResumePoint
        the stored snapshots; a policy without a usable one is rebuilt by replaying the ledger's
        events (rebuild=False: left None in `point.states`, and `point.complete` is False)
    feed(point, events) -> list[tuple[Step, ...]]   one tuple per event, in `point.specs` order
    feed_columns(point, events) -> list[list[Step]]  the same Steps, one list per policy (ingest)
    finish(point) -> tuple[tuple[Result, ...], ...]  end of the session so far: the pending batch
        judged with unknowns, as a replay's last step does. It consumes the point's resumability:
        take `snapshot(point)` first.
    snapshot(point) -> Snapshot                      pure data (bytes), can cross processes
    save(conn, session_id, point_or_snapshot)        replaces the session's stored snapshots
    events_since(conn, session_id, seq) -> list[Event]   the stored events a point has not seen
    current(conn, session_id, specs) -> ResumePoint  load + the stored events after the snapshot:
        the state after every stored event (what a live hook judges the next call against)

A point holds, per policy, the engine's `_Driver` (the Policy with its detector state, run index,
events in the current run, halted flag, the pending unanswered batch) and a `Tallier` (the
session_stats / run_outcomes fold), all at `point.seq` events applied. `point.context` is free for
the caller (the worker keeps its row-writing context there; stored under policy id "").

Serialisation: pickle (protocol 5), one blob per policy, keyed in the ledger by (session,
policy id = spec digest) and stamped with `VERSION`: a digest of the code that defines what is
pickled (replay.py, the detectors, this module, and the policy's own module for plugins). Any
code change, or another spec, therefore reads as "no snapshot" and falls back to a full replay.

Trust: unpickling runs code chosen by whoever wrote the bytes. Every blob is signed with
HMAC-SHA256 under a key only this user's LoopLedger reads (`$LOOPLEDGER_STATE_KEY`, else
`$XDG_STATE_HOME/loopledger/resume.key` created 0600 on first use), and a blob whose signature
does not verify is never unpickled (treated as absent: a full replay). So someone who can write
the ledger (a teammate on a shared PostgreSQL ledger) can make a session slower to resume, but
cannot make this process unpickle their bytes. Snapshots written under another key (another user
or machine) are therefore rebuilt, not trusted. Nor can a stored policy choose code: the name a
`policies` row gives its detector is looked up among the detectors registered in this process,
never imported (loopledger.detectors.registry); only the person's own command line or config
file names a `module:factory` to import.
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from loopledger.detectors.policy import PolicySpec, Result, make_policy
from loopledger.events import Event
from loopledger.ledger import schema as s
from loopledger.replay import Step, Tallier, Tally, _Driver
from loopledger.snapshots import FORMAT, context_version, seal, unseal, version_of  # noqa: F401 (re-exported)
from sqlalchemy import bindparam, delete, select
from sqlalchemy.engine import Connection

CONTEXT_ID = ""  # resume_states.policy_id of the caller's own context


# ── code fingerprint and signing key: loopledger.snapshots (shared with the live hook) ──────

# ── the point ────────────────────────────────────────────────────────────────────────────────


@dataclass
class PolicyState:
    driver: _Driver
    tallier: Tallier

    @property
    def tally(self) -> Tally:
        return self.tallier.out


@dataclass
class ResumePoint:
    """Every policy's engine state for one session after `seq` events."""

    specs: tuple[PolicySpec, ...]
    seq: int = 0
    states: dict[str, PolicyState | None] = field(default_factory=dict)  # spec id -> state
    context: Any = None
    finished: bool = False

    @property
    def complete(self) -> bool:
        return all(self.states.get(sp.id) is not None for sp in self.specs)

    def state(self, spec: PolicySpec | str) -> PolicyState | None:
        return self.states.get(spec if isinstance(spec, str) else spec.id)

    def tally(self, spec: PolicySpec | str) -> Tally:
        st = self.state(spec)
        if st is None:
            raise KeyError(f"no state for policy {spec}")
        return st.tally

    @property
    def run(self) -> int:
        """The run the next event falls in (0 before any event)."""
        for st in self.states.values():
            if st is not None:
                return st.driver.run
        return 0


def _new_state(spec: PolicySpec) -> PolicyState:
    return PolicyState(_Driver(make_policy(spec)), Tallier())


def fresh(specs: Sequence[PolicySpec]) -> ResumePoint:
    """A point before a session's first event."""
    specs = tuple(specs)
    return ResumePoint(specs, 0, {sp.id: _new_state(sp) for sp in specs})


# Events fed to one policy before the next takes them (see feed_columns): small enough that the
# canonical forms of their calls are still in call_key's cache when the next policy asks.
_CHUNK = 256


def feed_columns(point: ResumePoint, events: Sequence[Event]) -> list[list[Step]]:
    """`feed` policy by policy: one list of Steps per policy (in `point.specs` order), one Step
    per event. The same Steps as `feed` (the policies share no state), built with less work per
    event: each policy walks a chunk of events in one comprehension."""
    if point.finished:
        raise ValueError("resume.feed: this point was finished; load a snapshot taken before")
    if not point.complete:
        raise ValueError("resume.feed: some policy has no state (load with rebuild=True)")
    states = [point.states[sp.id] for sp in point.specs]
    cols: list[list[Step]] = [[] for _ in states]
    seq0 = point.seq
    n = len(events)
    for lo in range(0, n, _CHUNK):
        part = events[lo:lo + _CHUNK]
        seqs = range(seq0 + lo, seq0 + lo + len(part))
        for col, st in zip(cols, states, strict=True):
            assert st is not None
            steps = list(map(st.driver.feed, seqs, part))
            for _ in map(st.tallier.add, steps):
                pass
            col.extend(steps)
    point.seq = seq0 + n
    return cols


def feed(point: ResumePoint, events: Iterable[Event]) -> list[tuple[Step, ...]]:
    """Apply `events` (the session's events from `point.seq` on): one Step per policy per event,
    numbered as a replay from the session's start numbers them. No end-of-session judging (see
    `finish`): a point stays resumable."""
    events = events if isinstance(events, list | tuple) else list(events)
    cols = feed_columns(point, events)
    return list(zip(*cols, strict=True)) if cols else [() for _ in events]


def finish(point: ResumePoint) -> tuple[tuple[Result, ...], ...]:
    """Judge each policy's pending batch with unknowns, as a replay's last event does; the
    results belong on the step of event `point.seq - 1` and are added to the tallies."""
    out = []
    for sp in point.specs:
        st = point.states[sp.id]
        assert st is not None
        results = st.driver.finish()
        if results:
            st.tallier.add_results(st.driver.run, results)
        out.append(results)
    point.finished = True
    return tuple(out)


def pending_seq(point: ResumePoint, spec: PolicySpec | str) -> int | None:
    """The seq of the batch `spec` still waits on answers for (what `finish` would judge)."""
    st = point.state(spec)
    return st.driver.pending.seq if st is not None and st.driver.pending is not None else None


# ── storage ──────────────────────────────────────────────────────────────────────────────────


@dataclass(frozen=True)
class Snapshot:
    """A point as bytes: {policy id: (version, blob)} at `seq` (a policy whose state could not
    be pickled is missing: it is replayed in full next time)."""

    seq: int
    blobs: Mapping[str, tuple[str, bytes]]


def snapshot(point: ResumePoint, context: bool = True) -> Snapshot:
    """`context=False`: without the point's context (a caller about to add its own with
    `with_context` need not seal the old one first)."""
    if point.finished:
        raise ValueError("resume.snapshot: take it before finish()")
    blobs: dict[str, tuple[str, bytes]] = {}
    for sp in point.specs:
        st = point.states.get(sp.id)
        if st is None:
            continue
        v = version_of(st.driver.policy)
        blob = seal((st.driver, st.tallier), v)
        if blob is not None:
            blobs[sp.id] = (v, blob)
    if context and point.context is not None:
        v = context_version()
        blob = seal(point.context, v)
        if blob is not None:
            blobs[CONTEXT_ID] = (v, blob)
    return Snapshot(point.seq, blobs)


def with_context(snap: Snapshot, context: Any) -> Snapshot:
    """`snap` plus a caller's context (stored under policy id ""), sealed now."""
    v = context_version()
    blob = seal(context, v)
    blobs = dict(snap.blobs)
    if blob is not None:
        blobs[CONTEXT_ID] = (v, blob)
    return Snapshot(snap.seq, blobs)


def save(conn: Connection, session_id: int, point: ResumePoint | Snapshot) -> None:
    """Replace the session's stored snapshots (inside the caller's transaction) for the
    policies of `point`; other policies' snapshots of the session are dropped (they would be
    at another seq)."""
    save_many(conn, [(session_id, point)])


_DROP_STATES = delete(s.resume_states).where(s.resume_states.c.session_id == bindparam("b_sid"))  # built once


def save_many(conn: Connection, points: Sequence[tuple[int, ResumePoint | Snapshot | None]]) -> None:
    """`save` for many sessions in two statements; a session given None has its snapshots
    dropped (`drop`)."""
    if not points:
        return
    t = s.resume_states
    conn.execute(_DROP_STATES, [{"b_sid": sid} for sid, _ in points])
    now = time.time()
    rows = []
    for sid, point in points:
        if point is None:
            continue
        snap = point if isinstance(point, Snapshot) else snapshot(point)
        rows.extend({"session_id": sid, "policy_id": pid, "seq": snap.seq, "version": v, "state": blob,
                     "updated_at": now} for pid, (v, blob) in snap.blobs.items())
    if rows:
        conn.execute(t.insert(), rows)


def drop(conn: Connection, session_id: int) -> None:
    conn.execute(delete(s.resume_states).where(s.resume_states.c.session_id == session_id))


def events_since(conn: Connection, session_id: int, seq: int) -> list[Event]:
    from loopledger.ledger import store

    return store.load_events(conn, session_id, from_seq=seq)


def current(conn: Connection, session_id: int, specs: Sequence[PolicySpec]) -> ResumePoint:
    """The state after EVERY stored event of the session (a live hook judging the next call):
    `load`, then the stored events after the snapshot fed on top (nothing is saved)."""
    point = load(conn, session_id, specs)
    n = conn.execute(select(s.sessions.c.n_events).where(s.sessions.c.id == session_id)).scalar() or 0
    if point.seq < n:
        feed(point, events_since(conn, session_id, point.seq))
    return point


def load(conn: Connection, session_id: int, specs: Sequence[PolicySpec], *, rebuild: bool = True,
         seq: int | None = None) -> ResumePoint:
    """The session's stored state for `specs`, at the snapshots' seq (or `seq` if given: then
    only snapshots at exactly that seq count). Without a usable snapshot a policy is rebuilt by
    replaying the ledger's events up to that seq (rebuild=False: its state is None instead).
    With no snapshot at all, the point is at `seq`, else after every stored event."""
    specs = tuple(specs)
    t = s.resume_states
    rows = {r.policy_id: r for r in conn.execute(
        select(t.c.policy_id, t.c.seq, t.c.version, t.c.state).where(t.c.session_id == session_id))}
    seqs = {r.seq for pid, r in rows.items() if pid != CONTEXT_ID}
    if seq is None:
        seq = max(seqs) if seqs else None
    point, missing = _point_of({pid: (r.version, r.state) for pid, r in rows.items() if r.seq == seq}, specs)
    if seq is None:
        seq = conn.execute(select(s.sessions.c.n_events).where(s.sessions.c.id == session_id)).scalar() or 0
    point.seq = seq
    if missing and rebuild:
        events = events_since(conn, session_id, 0)[:seq]
        if len(events) < seq:
            raise ValueError(f"resume.load: session {session_id} has {len(events)} stored events, "
                             f"fewer than the {seq} asked for")
        again = fresh(missing)
        feed(again, events)
        point.states.update(again.states)
    return point


def point_of(snap: Snapshot, specs: Sequence[PolicySpec]) -> ResumePoint:
    """`load` from a snapshot held in memory (what `save` would have stored): no query. A
    policy missing from it has state None (as load's rebuild=False)."""
    point, _ = _point_of(snap.blobs, tuple(specs))
    point.seq = snap.seq
    return point


def _point_of(blobs: Mapping[str, tuple[str, bytes]], specs: tuple[PolicySpec, ...]) -> tuple[ResumePoint,
                                                                                              list[PolicySpec]]:
    """The point sealed in `blobs` ({policy id: (version, blob)}, all at one seq) and the
    policies it lacks a usable state for."""
    point = ResumePoint(specs)
    missing: list[PolicySpec] = []
    for sp in specs:
        r = blobs.get(sp.id)
        got = None
        if r is not None:
            policy_probe = make_policy(sp)
            got = unseal(r[1], version_of(policy_probe)) if r[0] == version_of(policy_probe) else None
        if isinstance(got, tuple) and len(got) == 2 and isinstance(got[0], _Driver) and got[0].policy.spec == sp:
            point.states[sp.id] = PolicyState(got[0], got[1])
        else:
            point.states[sp.id] = None
            missing.append(sp)
    ctx = blobs.get(CONTEXT_ID)
    if ctx is not None and ctx[0] == context_version():
        point.context = unseal(ctx[1], ctx[0])
    return point, missing


__all__ = ["FORMAT", "PolicyState", "ResumePoint", "Snapshot", "current", "drop", "events_since", "feed", "finish",
           "fresh", "load", "pending_seq", "point_of", "save", "save_many", "seal", "snapshot", "unseal", "version_of", "with_context"]

