"""Byte sizes and offsets as 64-bit integers: a transcript over 2 GiB overflowed PostgreSQL's
INTEGER. (SQLite stores every INTEGER in up to 8 bytes already; its column types are left alone.)

Revision ID: 0002.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0002"
down_revision = "0001"
branch_labels = None
depends_on = None

COLUMNS = ("size", "byte_offset")


def upgrade() -> None:
    if op.get_bind().dialect.name == "sqlite":
        return
    for name in COLUMNS:
        op.alter_column("sources", name, type_=sa.BigInteger(), existing_type=sa.Integer(),
                        existing_nullable=False)


def downgrade() -> None:
    if op.get_bind().dialect.name == "sqlite":
        return
    for name in COLUMNS:
        op.alter_column("sources", name, type_=sa.Integer(), existing_type=sa.BigInteger(),
                        existing_nullable=False)
