"""Demo data for the moderator's queue (issue 25): several subjects, one account with
30 reports, reasons, evidence with authors, a queue with a time-to-decide target and
subjects past it (QUEUE-1, QUEUE-4). Seeded once, through the platform's intake."""

from __future__ import annotations

from datetime import timedelta

from sqlalchemy import select, update

from app.domain.clock import utcnow
from app.extensions import db
from app.models import Installation, Integration, Queue, Report, ReportSubject
from app.services.cases.queue_subjects import refresh_subjects
from app.services.cases.reports import intake_report
from app.services.uow import unit_of_work

BUSY_ACCOUNT = "user:5120"
BUSY_REPORTS = 30
QUEUE_TARGET_SECONDS = 4 * 3600
REASONS = ("harassment", "spam", "hate")
# (reference, author reference, author name, text, reports, hours ago)
OTHER_SUBJECTS = (
    ("post:2001", "user:7001", "late_tackle", "Ref should be banned for life, find where he lives", 4, 30),
    ("post:2002", "user:7002", "cheapseats", "BUY CHEAP TICKETS >>> example.invalid/tix", 7, 6),
    ("post:2003", "user:7003", "offside_olly", "That goal was never offside", 1, 1),
    ("user:7004", "user:7004", "spam_bot_4000", "Follow for free crypto", 3, 2),
)

QUEUE_DEMO_REPORTS = BUSY_REPORTS + sum(subject[4] for subject in OTHER_SUBJECTS)  # 45


def _intake(integration_id: str, external_id: str, reference: str, reason: str, evidence: dict) -> str:
    return intake_report({
        "external_id": external_id, "reason": reason, "category": "abuse",
        "summary": f"Reported for {reason}.",
        "targets": [{"reference": reference, "kind": reference.split(":", 1)[0], "evidence": evidence}],
    }, integration_id).report_id


def _age(report_ids: list[str], hours: float) -> None:
    """Move the reports back in time (the demo's past), then their subjects' rows."""
    with unit_of_work() as uow:
        then = utcnow() - timedelta(hours=hours)
        uow.session.execute(update(Report).where(Report.id.in_(report_ids)).values(created_at=then)
                            .execution_options(synchronize_session=False))
        subject_ids = uow.session.scalars(select(Report.subject_id).where(Report.id.in_(report_ids))).all()
        refresh_subjects(uow.session, subject_ids)
        uow.commit()


def seed_queue_demo(slug: str = "demo") -> bool:
    """Fill the demo installation's queue once (False when already filled).

    The General queue gets a four-hour time to decide; the busy account's oldest
    reports are two days old, so it and one post are overdue.
    """
    installation = db.session.scalar(select(Installation).where(Installation.slug == slug))
    if installation is None or db.session.scalar(select(ReportSubject.id).where(
            ReportSubject.installation_id == installation.id, ReportSubject.reference == BUSY_ACCOUNT)):
        return False
    integration_id = db.session.scalar(select(Integration.id).where(Integration.installation_id == installation.id))
    with unit_of_work() as uow:
        uow.session.execute(update(Queue).where(Queue.installation_id == installation.id)
                            .values(decide_within_seconds=QUEUE_TARGET_SECONDS))
        uow.commit()
    busy = [_intake(integration_id, f"demo-queue-{BUSY_ACCOUNT}-{n}", BUSY_ACCOUNT, REASONS[n % 3],
                    {"content_text": f"Message {n + 1} from goalline_greg: you'll regret showing up Saturday",
                     "author_reference": BUSY_ACCOUNT, "author_name": "goalline_greg"})
            for n in range(BUSY_REPORTS)]
    _age(busy[:10], 48)
    for reference, author, name, text, count, hours in OTHER_SUBJECTS:
        ids = [_intake(integration_id, f"demo-queue-{reference}-{n}", reference, REASONS[(n + len(text)) % 3],
                       {"content_text": text, "author_reference": author, "author_name": name})
               for n in range(count)]
        _age(ids, hours)
    return True
