"""One approval over a batch, bound to its digest (SPEC BULK-3, BULK-4, FOUR-1).

At approval the selection is resolved again: a drift above the configured share
refuses the approval (``bulk_selection_drifted``) and nothing is written. Within it,
each item whose preconditions no longer hold, or that the selection no longer
names, is skipped with its code and never sent; the others are approved (one
approval row each, bound to the item's digest, DLV-2) and queued at once.
"""

from __future__ import annotations

from collections import Counter

from flask import current_app
from sqlalchemy import select, update

from app.domain.approval_policy import APPROVE, REJECT
from app.domain.bulk.batch import DRIFTED, Outcome, approval_verdict, checked_reason, drift_share, drifted
from app.domain.bulk.subjects import canonical_reference
from app.domain.case_states import BatchMove
from app.domain.clock import utcnow
from app.domain.errors import ActionError, ApiError
from app.domain.preconditions import check_preconditions
from app.domain.states import Move
from app.models import (
    ActionApproval,
    ActionProposal,
    BulkBatch,
    BulkItem,
    Decision,
    OperatorUser,
    move_batch_items,
    move_row,
    new_id,
)
from app.models.statements import insert_rows
from app.queueing import enqueue_deliveries
from app.services.bulk import batch_votes as votes_of
from app.services.bulk.actions import load_action
from app.services.bulk.dry_runs import classify_subjects, operator_cap, resolve_selection
from app.services.bulk.sources import SourceSubject
from app.services.bulk.submission import load_batch
from app.services.cases.snapshot import report_snapshots
from app.services.uow import Actor, unit_of_work

P = ActionProposal
SNAPSHOT_CHUNK = 1000  # report ids per snapshot query (a report-selected batch names one per item)


def batch_makers(session, batch: BulkBatch) -> set[str]:
    """Who made the batch or a decision in it (FOUR-1): its maker, the makers of the
    decisions its items enforce, and for an undo the makers of what it undoes."""
    makers = {batch.maker_id}
    decision_ids = select(P.decision_id).where(P.bulk_batch_id == batch.id, P.decision_id.is_not(None)).distinct()
    makers.update(session.scalars(select(Decision.maker_id).where(Decision.id.in_(decision_ids)).distinct()))
    if batch.undoes_batch_id:
        original = session.get(BulkBatch, batch.undoes_batch_id)
        if original is not None:
            makers |= {original.maker_id, original.approved_by} - {None}
    return makers


def _check_pending(session, batch: BulkBatch, operator: OperatorUser, digest: str, *, verdict: bool = True) -> None:
    if batch.state != "submitted":
        raise ApiError(409, "bulk_batch_not_pending", f"This bulk action is {batch.state}; it awaits no approval.")
    if digest != batch.batch_digest:
        raise ApiError(409, "bulk_batch_digest_mismatch", "This is not the batch you reviewed; reload it.")
    if batch.expires_at <= utcnow():
        raise ApiError(409, "bulk_batch_expired", "This batch's authorization expired; start a new dry run.")
    if not verdict:  # a policy other than the default decides who may vote (POL-1, POL-2)
        return
    verdict = approval_verdict(operator.id, operator.roles, batch_makers(session, batch), undo=batch.kind == "undo")
    if not verdict:
        raise ApiError(403, "bulk_approval_refused", verdict.reason)


def drift_now(session, batch: BulkBatch) -> tuple[float, dict[str, str]]:
    """How far the batch's selection drifted since its dry run, and the items it now
    skips (BULK-4). Reads only.

    The frozen subjects are classified again by where they stand (applied, under
    way or protected since: their action is the one checked by `load_action`, and
    their proposals exist with their payloads, so their mapping is not run again)
    and their proposals' preconditions checked; the selection is resolved again for
    subjects that would be new (a report that arrived since), each fully classified. Drift = the subjects in one set and not the other, over the
    frozen count. An undo's items are fixed when it is made (BULK-8): no drift.

    Returns:
        (share, proposal id -> (its subject, why it is skipped)).
    """
    if batch.kind != "enforce":
        return 0.0, {}
    action = load_action(session, batch.installation_id, f"{batch.workflow_version_id}:{batch.node_id}", batch.decision_code)
    rows = session.execute(select(BulkItem.subject_reference, BulkItem.kind, BulkItem.report_ids, BulkItem.line).where(
        BulkItem.batch_id == batch.id, BulkItem.outcome == Outcome.WOULD_ACT.value).order_by(BulkItem.position)).all()
    frozen = [SourceSubject(r.subject_reference, r.kind, tuple(r.report_ids), r.line) for r in rows]
    names = {"public_reference": batch.public_reference, "maker_id": batch.maker_id, "exclude_batch_id": batch.id}
    changed = {canonical_reference(c.subject.reference): c.detail for c in classify_subjects(
        session, batch.installation_id, action, frozen, mapping=False, **names) if c.outcome != Outcome.WOULD_ACT}
    skips = _skips(session, batch, changed)
    subjects = {canonical_reference(s.reference) for s in frozen}  # as proposals store them
    acting = subjects - set(changed) - {reference for reference, _ in skips.values()}
    acting |= _new_subjects(session, batch, action, subjects, names)
    return drift_share(subjects, acting), skips


def _new_subjects(session, batch: BulkBatch, action, frozen: set[str], names: dict) -> set[str]:
    """Subjects the selection names now that its dry run did not, and would act on."""
    try:
        resolved = resolve_selection(session, batch.installation_id, batch.selection, max(batch.item_count, 1) * 2 + 1000)
    except ApiError as error:
        if error.code == "bulk_selection_empty":
            return set()
        raise ApiError(409, DRIFTED, f"The selection cannot be resolved again ({error.code}); start a new dry run.") from error
    fresh = [s for s in resolved if canonical_reference(s.reference) not in frozen]
    return {canonical_reference(c.subject.reference) for c in classify_subjects(session, batch.installation_id, action, fresh, **names)
            if c.outcome == Outcome.WOULD_ACT}


def _skips(session, batch: BulkBatch, changed: dict[str, str]) -> dict[str, tuple[str, str]]:
    """Proposal id -> (its subject, why it is skipped) (BULK-4): its subject changed
    (applied, under way or protected since), or a precondition no longer holds (its
    PRE code)."""
    rows = session.execute(select(P.id, P.report_id, P.preconditions, P.target_reference).where(
        P.bulk_batch_id == batch.id, P.state == "approval_required")).all()
    report_ids = sorted({row.report_id for row in rows})
    snapshots = {}
    for start in range(0, len(report_ids), SNAPSHOT_CHUNK):
        snapshots.update(report_snapshots(session, report_ids[start : start + SNAPSHOT_CHUNK]))
    skips = {}
    for row in rows:
        if row.target_reference in changed:
            skips[row.id] = (row.target_reference, changed[row.target_reference])
            continue
        try:
            snapshot = snapshots.get(row.report_id)
            if snapshot is None:
                raise ActionError("action_report_missing")
            check_preconditions(row.preconditions, snapshot)
        except ActionError as error:
            skips[row.id] = (row.target_reference, error.code)
    return skips


def approve_batch(operator: OperatorUser, batch_id: str, digest: str) -> dict[str, int]:
    """Approve a submitted batch by its digest (BULK-3, BULK-4, BULK-5, FOUR-1, POL-1, POL-2).

    The approval is the operator's vote under the policies recorded on the batch;
    when it is the one that releases them (with the default policy: at once), the
    batch's approval runs: the selection is resolved again, items skipped, the rest
    approved and queued.

    Args:
        operator: a reviewer who made neither the batch nor a decision in it (under
            a policy: one a factor admits).
        digest: the batch digest the reviewer saw.

    Returns:
        {"approved": n, "skipped": m}; while the policy still waits for others,
        {"approved": 0, "skipped": 0, "waiting": "1 of 2 peers, 0 of 1 lead"}.

    Raises:
        ApiError: 404; 403 ``bulk_approval_refused`` (makers, role; default policy)
            or the vote refusals of `batch_votes.check_vote` (POL-2), or
            ``bulk_selection_over_cap``; 409 ``bulk_selection_drifted``, a changed
            digest, an expired or no longer pending batch. Nothing is written then.
    """
    with unit_of_work() as uow:
        session = uow.session
        batch = load_batch(session, operator, batch_id, lock=True)
        default = votes_of.is_default(votes_of.policies_of_batch(batch))
        _check_pending(session, batch, operator, digest, verdict=default)
        if batch.item_count > operator_cap(session, operator):
            raise ApiError(403, "bulk_selection_over_cap", "This batch is over your role's cap of items per batch.")
        if not _vote(uow, batch, operator, APPROVE, None):
            uow.commit()
            return {"approved": 0, "skipped": 0, "waiting": _waiting_words(session, batch)}
        result = _release(uow, batch, operator)
        uow.commit()
    return result


def _vote(uow, batch: BulkBatch, operator: OperatorUser, decision: str, reason: str | None) -> bool:
    """Record the operator's vote (POL-2) and say whether it decides the batch: it
    releases it (an approval) or vetoes every alternative (a rejection). With the
    default policy the one vote always decides."""
    session, now = uow.session, utcnow()
    makers = batch_makers(session, batch)
    votes = votes_of.batch_votes(session, batch)
    if not votes_of.is_default(votes_of.policies_of_batch(batch)):
        votes_of.check_vote(batch, votes, operator, decision, makers, now, reason)
    row = votes_of.new_vote(batch, votes, operator, decision, reason, makers, now)
    session.add(row)
    session.flush()
    after = votes_of.standing_of(batch, votes_of.batch_votes(session, batch), makers, now)
    decided = after.released_by is not None if decision == APPROVE else after.vetoed
    if not decided:
        uow.audit(batch.installation_id, f"bulk-vote:{row.id}", "bulk.vote", Actor("operator", operator.id),
                  "bulk_batch", batch.id, {"batch_digest": batch.batch_digest, "decision": decision,
                                           "policy": row.policy_key, "factor": row.factor_key,
                                           "standing": after.in_words()})
    return decided


def _waiting_words(session, batch: BulkBatch) -> str:
    return votes_of.standing_of(batch, votes_of.batch_votes(session, batch), batch_makers(session, batch),
                                utcnow()).in_words()


def _release(uow, batch: BulkBatch, operator: OperatorUser) -> dict[str, int]:
    """The batch's one approval (BULK-3, BULK-4): drift check, skips, items approved
    and queued after commit. Raises as `approve_batch`."""
    session = uow.session
    share, skipped = drift_now(session, batch)
    skips = {pid: code for pid, (_, code) in skipped.items()}
    limit = current_app.config["BULK_DRIFT_SHARE"]
    if drifted(share, limit):
        raise ApiError(409, DRIFTED, f"The selection changed by {share:.0%} since the dry run (more than {limit:.0%}); "
                                     "start a new dry run.")
    now = utcnow()
    for code in sorted(set(skips.values())):
        ids = [pid for pid, c in skips.items() if c == code]
        move_batch_items(session, batch.id, Move.CANCEL_SCHEDULED, ids=ids, values={"last_error_code": code})
    by_item = skips
    if by_item:
        items = session.execute(select(BulkItem.id, BulkItem.proposal_id).where(
            BulkItem.batch_id == batch.id, BulkItem.proposal_id.in_(list(by_item)))).all()
        session.execute(update(BulkItem),
                        [{"id": i.id, "skip_code": by_item[i.proposal_id]} for i in items])
    approved = session.execute(select(P.id, P.payload_digest, P.delivery_cycle, P.delivery_attempt_count).where(
        P.bulk_batch_id == batch.id, P.state == "approval_required")).all()
    if approved:
        insert_rows(session, ActionApproval, [
            dict(id=new_id("apv"), installation_id=batch.installation_id, proposal_id=row.id, task_id=None,
                 approver_id=operator.id, payload_digest=row.payload_digest, decision="approved",
                 reason=f"bulk {batch.public_reference}", idempotency_key=f"bulk:{batch.id}:{row.id}"[:200], created_at=now)
            for row in approved])
    move_batch_items(session, batch.id, Move.APPROVE, then=Move.ENQUEUE_APPROVED, values={"next_attempt_at": now})
    if not move_row(session, batch, BatchMove.APPROVE, values=dict(approved_by=operator.id, approved_at=now,
                                                                   drift_share=share)):
        raise ApiError(409, "bulk_batch_not_pending", "This bulk action changed meanwhile; reload it.")
    uow.audit(batch.installation_id, f"bulk-approved:{batch.id}", "bulk.approved", Actor("operator", operator.id),
              "bulk_batch", batch.id, {"batch_digest": batch.batch_digest, "drift_share": round(share, 4),
                                       "approved": len(approved), "skipped": dict(Counter(skips.values()))})
    jobs = [(row.id, row.delivery_cycle, row.delivery_attempt_count) for row in approved]
    uow.after_commit(lambda: enqueue_deliveries(jobs))
    return {"approved": len(approved), "skipped": len(skips)}


def reject_batch(operator: OperatorUser, batch_id: str, digest: str, reason: str) -> str:
    """Reject a submitted batch (BULK-3, POL-1): the operator's rejection is their
    vote; when it vetoes every alternative policy (with the default policy: at once,
    by a reviewer other than its makers) every item is rejected and nothing is sent.

    Returns:
        ``rejected``, or ``recorded`` when the rejection does not veto the batch yet
        (a factor whose deny count is above one).

    Raises:
        ApiError: as `approve_batch`; 400 ``bulk_reason_invalid`` without a reason
            (default policy) or ``action_decision_reason_required`` (a policy that
            needs one).
    """
    with unit_of_work() as uow:
        session = uow.session
        batch = load_batch(session, operator, batch_id, lock=True)
        default = votes_of.is_default(votes_of.policies_of_batch(batch))
        if default:
            reason = checked_reason(reason, "rejected")
        elif (reason or "").strip():
            reason = checked_reason(reason, "rejected")
        _check_pending(session, batch, operator, digest, verdict=default)
        if not _vote(uow, batch, operator, REJECT, reason or None):
            uow.commit()
            return "recorded"
        rejected = move_batch_items(session, batch.id, Move.REJECT, values={"last_error_code": "bulk_batch_rejected"})
        if not move_row(session, batch, BatchMove.REJECT, values=dict(ended_by=operator.id, finished_at=utcnow())):
            raise ApiError(409, "bulk_batch_not_pending", "This bulk action changed meanwhile; reload it.")
        uow.audit(batch.installation_id, f"bulk-rejected:{batch.id}", "bulk.rejected", Actor("operator", operator.id),
                  "bulk_batch", batch.id, {"batch_digest": batch.batch_digest, "items": rejected, "reason": reason})
        uow.commit()
    return "rejected"
