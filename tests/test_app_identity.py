"""Members matched on an identity the provider vouches for (issue 36, reproduction 4): the
dashboard behind sign-in (AppTest with the ID token's claims as `st.user`, a real SQLite ledger).

Without a named issuer, an email counts only when the token says it is verified: a provider that
sends no `email_verified` (multi-tenant Microsoft Entra ID) let anyone claim the owner's address.
With `[loopledger] issuer`, only that issuer's accounts come in and members are keyed on
(`iss`, `sub`): an account of the same issuer claiming the owner's email is not the owner."""

from __future__ import annotations

import pytest
from app_support import MAIN, TIMEOUT, ledger_env, make_ledger, metrics
from loopledger.ledger import team
from loopledger.ledger.engine import make_engine
from streamlit.testing.v1 import AppTest

from tests.test_app_team import AUTH

OWNER = "olga@example.com"
ISS = "https://login.microsoftonline.com/0a1b2c3d-tenant/v2.0"
REFUSED = "This account may not open this ledger."


@pytest.fixture(scope="module")
def ledger(tmp_path_factory):
    url, _ = make_ledger(tmp_path_factory.mktemp("identity") / "ledger.sqlite", sessions=4, calls=200)
    engine = make_engine(url)
    with engine.begin() as conn:
        team.set_member(conn, OWNER, team.OWNER)  # keyed on the email (no subject)
    engine.dispose()
    with ledger_env(url):
        yield url


def _signed_in(claims: dict, issuer: str | None = None) -> AppTest:
    at = AppTest.from_file(str(MAIN), default_timeout=TIMEOUT)
    at.secrets["auth"] = AUTH
    at.secrets["loopledger"] = {"allow": ["example.com"], **({"issuer": issuer} if issuer else {})}
    at.user = {"is_logged_in": True, **claims}
    at.run()
    assert not at.exception, at.exception
    return at


def _side(at: AppTest) -> str:
    return " ".join(str(t.value) for t in at.sidebar.text)


def _refused(at: AppTest) -> bool:
    return any(REFUSED in str(e.value) for e in at.error) and not at.metric


def test_a_token_without_email_verified_does_not_make_anyone_the_owner(ledger):
    """The reproduction: an account whose provider sends no email_verified, claiming the
    owner's address, came in as the owner."""
    at = _signed_in({"email": OWNER, "iss": "https://login.microsoftonline.com/attacker-tenant/v2.0",
                     "sub": "sub-attacker"})
    assert _refused(at)
    said = " ".join(str(t.value) for t in at.text)
    assert "email_verified" in said and "issuer" in said  # why, and the remedy


def test_an_unverified_email_is_refused_and_a_verified_one_is_the_member(ledger):
    assert _refused(_signed_in({"email": OWNER, "email_verified": False, "sub": "x"}))
    assert _refused(_signed_in({"email": OWNER, "email_verified": "false", "sub": "x"}))
    at = _signed_in({"email": OWNER, "email_verified": True, "sub": "x"})
    assert not _refused(at) and "Sessions" in metrics(at)
    assert f"Signed in as {OWNER}" in _side(at) and "Role: owner" in _side(at)


def test_with_the_team_issuer_members_are_their_iss_and_sub(ledger):
    engine = make_engine(ledger)
    with engine.begin() as conn:
        team.set_member(conn, "kim@example.com", team.OWNER, issuer=ISS, subject="sub-kim-0001")
    engine.dispose()
    # Kim, keyed on her subject: the owner, whatever her token says of her email.
    at = _signed_in({"email": "kim@example.com", "iss": ISS, "sub": "sub-kim-0001"}, ISS)
    assert "Role: owner" in _side(at)
    # Another account of the same issuer with kim's (or the email-keyed owner's) address and no
    # verified flag: the allow-list's default role, never the owner.
    for email in ("kim@example.com", OWNER):
        at = _signed_in({"email": email, "iss": ISS, "sub": "sub-someone-else"}, ISS)
        assert "Role: viewer" in _side(at), _side(at)
    # Another issuer (another tenant): refused, even with a verified owner's email.
    at = _signed_in({"email": OWNER, "email_verified": True, "iss": ISS.replace("0a1b2c3d", "ffff"),
                     "sub": "sub-kim-0001"}, ISS)
    assert _refused(at)


@pytest.mark.parametrize(("claims", "issuer", "expected"), [
    ({"email": "A@Example.com", "email_verified": True}, None, ("a@example.com", True)),
    ({"email": "a@example.com", "email_verified": "true"}, None, ("a@example.com", True)),
    ({"email": "a@example.com"}, None, None),
    ({"email": "a@example.com", "email_verified": False}, None, None),
    ({"email": "a@example.com", "email_verified": 1}, None, None),  # a 1 is not "true"
    ({"email": "a@example.com", "iss": ISS + "/", "sub": "s1"}, ISS,
     ("a@example.com", False, ISS, "s1")),
    ({"email": "a@example.com", "iss": ISS}, ISS, None),  # no sub
    ({"email": "a@example.com", "email_verified": True, "iss": "https://evil.example", "sub": "s1"}, ISS, None),
])
def test_identify(claims, issuer, expected):
    from loopledger.app import signin

    ident, why = signin.identify(claims, issuer)
    assert ident == (signin.Identity(*expected) if expected else None) and (why == "") == (expected is not None)


def test_an_owner_adds_a_member_by_subject_on_the_members_page(ledger):
    """With the team's issuer named, the Members page takes the subject the refused page showed."""
    engine = make_engine(ledger)
    with engine.begin() as conn:
        team.set_member(conn, "kim@example.com", team.OWNER, issuer=ISS, subject="sub-kim-0001")
    engine.dispose()
    lee = {"email": "lee@example.com", "iss": ISS, "sub": "sub-lee-0002"}
    at = _signed_in(lee, ISS)
    assert "Role: viewer" in _side(at)  # the allow-list's default role until an owner adds her
    at = _signed_in({"email": "kim@example.com", "iss": ISS, "sub": "sub-kim-0001"}, ISS)
    at = at.switch_page("views/members.py").run()
    assert not at.exception, at.exception
    at.text_input(key="member_email").input("lee@example.com")
    at.selectbox(key="member_role").set_value(team.LABELLER)
    at.text_input(key="member_subject").input("sub-lee-0002")
    next(b for b in at.button if b.label == "Save").click().run()
    assert not at.exception, at.exception
    assert any("Saved." in str(s.value) for s in at.success)
    assert "Role: labeller" in _side(_signed_in(lee, ISS))
    # Her address on another account of the issuer is not her.
    assert "Role: viewer" in _side(_signed_in(dict(lee, sub="sub-not-lee"), ISS))
