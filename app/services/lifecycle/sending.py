"""The second half of the delivery job: send each claimed attempt's HTTP request,
read the platform's answer as a receipt, and record every outcome of the batch in
one transaction (SPEC DLV-4..7, RCPT-1). The first half, the claim, is
`app.services.lifecycle.delivery`; log lines keep its logger's name.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Protocol

from flask import current_app
from sqlalchemy import select

from app import egress
from app.domain.attempts import webhook_message_id
from app.domain.clock import utcnow
from app.domain.errors import ActionError
from app.domain.digests import decode_json
from app.domain.expressions import schema_errors
from app.domain.proposal import delivery as rules
from app.domain.receipts import ProposalIdentity, Receipt
from app.domain.states import ProposalState
from app.domain.sync_receipts import lenient_receipt
from app.faults import failpoint, failpoint_later
from app.metrics import record_delivery
from app.models import ActionProposal, StepRun, WorkflowRun, WorkflowVersion
from app.observability import bind
from app.services.lifecycle import platforms, rate_limit
from app.services.lifecycle.outcomes import (
    AttemptRow,
    BatchReleased,
    DeliveryOutcome,
    EgressFailed,
    http_session,
    lease_seconds,
    request_timeout,
    unexpected,
    write_failure,
    write_receipt,
)
from app.services.lifecycle.receipts import DEFERRAL_CODES
from app.services.uow import RetryWithSavepoints, unit_of_work


class Claimed(Protocol):
    """What `delivery` hands over for each proposal it claimed (its ``_Claimed``):
    named by shape, so this half never imports the half that claims."""

    identity: ProposalIdentity
    plan: Any
    attempt_number: int
    cycle: int
    lease: datetime

log = logging.getLogger("app.services.lifecycle.delivery")  # the delivery job's lines, whichever half logs them
S = ProposalState
P = ActionProposal
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


@dataclass
class _Sent:
    """What one request came to: the platform's receipt, or the error and whether
    the request may have reached the platform."""

    receipt: Any = None
    error: ActionError | None = None
    sent: bool = False


def send_and_record(claimed: list[Claimed]) -> dict[str, DeliveryOutcome]:
    """Send each claimed attempt in turn, then record every outcome in one
    transaction (DLV-4..7). A platform kind's attempt (always alone) records its own.

    After a failure the rest are released unsent and wait as long as the failure's
    base delay (`rules.released_delay`; the breaker, a 429 pause or the backoff then
    decide when they go), as are, with no wait, those for which too little of the
    shared lease is left (`rules.batch_member_may_send`).
    """
    if len(claimed) == 1 and platforms.handles(claimed[0].plan.target.kind):
        c = claimed[0]
        with _bound(c):
            outcome = platforms.send_and_record(c.identity, c.plan, c.attempt_number, c.cycle, c.lease)
        return {c.identity.action_id: outcome}
    results: list[tuple[Claimed, _Sent]] = []
    failure: ActionError | None = None  # the first failure of this batch
    for n, c in enumerate(claimed):
        if failure is not None:
            results.append(
                (c, _Sent(error=BatchReleased(rules.released_delay(failure.retryable, failure.delay_seconds))))
            )
            continue
        lease_left = (c.lease - utcnow()).total_seconds()
        if n and not rules.batch_member_may_send(c.plan.target.timeout_seconds, lease_seconds(), lease_left):
            results.append((c, _Sent(error=BatchReleased())))
            continue
        with _bound(c):
            result = _send_one(c)
        failure = result.error
        results.append((c, result))
    return _record(results)


def _bound(c: Claimed):
    """Log lines name the proposal, operation, attempt and cycle."""
    identity = c.identity
    return bind(
        proposal_id=identity.action_id, operation_id=identity.operation_id, attempt=c.attempt_number, cycle=c.cycle
    )


def _send_one(c: Claimed) -> _Sent:
    """Send one claimed attempt's request and read the platform's receipt (DLV-4, DLV-5)."""
    plan = c.plan
    try:
        rate_limit.before_send(plan.gate)
        failpoint("before_send")
        response = send_request(c.identity.operation_id, plan.target, plan.body, plan.attempt, c.lease)
        failpoint("after_response")
        plan.attempt.record(
            response_status=response.status,
            response_digest=response.digest,
            response_class="success",
            duration_ms=response.duration_ms,
        )
        receipt = read_receipt(response.body, plan.target.output_schema, c.identity, plan.attempt)
        return _Sent(receipt=receipt)
    except ActionError as error:
        # A request can have reached the platform even when its response was lost.
        return _Sent(error=error, sent=error.sent if isinstance(error, EgressFailed) else True)
    except Exception as caught:
        return _Sent(error=unexpected(caught, "sending"), sent=True)


def _record(results: list[tuple[Claimed, _Sent]]) -> dict[str, DeliveryOutcome]:
    """Write every outcome of the batch in one transaction. The first try opens no
    savepoints; when anything in it fails, it is rolled back and the outcomes are
    written again, each in a savepoint: one that fails unexpectedly is then left to
    its lease (the sweep re-enqueues it, and the idempotency key makes a resend
    harmless), the others still commit."""
    try:
        return _record_in(results, savepoints=False)
    except RetryWithSavepoints:  # one failed: write them again, each in a savepoint
        log.info("batch outcomes written again with savepoints", extra={"batch": len(results)})
        return _record_in(results, savepoints=True)


def _record_in(results: list[tuple[Claimed, _Sent]], savepoints: bool) -> dict[str, DeliveryOutcome]:
    outcomes: dict[str, DeliveryOutcome] = {}
    with unit_of_work(savepoints) as uow:
        loaded = _load_for_outcomes(uow.session, [c.identity.action_id for c, _ in results])
        for c, result in results:
            try:
                with uow.savepoint(), _bound(c):
                    outcomes[c.identity.action_id] = _write(uow, c, result, loaded.proposals.get(c.identity.action_id))
            except Exception:
                log.exception("recording the outcome of %s failed; its lease will expire", c.identity.action_id)
                outcomes[c.identity.action_id] = DeliveryOutcome(
                    claimed=True, proposal_id=c.identity.action_id, state=S.APPLYING, attempt_number=c.attempt_number
                )
        failpoint("before_receipt_write")
        uow.commit()
    return outcomes


@dataclass
class _Fresh:
    """The batch's proposals as they are now, read in one query for the guarded
    outcome writes, and their runs, step runs and workflow versions: all stay
    referenced while the outcomes are written, so the runs' wake-ups find them in
    the session (and take each run guarded on it as read)."""

    proposals: dict[str, ActionProposal]
    held: list


def _load_for_outcomes(session, proposal_ids: list[str]) -> _Fresh:
    fresh = select(P).where(P.id.in_(proposal_ids)).execution_options(populate_existing=True)
    proposals = {p.id: p for p in session.scalars(fresh)}
    version_ids = {p.workflow_version_id for p in proposals.values() if p.workflow_version_id}
    versions = session.scalars(select(WorkflowVersion).where(WorkflowVersion.id.in_(version_ids))).all()
    step_ids = {p.step_run_id for p in proposals.values() if p.step_run_id}
    steps = session.scalars(select(StepRun).where(StepRun.id.in_(step_ids))).all() if step_ids else []
    run_ids = {p.run_id for p in proposals.values() if p.run_id}
    runs = session.scalars(select(WorkflowRun).where(WorkflowRun.id.in_(run_ids))).all() if run_ids else []
    return _Fresh(proposals, [*versions, *steps, *runs])


def _write(uow, c: Claimed, result: _Sent, loaded: ActionProposal | None) -> DeliveryOutcome:
    pid = c.identity.action_id
    if result.error is None:
        return write_receipt(uow, pid, result.receipt, c.plan, c.lease, c.attempt_number, loaded=loaded)
    return write_failure(uow, pid, result.error, c.plan, c.attempt_number, c.cycle, c.lease, result.sent, loaded)


def observe(outcome: DeliveryOutcome, seconds: float) -> None:
    """Log and count the outcome of one claimed attempt."""
    if outcome.state == S.APPLIED:
        result = "applied"
    elif outcome.error_code in DEFERRAL_CODES:
        result = "deferred"
    elif outcome.state == S.FAILED:
        result = "failed" if outcome.terminal else "retry"
    else:
        result = "accepted" if outcome.state == S.QUEUED else (outcome.state or "unknown")
    record_delivery(result, outcome.error_code, outcome.extra.get("http_seconds"))
    log.info(
        "delivery attempt finished",
        extra={
            "outcome": result,
            "error_code": outcome.error_code,
            "state": outcome.state,
            "duration_ms": round(seconds * 1000, 1),
        },
    )
