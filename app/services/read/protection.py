"""Protected-subject marks for a whole page at once (SPEC POL-4): the mark is shown
wherever the subject appears, and a page loads the marks of all its rows in one
query, never one per row."""

from __future__ import annotations

from collections.abc import Iterable

from sqlalchemy import or_, select

from app.domain.bulk.subjects import canonical_reference
from app.domain.protected import ProtectionMark
from app.models import ProtectedSubject, ReportEvidence


def mark_of(row: ProtectedSubject) -> ProtectionMark:
    """A `ProtectedSubject` row as pages show it."""
    return ProtectionMark(row.id, row.kind, row.subject_reference, row.reason, row.marked_at, row.marked_change_id)


def protected_marks(session, installation_id: str, references: Iterable[str | None],
                    report_ids: Iterable[str | None] = ()) -> dict[str, ProtectionMark]:
    """The protected marks in force for a page's subjects, in one query (POL-4).

    Args:
        session: the database session.
        installation_id: the installation whose marks count.
        references: the subjects the page shows (any spelling; None skipped).
        report_ids: the reports whose evidence names the authors of those subjects:
            a subject whose author is marked ``author`` is covered by that mark.

    Returns:
        canonical reference -> its `ProtectionMark` (the oldest when several cover it);
        subjects not protected are absent. No query when `references` is empty.
    """
    wanted = {canonical_reference(r) for r in references if r}
    if not wanted:
        return {}
    reports = {r for r in report_ids if r}
    P, E = ProtectedSubject, ReportEvidence
    live = [P.installation_id == installation_id, P.unmarked_at.is_(None)]
    if reports:
        statement = (
            select(P, E.target_reference)
            .outerjoin(E, (E.author_reference == P.subject_reference) & (P.kind == "author")
                       & E.report_id.in_(reports) & (E.installation_id == installation_id))
            .where(*live, or_(P.subject_reference.in_(wanted), E.id.is_not(None)))
        )
    else:
        statement = select(P, None).where(*live, P.subject_reference.in_(wanted))
    marks: dict[str, ProtectionMark] = {}
    for row, via in session.execute(statement.order_by(P.marked_at, P.id)):
        mark = mark_of(row)
        if row.subject_reference in wanted:
            marks.setdefault(row.subject_reference, mark)
        if via and canonical_reference(via) in wanted:  # content by a protected author
            marks.setdefault(canonical_reference(via), mark)
    return marks
