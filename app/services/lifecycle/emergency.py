"""Emergency action, reviewed afterwards (SPEC POL-6).

An operator with the ``emergency`` role approves a proposal alone, with a reason of
substance: the one decision (`ActionApproval`) is written as an emergency, the
proposal is marked `emergency` and continues exactly as an approved one (queued and
sent at once), and a retrospective review (`EmergencyReview`) is due within the
installation's `emergency_review_seconds`. A second person — a reviewer, neither the
one who acted nor a maker — agrees or disagrees; disagreeing proposes the action's
compensation in the same transaction.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from datetime import datetime

from sqlalchemy import select, update
from sqlalchemy.exc import IntegrityError

from app.domain import emergency_action as rules
from app.domain.case_states import TaskMove
from app.domain.clock import utcnow
from app.domain.errors import ApiError
from app.domain.proposal import delivery as delivery_rules
from app.models import ActionApproval, ActionProposal, EmergencyReview, OperatorUser
from app.observability import bind
from app.services.approval_routing import current_settings
from app.services.cases.tasks import finish_task_for_proposal
from app.services.lifecycle.approval import (
    DECISION_REFUSALS,
    _check_delivery_unchanged,
    continue_after_decision,
    recheck_preconditions,
    write_decision,
    validate_reason,
)
from app.services.lifecycle.maker_lookup import makers_of
from app.services.lifecycle.proposals import delivery_of
from app.services.uow import Actor, unit_of_work

log = logging.getLogger(__name__)
COMPENSATION_REASON = "emergency_review_disagreed"


@dataclass(frozen=True)
class EmergencyResult:
    proposal_id: str
    approval_id: str
    review_id: str
    due_at: datetime  # UTC
    idempotent_replay: bool


@dataclass(frozen=True)
class ReviewResult:
    review_id: str
    state: str
    compensation_proposal_id: str | None
    idempotent_replay: bool


def _refuse(status: int, code: str, field: str | None = None):
    raise ApiError(status, code, rules.REFUSALS[code], field)


def act_in_emergency(
    proposal_id: str, *, reason: str, payload_digest: str, idempotency_key: str, operator: OperatorUser
) -> EmergencyResult:
    """Approve a proposal alone, as an emergency, and open its retrospective review (POL-6).

    The operator may be the proposal's maker; a bulk batch's item is refused (its
    batch decides). The proposal then continues as any approved one
    (`approval.continue_after_decision`): queued and sent at once.

    Args:
        proposal_id: a proposal awaiting approval.
        reason: why it cannot wait; a reason of substance (`emergency_action.reason_problem`).
        payload_digest: the digest the operator saw.
        idempotency_key: 1..200 characters, unique per operator; a replay returns the first result.
        operator: holds the ``emergency`` role.

    Returns:
        The decision, the review and when the review is due (UTC).

    Raises:
        ApiError: 403 ``emergency_not_permitted``; 400 ``emergency_reason_too_thin``;
            404 ``action_not_found``; 409 the approval's refusals (not awaiting approval,
            digest mismatch, an item of a batch, changed or expired, delivery changed).
    """
    if not rules.may_act_alone(operator.roles):
        _refuse(403, "emergency_not_permitted")
    if rules.reason_problem(reason):
        _refuse(400, "emergency_reason_too_thin", "reason")
    reason = reason.strip()
    if not isinstance(idempotency_key, str) or not 1 <= len(idempotency_key) <= 200:
        raise ApiError(400, "idempotency_key_invalid", "An idempotency key of 1 to 200 characters is required.")
    if not isinstance(payload_digest, str):
        raise ApiError(400, "action_approval_digest_mismatch", "The payload digest is required.", "payload_digest")
    with unit_of_work() as uow:
        session = uow.session
        prior = session.scalar(
            select(ActionApproval).where(
                ActionApproval.approver_id == operator.id, ActionApproval.idempotency_key == idempotency_key
            )
        )
        if prior is not None:
            review = session.scalar(select(EmergencyReview).where(EmergencyReview.proposal_id == prior.proposal_id))
            if prior.proposal_id != proposal_id or review is None:
                raise ApiError(
                    409, "idempotency_key_reused", "This idempotency key was already used for another decision."
                )
            return EmergencyResult(proposal_id, prior.id, review.id, review.due_at, True)
        proposal = session.get(ActionProposal, proposal_id)
        if proposal is None or proposal.installation_id != operator.installation_id:
            raise ApiError(404, "action_not_found", "No such action proposal.")
        now = utcnow()
        refusal = delivery_rules.decision_refusal(delivery_of(proposal), payload_digest, now)
        if refusal is not None:
            raise ApiError(409, refusal, DECISION_REFUSALS[refusal])
        _check_delivery_unchanged(session, proposal)
        recheck_preconditions(session, proposal)  # POL-2: acting alone is no way round a changed case
        approval_id = write_decision(
            session, proposal, operator, "approved", rules.REASON_PREFIX + reason, idempotency_key, now,
            values={"emergency": True},
        )
        seconds = current_settings(session, proposal.installation_id).emergency_review_seconds
        review = EmergencyReview(
            installation_id=proposal.installation_id,
            proposal_id=proposal.id,
            acted_by=operator.id,
            reason=reason,
            acted_at=now,
            due_at=rules.review_due_at(now, seconds),
            state=rules.ReviewState.OPEN.value,
        )
        session.add(review)
        session.flush()
        finish_task_for_proposal(uow, proposal.id, TaskMove.COMPLETE, "emergency_action")
        uow.audit(
            proposal.installation_id,
            f"action-emergency:{proposal.id}:{operator.id}:{idempotency_key}",
            "action.emergency",
            Actor("operator", operator.id),
            "action_proposal",
            proposal.id,
            {
                "payload_digest": proposal.payload_digest,
                "reason": reason,
                "approval_id": approval_id,
                "review_id": review.id,
                "review_due_at": review.due_at.isoformat(),
            },
        )
        continue_after_decision(uow, proposal, approval_id, "approved", operator)
        result = EmergencyResult(proposal.id, approval_id, review.id, review.due_at, False)
        operation_id = proposal.operation_id
        try:
            uow.commit()
        except IntegrityError as error:  # another decision won the race
            raise ApiError(
                409, "action_approval_changed", "Another decision was recorded first. Refresh the action."
            ) from error
    with bind(proposal_id=proposal_id, operation_id=operation_id):
        log.warning("emergency action", extra={"approval_id": approval_id, "review_id": result.review_id})
    return result


def _compensation_of(session, original: ActionProposal) -> tuple[str, str, dict] | None:
    """(component version, action code, payload) that undoes `original`: its action
    node's ``correction``, with the original's payload (as a bulk undo does) and the
    reason code saying why; None when the action names none."""
    from app.services.cases.appeals import correction_config

    config = correction_config(session, original)
    if not config or not config.get("component_version_id") or not config.get("action_code"):
        return None
    payload = dict(original.payload or {})
    if "reason_code" in payload:
        payload["reason_code"] = COMPENSATION_REASON
    return config["component_version_id"], config["action_code"], payload


def review_emergency(review_id: str, *, verdict: str, reason: str, operator: OperatorUser) -> ReviewResult:
    """Give an emergency action's retrospective review (POL-6).

    Disagreeing proposes the action's compensation (`compensation.propose_compensation_in`,
    COMP-1) in the same transaction and links it; the compensation waits for approval
    as any does. An action whose workflow names no compensation is recorded as
    disagreed without one (the page says so).

    Args:
        review_id: an `EmergencyReview` id.
        verdict: ``agree`` or ``disagree``.
        reason: 3..2,000 characters, required.
        operator: a reviewer, not the one who acted, not a maker of the action.

    Returns:
        The review's new state and the compensation proposed, if any; a repeat of the
        same verdict by the same reviewer is an idempotent replay.

    Raises:
        ApiError: 400 ``emergency_review_verdict_invalid`` / ``emergency_review_reason_invalid``;
            404 ``emergency_review_not_found``; 403 ``emergency_review_not_reviewer`` /
            ``emergency_review_by_actor`` / ``emergency_review_by_maker``; 409
            ``emergency_review_closed`` and the compensation's refusals (e.g.
            ``action_compensation_unavailable`` while the action is not applied yet).
    """
    if verdict not in rules.REVIEW_MOVES:
        _refuse(400, "emergency_review_verdict_invalid", "verdict")
    try:
        reason = validate_reason(reason)
    except ApiError:
        reason = None
    if reason is None:
        _refuse(400, "emergency_review_reason_invalid", "reason")
    with unit_of_work() as uow:
        session = uow.session
        review = session.get(EmergencyReview, review_id)
        if review is None or review.installation_id != operator.installation_id:
            raise ApiError(404, "emergency_review_not_found", "No such emergency review.")
        sources, target = rules.REVIEW_MOVES[verdict]
        if review.reviewer_id == operator.id and review.state == target.value:
            return ReviewResult(review.id, review.state, review.compensation_proposal_id, True)
        original = session.get(ActionProposal, review.proposal_id)
        refusal = rules.review_refusal(
            operator.id, operator.roles, review.acted_by, makers_of(session, original), review.state
        )
        if refusal is not None:
            _refuse(409 if refusal == "emergency_review_closed" else 403, refusal)
        now = utcnow()
        compensation_id = None
        if target is rules.ReviewState.DISAGREED:
            compensation = _compensation_of(session, original)
            if compensation is not None:
                from app.services.lifecycle.compensation import propose_compensation_in

                component_version_id, action_code, payload = compensation
                compensation_id = propose_compensation_in(
                    uow,
                    original.id,
                    component_version_id=component_version_id,
                    action_code=action_code,
                    target=original.target,
                    payload=payload,
                    idempotency_key=f"emergency-review:{review.id}",
                    operator=operator,
                ).proposal_id
        written = {"reviewer_id": operator.id, "reviewed_at": now, "review_reason": reason,
                   "compensation_proposal_id": compensation_id}
        moved = session.execute(  # the review's guarded move (`emergency_action.REVIEW_MOVES`)
            update(EmergencyReview)
            .where(EmergencyReview.id == review.id, EmergencyReview.state.in_([s.value for s in sources]))
            .values(state=target.value, **written)
            .execution_options(synchronize_session=False)
        ).rowcount
        if moved != 1:
            _refuse(409, "emergency_review_closed")
        uow.audit(
            review.installation_id,
            f"emergency-review:{review.id}",
            f"action.emergency_review_{target.value}",
            Actor("operator", operator.id),
            "action_proposal",
            original.id,
            {"review_id": review.id, "reason": reason, "compensation_proposal_id": compensation_id},
        )
        uow.commit()
    return ReviewResult(review_id, target.value, compensation_id, False)
