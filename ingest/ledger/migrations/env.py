"""Alembic environment: always online, on the connection loopledger.ledger.migrate hands over."""

from __future__ import annotations

from alembic import context
from loopledger.ledger.schema import metadata

target_metadata = metadata


def run() -> None:
    connection = context.config.attributes.get("connection")
    if connection is None:
        raise RuntimeError("run migrations through loopledger.ledger.migrate.upgrade(), not the alembic CLI")
    context.configure(
        connection=connection,
        target_metadata=target_metadata,
        # SQLite cannot ALTER most things in place; batch mode copies the table when a later
        # migration needs it.
        render_as_batch=connection.dialect.name == "sqlite",
    )
    with context.begin_transaction():
        context.run_migrations()


run()
