"""Bulk batches and their items (SPEC BULK, issue 24): a dry run's frozen item list,
one approval over the batch by its digest, and each item's proposal.

Revision ID: 0015
Revises: 0014
"""

import sqlalchemy as sa
from alembic import op

revision = "0015"
down_revision = "0014"
branch_labels = None
depends_on = None


def upgrade():
    op.create_table(
        "bulk_batches",
        sa.Column("id", sa.String(200), primary_key=True),
        sa.Column("installation_id", sa.String(200), sa.ForeignKey("installations.id"), nullable=False),
        sa.Column("public_reference", sa.String(40), nullable=False),
        sa.Column("kind", sa.String(20), nullable=False),
        sa.Column("undoes_batch_id", sa.String(200), sa.ForeignKey("bulk_batches.id"), nullable=True),
        sa.Column("selection_json", sa.Text(), nullable=False),
        sa.Column("workflow_version_id", sa.String(200), sa.ForeignKey("workflow_versions.id"), nullable=True),
        sa.Column("node_id", sa.String(200), nullable=True),
        sa.Column("component_version_id", sa.String(200), sa.ForeignKey("component_versions.id"), nullable=False),
        sa.Column("action_code", sa.String(200), nullable=False),
        sa.Column("decision_code", sa.String(100), nullable=False),
        sa.Column("reason", sa.Text(), nullable=False),
        sa.Column("report_id", sa.String(200), sa.ForeignKey("reports.id"), nullable=True),
        sa.Column("state", sa.String(20), nullable=False),
        sa.Column("maker_id", sa.String(200), sa.ForeignKey("operator_users.id"), nullable=False),
        sa.Column("approved_by", sa.String(200), sa.ForeignKey("operator_users.id"), nullable=True),
        sa.Column("approved_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("ended_by", sa.String(200), sa.ForeignKey("operator_users.id"), nullable=True),
        sa.Column("dry_run_digest", sa.String(100), nullable=False),
        sa.Column("batch_digest", sa.String(100), nullable=True),
        sa.Column("counts_json", sa.Text(), nullable=False),
        sa.Column("item_count", sa.Integer(), nullable=False),
        sa.Column("drift_share", sa.Float(), nullable=True),
        sa.Column("expires_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("submitted_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("finished_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("updated_at", sa.DateTime(timezone=True), nullable=False),
        sa.UniqueConstraint("installation_id", "public_reference", name="uq_bulk_batches_installation_id_public_reference"),
    )
    op.create_index("ix_bulk_batches_list", "bulk_batches", ["installation_id", "created_at", "id"])
    op.create_index("ix_bulk_batches_undoes_batch_id", "bulk_batches", ["undoes_batch_id"])
    # a plain ADD COLUMN (no table rebuild on SQLite, which would lose the partial
    # index's WHERE); the reference is declared inline
    if op.get_bind().dialect.name == "sqlite":
        op.execute("ALTER TABLE action_proposals ADD COLUMN bulk_batch_id VARCHAR(200) REFERENCES bulk_batches (id)")
    else:
        op.add_column(
            "action_proposals",
            sa.Column("bulk_batch_id", sa.String(200), sa.ForeignKey("bulk_batches.id"), nullable=True),
        )
    op.create_index("ix_action_proposals_bulk", "action_proposals", ["bulk_batch_id", "state"])
    # the subject an action names, indexed: "already applied" and "under way" (BULK-2)
    op.add_column("action_proposals", sa.Column("target_reference", sa.String(500), nullable=True))
    if op.get_bind().dialect.name == "sqlite":
        op.execute("UPDATE action_proposals SET target_reference = substr(json_extract(target_json, '$.reference'), 1, 500)")
    else:
        op.execute("UPDATE action_proposals SET target_reference = left(target_json::json ->> 'reference', 500)")
    op.create_index(
        "ix_action_proposals_subject", "action_proposals", ["installation_id", "target_reference", "action_code"]
    )
    op.create_table(
        "bulk_items",
        sa.Column("id", sa.String(200), primary_key=True),
        sa.Column("installation_id", sa.String(200), sa.ForeignKey("installations.id"), nullable=False),
        sa.Column("batch_id", sa.String(200), sa.ForeignKey("bulk_batches.id"), nullable=False),
        sa.Column("position", sa.Integer(), nullable=False),
        sa.Column("subject_reference", sa.String(500), nullable=False),
        sa.Column("kind", sa.String(50), nullable=False),
        sa.Column("line", sa.Integer(), nullable=True),
        sa.Column("outcome", sa.String(30), nullable=False),
        sa.Column("detail", sa.String(300), nullable=True),
        sa.Column("report_ids_json", sa.Text(), nullable=False),
        sa.Column("proposal_id", sa.String(700), sa.ForeignKey("action_proposals.id"), nullable=True),
        sa.Column("undoes_proposal_id", sa.String(700), sa.ForeignKey("action_proposals.id"), nullable=True),
        sa.Column("skip_code", sa.String(200), nullable=True),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.UniqueConstraint("batch_id", "position", name="uq_bulk_items_batch_id_position"),
        sa.UniqueConstraint("proposal_id", name="uq_bulk_items_proposal_id"),
    )
    op.create_index("ix_bulk_items_outcome", "bulk_items", ["batch_id", "outcome", "position"])
    op.create_table(
        "bulk_caps",
        sa.Column("installation_id", sa.String(200), sa.ForeignKey("installations.id"), primary_key=True),
        sa.Column("role", sa.String(50), primary_key=True),
        sa.Column("max_items", sa.Integer(), nullable=False),
        sa.Column("updated_at", sa.DateTime(timezone=True), nullable=False),
    )


def downgrade():
    op.drop_table("bulk_caps")
    op.drop_index("ix_bulk_items_outcome", table_name="bulk_items")
    op.drop_table("bulk_items")
    op.drop_index("ix_action_proposals_subject", table_name="action_proposals")
    op.drop_index("ix_action_proposals_bulk", table_name="action_proposals")
    op.drop_column("action_proposals", "target_reference")
    if op.get_bind().dialect.name == "sqlite":
        op.execute("ALTER TABLE action_proposals DROP COLUMN bulk_batch_id")
    else:
        op.drop_column("action_proposals", "bulk_batch_id")
    op.drop_index("ix_bulk_batches_undoes_batch_id", table_name="bulk_batches")
    op.drop_index("ix_bulk_batches_list", table_name="bulk_batches")
    op.drop_table("bulk_batches")
