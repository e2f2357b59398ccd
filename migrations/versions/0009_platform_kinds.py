"""Real platforms (SPEC PLAT-1..4): an attempt row says which request of an attempt it
was (``purpose``: update, read-back, recheck), so one attempt may record several
requests; component references grow to hold a REST kind's outcome mapping.

Revision ID: 0009
Revises: 0005
"""

import sqlalchemy as sa
from alembic import op

revision = "0009"
down_revision = "0007"
branch_labels = None
depends_on = None


def upgrade():
    with op.batch_alter_table("connection_attempts", schema=None) as batch_op:
        batch_op.add_column(sa.Column("purpose", sa.String(length=20), nullable=False, server_default="update"))
        batch_op.drop_constraint("uq_connection_attempts_proposal_id_attempt_number", type_="unique")
        batch_op.create_unique_constraint(
            "uq_connection_attempts_proposal_id_attempt_number_purpose", ["proposal_id", "attempt_number", "purpose"]
        )
    with op.batch_alter_table("component_versions", schema=None) as batch_op:
        batch_op.alter_column(
            "implementation_reference", existing_type=sa.String(length=500), type_=sa.String(length=8000)
        )


def downgrade():
    with op.batch_alter_table("component_versions", schema=None) as batch_op:
        batch_op.alter_column(
            "implementation_reference", existing_type=sa.String(length=8000), type_=sa.String(length=500)
        )
    with op.batch_alter_table("connection_attempts", schema=None) as batch_op:
        batch_op.drop_constraint("uq_connection_attempts_proposal_id_attempt_number_purpose", type_="unique")
        batch_op.create_unique_constraint(
            "uq_connection_attempts_proposal_id_attempt_number", ["proposal_id", "attempt_number"]
        )
        batch_op.drop_column("purpose")
