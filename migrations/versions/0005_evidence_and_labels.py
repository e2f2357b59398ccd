"""What a reviewer sees (SPEC REV-1..3): the platform's evidence per reported target
(immutable: the database refuses UPDATE), readable labels for codes, and the index
that serves a subject's history.

Revision ID: 0005
Revises: 0002
"""

import sqlalchemy as sa
from alembic import op

revision = "0005"
down_revision = "0004"
branch_labels = None
depends_on = None


def upgrade():
    op.create_table(
        "report_evidence",
        sa.Column("id", sa.String(length=200), nullable=False),
        sa.Column("installation_id", sa.String(length=200), nullable=False),
        sa.Column("report_id", sa.String(length=200), nullable=False),
        sa.Column("report_target_id", sa.String(length=200), nullable=False),
        sa.Column("target_reference", sa.String(length=500), nullable=False),
        sa.Column("content_text", sa.Text(), nullable=True),
        sa.Column("author_reference", sa.String(length=500), nullable=True),
        sa.Column("author_name", sa.String(length=200), nullable=True),
        sa.Column("media_json", sa.Text(), nullable=False),
        sa.Column("permalink", sa.String(length=2000), nullable=True),
        sa.Column("posted_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("evidence_digest", sa.String(length=100), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(
            ["installation_id"], ["installations.id"], name=op.f("fk_report_evidence_installation_id_installations")
        ),
        sa.ForeignKeyConstraint(["report_id"], ["reports.id"], name=op.f("fk_report_evidence_report_id_reports")),
        sa.ForeignKeyConstraint(
            ["report_target_id"], ["report_targets.id"], name=op.f("fk_report_evidence_report_target_id_report_targets")
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_report_evidence")),
        sa.UniqueConstraint("report_target_id", name=op.f("uq_report_evidence_report_target_id")),
    )
    with op.batch_alter_table("report_evidence", schema=None) as batch_op:
        batch_op.create_index(batch_op.f("ix_report_evidence_report_id"), ["report_id"], unique=False)
        batch_op.create_index("ix_report_evidence_author", ["installation_id", "author_reference"], unique=False)
    with op.batch_alter_table("report_targets", schema=None) as batch_op:
        batch_op.create_index("ix_report_targets_subject", ["installation_id", "target_reference"], unique=False)
    # REV-4: what undid an action
    with op.batch_alter_table("action_proposals", schema=None) as batch_op:
        batch_op.create_index("ix_action_proposals_compensates", ["compensates_proposal_id"], unique=False)
    with op.batch_alter_table("appeal_corrections", schema=None) as batch_op:
        batch_op.create_index("ix_appeal_corrections_original", ["original_proposal_id"], unique=False)

    op.create_table(
        "code_labels",
        sa.Column("id", sa.String(length=200), nullable=False),
        sa.Column("installation_id", sa.String(length=200), nullable=False),
        sa.Column("kind", sa.String(length=40), nullable=False),
        sa.Column("code", sa.String(length=200), nullable=False),
        sa.Column("label", sa.String(length=100), nullable=False),
        sa.Column("updated_by", sa.String(length=200), nullable=True),
        sa.Column("updated_at", sa.DateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(
            ["installation_id"], ["installations.id"], name=op.f("fk_code_labels_installation_id_installations")
        ),
        sa.ForeignKeyConstraint(["updated_by"], ["operator_users.id"], name=op.f("fk_code_labels_updated_by_operator_users")),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_code_labels")),
        sa.UniqueConstraint("installation_id", "kind", "code", name=op.f("uq_code_labels_installation_id_kind_code")),
    )
    create_evidence_immutable_triggers()


# REV-1: evidence is stored once and never changed.
def create_evidence_immutable_triggers():
    if op.get_bind().dialect.name == "postgresql":
        op.execute(
            """
            CREATE FUNCTION report_evidence_immutable() RETURNS trigger AS $$
            BEGIN
                RAISE EXCEPTION 'report_evidence is immutable (UPDATE refused)'
                    USING ERRCODE = 'insufficient_privilege';
            END;
            $$ LANGUAGE plpgsql
            """
        )
        op.execute(
            "CREATE TRIGGER report_evidence_no_update BEFORE UPDATE ON report_evidence "
            "FOR EACH ROW EXECUTE FUNCTION report_evidence_immutable()"
        )
    else:
        op.execute(
            "CREATE TRIGGER report_evidence_no_update BEFORE UPDATE ON report_evidence "
            "BEGIN SELECT RAISE(ABORT, 'report_evidence is immutable'); END"
        )


def downgrade():
    if op.get_bind().dialect.name == "postgresql":
        op.execute("DROP TRIGGER IF EXISTS report_evidence_no_update ON report_evidence")
        op.execute("DROP FUNCTION IF EXISTS report_evidence_immutable()")
    else:
        op.execute("DROP TRIGGER IF EXISTS report_evidence_no_update")
    op.drop_table("code_labels")
    with op.batch_alter_table("appeal_corrections", schema=None) as batch_op:
        batch_op.drop_index("ix_appeal_corrections_original")
    with op.batch_alter_table("action_proposals", schema=None) as batch_op:
        batch_op.drop_index("ix_action_proposals_compensates")
    with op.batch_alter_table("report_targets", schema=None) as batch_op:
        batch_op.drop_index("ix_report_targets_subject")
    with op.batch_alter_table("report_evidence", schema=None) as batch_op:
        batch_op.drop_index("ix_report_evidence_author")
        batch_op.drop_index(batch_op.f("ix_report_evidence_report_id"))
    op.drop_table("report_evidence")
