"""A batch's ledger and its end (SPEC BULK-6): every item counted in exactly one
bucket, read from its proposal; a batch whose items are all resolved completes, and
its run ends with it.
"""

from __future__ import annotations

from sqlalchemy import and_, case, exists, func, literal, select

from app.domain.bulk.batch import Ledger, ledger_of
from app.domain.case_states import BatchMove, BatchState, RunMove
from app.domain.clock import utcnow
from app.models import ActionProposal, BulkBatch, BulkItem, WorkflowRun, move_by_id, move_row, predicates
from app.services.uow import Actor, UnitOfWork, unit_of_work

P = ActionProposal


def ledger(session, batch: BulkBatch) -> Ledger:
    """The batch's ledger now (BULK-6): one grouped query over its items and their
    proposals; an item skipped at submission has no proposal."""
    if batch.state in (BatchState.DRY_RUN, BatchState.EXPIRED) and batch.batch_digest is None:
        return Ledger({}, 0)
    return ledger_of(session.execute(ledger_rows(BulkItem.batch_id == batch.id)).all(), batch.item_count)


def ledger_rows(*where, by_batch: bool = False):
    """The grouped SELECT a ledger is read from (BULK-6): (state, terminal, sent 0/1,
    skip code, count) over the acting items `where` selects (of one batch, or of
    every unfinished batch for the metrics); `ledger_of` buckets them. With
    `by_batch`, each row starts with its batch id (a list of batches, one query)."""
    sent = case((P.delivery_attempt_count > 0, 1), else_=0)
    keys = [BulkItem.batch_id] if by_batch else []
    return (
        select(
            *keys,
            func.coalesce(P.state, literal("cancelled")),
            func.coalesce(P.delivery_terminal, literal(True)),
            func.coalesce(sent, 0),
            BulkItem.skip_code,
            func.count(),
        )
        .select_from(BulkItem)
        .outerjoin(P, P.id == BulkItem.proposal_id)
        .where(BulkItem.outcome == "would_act", *where)
        .group_by(*keys, P.state, P.delivery_terminal, sent, BulkItem.skip_code)
    )


def has_open_items(session, batch_id: str) -> bool:
    """Whether an item of the batch is not yet resolved: awaiting, waiting, being
    sent (`predicates.terminal` is the proposal's own rule)."""
    return session.scalar(select(exists().where(P.bulk_batch_id == batch_id, ~predicates.terminal()))) or False


def item_resolved(uow: UnitOfWork, proposal: ActionProposal) -> None:
    """An item's delivery resolved (DLV-7 for a batch): once this commits, the batch
    completes if it was the last. After the commit, because a batch claim writes its
    outcomes at commit; the sweep completes any batch a race left running."""
    batch_id = proposal.bulk_batch_id
    pending = uow.__dict__.setdefault("_bulk_batches_to_check", set())
    if batch_id in pending:
        return
    pending.add(batch_id)
    uow.after_commit(lambda: complete_batch(batch_id))


def complete_batch(batch_id: str) -> bool:
    """`complete_if_done` in its own unit of work (after an item's commit, the sweep)."""
    with unit_of_work() as uow:
        done = complete_if_done(uow, batch_id)
        uow.commit()
    return done


def complete_if_done(uow: UnitOfWork, batch_id: str) -> bool:
    """Complete a running batch none of whose items is open (BULK-6), and end its run.

    Returns:
        True when this call completed it.
    """
    session = uow.session
    batch = session.get(BulkBatch, batch_id)
    if batch is None or batch.state != BatchState.RUNNING or has_open_items(session, batch_id):
        return False
    if not move_row(session, batch, BatchMove.COMPLETE, values={"finished_at": utcnow()}):
        return False
    end_run(session, batch)
    uow.audit(batch.installation_id, f"bulk-completed:{batch.id}", "bulk.completed", Actor.system(batch.id),
              "bulk_batch", batch.id, {"batch_digest": batch.batch_digest})
    return True


def end_run(session, batch: BulkBatch) -> None:
    """The batch's run ends with it (it waited for the batch, not for an event)."""
    run_id = session.scalar(select(WorkflowRun.id).where(and_(WorkflowRun.report_id == batch.report_id,
                                                              WorkflowRun.trigger_key == f"bulk:{batch.id}")))
    if run_id is not None and move_by_id(session, WorkflowRun, run_id, RunMove.RESUME):
        move_by_id(session, WorkflowRun, run_id, RunMove.COMPLETE, values={"finished_at": utcnow(),
                                                                           "outcome_port": batch.state})
