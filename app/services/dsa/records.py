"""The console's records as the statement rules read them (SPEC §7 DSA-2): plain
`app.domain.dsa_facts` records loaded from the report, the evidence, the component
and the proposal. Shared by the statement built at apply time and the draft checked
at decision time, so both read the same facts the same way."""

from __future__ import annotations

from sqlalchemy import select

from app.domain.dsa_facts import ActionRecord, EvidenceRecord, ReportRecord
from app.domain.labels import label_for
from app.models import ActionProposal, ComponentDefinition, ComponentVersion, Report, ReportEvidence, ReportTarget

BULK_CASE_PREFIX = "bulk:"  # a bulk batch's own case: external_id ``bulk:<batch id>``


def report_record(report: Report) -> ReportRecord:
    """The report's origin and reception time (DSA-2). A report opened in the console
    (``opened_by_id``) and a bulk batch's own case are the platform's own initiative."""
    in_console = report.opened_by_id is not None or report.external_id.startswith(BULK_CASE_PREFIX)
    return ReportRecord(created_at=report.created_at, source=report.source, opened_in_console=in_console)


def component_slug(session, component_version_id: str | None) -> str | None:
    """The slug of a component version's definition (its DSA restriction is declared
    on it), or None when it does not exist."""
    if not component_version_id:
        return None
    return session.scalar(
        select(ComponentDefinition.slug)
        .join(ComponentVersion, ComponentVersion.definition_id == ComponentDefinition.id)
        .where(ComponentVersion.id == component_version_id)
    )


def evidence_record(session, installation_id: str, report_id: str | None, reference: str | None) -> EvidenceRecord:
    """What the platform sent about `reference` (REV-1): this report's evidence of it,
    else the newest other report's in the installation (a subject chosen from a list
    or by author has its evidence on the reports about it).

    Args:
        installation_id: whose evidence.
        report_id: the report the action enforces (preferred).
        reference: the action's target reference, e.g. ``post:1001``.

    Returns:
        The record; ``found`` False when no evidence of it was received.
    """
    return evidence_records(session, installation_id, [(report_id, reference)])[(report_id, reference)]


def evidence_records(
    session, installation_id: str, wanted: list[tuple[str | None, str | None]]
) -> dict[tuple[str | None, str | None], EvidenceRecord]:
    """`evidence_record` of many (report id, reference) pairs at once: one query per
    500 references (a bulk batch's items, BULK-3).

    Returns:
        Each pair's record, by pair.
    """
    references = sorted({reference for _report, reference in wanted if reference})
    found: dict[str, list] = {}
    for start in range(0, len(references), 500):
        rows = session.execute(
            select(ReportTarget.target_reference, ReportEvidence.report_id, ReportEvidence.posted_at,
                   ReportEvidence.language)
            .join(ReportTarget, ReportTarget.id == ReportEvidence.report_target_id)
            .where(ReportTarget.installation_id == installation_id,
                   ReportTarget.target_reference.in_(references[start : start + 500]))
            .order_by(ReportEvidence.created_at.desc(), ReportEvidence.id.desc())
        ).all()
        for row in rows:
            found.setdefault(row.target_reference, []).append(row)
    return {(report_id, reference): _chosen(report_id, reference, found.get(reference or "", []))
            for report_id, reference in wanted}


def _chosen(report_id: str | None, reference: str | None, rows: list) -> EvidenceRecord:
    """The report's own evidence first, else the newest with a posted time, else the newest."""
    if not reference:
        return EvidenceRecord(reference="(no target)")
    if not rows:
        return EvidenceRecord(reference=reference)
    own = [row for row in rows if row.report_id == report_id]
    dated = [row for row in rows if row.posted_at is not None]
    chosen = (own or dated or rows)[0]
    return EvidenceRecord(reference=reference, found=True, posted_at=chosen.posted_at, language=chosen.language)


def kind_label(kind: str | None) -> str | None:
    """A target kind in words (REV-3), for ``CONTENT_TYPE_OTHER``."""
    return label_for({}, "subject_kind", kind) if kind else None


def action_record(proposal: ActionProposal, slug: str | None) -> ActionRecord:
    """A stored proposal as the statement rules read it (DSA-2)."""
    kind = (proposal.target or {}).get("kind")
    duration = (proposal.temporary or {}).get("duration_seconds")
    return ActionRecord(
        proposal_id=proposal.id,
        component_slug=slug,
        target_kind=kind,
        kind_label=kind_label(kind),
        approval_mode=proposal.approval_mode,
        created_by_type=proposal.created_by_type,
        bulk=proposal.bulk_batch_id is not None,
        emergency=bool(proposal.emergency),
        duration_seconds=int(duration) if duration is not None else None,
    )
