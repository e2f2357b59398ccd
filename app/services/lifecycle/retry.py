"""Operator retry of a terminally failed delivery: a new delivery cycle (SPEC RTRY)."""

from __future__ import annotations

from dataclasses import dataclass

from sqlalchemy import select

from app.domain.clock import utcnow
from app.domain.errors import ActionError, ApiError
from app.domain.preconditions import acts_on_closed_case, check_preconditions
from app.domain.proposal import delivery as delivery_rules
from app.domain.states import ProposalState
from app.models import ActionProposal, AuditEvent, OperatorUser, WorkflowRun, move_proposal
from app.queueing import enqueue_delivery
from app.services.cases.snapshot import report_snapshot
from app.services.lifecycle.proposals import delivery_of, guard
from app.services.uow import Actor, unit_of_work

RETRY_ACTION = "action.retry_requested"
RETRY_REFUSALS = {
    "action_retry_digest_mismatch": "Retry requires the exact immutable payload digest.",
    "action_not_retryable": "Only a terminally failed action can be retried.",
    "action_approval_expired": "The action's authorization expired. "
    "Review and authorize a new proposal before sending it.",
}


class RetryConflict(ApiError):
    """409 ``action_retry_conflict``: the proposal changed between the read and the
    guarded write (a bulk retry treats it as a changed list, CONN-4)."""

    def __init__(self) -> None:
        super().__init__(
            409, "action_retry_conflict", "The action changed before the retry was saved. Refresh it and try again."
        )


@dataclass(frozen=True)
class RetryResult:
    proposal_id: str
    state: str
    delivery_cycle: int
    idempotent_replay: bool


def retry_proposal(
    proposal_id: str, *, payload_digest: str, idempotency_key: str, operator: OperatorUser
) -> RetryResult:
    """Start a new delivery cycle for a terminally failed proposal.

    Args:
        proposal_id: the proposal.
        payload_digest: the exact digest the operator saw (RTRY-1).
        idempotency_key: 1..200 characters, per operator (RTRY-3).
        operator: who asks.

    Returns:
        The proposal's state (``queued``) and its new cycle; a replay answers its
        current state.

    Raises:
        ApiError: 400 ``idempotency_key_invalid``; 404 ``action_not_found``; 409
            ``idempotency_key_reused``, ``action_retry_digest_mismatch``,
            ``action_not_retryable``, ``action_approval_expired``,
            ``action_precondition_changed``, ``action_case_no_longer_eligible``,
            ``action_retry_conflict`` (also for a terminated run) (RTRY-1..3).
    """
    key = request_key("action-retry", idempotency_key)
    with unit_of_work() as uow:
        session = uow.session
        proposal = own_proposal(session, proposal_id, operator)
        if replayed(session, key, proposal_id, operator):
            if proposal.payload_digest != payload_digest:
                raise ApiError(409, "action_retry_digest_mismatch", "Retry requires the exact payload digest.")
            return RetryResult(proposal.id, proposal.state, proposal.delivery_cycle, True)
        cycle = start_new_cycle(uow, proposal, payload_digest=payload_digest, key=key, operator=operator, now=utcnow())
        uow.commit()
    return RetryResult(proposal_id, ProposalState.QUEUED, cycle, False)


def request_key(prefix: str, idempotency_key: str) -> str:
    """The audit row's key of an operator's request: `prefix` and the client's key.

    Raises:
        ApiError: 400 ``idempotency_key_invalid`` unless 1..200 characters.
    """
    if not isinstance(idempotency_key, str) or not 1 <= len(idempotency_key) <= 200:
        raise ApiError(400, "idempotency_key_invalid", "An idempotency key of 1 to 200 characters is required.")
    return f"{prefix}:{idempotency_key}"


def own_proposal(session, proposal_id: str, operator: OperatorUser) -> ActionProposal:
    """The proposal in the operator's installation.

    Raises:
        ApiError: 404 ``action_not_found`` for none there.
    """
    proposal = session.get(ActionProposal, proposal_id)
    if proposal is None or proposal.installation_id != operator.installation_id:
        raise ApiError(404, "action_not_found", "No such action proposal.")
    return proposal


def replayed(session, key: str, proposal_id: str, operator: OperatorUser) -> bool:
    """Whether `key` already named this operator's request on this proposal (RTRY-3).

    Raises:
        ApiError: 409 ``idempotency_key_reused`` when it named another proposal or
            another operator's request.
    """
    prior = session.scalar(select(AuditEvent).where(AuditEvent.idempotency_key == key))
    if prior is None:
        return False
    if prior.target_id != proposal_id or prior.actor_id != operator.id:
        raise ApiError(409, "idempotency_key_reused", "This idempotency key was already used for another retry.")
    return True


def start_new_cycle(
    uow, proposal: ActionProposal, *, payload_digest: str, key: str, operator: OperatorUser, now
) -> int:
    """The checks and the guarded write of one operator retry, inside the caller's
    unit of work (RTRY-1, RTRY-2): a new delivery cycle, its audit row under `key`,
    and the delivery job enqueued once the caller commits. The single retry and the
    dead letters' bulk retry (CONN-4) both go through here.

    Args:
        uow: the caller's unit of work (it commits).
        proposal: the proposal, loaded in that unit of work.
        payload_digest: the digest the operator confirmed.
        key: the audit row's idempotency key (names this retry).
        operator: who asks.
        now: the decision time (UTC).

    Returns:
        The new delivery cycle.

    Raises:
        ApiError: 409 ``action_retry_digest_mismatch``, ``action_not_retryable``,
            ``action_approval_expired``, ``action_precondition_changed``,
            ``action_case_no_longer_eligible``, ``action_retry_conflict`` (a
            terminated run; `RetryConflict` when the guarded write missed),
            ``action_reversal_superseded`` (a reversal an approved "end now" or
            "extend" replaced, TEMP-3).
    """
    session = uow.session
    proposal_id = proposal.id
    refusal = delivery_rules.retry_refusal(delivery_of(proposal), payload_digest, now)
    if refusal is not None:
        raise ApiError(409, refusal, RETRY_REFUSALS[refusal])
    if proposal.reverses_proposal_id:  # TEMP-3: a replaced reversal stays replaced
        from app.services.lifecycle.reversals import REFUSALS, superseded

        if superseded(session, proposal):
            raise ApiError(409, "action_reversal_superseded", REFUSALS["action_reversal_superseded"])
    try:
        # FOUR-7: the case is checked as delivery checks it (a reversal ends its action on a closed case)
        closed_ok = acts_on_closed_case(
            is_correction=proposal.is_correction, is_reversal=proposal.is_reversal, is_notice=proposal.is_notice
        )
        check_preconditions(proposal.preconditions, report_snapshot(session, proposal.report_id), closed_ok)
        if proposal.appeal_id:
            from app.services.lifecycle.corrections import check_correction_eligible

            check_correction_eligible(session, proposal)
    except ActionError as error:
        raise ApiError(
            409, error.code, "The case changed since this action was proposed; it can no longer be retried."
        ) from error
    run_open = session.scalar(select(WorkflowRun.state).where(WorkflowRun.id == proposal.run_id)) not in (
        "terminated",
        "cancelled",
    )
    # a correction or a reversal undoes what is in force, and a notice tells the user of
    # a restriction in force, whatever became of the run (FOUR-7, DSA-4)
    if not (proposal.appeal_id or proposal.is_reversal or proposal.is_notice or run_open):
        raise ApiError(
            409, "action_retry_conflict", "The workflow run of this action was terminated; it cannot be retried."
        )
    cycle = proposal.delivery_cycle
    change = delivery_rules.retry(delivery_of(proposal), now)
    moved = move_proposal(session, proposal.id, change.move, where=guard(change), values=change.values)
    if not moved:
        raise RetryConflict()
    uow.audit(
        proposal.installation_id,
        key,
        RETRY_ACTION,
        Actor("operator", operator.id),
        "action_proposal",
        proposal.id,
        {"payload_digest": payload_digest, "delivery_cycle": cycle + 1},
    )
    session.refresh(proposal)
    attempts = proposal.delivery_attempt_count
    uow.after_commit(lambda: enqueue_delivery(proposal_id, cycle + 1, attempts))
    return cycle + 1
