"""Operator invitations (FOUR-6): accounts are created with no usable password and a
one-time, expiring link (only its SHA-256 is stored) with which the new operator sets
their own.

Revision ID: 0011
Revises: 0010
"""

import sqlalchemy as sa
from alembic import op

revision = "0011"
down_revision = "0010"
branch_labels = None
depends_on = None


def upgrade():
    op.create_table(
        "operator_invitations",
        sa.Column("id", sa.String(length=200), nullable=False),
        sa.Column("installation_id", sa.String(length=200), nullable=False),
        sa.Column("operator_id", sa.String(length=200), nullable=False),
        sa.Column("token_hash", sa.String(length=100), nullable=False),
        sa.Column("created_by", sa.String(length=200), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("expires_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("used_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("revoked_at", sa.DateTime(timezone=True), nullable=True),
        sa.ForeignKeyConstraint(
            ["installation_id"],
            ["installations.id"],
            name=op.f("fk_operator_invitations_installation_id_installations"),
        ),
        sa.ForeignKeyConstraint(
            ["operator_id"], ["operator_users.id"], name=op.f("fk_operator_invitations_operator_id_operator_users")
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_operator_invitations")),
        sa.UniqueConstraint("token_hash", name=op.f("uq_operator_invitations_token_hash")),
    )
    op.create_index("ix_operator_invitations_installation_id", "operator_invitations", ["installation_id"])
    op.create_index("ix_operator_invitations_operator_id", "operator_invitations", ["operator_id"])


def downgrade():
    op.drop_index("ix_operator_invitations_operator_id", table_name="operator_invitations")
    op.drop_index("ix_operator_invitations_installation_id", table_name="operator_invitations")
    op.drop_table("operator_invitations")
