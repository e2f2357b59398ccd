"""The subjects of a bulk action drawn from the database (SPEC BULK-1, BULK-9).

Two sources besides a pasted list: a filter over open reports, and one author's
subjects. A subject is a report's first target; the open reports about it are decided
together with it (BULK-9). Each source is two queries whatever the size: the subjects
in the order of their oldest report, at most the cap plus one (so an oversize
selection is refused without loading it), then the report ids of those subjects.
"""

from __future__ import annotations

from dataclasses import dataclass

from sqlalchemy import and_, func, or_, select
from sqlalchemy.orm import Session

from app.domain.bulk.report_filter import FILTER_INVALID, ReportFilter, check_filter_reference
from app.domain.bulk.subjects import EMPTY, OVER_CAP
from app.domain.case_states import ReportState
from app.domain.errors import ApiError
from app.models import Integration, Queue, Report, ReportEvidence, ReportTarget

R, T, E = Report, ReportTarget, ReportEvidence


@dataclass(frozen=True)
class SourceSubject:
    """One subject of a bulk action.

    Attributes:
        reference: the subject as the platform names it (a first target's reference).
        kind: the kind its oldest report's first target carries.
        report_ids: its open reports selected with it, oldest first (decided together, BULK-9).
        line: its line in a pasted list; None for the database sources.
    """

    reference: str
    kind: str
    report_ids: tuple[str, ...]
    line: int | None = None


def subjects_from_reports(
    session: Session, installation_id: str, report_filter: ReportFilter, *, cap: int
) -> list[SourceSubject]:
    """The subjects of the installation's open reports that match every criterion (SPEC BULK-1).

    Args:
        session: a database session (read only).
        installation_id: the installation whose reports are searched.
        report_filter: from `parse_report_filter`: category equal, queue and
            integration by id or slug, the first target's reference, the author named by
            the first target's evidence, received in ``[received_from, received_to)``.
        cap: the most subjects one bulk action may name (BULK-5).

    Returns:
        One subject per first-target reference with all its matching open reports
        (oldest first), subjects in the order of their oldest report (time, id).

    Raises:
        ApiError: 400 ``bulk_filter_invalid`` for a queue or integration the
            installation does not have; 400 ``bulk_selection_over_cap`` (naming the
            cap and that more were found); 400 ``bulk_selection_empty``.
    """
    conditions = [R.state == ReportState.OPEN.value, *_criteria(session, installation_id, report_filter)]
    found = _subjects(session, installation_id, conditions, report_filter.author_reference is not None, cap)
    subjects = [subject for subject in found if subject.report_ids]  # a report closed between the two queries
    if not subjects:
        raise _empty()
    return subjects


def subjects_of_author(
    session: Session, installation_id: str, author_reference: str, *, cap: int
) -> list[SourceSubject]:
    """Every subject of the installation's reports whose evidence names one author (SPEC BULK-1).

    Args:
        session: a database session (read only).
        installation_id: the installation whose reports are searched.
        author_reference: the author, as the platform names them (``user:42``), matched
            against the evidence of each report's first target.
        cap: the most subjects one bulk action may name (BULK-5).

    Returns:
        One subject per first-target reference of the author's reports, whatever
        their state, with the open ones among them (oldest first; possibly none),
        subjects in the order of their oldest report (time, id).

    Raises:
        ApiError: 400 ``bulk_filter_invalid`` for a reference the intake would refuse;
            400 ``bulk_selection_over_cap``; 400 ``bulk_selection_empty``.
    """
    check_filter_reference(author_reference, "author_reference")
    return _subjects(session, installation_id, [E.author_reference == author_reference], True, cap, open_ids=True)


def _criteria(session: Session, installation_id: str, report_filter: ReportFilter) -> list:
    """The filter's criteria as SQL conditions on reports, first targets and their evidence."""
    f = report_filter
    given = [
        (f.category, lambda: R.category == f.category),
        (f.queue, lambda: R.queue_id == _resolve(session, Queue, installation_id, f.queue, "queue")),
        (f.integration, lambda: R.integration_id == _resolve(session, Integration, installation_id, f.integration)),
        (f.target_reference, lambda: T.target_reference == f.target_reference),
        (f.author_reference, lambda: E.author_reference == f.author_reference),
        (f.received_from, lambda: R.created_at >= f.received_from),
        (f.received_to, lambda: R.created_at < f.received_to),
    ]
    return [condition() for value, condition in given if value is not None]


def _resolve(session: Session, model, installation_id: str, value: str, field: str = "integration") -> str:
    """The id of the installation's queue or integration named by id or slug."""
    found = session.scalar(
        select(model.id)
        .where(model.installation_id == installation_id, or_(model.id == value, model.slug == value))
        .order_by((model.id == value).desc())
        .limit(1)
    )
    if found is None:
        raise ApiError(400, FILTER_INVALID, f"No {field} {value!r} in this installation: give its slug or id.", field)
    return found


def _matching(installation_id: str, conditions: list, with_evidence: bool):
    """Reports of the installation joined to their first target (and its evidence)."""
    query = select(R.id, R.created_at, T.target_reference, T.kind).join(T, and_(T.report_id == R.id, T.position == 0))
    if with_evidence:
        query = query.join(E, E.report_target_id == T.id)
    return query.where(R.installation_id == installation_id, *conditions)


def _subjects(
    session: Session, installation_id: str, conditions: list, with_evidence: bool, cap: int, open_ids: bool = False
) -> list[SourceSubject]:
    """Two queries: the subjects (each with its oldest report), at most cap + 1, in the
    order of that report; then the report ids of every matching report (open ones only
    when `open_ids`), which belong to those subjects since there are at most `cap`."""
    base = _matching(installation_id, conditions, with_evidence)
    first = func.row_number().over(partition_by=T.target_reference, order_by=(R.created_at, R.id))
    ranked = base.add_columns(first.label("rank")).subquery()
    oldest = (
        select(ranked.c.target_reference, ranked.c.kind)
        .where(ranked.c.rank == 1)
        .order_by(ranked.c.created_at, ranked.c.id)
        .limit(cap + 1)
    )
    rows = session.execute(oldest).all()
    if len(rows) > cap:
        raise ApiError(
            400, OVER_CAP,
            f"At least {len(rows):,} subjects match; at most {cap:,} may be acted on at once. "
            "Narrow the selection, or ask an admin for a larger cap.",
        )
    if not rows:
        raise _empty()
    reports = base.where(R.state == ReportState.OPEN.value) if open_ids else base
    ids: dict[str, list[str]] = {reference: [] for reference, _ in rows}
    for report_id, _, reference, _ in session.execute(reports.order_by(R.created_at, R.id)):
        if reference in ids:  # one reported since the first query may name a new subject
            ids[reference].append(report_id)
    return [SourceSubject(reference, kind, tuple(ids[reference]), None) for reference, kind in rows]


def _empty() -> ApiError:
    return ApiError(400, EMPTY, "Nothing matches this selection: no subject was found. Widen the criteria.")
