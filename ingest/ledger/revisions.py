"""The schema revisions this install knows, read from its migration files without importing
alembic (the hook reads them on every call), and the one error for a ledger written by a newer
LoopLedger: every command and the hook say the same line and stop there (a newer ledger is
never migrated down, guessed at, or half-read)."""

from __future__ import annotations

import os
import re

VERSIONS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "migrations", "versions")
_REVISION = re.compile(r'^(down_revision|revision)\s*=\s*["\']([^"\']+)["\']', re.M)


class NewerLedger(RuntimeError):
    """The ledger's schema revision is none this install knows: a newer LoopLedger wrote it."""

    def __init__(self, revision: str) -> None:
        self.revision = revision
        super().__init__(f"this ledger was written by a newer LoopLedger (revision {revision}); upgrade loopledger")


def _read() -> tuple[set[str], set[str]]:
    revs, parents = set(), set()
    for name in os.listdir(VERSIONS):
        if not name.endswith(".py"):
            continue
        with open(os.path.join(VERSIONS, name), encoding="utf-8") as fh:
            found = dict(_REVISION.findall(fh.read()))
        if "revision" in found:
            revs.add(found["revision"])
            if "down_revision" in found:
                parents.add(found["down_revision"])
    return revs, parents


def head_revision() -> str | None:
    """The newest migration: the revision no other revision names as its parent."""
    revs, parents = _read()
    heads = revs - parents
    return heads.pop() if len(heads) == 1 else None


def check_known(revision: str | None) -> None:
    """Raise NewerLedger when `revision` (a ledger's alembic_version) is none of ours."""
    if revision is not None and revision not in _read()[0]:
        raise NewerLedger(revision)
