"""Plan one claimed attempt inside the claim's transaction: the checks before any
request may leave, the budget reservation and the attempt row (SPEC DLV-2..4, PRE,
CORR-3, FOUR-5).

`claim` calls `plan_attempt` for each proposal it claims; what it returns is plain
values (`Target`, `Plan`), so nothing lazy-loads after the claim commits.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from datetime import datetime
from typing import Any

from sqlalchemy import select

from app import egress
from app.domain.clock import iso
from app.domain.digests import canonical_json
from app.domain.errors import ActionError
from app.domain.preconditions import acts_on_closed_case, check_preconditions
from app.domain.proposal import delivery as delivery_rules
from app.domain.proposal.destination import Destination, check_unchanged, delivery_fields, describe
from app.domain.proposal.identity import SCHEMA_VERSION
from app.domain.proposal.temporary import draws_on_budget
from app.domain.case_states import BatchState
from app.models import ActionApproval, ActionProposal, BulkBatch
from app.secret_box import UnreadableSecret
from app.services.cases.snapshot import report_snapshot
from app.services.lifecycle import breaker, platforms
from app.services.lifecycle import budget_reservations
from app.services.lifecycle.action_targets import destination_of, load_delivery_target, parse_operation
from app.services.lifecycle.outcomes import AttemptRow, BulkStopped
from app.services.lifecycle.proposals import delivery_of


@dataclass(frozen=True)
class Target:
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
    health: breaker.Settings = breaker.Settings()
    destination: Destination | None = None  # what is in force, described before each send (FOUR-5)


def _pre_send_checks(uow, proposal: ActionProposal, now: datetime, batch: Batch | None = None) -> Target:
    """Everything that must still hold before a request may leave (DLV-2, PRE, CORR-3,
    BULK-7).

    Args:
        batch: what this batch's claim transaction looked up: the target of another
            proposal of the same component version and installation (not loaded
            again), and the reports' snapshots, read together just before.

    Raises:
        ActionError: action_confirmation_timed_out, action_delivery_attempts_exhausted,
            action_approval_expired, action_precondition_changed,
            action_case_no_longer_eligible, appeal_correction_precondition_changed,
            action_approval_missing, action_component_*, action_delivery_changed (FOUR-5),
            action_connection_secret_unreadable (OPS-3).
        BulkStopped: the item's bulk batch is paused or cancelled (BULK-7).
    """
    session = uow.session
    problem = delivery_rules.pre_send_problem(delivery_of(proposal), now)
    if problem is not None:
        raise ActionError(problem)
    if proposal.bulk_batch_id:
        _check_bulk_batch(uow, proposal.bulk_batch_id)
    if proposal.appeal_id:
        from app.services.lifecycle.corrections import check_correction_eligible

        check_correction_eligible(session, proposal)
    snapshot = (batch.snapshots.get(proposal.report_id) if batch else None) or report_snapshot(
        session, proposal.report_id
    )
    # a reversal ends a temporary action even on an appealed or closed case (TEMP-2, FOUR-7)
    closed_ok = acts_on_closed_case(
        is_correction=proposal.is_correction, is_reversal=proposal.is_reversal, is_notice=proposal.is_notice
    )
    check_preconditions(proposal.preconditions, snapshot, closed_ok)
    if delivery_rules.approval_missing(delivery_of(proposal), _approved(session, proposal)):
        raise ActionError(delivery_rules.APPROVAL_MISSING)
    if batch is not None:
        _check_delivery(proposal, batch.target.destination)
        return replace(batch.target, queue_id=snapshot.queue_id)
    component, connection = load_delivery_target(session, proposal.component_version_id, proposal.installation_id)
    _check_secrets_readable(connection)
    destination = destination_of(session, component, connection)
    _check_delivery(proposal, destination)
    if platforms.handles(component.implementation_kind):  # its first request is decided in `plan_attempt`
        method, url = "", connection.base_url
    else:
        operation = parse_operation(component.implementation_reference)
        method, url = operation.method, egress.build_url(connection.base_url, operation.path)
    return Target(
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
        health=breaker.settings_of(connection),
        destination=destination,
    )


SECRET_UNREADABLE_DELAY_SECONDS = 300


def _check_secrets_readable(connection) -> None:
    """Nothing leaves with a credential no configured key opens (OPS-3): the attempt
    fails, retryable (configuring the missing key again in SECRETS_KEY_PREVIOUS lets
    the next attempt through), and nothing is sent without its credentials.

    Raises:
        ActionError: ``action_connection_secret_unreadable`` (retryable, 300 s base delay).
    """
    if isinstance(connection.bearer_token, UnreadableSecret) or isinstance(connection.signing_secret, UnreadableSecret):
        raise ActionError("action_connection_secret_unreadable", True, SECRET_UNREADABLE_DELAY_SECONDS)


def _check_bulk_batch(uow, batch_id: str) -> None:
    """A bulk item goes only while its batch runs (BULK-7): one read of the batch's
    state per claim transaction (a batch claim's companions of one batch share it).

    Raises:
        BulkStopped: the batch is paused (the item is held) or cancelled (it ends).
    """
    states = uow.scratch.setdefault("bulk_batch_states", {})
    if batch_id not in states:
        states[batch_id] = uow.session.scalar(select(BulkBatch.state).where(BulkBatch.id == batch_id))
    if states[batch_id] in (BatchState.PAUSED, BatchState.CANCELLED):
        raise BulkStopped(cancelled=states[batch_id] == BatchState.CANCELLED)


def _check_delivery(proposal: ActionProposal, destination: Destination | None) -> None:
    """Nothing leaves unless what is in force is the delivery the digest covered (FOUR-5).

    Raises:
        DeliveryChanged: ``action_delivery_changed`` (terminal), naming both descriptions.
    """
    if proposal.delivery is None or destination is None:  # prepared before FOUR-5
        return
    current = describe(destination, delivery_fields(proposal.id, proposal.operation_id, proposal.target))
    if "invalid" in current:  # it cannot be sent at all: the component's own error says why (DLV-2)
        return
    check_unchanged(proposal.delivery, current)


def _approved(session, proposal: ActionProposal) -> bool:
    """Whether an approval of exactly this digest exists; only human mode asks (DLV-2)."""
    if proposal.approval_mode != "human":
        return False
    approved = session.scalar(
        select(ActionApproval.id).where(
            ActionApproval.proposal_id == proposal.id,
            ActionApproval.decision == "approved",
            ActionApproval.payload_digest == proposal.payload_digest,
        )
    )
    return approved is not None


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


def _budget_scopes(proposal: ActionProposal, queue_id: str | None) -> list[budget_reservations.Scope]:
    scopes = [budget_reservations.Scope("component", proposal.component_version_id)]
    if proposal.workflow_version_id:
        scopes.insert(0, budget_reservations.Scope("workflow", proposal.workflow_version_id))
    if queue_id:
        scopes.append(budget_reservations.Scope("queue", queue_id))
    return scopes


@dataclass
class Plan:
    """What one claimed attempt will send, decided inside the claim's transaction."""

    target: Target
    body: bytes
    attempt: AttemptRow
    reservations: list[str]
    gate: breaker.Gate | None = None


@dataclass
class Batch:
    """What the first claim of a batch looked up, for the others in the same
    transaction: the target, the connection's health as read, the budgets."""

    target: Target
    health: breaker.Health | None
    budgets: dict = field(default_factory=dict)
    snapshots: dict = field(default_factory=dict)  # report id -> ReportSnapshot


def plan_attempt(uow, proposal: ActionProposal, attempt_number: int, now: datetime, batch: Batch | None = None) -> Plan:
    """Checks, budget reservation and the attempt row, in the claim's transaction."""
    target = _pre_send_checks(uow, proposal, now, batch)
    # CONN-1..3: an open breaker, a 429 pause, a disabled endpoint or the rate limit
    # defer the delivery here, before any budget is reserved (ConnectionHeld).
    gate = breaker.admit(
        uow,
        target.connection_id,
        proposal.installation_id,
        target.health,
        target.timeout_seconds,
        now,
        read=batch.health if batch else None,
    )
    # FOUR-7: a reversal or an appeal correction undoes an action, and a notice (DSA-4) restricts
    # nothing: never deferred for lack of budget
    undoing = not draws_on_budget(
        is_correction=proposal.is_correction, is_reversal=proposal.is_reversal, is_notice=proposal.is_notice
    )
    reservations = [] if undoing else budget_reservations.reserve(
        uow,
        proposal.installation_id,
        _budget_scopes(proposal, target.queue_id),
        proposal.operation_id,
        str(attempt_number),
        required=proposal.approval_mode != "human",  # no second person: a budget must bound it (FOUR-3)
        savepoint=False,  # `deliver` runs this in a savepoint already: an exhausted budget undoes it all
        known=batch.budgets if batch else None,
    )
    body = canonical_json(request_body(proposal)).encode("utf-8")
    if platforms.handles(target.kind):  # PLAT-1..3: the kind's first request of this attempt
        target, body = platforms.first_request(target, proposal, request_body(proposal), attempt_number)
    attempt = AttemptRow(
        uow,
        installation_id=proposal.installation_id,
        proposal_id=proposal.id,
        attempt_number=attempt_number,
        delivery_cycle=proposal.delivery_cycle,
        connection_version_id=target.connection_version_id,
        purpose=target.purpose,
        method=target.method,
        url=target.url,
        body=body,
    )
    return Plan(target, body, attempt, reservations, gate)
