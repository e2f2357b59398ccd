"""A second factor for password accounts (SPEC OPS-2): each operator's TOTP seed
(sealed at rest, OPS-3), when enrolment was confirmed, the last time step a code was
accepted for (no replay), whether the account must keep a second factor (once
enrolled, also after a reset), and recovery codes kept only as hashes.

Revision ID: 0019
Revises: 0018
"""

import sqlalchemy as sa
from alembic import op

revision = "0019"
down_revision = "0018"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("operator_users") as batch:
        batch.add_column(sa.Column("totp_secret", sa.String(1000), nullable=True))
        batch.add_column(sa.Column("totp_confirmed_at", sa.DateTime(timezone=True), nullable=True))
        batch.add_column(sa.Column("totp_last_step", sa.Integer(), nullable=True))
        batch.add_column(
            sa.Column("second_factor_required", sa.Boolean(), nullable=False, server_default=sa.false())
        )
    op.create_table(
        "operator_recovery_codes",
        sa.Column("id", sa.String(length=200), nullable=False),
        sa.Column("operator_id", sa.String(length=200), nullable=False),
        sa.Column("code_hash", sa.String(length=100), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("used_at", sa.DateTime(timezone=True), nullable=True),
        sa.ForeignKeyConstraint(
            ["operator_id"], ["operator_users.id"], name=op.f("fk_operator_recovery_codes_operator_id_operator_users")
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_operator_recovery_codes")),
    )
    op.create_index("ix_operator_recovery_codes_operator_id", "operator_recovery_codes", ["operator_id"])
    # Sessions opened with the password alone end here: every account signs in again, and
    # reviewers and admins pass (or enrol) their second factor then.
    op.execute("UPDATE operator_users SET session_version = session_version + 1")


def downgrade() -> None:
    op.drop_index("ix_operator_recovery_codes_operator_id", table_name="operator_recovery_codes")
    op.drop_table("operator_recovery_codes")
    with op.batch_alter_table("operator_users") as batch:
        batch.drop_column("second_factor_required")
        batch.drop_column("totp_last_step")
        batch.drop_column("totp_confirmed_at")
        batch.drop_column("totp_secret")
