"""Reports: intake from a platform, and a moderator's decision that starts the
enforcement workflows."""

from __future__ import annotations

import re
import secrets
from dataclasses import dataclass, field
from typing import Any

from sqlalchemy import func, select
from sqlalchemy.exc import IntegrityError

from app.domain.case_states import ReportMove, ReportState
from app.domain.clock import utcnow
from app.domain.errors import ApiError
from app.domain.workflow import triggered_by
from app.models import (
    AuditEvent,
    Decision,
    Integration,
    OperatorUser,
    Queue,
    Report,
    ReportTarget,
    WorkflowDefinition,
    WorkflowVersion,
    move_row,
)
from app.services.cases.evidence_store import parse_target_evidence, resent_differs, store_evidence, stored_digests
from app.services.lifecycle.runs import create_run
from app.services.uow import Actor, unit_of_work

CODE_PATTERN = re.compile(r"^[a-z][a-z0-9_]{1,99}$")


def _public_reference() -> str:
    return "R-" + secrets.token_hex(4).upper()


@dataclass(frozen=True)
class DecisionResult:
    decision_id: str
    run_ids: list[str]


def record_decision(
    report_id: str, *, decision_code: str, rationale: str, operator: OperatorUser, idempotency_key: str | None = None
) -> DecisionResult:
    """Record a moderator's decision and start the workflows it triggers.

    Args:
        report_id: the report (of the operator's installation).
        decision_code: lower_snake_case, e.g. ``remove_content``.
        rationale: why, 0..5,000 characters.
        operator: a moderator.
        idempotency_key: per operator; the same key again answers the decision it
            recorded (a double-submitted form enforces nothing twice).

    Returns:
        The decision id and the ids of the runs it started.

    Raises:
        ApiError: 404 ``report_not_found``; 400 ``decision_code_invalid`` /
            ``decision_rationale_invalid`` / ``idempotency_key_invalid``; 409
            ``report_not_decidable`` when the report is appealed or closed, 409
            ``report_decision_conflict`` when another decision landed at the same moment.
    """
    if not isinstance(decision_code, str) or not CODE_PATTERN.match(decision_code):
        raise ApiError(400, "decision_code_invalid", "Choose a decision code (lower_snake_case).", "decision_code")
    rationale = (rationale or "").strip()
    if len(rationale) > 5000:
        raise ApiError(400, "decision_rationale_invalid", "The rationale is limited to 5,000 characters.", "rationale")
    if idempotency_key is not None and (not isinstance(idempotency_key, str) or not 1 <= len(idempotency_key) <= 200):
        raise ApiError(400, "idempotency_key_invalid", "An idempotency key of 1 to 200 characters is required.")
    with unit_of_work() as uow:
        session = uow.session
        report = session.get(Report, report_id)
        if report is None or report.installation_id != operator.installation_id:
            raise ApiError(404, "report_not_found", "No such report.")
        audit_key = f"decision-recorded:{operator.id}:{idempotency_key}" if idempotency_key else None
        prior = session.scalar(select(AuditEvent).where(AuditEvent.idempotency_key == audit_key)) if audit_key else None
        if prior is not None:
            if prior.target_id != report.id:
                raise ApiError(409, "idempotency_key_reused", "This idempotency key was used for another report.")
            return DecisionResult(prior.details["decision_id"], [])
        if not move_row(session, report, ReportMove.DECIDE):  # open or decided, and no appeal filed meanwhile
            raise ApiError(409, "report_not_decidable", f"The report is {report.state}; it cannot take a new decision.")
        now = utcnow()
        seq = (session.scalar(select(func.max(Decision.seq)).where(Decision.report_id == report.id)) or 0) + 1
        decision = Decision(
            installation_id=report.installation_id,
            report_id=report.id,
            seq=seq,
            decision_code=decision_code,
            maker_id=operator.id,
            rationale=rationale,
            policy_version_id=report.policy_version_id,
            created_at=now,
        )
        session.add(decision)
        session.flush()
        uow.audit(
            report.installation_id,
            audit_key or f"decision-recorded:{decision.id}",
            "report.decided",
            Actor("operator", operator.id),
            "report",
            report.id,
            {"decision_id": decision.id, "decision_code": decision_code, "rationale": rationale},
        )
        runs = [
            create_run(
                uow,
                version=version,
                report_id=report.id,
                trigger_key=f"decision:{decision.id}",
                decision_id=decision.id,
            )
            for version in active_versions(session, report.installation_id)
            if triggered_by(version.graph, decision_code)
        ]
        decision_id = decision.id
        run_ids = [run.id for run in runs if run is not None]
        try:
            uow.commit()
        except IntegrityError as error:  # the same report's sequence number was taken a moment ago
            raise ApiError(
                409,
                "report_decision_conflict",
                "Another decision on this report was recorded at the same moment. Reload the report.",
            ) from error
    return DecisionResult(decision_id, run_ids)


def active_versions(session, installation_id: str) -> list[WorkflowVersion]:
    """The newest active version of each active workflow."""
    versions = session.scalars(
        select(WorkflowVersion)
        .join(WorkflowDefinition, WorkflowDefinition.id == WorkflowVersion.definition_id)
        .where(
            WorkflowVersion.installation_id == installation_id,
            WorkflowVersion.active.is_(True),
            WorkflowDefinition.status == "active",
        )
        .order_by(WorkflowVersion.definition_id, WorkflowVersion.version.desc())
    ).all()
    newest: dict[str, WorkflowVersion] = {}
    for version in versions:
        newest.setdefault(version.definition_id, version)
    return list(newest.values())


@dataclass(frozen=True)
class IntakeResult:
    """The report; for a repeat, whether its evidence differed from what was kept."""

    report_id: str
    public_reference: str
    created: bool
    evidence_digests: list[str | None] = field(default_factory=list)  # per target, in order
    evidence_mismatch: bool = False  # a repeat sent other evidence; the first is kept (REV-1)


def intake_report(value: Any, integration_id: str) -> IntakeResult:
    """Create a report sent by a platform, once per its own report id, with the
    evidence of each target stored once and never changed (REV-1).

    Args:
        value: a body the API's contract accepted (`app.web.api.contract`, the
            OpenAPI ``ReportIntake`` schema, FOUR-10's reference check included):
            {external_id, targets: [{reference, kind?, evidence?}], queue?,
            category?, summary?, policy_version_id?}; evidence is {content_text?,
            author_reference?, author_name?, media?: [{url, sha256, mime_type}],
            permalink?, posted_at? (ISO-8601 UTC)} (`app.domain.evidence` limits).
        integration_id: the authenticated integration.

    Returns:
        The report with its evidence digests; ``created`` is False for a repeat of
        the same external_id, whose evidence is kept as first received
        (``evidence_mismatch`` says the repeat carried other evidence).

    Raises:
        ApiError: 400 ``report_evidence_invalid`` for what the schema cannot say
            (e.g. a posted_at that is no real date, REV-1); 404 ``queue_not_found``.
            Nothing is stored.
    """
    evidence = parse_target_evidence(value["targets"])
    with unit_of_work() as uow:
        session = uow.session
        integration = session.get(Integration, integration_id)
        existing = session.scalar(
            select(Report).where(Report.integration_id == integration_id, Report.external_id == value["external_id"])
        )
        if existing is not None:
            return _repeat(session, existing, value, evidence)
        queue_id = integration.default_queue_id
        if value.get("queue"):
            queue_id = session.scalar(
                select(Queue.id).where(
                    Queue.installation_id == integration.installation_id, Queue.slug == value["queue"]
                )
            )
            if queue_id is None:
                raise ApiError(404, "queue_not_found", "No queue with that slug.", "queue")
        report = Report(
            installation_id=integration.installation_id,
            integration_id=integration.id,
            queue_id=queue_id,
            external_id=value["external_id"],
            public_reference=_public_reference(),
            state=ReportState.OPEN,
            policy_version_id=value.get("policy_version_id"),
            category=value.get("category") or "",
            summary=value.get("summary") or "",
        )
        session.add(report)
        session.flush()
        digests, audited = [], []
        for position, (target, item) in enumerate(zip(value["targets"], evidence, strict=True)):
            row = ReportTarget(
                installation_id=report.installation_id,
                report_id=report.id,
                target_reference=target["reference"],
                kind=target.get("kind", "content"),
                position=position,
            )
            session.add(row)
            summary = {"reference": row.target_reference, "kind": row.kind}
            if item is not None:
                session.flush()
                summary["evidence_digest"] = store_evidence(session, row, item).evidence_digest
            digests.append(summary.get("evidence_digest"))
            audited.append(summary)
        uow.audit(
            report.installation_id,
            f"report-received:{integration.id}:{report.external_id}",
            "report.received",
            Actor("service_identity", integration.id),
            "report",
            report.id,
            {"external_id": report.external_id, "queue_id": queue_id, "targets": audited},
        )
        result = IntakeResult(report.id, report.public_reference, True, digests)
        try:
            uow.commit()
        except IntegrityError:  # the same report sent twice at once: answer the first
            pass
        else:
            return result
    with unit_of_work() as uow:
        existing = uow.session.scalar(
            select(Report).where(Report.integration_id == integration_id, Report.external_id == value["external_id"])
        )
        return _repeat(uow.session, existing, value, evidence)


def _repeat(session, existing: Report, value: dict[str, Any], evidence: list) -> IntakeResult:
    """Answer a repeat of a received report: nothing changes, evidence included."""
    stored = stored_digests(session, existing.id)
    mismatch = resent_differs(stored, value["targets"], evidence)
    return IntakeResult(existing.id, existing.public_reference, False, stored, mismatch)
