"""Enforcing from the dashboard and seeing what was enforced (AppTest on real ledgers; the hook is
the real `loopledger hook claude-code` process)."""

from __future__ import annotations

import subprocess

import pytest
from app_support import app, ledger_env
from loopledger import worker
from loopledger.app import enforce_form
from loopledger.detectors.policy import PolicySpec
from loopledger.ledger import migrate, schema
from loopledger.ledger.engine import make_engine
from loopledger.live import enforce
from replay_support import open_page
from sqlalchemy import select

from tests.live_support import BIN, SESSION, npm_test_loop, run_hook

LADDER = PolicySpec("ladder")


@pytest.fixture
def live_ledger(tmp_path):
    """A session guarded live by ladder (graded warn → block → halt), its transcript ingested after."""
    url = f"sqlite:///{tmp_path / 'ledger.sqlite'}"
    eng = make_engine(url)
    migrate.upgrade(eng)
    with eng.begin() as conn:  # ladder is no longer the live default (the scored set is): choose it
        enforce.set_enforced(conn, LADDER, origin="cli")
    loop = npm_test_loop(tmp_path, calls=5)
    refused: set[str] = set()
    for ev in loop.events:
        if ev["hook_event_name"] == "PostToolUseFailure" and ev["tool_use_id"] in refused:
            continue
        if run_hook(ev, url).stdout.strip():
            refused.add(ev.get("tool_use_id"))
    worker.ingest_paths(eng, [loop.transcript], worker.Options(specs=[LADDER]))
    with eng.connect() as conn:
        sid = conn.execute(select(schema.sessions.c.id).where(schema.sessions.c.key == SESSION)).scalar_one()
    eng.dispose()
    with ledger_env(url):
        yield url, sid, loop


def test_session_page_shows_enforced_beside_replayed(live_ledger):
    url, sid, loop = live_ledger
    at = app("views/session.py", session=str(sid))
    assert not at.exception, at.exception
    assert "Enforced on the live agent" in [s.value for s in at.subheader]
    (table,) = [d.value for d in at.dataframe if "enforced" in d.value.columns]
    table = table.set_index("call")
    assert list(table.loc[loop.call_ids, "enforced"]) == ["allow", "warn", "block", "halt", "after_halt"]
    assert list(table.loc[loop.call_ids, "replayed"]) == list(table.loc[loop.call_ids, "enforced"])
    assert set(table["by"]) == {"claude-code"} and table["when"].notna().all()
    # The call's transcript step: where the Session page's transcript shows it.
    assert table.loc[loop.call_ids, "step"].is_monotonic_increasing


def test_a_new_decision_shows_on_the_next_refresh(live_ledger):
    url, sid, loop = live_ledger
    at = app("views/session.py", session=str(sid))
    (before,) = [d.value for d in at.dataframe if "enforced" in d.value.columns]
    prompt = next(ev for ev in loop.events if ev["hook_event_name"] == "UserPromptSubmit")
    pre = next(ev for ev in loop.events if ev["hook_event_name"] == "PreToolUse")
    run_hook({**prompt, "prompt": "again"}, url)
    run_hook({**pre, "tool_use_id": "toolu_new"}, url)
    at.run()  # what the fragment's 1 s timer does
    (after,) = [d.value for d in at.dataframe if "enforced" in d.value.columns]
    assert len(after) == len(before) + 1 and after.iloc[0]["call"] == "toolu_new"
    assert after.iloc[0]["enforced"] == "allow"


def _halted_sessions(url: str, spec: PolicySpec) -> tuple[int, int]:
    """Independently of the page's sweep: replay every session's events and count the sessions and
    those with a halt (the unit the leaderboard and Compare count)."""
    from loopledger.ledger.store import load_events, session_ids
    from loopledger.replay import replay

    eng = make_engine(url, readonly=True)
    halted = n = 0
    with eng.connect() as conn:
        for sid in session_ids(conn):
            steps = list(replay(load_events(conn, sid), spec))
            n += 1
            halted += any(c.verdict == "halt" for s in steps for c in s.checks)
    eng.dispose()
    return halted, n


def test_enforce_this_setting_on_compare(tmp_path):
    url = f"sqlite:///{tmp_path / 'ledger.sqlite'}"
    eng = make_engine(url)
    migrate.upgrade(eng)
    worker.ingest_paths(eng, [npm_test_loop(tmp_path, calls=6).transcript], worker.Options())
    with ledger_env(url):
        at = open_page("views/compare.py")
        at.selectbox(key="cp_detector").set_value("ladder").run()
        at.selectbox(key="cp_param_ladder").set_value("halt_at").run()
        at.text_input(key="cp_range_ladder_halt_at").input("4..6").run()
        at.button(key="cp_run").click().run()
        assert not at.exception, at.exception
        # Nothing is preselected: the button cannot enforce until a person picks a row.
        assert at.selectbox(key="cp_enforce_sel").value is None and at.button(key="cp_enforce_go").disabled
        options = at.selectbox(key="cp_enforce_sel").options
        # The detector's default first (nothing is labelled here), each option saying what it does.
        assert options[0].startswith("halt_at=4 — ")
        choice = next(i for i, lb in enumerate(options) if lb.startswith("halt_at=5 — "))
        at.selectbox(key="cp_enforce_sel").select_index(choice).run()
        # Before it is pressed, the page says what it will do on the swept sessions: by default it ADDS
        # the setting to what is enforced now (one setting never silently drops the default set).
        halted, n = _halted_sessions(url, PolicySpec.parse("ladder:halt_at=5"))
        assert at.radio(key="cp_enforce_how").value == enforce_form.ADD
        assert at.button(key="cp_enforce_go").label.startswith(
            f"Add it to the enforced set: halts {halted} of {n} swept sessions")
        assert any(t.value.startswith("Enforcing adds halt_at=5 to the default set (") for t in at.text)
        at.button(key="cp_enforce_go").click().run()
        assert not at.exception, at.exception
        assert at.success and "Enforced" in at.success[0].value
        # Right after the press (no reload): "Enforced now" and the sentence above the button read the new set.
        now = [t.value for t in at.text if t.value.startswith("Enforced now: ")]
        assert len(now) == 1 and "ladder" in now[0] and "halt_at=5" in now[0] and "(the default)" not in now[0]
        assert any(t.value.startswith("halt_at=5 is enforced already (the enforced set: ") for t in at.text), \
            [t.value for t in at.text]
        assert at.button(key="cp_enforce_go").disabled
        with eng.connect() as conn:
            assert enforce.enforced_specs(conn) == (*enforce.LIVE_DEFAULT, PolicySpec.parse("ladder:halt_at=5"))
        # Replacing is the deliberate second choice: the set then holds this setting alone.
        at.radio(key="cp_enforce_how").set_value(enforce_form.REPLACE).run()
        assert at.button(key="cp_enforce_go").label.startswith("Replace the enforced set with it: ")
        assert any(t.value.startswith("Enforcing replaces the enforced set: ") and "with halt_at=5 alone" in t.value
                   for t in at.text)
        at.button(key="cp_enforce_go").click().run()
        assert not at.exception, at.exception
        now = [t.value for t in at.text if t.value.startswith("Enforced now: ")]
        assert len(now) == 1 and "+" not in now[0] and "halt_at=5" in now[0], now
    with eng.connect() as conn:
        assert enforce.enforced(conn) == PolicySpec.parse("ladder:halt_at=5")
        assert enforce.history(conn)[0]["origin"] == "compare"
    eng.dispose()
    shown = subprocess.run([str(BIN), "policies", "--db", url], capture_output=True, text=True, check=True).stdout
    line = next(ln for ln in shown.splitlines() if "ENFORCED" in ln)
    assert "ladder" in line and PolicySpec.parse("ladder:halt_at=5").id[:12] in line
