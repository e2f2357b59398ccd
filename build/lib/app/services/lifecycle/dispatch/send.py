"""Send each claimed attempt's request and read the platform's answer as a receipt
(SPEC DLV-4, DLV-5, RCPT-1). The request goes through the one egress-and-record
path (`egress_attempt.send_recorded`) that the platform kinds use too; the
outcomes are written by `record`.
"""

from __future__ import annotations

import logging
from datetime import datetime

from app import egress
from app.domain.clock import utcnow
from app.domain.digests import decode_json
from app.domain.errors import ActionError
from app.domain.expressions import schema_errors
from app.domain.proposal import delivery as delivery_rules
from app.domain.receipts import ProposalIdentity, Receipt
from app.domain.sync_receipts import lenient_receipt
from app.faults import failpoint, failpoint_later
from app.services.lifecycle import platforms, rate_limit
from app.services.lifecycle.dispatch.claim import Claimed
from app.services.lifecycle.dispatch.record import Sent, record_outcomes
from app.services.lifecycle.egress_attempt import send_recorded
from app.services.lifecycle.outcomes import (
    AttemptRow,
    BatchReleased,
    DeliveryOutcome,
    EgressFailed,
    lease_seconds,
    unexpected,
)

log = logging.getLogger(__name__)
MAX_DETAIL = 200


def send_request(operation_id: str, target, body: bytes, attempt: AttemptRow, lease: datetime) -> egress.EgressResponse:
    """One HTTP request to the platform; a failure is recorded on the attempt (DLV-4).

    The whole request ends within the connection's timeout and well before the lease
    expires (`request_timeout`), so no other worker can claim the proposal while it
    is still open.

    Args:
        operation_id: the proposal's operation (the Idempotency-Key and webhook id).
        target: the attempt's `plan.Target` (method, URL, timeout, secrets, allowed hosts).
        body: the canonical JSON body, as signed.
        attempt: the attempt's row, finished with the outcome.
        lease: when the claim's lease expires (UTC).

    Raises:
        ActionError: the egress error's code, retryability and base delay (an
            `EgressFailed`, its ``detail`` on the attempt row);
            ``action_lease_too_short`` (retryable, nothing sent) when too little of
            the lease is left.
    """
    in_flight = failpoint_later("during_request", 0.05)
    try:
        return send_recorded(
            attempt,
            operation_id,
            lease,
            method=target.method,
            url=target.url,
            body=body,
            timeout_seconds=target.timeout_seconds,
            allowed_hosts=target.allowed_hosts,
            bearer_token=target.bearer_token,
            signing_secret=target.signing_secret,
        )
    except egress.EgressError as error:
        raise EgressFailed(error) from error
    finally:
        in_flight.cancel()


def read_receipt(body: bytes, output_schema: dict, identity: ProposalIdentity, attempt: AttemptRow) -> Receipt:
    """Decode, schema-check and parse the platform's answer (DLV-5, RCPT-1).

    A malformed field that does not decide the outcome is cut or dropped and noted
    on the attempt row (`lenient_receipt`): the platform's outcome stands.

    Raises:
        ActionError: ``action_response_invalid`` (not JSON),
            ``action_response_schema_invalid``, or a receipt error of
            `lenient_receipt`; the attempt row is marked ``invalid_response``.
    """
    try:
        try:
            value = decode_json(body)
        except (ValueError, RecursionError) as error:  # not JSON, a key said twice, or nested too deep
            raise ActionError("action_response_invalid") from error
        if schema_errors(value, output_schema):
            raise ActionError("action_response_schema_invalid")
        receipt, notes = lenient_receipt(value, identity)  # RCPT-1: a bad field never flips the outcome
        if notes:
            attempt.record(detail="; ".join(notes)[:MAX_DETAIL])
            log.warning("receipt field(s) cut or dropped: %s", "; ".join(notes))
        return receipt
    except ActionError as error:
        attempt.record(response_class="invalid_response", error_code=error.code)
        raise


def send_and_record(claimed: list[Claimed]) -> dict[str, DeliveryOutcome]:
    """Send each claimed attempt in turn, then record every outcome in one
    transaction (DLV-4..7). A platform kind's attempt (always alone) records its own.

    After a failure the rest are released unsent and wait as long as the failure's
    base delay (`delivery_rules.released_delay`; the breaker, a 429 pause or the backoff then
    decide when they go), as are, with no wait, those for which too little of the
    shared lease is left (`delivery_rules.batch_member_may_send`).
    """
    if len(claimed) == 1 and platforms.handles(claimed[0].plan.target.kind):
        c = claimed[0]
        with c.bound():
            outcome = platforms.send_and_record(c.identity, c.plan, c.attempt_number, c.cycle, c.lease)
        return {c.identity.action_id: outcome}
    results: list[tuple[Claimed, Sent]] = []
    failure: ActionError | None = None  # the first failure of this batch
    for n, c in enumerate(claimed):
        if failure is not None:
            results.append(
                (c, Sent(error=BatchReleased(delivery_rules.released_delay(failure.retryable, failure.delay_seconds))))
            )
            continue
        lease_left = (c.lease - utcnow()).total_seconds()
        if n and not delivery_rules.batch_member_may_send(c.plan.target.timeout_seconds, lease_seconds(), lease_left):
            results.append((c, Sent(error=BatchReleased())))
            continue
        with c.bound():
            result = _send_one(c)
        failure = result.error
        results.append((c, result))
    return record_outcomes(results)


def _send_one(c: Claimed) -> Sent:
    """Send one claimed attempt's request and read the platform's receipt (DLV-4, DLV-5)."""
    plan = c.plan
    try:
        rate_limit.before_send(plan.gate)
        failpoint("before_send")
        response = send_request(c.identity.operation_id, plan.target, plan.body, plan.attempt, c.lease)
        failpoint("after_response")
        receipt = read_receipt(response.body, plan.target.output_schema, c.identity, plan.attempt)
        return Sent(receipt=receipt)
    except ActionError as error:
        # A request can have reached the platform even when its response was lost.
        return Sent(error=error, sent=error.sent if isinstance(error, EgressFailed) else True)
    except Exception as caught:
        return Sent(error=unexpected(caught, "sending"), sent=True)

