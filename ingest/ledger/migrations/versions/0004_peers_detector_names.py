"""Detector names up to 200 characters: a plugin named by import path
(`mypkg.guards:make_guard`) is longer than the 20 the built-in names needed, and PostgreSQL
enforces VARCHAR lengths. (SQLite does not; its column types are left alone.)

Revision ID: 0004_peers.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0004_peers"
down_revision = "0003_labels"
branch_labels = None
depends_on = None


def upgrade() -> None:
    if op.get_bind().dialect.name == "sqlite":
        return
    op.alter_column("policies", "detector", type_=sa.String(200), existing_type=sa.String(20),
                    existing_nullable=False)


def downgrade() -> None:
    if op.get_bind().dialect.name == "sqlite":
        return
    op.alter_column("policies", "detector", type_=sa.String(20), existing_type=sa.String(200),
                    existing_nullable=False)
