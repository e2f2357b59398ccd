"""Configuration changes waiting for a second admin (SPEC FOUR-2).

Revision ID: 0004
Revises: 0002
"""

import sqlalchemy as sa
from alembic import op

revision = "0004"
down_revision = "0003"
branch_labels = None
depends_on = None


def upgrade():
    op.create_table(
        "config_changes",
        sa.Column("id", sa.String(length=200), nullable=False),
        sa.Column("installation_id", sa.String(length=200), nullable=False),
        sa.Column("kind", sa.String(length=40), nullable=False),
        sa.Column("subject_type", sa.String(length=50), nullable=False),
        sa.Column("subject_id", sa.String(length=200), nullable=True),
        sa.Column("summary", sa.String(length=500), nullable=False),
        sa.Column("content_json", sa.Text(), nullable=False),
        sa.Column("digest", sa.String(length=80), nullable=False),
        sa.Column("reasons_json", sa.Text(), nullable=False),
        sa.Column("secrets_json", sa.Text(), nullable=True),
        sa.Column("proposed_by", sa.String(length=200), nullable=False),
        sa.Column("state", sa.String(length=20), nullable=False),
        sa.Column("decided_by", sa.String(length=200), nullable=True),
        sa.Column("decided_via", sa.String(length=20), nullable=True),
        sa.Column("reason", sa.Text(), nullable=True),
        sa.Column("result_json", sa.Text(), nullable=True),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("decided_at", sa.DateTime(timezone=True), nullable=True),
        sa.CheckConstraint(
            "state IN ('pending', 'approved', 'rejected', 'applied')", name=op.f("ck_config_changes_state")
        ),
        sa.ForeignKeyConstraint(
            ["installation_id"], ["installations.id"], name=op.f("fk_config_changes_installation_id_installations")
        ),
        sa.ForeignKeyConstraint(
            ["proposed_by"], ["operator_users.id"], name=op.f("fk_config_changes_proposed_by_operator_users")
        ),
        sa.ForeignKeyConstraint(
            ["decided_by"], ["operator_users.id"], name=op.f("fk_config_changes_decided_by_operator_users")
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_config_changes")),
    )
    with op.batch_alter_table("config_changes", schema=None) as batch_op:
        batch_op.create_index(
            "ix_config_changes_installation_state", ["installation_id", "state", "created_at"], unique=False
        )


def downgrade():
    with op.batch_alter_table("config_changes", schema=None) as batch_op:
        batch_op.drop_index("ix_config_changes_installation_state")
    op.drop_table("config_changes")
