"""The guard leaderboard page (AppTest) on the hand-worked ledger of tests/score_support.py:
the numbers are the literal ones counted there, each links to its sessions, and each session
opens Replay at the policy's halt."""

from __future__ import annotations

import re
from urllib.parse import parse_qs, urlparse

import pytest
import sqlalchemy as sa
from app_support import app, charts, ledger_env, markdown_texts
from loopledger.ledger import schema as t
from loopledger.ledger.engine import make_engine
from score_support import CURRENCY, EXPECTED, INTERVALS, LADDER, LOOP_CALLS, WINDOW, build

PAGE = "views/leaderboard.py"
COUNTS = ("loops", "caught", "early", "missed", "normal", "false_halts")


@pytest.fixture(scope="module")
def ledger(tmp_path_factory):
    url, _ = build(tmp_path_factory.mktemp("leaderboard"))
    with ledger_env(url):
        yield url


def _frame(at, column: str):
    return next(d.value for d in at.dataframe if column in d.value.columns)


def _n(link: str) -> int:
    return int(re.search(r"n=(\d+)$", link)[1])


def _session_ids(url: str) -> dict[str, int]:
    eng = make_engine(url, readonly=True)
    with eng.connect() as conn:
        out = dict(conn.execute(sa.select(t.sessions.c.key, t.sessions.c.id)).all())
    eng.dispose()
    return out


def test_the_table_shows_the_hand_counted_numbers(ledger):
    at = app(PAGE)
    assert not at.exception, at.exception
    table = _frame(at, "false_halts")
    assert len(table) == 2
    got = {}
    for row in table.itertuples(index=False):
        pid = parse_qs(urlparse(row.loops).query)["policy"][0]
        # Scores are written for people ("0.67"; "—" when there is nothing to score), never None.
        got[pid] = (*[_n(getattr(row, c)) for c in COUNTS], row.precision, row.recall,
                    int(row.saved.split("/")[0]), f"{row[table.columns.get_loc('into loop (median)')]} "
                    f"({row[table.columns.get_loc('into loop (each catch)')]})")
    assert got == EXPECTED
    # Ranked: both catch 2, LADDER has no false halt.
    assert parse_qs(urlparse(table.iloc[0]["loops"]).query)["policy"] == [LADDER.id]
    assert {m.label: m.value for m in at.metric} | {} == {"Loop sessions": "3", "Normal sessions": "2",
                                                          "Unclear sessions": "1",
                                                          "Imported labels": "6", "Dashboard labels": "0"}
    ((spec, bars),) = [c for c in charts(at) if "part" in c[1].columns]
    assert dict(zip(bars[bars.policy == WINDOW.label].part, bars[bars.policy == WINDOW.label].sessions,
                    strict=True)) == {"caught": 2, "early": 1, "false halts": 1}
    assert all(not any(p in m for p in (WINDOW.label, LADDER.label)) for m in markdown_texts(at)), \
        "policy labels are shown as text, never as markdown"


def test_sorting_by_a_column(ledger):
    at = app(PAGE)
    at.selectbox(key="lb_sort").set_value("saved").run()
    assert not at.exception, at.exception
    assert list(_frame(at, "false_halts")["saved"]) == ["1/13 (8%)", "0/13 (0%)"]  # WINDOW, then LADDER


def test_the_table_shows_flagged_inside_calls_saved_and_lost_then_a_table_per_family(ledger):
    """score_support's hand count: WINDOW flags 2 of 3 loops inside, saves 1 of the 13 calls spent
    inside loops, loses none of the normal sessions' 10; LADDER 1 of 3, 0 of 13, 0 of 10. Every
    session is tau-bench's: one family table, harnesses."""
    at = app(PAGE)
    assert not at.exception, at.exception
    table = _frame(at, "false_halts")
    cols = list(table.columns)
    assert cols.index("flagged") < cols.index("saved") < cols.index("lost") < cols.index("tokens saved")
    got = {parse_qs(urlparse(r.loops).query)["policy"][0]: (r.flagged, r.saved, r.lost)
           for r in table.itertuples(index=False)}
    assert LOOP_CALLS == 13 and CURRENCY == {WINDOW.id: (0, 2), LADDER.id: (0, 1)}
    assert got == {WINDOW.id: ("2/3", "1/13 (8%)", "0/10 (0%)"), LADDER.id: ("1/3", "0/13 (0%)", "0/10 (0%)")}
    assert any(t.value == "harnesses" for t in at.text) and not any(t.value == "coding agents" for t in at.text)
    family = _frame(at, "calls lost")
    ladder = family[family.policy == LADDER.label].iloc[0]
    # Wilson: 2/3 → [0.21, 0.94], 1/3 → [0.06, 0.79], 0/2 → [0.00, 0.66]; no call saved or lost: the point 0
    assert list(ladder)[1:] == ["2/3 [0.21, 0.94]", "1/3 [0.06, 0.79]", "0/13 (0%) [0.00, 0.00]", "0/2 [0.00, 0.66]",
                                "0/10 (0%) [0.00, 0.00]", "0/2 [0.00, 0.66]"]


def test_a_number_lists_its_sessions_and_each_opens_replay_at_the_halt(ledger):
    keys = _session_ids(ledger)
    at = app(PAGE, policy=WINDOW.id, cell="early", n="1")
    assert not at.exception, at.exception
    rows = _frame(at, "halt at call")
    assert list(rows["key"]) == ["task-2.trial-0"] and list(rows["halt at call"]) == ["call #4"]
    link = parse_qs(urlparse(rows.iloc[0]["replay"]).query)
    # task-2: system prompt is not an event; user turn = seq 0, then call/answer pairs: call 4 is seq 7.
    assert link == {"session": [str(keys["task-2.trial-0"])], "run": ["0"], "policy": [WINDOW.id], "step": ["7"]}
    at = app(PAGE, policy=LADDER.id, cell="caught", n="2")
    assert not at.exception, at.exception
    caught = _frame(at, "halt at call")
    assert sorted(zip(caught["key"], caught["halt at call"], caught["calls into loop"], strict=True)) == [
        ("task-1.trial-0", "call #6", "4"), ("task-2.trial-0", "call #8", "4")]
    at = app(PAGE, policy=LADDER.id, cell="loops", n="3")
    assert not at.exception, at.exception
    loops = _frame(at, "outcome")
    assert sorted(loops["outcome"]) == ["caught", "caught", "missed"]


def test_two_policies_show_where_they_disagree(ledger):
    at = app(PAGE)
    at.selectbox(key="lb_a").set_value(WINDOW.id).run()
    at.selectbox(key="lb_b").set_value(LADDER.id).run()
    assert not at.exception, at.exception
    rows = _frame(at, "B halts at")
    got = sorted(zip(rows["key"], rows["A"], rows["B"], strict=True))
    assert got == [("task-2.trial-0", "halted early", "caught"), ("task-3.trial-0", "caught", "missed"),
                   ("task-5.trial-0", "false halt", "clean")]


def test_labelling_from_a_list_moves_the_numbers(tmp_path):
    url, _ = build(tmp_path)
    keys = _session_ids(url)
    with ledger_env(url):
        at = app(PAGE, policy=WINDOW.id, cell="normal", n="2")
        assert not at.exception, at.exception
        sid = keys["task-5.trial-0"]
        # Inside a form the values are sent with the submit, not one by one.
        at.selectbox(key="lb_cell_session").set_value(sid)
        at.radio(key="lb_cell_label").set_value("loop")
        at.text_input(key="lb_cell_loop_calls").input("4-6")
        at.text_input(key="lb_cell_reason").input("the tests never pass")
        at.button(key="FormSubmitter:label_form_lb_cell-Save label").click().run()
        assert not at.exception, at.exception
        assert any("Saved" in s.value for s in at.success)
        at = app(PAGE)
        assert not at.exception, at.exception
        table = _frame(at, "false_halts")
        window = next(r for r in table.itertuples(index=False) if WINDOW.id in r.loops)
        # task-5 is now a loop at 4-6 and WINDOW halted it at call 6: 3 caught of 4 loops, no false halt.
        assert (_n(window.loops), _n(window.caught), _n(window.false_halts)) == (4, 3, 0)
        who = _frame(at, "labelled_by")
        assert sorted(who["labelled_by"]) == ["dashboard"] + ["imported"] * 5


def test_no_labels_says_how_to_get_some(tmp_path):
    from app_support import make_ledger

    url, _ = make_ledger(tmp_path / "l.sqlite", sessions=5, calls=200)
    with ledger_env(url):
        at = app(PAGE)
        assert not at.exception, at.exception
        assert any("loopledger labels import" in i.value for i in at.info)


def test_a_bad_link_is_a_warning(ledger):
    at = app(PAGE, policy="nope", cell="caught")
    assert not at.exception, at.exception
    assert at.warning


def test_labelling_from_the_sessions_list(tmp_path):
    url, _ = build(tmp_path)
    keys = _session_ids(url)
    with ledger_env(url):
        at = app()  # the Sessions page
        assert not at.exception, at.exception
        sid = keys["task-6.trial-0"]
        at.selectbox(key="sessions_session").set_value(sid)
        at.radio(key="sessions_label").set_value("loop")
        at.text_input(key="sessions_loop_calls").input("1-4")
        at.button(key="FormSubmitter:label_form_sessions-Save label").click().run()
        assert not at.exception, at.exception
        assert any(s.value == f"Saved: session #{sid} is loop." for s in at.success)
    eng = make_engine(url, readonly=True)
    with eng.connect() as conn:
        row = conn.execute(sa.select(t.labels.c.label, t.labels.c.loop_first, t.labels.c.loop_last,
                                     t.labels.c.labelled_by, t.labels.c.run_idx)
                           .where(t.labels.c.session_id == sid)).one()
    eng.dispose()
    assert tuple(row) == ("loop", 1, 4, "dashboard", t.SESSION_LEVEL)


def test_the_label_form_saves_nothing_until_a_label_is_chosen(tmp_path):
    url, _ = build(tmp_path)
    with ledger_env(url):
        at = app(PAGE, policy=WINDOW.id, cell="normal", n="2")
        assert not at.exception, at.exception
        assert at.radio(key="lb_cell_label").value is None
        at.button(key="FormSubmitter:label_form_lb_cell-Save label").click().run()
        assert not at.exception, at.exception
        assert any("choose loop, normal or unclear" in e.value for e in at.error)
    with ledger_env(url):
        at = app(PAGE)
        assert not at.exception, at.exception
        assert {m.label: m.value for m in at.metric}["Dashboard labels"] == "0"


def test_enforce_this_setting_from_the_leaderboard(tmp_path):
    from loopledger.live import enforce

    url, _ = build(tmp_path)
    with ledger_env(url):
        at = app(PAGE)
        # No policy preselected: nothing is enforced by one click.
        assert at.selectbox(key="lb_enforce_sel").value is None and at.button(key="lb_enforce_go").disabled
        # Best first, each saying what it caught and halts, in sessions.
        assert at.selectbox(key="lb_enforce_sel").options[0].startswith(LADDER.label)
        assert all(" loop sessions, " in o and " sessions" in o for o in at.selectbox(key="lb_enforce_sel").options)
        at.selectbox(key="lb_enforce_sel").set_value(WINDOW.id).run()
        # Added to what is enforced now by default; replacing it is the second, deliberate choice.
        assert at.button(key="lb_enforce_go").label.startswith("Add it to the enforced set: caught 2 of 3 loop sessions")
        assert any(t.value.startswith("Enforcing adds ") and " to the default set (" in t.value for t in at.text)
        at.radio(key="lb_enforce_how").set_value("replace").run()
        assert at.button(key="lb_enforce_go").label.startswith("Replace the enforced set with it: caught 2 of 3 loop")
        assert any(t.value.startswith("Enforcing replaces the default set (") for t in at.text)
        at.button(key="lb_enforce_go").click().run()
        assert not at.exception, at.exception
        assert any("Enforced" in s.value for s in at.success)
    eng = make_engine(url)
    with eng.connect() as conn:
        assert enforce.enforced(conn) == WINDOW
        assert enforce.history(conn)[0]["origin"] == "leaderboard"
    eng.dispose()


def test_precision_and_recall_show_their_hand_computed_intervals(ledger):
    at = app(PAGE)
    assert not at.exception, at.exception
    table = _frame(at, "false_halts")
    got = {parse_qs(urlparse(r.loops).query)["policy"][0]: (r[table.columns.get_loc("precision 95% CI")],
                                                             r[table.columns.get_loc("recall 95% CI")])
           for r in table.itertuples(index=False)}
    assert got == INTERVALS  # worked out in score_support: 2/4, 2/2 and 2/3
    # every label is in: nothing splits the top policies
    assert any("No unlabelled session splits" in c.value for c in at.caption)


def _unlabel(url: str, keys: list[str]) -> None:
    eng = make_engine(url)
    with eng.begin() as conn:
        ids = [i for k, i in conn.execute(sa.select(t.sessions.c.key, t.sessions.c.id)).all() if k in keys]
        conn.execute(sa.delete(t.labels).where(t.labels.c.session_id.in_(ids)))
    eng.dispose()


def test_label_next_lists_the_unlabelled_sessions_the_top_policies_split_on(tmp_path):
    # From score_support's table: WINDOW halts task-3 and task-5, LADDER neither (splits);
    # task-4 neither halts (no split). With those three unlabelled, task-3 and task-5 are listed.
    url, _ = build(tmp_path)
    keys = _session_ids(url)
    _unlabel(url, ["task-3.trial-0", "task-4.trial-0", "task-5.trial-0"])
    with ledger_env(url):
        at = app(PAGE)
        assert not at.exception, at.exception
        nxt = _frame(at, "not halted by")
        assert list(nxt["key"]) == ["task-3.trial-0", "task-5.trial-0"]
        assert set(nxt["halted by"]) == {WINDOW.label} and set(nxt["not halted by"]) == {LADDER.label}
        # one label from the list: task-5 is normal → WINDOW gains a false halt, LADDER a clean session
        at.selectbox(key="lb_next_session").set_value(keys["task-5.trial-0"])
        at.radio(key="lb_next_label").set_value("normal")
        at.button(key="FormSubmitter:label_form_lb_next-Save label").click().run()
        assert not at.exception, at.exception
        assert any("Saved" in s.value for s in at.success)
        at = app(PAGE)
        assert not at.exception, at.exception
        assert list(_frame(at, "not halted by")["key"]) == ["task-3.trial-0"]
        table = _frame(at, "false_halts")
        window = next(r for r in table.itertuples(index=False) if WINDOW.id in r.loops)
        # normal sessions now: task-5 only (task-4 is still unlabelled), and WINDOW halted it
        assert (_n(window.normal), _n(window.false_halts)) == (1, 1)
