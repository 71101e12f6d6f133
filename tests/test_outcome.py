"""How a run ended: loopledger.analysis.outcome on readers' metadata, and the real corpus read end to end."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
import sqlalchemy as sa
from loopledger.analysis import outcome
from loopledger.ledger.engine import make_engine

ROOT = Path(__file__).resolve().parent.parent
CORPUS = ROOT.parent / "shared" / "corpus"


def test_from_meta_words():
    assert outcome.from_meta({"reward": 1.0}) == ("success", "reward 1")
    assert outcome.from_meta({"reward": 0}) == ("failure", "reward 0")
    assert outcome.from_meta({"exit_status": "submitted", "submission": "\nflag{x y}\n"}) == \
        ("success", "exit status submitted; flag accepted: flag{x y}")
    assert outcome.from_meta({"exit_status": "submitted", "submission": "HTB{abc}"})[0] == "success"
    assert outcome.from_meta({"exit_status": "Submitted", "submission": "diff --git a/x b/x"}) == \
        ("submitted", "exit status Submitted; submission: diff --git a/x b/x")
    assert outcome.from_meta({"exit_status": "exit_cost"}) == ("failure", "exit status exit_cost")
    assert outcome.from_meta({"success": False, "error": "boom"}) == ("failure", "not successful; error: boom")
    assert outcome.from_meta({"success": True}) == ("success", "success")
    assert outcome.from_meta({"error": "RuntimeError: max iterations"}) == ("failure", "error: RuntimeError: max iterations")
    assert outcome.from_meta({"submitted_patch": True}) == ("submitted", "a patch was submitted")
    assert outcome.from_meta({}) is None and outcome.from_meta({"reward": True}) is None
    assert outcome.from_meta({"version": "2.1"}) is None


@pytest.fixture(scope="module")
def corpus_ledger(tmp_path_factory):
    if not CORPUS.exists():
        pytest.skip("../shared/corpus is absent (a fresh clone)")
    db = tmp_path_factory.mktemp("corpus") / "corpus.sqlite"
    # run-length beside the default set: the outcome tests look at the seed guard's halts
    done = subprocess.run([sys.executable, "-m", "loopledger.cli.app", "ingest", str(CORPUS), "--db", str(db),
                           "--policy", "run-length"],
                          cwd=ROOT, capture_output=True, text=True, timeout=900)
    assert done.returncode in (0, 3), done.stderr[-2000:]
    return f"sqlite:///{db}"


def test_the_corpus_outcomes_are_read_and_stored(corpus_ledger):
    eng = make_engine(corpus_ledger, readonly=True)
    with eng.connect() as conn:
        rows = conn.execute(sa.text("SELECT src.path, s.key, s.outcome, s.outcome_detail, s.outcome_run, s.n_runs "
                                    "FROM sessions s JOIN sources src ON src.id = s.source_id")).all()
    eng.dispose()
    by = {(Path(p).name, k): (o, d, r, n) for p, k, o, d, r, n in rows}
    # tau-bench: every record has its reward (45 records); the rewards in the file, counted independently.
    import json
    tau = json.loads((CORPUS / "openai-chat-tool-calls" / "tau-bench-gpt-4o-airline-subset.json").read_text())
    got = {k: v for k, v in by.items() if k[0] == "tau-bench-gpt-4o-airline-subset.json"}
    assert len(got) == len(tau) == 45
    assert sum(1 for o, *_ in got.values() if o == "success") == sum(1 for r in tau if r["reward"] > 0)
    assert all(r == n - 1 for _, _, r, n in got.values())  # the last run, where the transcript ended
    # SWE-agent exit statuses; the eps CTF run ends on its accepted flag.
    eps = by[("ctf-crypto-eps-submit-loop.traj", "0")]
    assert eps[0] == "success" and "flag{People always make the best exploits.}" in eps[1]
    assert by[("gpt4-pydicom-1458.traj", "0")][0] == "submitted"
    # OpenHands: an error is a failure; the resolver's success flag is kept.
    oh = [v[0] for k, v in by.items() if k[0] == "multi-swe-bench-ponyc-output.jsonl"]
    assert sorted(oh) == ["failure", "submitted", "submitted"]
    assert {v[0] for k, v in by.items() if k[0] == "resolver-mock-output-legacy.jsonl"} == {"success"}
    # A format that records no ending stores none.
    assert all(v[0] is None for k, v in by.items() if k[0].endswith(".md"))


def test_a_0002_ledger_gains_the_outcome_columns_and_keeps_its_sessions(db_url):
    from loopledger.ledger import migrate
    from loopledger.ledger.schema import sessions, sources
    from sqlalchemy import inspect, select

    eng = make_engine(db_url)
    try:
        migrate.upgrade(eng, "0002")
        with eng.begin() as conn:
            assert "outcome" not in {c["name"] for c in inspect(conn).get_columns("sessions")}
            src = conn.execute(sources.insert().values(path="/a.json", size=1, byte_offset=1, status="ok")
                               .returning(sources.c.id)).scalar_one()
            conn.execute(sa.text("INSERT INTO sessions (source_id, key, format, title, n_events, n_runs, n_calls) "
                                 "VALUES (:s, 'k', 'openai-chat', 't', 0, 0, 0)"), {"s": src})
        migrate.upgrade(eng, "0009_ui")
        with eng.begin() as conn:
            row = conn.execute(select(sessions.c.key, sessions.c.outcome, sessions.c.outcome_run)).one()
            assert tuple(row) == ("k", None, None)
            conn.execute(sessions.update().values(outcome="success", outcome_detail="reward 1", outcome_run=0))
            assert conn.execute(select(sessions.c.outcome_detail)).scalar_one() == "reward 1"
    finally:
        eng.dispose()


def test_halted_then_succeeded_counts_sessions_not_runs():
    from loopledger.analysis import sweep

    s = sweep.Setting((), None, runs={(1, 0): sweep.RunRow("halted", 5), (1, 2): sweep.RunRow("halted", 9),
                                      (2, 0): sweep.RunRow("halted", 3), (3, 0): sweep.RunRow("warned")})
    assert sweep.halted_then_succeeded(s, {1, 3}) == 1  # session 1 (twice halted) counts once; 3 never halted
    assert sweep.halted_then_succeeded(s, set()) == 0


def test_compare_counts_halted_runs_that_later_succeeded_on_the_corpus(corpus_ledger):
    from app_support import ledger_env
    from loopledger.detectors.policy import PolicySpec
    from loopledger.replay import replay, tally
    from replay_support import open_page, session_events

    sessions = session_events(corpus_ledger)
    good = {sid for (sid,) in _sql(corpus_ledger, "SELECT id FROM sessions WHERE outcome IN ('success', 'submitted')")}
    with ledger_env(corpus_ledger):
        at = open_page("views/compare.py")
        at.number_input(key="cp_limit").set_value(1000).run()
        at.selectbox(key="cp_detector").set_value("run-length").run()
        at.text_input(key="cp_range_run-length_max_strikes").input("1,2").run()
        at.button(key="cp_run").click().run()
        assert not at.exception, at.exception
        totals = next(d.value for d in at.dataframe if "halted, later succeeded" in d.value.columns)
    counts = []
    for _, row in totals.iterrows():
        spec = PolicySpec("run-length", {"max_strikes": int(row["max_strikes"])})
        want = {sid for sid in good if any(r.outcome == "halted" for r in tally(replay(sessions[sid], spec)).runs)}
        assert row["halted, later succeeded"] == len(want)
        counts.append(len(want))
    assert max(counts) > 0  # the corpus has such runs (the eps CTF session halts before its flag)


def _sql(url, query):
    eng = make_engine(url, readonly=True)
    try:
        with eng.connect() as conn:
            return conn.execute(sa.text(query)).all()
    finally:
        eng.dispose()


def test_session_and_replay_show_how_the_eps_run_ended_next_to_its_halt(corpus_ledger):
    from app_support import app, ledger_env
    from replay_support import open_page

    (sid, run), = _sql(corpus_ledger, "SELECT s.id, s.outcome_run FROM sessions s JOIN sources src ON "
                                      "src.id = s.source_id WHERE src.path LIKE '%eps-submit-loop.traj'")
    halt = _sql(corpus_ledger, f"SELECT min(o.halt_seq) FROM run_outcomes o JOIN policies p ON p.id = o.policy_id "
                               f"WHERE o.session_id = {sid} AND p.detector = 'run-length' AND o.outcome = 'halted'")[0][0]
    assert halt is not None  # the guard halts the run that then finds the flag
    with ledger_env(corpus_ledger):
        at = app("views/session.py", session=str(sid))
        assert not at.exception
        texts = [t.value for t in at.text]
        assert any(t.startswith("Ended: succeeded — exit status submitted; flag accepted: flag{People") for t in texts)
        rp = open_page("views/replay.py", session=str(sid), run=str(run), policy="run-length")
        assert not rp.exception, rp.exception
        line = [t.value for t in rp.text if t.value.startswith("This run ended:")]
        # call #N, 1-based over the session: the calls before the halt's step, plus one (counted in SQL)
        n = _sql(corpus_ledger, f"SELECT count(*) FROM calls WHERE session_id = {sid} AND seq < {halt}")[0][0] + 1
        assert line == [f"This run ended: succeeded — exit status submitted; flag accepted: flag{{People always make "
                        f"the best exploits.}}; this policy halts it at call #{n}"]
