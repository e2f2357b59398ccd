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
from sqlalchemy import func, select, update
from sqlalchemy.orm.attributes import set_committed_value

from app import egress
from app.domain.attempts import webhook_message_id
from app.domain.clock import iso, utcnow
from app.domain.digests import canonical_json, sha256_digest
from app.domain.errors import ActionError
from app.domain.expressions import schema_errors
from app.domain.preconditions import check_preconditions
from app.domain.proposal import delivery as rules
from app.domain.proposal.delivery import Lease
from app.domain.proposal.identity import SCHEMA_VERSION
from app.domain.receipts import ProposalIdentity, parse_receipt
from app.domain.states import LEASE_SECONDS, ProposalState
from app.domain.states import target as target_state
from app.faults import failpoint, failpoint_later
from app.metrics import record_delivery
from app.models import ActionApproval, ActionProposal, ConnectionAttempt, move_proposal, new_id
from app.observability import bind
from app.services.cases.snapshot import report_snapshot
from app.services.lifecycle import budgets, connection_health, platforms
from app.services.lifecycle.components import load_delivery_target, parse_operation
from app.services.lifecycle.proposals import delivery_of, guard
from app.services.lifecycle.receipts import AttemptGuard, after_result, save_receipt
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


def claim(session, proposal_id: str, now: datetime, lease_expires_at: datetime | None = None) -> Lease | None:
    """Claim a proposal for one attempt (DLV-1): the domain decides from the row as
    read, and one UPDATE guarded on that row writes it.

    Returns:
        The lease this caller holds, or None when nothing was due (or another worker
        claimed it first).
    """
    proposal = session.get(ActionProposal, proposal_id, populate_existing=True)
    if proposal is None:
        return None
    current = delivery_of(proposal)
    change = rules.claim(current, now, lease_expires_at)
    if change is None or not move_proposal(
        session, proposal_id, change.move, where=guard(change), values=change.values
    ):
        return None
    _as_written(proposal, change)
    return rules.lease_of(change, current)


def _as_written(proposal: ActionProposal, change) -> None:
    """Make the loaded row what the guarded UPDATE wrote (it matched the row as read,
    so the row is now that plus the change): the claim's transaction goes on with it
    without reading the proposal again."""
    set_committed_value(proposal, "state", target_state(change.move).value)
    for column, value in change.values.items():
        if column in rules.COLUMNS:
            set_committed_value(proposal, column, value)


def take_lease(proposal_id: str, now: datetime, lease_expires_at: datetime | None = None) -> Lease | None:
    """Claim a proposal and commit, without delivering it (what a worker that died
    right after its claim leaves behind; tests and tooling use this)."""
    with unit_of_work() as uow:
        lease = claim(uow.session, proposal_id, now, lease_expires_at)
        uow.commit()
    return lease


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
    # The component's kind and reference: a platform kind (PLAT-1..3) sends its own requests.
    kind: str = "webhook"
    reference: str = ""
    purpose: str = "update"  # which request the attempt row records first (PLAT-4)
    call: Any = None  # a platform kind's plan of requests (services.lifecycle.platforms)
    connection_id: str = ""
    health: connection_health.Settings = connection_health.Settings()


def _pre_send_checks(session, proposal: ActionProposal, now: datetime) -> _Target:
    """Everything that must still hold before a request may leave (DLV-2, PRE, CORR-3).

    Raises:
        ActionError: action_confirmation_timed_out, action_delivery_attempts_exhausted,
            action_approval_expired, action_precondition_changed,
            action_case_no_longer_eligible, appeal_correction_precondition_changed,
            action_approval_missing, action_component_*.
    """
    problem = rules.pre_send_problem(delivery_of(proposal), now)
    if problem is not None:
        raise ActionError(problem)
    if proposal.appeal_id:
        from app.services.lifecycle.corrections import check_correction_eligible

        check_correction_eligible(session, proposal)
    snapshot = report_snapshot(session, proposal.report_id)
    # a reversal ends a temporary action even on an appealed or closed case (TEMP-2)
    check_preconditions(proposal.preconditions, snapshot, proposal.is_correction or proposal.is_reversal)
    approved = session.scalar(
        select(ActionApproval.id).where(
            ActionApproval.proposal_id == proposal.id,
            ActionApproval.decision == "approved",
            ActionApproval.payload_digest == proposal.payload_digest,
        )
    )
    if rules.approval_missing(delivery_of(proposal), approved is not None):
        raise ActionError(rules.APPROVAL_MISSING)
    component, connection = load_delivery_target(session, proposal.component_version_id, proposal.installation_id)
    if platforms.handles(component.implementation_kind):  # its first request is decided in `_plan`
        method, url = "", connection.base_url
    else:
        operation = parse_operation(component.implementation_reference)
        method, url = operation.method, egress.build_url(connection.base_url, operation.path)
    return _Target(
        method=method,
        url=url,
        connection_version_id=connection.id,
        timeout_seconds=connection.timeout_seconds,
        bearer_token=connection.bearer_token,
        signing_secret=connection.signing_secret,
        allowed_hosts=tuple(connection.allowed_hosts),
        output_schema=component.output_schema,
        queue_id=snapshot.queue_id,
        kind=component.implementation_kind,
        reference=component.implementation_reference,
        connection_id=connection.connection_id,
        health=connection_health.settings_of(connection),
    )


def request_body(proposal: ActionProposal) -> dict[str, Any]:
    """The body a platform receives (DLV-4, SPEC §5)."""
    return {
        "schema_version": SCHEMA_VERSION,
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
    gate: connection_health.Gate | None = None


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
                purpose=target.purpose,
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
        """Finish the row with one UPDATE (no read: the row is ours since the claim)."""
        if not self.finish:
            return
        session.execute(
            update(ConnectionAttempt)
            .where(ConnectionAttempt.id == self.id)
            .values(**self.finish, finished_at=func.coalesce(ConnectionAttempt.finished_at, utcnow()))
            .execution_options(synchronize_session=False)
        )


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
    started = time.monotonic()
    waiting = connection_health.hold_before_claim(proposal_id, now)  # CONN-1..3: deferred unclaimed
    if waiting is not None:
        return DeliveryOutcome(claimed=False, proposal_id=proposal_id, error_code=waiting)
    with unit_of_work() as uow:
        held = claim(uow.session, proposal_id, now, now + timedelta(seconds=_lease_seconds()))
        if held is None:
            log.debug("nothing due for %s", proposal_id, extra={"proposal_id": proposal_id})
            return DeliveryOutcome(claimed=False, proposal_id=proposal_id)
        proposal = uow.session.get(ActionProposal, proposal_id)  # as the claim wrote it (`_as_written`)
        attempt_number, cycle, lease = held.attempt_number, held.delivery_cycle, held.expires_at
        with bind(proposal_id=proposal_id, operation_id=proposal.operation_id, attempt=attempt_number, cycle=cycle):
            log.info("delivery attempt claimed")
            try:
                with uow.savepoint():
                    plan = _plan(uow, proposal, attempt_number, now)
            except Exception as caught:  # nothing leaves: claim and failure commit together
                error = caught if isinstance(caught, ActionError) else _unexpected(caught, "checking")
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


def _lease_seconds() -> float:
    """How long a claim holds the proposal (DLV-1; DELIVERY_LEASE_SECONDS, 150 s)."""
    return current_app.config.get("DELIVERY_LEASE_SECONDS", LEASE_SECONDS)


def _unexpected(error: Exception, stage: str) -> ActionError:
    """An unexpected error in a claimed attempt counts as a failed, retryable attempt
    with backoff (EDGE-4): it never leaves the proposal to be claimed again at once."""
    log.error("delivery %s failed unexpectedly", stage, exc_info=error)
    return ActionError(UNEXPECTED_FAILURE, True, 15)


def _plan(uow, proposal: ActionProposal, attempt_number: int, now: datetime) -> _Plan:
    """Checks, budget reservation and the attempt row, in the claim's transaction."""
    target = _pre_send_checks(uow.session, proposal, now)
    # CONN-1..3: an open breaker, a 429 pause, a disabled endpoint or the rate limit
    # defer the delivery here, before any budget is reserved (ConnectionHeld).
    gate = connection_health.admit(
        uow, target.connection_id, proposal.installation_id, target.health, target.timeout_seconds, now
    )
    reservations = budgets.reserve(
        uow,
        proposal.installation_id,
        _budget_scopes(proposal, target.queue_id),
        proposal.operation_id,
        str(attempt_number),
        required=proposal.approval_mode != "human",  # no second person: a budget must bound it (FOUR-3)
        savepoint=False,  # `deliver` runs this in a savepoint already: an exhausted budget undoes it all
    )
    body = canonical_json(request_body(proposal)).encode("utf-8")
    if platforms.handles(target.kind):  # PLAT-1..3: the kind's first request of this attempt
        target, body = platforms.first_request(target, proposal, request_body(proposal), attempt_number)
    attempt = _Attempt(uow.session, proposal, attempt_number, target, body)
    return _Plan(target, body, attempt, reservations, gate)


def _send_and_record(
    identity: ProposalIdentity, plan: _Plan, attempt_number: int, cycle: int, lease
) -> DeliveryOutcome:
    """Send the request, then record what came back (DLV-4..7)."""
    if platforms.handles(plan.target.kind):
        return platforms.send_and_record(identity, plan, attempt_number, cycle, lease)
    try:
        connection_health.before_send(plan.gate)
        failpoint("before_send")
        response = _send(identity.operation_id, plan, lease)
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
    except Exception as caught:
        error = _unexpected(caught, "sending")
        return _record_failure(identity.action_id, error, plan, attempt_number, cycle, lease, True)
    return _save_sync_receipt(identity.action_id, receipt, plan, lease, attempt_number)


def _observe(outcome: DeliveryOutcome, seconds: float) -> None:
    """Log and count the outcome of one claimed attempt."""
    if outcome.state == S.APPLIED:
        result = "applied"
    elif outcome.error_code == "budget_exhausted" or outcome.error_code in connection_health.rules.WAIT_CODES:
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


def request_timeout(connection_timeout: float, lease: datetime) -> float:
    """Seconds the next request of a claimed attempt may take (DLV-1, DLV-4): the
    connection's timeout, within what is left of the lease less its last fifth
    (`rules.request_timeout`). Every request of an attempt asks again, so an attempt
    of several requests (platform kinds: update, then read-back) also ends in time.

    Raises:
        egress.EgressError: ``action_lease_too_short`` (retryable, class ``refused``,
            nothing sent) when too little of the lease is left.
    """
    timeout = rules.request_timeout(connection_timeout, _lease_seconds(), (lease - utcnow()).total_seconds())
    if timeout is None:
        raise egress.EgressError(rules.LEASE_TOO_SHORT, retryable=True, response_class="refused", sent=False)
    return timeout


def _send(operation_id: str, plan: _Plan, lease: datetime):
    """One HTTP request to the platform; a failure is recorded on the attempt (DLV-4).

    The whole request ends within the connection's timeout and well before the lease
    expires (`request_timeout`), so no other worker can claim the proposal while it
    is still open.

    Raises:
        ActionError: the egress error's code, retryability and base delay;
            ``action_lease_too_short`` (retryable, nothing sent) when too little of
            the lease is left.
    """
    target = plan.target
    in_flight = failpoint_later("during_request", 0.05)
    try:
        timeout = request_timeout(target.timeout_seconds, lease)
        return egress.send(
            egress.EgressRequest(
                method=target.method,
                url=target.url,
                body=plan.body,
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
        except (ValueError, RecursionError) as error:  # not JSON, or nested too deep to decode
            raise ActionError("action_response_invalid") from error
        if schema_errors(value, output_schema):
            raise ActionError("action_response_schema_invalid")
        return parse_receipt(value, identity)
    except ActionError as error:
        attempt.record(response_class="invalid_response", error_code=error.code)
        raise


def _save_sync_receipt(
    proposal_id: str, receipt, plan: _Plan, lease, attempt_number: int, source: str | None = None
) -> DeliveryOutcome:
    """Record the receipt, guarded by attempt and lease, with its run's resolution (DLV-5, DLV-7);
    ``source="observed"`` for a receipt the console wrote from a read-back (PLAT-2)."""
    attempt = plan.attempt
    guard = AttemptGuard(attempt_number, lease, attempt.id, attempt.finish.get("response_digest"))
    with unit_of_work() as uow:
        proposal = uow.session.get(ActionProposal, proposal_id, populate_existing=True)
        attempt.write(uow.session)
        budgets.settle(uow, plan.reservations, consumed=True)
        connection_health.record_success(uow, plan.gate)  # CONN-1
        try:
            changed = save_receipt(uow, proposal, receipt, Actor.system(proposal.run_id), guard, source=source)
        except ActionError as error:  # an appeal correction stopped being eligible (CORR-3)
            outcome = _fail(uow, proposal_id, error, attempt, attempt_number, proposal.delivery_cycle, lease, [], True)
            uow.commit()
            return outcome
        if changed:
            after_result(uow, proposal)
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


def _record_failure(proposal_id, error: ActionError, plan: _Plan, attempt_number, cycle, lease, sent: bool):
    with unit_of_work() as uow:
        # CONN-1..3: what the failure says about the connection (breaker, 429 pause, 410).
        status = plan.attempt.finish.get("response_status")
        error = connection_health.record_failure(uow, plan.gate, error, status, isinstance(error, _EgressFailed))
        outcome = _fail(uow, proposal_id, error, plan.attempt, attempt_number, cycle, lease, plan.reservations, sent)
        uow.commit()
    return outcome


def _fail(
    uow, proposal_id, error: ActionError, attempt, attempt_number, cycle, lease, reservations, sent
) -> DeliveryOutcome:
    """Write a failed attempt, guarded by attempt, cycle and lease (DLV-6)."""
    deferred = isinstance(error, budgets.BudgetExhausted | connection_health.ConnectionHeld)
    proposal = uow.session.get(ActionProposal, proposal_id, populate_existing=True)
    change = rules.failure(
        delivery_of(proposal),
        Lease(attempt_number, cycle, lease),
        code=error.code,
        retryable=error.retryable,
        delay_seconds=error.delay_seconds,
        deferred=deferred,  # nothing was sent: the deferral does not use up an attempt
        now=utcnow(),
    )
    changed = move_proposal(uow.session, proposal_id, change.move, where=guard(change), values=change.values)
    if attempt is not None:
        attempt.write(uow.session)
    budgets.settle(uow, reservations, consumed=sent)
    uow.session.refresh(proposal)
    if changed:
        uow.audit(
            proposal.installation_id,
            f"action-attempt-failed:{proposal.operation_id}:{cycle}:{attempt_number}:{error.code}"
            + (f":{iso(change.values['next_attempt_at'])}" if deferred else ""),
            "action.delivery_failed",
            Actor.system(proposal.run_id),
            "action_proposal",
            proposal.id,
            {
                "attempt_number": attempt_number,
                "delivery_cycle": cycle,
                "error_code": error.code,
                "terminal": change.terminal,
                "retry_in_seconds": None if change.terminal else round(change.delay_seconds, 3),
            },
        )
    if changed:
        after_result(uow, proposal)
    return DeliveryOutcome(
        claimed=True,
        proposal_id=proposal_id,
        state=proposal.state,
        attempt_number=attempt_number,
        error_code=error.code,
        terminal=proposal.delivery_terminal,
        extra={"http_seconds": attempt.seconds if attempt else None},
    )
