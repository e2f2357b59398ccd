"""Claim due proposals for one attempt each, alone or as a batch (SPEC DLV-1, DLV-3).

The database decides what is due: one UPDATE guarded on the row as read claims it
(the domain's `claim` decides), so duplicate or early jobs find nothing. Behind an
ordinary proposal the job takes along other due proposals of the same component
version (`companions_query`), all claimed and planned (`plan.plan_attempt`) in one
transaction.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from datetime import datetime

from flask import current_app
from sqlalchemy import select

from app.domain.proposal import delivery as delivery_rules
from app.domain.proposal.delivery import Lease
from app.domain.proposal.destination import DeliveryChanged
from app.domain.receipts import ProposalIdentity
from app.domain.errors import ActionError
from app.models import ActionProposal, move_loaded, predicates
from app.observability import bind
from app.queueing import discard_delivery_jobs
from app.services.cases.snapshot import report_snapshots
from app.services.lifecycle import platforms
from app.services.lifecycle.dispatch.plan import Batch, Plan, plan_attempt
from app.services.lifecycle.outcomes import DeliveryOutcome, fail, unexpected
from app.services.lifecycle.proposals import delivery_of, move_at_commit
from app.services.lifecycle.receipt_intake import DEFERRAL_CODES
from app.services.uow import Actor, unit_of_work

log = logging.getLogger(__name__)
P = ActionProposal
DEFAULT_BATCH_SIZE = 10


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
    change = delivery_rules.claim(current, now, lease_expires_at)
    if change is None:
        return None
    if uow is not None and not uow.savepoints:  # the row is locked (FOR UPDATE): the guard holds
        move_at_commit(uow, proposal, change.move, change.expect, change.values)
    elif not move_loaded(session, proposal, change.move, expect=change.expect, values=change.values):
        return None
    return delivery_rules.lease_of(change, current)


def take_lease(proposal_id: str, now: datetime, lease_expires_at: datetime | None = None) -> Lease | None:
    """Claim a proposal and commit, without delivering it (what a worker that died
    right after its claim leaves behind; tests and tooling use this)."""
    with unit_of_work() as uow:
        lease = claim(uow.session, proposal_id, now, lease_expires_at)
        uow.commit()
    return lease


@dataclass
class Claimed:
    """A proposal this job claimed and may send, as plain values (the rows expire at
    the claim's commit)."""

    identity: ProposalIdentity
    plan: Plan
    attempt_number: int
    cycle: int
    lease: datetime

    def bound(self):
        """Log lines name the proposal, operation, attempt and cycle."""
        identity = self.identity
        return bind(
            proposal_id=identity.action_id,
            operation_id=identity.operation_id,
            attempt=self.attempt_number,
            cycle=self.cycle,
        )


def claim_batch(proposal_id: str, now: datetime, lease: datetime, log_fields, savepoints: bool) -> list:
    """The claim transaction: the named proposal and, behind an ordinary one, the
    others of its component version this job takes along (DLV-1).

    Args:
        savepoints: False for the first try, where each member's checks and writes
            run without a savepoint (two round trips and a flush less each); any
            error then raises `RetryWithSavepoints` and nothing of the try is kept.

    Returns:
        The members (`Claimed` or the `DeliveryOutcome` of failed checks), empty
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
            batch_context = Batch(first.plan.target, first.plan.gate.health if first.plan.gate else None)
            companions, jobs = _claim_companions(uow, proposal, batch_context, now, lease, log_fields)
            batch += companions
            if jobs:  # their jobs would only find them claimed: take them off the queue
                uow.after_commit(lambda: discard_delivery_jobs(jobs))
        uow.commit()
    return batch


def _claim_and_plan(uow, proposal: ActionProposal | None, now: datetime, lease: datetime, log_fields, batch=None):
    """Claim one proposal and plan its attempt in the claim's transaction.

    Returns:
        None when nothing was due; a `Claimed` to send; or the `DeliveryOutcome` of
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
                plan = plan_attempt(uow, proposal, attempt_number, now, batch)
        except Exception as caught:  # nothing leaves: claim and failure commit together
            error = caught if isinstance(caught, ActionError) else unexpected(caught, "checking")
            if isinstance(error, DeliveryChanged):
                _audit_delivery_changed(uow, proposal, error, attempt_number, cycle)
            return fail(uow, proposal.id, error, None, attempt_number, cycle, held.expires_at, [], sent=False)
    return Claimed(proposal.identity, plan, attempt_number, cycle, held.expires_at)


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
    if not isinstance(first, Claimed) or _batch_size() == 1 or not _ordinary(head):
        return False
    plan = first.plan
    return not platforms.handles(plan.target.kind) and not (plan.gate is not None and plan.gate.probe)


def _ordinary(proposal: ActionProposal) -> bool:
    return not (proposal.is_correction or proposal.is_reversal or proposal.compensates_proposal_id)


def _claim_companions(uow, head: ActionProposal, batch: Batch, now: datetime, lease: datetime, log_fields):
    """Claim and plan the other due proposals of `head`'s component version and
    installation, oldest due first, stopping at the first that its connection or a
    budget defers (DLV-1, DLV-3, CONN-1..3).

    Rows another worker is claiming are skipped, not waited for (``SKIP LOCKED``
    on PostgreSQL; SQLite's write lock serialises claims anyway).

    Returns:
        (the members: `Claimed` or `DeliveryOutcome` as `_claim_and_plan`, the
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

