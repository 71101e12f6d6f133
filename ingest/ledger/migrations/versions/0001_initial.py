"""Initial ledger: the tables of ingest/ledger/schema.py as first written.

Spelled out (not metadata.create_all) so that this revision stays what it was when schema.py
changes; later changes get their own revision. Revision ID: 0001.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0001"
down_revision = None
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "policies",
        sa.Column("id", sa.String(length=32), nullable=False),
        sa.Column("detector", sa.String(length=20), nullable=False),
        sa.Column("params", sa.Text(), nullable=False),
        sa.Column("label", sa.Text(), nullable=False),
        sa.Column("is_default", sa.Boolean(), nullable=False),
        sa.Column("created_at", sa.Float(), nullable=True),
        sa.PrimaryKeyConstraint("id"),
    )
    op.create_table(
        "sources",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("path", sa.Text(), nullable=False),
        sa.Column("format", sa.String(length=40), nullable=True),
        sa.Column("size", sa.Integer(), nullable=False),
        sa.Column("mtime", sa.Float(), nullable=True),
        sa.Column("content_hash", sa.String(length=64), nullable=True),
        sa.Column("byte_offset", sa.Integer(), nullable=False),
        sa.Column("status", sa.String(length=20), nullable=False),
        sa.Column("error", sa.Text(), nullable=True),
        sa.Column("claimed_by", sa.String(length=80), nullable=True),
        sa.Column("claimed_at", sa.Float(), nullable=True),
        sa.Column("ingested_at", sa.Float(), nullable=True),
        sa.PrimaryKeyConstraint("id"),
        sa.UniqueConstraint("path"),
    )
    op.create_table(
        "ingest_errors",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("source_id", sa.Integer(), nullable=False),
        sa.Column("line", sa.Integer(), nullable=True),
        sa.Column("message", sa.Text(), nullable=False),
        sa.Column("excerpt", sa.Text(), nullable=True),
        sa.Column("created_at", sa.Float(), nullable=True),
        sa.ForeignKeyConstraint(["source_id"], ["sources.id"], ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("id"),
    )
    op.create_index("ix_ingest_errors_source", "ingest_errors", ["source_id"], unique=False)
    op.create_table(
        "sessions",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("source_id", sa.Integer(), nullable=False),
        sa.Column("key", sa.Text(), nullable=False),
        sa.Column("format", sa.String(length=40), nullable=False),
        sa.Column("title", sa.Text(), nullable=False),
        sa.Column("agent", sa.Text(), nullable=True),
        sa.Column("model", sa.Text(), nullable=True),
        sa.Column("started_at", sa.String(length=40), nullable=True),
        sa.Column("ended_at", sa.String(length=40), nullable=True),
        sa.Column("parent_id", sa.Integer(), nullable=True),
        sa.Column("parent_key", sa.Text(), nullable=True),
        sa.Column("n_events", sa.Integer(), nullable=False),
        sa.Column("n_runs", sa.Integer(), nullable=False),
        sa.Column("n_calls", sa.Integer(), nullable=False),
        sa.Column("updated_at", sa.Float(), nullable=True),
        sa.ForeignKeyConstraint(["parent_id"], ["sessions.id"], ondelete="SET NULL"),
        sa.ForeignKeyConstraint(["source_id"], ["sources.id"], ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("id"),
        sa.UniqueConstraint("source_id", "key", name="uq_sessions_source_key"),
    )
    op.create_table(
        "calls",
        sa.Column("session_id", sa.Integer(), nullable=False),
        sa.Column("seq", sa.Integer(), nullable=False),
        sa.Column("idx", sa.Integer(), nullable=False),
        sa.Column("run_idx", sa.Integer(), nullable=False),
        sa.Column("call_id", sa.Text(), nullable=True),
        sa.Column("tool", sa.Text(), nullable=False),
        sa.Column("args", sa.Text(), nullable=False),
        sa.Column("args_hash", sa.String(length=32), nullable=False),
        sa.Column("args_malformed", sa.Boolean(), nullable=False),
        sa.Column("answer", sa.Text(), nullable=True),
        sa.Column("answer_hash", sa.String(length=32), nullable=True),
        sa.Column("answer_len", sa.Integer(), nullable=True),
        sa.Column("is_error", sa.Boolean(), nullable=True),
        sa.Column("answer_seq", sa.Integer(), nullable=True),
        sa.Column("answer_ts", sa.String(length=40), nullable=True),
        sa.ForeignKeyConstraint(["session_id"], ["sessions.id"], ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("session_id", "seq", "idx"),
    )
    op.create_index("ix_calls_tool", "calls", ["tool"], unique=False)
    op.create_table(
        "checks",
        sa.Column("session_id", sa.Integer(), nullable=False),
        sa.Column("policy_id", sa.String(length=32), nullable=False),
        sa.Column("seq", sa.Integer(), nullable=False),
        sa.Column("idx", sa.Integer(), nullable=False),
        sa.Column("run_idx", sa.Integer(), nullable=False),
        sa.Column("verdict", sa.String(length=12), nullable=False),
        sa.Column("count", sa.Integer(), nullable=True),
        sa.Column("total", sa.Integer(), nullable=True),
        sa.Column("threshold", sa.Integer(), nullable=True),
        sa.Column("reason", sa.Text(), nullable=True),
        sa.ForeignKeyConstraint(["policy_id"], ["policies.id"], ondelete="CASCADE"),
        sa.ForeignKeyConstraint(["session_id"], ["sessions.id"], ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("session_id", "policy_id", "seq", "idx"),
    )
    op.create_table(
        "events",
        sa.Column("session_id", sa.Integer(), nullable=False),
        sa.Column("seq", sa.Integer(), nullable=False),
        sa.Column("run_idx", sa.Integer(), nullable=False),
        sa.Column("kind", sa.String(length=10), nullable=False),
        sa.Column("text", sa.Text(), nullable=True),
        sa.Column("text_hash", sa.String(length=32), nullable=True),
        sa.Column("ts", sa.String(length=40), nullable=True),
        sa.Column("line", sa.Integer(), nullable=True),
        sa.ForeignKeyConstraint(["session_id"], ["sessions.id"], ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("session_id", "seq"),
    )
    op.create_table(
        "labels",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("session_id", sa.Integer(), nullable=False),
        sa.Column("run_idx", sa.Integer(), nullable=False),
        sa.Column("label", sa.String(length=20), nullable=False),
        sa.Column("note", sa.Text(), nullable=True),
        sa.Column("created_at", sa.Float(), nullable=True),
        sa.ForeignKeyConstraint(["session_id"], ["sessions.id"], ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("id"),
        sa.UniqueConstraint("session_id", "run_idx", name="uq_labels_run"),
    )
    op.create_table(
        "results",
        sa.Column("session_id", sa.Integer(), nullable=False),
        sa.Column("policy_id", sa.String(length=32), nullable=False),
        sa.Column("seq", sa.Integer(), nullable=False),
        sa.Column("idx", sa.Integer(), nullable=False),
        sa.Column("outcome", sa.String(length=16), nullable=False),
        sa.ForeignKeyConstraint(["policy_id"], ["policies.id"], ondelete="CASCADE"),
        sa.ForeignKeyConstraint(["session_id"], ["sessions.id"], ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("session_id", "policy_id", "seq", "idx"),
    )
    op.create_table(
        "run_outcomes",
        sa.Column("session_id", sa.Integer(), nullable=False),
        sa.Column("run_idx", sa.Integer(), nullable=False),
        sa.Column("policy_id", sa.String(length=32), nullable=False),
        sa.Column("outcome", sa.String(length=10), nullable=False),
        sa.Column("halt_seq", sa.Integer(), nullable=True),
        sa.Column("halt_idx", sa.Integer(), nullable=True),
        sa.Column("strikes", sa.Integer(), nullable=False),
        sa.Column("warnings", sa.Integer(), nullable=False),
        sa.Column("blocks", sa.Integer(), nullable=False),
        sa.Column("saved", sa.Integer(), nullable=False),
        sa.ForeignKeyConstraint(["policy_id"], ["policies.id"], ondelete="CASCADE"),
        sa.ForeignKeyConstraint(["session_id"], ["sessions.id"], ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("session_id", "run_idx", "policy_id"),
    )
    op.create_table(
        "runs",
        sa.Column("session_id", sa.Integer(), nullable=False),
        sa.Column("idx", sa.Integer(), nullable=False),
        sa.Column("first_seq", sa.Integer(), nullable=False),
        sa.Column("last_seq", sa.Integer(), nullable=False),
        sa.Column("n_calls", sa.Integer(), nullable=False),
        sa.Column("started_at", sa.String(length=40), nullable=True),
        sa.Column("user_text", sa.Text(), nullable=True),
        sa.ForeignKeyConstraint(["session_id"], ["sessions.id"], ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("session_id", "idx"),
    )
    op.create_table(
        "session_stats",
        sa.Column("session_id", sa.Integer(), nullable=False),
        sa.Column("policy_id", sa.String(length=32), nullable=False),
        sa.Column("runs", sa.Integer(), nullable=False),
        sa.Column("calls", sa.Integer(), nullable=False),
        sa.Column("strikes", sa.Integer(), nullable=False),
        sa.Column("warnings", sa.Integer(), nullable=False),
        sa.Column("blocks", sa.Integer(), nullable=False),
        sa.Column("halts", sa.Integer(), nullable=False),
        sa.Column("saved", sa.Integer(), nullable=False),
        sa.Column("halted_runs", sa.Integer(), nullable=False),
        sa.Column("first_halt_seq", sa.Integer(), nullable=True),
        sa.ForeignKeyConstraint(["policy_id"], ["policies.id"], ondelete="CASCADE"),
        sa.ForeignKeyConstraint(["session_id"], ["sessions.id"], ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("session_id", "policy_id"),
    )
    op.create_index("ix_session_stats_policy", "session_stats", ["policy_id", "halts"], unique=False)


def downgrade() -> None:
    op.drop_index("ix_session_stats_policy", table_name="session_stats")
    op.drop_table("session_stats")
    op.drop_table("runs")
    op.drop_table("run_outcomes")
    op.drop_table("results")
    op.drop_table("labels")
    op.drop_table("events")
    op.drop_table("checks")
    op.drop_index("ix_calls_tool", table_name="calls")
    op.drop_table("calls")
    op.drop_table("sessions")
    op.drop_index("ix_ingest_errors_source", table_name="ingest_errors")
    op.drop_table("ingest_errors")
    op.drop_table("sources")
    op.drop_table("policies")
