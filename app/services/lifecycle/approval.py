"""Approve or reject a proposal as its second person (SPEC APPR-1..5)."""

from __future__ import annotations

import logging
from dataclasses import dataclass

from sqlalchemy import select
from sqlalchemy.exc import IntegrityError

from app.domain.case_states import CorrectionMove, TaskMove
from app.domain.clock import utcnow
from app.domain.errors import ApiError
from app.domain.proposal import delivery as delivery_rules
from app.domain.proposal.destination import in_words
from app.models import (
    ActionApproval,
    ActionProposal,
    AppealCorrection,
    OperatorUser,
    move_proposal,
    move_row,
    new_id,
)
from app.observability import bind
from app.services.cases.tasks import finish_task_for_proposal
from app.services.lifecycle.action_targets import delivery_in_force
from app.services.lifecycle.events import emit_approval_event
from app.services.lifecycle.maker_lookup import approval_verdict, makers_of  # noqa: F401 (public names)
from app.services.lifecycle.proposals import delivery_of, guard
from app.services.uow import Actor, unit_of_work

log = logging.getLogger(__name__)
DECISIONS = ("approved", "rejected")
DECISION_REFUSALS = {
    "action_not_awaiting_approval": "The action is not awaiting approval.",
    "action_approval_digest_mismatch": "The payload digest does not match the immutable proposal. "
    "Reload it and review again.",
    "action_approval_changed": "The proposal changed or its authorization expired. Refresh it before deciding.",
    "action_decided_with_its_batch": "This action is an item of a bulk batch: approve or reject the batch.",
}


@dataclass(frozen=True)
class ApprovalResult:
    proposal_id: str
    approval_id: str
    state: str
    idempotent_replay: bool


def _decide_without_run(uow, proposal: ActionProposal, decision: str, operator: OperatorUser) -> None:
    """Corrections, compensations and reversals have no run waiting for the approval:
    an approved one is queued at once (or for its not_before); a correction records
    who approved it (CORR-2)."""
    from app.queueing import enqueue_delivery
    from app.services.lifecycle.corrections import correction_problems

    correction = uow.session.scalar(select(AppealCorrection).where(AppealCorrection.proposal_id == proposal.id))
    if correction is not None:
        now = utcnow()
        correction.approved_by, correction.approved_at = operator.id, now
        if decision == "rejected":
            move_row(uow.session, correction, CorrectionMove.REJECT)
        elif correction_problems(uow.session, correction, proposal.target, proposal.preconditions):
            raise ApiError(
                409,
                "appeal_correction_precondition_changed",
                "The appeal or the original action changed; this correction no longer applies.",
            )
    if decision != "approved":
        return
    if proposal.reverses_proposal_id:  # an "end now" or "extend" replaces the scheduled reversal (TEMP-3)
        from app.services.lifecycle.reversals import replace_scheduled

        replace_scheduled(uow, proposal, operator)
    change = delivery_rules.enqueue_approved(utcnow(), proposal.not_before)
    move_proposal(uow.session, proposal.id, change.move, where=guard(change), values=change.values)
    proposal_id, cycle, attempts = proposal.id, proposal.delivery_cycle, proposal.delivery_attempt_count
    uow.after_commit(lambda: enqueue_delivery(proposal_id, cycle, attempts))


def continue_after_decision(uow, proposal: ActionProposal, approval_id: str, decision: str, operator) -> None:
    """What follows the one decision, in its unit of work (APPR-5): a correction,
    compensation or reversal is queued at once when approved; any other proposal's run
    is told (it queues the approved action). Also the emergency action's path (POL-6)."""
    uow.session.refresh(proposal)
    if proposal.appeal_id or proposal.compensates_proposal_id or proposal.reverses_proposal_id:
        _decide_without_run(uow, proposal, decision, operator)
    else:
        emit_approval_event(uow, proposal, approval_id, decision, operator.id)


def validate_reason(reason: str | None) -> str | None:
    """Trim an optional reason; 3..2,000 characters when given (APPR-1).

    Raises:
        ApiError: 400 ``action_decision_reason_invalid``.
    """
    if reason is None:
        return None
    if not isinstance(reason, str):
        raise ApiError(400, "action_decision_reason_invalid", "The reason must be text.", "reason")
    trimmed = reason.strip()
    if trimmed == "":
        return None
    if not 3 <= len(trimmed) <= 2000:
        raise ApiError(
            400,
            "action_decision_reason_invalid",
            "The decision reason must contain 3 to 2,000 characters.",
            "reason",
        )
    return trimmed


def _check_delivery_unchanged(session, proposal: ActionProposal) -> None:
    """Refuse to approve a delivery that is no longer the one the page shows (FOUR-5).

    Raises:
        ApiError: 409 ``action_delivery_changed`` naming the shown and the current delivery.
    """
    if proposal.delivery is None:  # prepared before FOUR-5: nothing was shown
        return
    current = delivery_in_force(session, proposal)
    if current is None or current == proposal.delivery:
        return
    shown, now = in_words(proposal.delivery), in_words(current)
    raise ApiError(
        409,
        "action_delivery_changed",
        f"Where this action goes or how its answer is read changed after it was prepared. "
        f"Shown: {shown.text}. Now: {now.text}. Reject it; a new proposal will show the new delivery.",
    )


def decide_proposal(
    proposal_id: str,
    *,
    decision: str,
    payload_digest: str,
    reason: str | None,
    idempotency_key: str,
    operator: OperatorUser,
) -> ApprovalResult:
    """Record the one approval or rejection of a proposal.

    Args:
        proposal_id: the proposal.
        decision: ``approved`` or ``rejected``.
        payload_digest: the digest the reviewer saw and confirms.
        reason: optional, trimmed, 3..2,000 characters.
        idempotency_key: 1..200 characters, unique per approver.
        operator: the reviewer.

    Returns:
        The approval, flagged ``idempotent_replay`` for a repeated request.

    Raises:
        ApiError: 400 ``action_decision_invalid`` / ``action_decision_reason_invalid``
            / ``idempotency_key_invalid``; 404 ``action_not_found``; 409
            ``idempotency_key_reused``; 403 ``maker_checker_violation``; 409
            ``action_not_awaiting_approval``, ``action_approval_digest_mismatch``,
            ``action_approval_changed`` (APPR-1..4), ``action_delivery_changed`` (FOUR-5:
            an approval of a delivery no longer in force).
    """
    if decision not in DECISIONS:
        raise ApiError(400, "action_decision_invalid", "The decision must be approved or rejected.", "decision")
    reason = validate_reason(reason)
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
            if prior.proposal_id != proposal_id or prior.decision != decision:
                raise ApiError(
                    409, "idempotency_key_reused", "This idempotency key was already used for another action decision."
                )
            return ApprovalResult(proposal_id, prior.id, decision, True)
        proposal = session.get(ActionProposal, proposal_id)
        if proposal is None or proposal.installation_id != operator.installation_id:
            raise ApiError(404, "action_not_found", "No such action proposal.")
        verdict = approval_verdict(session, proposal, operator)
        if not verdict:
            raise ApiError(403, "maker_checker_violation", verdict.reason)
        now = utcnow()
        refusal = delivery_rules.decision_refusal(delivery_of(proposal), payload_digest, now)
        if refusal is not None:
            raise ApiError(409, refusal, DECISION_REFUSALS[refusal])
        if decision == "approved":
            _check_delivery_unchanged(session, proposal)
        change = delivery_rules.decide(decision)
        if not move_proposal(session, proposal.id, change.move, where=guard(change)):
            raise ApiError(409, "action_approval_changed", DECISION_REFUSALS["action_approval_changed"])
        approval_id = new_id("apv")
        operation_id = proposal.operation_id
        session.add(
            ActionApproval(
                id=approval_id,
                installation_id=proposal.installation_id,
                proposal_id=proposal.id,
                task_id=None,
                approver_id=operator.id,
                payload_digest=proposal.payload_digest,
                decision=decision,
                reason=reason,
                idempotency_key=idempotency_key,
                created_at=now,
            )
        )
        finish_task_for_proposal(uow, proposal.id, TaskMove.COMPLETE, "direct_action_decision")
        uow.audit(
            proposal.installation_id,
            f"action-decision:{proposal.id}:{operator.id}:{idempotency_key}",
            "action.approved" if decision == "approved" else "action.rejected",
            Actor("operator", operator.id),
            "action_proposal",
            proposal.id,
            {"payload_digest": proposal.payload_digest, "reason": reason, "approval_id": approval_id},
        )
        continue_after_decision(uow, proposal, approval_id, decision, operator)
        try:
            uow.commit()
        except IntegrityError as error:  # another decision won the race
            raise ApiError(
                409, "action_approval_changed", "Another decision was recorded first. Refresh the action."
            ) from error
    with bind(proposal_id=proposal_id, operation_id=operation_id):
        log.info("action %s", decision, extra={"approval_id": approval_id})
    return ApprovalResult(proposal_id, approval_id, decision, False)
