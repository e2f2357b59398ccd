"""Erasure and retention of personal data (SPEC OPS-4): erasure requests decided by a
second admin, each installation's retention period, and on the rows that held a
subject's personal data the mark of when and why it was erased. The evidence stays
immutable except for that one move: its personal fields emptied together with the mark
set, once; its digest stays, so what a reviewer saw can still be named.

Revision ID: 0021
Revises: 0020
"""

import sqlalchemy as sa
from alembic import op

revision = "0021"
down_revision = "0020"
branch_labels = None
depends_on = None

MARKED = ("report_evidence", "reports", "report_subjects", "appeals")


def upgrade() -> None:
    op.create_table(
        "erasure_requests",
        sa.Column("id", sa.String(200), nullable=False),
        sa.Column("installation_id", sa.String(200), nullable=False),
        sa.Column("kind", sa.String(20), nullable=False),
        sa.Column("subject_reference", sa.String(500), nullable=True),
        sa.Column("retention_days", sa.Integer(), nullable=True),
        sa.Column("reason", sa.Text(), nullable=False),
        sa.Column("state", sa.String(20), nullable=False),
        sa.Column("requested_by", sa.String(200), nullable=False),
        sa.Column("decided_by", sa.String(200), nullable=True),
        sa.Column("decided_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("counts_json", sa.Text(), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(
            ["installation_id"], ["installations.id"], name=op.f("fk_erasure_requests_installation_id_installations")
        ),
        sa.ForeignKeyConstraint(
            ["requested_by"], ["operator_users.id"], name=op.f("fk_erasure_requests_requested_by_operator_users")
        ),
        sa.ForeignKeyConstraint(
            ["decided_by"], ["operator_users.id"], name=op.f("fk_erasure_requests_decided_by_operator_users")
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_erasure_requests")),
    )
    op.create_index("ix_erasure_requests_list", "erasure_requests", ["installation_id", "state", "created_at"])
    op.create_table(
        "retention_settings",
        sa.Column("id", sa.String(200), nullable=False),
        sa.Column("installation_id", sa.String(200), nullable=False),
        sa.Column("closed_case_days", sa.Integer(), nullable=True),
        sa.Column("request_id", sa.String(200), nullable=True),
        sa.Column("updated_at", sa.DateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(
            ["installation_id"], ["installations.id"], name=op.f("fk_retention_settings_installation_id_installations")
        ),
        sa.ForeignKeyConstraint(
            ["request_id"], ["erasure_requests.id"], name=op.f("fk_retention_settings_request_id_erasure_requests")
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_retention_settings")),
        sa.UniqueConstraint("installation_id", name=op.f("uq_retention_settings_installation_id")),
    )
    for table in MARKED:  # plain ADD COLUMN: no table rebuild, the evidence triggers stay
        op.add_column(table, sa.Column("erased_at", sa.DateTime(timezone=True), nullable=True))
        op.add_column(table, sa.Column("erased_reason", sa.String(20), nullable=True))
    replace_evidence_trigger()


# The one UPDATE of evidence allowed (OPS-4): not erased before, erased now, the personal
# fields emptied, every other column as it was. Anything else is refused, as in 0005.
_UNCHANGED = ("id", "installation_id", "report_id", "report_target_id", "target_reference",
              "author_reference", "posted_at", "evidence_digest", "created_at")


def _erasure_only(old: str, new: str, same: str) -> str:
    kept = " AND ".join(f"{new}.{column} {same} {old}.{column}" for column in _UNCHANGED)
    return (f"{old}.erased_at IS NULL AND {new}.erased_at IS NOT NULL "
            f"AND {new}.erased_reason IN ('request', 'retention') "
            f"AND {new}.content_text IS NULL AND {new}.author_name IS NULL AND {new}.permalink IS NULL "
            f"AND {new}.media_json = '[]' AND {kept}")


def replace_evidence_trigger() -> None:
    if op.get_bind().dialect.name == "postgresql":
        op.execute("DROP TRIGGER IF EXISTS report_evidence_no_update ON report_evidence")
        op.execute(
            f"""
            CREATE OR REPLACE FUNCTION report_evidence_immutable() RETURNS trigger AS $$
            BEGIN
                IF {_erasure_only('OLD', 'NEW', 'IS NOT DISTINCT FROM')} THEN
                    RETURN NEW;
                END IF;
                RAISE EXCEPTION 'report_evidence is immutable (UPDATE refused; only erasure is allowed)'
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
        op.execute("DROP TRIGGER IF EXISTS report_evidence_no_update")
        op.execute(
            "CREATE TRIGGER report_evidence_no_update BEFORE UPDATE ON report_evidence "
            f"WHEN NOT ({_erasure_only('OLD', 'NEW', 'IS')}) "
            "BEGIN SELECT RAISE(ABORT, 'report_evidence is immutable'); END"
        )


def restore_evidence_trigger() -> None:
    """0005's trigger: every UPDATE refused."""
    if op.get_bind().dialect.name == "postgresql":
        op.execute(
            """
            CREATE OR REPLACE FUNCTION report_evidence_immutable() RETURNS trigger AS $$
            BEGIN
                RAISE EXCEPTION 'report_evidence is immutable (UPDATE refused)'
                    USING ERRCODE = 'insufficient_privilege';
            END;
            $$ LANGUAGE plpgsql
            """
        )
    else:
        op.execute("DROP TRIGGER IF EXISTS report_evidence_no_update")
        op.execute(
            "CREATE TRIGGER report_evidence_no_update BEFORE UPDATE ON report_evidence "
            "BEGIN SELECT RAISE(ABORT, 'report_evidence is immutable'); END"
        )


def downgrade() -> None:
    restore_evidence_trigger()
    for table in MARKED:
        with op.batch_alter_table(table) as batch_op:
            batch_op.drop_column("erased_reason")
            batch_op.drop_column("erased_at")
    if op.get_bind().dialect.name != "postgresql":  # the rebuild dropped it
        restore_evidence_trigger()
    op.drop_table("retention_settings")
    op.drop_index("ix_erasure_requests_list", table_name="erasure_requests")
    op.drop_table("erasure_requests")
