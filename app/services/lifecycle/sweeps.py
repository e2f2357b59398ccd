"""Periodic sweeps that repair what jobs and wake-ups left undone (SPEC EVT-3).

Scheduled by RQ's cron scheduler (see worker.py), which has no lock: two sweeps may
run at once. Every step is safe for that: enqueueing is deduplicated by job id and
the database claim; state changes are guarded UPDATEs; events are written once by
their deterministic ids.
"""

from __future__ import annotations

import logging
from dataclasses import asdict, dataclass
from datetime import timedelta

from sqlalchemy import String, and_, case, cast, exists, or_, select

from app.domain.case_states import CorrectionState
from app.domain.clock import utcnow
from app.domain.proposal import delivery as delivery_rules
from app.domain.states import ProposalState
from app.models import (
    ActionProposal,
    SweepRun,
    WorkflowDispatchOutbox,
    WorkflowEventInbox,
    WorkflowRun,
    move_proposal,
    predicates,
)
from app.queueing import enqueue_delivery
from app.services.audit import write_due_checkpoints
from app.services.cases.erasure import erase_due_retention
from app.services.dsa.sweep import submit_due_statements
from app.services.lifecycle.events import emit_delivery_resolution
from app.services.lifecycle.proposals import delivery_of, guard
from app.services.lifecycle.reversals import create_missing_reversals
from app.services.lifecycle.runs import dispatch, time_out_run
from app.services.uow import Actor, unit_of_work

log = logging.getLogger(__name__)
S = ProposalState
P = ActionProposal
BATCH = 500
PENDING_GRACE_SECONDS = 30  # an inline wake-up gets this long before the sweep retries it


@dataclass
class SweepCounts:
    deliveries_enqueued: int = 0
    confirmations_timed_out: int = 0
    resolutions_emitted: int = 0
    dispatches_retried: int = 0
    runs_timed_out: int = 0
    corrections_reconciled: int = 0
    audit_checkpoints_written: int = 0
    reversals_created: int = 0
    probes_scheduled: int = 0
    bulk_batches_completed: int = 0
    bulk_batches_expired: int = 0
    retention_rows_erased: int = 0
    approval_notices_sent: int = 0
    statements_submitted: int = 0


def due_query(now, limit: int = BATCH):
    """Proposals a worker could claim now (DLV-1): the sweep's query."""
    return (
        select(P.id, P.delivery_cycle, P.delivery_attempt_count)
        .where(predicates.claimable(now))
        .order_by(P.next_attempt_at, P.id)
        .limit(limit)
    )


def due_proposals(now, limit: int = BATCH) -> list[tuple[str, int, int]]:
    """(id, cycle, attempts) of proposals a worker could claim now (DLV-1)."""
    from app.extensions import db

    rows = db.session.execute(due_query(now, limit)).all()
    db.session.rollback()
    return [tuple(row) for row in rows]


def enqueue_due_deliveries(now) -> int:
    count = 0
    for proposal_id, cycle, attempts in due_proposals(now):
        count += enqueue_delivery(proposal_id, cycle, attempts, tag="s")
    return count


def schedule_overdue_probes(now) -> int:
    """Schedule the probe job of every connection whose half-open probe is due
    (OPS-7, CONN-1): the job scheduled when the breaker opened may have been lost
    with Redis, and only where a delivery waits. A job already waiting is not added
    again (its id names the probe's due time)."""
    from app.extensions import db
    from app.queueing import enqueue_probe
    from app.services.lifecycle.connection_recovery import overdue_probes

    overdue = overdue_probes(db.session, now)
    db.session.rollback()
    return sum(1 for connection_id, due_at in overdue if enqueue_probe(connection_id, due_at))


def time_out_confirmations(now) -> int:
    """Fail accepted actions whose confirmation deadline passed (RCPT-2, EVT-3)."""
    from app.extensions import db

    ids = db.session.scalars(
        select(P.id)
        .where(
            P.delivery_terminal.is_(False),
            P.state == S.QUEUED,
            P.accepted_at.is_not(None),
            P.confirmation_deadline_at <= now,
        )
        .limit(BATCH)
    ).all()
    db.session.rollback()
    count = 0
    for proposal_id in ids:
        with unit_of_work() as uow:
            proposal = uow.session.get(P, proposal_id)
            change = delivery_rules.confirmation_timeout(delivery_of(proposal), now)
            if change is None or not move_proposal(
                uow.session, proposal_id, change.move, where=guard(change), values=change.values
            ):
                continue
            uow.session.refresh(proposal)
            uow.audit(
                proposal.installation_id,
                f"action-confirmation-timed-out:{proposal.operation_id}:{proposal.delivery_cycle}",
                "action.confirmation_timed_out",
                Actor.system("sweep"),
                "action_proposal",
                proposal.id,
                {"delivery_cycle": proposal.delivery_cycle, "accepted_at": proposal.accepted_at.isoformat()},
            )
            emit_delivery_resolution(uow, proposal)
            uow.commit()
            count += 1
    return count


def _resolution_id_sql():
    suffix = case((P.delivery_cycle > 1, ":" + cast(P.delivery_cycle, String)), else_="")
    return P.id + ":delivery-resolution" + suffix


def emit_missing_resolutions() -> int:
    """Emit resolution events that a crashed worker did not write (EVT-3). A bulk
    item's resolution tells its batch, not a run (`complete_idle_batches`)."""
    from app.extensions import db

    resolved = predicates.resolved()
    written = exists().where(WorkflowEventInbox.id == _resolution_id_sql())
    ids = db.session.scalars(
        select(P.id).where(P.appeal_id.is_(None), P.bulk_batch_id.is_(None), resolved, ~written).order_by(P.updated_at, P.id).limit(BATCH)
    ).all()
    db.session.rollback()
    for proposal_id in ids:
        with unit_of_work() as uow:
            proposal = uow.session.get(P, proposal_id)
            uow.session.refresh(proposal)
            emit_delivery_resolution(uow, proposal)
            uow.commit()
    return len(ids)


def reconcile_corrections() -> int:
    """Finish appeal corrections whose proposal resolved without reconciling (CORR-4)."""
    from app.extensions import db
    from app.models import AppealCorrection
    from app.services.lifecycle.corrections import reconcile_appeal_completion

    resolved = predicates.terminal()
    report_ids = db.session.scalars(
        select(AppealCorrection.report_id)
        .distinct()
        .join(P, P.id == AppealCorrection.proposal_id)
        .where(AppealCorrection.state == CorrectionState.PROPOSED, resolved)
        .limit(BATCH)
    ).all()
    db.session.rollback()
    for report_id in report_ids:
        with unit_of_work() as uow:
            reconcile_appeal_completion(uow, report_id)
            uow.commit()
    return len(report_ids)


def retry_dispatches(now) -> int:
    """Retry wake-ups that failed, or that no one delivered in time (EVT-2)."""
    from app.extensions import db

    stale = now - timedelta(seconds=PENDING_GRACE_SECONDS)
    ids = db.session.scalars(
        select(WorkflowDispatchOutbox.id)
        .where(
            or_(
                and_(WorkflowDispatchOutbox.state == "failed", WorkflowDispatchOutbox.available_at <= now),
                and_(WorkflowDispatchOutbox.state == "pending", WorkflowDispatchOutbox.available_at <= stale),
            )
        )
        .order_by(WorkflowDispatchOutbox.available_at)
        .limit(BATCH)
    ).all()
    db.session.rollback()
    for dispatch_id in ids:
        dispatch(dispatch_id)
    return len(ids)


def time_out_runs(now) -> int:
    """Resume runs whose wait passed its deadline (WAIT-2)."""
    from app.extensions import db

    ids = db.session.scalars(
        select(WorkflowRun.id).where(WorkflowRun.state == "waiting", WorkflowRun.wait_deadline_at <= now).limit(BATCH)
    ).all()
    db.session.rollback()
    return sum(1 for run_id in ids if time_out_run(run_id))


def complete_idle_batches() -> int:
    """Complete running bulk batches none of whose items is open (BULK-6): the check
    after an item's commit may have been lost with its worker. Guarded
    (`progress.complete_batch`): two sweeps at once complete a batch once."""
    from app.extensions import db
    from app.services.bulk.controls import idle_running_batches
    from app.services.bulk.progress import complete_batch

    ids = idle_running_batches(db.session, BATCH)
    db.session.rollback()
    return sum(1 for batch_id in ids if complete_batch(batch_id))


def expire_bulk_batches(now) -> int:
    """Expire dry runs and submitted batches past their time (BULK-2, BULK-3):
    a submitted batch's items are cancelled and its run ends (`controls.expire_batch`)."""
    from app.extensions import db
    from app.services.bulk.controls import expirable_batches, expire_batch

    ids = expirable_batches(db.session, now, BATCH)
    db.session.rollback()
    return sum(1 for batch_id in ids if expire_batch(batch_id))


def send_approval_notices(now) -> int:
    """Send the approval notices that are due (POL-7): the catch-up for a lost job."""
    from app.services.approval_notices import send_pending_notices

    return send_pending_notices(now)


def run_sweeps() -> SweepCounts:
    """Run every sweep once and record it for the operations screen."""
    started = utcnow()
    counts = SweepCounts()
    error = None
    try:
        counts.confirmations_timed_out = time_out_confirmations(started)
        counts.runs_timed_out = time_out_runs(started)
        counts.resolutions_emitted = emit_missing_resolutions()
        counts.corrections_reconciled = reconcile_corrections()
        counts.dispatches_retried = retry_dispatches(started)
        counts.reversals_created = create_missing_reversals(started)  # TEMP-2: then enqueued below when due
        counts.bulk_batches_completed = complete_idle_batches()  # BULK-6
        counts.bulk_batches_expired = expire_bulk_batches(started)  # BULK-2
        counts.deliveries_enqueued = enqueue_due_deliveries(utcnow())
        counts.probes_scheduled = schedule_overdue_probes(utcnow())  # OPS-7
        counts.retention_rows_erased = erase_due_retention(started)  # OPS-4
        counts.approval_notices_sent = send_approval_notices(utcnow())  # POL-7: what a lost job left
        counts.statements_submitted = submit_due_statements()  # DSA-3
        counts.audit_checkpoints_written = write_due_checkpoints()  # REC-4
    except Exception as exc:
        log.exception("sweep failed")
        error = f"{type(exc).__name__}: {exc}"[:500]
    with unit_of_work() as uow:
        uow.session.add(SweepRun(started_at=started, finished_at=utcnow(), counts=asdict(counts), error=error))
        uow.commit()
    if error:
        raise RuntimeError(error)
    return counts
