"""A team on one ledger: members with roles, their forwarding tokens (stored hashed), who labelled
a session and who changed the enforced setting, which member a forwarded session came from, and
on a member's own ledger how far its live events have been forwarded.

- members (email, role viewer | labeller | owner, added when and by whom)
- member_tokens (a member's tokens: SHA-256 digest only, a short prefix to tell them apart, when
  created, revoked, last used)
- sessions.member: the email of the member whose guard forwarded the session (NULL otherwise)
- labels.by_user, enforcements.by_user: who (a signed-in email, or the local user of the CLI)
- forwarded (session_id, seq): the next live event of the session not yet acknowledged by the
  team's receiver (a member's ledger; the live events themselves are the outbox)

Revision ID: 0012_team.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0012_team"
down_revision = "0011_cost"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "members",
        sa.Column("id", sa.Integer(), primary_key=True),
        sa.Column("email", sa.Text(), nullable=False, unique=True),
        sa.Column("role", sa.String(length=20), nullable=False),
        sa.Column("added_at", sa.Float(), nullable=False),
        sa.Column("added_by", sa.Text()),
    )
    op.create_table(
        "member_tokens",
        sa.Column("id", sa.Integer(), primary_key=True),
        sa.Column("member_id", sa.Integer(), sa.ForeignKey("members.id", ondelete="CASCADE"), nullable=False),
        sa.Column("name", sa.Text(), nullable=False),
        sa.Column("prefix", sa.String(length=16), nullable=False),
        sa.Column("digest", sa.String(length=64), nullable=False, unique=True),
        sa.Column("created_at", sa.Float(), nullable=False),
        sa.Column("created_by", sa.Text()),
        sa.Column("revoked_at", sa.Float()),
        sa.Column("last_used_at", sa.Float()),
    )
    op.add_column("sessions", sa.Column("member", sa.Text()))
    op.create_index("ix_sessions_member", "sessions", ["member"])
    op.add_column("labels", sa.Column("by_user", sa.Text()))
    op.add_column("enforcements", sa.Column("by_user", sa.Text()))
    op.create_table(
        "forwarded",
        sa.Column("session_id", sa.Integer(), sa.ForeignKey("sessions.id", ondelete="CASCADE"), primary_key=True),
        sa.Column("seq", sa.Integer(), nullable=False),
    )


def downgrade() -> None:
    op.drop_table("forwarded")
    with op.batch_alter_table("enforcements") as batch:
        batch.drop_column("by_user")
    with op.batch_alter_table("labels") as batch:
        batch.drop_column("by_user")
    op.drop_index("ix_sessions_member", table_name="sessions")
    with op.batch_alter_table("sessions") as batch:
        batch.drop_column("member")
    op.drop_table("member_tokens")
    op.drop_table("members")
