"""Erasure and retention of personal data (SPEC OPS-4). Filled in by the OPS-4 work.

Revision ID: 0021
Revises: 0020
"""

revision = "0021"
down_revision = "0020"
branch_labels = None
depends_on = None


def upgrade() -> None:
    pass


def downgrade() -> None:
    pass
