"""A proposal stores the delivery its reviewer approved (SPEC FOUR-5): where it goes
and how its answer is read, as its digest covers it. NULL for proposals made before.

Revision ID: 0012
Revises: 0011
"""

import sqlalchemy as sa
from alembic import op

revision = "0012"
down_revision = "0011"
branch_labels = None
depends_on = None


def upgrade():
    with op.batch_alter_table("action_proposals", schema=None) as batch_op:
        batch_op.add_column(sa.Column("delivery_json", sa.Text(), nullable=True))


def downgrade():
    with op.batch_alter_table("action_proposals", schema=None) as batch_op:
        batch_op.drop_column("delivery_json")
