"""The moderator's queue (SPEC QUEUE, issue 25): one row per reported subject, the
report's reason and subject, who opened a proactive report, and each queue's
time-to-decide target. Existing reports are grouped into subjects here.

Revision ID: 0016
Revises: 0015
"""

from datetime import UTC, datetime

import sqlalchemy as sa
from alembic import op

from app.domain.bulk.subjects import canonical_reference, subject_kind
from app.domain.queue import ReportFacts, summarize

revision = "0016"
down_revision = "0015"
branch_labels = None
depends_on = None


def _add_reference(table: str, column: str, target: str) -> None:
    """A nullable reference column, as a plain ADD COLUMN on SQLite (no table rebuild)."""
    if op.get_bind().dialect.name == "sqlite":
        op.execute(f"ALTER TABLE {table} ADD COLUMN {column} VARCHAR(200) REFERENCES {target} (id)")
    else:
        op.add_column(table, sa.Column(column, sa.String(200), sa.ForeignKey(f"{target}.id"), nullable=True))


def upgrade():
    op.create_table(
        "report_subjects",
        sa.Column("id", sa.String(200), primary_key=True),
        sa.Column("installation_id", sa.String(200), sa.ForeignKey("installations.id"), nullable=False),
        sa.Column("reference", sa.String(500), nullable=False),
        sa.Column("kind", sa.String(50), nullable=False),
        sa.Column("state", sa.String(20), nullable=False),
        sa.Column("open_count", sa.Integer(), nullable=False),
        sa.Column("report_count", sa.Integer(), nullable=False),
        sa.Column("waiting_since", sa.DateTime(timezone=True), nullable=False),
        sa.Column("first_reported_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("last_reported_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("queue_id", sa.String(200), sa.ForeignKey("queues.id"), nullable=True),
        sa.Column("categories", sa.Text(), nullable=False),
        sa.Column("reasons", sa.Text(), nullable=False),
        sa.Column("preview", sa.Text(), nullable=False),
        sa.Column("author_reference", sa.String(500), nullable=True),
        sa.Column("author_name", sa.String(200), nullable=True),
        sa.Column("search_text", sa.Text(), nullable=False),
        sa.Column("claimed_by_id", sa.String(200), sa.ForeignKey("operator_users.id"), nullable=True),
        sa.Column("claimed_until", sa.DateTime(timezone=True), nullable=True),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("updated_at", sa.DateTime(timezone=True), nullable=False),
        sa.UniqueConstraint("installation_id", "reference", name="uq_report_subjects_installation_id_reference"),
    )
    for name, columns in (
        ("ix_report_subjects_oldest", ["installation_id", "state", "waiting_since", "id"]),
        ("ix_report_subjects_newest", ["installation_id", "state", "last_reported_at", "id"]),
        ("ix_report_subjects_most", ["installation_id", "state", "open_count", "id"]),
        ("ix_report_subjects_queue", ["installation_id", "state", "queue_id", "waiting_since", "id"]),
        ("ix_report_subjects_claimed", ["installation_id", "claimed_by_id", "claimed_until"]),
    ):
        op.create_index(name, "report_subjects", columns)
    op.add_column("reports", sa.Column("reason", sa.String(100), nullable=False, server_default=""))
    _add_reference("reports", "subject_id", "report_subjects")
    _add_reference("reports", "opened_by_id", "operator_users")
    op.create_index("ix_reports_subject", "reports", ["subject_id", "state", "created_at"])
    op.add_column("queues", sa.Column("decide_within_seconds", sa.Integer(), nullable=True))
    _group_existing_reports()


def _moment(value):
    if isinstance(value, str):
        value = datetime.fromisoformat(value)
    return value.replace(tzinfo=UTC) if value.tzinfo is None else value.astimezone(UTC)


def _group_existing_reports() -> None:
    """Give every report that a platform sent its subject row (a bulk batch's own case
    has none)."""
    bind = op.get_bind()
    rows = bind.execute(sa.text(
        "SELECT r.id, r.installation_id, r.state, r.queue_id, r.category, r.summary, r.created_at,"
        " t.target_reference, t.kind, e.content_text, e.author_reference, e.author_name"
        " FROM reports r JOIN report_targets t ON t.report_id = r.id AND t.position = 0"
        " LEFT JOIN report_evidence e ON e.report_target_id = t.id"
        " WHERE r.id NOT IN (SELECT report_id FROM bulk_batches WHERE report_id IS NOT NULL)"
    )).all()
    groups: dict[tuple[str, str], list] = {}
    for row in rows:
        groups.setdefault((row.installation_id, canonical_reference(row.target_reference)), []).append(row)
    now = datetime.now(UTC)
    for number, ((installation_id, reference), reports) in enumerate(sorted(groups.items())):
        facts = [ReportFacts(_moment(r.created_at), r.state == "open", r.queue_id, r.category or "", "",
                             r.summary or "", r.content_text, r.author_reference, r.author_name, r.id) for r in reports]
        summary = summarize(reference, facts)
        subject_id = f"sub_m{number:09d}"
        bind.execute(sa.text(
            "INSERT INTO report_subjects (id, installation_id, reference, kind, state, open_count, report_count,"
            " waiting_since, first_reported_at, last_reported_at, queue_id, categories, reasons, preview,"
            " author_reference, author_name, search_text, created_at, updated_at) VALUES (:id, :inst, :ref, :kind,"
            " :state, :open, :total, :waiting, :first, :last, :queue, :cats, :reasons, :preview, :aref, :aname,"
            " :search, :now, :now)"
        ), dict(id=subject_id, inst=installation_id, ref=reference[:500], kind=subject_kind(reference),
                state=summary.state.value, open=summary.open_count, total=summary.report_count,
                waiting=_stored(bind, summary.waiting_since), first=_stored(bind, summary.first_reported_at),
                last=_stored(bind, summary.last_reported_at), queue=summary.queue_id, cats=summary.categories,
                reasons=summary.reasons, preview=summary.preview, aref=summary.author_reference,
                aname=summary.author_name, search=summary.search_text, now=_stored(bind, now)))
        bind.execute(sa.text("UPDATE reports SET subject_id = :sid WHERE id IN :ids").bindparams(
            sa.bindparam("ids", expanding=True)), dict(sid=subject_id, ids=[r.id for r in reports]))


def _stored(bind, value: datetime):
    """As UTCDateTime stores it: naive UTC text on SQLite."""
    return value.replace(tzinfo=None) if bind.dialect.name == "sqlite" else value


def downgrade():
    op.drop_column("queues", "decide_within_seconds")
    op.drop_index("ix_reports_subject", table_name="reports")
    for column in ("opened_by_id", "subject_id", "reason"):
        if op.get_bind().dialect.name == "sqlite":
            op.execute(f"ALTER TABLE reports DROP COLUMN {column}")
        else:
            op.drop_column("reports", column)
    for name in ("claimed", "queue", "most", "newest", "oldest"):
        op.drop_index(f"ix_report_subjects_{name}", table_name="report_subjects")
    op.drop_table("report_subjects")
