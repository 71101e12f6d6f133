"""Members keyed on the identity their provider vouches for: members.issuer and members.subject
(the ID token's `iss` and `sub`), unique together. A member with a subject is matched by it alone
(a team whose provider does not verify emails names its issuer: docs/team.md); one without is
matched by a verified email, as before.

Revision ID: 0013_member_identity.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0013_member_identity"
down_revision = "0012_team"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("members") as batch:
        batch.add_column(sa.Column("issuer", sa.Text()))
        batch.add_column(sa.Column("subject", sa.Text()))
    op.create_index("ix_members_identity", "members", ["issuer", "subject"], unique=True)


def downgrade() -> None:
    op.drop_index("ix_members_identity", table_name="members")
    with op.batch_alter_table("members") as batch:
        batch.drop_column("subject")
        batch.drop_column("issuer")
