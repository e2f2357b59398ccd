"""One claimed attempt's HTTP request to the platform, and reading its answer as a
receipt (SPEC DLV-4, DLV-5, RCPT-1): what the delivery job does between its two
transactions, recorded on the attempt row whatever happens.
"""

from __future__ import annotations

import json
import logging
from datetime import datetime

from flask import current_app

from app import egress
from app.domain.attempts import webhook_message_id
from app.domain.errors import ActionError
from app.domain.expressions import schema_errors
from app.domain.receipts import ProposalIdentity, Receipt
from app.domain.sync_receipts import lenient_receipt
from app.faults import failpoint_later
from app.services.lifecycle.outcomes import AttemptRow, EgressFailed, http_session, request_timeout

log = logging.getLogger(__name__)
MAX_DETAIL = 200


def send_request(operation_id: str, target, body: bytes, attempt: AttemptRow, lease: datetime) -> egress.EgressResponse:
    """One HTTP request to the platform; a failure is recorded on the attempt (DLV-4).

    The whole request ends within the connection's timeout and well before the lease
    expires (`request_timeout`), so no other worker can claim the proposal while it
    is still open.

    Args:
        operation_id: the proposal's operation (the Idempotency-Key and webhook id).
        target: the attempt's `_Target` (method, URL, timeout, secrets, allowed hosts).
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
        timeout = request_timeout(target.timeout_seconds, lease)
        return egress.send(
            egress.EgressRequest(
                method=target.method,
                url=target.url,
                body=body,
                message_id=webhook_message_id(operation_id),
                idempotency_key=operation_id,
                timeout_seconds=timeout,
                bearer_token=target.bearer_token,
                signing_secret=target.signing_secret,
            ),
            egress.EgressPolicy(
                allowed_hosts=target.allowed_hosts,
                allow_private=current_app.config["EGRESS_ALLOW_PRIVATE"],
                max_response_bytes=current_app.config["EGRESS_MAX_RESPONSE_BYTES"],
            ),
            session=http_session(),
        )
    except egress.EgressError as error:
        attempt.record(
            response_status=error.status,
            response_digest=error.digest,
            response_class=error.response_class,
            error_code=error.code,
            duration_ms=error.duration_ms,
            detail=error.detail,
        )
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
            value = json.loads(body)
        except (ValueError, RecursionError) as error:  # not JSON, or nested too deep to decode
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
