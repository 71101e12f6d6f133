"""Which stored policy is enforced on live agents (the hooks, `loopledger guard`, Policy.enforced).

"Enforce this setting" (Compare, the guard leaderboard, `loopledger enforce SPEC`) stores the
policy if it is new and appends a row to `enforcements`; the newest row wins, so the table is
also the history of what was enforced when. Until a person chooses, DEFAULT_SPEC is enforced:
the ladder at its defaults, the one guard whose graded warn → block → halt was designed for a
live loop (design.md, "ladder").

Every function takes a SQLAlchemy Connection or a loopledger.live.db.LiveDB (the hook's fast
path): the SQL is plain and written once. Call inside the caller's transaction.
"""

from __future__ import annotations

import time
from typing import Any

import orjson
from loopledger.detectors.policy import PolicySpec
from loopledger.live.db import sql

DEFAULT_SPEC = PolicySpec("ladder")
ORIGINS = ("compare", "leaderboard", "cli", "api")


def ensure_policy(conn: Any, spec: PolicySpec) -> None:
    """Store the policy if the ledger does not have it yet (its id is its spec's digest)."""
    conn.exec_driver_sql(sql(conn, "INSERT INTO policies (id, detector, params, label, is_default, created_at) "
                                   "VALUES (?, ?, ?, ?, ?, ?) ON CONFLICT (id) DO NOTHING"),
                         (spec.id, spec.detector, spec.params_json, spec.label, False, time.time()))


def set_enforced(conn: Any, spec: PolicySpec | str | None, origin: str = "api") -> None:
    """Make `spec` the enforced policy (None: back to DEFAULT_SPEC). A spec string is parsed
    (`DETECTOR[:NAME=VALUE,...]`, ConfigError on a bad one)."""
    if isinstance(spec, str):
        spec = PolicySpec.parse(spec)
    if spec is not None:
        ensure_policy(conn, spec)
    conn.exec_driver_sql(sql(conn, "INSERT INTO enforcements (policy_id, set_at, origin) VALUES (?, ?, ?)"),
                         (spec.id if spec is not None else None, time.time(), origin))


def set_enforced_id(conn: Any, policy_id: str, origin: str = "api") -> PolicySpec:
    """Enforce a policy the ledger stores, by its id (the leaderboard's rows); returns its spec.
    KeyError when no such policy is stored."""
    row = conn.exec_driver_sql(sql(conn, "SELECT detector, params FROM policies WHERE id = ?"), (policy_id,)).fetchone()
    if row is None:
        raise KeyError(f"no stored policy {policy_id!r}")
    spec = PolicySpec(row[0], orjson.loads(row[1]))
    set_enforced(conn, spec, origin)
    return spec


def enforced(conn: Any) -> PolicySpec | None:
    """The policy a person chose to enforce, or None when none is chosen (or the choice was
    cleared): the live paths then use DEFAULT_SPEC."""
    row = conn.exec_driver_sql(
        "SELECT p.detector, p.params FROM enforcements e LEFT JOIN policies p ON p.id = e.policy_id "
        "ORDER BY e.id DESC LIMIT 1").fetchone()
    if row is None or row[0] is None:
        return None
    return PolicySpec(row[0], orjson.loads(row[1]))


def enforced_or_default(conn: Any) -> PolicySpec:
    return enforced(conn) or DEFAULT_SPEC


def enforced_id(conn: Any) -> str | None:
    """The enforced policy's id as stored (None: none chosen), without building its spec."""
    row = conn.exec_driver_sql("SELECT policy_id FROM enforcements ORDER BY id DESC LIMIT 1").fetchone()
    return row[0] if row else None


def history(conn: Any, limit: int = 50) -> list[dict[str, Any]]:
    """The newest choices first: when, which policy (None = back to the default), from where."""
    rows = conn.exec_driver_sql(sql(conn,
        "SELECT e.set_at, e.policy_id, p.label, e.origin FROM enforcements e "
        "LEFT JOIN policies p ON p.id = e.policy_id ORDER BY e.id DESC LIMIT ?"), (limit,)).fetchall()
    return [{"set_at": r[0], "policy_id": r[1], "label": r[2], "origin": r[3]} for r in rows]
