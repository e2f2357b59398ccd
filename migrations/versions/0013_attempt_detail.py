"""A connection attempt's detail: a short reason in words, e.g. the TLS verifier's
("self-signed certificate") for ``tls_certificate_invalid`` (DLV-4, issue 22).

Revision ID: 0013
Revises: 0012
"""

import sqlalchemy as sa
from alembic import op

revision = "0013"
down_revision = "0012"
branch_labels = None
depends_on = None


def upgrade():
    with op.batch_alter_table("connection_attempts") as batch:
        batch.add_column(sa.Column("detail", sa.String(200), nullable=True))


def downgrade():
    with op.batch_alter_table("connection_attempts") as batch:
        batch.drop_column("detail")
