"""A team on one ledger: who may do what (roles), who did it (actors), and members' tokens.

Roles, each including the one before: a **viewer** browses, investigates and compares; a
**labeller** also labels sessions and saves settings as policies (Compare); an **owner** also
changes what is enforced on live agents and manages members. The check is made where the action
happens — the function that writes a label (loopledger.ledger.writes.save_label), saved policies
(loopledger.worker.judge_stored), the enforced setting (loopledger.live.enforce.set_enforced) or a
member calls `require` in the same transaction, reading the member's role from the ledger then —
so a page that still shows a button to someone whose role changed cannot write with it.

An `Actor` says who acts. A signed-in dashboard user (`signed_in=True`) has the role the
`members` table gives their identity, else the dashboard's default role (viewer unless the
sign-in settings say otherwise). The identity is one the provider vouches for (app/signin.py): a
member added with a subject is matched on the ID token's (`iss`, `sub`) alone; one without, on
an email the provider verified (`match_email`) — never on an email claim anyone could set. Anyone else — the CLI, the Python API, the dashboard without sign-in,
which serves loopback only — acts as the local user who can open the ledger anyway: every
action is allowed and recorded under their name (`local_actor`).

Tokens (`loopledger tokens create|list|revoke`) let a member's guard forward to the team's
`loopledger receive`: `ll_` + 43 URL-safe characters (256 random bits), shown once; the ledger
keeps only its SHA-256 digest and its first characters. A digest suffices because the token is
random, not a password a person chose: there is nothing to guess from it.
"""

from __future__ import annotations

import getpass
import hashlib
import secrets
import time
from dataclasses import dataclass
from typing import Any

import sqlalchemy as sa
from loopledger.ledger import schema as t
from sqlalchemy.engine import Connection

VIEWER, LABELLER, OWNER = "viewer", "labeller", "owner"
ROLES = (VIEWER, LABELLER, OWNER)
# What each action needs (every role includes the ones before it in ROLES). Saved policies and
# labels are what the leaderboard scores: a labeller's; what live agents obey is an owner's.
LABEL, SAVE_POLICIES, ENFORCE, MANAGE = "label", "save policies", "enforce", "manage members"
NEEDS = {LABEL: LABELLER, SAVE_POLICIES: LABELLER, ENFORCE: OWNER, MANAGE: OWNER}
TOKEN_PREFIX = "ll_"
SHOWN_PREFIX = 10  # characters of a token kept to tell tokens apart in `tokens list`


class Forbidden(ValueError):
    """The actor's role does not allow the action (a ValueError, so every form that shows "Not
    saved: …" for a label it cannot store shows this too)."""


class TeamError(ValueError):
    """A member or token that does not exist, or a value that is not one."""


@dataclass(frozen=True)
class Actor:
    """Who acts: `who` is recorded beside the label or the enforced setting; `signed_in` means the
    role comes from the ledger (`members`, else `default_role`)."""

    who: str
    signed_in: bool = False
    default_role: str = VIEWER
    issuer: str | None = None  # the ID token's `iss` and `sub`, when the team names its issuer
    subject: str | None = None
    match_email: bool = True  # False: `who` is not a verified email, so no member is matched on it


def local_actor() -> Actor:
    """The person running this process (the CLI, the API, a dashboard without sign-in)."""
    try:
        return Actor(getpass.getuser())
    except (KeyError, OSError):  # no name for this uid (a container): its number
        import os

        return Actor(f"uid {os.getuid()}")


def allows(role: str, action: str) -> bool:
    """Whether `role` may do `action` (pure)."""
    return role in ROLES and ROLES.index(role) >= ROLES.index(NEEDS[action])


def normalize_email(email: str) -> str:
    email = (email or "").strip().lower()
    if "@" not in email or email.startswith("@") or email.endswith("@") or any(c.isspace() for c in email):
        raise TeamError(f"{email!r} is not an email address")
    return email


def check_role(role: str) -> str:
    if role not in ROLES:
        raise TeamError(f"unknown role {role!r}: expected one of {', '.join(ROLES)}")
    return role


def member_role(conn: Connection, actor: Actor) -> str | None:
    """A signed-in actor's role as a member, or None (not a member): by (`iss`, `sub`) when the
    actor has them, else by a verified email of a member added without a subject."""
    m = t.members.c
    if actor.issuer and actor.subject:
        role = conn.execute(sa.select(m.role).where(m.issuer == actor.issuer, m.subject == actor.subject)).scalar()
        if role is not None:
            return role
    if actor.match_email and actor.who.strip():
        return conn.execute(sa.select(m.role).where(m.email == actor.who.strip().lower(),
                                                    m.subject.is_(None))).scalar()
    return None


def role_of(conn: Connection, actor: Actor) -> str:
    """The actor's role now: a member's from the ledger, else the default (signed in), else owner
    (the local user)."""
    if not actor.signed_in:
        return OWNER
    return member_role(conn, actor) or actor.default_role


def _a(role: str) -> str:
    """"an owner", "a viewer": the article a role's name takes."""
    return ("an " if role[:1].lower() in "aeiou" else "a ") + role


def require(conn: Connection, actor: Actor | None, action: str) -> None:
    """Raise Forbidden unless the actor may do `action`; call it in the transaction that writes."""
    actor = actor or local_actor()
    role = role_of(conn, actor)
    if not allows(role, action):
        raise Forbidden(f"{actor.who} is {_a(role)}: to {action} takes {_a(NEEDS[action])} or more "
                        f"(an owner sets roles: `loopledger members add {actor.who} --role {NEEDS[action]}`)")


# ── members ───────────────────────────────────────────────────────────────────────────────────


def set_member(conn: Connection, email: str, role: str, by: Actor | None = None, *,
               issuer: str | None = None, subject: str | None = None) -> bool:
    """Add a member or change their role; True when added. An owner's action (`require` MANAGE).
    With `subject` (and its `issuer`: the ID token's `sub` and `iss`), the member is matched on
    those alone when they sign in; `email` then names them in lists and records."""
    require(conn, by, MANAGE)
    email, role = normalize_email(email), check_role(role)
    issuer, subject = (issuer or "").strip().rstrip("/") or None, (subject or "").strip() or None
    if (issuer is None) != (subject is None):
        raise TeamError("a member keyed on their identity needs both the issuer (iss) and the subject (sub)")
    m = t.members.c
    ident = {"issuer": issuer, "subject": subject} if subject else {}
    if subject:
        taken = conn.execute(sa.select(m.email).where(m.issuer == issuer, m.subject == subject,
                                                      m.email != email)).scalar()
        if taken is not None:
            raise TeamError(f"subject {subject!r} of {issuer} is already the member {taken}")
    if conn.execute(sa.update(t.members).where(m.email == email).values(role=role, **ident)).rowcount:
        return False
    conn.execute(sa.insert(t.members).values(email=email, role=role, added_at=time.time(),
                                             added_by=(by or local_actor()).who, **ident))
    return True


def remove_member(conn: Connection, email: str, by: Actor | None = None) -> None:
    """Remove a member and their tokens (their forwarded sessions keep their email)."""
    require(conn, by, MANAGE)
    email = normalize_email(email)
    if not conn.execute(sa.delete(t.members).where(t.members.c.email == email)).rowcount:
        raise TeamError(f"no member {email}")


def members(conn: Connection) -> list[dict[str, Any]]:
    """Every member with their role, when and by whom added, and their live tokens, by email."""
    m, k = t.members.c, t.member_tokens.c
    live = (sa.select(sa.func.count()).where(k.member_id == m.id, k.revoked_at.is_(None))
            .scalar_subquery().label("tokens"))
    q = sa.select(m.email, m.role, m.added_at, m.added_by, live, m.issuer, m.subject).order_by(m.email)
    return [dict(r) for r in conn.execute(q).mappings()]


def member_emails(conn: Connection) -> set[str]:
    return {r[0] for r in conn.execute(sa.select(t.members.c.email))}


# ── tokens ────────────────────────────────────────────────────────────────────────────────────


def digest(token: str) -> str:
    return hashlib.sha256(token.encode("utf-8", "surrogatepass")).hexdigest()


def create_token(conn: Connection, email: str, name: str = "", by: Actor | None = None) -> tuple[int, str]:
    """A new token for a member: (its id, the token). The token is returned once and never stored."""
    require(conn, by, MANAGE)
    email = normalize_email(email)
    mid = conn.execute(sa.select(t.members.c.id).where(t.members.c.email == email)).scalar()
    if mid is None:
        raise TeamError(f"no member {email}: add them first (`loopledger members add {email} --role viewer`)")
    token = TOKEN_PREFIX + secrets.token_urlsafe(32)
    tid = conn.execute(sa.insert(t.member_tokens).values(
        member_id=mid, name=name or "token", prefix=token[:SHOWN_PREFIX], digest=digest(token),
        created_at=time.time(), created_by=(by or local_actor()).who).returning(t.member_tokens.c.id)).scalar_one()
    return tid, token


def tokens(conn: Connection) -> list[dict[str, Any]]:
    """Every token (never the token itself): id, member, name, prefix, created, revoked, last used."""
    k, m = t.member_tokens.c, t.members.c
    q = (sa.select(k.id, m.email, k.name, k.prefix, k.created_at, k.created_by, k.revoked_at, k.last_used_at)
         .select_from(t.member_tokens.join(t.members, m.id == k.member_id)).order_by(k.id))
    return [dict(r) for r in conn.execute(q).mappings()]


def revoke_token(conn: Connection, token_id: int, by: Actor | None = None) -> str:
    """Revoke a token by its id; returns its member's email. A revoked token is refused at once."""
    require(conn, by, MANAGE)
    k = t.member_tokens.c
    row = conn.execute(sa.select(k.id, k.revoked_at, t.members.c.email)
                       .select_from(t.member_tokens.join(t.members, t.members.c.id == k.member_id))
                       .where(k.id == token_id)).first()
    if row is None:
        raise TeamError(f"no token {token_id} (`loopledger tokens list` shows them)")
    if row.revoked_at is None:
        conn.execute(sa.update(t.member_tokens).where(k.id == token_id).values(revoked_at=time.time()))
    return row.email


def member_of_token(conn: Connection, token: str) -> str | None:
    """The email of the member holding this token, or None (unknown or revoked)."""
    if not token.startswith(TOKEN_PREFIX):
        return None
    k, m = t.member_tokens.c, t.members.c
    return conn.execute(sa.select(m.email).select_from(t.member_tokens.join(t.members, m.id == k.member_id))
                        .where(k.digest == digest(token), k.revoked_at.is_(None))).scalar()


def any_token(conn: Connection) -> bool:
    """Whether the ledger holds a token that is not revoked (the receiver then closes its door)."""
    k = t.member_tokens.c
    return conn.execute(sa.select(k.id).where(k.revoked_at.is_(None)).limit(1)).first() is not None


def ever_token(conn: Connection) -> bool:
    """Whether the ledger holds a token, revoked or not (a receiver's door then stays closed)."""
    return conn.execute(sa.select(t.member_tokens.c.id).limit(1)).first() is not None


def used(conn: Connection, token: str) -> None:
    conn.execute(sa.update(t.member_tokens).where(t.member_tokens.c.digest == digest(token))
                 .values(last_used_at=time.time()))
