"""Timestamps as TEXT: a transcript's time is stored as the readers normalized it (ISO 8601 UTC),
or as written when it is not a time at all, whatever its length; VARCHAR(40) refused longer
values on PostgreSQL only (SQLite ignores declared lengths, so its columns are left alone). A
session's original start time, where it said more than UTC (an offset, a zone name), is kept.

Revision ID: 0006_readers.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0006_readers"
down_revision = "0005_resume"
branch_labels = None
depends_on = None

COLUMNS = (("sessions", "started_at"), ("sessions", "ended_at"), ("runs", "started_at"),
           ("events", "ts"), ("calls", "answer_ts"))


def upgrade() -> None:
    op.add_column("sessions", sa.Column("started_at_original", sa.Text()))
    if op.get_bind().dialect.name == "sqlite":
        return
    for table, name in COLUMNS:
        op.alter_column(table, name, type_=sa.Text(), existing_type=sa.String(40), existing_nullable=True)


def downgrade() -> None:
    if op.get_bind().dialect.name != "sqlite":
        for table, name in COLUMNS:
            op.alter_column(table, name, type_=sa.String(40), existing_type=sa.Text(), existing_nullable=True,
                            postgresql_using=f"left({name}, 40)")
    if op.get_bind().dialect.name == "sqlite":
        # SQLite >= 3.35 drops a column in place; a batch rebuild of `sessions` would cascade
        # deletes into every child table under foreign_keys=ON.
        op.execute("ALTER TABLE sessions DROP COLUMN started_at_original")
    else:
        op.drop_column("sessions", "started_at_original")
