"""Subjects named by what they are, for a page's proposals at once (SPEC QUEUE-6)."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import replace

from sqlalchemy import select

from app.domain.bulk.subjects import canonical_reference
from app.domain.protected import ProtectionMark
from app.domain.subject_names import SubjectName, is_account_target, name_subject
from app.extensions import db
from app.models import ActionProposal, ReportEvidence
from app.services.read.protection import protected_marks


def subject_names(proposals: Iterable[ActionProposal | None],
                  marks: dict[str, ProtectionMark] | None = None) -> dict[str, SubjectName]:
    """The subject of each proposal (QUEUE-6): the account with its name for an account
    action, the content's reference otherwise.

    Args:
        proposals: the page's proposals (None entries are skipped).
        marks: the protected marks the page loaded already (`protected_marks` over
            the proposals' subjects, their authors and reports); None: load them here.

    Returns:
        proposal id -> `SubjectName`, with its protected mark (POL-4) when the subject
        or, for content, its author is protected. One query for the whole page, and
        none when no proposal acts on an account: the report's evidence says who wrote
        what; one more for the marks (none for an empty page).
    """
    rows = [p for p in proposals if p is not None]
    if not rows:
        return {}
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
    return _marked(rows, named, marks)


def _target_reference(p: ActionProposal) -> str:
    return str(p.target.get("reference", "")) if isinstance(p.target, dict) else ""


def _marked(rows: list[ActionProposal], named: dict[str, SubjectName],
            marks: dict[str, ProtectionMark] | None) -> dict[str, SubjectName]:
    """The names with the marks of protected subjects (POL-4), loaded in one query: the
    account an action names, or the content's reference (covered by its author's mark)."""
    if marks is None:
        references = {s.reference for s in named.values()} | {_target_reference(p) for p in rows}
        marks = protected_marks(db.session, rows[0].installation_id, references, {p.report_id for p in rows})
    if not marks:
        return named
    for p in rows:
        subject = named[p.id]
        mark = marks.get(canonical_reference(subject.reference)) or marks.get(canonical_reference(_target_reference(p)))
        if mark is not None:
            named[p.id] = replace(subject, mark=mark)
    return named
