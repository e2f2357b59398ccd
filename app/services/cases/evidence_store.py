"""Store a reported target's evidence once, and compare a re-sent report's (SPEC REV-1)."""

from __future__ import annotations

from dataclasses import asdict
from typing import Any

from sqlalchemy import select

from app.domain.errors import ApiError
from app.domain.evidence import Evidence, EvidenceInvalid, evidence_digest, parse_evidence
from app.domain.text_safety import reference_problem
from app.models import ReportEvidence, ReportTarget


def parse_target_evidence(targets: list[dict[str, Any]]) -> list[Evidence | None]:
    """The evidence of each target of an intake body, validated (None: none sent).

    Args:
        targets: the body's ``targets`` list, each ``{reference, kind?, evidence?}``.

    Raises:
        ApiError: 400 ``report_evidence_invalid`` naming the JSON path at fault,
            e.g. ``targets[0].evidence.media[1].sha256`` (REV-1's size limits);
            ``reference_characters`` / ``url_userinfo`` (FOUR-10).
    """
    parsed = []
    for index, target in enumerate(targets):
        field = f"targets[{index}].reference"
        problem = isinstance(target.get("reference"), str) and reference_problem(target["reference"], field)
        if problem:  # FOUR-10, POL-4: checked here too for callers other than the HTTP schema
            raise ApiError(400, "reference_characters", problem, field)
        if "evidence" not in target:  # null is refused like any non-object
            parsed.append(None)
            continue
        value = target["evidence"]
        try:
            parsed.append(parse_evidence(value, f"targets[{index}].evidence"))
        except EvidenceInvalid as error:
            raise ApiError(400, error.code, error.message, error.field) from error
    return parsed


def store_evidence(session, target: ReportTarget, evidence: Evidence) -> ReportEvidence:
    """Write one target's evidence with its digest (flushed with the target).

    Args:
        session: the unit of work's session; `target` is flushed (has an id).
        target: the report target the evidence is about.
        evidence: validated evidence.

    Returns:
        The new row; nothing ever updates it (the database refuses UPDATE).
    """
    row = ReportEvidence(
        installation_id=target.installation_id,
        report_id=target.report_id,
        report_target_id=target.id,
        target_reference=target.target_reference,
        content_text=evidence.content_text,
        author_reference=evidence.author_reference,
        author_name=evidence.author_name,
        media=[asdict(m) for m in evidence.media],
        permalink=evidence.permalink,
        posted_at=evidence.posted_at,
        language=evidence.language,
        evidence_digest=evidence_digest(evidence, target.target_reference),
    )
    session.add(row)
    return row


def stored_digests(session, report_id: str) -> list[str | None]:
    """Evidence digest of each of a report's targets, in target order (None: no evidence)."""
    rows = session.execute(
        select(ReportTarget.position, ReportEvidence.evidence_digest)
        .outerjoin(ReportEvidence, ReportEvidence.report_target_id == ReportTarget.id)
        .where(ReportTarget.report_id == report_id)
        .order_by(ReportTarget.position)
    ).all()
    return [digest for _position, digest in rows]


def resent_differs(stored: list[str | None], targets: list[dict[str, Any]], evidence: list[Evidence | None]) -> bool:
    """Whether a re-sent report carries evidence other than what was first stored.

    Evidence is kept as first received (REV-1); the answer tells the platform so.
    A re-sent report without evidence for a target does not differ; other targets
    than the first time do.
    """
    if len(targets) != len(stored):
        return any(item is not None for item in evidence)
    for position, (target, item) in enumerate(zip(targets, evidence, strict=True)):
        if item is not None and stored[position] != evidence_digest(item, target["reference"]):
            return True
    return False
