"""How a session's transcript says it ended: sessions.outcome (success | submitted | failure),
outcome_detail (e.g. "reward 1", "exit status submitted") and outcome_run (the run it belongs to).

Revision ID: 0009_ui.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0009_ui"
down_revision = "0008_live"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("sessions") as batch:
        batch.add_column(sa.Column("outcome", sa.String(12)))
        batch.add_column(sa.Column("outcome_detail", sa.Text()))
        batch.add_column(sa.Column("outcome_run", sa.Integer()))


def downgrade() -> None:
    with op.batch_alter_table("sessions") as batch:
        batch.drop_column("outcome_run")
        batch.drop_column("outcome_detail")
        batch.drop_column("outcome")
