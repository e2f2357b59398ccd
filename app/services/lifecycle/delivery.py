"""The delivery job: claim, check, reserve, send, record, settle (SPEC DLV-1..7).

`deliver` is what an RQ worker runs for a proposal id. The database decides what
is due: a job that claims nothing returns at once, so duplicate or early jobs are
harmless and losing every job in Redis loses no action (the sweep re-enqueues).

Where a burst is queued for one connection, the job claims up to
``DELIVERY_BATCH_SIZE`` due proposals of the same component version in one
transaction, sends them one after the other, and records their outcomes in one
more: two commits for the batch instead of two per proposal. Each proposal keeps
its own claim, attempt row, budget reservation, guarded receipt write and audit
row; the jobs of the proposals it took along are taken off the queue.

This module claims and plans; `app.services.lifecycle.sending` sends each claimed
attempt and records the outcomes.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta
from typing import Any

from flask import current_app
from sqlalchemy import select

from app import egress
from app.domain.clock import iso, utcnow
from app.domain.digests import canonical_json
from app.domain.errors import ActionError
from app.domain.preconditions import acts_on_closed_case, check_preconditions
from app.domain.proposal import delivery as rules
from app.domain.proposal.delivery import Lease
from app.domain.proposal.destination import DeliveryChanged, Destination, check_unchanged, delivery_fields, describe
from app.domain.proposal.identity import SCHEMA_VERSION
from app.domain.proposal.temporary import draws_on_budget
from app.domain.receipts import ProposalIdentity
from app.domain.states import ProposalState
from app.models import ActionApproval, ActionProposal, move_loaded, predicates
from app.observability import bind
from app.queueing import discard_delivery_jobs
from app.services.cases.snapshot import report_snapshot, report_snapshots
from app.services.lifecycle import budgets, connection_health, platforms, sending
from app.services.lifecycle.components import destination_of, load_delivery_target, parse_operation
from app.services.lifecycle.outcomes import AttemptRow, DeliveryOutcome, fail, lease_seconds, unexpected
from app.services.lifecycle.proposals import delivery_of, move_at_commit
from app.services.lifecycle.receipts import DEFERRAL_CODES
from app.services.uow import Actor, RetryWithSavepoints, unit_of_work

log = logging.getLogger(__name__)
S = ProposalState
P = ActionProposal
DEFAULT_BATCH_SIZE = 10

__all__ = ["DeliveryOutcome", "claim", "deliver", "request_body", "take_lease"]


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
    return _claim_loaded(session, proposal, now, lease_expires_at)


def _claim_loaded(session, proposal: ActionProposal, now: datetime, lease_expires_at, uow=None) -> Lease | None:
    current = delivery_of(proposal)
    change = rules.claim(current, now, lease_expires_at)
    if change is None:
        return None
    if uow is not None and not uow.savepoints:  # the row is locked (FOR UPDATE): the guard holds
        move_at_commit(uow, proposal, change.move, change.expect, change.values)
    elif not move_loaded(session, proposal, change.move, expect=change.expect, values=change.values):
        return None
    return rules.lease_of(change, current)


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
    destination: Destination | None = None  # what is in force, described before each send (FOUR-5)


def _pre_send_checks(session, proposal: ActionProposal, now: datetime, batch: _Batch | None = None) -> _Target:
    """Everything that must still hold before a request may leave (DLV-2, PRE, CORR-3).

    Args:
        batch: what this batch's claim transaction looked up: the target of another
            proposal of the same component version and installation (not loaded
            again), and the reports' snapshots, read together just before.

    Raises:
        ActionError: action_confirmation_timed_out, action_delivery_attempts_exhausted,
            action_approval_expired, action_precondition_changed,
            action_case_no_longer_eligible, appeal_correction_precondition_changed,
            action_approval_missing, action_component_*, action_delivery_changed (FOUR-5).
    """
    problem = rules.pre_send_problem(delivery_of(proposal), now)
    if problem is not None:
        raise ActionError(problem)
    if proposal.appeal_id:
        from app.services.lifecycle.corrections import check_correction_eligible

        check_correction_eligible(session, proposal)
    snapshot = (batch.snapshots.get(proposal.report_id) if batch else None) or report_snapshot(
        session, proposal.report_id
    )
    # a reversal ends a temporary action even on an appealed or closed case (TEMP-2, FOUR-7)
    closed_ok = acts_on_closed_case(is_correction=proposal.is_correction, is_reversal=proposal.is_reversal)
    check_preconditions(proposal.preconditions, snapshot, closed_ok)
    if rules.approval_missing(delivery_of(proposal), _approved(session, proposal)):
        raise ActionError(rules.APPROVAL_MISSING)
    if batch is not None:
        _check_delivery(proposal, batch.target.destination)
        return replace(batch.target, queue_id=snapshot.queue_id)
    component, connection = load_delivery_target(session, proposal.component_version_id, proposal.installation_id)
    destination = destination_of(session, component, connection)
    _check_delivery(proposal, destination)
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
        destination=destination,
    )


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


def _budget_scopes(proposal: ActionProposal, queue_id: str | None) -> list[budgets.Scope]:
    scopes = [budgets.Scope("component", proposal.component_version_id)]
    if proposal.workflow_version_id:
        scopes.insert(0, budgets.Scope("workflow", proposal.workflow_version_id))
    if queue_id:
        scopes.append(budgets.Scope("queue", queue_id))
    return scopes


@dataclass
class _Plan:
    """What one claimed attempt will send, decided inside the claim's transaction."""

    target: _Target
    body: bytes
    attempt: AttemptRow
    reservations: list[str]
    gate: connection_health.Gate | None = None


@dataclass
class _Batch:
    """What the first claim of a batch looked up, for the others in the same
    transaction: the target, the connection's health as read, the budgets."""

    target: _Target
    health: connection_health.Health | None
    budgets: dict = field(default_factory=dict)
    snapshots: dict = field(default_factory=dict)  # report id -> ReportSnapshot


@dataclass
class _Claimed:
    """A proposal this job claimed and may send, as plain values (the rows expire at
    the claim's commit)."""

    identity: ProposalIdentity
    plan: _Plan
    attempt_number: int
    cycle: int
    lease: datetime


def deliver(proposal_id: str) -> DeliveryOutcome:
    """Run one delivery attempt of a proposal, if it is due, and of the other due
    proposals of its component version this job can take along (DLV-1..7).

    Two transactions around the HTTP requests: the first claims, checks, reserves
    budgets and records the attempt rows; the second records the outcomes, settles
    the budgets and resolves the runs. No transaction is held while a platform
    answers.

    Args:
        proposal_id: the proposal to deliver.

    Returns:
        The `DeliveryOutcome` of `proposal_id`; ``claimed`` is False when nothing was
        due. ``extra["batch"]`` holds the outcomes of the others taken along.
    """
    now = utcnow()
    started = time.monotonic()
    waiting = connection_health.hold_before_claim(proposal_id, now)  # CONN-1..3: deferred unclaimed
    if waiting is not None:
        return DeliveryOutcome(claimed=False, proposal_id=proposal_id, error_code=waiting)
    lease = now + timedelta(seconds=lease_seconds())
    log_fields: dict[str, dict] = {}  # what each claimed proposal's log lines name
    try:
        batch = _claim_batch(proposal_id, now, lease, log_fields, savepoints=False)
    except RetryWithSavepoints:  # a check or write failed: claim again, each member in a savepoint
        log.info("batch claim tried again with savepoints", extra={"proposal_id": proposal_id})
        log_fields.clear()
        batch = _claim_batch(proposal_id, now, lease, log_fields, savepoints=True)
    if not batch:
        log.debug("nothing due for %s", proposal_id, extra={"proposal_id": proposal_id})
        return DeliveryOutcome(claimed=False, proposal_id=proposal_id)
    sendable = [c for c in batch if isinstance(c, _Claimed)]
    outcomes = sending.send_and_record(sendable) if sendable else {}  # nothing to send: no empty transaction
    outcomes.update({c.proposal_id: c for c in batch if isinstance(c, DeliveryOutcome)})
    seconds = (time.monotonic() - started) / len(outcomes)
    for pid, outcome in outcomes.items():
        with bind(**log_fields[pid]):
            sending.observe(outcome, seconds)
    named = outcomes.pop(proposal_id)
    if outcomes:
        named.extra["batch"] = list(outcomes.values())
    return named


def _claim_batch(proposal_id: str, now: datetime, lease: datetime, log_fields, savepoints: bool) -> list:
    """The claim transaction: the named proposal and, behind an ordinary one, the
    others of its component version this job takes along (DLV-1).

    Args:
        savepoints: False for the first try, where each member's checks and writes
            run without a savepoint (two round trips and a flush less each); any
            error then raises `RetryWithSavepoints` and nothing of the try is kept.

    Returns:
        The members (`_Claimed` or the `DeliveryOutcome` of failed checks), empty
        when nothing was due.
    """
    with unit_of_work(savepoints) as uow:
        # A row another worker holds (its batch claim, its outcome) is skipped, not
        # waited for: that worker delivers it, and its lease covers a crash.
        proposal = uow.session.get(
            ActionProposal, proposal_id, populate_existing=True, with_for_update={"skip_locked": True}
        )
        first = _claim_and_plan(uow, proposal, now, lease, log_fields)
        if first is None:
            return []
        batch = [first]
        if _batchable(first, proposal):
            batch_context = _Batch(first.plan.target, first.plan.gate.health if first.plan.gate else None)
            companions, jobs = _claim_companions(uow, proposal, batch_context, now, lease, log_fields)
            batch += companions
            if jobs:  # their jobs would only find them claimed: take them off the queue
                uow.after_commit(lambda: discard_delivery_jobs(jobs))
        uow.commit()
    return batch


def _claim_and_plan(uow, proposal: ActionProposal | None, now: datetime, lease: datetime, log_fields, batch=None):
    """Claim one proposal and plan its attempt in the claim's transaction.

    Returns:
        None when nothing was due; a `_Claimed` to send; or the `DeliveryOutcome` of
        a claim whose checks failed (recorded in this transaction: nothing leaves).
    """
    if proposal is None:
        return None
    held = _claim_loaded(uow.session, proposal, now, lease, uow)
    if held is None:
        return None
    attempt_number, cycle = held.attempt_number, held.delivery_cycle
    fields = dict(proposal_id=proposal.id, operation_id=proposal.operation_id, attempt=attempt_number, cycle=cycle)
    log_fields[proposal.id] = fields
    with bind(**fields):
        log.info("delivery attempt claimed")
        try:
            with uow.savepoint():
                plan = _plan(uow, proposal, attempt_number, now, batch)
        except Exception as caught:  # nothing leaves: claim and failure commit together
            error = caught if isinstance(caught, ActionError) else unexpected(caught, "checking")
            if isinstance(error, DeliveryChanged):
                _audit_delivery_changed(uow, proposal, error, attempt_number, cycle)
            return fail(uow, proposal.id, error, None, attempt_number, cycle, held.expires_at, [], sent=False)
    return _Claimed(proposal.identity, plan, attempt_number, cycle, held.expires_at)


def _audit_delivery_changed(uow, proposal: ActionProposal, error: DeliveryChanged, attempt: int, cycle: int) -> None:
    """The audit row of a delivery refused because what is in force is not what was
    approved (FOUR-5): the approved description and the current one."""
    uow.audit(
        proposal.installation_id,
        f"action-delivery-changed:{proposal.operation_id}:{cycle}:{attempt}",
        "action.delivery_changed",
        Actor.system(proposal.run_id),
        "action_proposal",
        proposal.id,
        {"attempt_number": attempt, "delivery_cycle": cycle, "approved": error.before, "in_force": error.after},
    )


def _batch_size() -> int:
    """``DELIVERY_BATCH_SIZE``: how many due proposals of one component version a job
    claims together (1: one per job)."""
    return max(1, int(current_app.config.get("DELIVERY_BATCH_SIZE", DEFAULT_BATCH_SIZE)))


def _batchable(first, head: ActionProposal) -> bool:
    """Others are taken along only behind an ordinary proposal's plain webhook
    attempt: not the half-open probe (CONN-1: exactly one request then), not a
    platform kind's attempt of several requests (PLAT-4), and not an appeal
    correction, compensation or reversal, whose checks span other proposals
    (CORR-3, TEMP-3): those go one per job."""
    if not isinstance(first, _Claimed) or _batch_size() == 1 or not _ordinary(head):
        return False
    plan = first.plan
    return not platforms.handles(plan.target.kind) and not (plan.gate is not None and plan.gate.probe)


def _ordinary(proposal: ActionProposal) -> bool:
    return not (proposal.is_correction or proposal.is_reversal or proposal.compensates_proposal_id)


def _claim_companions(uow, head: ActionProposal, batch: _Batch, now: datetime, lease: datetime, log_fields):
    """Claim and plan the other due proposals of `head`'s component version and
    installation, oldest due first, stopping at the first that its connection or a
    budget defers (DLV-1, DLV-3, CONN-1..3).

    Rows another worker is claiming are skipped, not waited for (``SKIP LOCKED``
    on PostgreSQL; SQLite's write lock serialises claims anyway).

    Returns:
        (the members: `_Claimed` or `DeliveryOutcome` as `_claim_and_plan`, the
        (id, cycle, attempts, due) of each claimed one, naming its waiting jobs).
    """
    rows = uow.session.scalars(companions_query(head, now, _batch_size() - 1)).all()
    members, jobs = [], []
    batch.snapshots.update(report_snapshots(uow.session, [p.report_id for p in rows]))  # PRE-1: one read for all
    for proposal in rows:
        waiting_job = (proposal.id, proposal.delivery_cycle, proposal.delivery_attempt_count, proposal.next_attempt_at)
        member = _claim_and_plan(uow, proposal, now, lease, log_fields, batch)
        if member is None:
            continue
        members.append(member)
        jobs.append(waiting_job)
        if isinstance(member, DeliveryOutcome) and member.error_code in DEFERRAL_CODES:
            break  # the connection or a budget holds the rest back: leave them unclaimed
    return members, jobs


def companions_query(head: ActionProposal, now: datetime, limit: int):
    """The SELECT … FOR UPDATE SKIP LOCKED of the due ordinary proposals a batch
    claim takes along behind `head` (DLV-1), oldest due first.

    Args:
        head: the proposal the job claimed; its installation and component version.
        now: the claim's time (UTC); only proposals due by then.
        limit: at most this many rows.

    It reads `ix_action_proposals_waiting` in order, so LIMIT ends the scan: the
    states are rendered inline (`predicates.due`), which the partial index needs.
    """
    return (
        select(P)
        .where(
            P.installation_id == head.installation_id,
            P.component_version_id == head.component_version_id,
            P.id != head.id,
            P.appeal_id.is_(None),
            P.reverses_proposal_id.is_(None),
            P.compensates_proposal_id.is_(None),
            predicates.due(now),
            P.accepted_at.is_(None),  # an accepted action waits for its confirmation deadline alone
        )
        .order_by(P.next_attempt_at, P.id)
        .limit(limit)
        .with_for_update(skip_locked=True)
    )


def _plan(uow, proposal: ActionProposal, attempt_number: int, now: datetime, batch: _Batch | None = None) -> _Plan:
    """Checks, budget reservation and the attempt row, in the claim's transaction."""
    target = _pre_send_checks(uow.session, proposal, now, batch)
    # CONN-1..3: an open breaker, a 429 pause, a disabled endpoint or the rate limit
    # defer the delivery here, before any budget is reserved (ConnectionHeld).
    gate = connection_health.admit(
        uow,
        target.connection_id,
        proposal.installation_id,
        target.health,
        target.timeout_seconds,
        now,
        read=batch.health if batch else None,
    )
    # FOUR-7: a reversal or an appeal correction undoes an action: never deferred for lack of budget
    undoing = not draws_on_budget(is_correction=proposal.is_correction, is_reversal=proposal.is_reversal)
    reservations = [] if undoing else budgets.reserve(
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
    return _Plan(target, body, attempt, reservations, gate)
