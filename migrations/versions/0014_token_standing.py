"""A token's standing (FOUR-8, issue 22): from when it may speak for an action's
result. Existing tokens stand since their creation; a token approved as the
successor of others of its integration takes over the earliest of theirs.

Revision ID: 0014
Revises: 0013
"""

import sqlalchemy as sa
from alembic import op

revision = "0014"
down_revision = "0013"
branch_labels = None
depends_on = None


def upgrade():
    with op.batch_alter_table("integration_tokens") as batch:
        batch.add_column(sa.Column("standing_since", sa.DateTime(timezone=True), nullable=True))
    op.execute("UPDATE integration_tokens SET standing_since = created_at")
    with op.batch_alter_table("integration_tokens") as batch:
        batch.alter_column("standing_since", existing_type=sa.DateTime(timezone=True), nullable=False)


def downgrade():
    with op.batch_alter_table("integration_tokens") as batch:
        batch.drop_column("standing_since")
