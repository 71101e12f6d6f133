"""loopledger.resume: a session's replay continued from a stored snapshot equals a replay from
scratch — steps (checks, results, seq, run) and tallies — for every default policy."""

from __future__ import annotations

import pickle

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from loopledger import resume, snapshots
from loopledger.detectors.policy import BUILTIN_SPECS, DEFAULT_SPECS, PolicySpec
from loopledger.events import Answer, Answers, Batch, Call, SessionInfo, UserTurn
from loopledger.ledger import migrate, schema, store
from loopledger.ledger.engine import make_engine
from loopledger.replay import replay_many, tally
from sqlalchemy import select, update
from test_detectors_hypothesis import session_events

SETTINGS = settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])


ALL_SPECS = tuple(dict.fromkeys(BUILTIN_SPECS + DEFAULT_SPECS))  # every built-in detector, defaults included


def full(events, specs=ALL_SPECS):
    rows = list(replay_many(events, specs))
    return rows, [tally(row[i] for row in rows) for i in range(len(specs))]


def resumed(events, cuts, specs=ALL_SPECS):
    """Feed `events` in pieces split at `cuts`, going through signed bytes at every cut (as a
    later process would), then finish: the rows and tallies a full replay must equal."""
    point = resume.fresh(specs)
    rows: list = []
    start = 0
    for cut in [*sorted(cuts), len(events)]:
        rows += resume.feed(point, events[start:cut])
        start = max(start, cut)
        snap = resume.snapshot(point)
        point = resume.ResumePoint(tuple(specs), snap.seq)
        for sp in specs:
            v, blob = snap.blobs[sp.id]
            driver, tallier = resume.unseal(blob, v)
            point.states[sp.id] = resume.PolicyState(driver, tallier)
    extra = resume.finish(point)
    if rows:
        last = rows[-1]
        rows[-1] = tuple(step._replace(results=step.results + more) for step, more in zip(last, extra, strict=True))
    return rows, [point.tally(sp) for sp in specs]


def _loopy_events():
    """Sessions with real loops: the same call with the same answer, so every policy halts."""
    call = st.sampled_from([("bash", {"cmd": "make"}), ("read", {"p": "a"}), ("edit", {"p": "a"})])
    answer = st.sampled_from(["FAILED", "FAILED", "ok"])
    step = st.one_of(st.just("user"), st.just("prose"), st.tuples(st.lists(call, min_size=1, max_size=2), answer,
                                                                   st.booleans()))

    def build(plan):
        out, cid = [], 0
        for item in plan:
            if item == "user":
                out.append(UserTurn("go"))
            elif item == "prose":
                out.append(Answers((Answer(None, "late"),)) if cid % 3 == 0 else Batch(()))
            else:
                calls = []
                for name, args in item[0]:
                    cid += 1
                    calls.append(Call(f"c{cid}", name, args))
                out.append(Batch(tuple(calls)))
                if item[2]:  # answered (else superseded by what comes next)
                    out.append(Answers(tuple(Answer(c.id, item[1]) for c in calls)))
        return out

    return st.lists(step, max_size=60).map(build)


@SETTINGS
@given(st.one_of(session_events(), _loopy_events()), st.lists(st.integers(0, 70), max_size=4))
def test_resumed_replay_equals_full_replay(events, cuts):
    cuts = [min(c, len(events)) for c in cuts]
    want_rows, want_tallies = full(events)
    got_rows, got_tallies = resumed(events, cuts)
    assert got_rows == want_rows
    assert got_tallies == want_tallies


def test_the_loopy_strategy_halts_every_policy():
    """The property above is not vacuous: a looping session halts (roo: blocks) every built-in
    policy but stagnation, and the resumed replay splits it before and inside the second run."""
    events = []
    for i in range(12):
        events += [Batch((Call(f"c{i}", "bash", {"cmd": "make"}),)), Answers((Answer(f"c{i}", "FAILED"),))]
    events.append(UserTurn("again"))
    for i in range(12):  # A-B-A-B: the cycle detector's case
        name = ("bash", "read")[i % 2]
        events += [Batch((Call(f"d{i}", name, {"p": name}),)), Answers((Answer(f"d{i}", "FAILED"),))]
    _, tallies = full(events)
    flagged = {sp.detector for sp, t in zip(ALL_SPECS, tallies, strict=True) if t.halts or t.blocks}
    assert flagged >= {sp.detector for sp in ALL_SPECS} - {"stagnation"}, flagged  # stagnation reads prose only
    rows, got = resumed(events, [3, 30])
    assert got == tallies


def test_a_tampered_or_foreign_snapshot_is_never_unpickled(monkeypatch):
    point = resume.fresh(DEFAULT_SPECS[:1])
    resume.feed(point, [UserTurn("go")])
    v, blob = resume.snapshot(point).blobs[DEFAULT_SPECS[0].id]
    assert resume.unseal(blob, v) is not None
    evil = blob[:32] + pickle.dumps(("boom",))  # a valid pickle, not signed by us
    assert resume.unseal(evil, v) is None
    assert resume.unseal(blob, "another-version") is None
    monkeypatch.setattr(snapshots, "_key", b"k" * 32)  # another user's key
    assert resume.unseal(blob, v) is None


@pytest.fixture
def engine(db_url):
    eng = make_engine(db_url)
    migrate.upgrade(eng)
    yield eng
    eng.dispose()


def _events(n):
    out = [UserTurn("fix the build")]
    for i in range(n):
        out += [Batch((Call(f"c{i}", "bash", {"cmd": "make test"}),)), Answers((Answer(f"c{i}", "FAILED 1 test"),))]
    return out


def _stored_session(conn, events, specs):
    conn.execute(schema.sources.insert().values(id=1, path="/x.jsonl", size=0, byte_offset=0, status="ok"))
    store.ensure_policies(conn, specs)
    rows, tallies = full(events, specs)
    verdicts = [store.PolicyVerdicts(sp.id, [r[i] for r in rows], tallies[i]) for i, sp in enumerate(specs)]
    return store.write_session(conn, 1, SessionInfo("s", "openai-chat"), events,
                               [r[0].run for r in rows], verdicts)


def test_save_load_feed_through_the_ledger(engine):
    """The hook's use: state after the stored events, loaded in another connection, judges the
    next call exactly as a full replay of the longer session does."""
    specs = DEFAULT_SPECS
    events = _events(6)
    tail = _events(3)[1:]
    with engine.begin() as conn:
        sid = _stored_session(conn, events[:5], specs)
        point = resume.fresh(specs)
        resume.feed(point, events[:5])
        resume.save(conn, sid, point)
    with engine.connect() as conn:
        loaded = resume.load(conn, sid, specs, rebuild=False)
    assert loaded.complete and loaded.seq == 5
    got = resume.feed(loaded, events[5:] + tail)
    want, _ = full(events + tail, specs)
    assert got[:-1] == want[5:-1]  # the last step of a full replay also judges what is pending
    assert [x.checks for x in got[-1]] == [x.checks for x in want[-1]]
    # ladder and cycle halted somewhere in the resumed part, as in the full replay
    assert sum(c.verdict == "halt" for row in got for stp in row for c in stp.checks) > 0


def test_missing_or_stale_snapshots_are_rebuilt_from_the_ledger(engine):
    specs = DEFAULT_SPECS
    events = _events(5)
    with engine.begin() as conn:
        sid = _stored_session(conn, events, specs)
        point = resume.fresh(specs)
        resume.feed(point, events)
        resume.save(conn, sid, point)
        # one policy's snapshot from older code, one gone
        conn.execute(update(schema.resume_states).where(schema.resume_states.c.policy_id == specs[0].id)
                     .values(version="old"))
        conn.execute(schema.resume_states.delete().where(schema.resume_states.c.policy_id == specs[1].id))
    with engine.connect() as conn:
        lazy = resume.load(conn, sid, specs, rebuild=False)
        assert lazy.state(specs[0]) is None and lazy.state(specs[1]) is None and lazy.state(specs[2]) is not None
        point = resume.load(conn, sid, specs)
    assert point.complete and point.seq == len(events)
    more = _events(2)[1:]
    got = resume.feed(point, more)
    want, _ = full(events + more, specs)
    assert [tuple(x.checks for x in row) for row in got] == [tuple(x.checks for x in row) for row in want[len(events):]]


def test_a_session_without_snapshots_loads_after_its_stored_events(engine):
    specs = (PolicySpec.parse("window:window=4,threshold=3"),)
    events = _events(2)
    with engine.begin() as conn:
        sid = _stored_session(conn, events, specs)
    with engine.connect() as conn:
        point = resume.load(conn, sid, specs)
        assert conn.execute(select(schema.resume_states)).first() is None
    assert point.seq == len(events) and point.complete
    [row] = resume.feed(point, [Batch((Call("c9", "bash", {"cmd": "make test"}),))])
    assert row[0].checks[0].verdict == "halt"  # the third identical call in a window of 4


def test_feed_columns_across_chunks_gives_each_policy_the_steps_of_a_full_replay():
    """Ingest feeds each policy a chunk of events before the next policy: over a session longer
    than several chunks (loops, halts, user turns, a batch left unanswered at a chunk edge) every
    policy's steps and tally equal the event-by-event replay's."""
    events = []
    for i in range(400):
        name = ("bash", "read", "bash", "edit")[i % 4] if i % 50 < 25 else "bash"
        events.append(Batch((Call(f"c{i}", name, {"p": name if i % 50 >= 25 else i % 7}),)))
        if i % 13 != 0:  # every 13th call is superseded, unanswered
            events.append(Answers((Answer(f"c{i}", "FAILED" if i % 3 else "ok"),)))
        if i % 90 == 89:
            events.append(UserTurn("again"))
    assert len(events) > 3 * resume._CHUNK
    want_rows, want_tallies = full(events)
    point = resume.fresh(ALL_SPECS)
    cols = resume.feed_columns(point, events[:300])
    more = resume.feed_columns(point, events[300:])
    cols = [a + b for a, b in zip(cols, more, strict=True)]
    assert point.seq == len(events)
    extra = resume.finish(point)
    for i, col in enumerate(cols):
        col[-1] = col[-1]._replace(results=col[-1].results + extra[i])
        assert col == [row[i] for row in want_rows], ALL_SPECS[i].label
        assert point.tally(ALL_SPECS[i]) == want_tallies[i], ALL_SPECS[i].label
    assert any(t.halts for t in want_tallies)  # not vacuous: some policy halts in it
