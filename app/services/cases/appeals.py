"""Appeals: filing, deciding, redacting, and preparing the corrections an
overturned decision needs (SPEC CORR; §2 appeal, appeal_decision, appeal_correction)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from sqlalchemy import and_, or_, select

from app.domain.case_states import (
    AppealMove,
    AppealState,
    CompletionMove,
    CompletionState,
    CorrectionMove,
    CorrectionState,
    ReportMove,
    ReportState,
)
from app.domain.clock import utcnow
from app.domain.errors import ActionError, ApiError
from app.domain.expressions import evaluate_mapping, schema_errors
from app.domain.proposal.identity import correction_proposal
from app.domain.proposal.makers import appeal_verdict, makers
from app.domain.proposal.retirement import prepared_versions
from app.domain.text_safety import check_reference
from app.models import (
    ActionProposal,
    Appeal,
    AppealCorrection,
    AppealDecision,
    Decision,
    OperatorUser,
    Report,
    WorkflowRun,
    WorkflowVersion,
    move_row,
    predicates,
)
from app.services.cases.snapshot import latest_decision
from app.services.cases.tasks import open_approval_task
from app.services.dsa.complaints import check_complaint_window, record_reversal
from app.services.lifecycle.action_targets import destination_of, load_action_component
from app.services.lifecycle.corrections import CORRECTABLE_OUTCOMES, correction_problems
from app.services.lifecycle.maker_lookup import redaction_facts
from app.services.lifecycle.proposals import insert_proposal, original_facts
from app.services.uow import Actor, UnitOfWork, unit_of_work

OUTCOMES = ("upheld", "modified", "reversed")
DEFAULT_CORRECTION_PAYLOAD = "original.payload"


def appeal_text(value: Any, field: str, limit: int, required: bool = False) -> str:
    """`value` trimmed: text of at most `limit` characters (None as empty).

    Raises:
        ApiError: 400 ``appeal_<field>_invalid``.
    """
    if value is None:
        value = ""
    if not isinstance(value, str) or len(value.strip()) > limit or (required and not value.strip()):
        raise ApiError(
            400,
            f"appeal_{field}_invalid",
            f"{field.replace('_', ' ').capitalize()} must be text of at most {limit:,} characters.",
            field,
        )
    return value.strip()


def _audit(
    uow: UnitOfWork,
    installation_id: str,
    key: str,
    action: str,
    actor: Actor,
    target_type: str,
    target_id: str,
    details: dict,
) -> None:
    uow.audit(installation_id, key, action, actor, target_type, target_id, details)


@dataclass(frozen=True)
class AppealResult:
    appeal_id: str
    created: bool


def file_appeal(
    report_id: str,
    *,
    statement: str,
    actor: Actor,
    installation_id: str,
    external_id: str | None = None,
    integration_id: str | None = None,
) -> AppealResult:
    """File an appeal against the report's latest decision.

    Args:
        report_id: the report.
        statement: the appellant's statement, up to 5,000 characters.
        actor: the operator entering it, or the platform (service identity).
        installation_id: the caller's tenant (another tenant's report is 404).
        external_id: the platform's own appeal id (a repeat returns the same appeal).
        integration_id: set for platform calls: the report must be theirs.

    Raises:
        ApiError: 400 ``appeal_statement_invalid``; ``reference_characters`` (an
            external_id with an invisible, bidirectional or lookalike character, FOUR-10); 404 ``report_not_found``; 409
            ``report_not_appealable`` (no decision, closed, or an open appeal exists); 409
            ``appeal_window_closed`` (filed after the decision's complaint window, DSA-5).
    """
    statement = appeal_text(statement, "statement", 5000)
    if external_id is not None and (not isinstance(external_id, str) or not 1 <= len(external_id) <= 200):
        raise ApiError(400, "appeal_external_id_invalid", "external_id must be 1 to 200 characters.", "external_id")
    check_reference(external_id, "external_id")  # the platform's appeal id (FOUR-10)
    with unit_of_work() as uow:
        session = uow.session
        report = session.get(Report, report_id)
        if (
            report is None
            or report.installation_id != installation_id
            or (integration_id and report.integration_id != integration_id)
        ):
            raise ApiError(404, "report_not_found", "No such report.")
        if external_id:
            existing = session.scalar(
                select(Appeal).where(Appeal.report_id == report.id, Appeal.external_id == external_id)
            )
            if existing is not None:
                return AppealResult(existing.id, False)
        decision = latest_decision(session, report.id)
        if decision is not None:
            check_complaint_window(session, report, decision.id, utcnow())  # DSA-5
        if decision is None or not move_row(session, report, ReportMove.APPEAL):  # one open appeal at a time
            raise ApiError(
                409, "report_not_appealable", f"The report is {report.state}; only a decided report can be appealed."
            )
        now = utcnow()
        appeal = Appeal(
            installation_id=report.installation_id,
            report_id=report.id,
            decision_id=decision.id,
            external_id=external_id,
            state=AppealState.OPEN,
            statement=statement,
            created_by_type=actor.type,
            created_by_id=actor.id,
            created_at=now,
        )
        session.add(appeal)
        session.flush()
        _audit(
            uow,
            report.installation_id,
            f"appeal-filed:{appeal.id}",
            "appeal.filed",
            actor,
            "appeal",
            appeal.id,
            {"report_id": report.id, "decision_id": decision.id, "external_id": external_id},
        )
        result = AppealResult(appeal.id, True)
        uow.commit()
    return result


@dataclass(frozen=True)
class AppealDecisionResult:
    appeal_decision_id: str
    correction_ids: list[str]


def decide_appeal(appeal_id: str, *, outcome: str, rationale: str, operator: OperatorUser) -> AppealDecisionResult:
    """Record a reviewer's outcome on an appeal and prepare the corrections it needs.

    ``upheld`` closes the case. ``modified`` and ``reversed`` keep it appealed and
    create one correction per applied action that enforced the contested decision:
    ``automated`` when the workflow names a correcting component for it (a proposal
    that an eligible reviewer must approve), ``manual`` otherwise. ``reversed`` is
    also recorded on the contested decision's statements of reasons (DSA-5).

    Raises:
        ApiError: 400 ``appeal_outcome_invalid`` / ``appeal_rationale_invalid``; 404
            ``appeal_not_found``; 403 ``maker_checker_violation`` (not a reviewer, or
            the maker of the contested decision); 409 ``appeal_not_open``.
    """
    if outcome not in OUTCOMES:
        raise ApiError(400, "appeal_outcome_invalid", "The outcome must be upheld, modified or reversed.", "outcome")
    rationale = appeal_text(rationale, "rationale", 5000)
    actor = Actor("operator", operator.id)
    with unit_of_work() as uow:
        session = uow.session
        appeal = session.get(Appeal, appeal_id)
        if appeal is None or appeal.installation_id != operator.installation_id:
            raise ApiError(404, "appeal_not_found", "No such appeal.")
        contested = session.get(Decision, appeal.decision_id)
        if not appeal_verdict(operator.id, operator.roles, contested.maker_id if contested else None):
            raise ApiError(
                403,
                "maker_checker_violation",
                "A reviewer who did not make the contested decision must decide the appeal.",
            )
        report = session.get(Report, appeal.report_id)
        if report.state != ReportState.APPEALED or not move_row(session, appeal, AppealMove.DECIDE):
            raise ApiError(
                409, "appeal_not_open", "This appeal was already decided, or the case is no longer appealed."
            )
        now = utcnow()
        ad = AppealDecision(
            installation_id=appeal.installation_id,
            appeal_id=appeal.id,
            outcome=outcome,
            maker_id=operator.id,
            rationale=rationale or None,
            completion_state=(
                CompletionState.WAITING if outcome in CORRECTABLE_OUTCOMES else CompletionState.COMPLETED
            ),
            created_at=now,
        )
        session.add(ad)
        session.flush()
        _audit(
            uow,
            appeal.installation_id,
            f"appeal-decided:{ad.id}",
            "appeal.decided",
            actor,
            "appeal",
            appeal.id,
            {"appeal_decision_id": ad.id, "outcome": outcome, "rationale": rationale or None},
        )
        if outcome == "reversed":
            record_reversal(uow, appeal, now, actor)  # DSA-5
        corrections: list[str] = []
        if outcome in CORRECTABLE_OUTCOMES:
            corrections = [
                prepare_correction(uow, appeal, ad, report, original).id for original in _originals(session, appeal)
            ]
            if not corrections:  # nothing was enforced: nothing to correct
                move_row(session, ad, CompletionMove.COMPLETE, values={"correction_confirmed_at": now})
                move_row(session, report, ReportMove.CLOSE)
        else:
            move_row(session, report, ReportMove.CLOSE)
        result = AppealDecisionResult(ad.id, corrections)
        uow.commit()
    return result


def _originals(session, appeal: Appeal) -> list[ActionProposal]:
    """Actions that enforced the contested decision and took effect (pinned to it, or
    made by a run that decision started)."""
    started_by_it = select(WorkflowRun.id).where(WorkflowRun.decision_id == appeal.decision_id)
    return list(
        session.scalars(
            select(ActionProposal)
            .where(
                ActionProposal.report_id == appeal.report_id,
                or_(
                    ActionProposal.decision_id == appeal.decision_id,
                    and_(ActionProposal.decision_id.is_(None), ActionProposal.run_id.in_(started_by_it)),
                ),
                ActionProposal.appeal_id.is_(None),
                ActionProposal.compensates_proposal_id.is_(None),
                ~predicates.notice(),  # a notice told the user; it enforced nothing to correct (DSA-4)
                predicates.effective(),
            )
            .order_by(ActionProposal.created_at)
        )
    )


def correction_config(session, original: ActionProposal) -> dict | None:
    """The node's ``correction`` config: {component_version_id, action_code, payload?}."""
    run = session.get(WorkflowRun, original.run_id)
    version = session.get(WorkflowVersion, run.workflow_version_id) if run else None
    node_id = original.step_run_id.split(":")[1] if original.step_run_id.count(":") >= 2 else None
    node = (version.graph.get("nodes", {}).get(node_id) if version and node_id else None) or {}
    config = (node.get("config") or {}).get("correction")
    return config if isinstance(config, dict) else None


def prepare_correction(
    uow: UnitOfWork, appeal: Appeal, ad: AppealDecision, report: Report, original: ActionProposal
) -> AppealCorrection:
    """Create a correction for one original action, and its proposal when automated.

    The proposal awaits an eligible reviewer's approval (CORR-2). When the
    correction is not eligible now (CORR-3), it is recorded as failed with
    ``appeal_correction_precondition_changed`` and nothing is proposed.
    """
    session = uow.session
    config = correction_config(session, original)
    now = utcnow()
    correction = AppealCorrection(
        installation_id=appeal.installation_id,
        appeal_id=appeal.id,
        appeal_decision_id=ad.id,
        report_id=report.id,
        integration_id=report.integration_id,
        original_proposal_id=original.id,
        original_operation_id=original.operation_id,
        original_target=original.target,
        original_payload_digest=original.payload_digest,
        mode="automated" if config else "manual",
        state=CorrectionState.PENDING,
        created_at=now,
    )
    session.add(correction)
    session.flush()
    actor = Actor.system("appeals")
    _audit(
        uow,
        appeal.installation_id,
        f"correction-prepared:{correction.id}",
        "appeal.correction_prepared",
        actor,
        "appeal_correction",
        correction.id,
        {"original_proposal_id": original.id, "mode": correction.mode},
    )
    if correction.mode == "manual":
        return correction
    try:
        if correction_problems(session, correction):
            raise ActionError("appeal_correction_precondition_changed")
        proposal = _correction_proposal(uow, correction, config, appeal, ad, report, original)
    except ActionError as error:
        move_row(session, correction, CorrectionMove.PREPARATION_FAILED, values={"last_error_code": error.code})
        return correction
    move_row(session, correction, CorrectionMove.PROPOSE, values={"proposal_id": proposal.id})
    return correction


def _correction_proposal(uow, correction, config, appeal, ad, report, original) -> ActionProposal:
    session = uow.session
    # FOUR-7: a retired version only if the action corrected was prepared with it
    prepared_with = prepared_versions(original.component_version_id, original.temporary)
    component = load_action_component(
        session, config.get("component_version_id") or "", report.installation_id, prepared_with
    )
    action_code = config.get("action_code")
    if not isinstance(action_code, str) or not 1 <= len(action_code) <= 200:
        raise ActionError("action_configuration_invalid")
    context = {
        "original": {"action_code": original.action_code, "target": original.target, "payload": original.payload},
        "appeal": {"id": appeal.id, "statement": appeal.statement},
        "appeal_decision": {"id": ad.id, "outcome": ad.outcome},
        "report": {"id": report.id, "public_reference": report.public_reference, "state": report.state},
    }
    payload = evaluate_mapping({"payload": config.get("payload") or DEFAULT_CORRECTION_PAYLOAD}, context)["payload"]
    if not isinstance(payload, dict):
        raise ActionError("action_payload_invalid")
    if schema_errors(payload, component.input_schema):
        raise ActionError("action_payload_schema_invalid")
    new = correction_proposal(
        correction_id=correction.id,
        original=original_facts(original),
        appeal_id=appeal.id,
        appeal_decision_id=ad.id,
        appeal_decision_at=ad.created_at,
        contested_decision_id=appeal.decision_id,
        action_code=action_code,
        payload=payload,
        component_version_id=component.id,
        policy_version_id=report.policy_version_id,
        now=utcnow(),
        destination=destination_of(session, component),  # FOUR-5
    )
    proposal = insert_proposal(session, new)
    open_approval_task(uow, proposal, task_id=new.task_id, queue_id=report.queue_id)
    uow.audit(
        report.installation_id,
        f"action-proposed:{new.operation_id}",
        "action.proposed",
        Actor.system("appeals"),
        "action_proposal",
        new.id,
        new.audit_details,
    )
    return proposal


def redact_rationale(appeal_decision_id: str, *, operator: OperatorUser, appeal_id: str | None = None) -> None:
    """Remove an appeal decision's rationale (e.g. it held personal data).

    Privacy only: the redaction no longer affects any correction of the decision
    (FOUR-7, FOUR-9). A correction follows the appeal decision's outcome, not its
    words, so a pending correction can still be approved, an approved one is still
    delivered, retried and its receipt written, and the appeal decision completes
    and the report closes as usual.

    Raises:
        ApiError: 404 ``appeal_decision_not_found``; 403 ``forbidden`` (admins only)
            or ``maker_checker_violation`` (a maker of either decision); 409
            ``appeal_rationale_already_redacted``.
    """
    if not operator.has_role("admin"):
        raise ApiError(403, "forbidden", "Only admins can redact a rationale.")
    with unit_of_work() as uow:
        ad = uow.session.get(AppealDecision, appeal_decision_id)
        if ad is None or ad.installation_id != operator.installation_id or (appeal_id and ad.appeal_id != appeal_id):
            raise ApiError(404, "appeal_decision_not_found", "No such appeal decision.")
        # An admin who took part in the case does not edit its record: another admin redacts.
        facts = redaction_facts(uow.session, ad)
        if operator.id in makers(facts):
            raise ApiError(403, "maker_checker_violation", "You took part in this case; another admin must redact it.")
        if ad.rationale_redacted_at is not None:
            raise ApiError(409, "appeal_rationale_already_redacted", "The rationale was already redacted.")
        now = utcnow()
        ad.rationale, ad.rationale_redacted_at = None, now
        uow.audit(
            ad.installation_id,
            f"appeal-rationale-redacted:{ad.id}",
            "appeal.rationale_redacted",
            Actor("operator", operator.id),
            "appeal_decision",
            ad.id,
            {},
        )
        uow.commit()
