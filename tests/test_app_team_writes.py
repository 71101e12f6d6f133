"""A signed-in viewer pressing Compare's "Save as policies" (issue 36, reproduction 3: it stored a
policy and its checks as a viewer): the write itself refuses and says why; a labeller's save is
stored. AppTest with sign-in on (the ID token's claims as `st.user`), a ledger filled by the real
ingest pipeline."""

from __future__ import annotations

import sqlalchemy as sa
from app_support import MAIN, TIMEOUT, ledger_env
from loopledger.detectors.policy import PolicySpec
from loopledger.ledger import schema as t
from loopledger.ledger import team
from loopledger.ledger.engine import make_engine
from replay_support import pipeline_ledger
from streamlit.testing.v1 import AppTest

from tests.test_app_team import AUTH

VIEWER, LABELLER = "vera@example.com", "lou@example.com"


def _compare_as(email: str) -> AppTest:
    at = AppTest.from_file(str(MAIN), default_timeout=TIMEOUT)
    at.secrets["auth"] = AUTH
    at.secrets["loopledger"] = {"allow": ["example.com"]}
    at.user = {"is_logged_in": True, "email": email, "email_verified": True, "sub": email}
    at.run()
    assert not at.exception, at.exception
    at = at.switch_page("views/compare.py").run()
    at.selectbox(key="cp_detector").set_value("ladder").run()
    at.selectbox(key="cp_param_ladder").set_value("halt_at").run()
    at.text_input(key="cp_range_ladder_halt_at").input("4..5").run()
    at.button(key="cp_run").click().run()
    assert not at.exception, at.exception
    return at


def _stored(url: str) -> tuple[set[str], int]:
    eng = make_engine(url, readonly=True)
    try:
        with eng.connect() as conn:
            return (set(conn.execute(sa.select(t.policies.c.id)).scalars()),
                    conn.execute(sa.select(sa.func.count()).select_from(t.checks)).scalar_one())
    finally:
        eng.dispose()


def test_a_viewer_saving_policies_on_compare_is_refused_and_a_labeller_is_not(tmp_path):
    url = pipeline_ledger(tmp_path / "ledger.sqlite")
    eng = make_engine(url)
    with eng.begin() as conn:
        team.set_member(conn, LABELLER, team.LABELLER)  # vera: the allow-list's default role, viewer
    eng.dispose()
    spec = PolicySpec("ladder", {"halt_at": 5})
    before = _stored(url)
    assert spec.id not in before[0]
    with ledger_env(url):
        at = _compare_as(VIEWER)
        at.multiselect(key="cp_save_sel").set_value([spec.label]).run()
        at.button(key="cp_save").click().run()
        assert not at.exception, at.exception
        said = " ".join(str(x.value) for x in at.text)
        assert f"Not saved: {VIEWER} is a viewer" in said, said
        assert not [s for s in at.success if "Stored" in str(s.value)]
        assert _stored(url) == before

        at = _compare_as(LABELLER)
        at.multiselect(key="cp_save_sel").set_value([spec.label]).run()
        at.button(key="cp_save").click().run()
        assert not at.exception, at.exception
        assert any("Stored 1 policy" in str(s.value) for s in at.success)
    after = _stored(url)
    assert spec.id in after[0] and after[1] > before[1]
