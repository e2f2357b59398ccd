"""Delivery when a platform is in trouble (SPEC CONN-1..3): each connection's health
row (circuit breaker, 429 pause, disabling) and the health settings of each
connection version (failure threshold, probe delays, failure window, rate limit).

Revision ID: 0007
Revises: 0006
"""

import sqlalchemy as sa
from alembic import op

revision = "0007"
down_revision = "0006"
branch_labels = None
depends_on = None


def upgrade():
    with op.batch_alter_table("connection_versions", schema=None) as batch_op:
        batch_op.add_column(sa.Column("breaker_failure_threshold", sa.Integer(), server_default="5", nullable=False))
        batch_op.add_column(sa.Column("breaker_first_probe_seconds", sa.Float(), server_default="30", nullable=False))
        batch_op.add_column(sa.Column("breaker_max_probe_seconds", sa.Float(), server_default="600", nullable=False))
        batch_op.add_column(sa.Column("failure_window_seconds", sa.Float(), server_default="86400", nullable=False))
        batch_op.add_column(sa.Column("rate_limit_per_second", sa.Float(), nullable=True))
    op.create_table(
        "connection_health",
        sa.Column("connection_id", sa.String(length=200), nullable=False),
        sa.Column("installation_id", sa.String(length=200), nullable=False),
        sa.Column("state", sa.String(length=20), nullable=False),
        sa.Column("consecutive_failures", sa.Integer(), nullable=False),
        sa.Column("failing_since", sa.DateTime(timezone=True), nullable=True),
        sa.Column("opened_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("probe_delay_seconds", sa.Float(), nullable=True),
        sa.Column("next_probe_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("probe_lease_expires_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("paused_until", sa.DateTime(timezone=True), nullable=True),
        sa.Column("disabled_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("disabled_reason", sa.String(length=20), nullable=True),
        sa.Column("version", sa.Integer(), nullable=False),
        sa.Column("updated_at", sa.DateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(
            ["connection_id"], ["connections.id"], name=op.f("fk_connection_health_connection_id_connections")
        ),
        sa.ForeignKeyConstraint(
            ["installation_id"], ["installations.id"], name=op.f("fk_connection_health_installation_id_installations")
        ),
        sa.PrimaryKeyConstraint("connection_id", name=op.f("pk_connection_health")),
    )
    with op.batch_alter_table("connection_health", schema=None) as batch_op:
        batch_op.create_index(batch_op.f("ix_connection_health_installation_id"), ["installation_id"], unique=False)


def downgrade():
    op.drop_table("connection_health")
    with op.batch_alter_table("connection_versions", schema=None) as batch_op:
        for column in (
            "rate_limit_per_second",
            "failure_window_seconds",
            "breaker_max_probe_seconds",
            "breaker_first_probe_seconds",
            "breaker_failure_threshold",
        ):
            batch_op.drop_column(column)
