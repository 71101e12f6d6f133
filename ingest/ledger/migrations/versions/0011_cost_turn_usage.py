"""What each model turn used and cost: table turn_usage (tokens per Prose/Batch event, its price
in USD from genai-prices and that table's version; NULL usd = unpriced).

Revision ID: 0011_cost.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0011_cost"
down_revision = "0010_livepolicy"
branch_labels = None
depends_on = None

_TOKENS = sa.BigInteger().with_variant(sa.Integer(), "sqlite")


def upgrade() -> None:
    op.create_table(
        "turn_usage",
        sa.Column("session_id", sa.Integer(), sa.ForeignKey("sessions.id", ondelete="CASCADE"), primary_key=True),
        sa.Column("seq", sa.Integer(), primary_key=True),
        sa.Column("run_idx", sa.Integer(), nullable=False),
        sa.Column("model", sa.Text()),
        sa.Column("input_tokens", _TOKENS),
        sa.Column("output_tokens", _TOKENS),
        sa.Column("cache_read_tokens", _TOKENS),
        sa.Column("cache_write_tokens", _TOKENS),
        sa.Column("usd", sa.Float()),
        sa.Column("priced_model", sa.Text()),
        sa.Column("priced_with", sa.String(40)),
        sa.Column("price_note", sa.Text()),
        sa.Column("ts", sa.String(40).with_variant(sa.Text(), "postgresql")),
    )


def downgrade() -> None:
    op.drop_table("turn_usage")
