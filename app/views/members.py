"""Members (with sign-in on): who may open this ledger and with which role. An owner adds people,
changes roles and removes them; everyone else sees the list. The write itself checks that the
signed-in user is an owner (loopledger.ledger.team), so the form refuses anyone else.

Tokens for forwarding are made on the team ledger's machine (`loopledger tokens create EMAIL`):
a token is shown once, and a page is no place to show one.
"""

from __future__ import annotations

import pandas as pd
import streamlit as st
from loopledger.app import access, data, safe, signin, when
from loopledger.ledger import team

st.title("Members")
st.caption("viewer: browse, investigate, compare · labeller: also labels · owner: also enforces and manages members")
rows = data.fresh_team("members")
if rows:
    table = pd.DataFrame(rows)
    table["added_at"] = when.moments(pd.to_datetime(table["added_at"], unit="s", utc=True))
    safe.table(table.rename(columns={"added_at": "added", "added_by": "by", "tokens": "live tokens"}),
               key="members_table")
else:
    st.caption("No members yet: the allow-list alone admits people, each as the default role.")

st.subheader("Add a member or change a role")
with st.form("member_form"):
    c1, c2 = st.columns([3, 1])
    email = c1.text_input("Email", key="member_email")
    role = c2.selectbox("Role", (*team.ROLES, "remove"), key="member_role")
    # The team names its issuer: a member is keyed on the subject (`sub`) it gives them (the
    # page that refuses someone shows theirs).
    subject = st.text_input("Subject (sub)", key="member_subject",
                            help=f"The ID token's sub for this person at {signin.issuer()}") if signin.issuer() else ""
    if st.form_submit_button("Save"):
        try:
            data.save_member(email, None if role == "remove" else role, subject)  # an owner's (team.Forbidden)
            st.success("Saved.")
        except (team.TeamError, team.Forbidden) as exc:
            safe.text(f"Not saved: {exc}")
st.caption(f"Your role: {access.role()}")
