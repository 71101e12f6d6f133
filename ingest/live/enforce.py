"""Which stored policies are enforced on live agents (the hooks, `loopledger guard`, Policy.enforced).

Enforcing (Compare's and the guard leaderboard's "Enforce on live agents", `loopledger enforce SPEC [SPEC...]`)
stores the policies if they are new and appends a row to `enforcements`, with one
`enforcement_policies` row per policy of the choice (one, or a set); the newest enforcement
wins, so the table is also the history of what was enforced when. Until a person chooses,
LIVE_DEFAULT is enforced: the same default set ingest judges with (DEFAULT_SPECS,
docs/detection.md), chosen by scoring against labels — not ladder, whose key-only counting
halts a poll that is making progress. A set decides each call as scoring judges a set: its
earliest verdict wins (loopledger.replay.PolicySet).

Trust: a stored policy names its detector, and a name read from the ledger is looked up among
the detectors registered in this process (built-ins, installed entry points) and nothing else:
a `module:factory` row is never imported (loopledger.detectors.registry). Such a row raises
NotRegistered here; the hook and `guard` then allow the call and log why.

Every function takes a SQLAlchemy Connection or a loopledger.live.db.LiveDB (the hook's fast
path): the SQL is plain and written once. Call inside the caller's transaction.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import orjson
from loopledger.detectors import registry
from loopledger.detectors.errors import ConfigError
from loopledger.detectors.policy import DEFAULT_SPECS, PolicySpec
from loopledger.live.db import sql

if TYPE_CHECKING:  # the hook's fast path reads what is enforced without the database toolkit
    from loopledger.ledger import team

# What the live paths enforce until a person chooses: the scored default set ingest uses.
LIVE_DEFAULT: tuple[PolicySpec, ...] = DEFAULT_SPECS
# Where a person set an enforcement (enforcements.origin); not who a live decision was for
# (loopledger.live.session.DECIDED_FOR). team: a member's ledger following the team's.
ENFORCED_FROM = ("compare", "leaderboard", "cli", "api", "team")


class NotRegistered(LookupError):
    """An enforced stored policy whose detector is not registered in this process."""

    def __init__(self, detector: str, label: str) -> None:
        self.detector = detector
        self.label = label
        super().__init__(f"the stored policy {label!r} names detector {detector!r}, which is not registered in "
                         "this process (a policy read from a ledger never imports code; install the plugin's "
                         "package to enforce it)")


def spec_of_row(detector: str, params: str | bytes) -> PolicySpec:
    """A stored policy's spec, its detector looked up among the registered ones only."""
    try:
        return PolicySpec(detector, orjson.loads(params))
    except ConfigError as exc:
        if exc.field == "detector":
            raise NotRegistered(detector, detector) from None
        raise


def ensure_policy(conn: Any, spec: PolicySpec) -> None:
    """Store the policy if the ledger does not have it yet (its id is its spec's digest)."""
    conn.exec_driver_sql(sql(conn, "INSERT INTO policies (id, detector, params, label, is_default, created_at) "
                                   "VALUES (?, ?, ?, ?, ?, ?) ON CONFLICT (id) DO NOTHING"),
                         (spec.id, spec.detector, spec.params_json, spec.label, False, time.time()))


def _as_specs(spec: PolicySpec | str | Sequence[PolicySpec | str] | None) -> tuple[PolicySpec, ...]:
    if spec is None:
        return ()
    items = [spec] if isinstance(spec, PolicySpec | str) else list(spec)
    # A spec string here is the caller's own (the CLI, the API): it may name module:factory.
    out = [PolicySpec.parse(s, trusted=True) if isinstance(s, str) else s for s in items]
    return tuple(dict.fromkeys(out))  # one policy named twice is enforced once


def set_enforced(conn: Any, spec: PolicySpec | str | Sequence[PolicySpec | str] | None,
                 origin: str = "api", actor: team.Actor | None = None) -> None:
    """Enforce `spec`: one policy or a set (None or an empty set: back to LIVE_DEFAULT). A spec
    string is parsed (`DETECTOR[:NAME=VALUE,...]`, ConfigError on a bad one). Recorded with
    who chose it: `actor`, default the local user; a signed-in actor must be an owner
    (team.Forbidden otherwise, checked here, in the writing transaction)."""
    from loopledger.ledger import team  # only a write checks a role (it needs SQLAlchemy)

    actor = actor or team.local_actor()
    if actor.signed_in:  # the local user may (and a LiveDB, the hook's fast path, never signs in)
        team.require(conn, actor, team.ENFORCE)
    specs = _as_specs(spec)
    for sp in specs:
        ensure_policy(conn, sp)
    eid = conn.exec_driver_sql(sql(conn, "INSERT INTO enforcements (policy_id, set_at, origin, by_user) "
                                         "VALUES (?, ?, ?, ?) RETURNING id"),
                               (specs[0].id if specs else None, time.time(), origin, actor.who)).fetchall()[0][0]
    if specs:
        for pos, sp in enumerate(specs):
            conn.exec_driver_sql(sql(conn, "INSERT INTO enforcement_policies (enforcement_id, position, policy_id) "
                                           "VALUES (?, ?, ?)"), (eid, pos, sp.id))


def set_enforced_id(conn: Any, policy_id: str, origin: str = "api", actor: team.Actor | None = None) -> PolicySpec:
    """Enforce a policy the ledger stores, by its id (the leaderboard's rows); returns its spec.
    KeyError when no such policy is stored, NotRegistered when its detector is not here,
    team.Forbidden as set_enforced."""
    row = conn.exec_driver_sql(sql(conn, "SELECT detector, params FROM policies WHERE id = ?"), (policy_id,)).fetchone()
    if row is None:
        raise KeyError(f"no stored policy {policy_id!r}")
    spec = spec_of_row(row[0], row[1])
    set_enforced(conn, spec, origin, actor)
    return spec


def _newest(conn: Any) -> tuple[int, str | None, float, str | None, str | None] | None:
    return conn.exec_driver_sql("SELECT id, policy_id, set_at, origin, by_user FROM enforcements "
                                "ORDER BY id DESC LIMIT 1").fetchone()


def _member_rows(conn: Any, enforcement_id: int, policy_id: str | None) -> list[tuple[str, str, str, str]]:
    """(id, detector, params, label) of an enforcement's policies, in the order they were named."""
    rows = conn.exec_driver_sql(sql(conn,
        "SELECT p.id, p.detector, p.params, p.label FROM enforcement_policies m JOIN policies p "
        "ON p.id = m.policy_id WHERE m.enforcement_id = ? ORDER BY m.position"), (enforcement_id,)).fetchall()
    if rows or policy_id is None:
        return [tuple(r) for r in rows]
    # An enforcement stored before sets existed (one policy, no member rows).
    one = conn.exec_driver_sql(sql(conn, "SELECT id, detector, params, label FROM policies WHERE id = ?"),
                               (policy_id,)).fetchone()
    return [tuple(one)] if one else []


def enforced_specs(conn: Any) -> tuple[PolicySpec, ...]:
    """The policies a person chose to enforce, in the order named; () when none is chosen (or
    the choice was cleared): the live paths then use LIVE_DEFAULT. NotRegistered when one of
    them names a detector this process does not have."""
    newest = _newest(conn)
    if newest is None or newest[1] is None:
        return ()
    out = []
    for _pid, detector, params, label in _member_rows(conn, newest[0], newest[1]):
        try:
            out.append(spec_of_row(detector, params))
        except NotRegistered:
            raise NotRegistered(detector, label) from None
    return tuple(out)


def enforced(conn: Any) -> PolicySpec | None:
    """The policy a person chose (the first of a chosen set; `enforced_specs` gives them all),
    or None when none is chosen."""
    specs = enforced_specs(conn)
    return specs[0] if specs else None


def enforced_or_default(conn: Any) -> tuple[PolicySpec, ...]:
    """What the live paths enforce: the chosen policies, else LIVE_DEFAULT."""
    return enforced_specs(conn) or LIVE_DEFAULT


def enforced_id(conn: Any) -> str | None:
    """The enforced policy's id as stored (the first of a set; None: none chosen), without
    building its spec."""
    row = conn.exec_driver_sql("SELECT policy_id FROM enforcements ORDER BY id DESC LIMIT 1").fetchone()
    return row[0] if row else None


def enforced_ids(conn: Any) -> tuple[str, ...]:
    """Every enforced policy's id as stored, in order (() when none is chosen)."""
    newest = _newest(conn)
    if newest is None or newest[1] is None:
        return ()
    return tuple(r[0] for r in _member_rows(conn, newest[0], newest[1]))


def now(conn: Any) -> dict[str, Any]:
    """What is enforced now, for `loopledger policies` and the dashboard: `labels` (each policy's
    label), `chosen` (False: the default set), `since` (unix time it was chosen; None for a
    default never chosen), `origin`, and `missing`: the labels of policies whose detector is
    not registered here (the live paths allow every call while such a policy is enforced), `by`:
    who chose it."""
    newest = _newest(conn)
    if newest is None or newest[1] is None:
        return {"labels": [sp.label for sp in LIVE_DEFAULT], "ids": [sp.id for sp in LIVE_DEFAULT],
                "chosen": False, "since": newest[2] if newest else None,
                "origin": newest[3] if newest else None, "by": newest[4] if newest else None, "missing": []}
    rows = _member_rows(conn, newest[0], newest[1])
    return {"labels": [r[3] for r in rows], "ids": [r[0] for r in rows], "chosen": True, "since": newest[2],
            "origin": newest[3], "by": newest[4], "missing": [r[3] for r in rows if not registry.is_registered(r[1])]}


def history(conn: Any, limit: int = 50) -> list[dict[str, Any]]:
    """The newest choices first: when, which policy (the first of a set; None = back to the
    default), from where, by whom."""
    rows = conn.exec_driver_sql(sql(conn,
        "SELECT e.set_at, e.policy_id, p.label, e.origin, e.by_user FROM enforcements e "
        "LEFT JOIN policies p ON p.id = e.policy_id ORDER BY e.id DESC LIMIT ?"), (limit,)).fetchall()
    return [{"set_at": r[0], "policy_id": r[1], "label": r[2], "origin": r[3], "by": r[4]} for r in rows]


def chosen_rows(conn: Any) -> dict[str, Any]:
    """What is enforced now as stored rows, for a member's ledger to follow (the team receiver's
    answer, loopledger.live.forward): `policies` [(detector, params JSON, label)] in order ([] =
    the default set), `by` who chose it, `since` when. Nothing is built or imported here: the
    member's side looks each detector up among its own registered ones."""
    newest = _newest(conn)
    if newest is None or newest[1] is None:
        return {"policies": [], "by": newest[4] if newest else None, "since": newest[2] if newest else None}
    rows = _member_rows(conn, newest[0], newest[1])
    return {"policies": [[r[1], r[2], r[3]] for r in rows], "by": newest[4], "since": newest[2]}
