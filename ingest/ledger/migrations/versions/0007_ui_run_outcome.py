"""How a session's transcript says it ended: sessions.outcome (success | submitted | failure),
outcome_detail (e.g. "reward 1", "exit status submitted") and outcome_run (the run it belongs to).

Revision ID: 0007_ui.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0007_ui"
down_revision = "0006_readers"  # chained after the migrations on main (labels, peers, resume, readers)
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
