"""One request of a claimed attempt: through egress, recorded on its attempt row (SPEC DLV-4).

The one egress-and-record path. The delivery job's webhook request
(`app.services.lifecycle.dispatch.send`) and every request of a platform kind
(`app.services.lifecycle.platforms`: recheck, update, read-back) go through
`send_recorded`; each caller then reads the answer its own way.
"""

from __future__ import annotations

from datetime import datetime

from flask import current_app

from app import egress
from app.domain.attempts import webhook_message_id
from app.domain.failures import body_excerpt
from app.services.lifecycle.outcomes import AttemptRow, http_session, request_timeout


def send_recorded(
    row: AttemptRow,
    operation_id: str,
    lease: datetime,
    *,
    method: str,
    url: str,
    body: bytes,
    timeout_seconds: float,
    allowed_hosts: tuple[str, ...],
    bearer_token: str | None,
    signing_secret: str | None,
    extra_headers: dict[str, str] | None = None,
) -> egress.EgressResponse:
    """Send one request through egress and record what came of it on `row` (DLV-4).

    The request ends within the connection's timeout and well before the lease
    expires (`request_timeout`), so no other worker can claim the proposal while it
    is still open.

    Args:
        row: the request's attempt row (written before it leaves); finished here
            with the status, digest, class and duration, or the egress error.
        operation_id: the proposal's operation (the Idempotency-Key and webhook id).
        lease: when the claim's lease expires (UTC).
        method, url, body: the request; ``body`` is signed as sent.
        timeout_seconds: the connection's timeout (seconds).
        allowed_hosts: the connection's allowed hosts (SEC-2).
        bearer_token, signing_secret: the connection's credentials, if any.
        extra_headers: a platform kind's own headers (PLAT-1).

    Returns:
        The 2xx answer.

    Raises:
        egress.EgressError: anything else (a non-2xx status, refused, timeout,
            network, too large, ``action_lease_too_short``), already recorded on `row`.
    """
    try:
        response = egress.send(
            egress.EgressRequest(
                method=method,
                url=url,
                body=body,
                message_id=webhook_message_id(operation_id),
                idempotency_key=operation_id,
                timeout_seconds=request_timeout(timeout_seconds, lease),
                bearer_token=bearer_token,
                signing_secret=signing_secret,
                extra_headers=extra_headers or {},
            ),
            egress.EgressPolicy(
                allowed_hosts=allowed_hosts,
                allow_private=current_app.config["EGRESS_ALLOW_PRIVATE"],
                max_response_bytes=current_app.config["EGRESS_MAX_RESPONSE_BYTES"],
            ),
            session=http_session(),
        )
    except egress.EgressError as error:
        row.record(
            response_status=error.status,
            response_digest=error.digest,
            response_class=error.response_class,
            error_code=error.code,
            duration_ms=error.duration_ms,
            detail=error.detail,
            response_excerpt=body_excerpt(error.body),
        )
        raise
    row.record(
        response_status=response.status,
        response_digest=response.digest,
        response_class="success",
        duration_ms=response.duration_ms,
    )
    return response
