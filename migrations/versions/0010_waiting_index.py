"""A batch claim's companions (DLV-1) are read from a partial index of the waiting
proposals, by component version and due time, instead of sorting every due row of
the table for each batch.

Revision ID: 0010
Revises: 0009
"""

import sqlalchemy as sa
from alembic import op

revision = "0010"
down_revision = "0009"
branch_labels = None
depends_on = None

WAITING = sa.text("state IN ('queued', 'failed')")


def upgrade():
    op.create_index(
        "ix_action_proposals_waiting",
        "action_proposals",
        ["component_version_id", "next_attempt_at", "id"],
        postgresql_where=WAITING,
        sqlite_where=WAITING,
    )


def downgrade():
    op.drop_index("ix_action_proposals_waiting", table_name="action_proposals")
