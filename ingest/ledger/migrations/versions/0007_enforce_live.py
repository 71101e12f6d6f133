"""Live enforcement: which stored policy is enforced (a history of choices), the events a live
agent's hook or `guard` reported, and every decision the enforced policy made on them.

These rows are not derived from a transcript, so re-ingesting the session's transcript keeps them
(the worker never deletes them; they go only with their session). Revision ID: 0007_enforce.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0007_enforce"
down_revision = "0006_readers"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "enforcements",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("policy_id", sa.String(length=32), nullable=True),
        sa.Column("set_at", sa.Float(), nullable=False),
        sa.Column("origin", sa.Text(), nullable=True),
        sa.ForeignKeyConstraint(["policy_id"], ["policies.id"], ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("id"),
    )
    op.create_table(
        "live_events",
        sa.Column("session_id", sa.Integer(), nullable=False),
        sa.Column("seq", sa.Integer(), nullable=False),
        sa.Column("kind", sa.String(length=10), nullable=False),
        sa.Column("at", sa.Float(), nullable=False),
        sa.Column("call_id", sa.Text(), nullable=True),
        sa.Column("tool", sa.Text(), nullable=True),
        sa.Column("args", sa.Text(), nullable=True),
        sa.Column("text", sa.Text(), nullable=True),
        sa.Column("text_hash", sa.String(length=32), nullable=True),
        sa.Column("is_error", sa.Boolean(), nullable=True),
        sa.ForeignKeyConstraint(["session_id"], ["sessions.id"], ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("session_id", "seq"),
    )
    op.create_table(
        "enforced_checks",
        sa.Column("session_id", sa.Integer(), nullable=False),
        sa.Column("seq", sa.Integer(), nullable=False),
        sa.Column("policy_id", sa.String(length=32), nullable=False),
        sa.Column("origin", sa.String(length=20), nullable=False),
        sa.Column("call_id", sa.Text(), nullable=True),
        sa.Column("tool", sa.Text(), nullable=False),
        sa.Column("verdict", sa.String(length=12), nullable=False),
        sa.Column("count", sa.Integer(), nullable=True),
        sa.Column("threshold", sa.Integer(), nullable=True),
        sa.Column("reason", sa.Text(), nullable=True),
        sa.Column("at", sa.Float(), nullable=False),
        sa.Column("elapsed_ms", sa.Float(), nullable=True),
        sa.ForeignKeyConstraint(["session_id"], ["sessions.id"], ondelete="CASCADE"),
        sa.ForeignKeyConstraint(["policy_id"], ["policies.id"], ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("session_id", "seq"),
    )
    op.create_index("ix_enforced_checks_call", "enforced_checks", ["session_id", "call_id"], unique=False)


def downgrade() -> None:
    op.drop_index("ix_enforced_checks_call", table_name="enforced_checks")
    op.drop_table("enforced_checks")
    op.drop_table("live_events")
    op.drop_table("enforcements")
