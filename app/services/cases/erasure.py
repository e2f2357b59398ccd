"""Erase personal data from a case's rows, keeping every digest (SPEC OPS-4).

`erase_reports` is the one place that knows which columns hold personal data: the
evidence's content text, author name, media links and permalink (the database lets
evidence change only this way, migration 0021), the report's summary, its appeals'
statements, and the queue row's copies (recomputed from what is left). Each write is
guarded by ``erased_at IS NULL``, so two erasures at once erase and count a row once.
References, digests, codes and times stay; the audit chain never held the text.

`erase_due_retention` is the sweep: the personal data of cases closed longer ago than
the installation's retention period.
"""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import asdict, dataclass
from datetime import datetime

from sqlalchemy import func, or_, select, update

from app.domain.bulk.subjects import canonical_reference
from app.domain.case_states import ReportState
from app.domain.clock import utcnow
from app.domain.personal_data import ErasedBy, retention_cutoff
from app.models import Appeal, Report, ReportEvidence, ReportSubject, ReportTarget, RetentionSetting, new_id
from app.services.cases.queue_subjects import refresh_subjects
from app.services.uow import Actor, unit_of_work

BATCH = 500
# Report states of a closed case: decided (no appeal open) or closed after its appeal.
CLOSED_STATES = (ReportState.DECIDED.value, ReportState.CLOSED.value)


@dataclass
class ErasedCounts:
    """How many rows an erasure emptied, per table (what the audit row says)."""

    evidence: int = 0
    reports: int = 0
    appeals: int = 0
    subjects: int = 0

    def as_dict(self) -> dict[str, int]:
        return asdict(self)

    @property
    def total(self) -> int:
        return self.evidence + self.reports + self.appeals + self.subjects


def subject_spellings(session, installation_id: str, reference: str) -> set[str]:
    """Every spelling of the subject `reference` names that the installation's rows
    store (OPS-4): the stored target and author references that `canonical_reference`
    reduces to the same subject (``User:77001`` for ``user:77001``, ``at://did:plc:abcd``
    for ``did:plc:abcd``), the one rule the queue groups spellings by (BULK-1, QUEUE-1).

    The database finds candidates on the installation's reference indexes by the part of
    the canonical form every spelling holds verbatim (after the scheme, whose case may
    differ); Python keeps those whose canonical form is the subject's.

    Args:
        reference: the subject's reference as the request typed it.

    Returns:
        The typed reference, its canonical form and every stored spelling of it.
    """
    canonical = canonical_reference(reference)
    scheme, colon, rest = canonical.partition(":")
    spellings = {reference, canonical}
    for table, column in ((ReportTarget, ReportTarget.target_reference),
                          (ReportEvidence, ReportEvidence.author_reference)):
        held = column.contains(rest, autoescape=True) if colon and rest else \
            func.lower(column).contains(canonical, autoescape=True)
        stored = session.scalars(select(column).where(table.installation_id == installation_id, held).distinct())
        spellings.update(s for s in stored if s and canonical_reference(s) == canonical)
    return spellings


def subject_report_ids(session, installation_id: str, spellings: set[str]) -> list[str]:
    """Ids of the reports about a subject, given its `subject_spellings`: a target naming
    it, evidence whose author it is, or the queue row for it."""
    spellings = sorted(spellings)
    by_target = select(ReportTarget.report_id).where(
        ReportTarget.installation_id == installation_id, ReportTarget.target_reference.in_(spellings))
    by_author = select(ReportEvidence.report_id).where(
        ReportEvidence.installation_id == installation_id, ReportEvidence.author_reference.in_(spellings))
    by_subject = select(Report.id).join(ReportSubject, ReportSubject.id == Report.subject_id).where(
        ReportSubject.installation_id == installation_id, ReportSubject.reference.in_(spellings))
    return sorted(set(session.scalars(by_target.union(by_author, by_subject)).all()))


def erase_reports(session, installation_id: str, report_ids: list[str], by: ErasedBy, now: datetime,
                  author_references: Collection[str] = ()) -> ErasedCounts:
    """Empty the personal data of these reports, in the caller's transaction (OPS-4).

    Args:
        session: the unit of work's session (the caller audits and commits).
        report_ids: the installation's reports to erase.
        by: `ErasedBy.REQUEST` or `ErasedBy.RETENTION`, stored as ``erased_reason``.
        now: the moment stored as ``erased_at``.
        author_references: also erase the queue rows naming this account as author
            (its `subject_spellings`).

    Returns:
        The rows emptied per table; rows erased before are not counted again.
    """
    counts = ErasedCounts()
    marks = {"erased_at": now, "erased_reason": by.value}
    for start in range(0, len(report_ids), BATCH):
        chunk = report_ids[start:start + BATCH]
        E = ReportEvidence
        counts.evidence += session.execute(
            update(E).where(E.installation_id == installation_id, E.report_id.in_(chunk), E.erased_at.is_(None))
            .values({E.content_text: None, E.author_name: None, E.permalink: None, E.media: [],
                     E.erased_at: now, E.erased_reason: by.value})
            .execution_options(synchronize_session=False)).rowcount
        counts.reports += session.execute(
            update(Report).where(Report.installation_id == installation_id, Report.id.in_(chunk),
                                 Report.erased_at.is_(None))
            .values(summary="", **marks).execution_options(synchronize_session=False)).rowcount
        counts.appeals += session.execute(
            update(Appeal).where(Appeal.installation_id == installation_id, Appeal.report_id.in_(chunk),
                                 Appeal.erased_at.is_(None))
            .values(statement="", **marks).execution_options(synchronize_session=False)).rowcount
    counts.subjects = _erase_subjects(session, installation_id, report_ids, by, now, author_references)
    session.expire_all()
    return counts


def _erase_subjects(session, installation_id, report_ids, by, now, author_references) -> int:
    """Recompute the queue rows of the erased reports from what is left (QUEUE-1): their
    preview, author name and search text came from the erased text. A row is marked
    erased once none of its reports holds personal data any more."""
    S = ReportSubject
    ids: set[str] = set()
    for start in range(0, len(report_ids), BATCH):
        ids.update(session.scalars(select(Report.subject_id).where(
            Report.id.in_(report_ids[start:start + BATCH]), Report.subject_id.is_not(None))).all())
    if author_references:
        ids.update(session.scalars(select(S.id).where(
            S.installation_id == installation_id, S.author_reference.in_(sorted(author_references)))).all())
    if not ids:
        return 0
    refresh_subjects(session, ids, now)
    kept = select(Report.id).where(Report.subject_id == S.id, Report.erased_at.is_(None)).exists()
    erased = 0
    for subject_id in sorted(ids):
        erased += session.execute(
            update(S).where(S.id == subject_id, S.erased_at.is_(None), ~kept)
            .values(erased_at=now, erased_reason=by.value)
            .execution_options(synchronize_session=False)).rowcount
    return erased


def retention_days(session, installation_id: str) -> int | None:
    """The installation's retention period in days (None: personal data is kept)."""
    return session.scalar(select(RetentionSetting.closed_case_days)
                          .where(RetentionSetting.installation_id == installation_id))


def due_report_ids(session, installation_id: str, days: int, now: datetime, limit: int = BATCH) -> list[str]:
    """Closed cases last changed before the retention period, not erased yet (OPS-4)."""
    cutoff = retention_cutoff(now, days)
    open_evidence = select(ReportEvidence.report_id).where(
        ReportEvidence.installation_id == installation_id, ReportEvidence.erased_at.is_(None))
    return list(session.scalars(
        select(Report.id).where(
            Report.installation_id == installation_id, Report.state.in_(CLOSED_STATES), Report.updated_at < cutoff,
            or_(Report.erased_at.is_(None), Report.id.in_(open_evidence)))
        .order_by(Report.updated_at, Report.id).limit(limit)).all())


def erase_due_retention(now: datetime | None = None) -> int:
    """The retention sweep (OPS-4): in every installation with a retention period, erase
    the personal data of cases closed longer ago, a batch per transaction, each batch
    audited ``erasure.retention`` with its counts. Safe to run twice at once (guarded
    writes: a row is erased and counted once).

    Returns:
        How many rows were erased in all.
    """
    from app.extensions import db

    now = now or utcnow()
    settings = db.session.execute(select(RetentionSetting.installation_id, RetentionSetting.closed_case_days)
                                  .where(RetentionSetting.closed_case_days.is_not(None))).all()
    db.session.rollback()
    erased = 0
    for installation_id, days in settings:
        while True:
            with unit_of_work() as uow:
                ids = due_report_ids(uow.session, installation_id, days, now)
                if not ids:
                    break
                counts = erase_reports(uow.session, installation_id, ids, ErasedBy.RETENTION, now)
                if counts.total:
                    uow.audit(installation_id, f"erasure-retention:{new_id('run')}", "erasure.retention",
                              Actor.system("retention"), "installation", installation_id,
                              {"retention_days": days, "reports": len(ids), "counts": counts.as_dict()})
                uow.commit()
            erased += counts.total
            if len(ids) < BATCH or not counts.total:
                break
    return erased
