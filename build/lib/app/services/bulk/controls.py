"""Pause, resume and cancel a running batch; expire one that waited too long
(SPEC BULK-7, BULK-9, FOUR-9).

Pause holds the batch's waiting items where they are (queued, or failed waiting to
be retried: no due time, ``bulk_batch_paused``); what is in flight finishes, and a
claim of a held or retried item while the batch is paused or cancelled sends
nothing (`app.services.lifecycle.dispatch.plan`). Resume makes the held items due
now. Cancel ends every item not in flight in a definite state: cancelled when
nothing was ever sent, failed for good when it was sent before; what is in flight
finishes as it will, so the ledger never counts an item unknown. Each step is one
guarded batch move, audited with the batch digest.
"""

from __future__ import annotations

from sqlalchemy import select

from app.domain.bulk.batch import checked_reason
from app.domain.case_states import BatchMove, BatchState
from app.domain.clock import utcnow
from app.domain.errors import ApiError
from app.domain.proposal.delivery import BULK_CANCELLED, BULK_PAUSED
from app.domain.states import Move
from app.models import ActionProposal, BulkBatch, OperatorUser, move_batch_items, move_row, new_id, predicates
from app.queueing import enqueue_deliveries
from app.services.bulk.progress import end_run, ledger
from app.services.bulk.submission import load_batch
from app.services.uow import Actor, UnitOfWork, unit_of_work

P = ActionProposal
CONTROL_ROLES = frozenset({"moderator", "reviewer", "admin"})  # who may pause and resume (BULK-7)
CANCEL_ROLE = "reviewer"  # FOUR-9 for a batch: a reviewer who is not its maker
EXPIRED = "bulk_batch_expired"
HOLDS = {Move.HOLD_QUEUED: P.state == "queued", Move.HOLD_FAILED: P.state == "failed"}


def _waiting_unaccepted() -> tuple:
    """Items that wait to be sent (again): queued or failed, not terminal, nothing
    accepted (an accepted action awaits its confirmation: in flight)."""
    return (predicates.waiting(), P.accepted_at.is_(None))


def _audit(uow: UnitOfWork, batch: BulkBatch, action: str, actor: Actor, details: dict) -> None:
    uow.audit(batch.installation_id, f"{action}:{batch.id}:{new_id('evt')}", action, actor, "bulk_batch", batch.id,
              {"batch_digest": batch.batch_digest, **details})


def _check_control(operator: OperatorUser) -> None:
    if not CONTROL_ROLES & set(operator.roles):
        raise ApiError(403, "bulk_control_refused", "Pausing or resuming a bulk action needs the moderator, "
                                                    "reviewer or admin role.")


def _moved(session, operator: OperatorUser, batch_id: str, move: BatchMove, code: str, which: str) -> BulkBatch:
    """Load the operator's batch and make its guarded `move`, or refuse with 409 `code`
    (only `which` may take it)."""
    batch = load_batch(session, operator, batch_id, lock=True)
    if not move_row(session, batch, move):
        raise ApiError(409, code, f"This bulk action is {batch.state}; only {which} can be {move.value}d.")
    return batch


def pause_batch(operator: OperatorUser, batch_id: str) -> int:
    """Pause a running batch (BULK-7): its waiting items are held in their state
    (queued, or failed waiting to be retried) with no due time and
    ``bulk_batch_paused``; items in flight finish as they will.

    Args:
        operator: a moderator, reviewer or admin of the batch's installation.
        batch_id: the batch (``blk_…``).

    Returns:
        How many items were held.

    Raises:
        ApiError: 404 ``bulk_batch_not_found``; 403 ``bulk_control_refused``;
            409 ``bulk_batch_not_running``. Nothing is written then.
    """
    _check_control(operator)
    with unit_of_work() as uow:
        session = uow.session
        batch = _moved(session, operator, batch_id, BatchMove.PAUSE, "bulk_batch_not_running", "a running one")
        held = sum(move_batch_items(session, batch.id, move, where=(state, *_waiting_unaccepted()),
                                    values={"next_attempt_at": None, "last_error_code": BULK_PAUSED})
                   for move, state in HOLDS.items())
        _audit(uow, batch, "bulk.paused", Actor("operator", operator.id), {"held": held})
        uow.commit()
    return held


def resume_batch(operator: OperatorUser, batch_id: str) -> int:
    """Resume a paused batch (BULK-7): its held items are due now and enqueued.

    Args:
        operator: a moderator, reviewer or admin of the batch's installation.

    Returns:
        How many items were made due.

    Raises:
        ApiError: 404 ``bulk_batch_not_found``; 403 ``bulk_control_refused``;
            409 ``bulk_batch_not_paused``. Nothing is written then.
    """
    _check_control(operator)
    with unit_of_work() as uow:
        session = uow.session
        batch = _moved(session, operator, batch_id, BatchMove.RESUME, "bulk_batch_not_paused", "a paused one")
        held = (P.next_attempt_at.is_(None), P.last_error_code == BULK_PAUSED, *_waiting_unaccepted())
        rows = session.execute(select(P.id, P.delivery_cycle, P.delivery_attempt_count)
                               .where(P.bulk_batch_id == batch.id, *held)).all()
        now = utcnow()
        for move, state in HOLDS.items():
            move_batch_items(session, batch.id, move, ids=[row.id for row in rows], where=(state, *held),
                             values={"next_attempt_at": now, "last_error_code": None})
        _audit(uow, batch, "bulk.resumed", Actor("operator", operator.id), {"due": len(rows)})
        jobs = [tuple(row) for row in rows]
        uow.after_commit(lambda: enqueue_deliveries(jobs))
        uow.commit()
    return len(rows)


def cancel_batch(operator: OperatorUser, batch_id: str, reason: str) -> dict[str, int]:
    """Cancel a running or paused batch (BULK-7, FOUR-9): every item never sent is
    cancelled, every item sent before and waiting to be sent again fails for good
    (both with ``bulk_batch_cancelled``); items in flight (being sent, or accepted
    and awaiting confirmation) finish as they will. The batch's run ends.

    Args:
        operator: a reviewer who is not the batch's maker.
        reason: why, 3 to 5,000 characters.

    Returns:
        {"cancelled": n, "failed": m, "in_flight": k}.

    Raises:
        ApiError: 400 ``bulk_reason_invalid``; 404 ``bulk_batch_not_found``;
            403 ``bulk_cancel_refused`` (role, or the batch's maker);
            409 ``bulk_batch_not_cancellable``. Nothing is written then.
    """
    reason = checked_reason(reason, "cancelled")
    with unit_of_work() as uow:
        session = uow.session
        batch = load_batch(session, operator, batch_id, lock=True)
        if CANCEL_ROLE not in operator.roles:
            raise ApiError(403, "bulk_cancel_refused", "Cancelling an approved bulk action needs the reviewer role.")
        if batch.maker_id == operator.id:
            raise ApiError(403, "bulk_cancel_refused", "You started this bulk action; a second reviewer must "
                                                       "cancel it.")
        if not move_row(session, batch, BatchMove.CANCEL, values={"ended_by": operator.id, "finished_at": utcnow()}):
            raise ApiError(409, "bulk_batch_not_cancellable", f"This bulk action is {batch.state}; only a running "
                                                              "or paused one can be cancelled.")
        ended = {"next_attempt_at": None, "lease_expires_at": None, "last_error_code": BULK_CANCELLED}
        cancelled = move_batch_items(session, batch.id, Move.CANCEL_SCHEDULED, values=ended,
                                     where=(P.delivery_attempt_count == 0, P.accepted_at.is_(None)))
        failed = move_batch_items(session, batch.id, Move.BULK_CANCEL_SENT, values={**ended, "delivery_terminal": True},
                                  where=(P.delivery_attempt_count > 0, *_waiting_unaccepted()))
        end_run(session, batch)
        in_flight = ledger(session, batch).open
        _audit(uow, batch, "bulk.cancelled", Actor("operator", operator.id),
               {"reason": reason, "cancelled": cancelled, "failed": failed, "in_flight": in_flight})
        uow.commit()
    return {"cancelled": cancelled, "failed": failed, "in_flight": in_flight}


def expire_batch(batch_id: str) -> bool:
    """Expire a dry run or a submitted batch past its ``expires_at`` (BULK-2, BULK-3):
    a submitted batch's items are cancelled (``bulk_batch_expired``) and its run
    ends. Guarded: safe when two sweeps run at once.

    Returns:
        True when this call expired it.
    """
    with unit_of_work() as uow:
        session = uow.session
        batch = session.get(BulkBatch, batch_id)
        if batch is None or batch.state not in (BatchState.DRY_RUN, BatchState.SUBMITTED):
            return False
        was = batch.state
        if batch.expires_at > utcnow() or not move_row(session, batch, BatchMove.EXPIRE,
                                                       where=(BulkBatch.expires_at <= utcnow(),),
                                                       values={"finished_at": utcnow()}):
            return False
        items = 0
        if was == BatchState.SUBMITTED:
            items = move_batch_items(session, batch.id, Move.CANCEL_SCHEDULED, values={"last_error_code": EXPIRED})
            end_run(session, batch)
        uow.audit(batch.installation_id, f"bulk-expired:{batch.id}", "bulk.expired", Actor.system("sweep"),
                  "bulk_batch", batch.id, {"batch_digest": batch.batch_digest, "dry_run_digest": batch.dry_run_digest,
                                           "was": str(was), "items_cancelled": items})
        uow.commit()
    return True


def expirable_batches(session, now, limit: int = 500) -> list[str]:
    """Ids of dry runs and submitted batches past their ``expires_at`` (BULK-2)."""
    return list(session.scalars(select(BulkBatch.id).where(
        BulkBatch.state.in_([BatchState.DRY_RUN.value, BatchState.SUBMITTED.value]), BulkBatch.expires_at <= now)
        .order_by(BulkBatch.expires_at).limit(limit)))


def idle_running_batches(session, limit: int = 500) -> list[str]:
    """Ids of running batches none of whose items is open (BULK-6): what a lost
    after-commit check left running."""
    open_item = select(P.id).where(P.bulk_batch_id == BulkBatch.id, ~predicates.terminal()).exists()
    return list(session.scalars(select(BulkBatch.id).where(BulkBatch.state == BatchState.RUNNING.value, ~open_item)
                                .order_by(BulkBatch.updated_at).limit(limit)))
