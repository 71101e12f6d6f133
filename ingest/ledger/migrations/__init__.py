"""Alembic migrations of the ledger, driven programmatically by loopledger.ledger.migrate (no alembic.ini)."""
