"""Approve or reject a proposal as its second person (SPEC APPR-1..5), by votes
counted under the approval policies recorded on it (POL-1, POL-2)."""

from __future__ import annotations

import logging
from dataclasses import dataclass

from sqlalchemy import select
from sqlalchemy.exc import IntegrityError

from app.domain import approval_policy as pol
from app.domain.case_states import CorrectionMove, TaskMove
from app.domain.clock import utcnow
from app.domain.errors import ActionError, ApiError
from app.domain.preconditions import acts_on_closed_case, check_preconditions
from app.domain.proposal import delivery as delivery_rules
from app.domain.proposal.destination import in_words
from app.domain.states import ProposalState
from app.models import (
    ActionApproval,
    ActionProposal,
    AppealCorrection,
    ApprovalVote,
    OperatorUser,
    move_proposal,
    move_row,
    new_id,
)
from app.observability import bind
from app.services.cases.snapshot import report_snapshot
from app.services.cases.tasks import finish_task_for_proposal
from app.services.lifecycle.action_targets import delivery_in_force
from app.services.lifecycle.events import emit_approval_event
from app.services.lifecycle.maker_lookup import approval_verdict, makers_of  # noqa: F401 (public names)
from app.services.lifecycle.proposals import delivery_of, guard
from app.services.lifecycle.votes import REFUSALS, Ballot, approver_of, ballot_of, eligible_policies
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
PRECONDITION_REFUSALS = {
    "action_precondition_changed": "The case changed since this action was proposed; it can no longer be "
    "approved. Reject it and decide the case again.",
    "action_case_no_longer_eligible": "The case was appealed or closed since this action was proposed; it can no "
    "longer be approved. Reject it.",
    "action_report_missing": "The report this action enforces is missing; it can no longer be approved.",
}


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


@dataclass(frozen=True)
class ApprovalResult:
    """What a decision did. `state` is ``approved`` or ``rejected`` when it decided
    the proposal, or ``approval_required`` when it recorded a vote that does not decide
    it yet (POL-1); then `missing` says, in words, what is still needed."""

    proposal_id: str
    approval_id: str  # the decision's ActionApproval, or the recorded vote's id
    state: str
    idempotent_replay: bool
    missing: str | None = None


def recheck_preconditions(session, proposal: ActionProposal) -> None:
    """The preconditions checked before sending, checked again when the last factor
    is met (POL-2): nothing is approved for a case that changed.

    Raises:
        ApiError: 409 ``action_precondition_changed`` / ``action_case_no_longer_eligible``
            (PRE-1, PRE-2) / ``action_report_missing``.
    """
    if proposal.appeal_id:  # a correction's own conditions: checked as it is approved (`_decide_without_run`)
        return
    try:
        snapshot = report_snapshot(session, proposal.report_id)
        closed_ok = acts_on_closed_case(
            is_correction=proposal.is_correction, is_reversal=proposal.is_reversal, is_notice=proposal.is_notice
        )
        check_preconditions(proposal.preconditions or {}, snapshot, closed_ok)
    except ActionError as error:
        raise ApiError(
            409, error.code, PRECONDITION_REFUSALS.get(error.code, "The case changed; this action no longer applies.")
        ) from error


def _vote_expiry(ballot: Ballot, approver, now, authorization_expires_at):
    """When the vote stops counting (POL-2): the shortest time to live of the
    alternatives it can count for, within the proposal's authorization expiry."""
    return pol.expiry_for(ballot.policies, approver, now, authorization_expires_at)


def _counted_under(standing: pol.Standing, approver_id: str, decision: str, approver) -> tuple[str | None, str | None]:
    """(policy key, factor key) a vote counts under: the releasing alternative first,
    else the first that counts it; a rejection, the first factor it counts against."""
    ordered = [standing.released_by] if standing.released_by else []
    ordered += [p for p in standing.alternatives if p is not standing.released_by]
    for progress in ordered:
        for factor in progress.factors:
            if decision == pol.APPROVE and approver_id in factor.approvers:
                return progress.policy.key, factor.factor.key
            if decision == pol.REJECT and factor.factor.eligibility.admits(approver):
                return progress.policy.key, factor.factor.key
    return None, None


def write_decision(session, proposal: ActionProposal, operator, decision: str, reason: str | None,
                   idempotency_key: str, now, values: dict | None = None) -> str:
    """Move the proposal out of approval (APPR-5) and write its one `ActionApproval`
    (APPR-3); `values` are set on the proposal with the move (an emergency's flag).

    Returns:
        The approval's id.

    Raises:
        ApiError: 409 ``action_approval_changed`` when another decision moved it first.
    """
    change = delivery_rules.decide(decision)
    if not move_proposal(session, proposal.id, change.move, where=guard(change), values=values or {}):
        raise ApiError(409, "action_approval_changed", DECISION_REFUSALS["action_approval_changed"])
    approval_id = new_id("apv")
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
    return approval_id


def decide_proposal(
    proposal_id: str,
    *,
    decision: str,
    payload_digest: str,
    reason: str | None,
    idempotency_key: str,
    operator: OperatorUser,
) -> ApprovalResult:
    """Record one person's approval or rejection of a proposal, and its decision when
    the votes decide it (APPR-1..5, POL-1, POL-2).

    Each decision is a vote bound to the payload digest, counting until the policy's
    time to live ends (within the authorization expiry). When the votes meet one of
    the alternatives recorded on the proposal (and none of its factors is vetoed) the
    preconditions are checked again and the one `ActionApproval` is written by the
    releasing person; when every alternative is vetoed the rejecting one is written;
    otherwise the vote is recorded and the proposal keeps waiting. Under the default
    policy (one reviewer) the first decision decides, as before POL.

    Args:
        proposal_id: the proposal.
        decision: ``approved`` or ``rejected``.
        payload_digest: the digest the reviewer saw and confirms.
        reason: optional, trimmed, 3..2,000 characters; required for a rejection
            under a policy with ``reason_on_reject`` (POL-1).
        idempotency_key: 1..200 characters, unique per approver.
        operator: the reviewer.

    Returns:
        The decision or the recorded vote, flagged ``idempotent_replay`` for a
        repeated request; `ApprovalResult.missing` says what a vote still waits for.

    Raises:
        ApiError: 400 input errors and ``action_decision_reason_required``; 404
            ``action_not_found``; 403 ``maker_checker_violation`` (FOUR-1) and
            ``approval_not_eligible`` (POL-1); 409 ``idempotency_key_reused``,
            ``approval_already_given``, ``approval_factor_already_met`` (POL-2), the
            state, digest and expiry refusals (APPR-1..4), ``action_delivery_changed``
            (FOUR-5) and a precondition's code when the releasing vote finds the case
            changed (PRE-1, PRE-2, POL-2). A refusal changes no row.
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
        replay = _replay(session, proposal_id, decision, idempotency_key, operator)
        if replay is not None:
            return replay
        proposal = session.get(ActionProposal, proposal_id, with_for_update=True)  # votes on it serialize
        if proposal is None or proposal.installation_id != operator.installation_id:
            raise ApiError(404, "action_not_found", "No such action proposal.")
        verdict = approval_verdict(session, proposal, operator)
        if not verdict:
            raise ApiError(403, "maker_checker_violation", verdict.reason)
        now = utcnow()
        refusal = delivery_rules.decision_refusal(delivery_of(proposal), payload_digest, now)
        if refusal is not None:
            raise ApiError(409, refusal, DECISION_REFUSALS[refusal])
        ballot = ballot_of(session, proposal)
        approver = approver_of(operator)
        code = ballot.refusal(approver, decision, proposal.payload_digest, now)
        if code is not None:
            status, message = REFUSALS[code]
            raise ApiError(status, code, message)
        if decision == pol.REJECT and reason is None and any(
            p.reason_on_reject for p in eligible_policies(ballot.policies, approver)
        ):
            raise ApiError(
                400, "action_decision_reason_required", "Say why you reject it: this policy needs a reason.", "reason"
            )
        expires_at = _vote_expiry(ballot, approver, now, proposal.expires_at)
        vote = pol.Vote(approver, decision, proposal.payload_digest, expires_at, None, now)
        standing = pol.standing(
            ballot.policies,
            (*ballot.votes, vote),
            makers=ballot.makers,
            payload_digest=proposal.payload_digest,
            now=now,
        )
        policy_key, factor_key = _counted_under(standing, operator.id, decision, approver)
        releases = decision == pol.APPROVE and standing.released_by is not None
        vetoes = decision == pol.REJECT and standing.vetoed
        if releases:
            recheck_preconditions(session, proposal)
            _check_delivery_unchanged(session, proposal)
        vote_id = new_id("vot")
        session.add(
            ApprovalVote(
                id=vote_id,
                installation_id=proposal.installation_id,
                proposal_id=proposal.id,
                approver_id=operator.id,
                decision=decision,
                reason=reason,
                payload_digest=proposal.payload_digest,
                policy_key=policy_key,
                factor_key=factor_key,
                idempotency_key=idempotency_key,
                created_at=now,
                expires_at=expires_at,
            )
        )
        if not (releases or vetoes):
            return _record_vote(uow, proposal, operator, vote_id, decision, reason, idempotency_key, standing,
                                (policy_key, factor_key, expires_at))
        approval_id = write_decision(session, proposal, operator, decision, reason, idempotency_key, now)
        operation_id = proposal.operation_id
        finish_task_for_proposal(uow, proposal.id, TaskMove.COMPLETE, "direct_action_decision")
        details = {"payload_digest": proposal.payload_digest, "reason": reason, "approval_id": approval_id}
        if proposal.approval_route:  # POL-3: which policy decided it
            details["policy"] = (standing.released_by.policy.key if releases else policy_key)
            details["votes"] = standing.in_words()
        uow.audit(
            proposal.installation_id,
            f"action-decision:{proposal.id}:{operator.id}:{idempotency_key}",
            "action.approved" if decision == "approved" else "action.rejected",
            Actor("operator", operator.id),
            "action_proposal",
            proposal.id,
            details,
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


def _replay(session, proposal_id: str, decision: str, idempotency_key: str, operator) -> ApprovalResult | None:
    """A repeated request (same approver and key): the decision or the vote it made.

    Raises:
        ApiError: 409 ``idempotency_key_reused`` for another proposal or decision.
    """
    prior = session.scalar(
        select(ActionApproval).where(
            ActionApproval.approver_id == operator.id, ActionApproval.idempotency_key == idempotency_key
        )
    )
    if prior is None:
        prior = session.scalar(
            select(ApprovalVote).where(
                ApprovalVote.approver_id == operator.id, ApprovalVote.idempotency_key == idempotency_key
            )
        )
        if prior is None:
            return None
    if prior.proposal_id != proposal_id or prior.decision != decision:
        raise ApiError(
            409, "idempotency_key_reused", "This idempotency key was already used for another action decision."
        )
    if isinstance(prior, ActionApproval):
        return ApprovalResult(proposal_id, prior.id, decision, True)
    return ApprovalResult(proposal_id, prior.id, ProposalState.APPROVAL_REQUIRED, True)


def _record_vote(uow, proposal, operator, vote_id, decision, reason, idempotency_key, standing, counted):
    """A vote that does not decide the proposal yet: audited with its policy and
    factor; the proposal keeps waiting (POL-1)."""
    policy_key, factor_key, expires_at = counted
    missing = standing.in_words()
    uow.audit(
        proposal.installation_id,
        f"action-vote:{proposal.id}:{operator.id}:{idempotency_key}",
        "action.vote_recorded",
        Actor("operator", operator.id),
        "action_proposal",
        proposal.id,
        {
            "vote_id": vote_id,
            "decision": decision,
            "reason": reason,
            "payload_digest": proposal.payload_digest,
            "policy": policy_key,
            "factor": factor_key,
            "expires_at": expires_at.isoformat(),
            "progress": missing,
        },
    )
    try:
        uow.commit()
    except IntegrityError as error:
        raise ApiError(
            409, "action_approval_changed", "Another vote was recorded first. Refresh the action."
        ) from error
    with bind(proposal_id=proposal.id, operation_id=proposal.operation_id):
        log.info("vote recorded", extra={"vote_id": vote_id, "decision": decision})
    return ApprovalResult(proposal.id, vote_id, ProposalState.APPROVAL_REQUIRED, False, missing)
