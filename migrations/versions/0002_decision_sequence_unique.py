"""One sequence number per decision of a report: "latest decision" is never ambiguous,
and two decisions recorded at the same moment cannot both land.

Revision ID: 0002
Revises: 0001
"""

from alembic import op

revision = "0002"
down_revision = "0001"
branch_labels = None
depends_on = None


def upgrade():
    with op.batch_alter_table("decisions", schema=None) as batch_op:
        batch_op.create_unique_constraint(batch_op.f("uq_decisions_report_id_seq"), ["report_id", "seq"])


def downgrade():
    with op.batch_alter_table("decisions", schema=None) as batch_op:
        batch_op.drop_constraint(batch_op.f("uq_decisions_report_id_seq"), type_="unique")
