"""One subject of the moderator's queue: its row (for the page and for an htmx row
swap) and every report about it with its evidence (SPEC QUEUE-1, QUEUE-2, QUEUE-3)."""

from __future__ import annotations

from dataclasses import dataclass

from sqlalchemy import select
from sqlalchemy.orm import aliased

from app.domain.clock import utcnow
from app.extensions import db
from app.models import OperatorUser, Queue, Report, ReportEvidence, ReportSubject, ReportTarget

from .queue_pages import QueueRow, _row, with_marks

REPORTS_SHOWN = 500


@dataclass(frozen=True)
class SubjectReport:
    report: Report
    content_text: str | None
    author_name: str | None
    author_reference: str | None
    permalink: str | None
    opened_by: str | None  # the operator who opened it in the console (no platform report)


@dataclass(frozen=True)
class SubjectPage:
    row: QueueRow
    reports: list[SubjectReport]  # newest first, at most REPORTS_SHOWN
    more_reports: bool


def subject_row(operator: OperatorUser, subject_id: str) -> QueueRow | None:
    """The queue row of one subject of the operator's installation (None otherwise):
    the same facts the list shows, claim included (QUEUE-2)."""
    holder = aliased(OperatorUser)
    found = db.session.execute(
        select(ReportSubject, Queue.name, Queue.decide_within_seconds, holder.display_name)
        .outerjoin(Queue, Queue.id == ReportSubject.queue_id)
        .outerjoin(holder, holder.id == ReportSubject.claimed_by_id)
        .where(ReportSubject.id == subject_id, ReportSubject.installation_id == operator.installation_id)
    ).first()
    if found is None:
        return None
    subject, queue_name, target, holder_name = found
    [row] = with_marks([_row(subject, queue_name, target, holder_name, operator, utcnow())], operator.installation_id)
    return row


def subject_page(operator: OperatorUser, subject_id: str) -> SubjectPage | None:
    """The subject and its reports, newest first, each with its first target's
    evidence and who opened it when it was opened in the console (QUEUE-3)."""
    row = subject_row(operator, subject_id)
    if row is None:
        return None
    opener = aliased(OperatorUser)
    found = db.session.execute(
        select(Report, ReportEvidence.content_text, ReportEvidence.author_name, ReportEvidence.author_reference,
               ReportEvidence.permalink, opener.display_name)
        .join(ReportTarget, (ReportTarget.report_id == Report.id) & (ReportTarget.position == 0))
        .outerjoin(ReportEvidence, ReportEvidence.report_target_id == ReportTarget.id)
        .outerjoin(opener, opener.id == Report.opened_by_id)
        .where(Report.subject_id == subject_id)
        .order_by(Report.created_at.desc(), Report.id.desc())
        .limit(REPORTS_SHOWN + 1)
    ).all()
    reports = [SubjectReport(*item) for item in found[:REPORTS_SHOWN]]
    return SubjectPage(row, reports, len(found) > REPORTS_SHOWN)
