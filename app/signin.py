"""Whether sign-in is on, who is signed in, and who acts (no ledger access: app/data.py and
app/access.py build on it).

Sign-in is on when the secrets (`.streamlit/secrets.toml`, or `loopledger dashboard --secrets
FILE`) have an `[auth]` section: Streamlit's own `st.login`, OpenID Connect through Authlib.
Its `[loopledger]` section says who may come in and with which role until an owner gives one:

```toml
[loopledger]
allow = ["lead@example.com", "example.com"]   # an email, or a domain (all its addresses)
default_role = "viewer"                       # a signed-in user who is not a member
issuer = "https://login.microsoftonline.com/TENANT/v2.0"   # optional: see below
```

Who someone is must be something the provider vouches for (`identify`): without `issuer`, an
email the ID token says is verified (`email_verified: true`) — a token that says nothing of it
is refused, since some providers (multi-tenant Microsoft Entra ID) let any account set any
address. With `issuer`, only that issuer's accounts come in, and members are matched on the ID
token's (`iss`, `sub`) (`loopledger members add EMAIL --issuer ISS --subject SUB`); the
allow-list then admits that issuer's email claims, as the default role.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
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


def issuer() -> str | None:
    """The team's issuer (`[loopledger] issuer`), or None: emails must then be verified."""
    value = str(_settings().get("issuer", "") or "").strip()
    return value or None


def admitted(email: str, allow: tuple[str, ...], members: set[str]) -> bool:
    """An email the allow-list names, one of a domain it names (`example.com` or `@example.com`),
    or a member's (pure)."""
    email = email.strip().lower()
    domain = email.rpartition("@")[2]
    return bool(domain) and (email in members or email in allow or domain in allow or f"@{domain}" in allow)


@dataclass(frozen=True)
class Identity:
    """Who signed in, as far as the provider vouches: `email` (lower case; None: none given),
    whether it is verified, and the token's `iss` / `sub` when the team names its issuer."""

    email: str | None
    verified: bool
    issuer: str | None = None
    subject: str | None = None

    def actor(self, default_role: str) -> team.Actor:
        return team.Actor(self.email or self.subject or "", signed_in=True, default_role=default_role,
                          issuer=self.issuer, subject=self.subject, match_email=self.verified)


def _same_issuer(a: str, b: str) -> bool:
    return a.strip().rstrip("/") == b.strip().rstrip("/")


def identify(claims: Mapping[str, Any], team_issuer: str | None) -> tuple[Identity | None, str]:
    """(the identity, "") or (None, why it is refused), from the ID token's claims (pure).

    Without a team issuer: the email must be verified — `email_verified` true (a JSON boolean, or
    the string "true" some providers send); a token without the claim is refused, naming the
    remedy. With one: the token's `iss` must be it and carry a `sub`."""
    value = claims.get("email")
    email = value.strip().lower() if isinstance(value, str) and "@" in value else None
    flag = claims.get("email_verified")
    verified = flag is True or (isinstance(flag, str) and flag.strip().lower() == "true")
    if team_issuer:
        iss, sub = claims.get("iss"), claims.get("sub")
        if not isinstance(iss, str) or not _same_issuer(iss, team_issuer):
            return None, (f"this account was signed in by {iss if isinstance(iss, str) and iss else 'an unnamed issuer'}"
                          ", not by the team's issuer")
        if not isinstance(sub, str) or not sub.strip():
            return None, "the provider gave no subject (sub) for this account"
        return Identity(email, verified, iss.strip().rstrip("/"), sub), ""  # as set_member keeps it
    if email is None:
        return None, "the provider gave no email for this account"
    if not verified:
        if flag is None:
            return None, ("the provider does not say this email is verified (its ID token has no email_verified "
                          "claim), so it proves nothing: an owner can name the provider's issuer in the sign-in "
                          "settings ([loopledger] issuer) and add members by their subject (docs/team.md)")
        return None, "the provider has not verified this email"
    return Identity(email, True), ""


def claims() -> dict[str, Any]:
    """The signed-in user's claims (empty: not signed in)."""
    if not st.user.get("is_logged_in"):
        return {}
    return {k: st.user.get(k) for k in ("email", "email_verified", "iss", "sub", "name")}


def identity() -> tuple[Identity | None, str]:
    return identify(claims(), issuer())


def email() -> str | None:
    """The signed-in user's email as far as the provider vouches for it, lower case (None: not
    signed in, none given, or one that proves nothing: see `identify`)."""
    ident, _ = identity()
    return ident.email if ident is not None else None


def actor() -> team.Actor:
    """Who acts in this run: the signed-in user (their role read from the ledger when they act, on
    the identity `identify` vouches for), else the local user of a dashboard without sign-in."""
    if not configured():
        return team.local_actor()
    ident, _ = identity()
    if ident is None:  # refused at the gate; were it ever asked: no member, the default role
        return team.Actor("", signed_in=True, default_role=default_role(), match_email=False)
    return ident.actor(default_role())
