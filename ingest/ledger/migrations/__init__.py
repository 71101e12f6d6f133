"""Alembic migrations of the ledger, driven programmatically by ingest.ledger.migrate (no alembic.ini)."""
