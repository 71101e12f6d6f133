"""Whether sign-in is on, who is signed in, and who acts (no ledger access: app/data.py and
app/access.py build on it).

Sign-in is on when the secrets (`.streamlit/secrets.toml`, or `loopledger dashboard --secrets
FILE`) have an `[auth]` section: Streamlit's own `st.login`, OpenID Connect through Authlib.
Its `[loopledger]` section says who may come in and with which role until an owner gives one:

```toml
[loopledger]
allow = ["lead@example.com", "example.com"]   # an email, or a domain (all its addresses)
default_role = "viewer"                       # a signed-in user who is not a member
```
"""

from __future__ import annotations

from typing import Any

import streamlit as st
from loopledger.ledger import team

SECTION = "loopledger"


def configured() -> bool:
    """Whether sign-in is configured (an [auth] section in the secrets)."""
    try:
        return "auth" in st.secrets
    except (FileNotFoundError, OSError):  # no secrets file at all: Streamlit's StreamlitSecretNotFoundError
        return False


def _settings() -> dict[str, Any]:
    try:
        raw = st.secrets.get(SECTION, {})
        return dict(raw) if hasattr(raw, "keys") else {}
    except (FileNotFoundError, OSError):
        return {}


def allow_list() -> tuple[str, ...]:
    allow = _settings().get("allow", ())
    return tuple(str(a).strip().lower() for a in (allow if isinstance(allow, list | tuple) else [allow]) if str(a).strip())


def default_role() -> str:
    role = str(_settings().get("default_role", team.VIEWER))
    return role if role in team.ROLES else team.VIEWER


def admitted(email: str, allow: tuple[str, ...], members: set[str]) -> bool:
    """An email the allow-list names, one of a domain it names (`example.com` or `@example.com`),
    or a member's (pure)."""
    email = email.strip().lower()
    domain = email.rpartition("@")[2]
    return bool(domain) and (email in members or email in allow or domain in allow or f"@{domain}" in allow)


def email() -> str | None:
    """The signed-in user's email as the provider gave it, lower case (None: not signed in, none given)."""
    value = st.user.get("email") if st.user.get("is_logged_in") else None
    return value.strip().lower() if isinstance(value, str) and "@" in value else None


def actor() -> team.Actor:
    """Who acts in this run: the signed-in user (their role read from the ledger when they act),
    else the local user of a dashboard without sign-in."""
    if not configured():
        return team.local_actor()
    return team.Actor(email() or "", signed_in=True, default_role=default_role())
