"""A short excerpt of the platform's answer on each attempt row (SPEC QUEUE-6), so a
page can say what the platform answered, not only its status.

Revision ID: 0017
Revises: 0016
"""

import sqlalchemy as sa
from alembic import op

revision = "0017"
down_revision = "0016"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.add_column("connection_attempts", sa.Column("response_excerpt", sa.String(300), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("connection_attempts") as batch:
        batch.drop_column("response_excerpt")
