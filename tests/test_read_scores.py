"""The leaderboard's read model (read.judged → loopledger.analysis.scoring) on SQLite and PostgreSQL: the
hand-counted numbers of score_support, and halt positions counted in SQL equal to those a replay
of the stored events gives (scoring.call_position)."""

from __future__ import annotations

from loopledger.analysis import scoring
from loopledger.ledger import read, store
from loopledger.ledger.engine import make_engine
from loopledger.replay import replay, tally
from score_support import CURRENCY, EXPECTED, LADDER, LOOP_CALLS, NORMAL_CALLS, WINDOW, build


def test_judged_rows_score_as_counted_by_hand(db_url, tmp_path):
    url, _ = build(tmp_path, url=db_url)
    eng = make_engine(url, readonly=True)
    try:
        with eng.connect() as conn:
            stored = read.judged_rows(read.judged(conn))
            assert read.label_totals(conn) == {"loop": 3, "normal": 2, "unclear": 1, "imported": 6, "dashboard": 0}
            replayed = []
            for lab in read.scored_labels(conn).itertuples(index=False):
                events = store.load_events(conn, int(lab.session_id))
                first = None if lab.label != scoring.LOOP else int(lab.loop_first)
                last = None if lab.label != scoring.LOOP else int(lab.loop_last)
                for spec in (WINDOW, LADDER):
                    steps = list(replay(events, spec))
                    replayed.append(scoring.judge_replay(spec.id, int(lab.session_id), lab.label, first, last,
                                                         events, steps, tally(steps).saved))
            assert len(read.judged(conn, (WINDOW.id,))) == 5
    finally:
        eng.dispose()
    assert sorted(stored, key=lambda j: (j.policy_id, j.session_id)) == \
        sorted(replayed, key=lambda j: (j.policy_id, j.session_id))
    for s in scoring.score(stored, [(WINDOW.id, "w"), (LADDER.id, "l")]):
        r = s.row()
        got = (*[r[c] for c in scoring.COUNT_COLUMNS], scoring.ratio(s.precision), scoring.ratio(s.recall),
               s.saved, scoring.into_loop_text(s.into_loop))
        assert got == EXPECTED[s.policy_id]
        # calls saved inside loops of the loops' calls, calls lost of the normal sessions' calls
        assert (s.loop_calls, s.normal_calls, s.lost, s.flagged) == (LOOP_CALLS, NORMAL_CALLS, *CURRENCY[s.policy_id])
