"""Temporary and scheduled actions (SPEC TEMP-1..4): a component version's duration
and planned reversal; a proposal's ``not_before``, its temporary plan and the
original it reverses.

Revision ID: 0006
Revises: 0005
"""

import sqlalchemy as sa
from alembic import op

revision = "0006"
down_revision = "0005"
branch_labels = None
depends_on = None


def upgrade():
    with op.batch_alter_table("component_versions", schema=None) as batch_op:
        batch_op.add_column(sa.Column("temporary_json", sa.Text(), nullable=True))
    with op.batch_alter_table("action_proposals", schema=None) as batch_op:
        batch_op.add_column(sa.Column("not_before", sa.DateTime(timezone=True), nullable=True))
        batch_op.add_column(sa.Column("temporary_json", sa.Text(), nullable=True))
        batch_op.add_column(sa.Column("reverses_proposal_id", sa.String(length=700), nullable=True))
        batch_op.create_foreign_key(
            batch_op.f("fk_action_proposals_reverses_proposal_id_action_proposals"),
            "action_proposals",
            ["reverses_proposal_id"],
            ["id"],
        )
        batch_op.create_index(batch_op.f("ix_action_proposals_reverses_proposal_id"), ["reverses_proposal_id"])


def downgrade():
    with op.batch_alter_table("action_proposals", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_action_proposals_reverses_proposal_id"))
        batch_op.drop_constraint(
            batch_op.f("fk_action_proposals_reverses_proposal_id_action_proposals"), type_="foreignkey"
        )
        batch_op.drop_column("reverses_proposal_id")
        batch_op.drop_column("temporary_json")
        batch_op.drop_column("not_before")
    with op.batch_alter_table("component_versions", schema=None) as batch_op:
        batch_op.drop_column("temporary_json")
