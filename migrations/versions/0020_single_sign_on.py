"""Single sign-on through OpenID Connect (SPEC OPS-1). Filled in by the OPS-1 work.

Revision ID: 0020
Revises: 0019
"""

revision = "0020"
down_revision = "0019"
branch_labels = None
depends_on = None


def upgrade() -> None:
    pass


def downgrade() -> None:
    pass
