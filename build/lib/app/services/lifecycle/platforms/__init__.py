"""Delivery to platforms that do not answer with the console's receipts (SPEC PLAT-1..4).

The delivery job (`app.services.lifecycle.dispatch`) claims, checks and reserves as for
every proposal, then hands a platform kind's attempt to `send_and_record`. One attempt
may make up to three requests, each sent through the egress module and recorded as
its own attempt row (``purpose``), written before it leaves and finished after:

1. ``recheck``: on a later attempt (or when the update needs something only the
   platform knows, a record's CID) the read-back runs first; when it already shows
   the intended state, nothing is sent again (a retry after a lost answer never
   applies twice);
2. ``update``: the change itself (``updateSubjectStatus``, or the REST request);
3. ``read-back``: the observation that confirms it (PLAT-2). Only then the console
   writes a receipt of its own, marked ``observed``, through the same guarded write
   as platform receipts (`outcomes.save_sync_receipt`).

A read-back that disagrees is a retryable failure; the kinds' terminal errors are
decided by `app.domain.platform_kinds`.
"""

from __future__ import annotations

import dataclasses
import logging
from typing import Any

from app import egress
from app.domain.errors import ActionError
from app.domain.platform_kinds import (
    PDS_KIND,
    PLATFORM_KINDS,
    PLATFORM_REFUSED,
    REST_KIND,
    observed_receipt_fields,
    read_back_disagrees,
)
from app.domain.receipts import ProposalIdentity, parse_receipt
from app.faults import failpoint
from app.services.lifecycle import rate_limit
from app.services.lifecycle.egress_attempt import send_recorded
from app.services.lifecycle.outcomes import AttemptRow, record_failure, save_sync_receipt, unexpected
from app.services.uow import unit_of_work

from .kinds import Request

log = logging.getLogger(__name__)
KIND_FIELDS = ("action_id", "operation_id", "payload_digest", "action_code", "target", "payload")


def handles(kind: str) -> bool:
    """Whether `kind` is a platform kind this package delivers (PLAT-1, PLAT-3)."""
    return kind in PLATFORM_KINDS


def _call_for(target, proposal, standard_body: dict[str, Any], attempt_number: int):
    from .atproto import PdsCall
    from .rest import RestCall

    fields = {name: standard_body[name] for name in KIND_FIELDS}  # the standard body's, as sent (DLV-4)
    base = dict(
        installation_id=proposal.installation_id,
        base_url=target.url,
        reference=target.reference,
        fields=fields,
        secret=target.bearer_token,
        attempt_number=attempt_number,
    )
    if target.kind == PDS_KIND:
        return PdsCall.plan(**base)
    assert target.kind == REST_KIND
    return RestCall.plan(**base, standard_body=standard_body)


def first_request(target, proposal, standard_body: dict[str, Any], attempt_number: int):
    """The target and body of the attempt's first request, decided in the claim's
    transaction (its attempt row is written with the claim, DLV-4).

    Args:
        target: the delivery's `dispatch.plan.Target` (its ``url`` is the connection's base URL).
        proposal: the claimed proposal.
        standard_body: the receipt contract's request body (a REST kind may send it).
        attempt_number: the claim's attempt number (a later attempt reads back first).

    Returns:
        (target with method, URL, purpose and the kind's plan; body bytes).

    Raises:
        ActionError: ``action_component_operation_invalid`` for a reference that does
            not parse, ``platform_subject_invalid`` for a target the kind cannot
            name, ``platform_auth_failed`` for a PDS connection without an admin password.
    """
    call = _call_for(target, proposal, standard_body, attempt_number)
    request = call.first()
    changed = dataclasses.replace(target, method=request.method, url=request.url, purpose=request.purpose, call=call)
    return changed, request.body


def _next_row(plan, identity, attempt_number: int, cycle: int, request: Request):
    """Finish the previous request's row and write the next one's, in one commit,
    before the next request leaves (DLV-4, PLAT-4)."""
    with unit_of_work() as uow:
        plan.attempt.write(uow)
        row = AttemptRow(
            uow,
            installation_id=plan.target.call.installation_id,
            proposal_id=identity.action_id,
            attempt_number=attempt_number,
            delivery_cycle=cycle,
            connection_version_id=plan.target.connection_version_id,
            purpose=request.purpose,
            method=request.method,
            url=request.url,
            body=request.body,
        )
        uow.commit()
    return dataclasses.replace(plan, attempt=row)


class _Sent(ActionError):
    """A failed request as a delivery failure; remembers whether anything may have arrived."""

    def __init__(self, error: ActionError, sent: bool) -> None:
        super().__init__(error.code, error.retryable, error.delay_seconds)
        self.sent = sent


def _send(plan, request: Request, operation_id: str, lease):
    """Send one request through the egress-and-record path (`send_recorded`) on the
    plan's current row; it ends within the connection's timeout and what is left of
    the lease (DLV-4).

    Returns:
        (status, body bytes) for any HTTP answer, 2xx or not; the kind reads it.

    Raises:
        _Sent: nothing usable came back (refused, timeout, network, too large).
    """
    target = plan.target
    try:
        response = send_recorded(
            plan.attempt,
            operation_id,
            lease,
            method=request.method,
            url=request.url,
            body=request.body,
            timeout_seconds=target.timeout_seconds,
            allowed_hosts=target.allowed_hosts,
            bearer_token=target.call.bearer_token,
            signing_secret=target.call.signing_secret(target.signing_secret),
            extra_headers=target.call.headers(),
        )
    except egress.EgressError as error:
        if error.status is None or error.body is None:
            raise _Sent(ActionError(error.code, error.retryable, error.delay_seconds), error.sent) from error
        return _Answer(error.status, error.body, error)
    return _Answer(response.status, response.body, None)


@dataclasses.dataclass(frozen=True)
class _Answer:
    status: int
    body: bytes
    error: egress.EgressError | None  # the HTTP class's error for a non-2xx status

    def default_error(self) -> ActionError:
        """What the status means when the kind has nothing more specific (the egress class)."""
        error = self.error
        if error is None:
            return ActionError("action_response_invalid")
        return ActionError(error.code, error.retryable, error.delay_seconds)


def send_and_record(identity: ProposalIdentity, plan, attempt_number: int, cycle: int, lease):
    """Run a platform kind's attempt: recheck, update, read-back (PLAT-1..4).

    Args:
        identity: the proposal's id, operation id and payload digest.
        plan: the delivery's `dispatch.plan.Plan` (first row written, budgets reserved).
        attempt_number, cycle, lease: the claim this attempt holds.

    Returns:
        The delivery's `DeliveryOutcome`.
    """
    call = plan.target.call
    try:
        rate_limit.before_send(plan.gate)  # CONN-2: the connection's rate-limit slot
        request = call.first()
        if request.purpose == "recheck":
            failpoint("before_send")
            answer = _send(plan, request, identity.operation_id, lease)
            call = call.after_recheck(answer)  # raises the kind's terminal errors
            if call.confirmed:
                return _observed(identity, plan, lease, attempt_number, "recheck")
            plan = _next_row(plan, identity, attempt_number, cycle, call.update())
            plan = dataclasses.replace(plan, target=dataclasses.replace(plan.target, call=call))
        failpoint("before_send")
        answer = _send(plan, call.update(), identity.operation_id, lease)
        failpoint("after_response")
        outcome = call.outcome(answer)  # applied | accepted | failed, or raises
        read_back = call.read_back()
        if read_back is None or outcome == "failed":
            return _receipt(identity, plan, lease, attempt_number, outcome)
        plan = _next_row(plan, identity, attempt_number, cycle, read_back)
        failpoint("before_read_back")  # crash trial: the update applied, its read-back never sent
        answer = _send(plan, read_back, identity.operation_id, lease)
        if not call.agrees(answer, "read-back"):
            plan.attempt.record(error_code=read_back_disagrees().code)
            raise _Sent(read_back_disagrees(), True)
        return _observed(identity, plan, lease, attempt_number, "read-back")
    except _Sent as error:
        return record_failure(identity.action_id, error, plan, attempt_number, cycle, lease, error.sent)
    except ActionError as error:
        if plan.attempt.finish.get("error_code") is None:
            plan.attempt.record(error_code=error.code)
        return record_failure(identity.action_id, error, plan, attempt_number, cycle, lease, True)
    except Exception as caught:  # noqa: BLE001 - counted as a failed, retryable attempt (EDGE-4)
        error = unexpected(caught, "sending")
        return record_failure(identity.action_id, error, plan, attempt_number, cycle, lease, True)


def _observed(identity: ProposalIdentity, plan, lease, attempt_number: int, purpose: str):
    """The console's own receipt, marked ``observed``, through the guarded receipt write (PLAT-2)."""
    fields = observed_receipt_fields(
        identity.action_id, identity.operation_id, identity.payload_digest, f"{purpose}:{plan.attempt.id}"
    )
    receipt = parse_receipt(fields, identity)
    return save_sync_receipt(identity.action_id, receipt, plan, lease, attempt_number, source="observed")


def _receipt(identity: ProposalIdentity, plan, lease, attempt_number: int, outcome: str):
    """A receipt read from the update's answer (PLAT-3, no read-back declared)."""
    fields = {
        "action_id": identity.action_id,
        "operation_id": identity.operation_id,
        "payload_digest": identity.payload_digest,
        "status": outcome,
    }
    if outcome == "failed":
        fields["error_code"] = PLATFORM_REFUSED
    receipt = parse_receipt(fields, identity)
    return save_sync_receipt(identity.action_id, receipt, plan, lease, attempt_number)
