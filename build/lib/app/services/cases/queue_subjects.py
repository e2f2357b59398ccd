"""The queue's subject rows: kept in step with their reports, claimed by one
moderator at a time, and decided as one (SPEC QUEUE-1, QUEUE-2, QUEUE-3).

A subject's row is recomputed from its reports (`app.models.queue.aggregate_sql`, the SQL
twin of `app.domain.queue.aggregate`, then `summary_of`) in the transaction that adds or
decides one of them, under a lock on the row, so two reports arriving at once are both
counted.
"""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import select, update

from app.domain.bulk.subjects import canonical_reference, subject_kind
from app.domain.clock import clock_utc, utcnow
from app.domain.errors import ApiError
from app.domain.queue import SubjectState, claim_active, claim_blocks, claim_until, summary_of
from app.models import OperatorUser, ReportSubject, claim_blocks_sql, insert_ignore
from app.models.queue import aggregate_sql
from app.models.base import new_id
from app.services.uow import Actor, unit_of_work


def subject_for(session, installation_id: str, reference: str, now: datetime) -> ReportSubject:
    """The subject row for `reference` (any spelling), made on first sight.

    Args:
        reference: a report's first target, e.g. ``post:123`` or an at-uri.
        now: the report's arrival (ISO-8601 UTC moment) for a new row.
    """
    canonical = canonical_reference(reference)[:500]
    insert_ignore(session, ReportSubject, dict(
        id=new_id("sub"), installation_id=installation_id, reference=canonical, kind=subject_kind(canonical),
        state=SubjectState.OPEN.value, open_count=0, report_count=0, waiting_since=now, first_reported_at=now,
        last_reported_at=now, categories="", reasons="", preview="", search_text="", created_at=now, updated_at=now,
    ))
    return session.scalar(select(ReportSubject).where(
        ReportSubject.installation_id == installation_id, ReportSubject.reference == canonical))


def refresh_subjects(session, subject_ids, now: datetime | None = None) -> None:
    """Recompute each subject's row from its reports (QUEUE-1), locking the rows in
    id order (no deadlock between two refreshes). Call after the reports changed and
    were flushed, in the same transaction. A subject that has just been decided
    releases its claim: nothing is left to hold."""
    now = now or utcnow()
    for subject_id in sorted({sid for sid in subject_ids if sid}):
        subject = session.scalar(select(ReportSubject).where(ReportSubject.id == subject_id).with_for_update())
        totals = aggregate_sql(session, subject_id)
        if subject is None or totals is None:
            continue
        summary = summary_of(subject.reference, totals)
        for name, value in vars(summary).items():
            setattr(subject, name, value.value if isinstance(value, SubjectState) else value)
        if summary.state is SubjectState.DONE:
            subject.claimed_by_id = subject.claimed_until = None
        subject.updated_at = now
    session.flush()


def ensure_decidable_by(session, subject_id: str | None, operator: OperatorUser, now: datetime) -> None:
    """QUEUE-2: refuse a decision on a subject another moderator holds.

    Raises:
        ApiError: 409 ``subject_claimed`` naming who holds it and until when.
    """
    if subject_id is None:
        return
    subject = session.get(ReportSubject, subject_id)
    if subject is not None and claim_blocks(subject.claimed_by_id, subject.claimed_until, operator.id, now):
        raise _claimed_error(session, subject)


def ensure_reports_decidable_by(session, report_ids, operator: OperatorUser, now: datetime) -> None:
    """QUEUE-2 for a decision over many reports (a bulk action's, BULK-9): refuse it
    while another moderator holds the subject of one of them.

    Raises:
        ApiError: 409 ``subject_claimed`` naming up to three such subjects.
    """
    from app.models import Report

    held = session.scalars(
        select(ReportSubject.reference).join(Report, Report.subject_id == ReportSubject.id)
        .where(Report.id.in_(list(report_ids)), claim_blocks_sql(operator.id, now)).distinct()
        .order_by(ReportSubject.reference).limit(4)
    ).all()
    if held:
        named = ", ".join(held[:3]) + (" and more" if len(held) > 3 else "")
        raise ApiError(409, "subject_claimed",
                       f"Another moderator is working on {named}; wait for their claim to end or leave "
                       "those subjects out of the selection.")


def _claimed_error(session, subject: ReportSubject) -> ApiError:
    holder = session.get(OperatorUser, subject.claimed_by_id)
    name = holder.display_name if holder else "another moderator"
    return ApiError(409, "subject_claimed",
                    f"{name} is working on this subject until {clock_utc(subject.claimed_until)}; "
                    "wait for them to release it or for the claim to expire.")


def _load(session, operator: OperatorUser, subject_id: str, *, lock: bool = False) -> ReportSubject:
    query = select(ReportSubject).where(ReportSubject.id == subject_id,
                                        ReportSubject.installation_id == operator.installation_id)
    subject = session.scalar(query.with_for_update() if lock else query)
    if subject is None:
        raise ApiError(404, "subject_not_found", "No such subject in the queue.")
    return subject


def claim_subject(operator: OperatorUser, subject_id: str, seconds: int | None = None) -> datetime:
    """Claim a subject: assign it to `operator` until the claim expires (QUEUE-2).
    Claiming one's own subject again extends it.

    Args:
        seconds: how long, 60 .. 28,800; QUEUE_CLAIM_SECONDS (900) when None.

    Returns:
        When the claim expires (UTC).

    Raises:
        ApiError: 404 ``subject_not_found``; 409 ``subject_claimed`` (held by
            another), ``subject_not_open`` (nothing left to decide); 400
            ``queue_claim_invalid``.
    """
    from flask import current_app

    now = utcnow()
    until = claim_until(now, seconds if seconds is not None else current_app.config["QUEUE_CLAIM_SECONDS"])
    with unit_of_work() as uow:
        session = uow.session
        subject = _load(session, operator, subject_id)
        if subject.state != SubjectState.OPEN:
            raise ApiError(409, "subject_not_open", "Every report about this subject is decided; nothing to claim.")
        taken = session.execute(
            update(ReportSubject)
            .where(ReportSubject.id == subject.id, ~claim_blocks_sql(operator.id, now))
            .values(claimed_by_id=operator.id, claimed_until=until, updated_at=now)
            .execution_options(synchronize_session=False)
        ).rowcount
        if not taken:
            session.refresh(subject)
            raise _claimed_error(session, subject)
        uow.audit(operator.installation_id, f"subject-claimed:{subject.id}:{operator.id}:{now.isoformat()}",
                  "queue.subject_claimed", Actor("operator", operator.id), "report_subject", subject.id,
                  {"reference": subject.reference, "claimed_until": until.isoformat()})
        uow.commit()
    return until


def release_subject(operator: OperatorUser, subject_id: str) -> None:
    """Give a claimed subject back to the queue (QUEUE-2). Only its holder releases it;
    an expired claim needs no release.

    Raises:
        ApiError: 404 ``subject_not_found``; 409 ``subject_not_claimed_by_you``.
    """
    now = utcnow()
    with unit_of_work() as uow:
        session = uow.session
        subject = _load(session, operator, subject_id, lock=True)
        if not claim_active(subject.claimed_by_id, subject.claimed_until, now) or subject.claimed_by_id != operator.id:
            raise ApiError(409, "subject_not_claimed_by_you", "You do not hold a claim on this subject.")
        subject.claimed_by_id = subject.claimed_until = None
        subject.updated_at = now
        uow.audit(operator.installation_id, f"subject-released:{subject.id}:{operator.id}:{now.isoformat()}",
                  "queue.subject_released", Actor("operator", operator.id), "report_subject", subject.id,
                  {"reference": subject.reference})
        uow.commit()
