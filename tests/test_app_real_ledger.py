"""The dashboard on a ledger written by the real worker (`loopledger ingest sample_data`), not the generator."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
import sqlalchemy as sa
from app_support import app, charts, ledger_env, metrics
from loopledger.ledger.engine import make_engine

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture(scope="module")
def real_ledger(tmp_path_factory):
    db = tmp_path_factory.mktemp("real") / "ledger.sqlite"
    done = subprocess.run([sys.executable, "-m", "loopledger.cli.app", "ingest", str(ROOT / "sample_data"), "--db", str(db)],
                          cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert done.returncode in (0, 3), done.stderr[-2000:]  # 3: finished, some lines quarantined
    url = f"sqlite:///{db}"
    with ledger_env(url):
        yield url


def _sql(url, query):
    eng = make_engine(url, readonly=True)
    try:
        with eng.connect() as conn:
            return conn.execute(sa.text(query)).all()
    finally:
        eng.dispose()


def test_sessions_page_matches_the_worker_counts(real_ledger):
    at = app()
    assert not at.exception
    m = metrics(at)
    (n,), = _sql(real_ledger, "SELECT count(*) FROM sessions")
    # halted runs, each once however many of the default policies (the sidebar's choice) halted it
    (halts,), = _sql(real_ledger, "SELECT count(*) FROM (SELECT DISTINCT c.session_id, c.run_idx FROM checks c "
                                  "JOIN policies p ON p.id = c.policy_id WHERE c.verdict = 'halt' AND p.is_default) r")
    (calls,), = _sql(real_ledger, "SELECT count(*) FROM calls")
    assert m["Sessions"] == f"{n:,}" and m["Halts"] == f"{halts:,}" and m["Tool calls"] == f"{calls:,}"
    assert n > 0 and halts > 0


def test_every_session_page_renders_and_marks_its_halts(real_ledger):
    # The page opens the run the most policies halted (the earliest on a tie), at its first halt.
    rows = _sql(real_ledger, "SELECT s.id, (SELECT min(halt_seq) FROM run_outcomes o WHERE o.session_id = s.id "
                             "AND o.outcome = 'halted' AND o.run_idx = (SELECT run_idx FROM run_outcomes WHERE "
                             "session_id = s.id AND outcome = 'halted' GROUP BY run_idx ORDER BY count(*) DESC, "
                             "run_idx LIMIT 1)) FROM sessions s")
    assert any(seq is not None for _, seq in rows)
    for sid, seq in rows:
        at = app("views/session.py", session=str(sid))
        assert not at.exception, (sid, at.exception)
        assert [s for s, _ in charts(at) if "facet" in s], sid
        if seq is not None:
            # The most halted run opens at its halt, whether a batch or a prose turn halted it.
            (n,), = _sql(real_ledger, f"SELECT count(*) FROM calls WHERE session_id = {int(sid)} AND seq < {int(seq)}")
            (kind,), = _sql(real_ledger, f"SELECT kind FROM events WHERE session_id = {int(sid)} AND seq = {int(seq)}")
            marked = [t.value for t in at.text if t.value.startswith("▶ halted here · ")]
            # A batch: its calls, by their one number (call #N over the session); a prose turn: the reply.
            want = f"▶ halted here · call #{n + 1}" if kind == "batch" else "▶ halted here · assistant"
            assert any(t.startswith(want) for t in marked), (sid, want, marked)


def test_health_page_on_the_real_ledger(real_ledger):
    at = app("views/health.py")
    assert not at.exception
    (n,), = _sql(real_ledger, "SELECT count(*) FROM sources")
    assert metrics(at)["Sources"] == f"{n:,}"
