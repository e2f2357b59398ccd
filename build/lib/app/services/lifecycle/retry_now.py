""""Retry now": the next attempt of a delivery that failed and will be retried, started
at once instead of at its backoff time (SPEC QUEUE-6, within RTRY's attempt budget).

Nothing about the delivery changes but its due time: the same cycle, the same attempt
count, so the cycle's 8 attempts bound it as before (DLV-1). Audited; the delivery job
is enqueued once the unit of work commits. A connection that is holding its
deliveries (breaker, pause, rate limit) still holds this one (CONN-1).
"""

from __future__ import annotations

from dataclasses import dataclass

from sqlalchemy import update

from app.domain.clock import utcnow
from app.domain.errors import ApiError
from app.domain.states import MAX_ATTEMPTS_PER_CYCLE, is_waiting
from app.models import ActionProposal, OperatorUser
from app.queueing import enqueue_delivery
from app.services.lifecycle.retry import own_proposal, replayed, request_key
from app.services.uow import Actor, unit_of_work

P = ActionProposal
RETRY_NOW_ACTION = "action.retry_now_requested"


@dataclass(frozen=True)
class RetryNowResult:
    proposal_id: str
    state: str
    attempts_in_cycle: int
    idempotent_replay: bool


def retry_now_allowed(proposal: ActionProposal) -> bool:
    """Whether "retry now" applies (QUEUE-6): failed, not for good, with an attempt of
    its cycle left; a scheduled action is not sent before its time (TEMP-4)."""
    due_later = proposal.not_before is not None and proposal.not_before > utcnow()
    return (
        proposal.state == "failed"
        and is_waiting(proposal.state, proposal.delivery_terminal)
        and proposal.attempts_in_cycle < MAX_ATTEMPTS_PER_CYCLE
        and not due_later
    )


def retry_now(proposal_id: str, *, idempotency_key: str, operator: OperatorUser) -> RetryNowResult:
    """Make a failed, waiting delivery due now and enqueue it (QUEUE-6, RTRY).

    Args:
        proposal_id: the proposal.
        idempotency_key: 1..200 characters, per operator (as RTRY-3).
        operator: who asks (the route admits operators who may retry).

    Returns:
        The proposal's state and the attempts of its cycle so far; a replay of the
        key answers the current state without enqueuing again.

    Raises:
        ApiError: 400 ``idempotency_key_invalid``; 404 ``action_not_found``; 409
            ``idempotency_key_reused`` (the key with another proposal or operator),
            ``action_not_retryable_now`` (not failed-and-will-retry, no attempt left
            in the cycle, or scheduled later), ``action_retry_conflict`` (it moved
            between the read and the guarded write). No row changes on an error.
    """
    key = request_key("action-retry-now", idempotency_key)
    with unit_of_work() as uow:
        session = uow.session
        proposal = own_proposal(session, proposal_id, operator)
        if replayed(session, key, proposal_id, operator):
            return RetryNowResult(proposal.id, proposal.state, proposal.attempts_in_cycle, True)
        if not retry_now_allowed(proposal):
            raise ApiError(
                409, "action_not_retryable_now",
                "Only a delivery that failed and will be retried, with an attempt left in its cycle, can be retried now.",
            )
        cycle, count = proposal.delivery_cycle, proposal.delivery_attempt_count
        moved = session.execute(
            update(P)
            .where(P.id == proposal_id, P.state == "failed", P.delivery_terminal.is_(False),
                   P.delivery_cycle == cycle, P.delivery_attempt_count == count)
            .values(next_attempt_at=utcnow())
            .execution_options(synchronize_session=False)
        ).rowcount
        if moved != 1:
            raise ApiError(409, "action_retry_conflict", "The action changed before the retry was saved. Refresh it and try again.")
        uow.audit(
            proposal.installation_id, key, RETRY_NOW_ACTION, Actor("operator", operator.id),
            "action_proposal", proposal_id, {"delivery_cycle": cycle, "attempts_so_far": count},
        )
        attempts = proposal.attempts_in_cycle
        uow.after_commit(lambda: enqueue_delivery(proposal_id, cycle, count, tag="now"))
        uow.commit()
    return RetryNowResult(proposal_id, "failed", attempts, False)
