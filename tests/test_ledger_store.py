"""The writer and load_events: what goes in comes back as the same events, on both backends."""

from __future__ import annotations

import pytest
from loopledger.detectors.canonical import args_hash, canonical_json
from loopledger.events import Answer, Answers, Batch, Call, Prose, SessionInfo, UserTurn, text_digest
from loopledger.ledger import migrate, schema, store
from loopledger.ledger.engine import make_engine
from sqlalchemy import func, select


@pytest.fixture
def engine(db_url):
    eng = make_engine(db_url)
    migrate.upgrade(eng)
    yield eng
    eng.dispose()


def _source(conn, path="/t/a.jsonl") -> int:
    return conn.execute(schema.sources.insert().values(path=path, size=0, byte_offset=0, status="ok")
                        .returning(schema.sources.c.id)).scalar_one()


def canon(events):
    """Events with arguments in canonical form: None and {} are the same arguments (design.md)."""
    out = []
    for ev in events:
        if isinstance(ev, Batch):
            ev = Batch(tuple(Call(c.id, c.name, c.args if c.args_malformed else canonical_json(c.args),
                                  c.args_malformed) for c in ev.calls), ev.text, ev.ts, ev.line)
        out.append(ev)
    return out


def _runs(events):
    run, out = -1, []
    for ev in events:
        if isinstance(ev, UserTurn) or run < 0:
            run += 1
        out.append(run)
    return out


EVENTS = [
    UserTurn("fix the build", ts="2026-01-01T00:00:00Z", line=1),
    Batch((Call("c1", "bash", {"cmd": "make", "env": {"B": 2, "A": [1, 2.5, None]}}),
           Call("c2", "read_file", None)), text="let me look", ts="2026-01-01T00:00:01Z", line=2),
    Answers((Answer("c1", "error: x", True, "2026-01-01T00:00:02Z"), Answer("c2", "contents")), line=3),
    Prose("still failing", line=4),
    UserTurn("again", line=5),
    Batch((Call(None, "bash", '{"cmd": "make', args_malformed=True), Call(None, "ls", {})), line=6),
    Answers((Answer(None, "out1"), Answer(None, "")), line=7),
    Batch((Call("c9", "bash", {"cmd": "make"}),), line=8),
]


def test_load_events_rebuilds_what_was_written(engine):
    with engine.begin() as conn:
        src = _source(conn)
        sid = store.write_session(conn, src, SessionInfo("k1", "openai-chat", title="t"), EVENTS, _runs(EVENTS), [])
    with engine.connect() as conn:
        assert canon(store.load_events(conn, sid)) == canon(EVENTS)
        row = conn.execute(select(schema.sessions).where(schema.sessions.c.id == sid)).mappings().one()
        assert (row["n_events"], row["n_runs"], row["n_calls"]) == (8, 2, 5)
        assert row["started_at"] == "2026-01-01T00:00:00Z"
        calls = conn.execute(select(schema.calls).where(schema.calls.c.session_id == sid)
                             .order_by(schema.calls.c.seq, schema.calls.c.idx)).mappings().all()
        assert [c["args"] for c in calls] == [canonical_json(EVENTS[1].calls[0].args), "{}", '{"cmd": "make',
                                              "{}", '{"cmd":"make"}']
        assert calls[0]["args_hash"] == args_hash(EVENTS[1].calls[0].args)
        assert [c["answer_seq"] for c in calls] == [2, 2, 6, 6, None]
        assert calls[0]["is_error"] is True and calls[4]["answer"] is None
        runs = conn.execute(select(schema.runs).where(schema.runs.c.session_id == sid)
                            .order_by(schema.runs.c.idx)).all()
        assert [(r.first_seq, r.last_seq, r.n_calls, r.user_text) for r in runs] == [
            (0, 3, 2, "fix the build"), (4, 7, 3, "again")]


def test_text_caps_keep_equality_exact(engine):
    big_a = "x" * 5000 + "A"
    big_b = "x" * 5000 + "B"
    big_args = {"blob": "y" * 6000}
    events = [
        Batch((Call("a", "cat", big_args),)), Answers((Answer("a", big_a),)),
        Batch((Call("b", "cat", big_args),)), Answers((Answer("b", big_b),)),
        Prose(big_a), Prose(big_b), Prose(big_a),
    ]
    with engine.begin() as conn:
        sid = store.write_session(conn, _source(conn), SessionInfo("k", "f"), events, [0] * 7, [], max_text=1024)
    with engine.connect() as conn:
        back = store.load_events(conn, sid)
        stored = conn.execute(select(schema.calls.c.answer, schema.calls.c.answer_len, schema.calls.c.args)
                              .where(schema.calls.c.session_id == sid)).all()
    assert all(len(a.encode()) < 1200 and n == 5001 for a, n, _ in stored)
    # Capped texts are cut at the same place, yet digests keep the two answers different.
    assert back[1].answers[0].digest == text_digest(big_a) != back[3].answers[0].digest
    assert back[1].answers[0].text.startswith("x" * 1000)
    # Capped prose: equal full texts stay equal, different ones stay different.
    assert back[4].text == back[6].text != back[5].text
    # Capped arguments: the two identical calls still have identical (placeholder) arguments.
    assert back[0].calls[0].args == back[2].calls[0].args == {store.ARGS_TRUNCATED_KEY: args_hash(big_args)}


def test_rewrite_replaces_rows_and_keeps_labels(engine):
    with engine.begin() as conn:
        src = _source(conn)
        sid = store.write_session(conn, src, SessionInfo("k", "f"), EVENTS, _runs(EVENTS), [])
        conn.execute(schema.labels.insert().values(session_id=sid, run_idx=0, label="real_loop"))
    with engine.begin() as conn:
        sid2 = store.write_session(conn, src, SessionInfo("k", "f"), EVENTS[:3], _runs(EVENTS[:3]), [])
    assert sid2 == sid
    with engine.connect() as conn:
        assert canon(store.load_events(conn, sid)) == canon(EVENTS[:3])
        assert conn.execute(select(func.count()).select_from(schema.calls)).scalar() == 2
        assert conn.execute(select(func.count()).select_from(schema.labels)).scalar() == 1
    with engine.begin() as conn:
        assert store.delete_sessions(conn, src, keep_keys=()) == 1
    with engine.connect() as conn:
        for t in (schema.sessions, schema.events, schema.calls, schema.labels, schema.runs):
            assert conn.execute(select(func.count()).select_from(t)).scalar() == 0


def test_cap_text_boundaries():
    assert store.cap_text("abc", 3) == "abc"
    capped = store.cap_text("é" * 10, 5)  # never splits a multi-byte character
    assert capped.startswith("éé" + store.TRUNCATED) and store.is_capped(capped)
    assert not store.is_capped("plain text]")


# ── property: whatever the events, a recheck from the ledger judges what the ingest judged ────

import uuid  # noqa: E402

from hypothesis import HealthCheck, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402
from loopledger.detectors.policy import DEFAULT_SPECS  # noqa: E402
from loopledger.worker import replay_session  # noqa: E402

_names = st.sampled_from(["bash", "read_file", "grep", "browser_navigate"])
_args = st.one_of(st.none(), st.fixed_dictionaries({"p": st.sampled_from(["a", "b", "x" * 300])}),
                  st.dictionaries(st.sampled_from(["k", "n"]), st.integers(0, 2), max_size=2))
_ids = st.one_of(st.none(), st.sampled_from(["c1", "c2", "c3"]))


@st.composite
def sessions(draw):
    events = []
    for _ in range(draw(st.integers(1, 25))):
        kind = draw(st.sampled_from(["user", "prose", "batch", "answers", "batch"]))
        if kind == "user":
            events.append(UserTurn(draw(st.sampled_from(["go", "again"]))))
        elif kind == "prose":
            events.append(Prose(draw(st.sampled_from(["", "thinking", "y" * 300]))))
        elif kind == "batch":
            n = draw(st.integers(0, 3))
            events.append(Batch(tuple(Call(draw(_ids), draw(_names), draw(_args)) for _ in range(n))))
        else:
            n = draw(st.integers(1, 3))
            events.append(Answers(tuple(Answer(draw(_ids), draw(st.sampled_from(["ok", "fail", "z" * 300])),
                                               draw(st.booleans())) for _ in range(n))))
    return events


def _verdicts(events):
    _, verdicts = replay_session(events, DEFAULT_SPECS)
    return [sorted((s.seq, s.run, c) for s in pv.steps for c in s.checks) for pv in verdicts], \
        [sorted((r.seq, r.idx, r.outcome) for s in pv.steps for r in s.results) for pv in verdicts]


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(events=sessions())
def test_recheck_from_ledger_equals_ingest_for_any_session(tmp_path, events):
    eng = make_engine(f"sqlite:///{tmp_path / 'prop.sqlite'}")
    migrate.upgrade(eng)
    try:
        run_of, verdicts = replay_session(events, DEFAULT_SPECS)
        with eng.begin() as conn:
            src = conn.execute(schema.sources.insert().values(path=uuid.uuid4().hex, size=0, byte_offset=0,
                                                              status="ok").returning(schema.sources.c.id)).scalar_one()
            store.ensure_policies(conn, DEFAULT_SPECS)
            sid = store.write_session(conn, src, SessionInfo("k", "f"), events, run_of, verdicts, max_text=256)
        with eng.connect() as conn:
            back = store.load_events(conn, sid)
        assert len(back) == len(events)
        assert _verdicts(back) == _verdicts(events)
    finally:
        eng.dispose()


def test_a_late_answer_to_a_superseded_batch_reloads_after_the_pending_batchs_answers(tmp_path):
    """Found by the property above: batch A (one id-less call, one `c3`) is superseded by batch B
    (two id-less calls) before any answer; then one Answers event answers B's two calls and, last,
    `c3` (A's, late: replay ignores it, the ledger joins it to A's call for people to read). On
    reload it must come after B's answers again, or the pairing rule (an unknown id takes a free
    id-less call) would hand it to B."""
    two = lambda a=None, b=None: Batch((Call(a, "bash", None), Call(b, "bash", None)))  # noqa: E731
    events = [UserTurn("go"), two(None, "c3"), two(),
              Answers((Answer(None, "ok"), Answer(None, "ok"), Answer("c3", "ok", True))),
              Batch((Call(None, "bash", None),))]
    eng = make_engine(f"sqlite:///{tmp_path / 'late.sqlite'}")
    migrate.upgrade(eng)
    try:
        run_of, verdicts = replay_session(events, DEFAULT_SPECS)
        with eng.begin() as conn:
            src = conn.execute(schema.sources.insert().values(path="late", size=0, byte_offset=0,
                                                              status="ok").returning(schema.sources.c.id)).scalar_one()
            store.ensure_policies(conn, DEFAULT_SPECS)
            sid = store.write_session(conn, src, SessionInfo("k", "f"), events, run_of, verdicts, max_text=256)
        with eng.connect() as conn:
            back = store.load_events(conn, sid)
        assert [a.call_id for a in back[3].answers][-1] == "c3"
        assert _verdicts(back) == _verdicts(events)
    finally:
        eng.dispose()
