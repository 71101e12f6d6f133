"""Resume snapshots: per (session, policy) replay state and per source reader state, so an
appended transcript (and a live hook) replays only what is new. Revision ID: 0005_resume.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0005_resume"
down_revision = "0004_peers"
branch_labels = None
depends_on = None

_BYTES = sa.BigInteger().with_variant(sa.Integer(), "sqlite")


def upgrade() -> None:
    op.create_table(
        "resume_states",
        sa.Column("session_id", sa.Integer(), nullable=False),
        sa.Column("policy_id", sa.String(length=32), nullable=False),
        sa.Column("seq", sa.Integer(), nullable=False),
        sa.Column("version", sa.String(length=64), nullable=False),
        sa.Column("state", sa.LargeBinary(), nullable=False),
        sa.Column("updated_at", sa.Float(), nullable=True),
        sa.ForeignKeyConstraint(["session_id"], ["sessions.id"], ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("session_id", "policy_id"),
    )
    op.create_table(
        "reader_states",
        sa.Column("source_id", sa.Integer(), nullable=False),
        sa.Column("format", sa.String(length=40), nullable=False),
        sa.Column("byte_offset", _BYTES, nullable=False),
        sa.Column("line", sa.Integer(), nullable=False),
        sa.Column("version", sa.String(length=64), nullable=False),
        sa.Column("state", sa.LargeBinary(), nullable=False),
        sa.ForeignKeyConstraint(["source_id"], ["sources.id"], ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("source_id"),
    )


def downgrade() -> None:
    op.drop_table("reader_states")
    op.drop_table("resume_states")
