"""The dashboard's read model on both backends, cross-checked against plain SQL over the same ledger."""

from __future__ import annotations

import datetime as dt

import pytest
import sqlalchemy as sa
from loopledger import vocab
from loopledger.ledger import read
from loopledger.ledger import schema as t
from loopledger.ledger.engine import make_engine

from bench.gen_ledger import generate


@pytest.fixture
def ledger(db_url):
    written = generate(db_url, sessions=40, calls=3000, seed=11, hostile=True)
    eng = make_engine(db_url)
    yield eng, written
    eng.dispose()


def _scalar(conn, sql, **kw):
    return conn.execute(sa.text(sql), kw).scalar()


def test_headline_matches_plain_sql(ledger):
    eng, written = ledger
    with eng.connect() as conn:
        h = read.headline(conn, read.SessionFilter())
        assert h["sessions"] == written["sessions"] == 40
        assert h["calls"] == written["calls"] == _scalar(conn, "SELECT count(*) FROM calls")
        # every policy as one guard: a run several of them halted is one halted run, and it saves
        # the calls after the earliest halt — the most any of them saved in it
        assert h["halts"] == _scalar(conn, "SELECT count(*) FROM (SELECT DISTINCT session_id, run_idx FROM checks "
                                           "WHERE verdict = 'halt') AS r")
        assert h["halts"] < _scalar(conn, "SELECT count(*) FROM checks WHERE verdict = 'halt'")  # runs halted twice
        assert h["warnings"] == _scalar(conn, "SELECT count(*) FROM checks WHERE verdict = 'warn'")
        assert h["runs"] == _scalar(conn, "SELECT count(*) FROM runs")
        assert h["saved"] == _scalar(conn, "SELECT sum(m) FROM (SELECT max(saved) AS m FROM run_outcomes "
                                           "GROUP BY session_id, run_idx) AS r")
        assert h["saved"] < _scalar(conn, "SELECT sum(saved) FROM session_stats")  # not a sum over policies


def test_policy_choice_narrows_the_counters(ledger):
    eng, _ = ledger
    with eng.connect() as conn:
        pols = read.policies(conn)
        ladder = pols[pols.detector == "ladder"].id.iloc[0]
        h = read.headline(conn, read.SessionFilter(policies=(ladder,)))
        assert h["halts"] == _scalar(conn, "SELECT count(*) FROM checks WHERE verdict = 'halt' AND policy_id = :p", p=ladder)
        assert h["blocks"] == _scalar(conn, "SELECT count(*) FROM checks WHERE verdict = 'block' AND policy_id = :p", p=ladder)
        # Sessions are still all there: the policy picks counters, not sessions.
        assert h["sessions"] == 40
        pp = read.per_policy(conn, read.SessionFilter(policies=(ladder,)))
        assert list(pp.policy_id) == [ladder]
        assert int(pp.halts.iloc[0]) == h["halts"]


def test_outcome_filters_partition_the_sessions(ledger):
    eng, _ = ledger
    with eng.connect() as conn:
        parts = {o: read.sessions_page(conn, read.SessionFilter(outcome=o), limit=1000) for o in read.OUTCOME_FILTERS}
        assert sum(len(p) for p in parts.values()) == 40
        assert len(parts["halted"]) > 0 and (parts["halted"].halts > 0).all()
        assert (parts["warned"].halts == 0).all() and ((parts["warned"].warnings + parts["warned"].blocks) > 0).all()
        clean = parts["clean"]
        assert ((clean.halts + clean.warnings + clean.blocks) == 0).all()
        with pytest.raises(ValueError, match="outcome"):
            read.count_sessions(conn, read.SessionFilter(outcome="bogus"))


def test_sort_and_paging_are_stable_and_complete(ledger):
    eng, _ = ledger
    with eng.connect() as conn:
        f = read.SessionFilter()
        pages = [read.sessions_page(conn, f, sort="halts", limit=15, offset=o) for o in (0, 15, 30)]
        ids = [i for p in pages for i in p.id]
        assert sorted(ids) == list(range(1, 41))
        halts = [h for p in pages for h in p.halts]
        assert halts == sorted(halts, reverse=True)
        asc = read.sessions_page(conn, f, sort="calls", descending=False, limit=40)
        assert list(asc.calls) == sorted(asc.calls)
        with pytest.raises(ValueError, match="sort"):
            read.sessions_page(conn, f, sort="title; DROP TABLE sessions")


def test_text_tool_format_and_date_filters(ledger):
    eng, _ = ledger
    with eng.connect() as conn:
        hostile = read.sessions_page(conn, read.SessionFilter(text="HOSTILE"), limit=100)
        assert list(hostile.id) == [1]
        # A LIKE wildcard typed by a person is literal text, not a pattern.
        assert read.count_sessions(conn, read.SessionFilter(text="%")) == 0
        by_tool = read.sessions_page(conn, read.SessionFilter(tool="browser_click"), limit=100)
        expect = {r[0] for r in conn.execute(sa.text("SELECT DISTINCT session_id FROM calls WHERE tool = 'browser_click'"))}
        assert set(by_tool.id) == expect and 0 < len(expect) < 40
        fmt = read.formats(conn)[0]
        by_fmt = read.sessions_page(conn, read.SessionFilter(formats=(fmt,)), limit=100)
        assert len(by_fmt) > 0 and set(by_fmt.format) == {fmt}
        lo, hi = read.date_bounds(conn)
        mid = lo + (hi - lo) / 2
        early = read.sessions_page(conn, read.SessionFilter(date_to=mid), limit=100)
        late = read.sessions_page(conn, read.SessionFilter(date_from=mid + dt.timedelta(days=1)), limit=100)
        assert len(early) + len(late) == 40
        assert all(s[:10] <= mid.isoformat() for s in early.started_at)
        src = read.sessions_page(conn, read.SessionFilter(source="/proj3/"), limit=100)
        assert len(src) > 0 and all("/proj3/" in p for p in src.path)


def test_top_sessions_summarizes_the_rest(ledger):
    eng, _ = ledger
    with eng.connect() as conn:
        top = read.top_sessions(conn, read.SessionFilter(), n=5)
        total = read.headline(conn, read.SessionFilter())
        assert len(top) == 6 and top.id.iloc[-1] is None and top.others.iloc[-1] == 35
        for m in read.MEASURES:
            assert int(top[m].sum()) == total[m]


def test_session_page_reads(ledger):
    eng, _ = ledger
    with eng.connect() as conn:
        sid = int(read.sessions_page(conn, read.SessionFilter(), limit=1).id.iloc[0])
        head = read.session_header(conn, sid)
        assert head["id"] == sid and head["path"].endswith(".jsonl") and head["duration_s"] > 0
        assert read.session_header(conn, 10_000) is None
        long = read.run_outcomes(conn, sid)
        n_pol = len(read.policies(conn))
        assert len(long) == head["n_runs"] * n_pol
        wide = read.outcome_matrix(long)
        assert len(wide) == head["n_runs"] and set(wide.columns) >= set(long.policy)
        h = read.halts(conn, sid)
        assert len(h) > 0
        first = h.iloc[0]
        verdict = _scalar(conn, "SELECT verdict FROM checks WHERE session_id = :s AND policy_id = :p AND seq = :q AND idx = :i",
                          s=sid, p=first.policy_id, q=int(first.halt_seq), i=int(first.halt_idx))
        assert verdict == vocab.HALT
        tl = read.timeline(conn, sid)
        n_checks = _scalar(conn, "SELECT count(*) FROM checks WHERE session_id = :s", s=sid)
        batch_extra = _scalar(conn, "SELECT count(*) FROM checks k JOIN calls c ON c.session_id = k.session_id AND c.seq = k.seq "
                                    "WHERE k.session_id = :s AND k.idx = -1", s=sid)
        batch_checks = _scalar(conn, "SELECT count(*) FROM checks WHERE session_id = :s AND idx = -1", s=sid)
        assert len(tl) == n_checks - batch_checks + batch_extra
        assert (tl.verdict == vocab.HALT).any()
        run0 = read.timeline(conn, sid, run_idx=0)
        assert set(run0.run_idx) == {0}
        lo, hi = read.run_bounds(conn, sid, 0)
        tr = read.transcript(conn, sid, lo, hi)
        assert tr.seq.is_monotonic_increasing and tr.kind.iloc[0] == vocab.KIND_USER
        assert len(tr[tr.kind == vocab.KIND_BATCH]) == _scalar(conn, "SELECT count(*) FROM calls WHERE session_id = :s AND run_idx = 0", s=sid)


def test_labels_upsert(ledger):
    eng, _ = ledger
    with eng.begin() as conn:
        read.write_label(conn, 3, 0, "real_loop", "polls forever")
        read.write_label(conn, 3, 0, "not_loop", "")
        with pytest.raises(ValueError, match="label"):
            read.write_label(conn, 3, 0, "maybe")
    with eng.connect() as conn:
        lab = read.run_labels(conn, 3)
        assert list(lab.label) == ["normal"] and lab.note.isna().all()


def test_health_reads(ledger):
    eng, written = ledger
    with eng.connect() as conn:
        totals = read.ingest_totals(conn)
        assert totals["sources"] == 40 and totals["quarantined_lines"] == written["errors"] > 0
        assert read.source_status_counts(conn) == {"ok": 40 - written["errors"], "quarantined": written["errors"]}
        q = read.sources_page(conn, status="quarantined")
        assert len(q) == written["errors"] and (q.errors == 1).all() and (q.sessions == 1).all()
        errs = read.ingest_errors(conn)
        assert len(errs) == written["errors"]
        assert all(w == f"{p}:{n}" for w, p, n in zip(errs["where"], errs.path, errs.line, strict=True))
        page = read.sources_page(conn, limit=7)
        assert len(page) == 7 and page.last_ingest.is_monotonic_decreasing
        assert int(page.calls.sum()) == _scalar(conn, f"SELECT sum(n_calls) FROM sessions WHERE source_id IN ({','.join(map(str, page.id))})")
        assert "Bash" in read.tools(conn)


def test_readonly_engine_cannot_write(ledger, db_url):
    ro = make_engine(db_url, readonly=True)
    try:
        with ro.connect() as conn:
            assert read.count_sessions(conn, read.SessionFilter()) == 40
            with pytest.raises(sa.exc.DBAPIError):
                read.write_label(conn, 1, 0, "real_loop")
                conn.commit()
    finally:
        ro.dispose()
    with ledger[0].connect() as conn:
        assert conn.execute(sa.select(sa.func.count()).select_from(t.labels)).scalar() == 0


@pytest.mark.parametrize("a, b, want", [
    ("2026-02-11T10:05:00Z", "2026-02-11T10:05:30.500Z", 30.5),
    ("2026-02-11T10:05:00", "2026-02-11T10:06:00", 60.0),  # both without a zone (tau2-bench writes these)
    ("2026-02-11T10:05:00", "2026-02-11T10:06:00Z", None),  # one zone-less: the gap is unknown
    ("2026-02-11T10:05:00+01:00", "2026-02-11T10:05:00", None),
    ("not a time", "2026-02-11T10:06:00Z", None),
    (None, "2026-02-11T10:06:00Z", None),
])
def test_a_sessions_duration_needs_two_comparable_times(a, b, want):
    assert read._seconds_between(a, b) == want
