"""Platform secrets encrypted at rest (SPEC OPS-3). Filled in by the OPS-3 work.

Revision ID: 0018
Revises: 0017
"""

revision = "0018"
down_revision = "0017"
branch_labels = None
depends_on = None


def upgrade() -> None:
    pass


def downgrade() -> None:
    pass
