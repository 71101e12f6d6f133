"""Who is looking, and what they may do: the dashboard's sign-in, called once per run by
app/nav.py before any page draws.

Without an `[auth]` section in the secrets (`.streamlit/secrets.toml`, or `loopledger dashboard
--secrets FILE`), nothing here shows or changes anything: the dashboard is the single user's,
bound to loopback, and every action is theirs (loopledger.ledger.team.local_actor).

With one, every page needs a user signed in through Streamlit's own `st.login` (OpenID Connect,
Authlib) whose identity the provider vouches for (app/signin.py `identify`: a verified email, or
the team's named issuer) and who is a member in the ledger on that identity (`loopledger members
add`, the Members page) or whom the allow-list admits — `[loopledger] allow`, emails and domains.
The signed-in user and their role show in the sidebar of every page, with "Sign out". What they
may do is decided by their role where each write happens (loopledger.ledger.team.require, in the
transaction of every dashboard write: labels, saved policies, the enforced setting, members),
not here: a page that shows a button shows it to everyone; the write refuses.

(The settings are read by app/signin.py.)
"""

from __future__ import annotations

import streamlit as st
from loopledger.app import data, signin


def _is_member(actor) -> bool:
    try:
        return data.fresh_team("member_role", actor) is not None
    except Exception:  # noqa: BLE001 (a ledger the page will say it cannot read: the allow-list alone)
        return False


def role() -> str:
    try:
        return data.fresh_team("role_of", signin.actor())
    except Exception:  # noqa: BLE001
        return signin.default_role()


def gate() -> None:
    """Stop the run unless sign-in is off or an admitted user is signed in; then show who they
    are and the sign-out button in the sidebar."""
    if not signin.configured():
        return
    if not st.user.get("is_logged_in"):
        st.title("LoopLedger")
        st.write("This ledger holds the team's agent sessions: sign in to see it.")
        st.button("Sign in", on_click=st.login, type="primary", key="ll_sign_in")
        st.stop()
    ident, why = signin.identity()
    # A member on a verified identity; or anyone the allow-list names whose email the provider
    # verified (or who comes from the team's named issuer), as the default role.
    ok = ident is not None and (_is_member(ident.actor(signin.default_role())) or (
        ident.email is not None and (ident.verified or ident.issuer is not None)
        and signin.admitted(ident.email, signin.allow_list(), set())))
    if not ok:
        st.title("LoopLedger")
        st.error("This account may not open this ledger.")
        # Provider-given text: plain, never markdown.
        st.text(f"Signed in as {st.user.get('email') or st.user.get('name') or 'an account without an email'}"
                f"{f' ({why})' if why else ''}. Ask an owner to add you (`loopledger members add EMAIL`"
                f"{f' --issuer {ident.issuer} --subject {ident.subject}' if ident is not None and ident.subject else ''}"
                "), or sign out and use another account.")
        st.button("Sign out", on_click=st.logout, key="ll_sign_out_refused")
        st.stop()
    with st.sidebar:
        st.text(f"Signed in as {ident.email or ident.subject}\nRole: {role()}")
        st.button("Sign out", on_click=st.logout, key="ll_sign_out")


def member_choice() -> str:
    """The Sessions page's member filter: a select box once the ledger holds forwarded sessions
    (none: nothing drawn, no filter); "" means every member."""
    emails = data.q("session_members")
    if not emails:
        return ""
    return st.sidebar.selectbox("Member", ("", *emails), key="f_member", format_func=lambda m: m or "every member",
                                help="Sessions forwarded by this member's guard (docs/team.md).")
