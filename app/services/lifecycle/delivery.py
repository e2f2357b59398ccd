"""The delivery job: claim, check, reserve, send, record, settle (SPEC DLV-1..7).

`deliver` is what an RQ worker runs for a proposal id. The database decides what
is due: a job that claims nothing returns at once, so duplicate or early jobs are
harmless and losing every job in Redis loses no action (the sweep re-enqueues).
"""

from __future__ import annotations

import json
import logging
import threading
import time
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

import requests
from flask import current_app
from sqlalchemy import and_, case, or_, select

from app import egress
from app.domain.backoff import retry_delay
from app.domain.clock import iso, utcnow
from app.domain.digests import canonical_json, sha256_digest
from app.domain.errors import ActionError
from app.domain.expressions import schema_errors
from app.domain.preconditions import check_preconditions
from app.domain.receipts import ProposalIdentity, parse_receipt
from app.domain.states import LEASE_SECONDS, MAX_ATTEMPTS_PER_CYCLE, Move, ProposalState
from app.faults import failpoint, failpoint_later
from app.metrics import record_delivery
from app.models import ActionApproval, ActionProposal, ConnectionAttempt, move_proposal, new_id
from app.observability import bind
from app.services.cases.snapshot import report_snapshot
from app.services.lifecycle import budgets
from app.services.lifecycle.components import load_delivery_target, parse_operation
from app.services.lifecycle.events import emit_delivery_resolution
from app.services.lifecycle.receipts import AttemptGuard, save_receipt, schedule_next_attempt
from app.services.uow import Actor, unit_of_work

log = logging.getLogger(__name__)
S = ProposalState
P = ActionProposal
UNEXPECTED_FAILURE = "action_delivery_failed"
_http = threading.local()


@dataclass
class DeliveryOutcome:
    """What one delivery job did (for logs, metrics and tests)."""

    claimed: bool
    proposal_id: str
    state: str | None = None
    attempt_number: int | None = None
    error_code: str | None = None
    terminal: bool = False
    extra: dict[str, Any] = field(default_factory=dict)


def claim(session, proposal_id: str, now: datetime, lease_expires_at: datetime) -> bool:
    """Claim a proposal for one attempt with one conditional UPDATE (DLV-1).

    Claimable when not terminal and either queued/failed, due, with attempts left
    in the cycle (or accepted and waiting for its confirmation deadline), or
    applying with an expired lease. The attempt count grows by one only while the
    cycle has attempts left and nothing was accepted; a claim past the last
    attempt marks ``action_delivery_attempts_exhausted`` for the pre-send check.

    Returns:
        True when this caller holds the lease.
    """
    attempts_in_cycle = P.delivery_attempt_count - P.cycle_start_attempt
    counts = and_(P.accepted_at.is_(None), attempts_in_cycle < MAX_ATTEMPTS_PER_CYCLE)
    exhausted = and_(P.accepted_at.is_(None), attempts_in_cycle >= MAX_ATTEMPTS_PER_CYCLE)
    due = and_(
        P.state.in_([S.QUEUED, S.FAILED]),
        P.next_attempt_at <= now,
        or_(attempts_in_cycle < MAX_ATTEMPTS_PER_CYCLE, P.accepted_at.is_not(None)),
    )
    lease_expired = and_(P.state == S.APPLYING, P.lease_expires_at <= now)
    return move_proposal(
        session,
        proposal_id,
        Move.CLAIM,
        where=(P.delivery_terminal.is_(False), or_(due, lease_expired)),
        values=dict(
            delivery_attempt_count=P.delivery_attempt_count + case((counts, 1), else_=0),
            last_error_code=case((exhausted, "action_delivery_attempts_exhausted"), else_=P.last_error_code),
            lease_expires_at=lease_expires_at,
        ),
    )


def take_lease(proposal_id: str, now: datetime, lease_expires_at: datetime) -> bool:
    """Claim a proposal and commit, without delivering it (what a worker that died
    right after its claim leaves behind; tests and tooling use this)."""
    with unit_of_work() as uow:
        claimed = claim(uow.session, proposal_id, now, lease_expires_at)
        uow.commit()
    return claimed


@dataclass(frozen=True)
class _Target:
    """Where and how to send, as plain values (nothing lazy-loads after the claim commits)."""

    method: str
    url: str
    connection_version_id: str
    timeout_seconds: float
    bearer_token: str | None
    signing_secret: str | None
    allowed_hosts: tuple[str, ...]
    output_schema: dict
    queue_id: str | None


def _pre_send_checks(session, proposal: ActionProposal, now: datetime) -> _Target:
    """Everything that must still hold before a request may leave (DLV-2, PRE, CORR-3).

    Raises:
        ActionError: action_confirmation_timed_out, action_delivery_attempts_exhausted,
            action_approval_expired, action_precondition_changed,
            action_case_no_longer_eligible, appeal_correction_precondition_changed,
            action_approval_missing, action_component_*.
    """
    if proposal.accepted_at is not None:
        raise ActionError("action_confirmation_timed_out")
    if proposal.last_error_code == "action_delivery_attempts_exhausted":
        raise ActionError("action_delivery_attempts_exhausted")
    if proposal.expires_at <= now:
        raise ActionError("action_approval_expired")
    if proposal.appeal_id:
        from app.services.lifecycle.corrections import check_correction_eligible

        check_correction_eligible(session, proposal)
    snapshot = report_snapshot(session, proposal.report_id)
    check_preconditions(proposal.preconditions, snapshot, proposal.is_correction)
    if proposal.approval_mode == "human":
        approved = session.scalar(
            select(ActionApproval.id).where(
                ActionApproval.proposal_id == proposal.id,
                ActionApproval.decision == "approved",
                ActionApproval.payload_digest == proposal.payload_digest,
            )
        )
        if approved is None:
            raise ActionError("action_approval_missing")
    component, connection = load_delivery_target(session, proposal.component_version_id, proposal.installation_id)
    operation = parse_operation(component.implementation_reference)
    return _Target(
        method=operation.method,
        url=egress.build_url(connection.base_url, operation.path),
        connection_version_id=connection.id,
        timeout_seconds=connection.timeout_seconds,
        bearer_token=connection.bearer_token,
        signing_secret=connection.signing_secret,
        allowed_hosts=tuple(connection.allowed_hosts),
        output_schema=component.output_schema,
        queue_id=snapshot.queue_id,
    )


def request_body(proposal: ActionProposal) -> dict[str, Any]:
    """The body a platform receives (DLV-4, SPEC §5)."""
    return {
        "schema_version": "1",
        "action_id": proposal.id,
        "operation_id": proposal.operation_id,
        "payload_digest": proposal.payload_digest,
        "action_code": proposal.action_code,
        "target": proposal.target,
        "payload": proposal.payload,
        "preconditions": proposal.preconditions,
        "workflow_version_id": proposal.workflow_version_id,
        "policy_version_id": proposal.policy_version_id,
        "expires_at": iso(proposal.expires_at),
    }


def _budget_scopes(proposal: ActionProposal, queue_id: str | None) -> list[budgets.Scope]:
    scopes = [budgets.Scope("component", proposal.component_version_id)]
    if proposal.workflow_version_id:
        scopes.insert(0, budgets.Scope("workflow", proposal.workflow_version_id))
    if queue_id:
        scopes.append(budgets.Scope("queue", queue_id))
    return scopes


def _http_session() -> requests.Session:
    if getattr(_http, "session", None) is None:
        _http.session = requests.Session()
    return _http.session


@dataclass
class _Plan:
    """What one claimed attempt will send, decided inside the claim's transaction."""

    target: _Target
    body: bytes
    attempt: _Attempt
    reservations: list[str]


class _Attempt:
    """The connection_attempts row of this delivery: written (with the claim) before
    the request leaves, finished after it, whatever happened (DLV-4)."""

    def __init__(self, session, proposal: ActionProposal, attempt_number: int, target: _Target, body: bytes) -> None:
        self.id = new_id("att")
        self.finish: dict[str, Any] = {}
        session.add(
            ConnectionAttempt(
                id=self.id,
                installation_id=proposal.installation_id,
                proposal_id=proposal.id,
                attempt_number=attempt_number,
                delivery_cycle=proposal.delivery_cycle,
                connection_version_id=target.connection_version_id,
                method=target.method,
                url=target.url,
                request_digest=sha256_digest(body),
                started_at=utcnow(),
            )
        )

    def record(self, **values: Any) -> None:
        self.finish.update(values)

    @property
    def seconds(self) -> float | None:
        """How long the HTTP request took, once it finished."""
        duration = self.finish.get("duration_ms")
        return None if duration is None else duration / 1000

    def write(self, session) -> None:
        row = session.get(ConnectionAttempt, self.id)
        if row is None or not self.finish:
            return
        for key, value in self.finish.items():
            setattr(row, key, value)
        row.finished_at = row.finished_at or utcnow()


def deliver(proposal_id: str) -> DeliveryOutcome:
    """Run one delivery attempt of a proposal, if it is due (DLV-1..7).

    Two transactions around the HTTP request: the first claims the proposal, checks
    it, reserves budgets and records the attempt; the second records the outcome,
    settles the budgets and resolves the run. No transaction is held while the
    platform answers.

    Args:
        proposal_id: the proposal to deliver.

    Returns:
        A `DeliveryOutcome`; ``claimed`` is False when nothing was due.
    """
    now = utcnow()
    lease = now + timedelta(seconds=LEASE_SECONDS)
    started = time.monotonic()
    with unit_of_work() as uow:
        if not claim(uow.session, proposal_id, now, lease):
            log.debug("nothing due for %s", proposal_id, extra={"proposal_id": proposal_id})
            return DeliveryOutcome(claimed=False, proposal_id=proposal_id)
        proposal = uow.session.get(ActionProposal, proposal_id, populate_existing=True)
        attempt_number, cycle = proposal.delivery_attempt_count, proposal.delivery_cycle
        with bind(proposal_id=proposal_id, operation_id=proposal.operation_id, attempt=attempt_number, cycle=cycle):
            log.info("delivery attempt claimed")
            try:
                plan = _plan(uow, proposal, attempt_number, now)
            except ActionError as error:  # nothing leaves: claim and failure commit together
                outcome = _fail(uow, proposal_id, error, None, attempt_number, cycle, lease, [], sent=False)
                uow.commit()
                _observe(outcome, time.monotonic() - started)
                return outcome
            identity = proposal.identity  # plain values: the row expires at commit
            uow.commit()
    with bind(proposal_id=proposal_id, operation_id=identity.operation_id, attempt=attempt_number, cycle=cycle):
        outcome = _send_and_record(identity, plan, attempt_number, cycle, lease)
        _observe(outcome, time.monotonic() - started)
        return outcome


def _plan(uow, proposal: ActionProposal, attempt_number: int, now: datetime) -> _Plan:
    """Checks, budget reservation and the attempt row, in the claim's transaction."""
    target = _pre_send_checks(uow.session, proposal, now)
    reservations = budgets.reserve(
        uow,
        proposal.installation_id,
        _budget_scopes(proposal, target.queue_id),
        proposal.operation_id,
        str(attempt_number),
        required=proposal.approval_mode != "human",  # no second person: a budget must bound it (FOUR-3)
    )
    body = canonical_json(request_body(proposal)).encode("utf-8")
    attempt = _Attempt(uow.session, proposal, attempt_number, target, body)
    return _Plan(target, body, attempt, reservations)


def _send_and_record(
    identity: ProposalIdentity, plan: _Plan, attempt_number: int, cycle: int, lease
) -> DeliveryOutcome:
    """Send the request, then record what came back (DLV-4..7)."""
    try:
        failpoint("before_send")
        response = _send(identity.operation_id, plan)
        failpoint("after_response")
        plan.attempt.record(
            response_status=response.status,
            response_digest=response.digest,
            response_class="success",
            duration_ms=response.duration_ms,
        )
        receipt = _read_receipt(response.body, plan.target.output_schema, identity, plan.attempt)
    except ActionError as error:
        # A request can have reached the platform even when its response was lost.
        sent = error.sent if isinstance(error, _EgressFailed) else True
        return _record_failure(identity.action_id, error, plan, attempt_number, cycle, lease, sent)
    except Exception:
        log.exception("delivery of %s failed unexpectedly", identity.action_id)
        error = ActionError(UNEXPECTED_FAILURE, True, 15)
        return _record_failure(identity.action_id, error, plan, attempt_number, cycle, lease, True)
    return _save_sync_receipt(identity.action_id, receipt, plan, lease, attempt_number)


def _observe(outcome: DeliveryOutcome, seconds: float) -> None:
    """Log and count the outcome of one claimed attempt."""
    if outcome.state == S.APPLIED:
        result = "applied"
    elif outcome.error_code == "budget_exhausted":
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


def _send(operation_id: str, plan: _Plan):
    """One HTTP request to the platform; a failure is recorded on the attempt (DLV-4).

    Raises:
        ActionError: the egress error's code, retryability and base delay.
    """
    target = plan.target
    in_flight = failpoint_later("during_request", 0.05)
    try:
        return egress.send(
            egress.EgressRequest(
                method=target.method,
                url=target.url,
                body=plan.body,
                message_id=f"msg_{plan.attempt.id}",
                idempotency_key=operation_id,
                timeout_seconds=target.timeout_seconds,
                bearer_token=target.bearer_token,
                signing_secret=target.signing_secret,
            ),
            egress.EgressPolicy(
                allowed_hosts=target.allowed_hosts,
                allow_private=current_app.config["EGRESS_ALLOW_PRIVATE"],
                max_response_bytes=current_app.config["EGRESS_MAX_RESPONSE_BYTES"],
            ),
            session=_http_session(),
        )
    except egress.EgressError as error:
        plan.attempt.record(
            response_status=error.status,
            response_digest=error.digest,
            response_class=error.response_class,
            error_code=error.code,
            duration_ms=error.duration_ms,
        )
        raise _EgressFailed(error) from error
    finally:
        in_flight.cancel()


class _EgressFailed(ActionError):
    """An egress error as a delivery failure; remembers whether anything was sent."""

    def __init__(self, error: egress.EgressError) -> None:
        super().__init__(error.code, error.retryable, error.delay_seconds)
        self.sent = error.sent


def _read_receipt(body: bytes, output_schema: dict, identity: ProposalIdentity, attempt: _Attempt):
    """Decode, schema-check and parse the platform's answer (DLV-5, RCPT-1)."""
    try:
        try:
            value = json.loads(body)
        except ValueError as error:
            raise ActionError("action_response_invalid") from error
        if schema_errors(value, output_schema):
            raise ActionError("action_response_schema_invalid")
        return parse_receipt(value, identity)
    except ActionError as error:
        attempt.record(response_class="invalid_response", error_code=error.code)
        raise


def _save_sync_receipt(proposal_id: str, receipt, plan: _Plan, lease, attempt_number: int) -> DeliveryOutcome:
    """Record the receipt, guarded by attempt and lease, with its run's resolution (DLV-5, DLV-7)."""
    attempt = plan.attempt
    guard = AttemptGuard(attempt_number, lease, attempt.id, attempt.finish.get("response_digest"))
    with unit_of_work() as uow:
        proposal = uow.session.get(ActionProposal, proposal_id, populate_existing=True)
        attempt.write(uow.session)
        budgets.settle(uow, plan.reservations, consumed=True)
        try:
            changed = save_receipt(uow, proposal, receipt, Actor.system(proposal.run_id), guard)
        except ActionError as error:  # an appeal correction stopped being eligible (CORR-3)
            outcome = _fail(uow, proposal_id, error, attempt, attempt_number, proposal.delivery_cycle, lease, [], True)
            uow.commit()
            return outcome
        _after_result(uow, proposal, changed)
        outcome = DeliveryOutcome(
            claimed=True,
            proposal_id=proposal.id,
            state=proposal.state,
            attempt_number=attempt_number,
            error_code=proposal.last_error_code,
            terminal=proposal.delivery_terminal,
            extra={"receipt_status": receipt.status, "changed": changed, "http_seconds": attempt.seconds},
        )
        failpoint("before_receipt_write")
        uow.commit()
    return outcome


def _after_result(uow, proposal: ActionProposal, changed: bool) -> None:
    """Resolve the run, or schedule what comes next (DLV-7)."""
    if not changed:
        return
    if proposal.state == S.APPLIED or proposal.delivery_terminal:
        emit_delivery_resolution(uow, proposal)
    else:
        schedule_next_attempt(uow, proposal)


def _record_failure(proposal_id, error: ActionError, plan: _Plan, attempt_number, cycle, lease, sent: bool):
    with unit_of_work() as uow:
        outcome = _fail(uow, proposal_id, error, plan.attempt, attempt_number, cycle, lease, plan.reservations, sent)
        uow.commit()
    return outcome


def _fail(
    uow, proposal_id, error: ActionError, attempt, attempt_number, cycle, lease, reservations, sent
) -> DeliveryOutcome:
    """Write a failed attempt, guarded by attempt, cycle and lease (DLV-6)."""
    deferred = isinstance(error, budgets.BudgetExhausted)
    proposal = uow.session.get(ActionProposal, proposal_id, populate_existing=True)
    in_cycle = attempt_number - proposal.cycle_start_attempt
    terminal = not error.retryable or (not deferred and in_cycle >= MAX_ATTEMPTS_PER_CYCLE)
    delay = error.delay_seconds if deferred else retry_delay(error.delay_seconds, in_cycle)
    values: dict[str, Any] = dict(
        delivery_terminal=terminal,
        next_attempt_at=utcnow() + timedelta(seconds=delay),
        lease_expires_at=None,
        last_error_code=error.code,
    )
    if deferred:  # nothing was sent: the deferral does not use up an attempt
        values["delivery_attempt_count"] = attempt_number - 1
    changed = move_proposal(
        uow.session,
        proposal_id,
        Move.DELIVERY_FAILED,
        where=(
            P.delivery_terminal.is_(False),
            P.delivery_attempt_count == attempt_number,
            P.delivery_cycle == cycle,
            P.lease_expires_at == lease,
        ),
        values=values,
    )
    if attempt is not None:
        attempt.write(uow.session)
    budgets.settle(uow, reservations, consumed=sent)
    uow.session.refresh(proposal)
    if changed:
        uow.audit(
            proposal.installation_id,
            f"action-attempt-failed:{proposal.operation_id}:{cycle}:{attempt_number}:{error.code}"
            + (f":{iso(values['next_attempt_at'])}" if deferred else ""),
            "action.delivery_failed",
            Actor.system(proposal.run_id),
            "action_proposal",
            proposal.id,
            {
                "attempt_number": attempt_number,
                "delivery_cycle": cycle,
                "error_code": error.code,
                "terminal": terminal,
                "retry_in_seconds": None if terminal else round(delay, 3),
            },
        )
    _after_result(uow, proposal, changed)
    return DeliveryOutcome(
        claimed=True,
        proposal_id=proposal_id,
        state=proposal.state,
        attempt_number=attempt_number,
        error_code=error.code,
        terminal=proposal.delivery_terminal,
        extra={"http_seconds": attempt.seconds if attempt else None},
    )
