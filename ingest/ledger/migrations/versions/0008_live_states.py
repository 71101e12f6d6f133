"""The live enforced policy's state per (session, policy), sealed like the worker's resume
snapshots, so a hook event judges its call on top of the stored state instead of replaying the
session's live events. Revision ID: 0008_live.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0008_live"
down_revision = "0007_enforce"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "live_states",
        sa.Column("session_id", sa.Integer(), nullable=False),
        sa.Column("policy_id", sa.String(length=32), nullable=False),
        sa.Column("seq", sa.Integer(), nullable=False),
        sa.Column("version", sa.String(length=64), nullable=False),
        sa.Column("state", sa.LargeBinary(), nullable=False),
        sa.ForeignKeyConstraint(["session_id"], ["sessions.id"], ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("session_id", "policy_id"),
    )


def downgrade() -> None:
    op.drop_table("live_states")
