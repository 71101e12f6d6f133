"""Investigating a halted run on a ledger the real worker wrote from sample_data (AppTest):
why in words, the repeat from its first call, halted runs one click apart (issue 10)."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest
import sqlalchemy as sa
from app_support import app, charts, ledger_env, markdown_texts, plain_texts
from loopledger.ledger.engine import make_engine

ROOT = Path(__file__).resolve().parent.parent
PAGE = "views/session.py"


@pytest.fixture(scope="module")
def real_ledger(tmp_path_factory):
    db = tmp_path_factory.mktemp("why") / "ledger.sqlite"
    done = subprocess.run([sys.executable, "-m", "loopledger.cli.app", "ingest", str(ROOT / "sample_data"), "--db", str(db)],
                          cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert done.returncode in (0, 3), done.stderr[-2000:]
    url = f"sqlite:///{db}"
    with ledger_env(url):
        yield url


def _sql(url, query, **params):
    eng = make_engine(url, readonly=True)
    try:
        with eng.connect() as conn:
            return conn.execute(sa.text(query), params).all()
    finally:
        eng.dispose()


def _most_halted_session(url) -> int:
    return _sql(url, "SELECT session_id FROM run_outcomes WHERE outcome = 'halted' GROUP BY session_id "
                     "ORDER BY count(*) DESC, session_id LIMIT 1")[0][0]


def _halted_runs(url, sid) -> list[int]:
    return [r for (r,) in _sql(url, "SELECT DISTINCT run_idx FROM run_outcomes WHERE session_id = :s AND "
                                    "outcome = 'halted' ORDER BY run_idx", s=sid)]


def _most_halted_run(url, sid) -> int:
    return _sql(url, "SELECT run_idx FROM run_outcomes WHERE session_id = :s AND outcome = 'halted' "
                     "GROUP BY run_idx ORDER BY count(*) DESC, run_idx LIMIT 1", s=sid)[0][0]


def test_why_sentence_from_the_halting_checks_own_numbers(real_ledger):
    sid = _most_halted_session(real_ledger)
    run = _most_halted_run(real_ledger, sid)
    at = app(PAGE, session=str(sid))
    assert not at.exception
    assert at.selectbox(key="run_pick").value == run  # opens on the most halted run
    assert any(s.value == f"Why run #{run + 1} halted" for s in at.subheader)  # runs counted from 1, like calls
    halts = _sql(real_ledger, "SELECT p.detector, k.seq, k.count, k.threshold, c.tool FROM run_outcomes o "
                              "JOIN policies p ON p.id = o.policy_id JOIN checks k ON k.session_id = o.session_id "
                              "AND k.policy_id = o.policy_id AND k.seq = o.halt_seq AND k.idx = o.halt_idx "
                              "JOIN calls c ON c.session_id = k.session_id AND c.seq = k.seq "
                              "AND (k.idx = -1 OR c.idx = k.idx) "
                              "WHERE o.session_id = :s AND o.run_idx = :r AND o.outcome = 'halted'", s=sid, r=run)
    texts = [t.value for t in at.text]
    assert halts
    for detector, seq, count, threshold, tool in halts:
        # call #N: 1-based over the session, counted in SQL (calls before the halt's step, plus one;
        # a batch-level check is its batch's first call), as labels and the leaderboard count.
        n = _sql(real_ledger, "SELECT count(*) FROM calls WHERE session_id = :s AND seq < :q", s=sid, q=seq)[0][0]
        idx = _sql(real_ledger, "SELECT halt_idx FROM run_outcomes o JOIN policies p ON p.id = o.policy_id WHERE "
                                "o.session_id = :s AND o.run_idx = :r AND p.detector = :d", s=sid, r=run, d=detector)[0][0]
        # One number per call: no step, no line beside it (issue 37).
        (line,) = [t for t in texts if t.startswith(f"{detector} halted at call #{n + max(idx, 0) + 1}: ")]
        assert tool in line and str(threshold) in line
        assert re.search(rf"\b{count} (times|calls)\b|attempt {count}\b", line), line
    run_length = [t for t in texts if t.startswith("run-length halted")]
    if any(d == "run-length" for d, *_ in halts):
        assert "the same batch" in run_length[0] and "unchanged answers; at most 2 allowed" in run_length[0]


def test_no_minus_one_shown_to_a_person(real_ledger):
    sid = _most_halted_session(real_ledger)
    at = app(PAGE, session=str(sid))
    shown = plain_texts(at) + markdown_texts(at) + [c.value for c in at.caption]
    assert not [t for t in shown if re.search(r"(?<![\w.])-1(?![\d.])", t)]
    for df in at.dataframe:
        for col in df.value.columns:
            assert not (df.value[col].astype(str) == "-1").any(), col


def test_the_excerpt_starts_at_the_first_call_of_the_repeat_and_marks_identical_calls(real_ledger):
    sid = _most_halted_session(real_ledger)
    run = _most_halted_run(real_ledger, sid)
    (halt_seq, halt_idx), = _sql(real_ledger, "SELECT halt_seq, halt_idx FROM run_outcomes WHERE session_id = :s AND "
                                              "run_idx = :r AND outcome = 'halted' ORDER BY halt_seq LIMIT 1",
                                 s=sid, r=run)
    (tool, args_hash), = _sql(real_ledger, "SELECT tool, args_hash FROM calls WHERE session_id = :s AND seq = :q "
                                           "AND idx = :i", s=sid, q=halt_seq, i=max(halt_idx, 0))
    at = app(PAGE, session=str(sid))
    texts = [t.value for t in at.text]
    # The first halt's "rests on" line links calls identical to the halting call (checked in SQL).
    rests = next(m for m in markdown_texts(at) if m.startswith("rests on "))
    links = [(int(n), int(q)) for n, q in re.findall(r"\[call #(\d+)[^\]]*\]\(\./session\?session=\d+&run=\d+&step=(\d+)\)",
                                                      rests)]
    listed = [q for _, q in links]
    assert listed and listed[-1] == halt_seq and len(listed) >= 2
    for n, seq in links:
        same = _sql(real_ledger, "SELECT count(*) FROM calls WHERE session_id = :s AND seq = :q AND tool = :t "
                                 "AND args_hash = :h", s=sid, q=seq, t=tool, h=args_hash)[0][0]
        assert same >= 1, seq
        before = _sql(real_ledger, "SELECT count(*) FROM calls WHERE session_id = :s AND seq < :q", s=sid, q=seq)[0][0]
        assert before < n <= before + 8, (n, seq)  # the call's own number, within its batch
    first_n = links[0][0]
    # The transcript excerpt starts at the first repeated call, not a few steps before the halt.
    head = re.compile(r"(?:▶ halted here · )?call #(\d+)\b")
    numbers = [int(m.group(1)) for t in texts if (m := head.match(t))]
    halt_n = _sql(real_ledger, "SELECT count(*) FROM calls WHERE session_id = :s AND seq < :q", s=sid, q=halt_seq)[0][0] \
        + max(halt_idx, 0) + 1
    assert numbers[0] == first_n and halt_n in numbers
    # Each later repeat is marked identical to the first one, by its call number.
    later_n = {n for n, _ in links[1:]}
    later = [t for t in texts if (m := head.match(t)) and int(m.group(1)) in later_n and f": {tool}" in t]
    assert later and all(f"arguments identical to call #{first_n}" in t for t in later)


def test_next_and_previous_halted_run_and_the_picker_marks(real_ledger):
    sid = _most_halted_session(real_ledger)
    halted = _halted_runs(real_ledger, sid)
    assert len(halted) >= 3
    at = app(PAGE, session=str(sid), run=str(halted[0]))
    pick = at.selectbox(key="run_pick")
    marked = [i for i, o in enumerate(pick.options) if " — halted by " in o]
    assert marked == halted
    assert at.button(key="prev_halted").disabled
    at.button(key="next_halted").click().run()
    assert not at.exception
    assert at.selectbox(key="run_pick").value == halted[1] and at.query_params["run"] == str(halted[1])
    assert any(s.value == f"Why run #{halted[1] + 1} halted" for s in at.subheader)
    at.button(key="next_halted").click().run()
    assert at.selectbox(key="run_pick").value == halted[2]
    at.button(key="prev_halted").click().run()
    assert at.selectbox(key="run_pick").value == halted[1]


def test_runs_by_policies_halting_guards_first_halted_only_and_row_click(real_ledger):
    sid = _most_halted_session(real_ledger)
    halted = _halted_runs(real_ledger, sid)
    at = app(PAGE, session=str(sid))
    (matrix,) = [d for d in at.dataframe if d.key == "outcomes"]
    df = matrix.value
    assert list(df.columns[:3]) == ["run", "halted by", "calls"]
    # Default policies are headed by their detector's name alone.
    counts = dict(_sql(real_ledger, "SELECT p.detector, count(*) FROM run_outcomes o JOIN policies p ON p.id = "
                                    "o.policy_id WHERE o.session_id = :s AND o.outcome = 'halted' GROUP BY p.detector",
                       s=sid))
    assert set(df.columns[3:]) == {d for (d,) in _sql(real_ledger, "SELECT detector FROM policies")}
    pols = list(df.columns[3:])
    assert [p for p in pols if counts.get(p)] == pols[:len(counts)]  # halting guards come first
    assert [counts.get(p, 0) for p in pols] == sorted((counts.get(p, 0) for p in pols), reverse=True)
    # 166 runs: the halted-only filter is on by default and keeps exactly the halted runs.
    assert at.toggle(key="halted_only").value is True
    assert list(df.run) == [f"#{r + 1}" for r in halted] and (df["halted by"] != "").all()  # counted from 1
    # A row click opens that run: its checkbox, or any cell of it.
    at.session_state["outcomes"] = {"selection": {"rows": [2], "columns": [], "cells": []}}
    at.run()
    assert not at.exception
    assert at.selectbox(key="run_pick").value == halted[2]
    at.session_state["outcomes"] = {"selection": {"rows": [], "columns": [], "cells": [(1, "calls")]}}
    at.run()
    assert not at.exception
    assert at.selectbox(key="run_pick").value == halted[1]
    at.toggle(key="halted_only").set_value(False).run()
    (matrix,) = [d for d in at.dataframe if d.key == "outcomes"]
    assert len(matrix.value) == _sql(real_ledger, "SELECT n_runs FROM sessions WHERE id = :s", s=sid)[0][0]


def test_timeline_is_zoomed_to_the_run_and_clicking_a_mark_moves_the_transcript(real_ledger):
    sid = _most_halted_session(real_ledger)
    run = _most_halted_run(real_ledger, sid)
    at = app(PAGE, session=str(sid))
    ((spec, data),) = [c for c in charts(at) if "facet" in c[0]]
    (lo, hi), = _sql(real_ledger, "SELECT first_seq, last_seq FROM runs WHERE session_id = :s AND idx = :r", s=sid, r=run)
    # Calls on x, as every page numbers them: the run's calls, from just before its first to just after its last.
    before = _sql(real_ledger, "SELECT count(*) FROM calls WHERE session_id = :s AND seq < :q", s=sid, q=lo)[0][0]
    through = _sql(real_ledger, "SELECT count(*) FROM calls WHERE session_id = :s AND seq <= :q", s=sid, q=hi)[0][0]
    x = spec["spec"]["layer"][0]["encoding"]["x"]
    assert x["field"] == "at" and x["scale"]["domain"] == [before + 0.5, through + 0.5]
    assert lo <= data.seq.min() and data.seq.max() <= hi
    assert before < data["at"].min() and data["at"].max() <= through + 0.5  # a prose turn after the last call: N.5
    target = int(data.seq.min())
    at.session_state["timeline_chart"] = {"selection": {"mark_pick": [{"seq": target, "run_idx": run}]}}
    at.run()
    assert not at.exception
    assert at.session_state[f"focus_{sid}_{run}"] == target


def test_label_badge_and_no_default(real_ledger):
    sid = _most_halted_session(real_ledger)
    run = _most_halted_run(real_ledger, sid)
    at = app(PAGE, session=str(sid))
    assert at.radio(key=f"label_choice_{sid}_{run}").value is None
    assert any("not labelled yet" in t for t in markdown_texts(at))
    at.radio(key=f"label_choice_{sid}_{run}").set_value("normal")
    at.button[-1].click().run()
    assert not at.exception
    at = app(PAGE, session=str(sid))
    assert at.radio(key=f"label_choice_{sid}_{run}").value == "normal"
    assert any("labelled normal" in t for t in markdown_texts(at))


def test_past_the_last_halted_run_the_next_halted_session_opens(real_ledger):
    ranked = _sql(real_ledger, "SELECT session_id, sum(halts) FROM session_stats GROUP BY session_id "
                               "HAVING sum(halts) > 0 ORDER BY sum(halts) DESC, session_id DESC")
    assert len(ranked) >= 3
    sid, following = ranked[1][0], ranked[2][0]
    halted = _halted_runs(real_ledger, sid)
    at = app(PAGE, session=str(sid), run=str(halted[-1]))
    nxt = at.button(key="next_halted")
    assert not nxt.disabled and f"session #{following}" in nxt.help
    nxt.click().run()
    assert not at.exception
    assert at.query_params["session"] == str(following)
    assert at.header[0].value == f"Session #{following}"
    assert at.selectbox(key="run_pick").value == _halted_runs(real_ledger, following)[0]
    prev = at.button(key="prev_halted")
    if len(_halted_runs(real_ledger, following)) == 1:
        assert f"session #{sid}" in prev.help


def test_the_timeline_names_each_call_by_its_session_number(real_ledger):
    sid = _most_halted_session(real_ledger)
    run = _most_halted_run(real_ledger, sid)
    at = app(PAGE, session=str(sid), run=str(run))
    assert not at.exception
    (_, tl), = [c for c in charts(at) if "facet" in c[0]]
    # The n-th call of the session (ordered in SQL) is call #n in the timeline's tooltip.
    order = _sql(real_ledger, "SELECT seq, idx FROM calls WHERE session_id = :s ORDER BY seq, idx", s=sid)
    want = {(s, i): f"call #{k + 1}" for k, (s, i) in enumerate(order)}
    calls = tl[tl["call"] != ""]
    assert len(calls) and all(want[(int(s), int(i))] == c for s, i, c in zip(calls["seq"], calls["idx"], calls["call"],
                                                                             strict=True))
