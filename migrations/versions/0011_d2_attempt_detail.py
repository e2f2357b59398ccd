"""A connection attempt's detail: a short reason in words, e.g. the TLS verifier's
("self-signed certificate") for ``tls_certificate_invalid`` (DLV-4, issue 22).

Revision ID: 0011_d2
Revises: 0010
"""

import sqlalchemy as sa
from alembic import op

revision = "0011_d2"
down_revision = "0010"
branch_labels = None
depends_on = None


def upgrade():
    with op.batch_alter_table("connection_attempts") as batch:
        batch.add_column(sa.Column("detail", sa.String(200), nullable=True))


def downgrade():
    with op.batch_alter_table("connection_attempts") as batch:
        batch.drop_column("detail")
