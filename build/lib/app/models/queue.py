"""The moderator's queue: one row per reported subject (SPEC QUEUE-1), kept in step
with its reports in the same transaction that changes them, so the queue page reads
one indexed table whatever the number of reports.

The SQL twins of `app.domain.queue`'s claim and overdue rules live here;
`tests/models/test_queue_predicates.py` compares each pair.
"""

from __future__ import annotations

from datetime import datetime, timedelta

from sqlalchemy import ForeignKey, Index, String, Text, UniqueConstraint, and_, case, false, func, or_, select
from sqlalchemy.orm import Mapped, mapped_column
from sqlalchemy.sql.elements import ColumnElement

from app.domain.queue import SEARCHED_SUMMARIES, SubjectAggregate, SubjectState

from .base import Base, UTCDateTime, created_at_column, id_column, related, updated_at_column
from .integrations import Queue
from .tenancy import OperatorUser


class ReportSubject(Base):
    """A subject reports are about (the first target of each report, in one
    spelling), with the counts, reasons, age and claim the queue shows."""

    __tablename__ = "report_subjects"
    __table_args__ = (
        UniqueConstraint("installation_id", "reference"),
        Index("ix_report_subjects_oldest", "installation_id", "state", "waiting_since", "id"),
        Index("ix_report_subjects_newest", "installation_id", "state", "last_reported_at", "id"),
        Index("ix_report_subjects_most", "installation_id", "state", "open_count", "id"),
        Index("ix_report_subjects_queue", "installation_id", "state", "queue_id", "waiting_since", "id"),
        Index("ix_report_subjects_claimed", "installation_id", "claimed_by_id", "claimed_until"),
    )

    id: Mapped[str] = id_column("sub")
    installation_id: Mapped[str] = mapped_column(ForeignKey("installations.id"))
    reference: Mapped[str] = mapped_column(String(500))  # bulk.subjects.canonical_reference
    kind: Mapped[str] = mapped_column(String(50), default="content")
    state: Mapped[str] = mapped_column(String(20), default=SubjectState.OPEN.value)
    open_count: Mapped[int] = mapped_column(default=0)
    report_count: Mapped[int] = mapped_column(default=0)
    waiting_since: Mapped[datetime] = mapped_column(UTCDateTime())  # oldest open report (latest when done)
    first_reported_at: Mapped[datetime] = mapped_column(UTCDateTime())
    last_reported_at: Mapped[datetime] = mapped_column(UTCDateTime())
    queue_id: Mapped[str | None] = mapped_column(ForeignKey("queues.id"), nullable=True)
    categories: Mapped[str] = mapped_column(Text, default="")  # "|a|b|" (domain.queue.delimited)
    reasons: Mapped[str] = mapped_column(Text, default="")
    preview: Mapped[str] = mapped_column(Text, default="")
    author_reference: Mapped[str | None] = mapped_column(String(500), nullable=True)
    author_name: Mapped[str | None] = mapped_column(String(200), nullable=True)
    search_text: Mapped[str] = mapped_column(Text, default="")  # lower case
    claimed_by_id: Mapped[str | None] = mapped_column(ForeignKey("operator_users.id"), nullable=True)
    claimed_until: Mapped[datetime | None] = mapped_column(UTCDateTime(), nullable=True)
    created_at: Mapped[datetime] = created_at_column()
    updated_at: Mapped[datetime] = updated_at_column()

    queue: Mapped[Queue | None] = related()
    claimed_by: Mapped[OperatorUser | None] = related()


S = ReportSubject


def claim_active_sql(now: datetime) -> ColumnElement:
    """`domain.queue.claim_active`: someone holds an unexpired claim."""
    return and_(S.claimed_by_id.is_not(None), S.claimed_until.is_not(None), S.claimed_until > now)


def claim_blocks_sql(operator_id: str, now: datetime) -> ColumnElement:
    """`domain.queue.claim_blocks`: another moderator's unexpired claim (QUEUE-2)."""
    return and_(claim_active_sql(now), S.claimed_by_id != operator_id)


def overdue_sql(now: datetime, targets: dict[str, int]) -> ColumnElement:
    """`domain.queue.is_overdue` (QUEUE-4): open, and waiting since before now minus
    its queue's target. `targets` maps queue id to its time-to-decide in seconds
    (`queue_targets`); queues are few, so each becomes one comparison of a moment
    computed here, which both backends compare alike."""
    late = [and_(S.queue_id == queue_id, S.waiting_since < now - timedelta(seconds=seconds))
            for queue_id, seconds in sorted(targets.items())]
    return and_(S.state == SubjectState.OPEN.value, or_(*late)) if late else false()


def queue_targets(session, installation_id: str) -> dict[str, int]:
    """Each queue's time-to-decide target in seconds, for queues that have one."""
    rows = session.execute(select(Queue.id, Queue.decide_within_seconds).where(
        Queue.installation_id == installation_id, Queue.decide_within_seconds.is_not(None)))
    return {queue_id: seconds for queue_id, seconds in rows}


def aggregate_sql(session, subject_id: str) -> SubjectAggregate | None:
    """`domain.queue.aggregate` computed by the database (QUEUE-1): a handful of
    indexed queries whose cost barely grows with the subject's reports, where the
    domain's version reads every report. None for a subject without reports."""
    from .cases import Report, ReportTarget
    from .evidence import ReportEvidence

    R = Report
    mine = R.subject_id == subject_id
    is_open = R.state == "open"
    totals = session.execute(select(
        func.count(), func.count(case((is_open, 1))), func.min(R.created_at), func.max(R.created_at),
    ).where(mine)).one()
    count, open_count, first_at, last_at = totals
    if not count:
        return None
    newest = (R.created_at.desc(), R.id.desc())
    oldest_open = session.execute(select(R.created_at, R.queue_id).where(mine, is_open)
                                  .order_by(R.created_at, R.id).limit(1)).first()
    queue_id = oldest_open.queue_id if oldest_open else session.scalar(select(R.queue_id).where(mine).order_by(*newest).limit(1))
    counted = [mine, is_open] if open_count else [mine]
    labels = session.execute(select(R.category, R.reason).where(*counted).distinct()).all()
    latest_text = session.execute(
        select(ReportEvidence.content_text, ReportEvidence.author_reference, ReportEvidence.author_name)
        .select_from(R)
        .join(ReportTarget, (ReportTarget.report_id == R.id) & (ReportTarget.position == 0))
        .join(ReportEvidence, ReportEvidence.report_target_id == ReportTarget.id)
        .where(mine, or_(func.coalesce(ReportEvidence.content_text, "") != "",
                         func.coalesce(ReportEvidence.author_reference, "") != ""))
        .order_by(*newest).limit(1)
    ).first()
    latest_summary = session.scalar(select(R.summary).where(mine, R.summary != "").order_by(*newest).limit(1))
    summaries = session.scalars(select(R.summary).where(mine).order_by(*newest).limit(SEARCHED_SUMMARIES)).all()
    return SubjectAggregate(
        open_count=open_count, report_count=count,
        oldest_open_at=oldest_open.created_at if oldest_open else None, first_at=first_at, last_at=last_at,
        queue_id=queue_id,
        categories=frozenset(category for category, _ in labels if category),
        reasons=frozenset(reason for _, reason in labels if reason),
        latest_text=tuple(latest_text) if latest_text else None,
        latest_summary=latest_summary or "",
        summaries=tuple(summary for summary in reversed(summaries) if summary),
    )
