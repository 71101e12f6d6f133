"""Labels judge sessions: loop / normal / unclear, where the loop is, and who labelled it.

Adds labels.loop_first / loop_last (1-based call positions of the loop in the session),
labels.labelled_by (`imported` from a CSV, or `dashboard`), renames the old words (real_loop →
loop, not_loop → normal) and keeps one label per session: the newest loop label (its range: that
run's calls), else the newest label. `run_idx` stays as the run the person was looking at
(-1: the whole session, as an import says).

Revision ID: 0003_labels.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0003_labels"
down_revision = "0002"
branch_labels = None
depends_on = None


def _collapse(conn) -> None:
    """One row per session (the labels table is a person's clicks: small, done in Python)."""
    rows = conn.execute(sa.text("SELECT id, session_id, run_idx, label, created_at FROM labels "
                                "ORDER BY session_id, created_at, id")).all()
    by_session: dict[int, list] = {}
    for r in rows:
        by_session.setdefault(r.session_id, []).append(r)
    for sid, labs in by_session.items():
        loops = [r for r in labs if r.label == "loop"]
        keep = (loops or labs)[-1]
        for r in labs:
            if r.id != keep.id:
                conn.execute(sa.text("DELETE FROM labels WHERE id = :i"), {"i": r.id})
        if keep.label == "loop":
            n = [c for (c,) in conn.execute(sa.text(
                "SELECT n_calls FROM runs WHERE session_id = :s ORDER BY idx"), {"s": sid})]
            run = keep.run_idx
            if 0 <= run < len(n) and n[run] > 0:
                first = sum(n[:run]) + 1
                conn.execute(sa.text("UPDATE labels SET loop_first = :f, loop_last = :l WHERE id = :i"),
                             {"f": first, "l": first + n[run] - 1, "i": keep.id})
            else:  # a run with no calls holds no loop a guard could halt: keep the judgement, unsure
                conn.execute(sa.text("UPDATE labels SET label = 'unclear' WHERE id = :i"), {"i": keep.id})


def upgrade() -> None:
    op.add_column("labels", sa.Column("loop_first", sa.Integer(), nullable=True))
    op.add_column("labels", sa.Column("loop_last", sa.Integer(), nullable=True))
    op.add_column("labels", sa.Column("labelled_by", sa.String(length=20), nullable=False,
                                      server_default="dashboard"))
    conn = op.get_bind()
    conn.execute(sa.text("UPDATE labels SET label = 'loop' WHERE label = 'real_loop'"))
    conn.execute(sa.text("UPDATE labels SET label = 'normal' WHERE label = 'not_loop'"))
    _collapse(conn)
    op.create_index("uq_labels_session", "labels", ["session_id"], unique=True)


def downgrade() -> None:
    op.drop_index("uq_labels_session", table_name="labels")
    conn = op.get_bind()
    conn.execute(sa.text("DELETE FROM labels WHERE label = 'unclear'"))
    conn.execute(sa.text("UPDATE labels SET label = 'real_loop' WHERE label = 'loop'"))
    conn.execute(sa.text("UPDATE labels SET label = 'not_loop' WHERE label = 'normal'"))
    conn.execute(sa.text("UPDATE labels SET run_idx = 0 WHERE run_idx < 0"))
    with op.batch_alter_table("labels") as batch:
        batch.drop_column("labelled_by")
        batch.drop_column("loop_last")
        batch.drop_column("loop_first")
