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
    ReportSubject,
    ReportTarget,
    WorkflowDefinition,
    WorkflowVersion,
    move_row,
)
from app.services.cases.evidence_store import parse_target_evidence, resent_differs, store_evidence, stored_digests
from app.services.cases.queue_subjects import ensure_decidable_by, refresh_subjects, subject_for
from app.services.dsa.refusal import ensure_decision_yields_statements
from app.services.lifecycle.runs import create_run
from app.services.uow import Actor, unit_of_work

CODE_PATTERN = re.compile(r"^[a-z][a-z0-9_]{1,99}$")


def _public_reference() -> str:
    return "R-" + secrets.token_hex(4).upper()


@dataclass(frozen=True)
class DecisionResult:
    decision_id: str
    run_ids: list[str]
    replayed: bool = False  # the same idempotency key answered what it recorded before


def _checked_input(decision_code: str, rationale: str | None, idempotency_key: str | None) -> str:
    """The rationale, stripped, once the decision's fields are valid (400 otherwise)."""
    if not isinstance(decision_code, str) or not CODE_PATTERN.match(decision_code):
        raise ApiError(400, "decision_code_invalid", "Choose a decision code (lower_snake_case).", "decision_code")
    rationale = (rationale or "").strip()
    if len(rationale) > 5000:
        raise ApiError(400, "decision_rationale_invalid", "The rationale is limited to 5,000 characters.", "rationale")
    if idempotency_key is not None and (not isinstance(idempotency_key, str) or not 1 <= len(idempotency_key) <= 200):
        raise ApiError(400, "idempotency_key_invalid", "An idempotency key of 1 to 200 characters is required.")
    return rationale


def _prior(session, audit_key: str | None, target_id: str, what: str) -> AuditEvent | None:
    """The audit row of a request answered before under the same idempotency key."""
    prior = session.scalar(select(AuditEvent).where(AuditEvent.idempotency_key == audit_key)) if audit_key else None
    if prior is not None and prior.target_id != target_id:
        raise ApiError(409, "idempotency_key_reused", f"This idempotency key was used for another {what}.")
    return prior


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
            ``subject_claimed`` while another moderator holds its subject (QUEUE-2),
            409 ``report_decision_conflict`` when another decision landed at the same moment;
            422 ``dsa_statement_incomplete`` when DSA is on and a restriction the
            decision would apply could not yield a valid statement of reasons, naming
            the missing fact (DSA-2). Nothing is stored.
    """
    rationale = _checked_input(decision_code, rationale, idempotency_key)
    with unit_of_work() as uow:
        session = uow.session
        report = session.get(Report, report_id)
        if report is None or report.installation_id != operator.installation_id:
            raise ApiError(404, "report_not_found", "No such report.")
        audit_key = f"decision-recorded:{operator.id}:{idempotency_key}" if idempotency_key else None
        prior = _prior(session, audit_key, report.id, "report")
        if prior is not None:
            return DecisionResult(prior.details["decision_id"], [], replayed=True)
        now = utcnow()
        ensure_decidable_by(session, report.subject_id, operator, now)
        if not move_row(session, report, ReportMove.DECIDE):  # open or decided, and no appeal filed meanwhile
            raise ApiError(409, "report_not_decidable", f"The report is {report.state}; it cannot take a new decision.")
        decision = _decide(uow, report, decision_code, rationale, operator, now, audit_key=audit_key)
        run_ids = _start_runs(uow, report, decision)
        refresh_subjects(session, [report.subject_id], now)
        result = DecisionResult(decision.id, run_ids)
        _commit_decision(uow)
    return result


def _commit_decision(uow) -> None:
    try:
        uow.commit()
    except IntegrityError as error:  # the same report's sequence number was taken a moment ago
        raise ApiError(
            409,
            "report_decision_conflict",
            "Another decision on this report was recorded at the same moment. Reload the report.",
        ) from error


def _decide(uow, report: Report, decision_code: str, rationale: str, operator: OperatorUser, now, *,
            audit_key: str | None, decided_with: Report | None = None) -> Decision:
    """One decision row on a report that has just moved to decided, audited."""
    session = uow.session
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
    details = {"decision_id": decision.id, "decision_code": decision_code, "rationale": rationale}
    if decided_with is not None:  # enforced once, through the subject's first open report (QUEUE-3)
        details["decided_with"] = decided_with.public_reference
    uow.audit(
        report.installation_id,
        audit_key or f"decision-recorded:{decision.id}",
        "report.decided",
        Actor("operator", operator.id),
        "report",
        report.id,
        details,
    )
    return decision


def _start_runs(uow, report: Report, decision: Decision) -> list[str]:
    """Start the workflows the decision's code triggers, once the restrictions they
    would apply can each yield a statement of reasons (DSA-2: refused otherwise,
    before anything is committed)."""
    versions = [
        version
        for version in active_versions(uow.session, report.installation_id)
        if triggered_by(version.graph, decision.decision_code)
    ]
    ensure_decision_yields_statements(uow.session, report, decision, versions)
    runs = [
        create_run(
            uow,
            version=version,
            report_id=report.id,
            trigger_key=f"decision:{decision.id}",
            decision_id=decision.id,
        )
        for version in versions
    ]
    return [run.id for run in runs if run is not None]


@dataclass(frozen=True)
class SubjectDecisionResult:
    decision_id: str  # the decision that is enforced (on the subject's first open report)
    run_ids: list[str]
    report_ids: list[str]  # every report decided, the enforced one first
    replayed: bool = False


def decide_subject(
    subject_id: str, *, decision_code: str, rationale: str, operator: OperatorUser, idempotency_key: str | None = None
) -> SubjectDecisionResult:
    """Decide a subject: every open report about it takes the decision together, each
    recorded with its own decision row and audit event; the workflows start once, on
    the subject's oldest open report, so one action is proposed, not one per report
    (SPEC QUEUE-3). The subject leaves the queue and its claim ends.

    Args:
        subject_id: a queue subject of the operator's installation.
        decision_code, rationale, idempotency_key: as for `record_decision`.

    Raises:
        ApiError: as `record_decision`, and 404 ``subject_not_found``, 409
            ``subject_not_open`` when no report about it is open (QUEUE-2 for
            ``subject_claimed``).
    """
    rationale = _checked_input(decision_code, rationale, idempotency_key)
    with unit_of_work() as uow:
        session = uow.session
        subject = session.scalar(select(ReportSubject).where(  # locked: two decisions of it take turns
            ReportSubject.id == subject_id, ReportSubject.installation_id == operator.installation_id).with_for_update())
        if subject is None:
            raise ApiError(404, "subject_not_found", "No such subject in the queue.")
        audit_key = f"subject-decided:{operator.id}:{idempotency_key}" if idempotency_key else None
        prior = _prior(session, audit_key, subject.id, "subject")
        if prior is not None:
            return SubjectDecisionResult(prior.details["decision_id"], [], prior.details["report_ids"], replayed=True)
        now = utcnow()
        ensure_decidable_by(session, subject.id, operator, now)
        reports = session.scalars(
            select(Report).where(Report.subject_id == subject.id, Report.state == ReportState.OPEN.value)
            .order_by(Report.created_at, Report.id)
        ).all()
        decided = [report for report in reports if move_row(session, report, ReportMove.DECIDE)]
        if not decided:
            raise ApiError(409, "subject_not_open", "No report about this subject is open; nothing to decide.")
        first = decided[0]
        enforced = _decide(uow, first, decision_code, rationale, operator, now, audit_key=None)
        for report in decided[1:]:
            _decide(uow, report, decision_code, rationale, operator, now, audit_key=None, decided_with=first)
        run_ids = _start_runs(uow, first, enforced)
        report_ids = [report.id for report in decided]
        refresh_subjects(session, [subject.id], now)
        uow.audit(subject.installation_id, audit_key or f"subject-decided:{enforced.id}", "queue.subject_decided",
                  Actor("operator", operator.id), "report_subject", subject.id,
                  {"decision_id": enforced.id, "decision_code": decision_code, "report_ids": report_ids,
                   "reference": subject.reference})
        result = SubjectDecisionResult(enforced.id, run_ids, report_ids)
        _commit_decision(uow)
    return result


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
            category?, summary?, policy_version_id?, source? (one of
            `app.domain.dsa_facts.REPORT_SOURCES`; left out: an Article 16 notice,
            DSA-2)}; evidence is {content_text?, author_reference?, author_name?,
            media?: [{url, sha256, mime_type}], permalink?, posted_at? (ISO-8601
            UTC), language? (ISO 639-1)} (`app.domain.evidence` limits).
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
        try:  # the same report sent twice at once fails here or at commit: answer the first
            result = _received(uow, integration, queue_id, value, evidence)
            uow.commit()
        except IntegrityError:
            pass
        else:
            return result
    with unit_of_work() as uow:
        existing = uow.session.scalar(
            select(Report).where(Report.integration_id == integration_id, Report.external_id == value["external_id"])
        )
        return _repeat(uow.session, existing, value, evidence)


def _received(uow, integration: Integration, queue_id: str | None, value: dict[str, Any], evidence: list) -> IntakeResult:
    """Write a new report, its targets and evidence, its subject's row and audit event."""
    session = uow.session
    now = utcnow()
    subject = subject_for(session, integration.installation_id, value["targets"][0]["reference"], now)
    report = Report(
        installation_id=integration.installation_id,
        integration_id=integration.id,
        subject_id=subject.id,
        queue_id=queue_id,
        external_id=value["external_id"],
        public_reference=_public_reference(),
        state=ReportState.OPEN,
        policy_version_id=value.get("policy_version_id"),
        category=value.get("category") or "",
        reason=value.get("reason") or "",
        source=value.get("source"),  # DSA-2: None is an Article 16 notice
        summary=value.get("summary") or "",
        created_at=now,
        updated_at=now,
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
    session.flush()
    refresh_subjects(session, [subject.id], now)
    uow.audit(
        report.installation_id,
        f"report-received:{integration.id}:{report.external_id}",
        "report.received",
        Actor("service_identity", integration.id),
        "report",
        report.id,
        {"external_id": report.external_id, "queue_id": queue_id, "targets": audited},
    )
    return IntakeResult(report.id, report.public_reference, True, digests)


def _repeat(session, existing: Report, value: dict[str, Any], evidence: list) -> IntakeResult:
    """Answer a repeat of a received report: nothing changes, evidence included."""
    stored = stored_digests(session, existing.id)
    mismatch = resent_differs(stored, value["targets"], evidence)
    return IntakeResult(existing.id, existing.public_reference, False, stored, mismatch)
