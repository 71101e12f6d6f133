"""An enforcement may name a set of policies: enforcement_policies holds each enforcement's
policies in the order they were named (enforcements.policy_id stays the first of them).
Existing single-policy enforcements get their one member row. Revision ID: 0010_livepolicy.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0010_livepolicy"
down_revision = "0009_ui"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "enforcement_policies",
        sa.Column("enforcement_id", sa.Integer(), nullable=False),
        sa.Column("position", sa.Integer(), nullable=False),
        sa.Column("policy_id", sa.String(length=32), nullable=False),
        sa.ForeignKeyConstraint(["enforcement_id"], ["enforcements.id"], ondelete="CASCADE"),
        sa.ForeignKeyConstraint(["policy_id"], ["policies.id"], ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("enforcement_id", "position"),
    )
    op.execute("INSERT INTO enforcement_policies (enforcement_id, position, policy_id) "
               "SELECT id, 0, policy_id FROM enforcements WHERE policy_id IS NOT NULL")


def downgrade() -> None:
    op.drop_table("enforcement_policies")
