"""Single sign-on through OpenID Connect (SPEC OPS-1): how each operator signs in
(password or sso), the identity-provider identity (issuer, subject) of SSO operators,
and the installation's group→role mapping (set by a four-eyes change).

Revision ID: 0020
Revises: 0019
"""

import sqlalchemy as sa
from alembic import op

revision = "0020"
down_revision = "0019"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("operator_users") as batch:
        batch.add_column(
            sa.Column("sign_in_method", sa.String(length=20), server_default="password", nullable=False)
        )
    op.create_table(
        "sso_identities",
        sa.Column("id", sa.String(length=200), nullable=False),
        sa.Column("installation_id", sa.String(length=200), nullable=False),
        sa.Column("operator_id", sa.String(length=200), nullable=False),
        sa.Column("issuer", sa.String(length=500), nullable=False),
        sa.Column("subject", sa.String(length=255), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("last_sign_in_at", sa.DateTime(timezone=True), nullable=True),
        sa.ForeignKeyConstraint(
            ["installation_id"], ["installations.id"], name=op.f("fk_sso_identities_installation_id_installations")
        ),
        sa.ForeignKeyConstraint(
            ["operator_id"], ["operator_users.id"], name=op.f("fk_sso_identities_operator_id_operator_users")
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_sso_identities")),
        sa.UniqueConstraint("issuer", "subject", name="uq_sso_identities_issuer_subject"),
        sa.UniqueConstraint("operator_id", name=op.f("uq_sso_identities_operator_id")),
    )
    op.create_index("ix_sso_identities_installation_id", "sso_identities", ["installation_id"])
    op.create_table(
        "sso_group_roles",
        sa.Column("installation_id", sa.String(length=200), nullable=False),
        sa.Column("group_name", sa.String(length=200), nullable=False),
        sa.Column("role", sa.String(length=50), nullable=False),
        sa.ForeignKeyConstraint(
            ["installation_id"], ["installations.id"], name=op.f("fk_sso_group_roles_installation_id_installations")
        ),
        sa.PrimaryKeyConstraint("installation_id", "group_name", "role", name=op.f("pk_sso_group_roles")),
    )


def downgrade() -> None:
    op.drop_table("sso_group_roles")
    op.drop_index("ix_sso_identities_installation_id", table_name="sso_identities")
    op.drop_table("sso_identities")
    with op.batch_alter_table("operator_users") as batch:
        batch.drop_column("sign_in_method")
