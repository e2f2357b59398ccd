"""Subjects named by what they are, for a page's proposals at once (SPEC QUEUE-6)."""

from __future__ import annotations

from collections.abc import Iterable

from sqlalchemy import select

from app.domain.subject_names import SubjectName, is_account_target, name_subject
from app.extensions import db
from app.models import ActionProposal, ReportEvidence


def subject_names(proposals: Iterable[ActionProposal | None]) -> dict[str, SubjectName]:
    """The subject of each proposal (QUEUE-6): the account with its name for an account
    action, the content's reference otherwise.

    Args:
        proposals: the page's proposals (None entries are skipped).

    Returns:
        proposal id -> `SubjectName`. One query for the whole page, and none when no
        proposal acts on an account: the report's evidence says who wrote what.
    """
    rows = [p for p in proposals if p is not None]
    wanted = {(p.report_id, str(p.target.get("reference", ""))) for p in rows if is_account_target(p.target)}
    authors: dict[tuple[str, str], tuple[str | None, str | None]] = {}
    names: dict[str, str] = {}
    if wanted:
        report_ids = {report_id for report_id, _ in wanted}
        found = db.session.execute(
            select(ReportEvidence.report_id, ReportEvidence.target_reference,
                   ReportEvidence.author_reference, ReportEvidence.author_name)
            .where(ReportEvidence.report_id.in_(report_ids))
        )
        for report_id, reference, author_reference, author_name in found:
            authors[(report_id, reference)] = (author_reference, author_name)
            if author_reference and author_name:
                names[author_reference] = author_name
    named = {}
    for p in rows:
        reference = str(p.target.get("reference", "")) if isinstance(p.target, dict) else ""
        author_reference, author_name = authors.get((p.report_id, reference), (None, None))
        if author_reference is None and reference in names:  # the target names the account itself
            author_reference, author_name = reference, names[reference]
        named[p.id] = name_subject(p.target, author_reference, author_name)
    return named
