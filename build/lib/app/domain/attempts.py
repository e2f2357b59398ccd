"""What an attempt row says about its request (SPEC DLV-4).

An attempt is written before its request leaves and finished after the answer. A
worker killed in between leaves it unfinished forever: it is in flight only while
it is still the proposal's current claim; after that it was abandoned (the next
claim, or the proposal's end, superseded it).
"""

from __future__ import annotations

import hashlib
from datetime import datetime

from app.domain.states import ProposalState

FINISHED = "finished"
IN_FLIGHT = "in_flight"
ABANDONED = "abandoned"


def attempt_status(
    finished: bool,
    attempt_number: int,
    proposal_attempt_count: int,
    proposal_state: str,
    lease_expires_at: datetime | None,
    now: datetime,
) -> str:
    """Whether an attempt finished, is still in flight, or was abandoned by its worker.

    Args:
        finished: whether the attempt row has a finish time.
        attempt_number: the attempt's number (1-based, across cycles).
        proposal_attempt_count: the proposal's delivery_attempt_count (its latest claim).
        proposal_state: the proposal's state.
        lease_expires_at: the proposal's lease expiry (UTC), if any.
        now: the time to judge by (UTC).

    Returns:
        ``finished``, ``in_flight`` or ``abandoned``.
    """
    if finished:
        return FINISHED
    current = attempt_number == proposal_attempt_count and proposal_state == ProposalState.APPLYING
    if current and lease_expires_at is not None and lease_expires_at > now:
        return IN_FLIGHT
    return ABANDONED


def webhook_message_id(operation_id: str) -> str:
    """The Standard Webhooks ``webhook-id`` of an operation's requests.

    One id per operation, the same for every attempt and every delivery cycle:
    receivers use it to recognise a message sent again, and every request of one
    operation is the same message (the same ``Idempotency-Key``; the body differs
    only if the proposal's digest does, which the operation id forbids).
    """
    return "msg_" + hashlib.sha256(operation_id.encode("utf-8")).hexdigest()[:32]
