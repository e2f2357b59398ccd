"""Undo a batch: one compensation batch for the items it applied, under four-eyes
like the original (SPEC BULK-8, COMP-1..3, FOUR-1).

The undo is made at once in ``submitted``: its item list is fixed now (no dry run),
each acting item a compensation of the original item's proposal, built as a single
compensation is (`identity.compensation_proposal`: human approval, 24 h expiry, the
digest covering what it compensates) but approved through the batch
(`batch_approval.approve_batch`, which counts the original's maker and approver
among its makers). What compensates is the action node's ``correction`` (the
action that undoes it, e.g. the demo's restore); its payload is the original's.

An item the original applied but that changed since is listed with its reason
(`BulkItem.skip_code`) and never proposed: a later action on its target, a
compensation or reversal of it, its case closed (PRE-2), a payload the compensating
component refuses. Items the original never applied (failed, cancelled, skipped)
are not undo items: nothing of theirs took effect, and the original's ledger
already lists them; the undo counts them as ``not_applied``.

Each original the undo compensates moves applied → compensation_required when the
undo is made, as a single compensation's original does when it is proposed (COMP-3);
when an undo item applies, the engine treats it as any compensation (a scheduled
reversal of the original is cancelled, TEMP-3) and its batch completes (BULK-6).
"""

from __future__ import annotations

import secrets
import uuid
from dataclasses import replace
from datetime import timedelta

from sqlalchemy import insert, or_, select
from sqlalchemy.exc import IntegrityError

from app.domain.bulk.batch import LaterAction, Outcome, batch_digest, dry_run_digest, undo_refusal, undo_skip
from app.domain.case_states import BatchMove
from app.domain.clock import utcnow
from app.domain.digests import canonical_json
from app.domain.errors import ActionError, ApiError
from app.domain.expressions import schema_errors
from app.domain.preconditions import closed_to_ordinary_actions
from app.domain.proposal.identity import COMPENSATION_EXPIRY_SECONDS, compensation_proposal
from app.domain.proposal.retirement import prepared_versions
from app.domain.states import Move, is_effective
from app.models import (
    ActionProposal,
    BulkBatch,
    BulkItem,
    OperatorUser,
    Report,
    WorkflowVersion,
    move_batch_items,
    move_row,
    new_id,
)
from app.services.bulk.batch_votes import record_route
from app.services.bulk.dry_runs import check_reason
from app.services.bulk.submission import load_batch
from app.services.lifecycle.action_targets import destination_of, load_action_component
from app.services.lifecycle.proposals import original_facts, proposal_values
from app.services.uow import Actor, unit_of_work

P = ActionProposal
CHUNK = 500
STARTERS = ("moderator", "reviewer")
NOT_APPLIED = "not_applied"


def undo_action(session, batch: BulkBatch) -> dict:
    """The action that undoes `batch`'s action: its node's ``correction``
    ({component_version_id, action_code, ...}).

    Raises:
        ApiError: 409 ``bulk_undo_unavailable`` when the action names none (BULK-8).
    """
    version = session.get(WorkflowVersion, batch.workflow_version_id) if batch.workflow_version_id else None
    node = ((version.graph.get("nodes") or {}).get(batch.node_id) if version else None) or {}
    config = (node.get("config") or {}).get("correction")
    if not isinstance(config, dict) or not config.get("component_version_id") or not config.get("action_code"):
        raise ApiError(409, "bulk_undo_unavailable", "This bulk action's action has no compensation; it cannot be undone.")
    return config


def _applied_items(session, batch: BulkBatch) -> tuple[list[tuple[BulkItem, ActionProposal]], int]:
    """The original's items whose action took effect, in position order, and how
    many of its items did not (failed, cancelled, skipped)."""
    rows = session.execute(
        select(BulkItem, P).outerjoin(P, P.id == BulkItem.proposal_id)
        .where(BulkItem.batch_id == batch.id, BulkItem.outcome == Outcome.WOULD_ACT.value)
        .order_by(BulkItem.position)
    ).all()
    applied = [(item, proposal) for item, proposal in rows if proposal is not None and is_effective(proposal.state)]
    return applied, len(rows) - len(applied)


def _later_actions(session, installation_id: str, originals: list[ActionProposal]) -> dict[str, list[LaterAction]]:
    """Original proposal id -> the proposals touching its target after it: on the
    same target reference and created later, or compensating or reversing it."""
    found: dict[str, list[LaterAction]] = {p.id: [] for p in originals}
    by_target: dict[str, list[ActionProposal]] = {}
    for p in originals:
        by_target.setdefault(p.target_reference, []).append(p)
    ids = {p.id for p in originals}
    for start in range(0, len(originals), CHUNK):
        chunk = originals[start : start + CHUNK]
        chunk_ids = [p.id for p in chunk]
        rows = session.execute(select(
            P.id, P.target_reference, P.created_at, P.compensates_proposal_id, P.reverses_proposal_id, P.state,
            P.delivery_terminal,
        ).where(P.installation_id == installation_id, or_(
            P.target_reference.in_(sorted({p.target_reference for p in chunk if p.target_reference})),
            P.compensates_proposal_id.in_(chunk_ids),
            P.reverses_proposal_id.in_(chunk_ids),
        ))).all()
        for row in rows:
            if row.id in ids:
                continue
            touched = {row.compensates_proposal_id, row.reverses_proposal_id} & ids
            touched |= {p.id for p in by_target.get(row.target_reference, ()) if row.created_at > p.created_at}
            for original_id in touched:
                found[original_id].append(LaterAction(
                    compensates=row.compensates_proposal_id == original_id,
                    reverses=row.reverses_proposal_id == original_id,
                    state=row.state, delivery_terminal=bool(row.delivery_terminal)))
    return found


def _schema_check(schema: dict):
    """Whether the compensating component refuses a payload, asked once per distinct
    payload (the items of one case share theirs)."""
    seen: dict[str, bool] = {}

    def refused(payload: dict) -> bool:
        key = canonical_json(payload)
        if key not in seen:
            seen[key] = bool(schema_errors(payload, schema))
        return seen[key]

    return refused


def _check_undoable(session, operator: OperatorUser, batch: BulkBatch) -> None:
    if not operator.has_role(*STARTERS):
        raise ApiError(403, "bulk_undo_forbidden", "Only a moderator or a reviewer can undo a bulk action.")
    undo_states = session.scalars(select(BulkBatch.state).where(BulkBatch.undoes_batch_id == batch.id)).all()
    refusal = undo_refusal(batch.kind, batch.state, undo_states)
    if refusal:
        raise ApiError(409, *refusal)


def start_undo(operator: OperatorUser, batch_id: str, reason: str) -> str:
    """Make the compensation batch that undoes a finished batch (BULK-8).

    Args:
        operator: a moderator or reviewer (the undo's maker; neither they nor the
            original's maker or approver may approve it, FOUR-1).
        batch_id: a completed or cancelled enforcement batch.
        reason: why, 3..5,000 characters.

    Returns:
        The undo batch's id: kind ``undo``, state ``submitted``, its digest ready
        for `approve_batch`; one item per item the original applied, each a
        compensation proposal (awaiting approval) or a skip with its code.

    Raises:
        ApiError: 400 ``bulk_reason_invalid``; 403 ``bulk_undo_forbidden``; 404
            ``bulk_batch_not_found``; 409 ``bulk_undo_unavailable`` (no compensation,
            or an undo), ``bulk_batch_not_finished``, ``bulk_undo_already_open``,
            ``bulk_batch_already_undone``, ``bulk_nothing_to_undo``. Nothing is
            written then.
    """
    reason = check_reason(reason)
    try:
        with unit_of_work() as uow:
            undo_id = _start(uow, operator, batch_id, reason)
            uow.commit()
    except IntegrityError as error:  # another undo of it was made at the same moment
        raise ApiError(409, "bulk_undo_already_open", "An undo of this bulk action is already waiting or running.") from error
    return undo_id


def _start(uow, operator: OperatorUser, batch_id: str, reason: str) -> str:
    session = uow.session
    original = load_batch(session, operator, batch_id, lock=True)
    _check_undoable(session, operator, original)
    config = undo_action(session, original)
    applied, not_applied = _applied_items(session, original)
    try:
        prepared_with = {v for _, p in applied for v in prepared_versions(p.component_version_id, p.temporary)}
        component = load_action_component(session, config["component_version_id"], original.installation_id,
                                          prepared_with)  # FOUR-7
    except ActionError as error:
        raise ApiError(409, "bulk_undo_unavailable", f"The compensating action cannot act now ({error.code}).") from error
    later = _later_actions(session, original.installation_id, [p for _, p in applied])
    report_ids = sorted({p.report_id for _, p in applied})
    reports = {r.id: r for r in session.scalars(select(Report).where(Report.id.in_(report_ids)))}
    # a serial per undo of this batch: two undos made at once share it, so their
    # compensations' operation ids collide and one of them is refused
    serial = 1 + len(session.scalars(select(BulkBatch.id).where(BulkBatch.undoes_batch_id == original.id)).all())
    undo_id, now = new_id("blk"), utcnow().replace(microsecond=utcnow().microsecond // 1000 * 1000)
    destination = destination_of(session, component)  # FOUR-5
    proposals, items = [], []
    refused = _schema_check(component.input_schema)
    for position, (item, proposal) in enumerate(applied):
        row = dict(id=new_id("bki"), installation_id=original.installation_id, batch_id=undo_id, position=position,
                   subject_reference=item.subject_reference, kind=item.kind, line=None, outcome=Outcome.WOULD_ACT.value,
                   detail=None, report_ids=[], undoes_proposal_id=proposal.id, proposal_id=None, skip_code=None,
                   created_at=now)
        report = reports[proposal.report_id]
        row["skip_code"] = undo_skip(later[proposal.id]) or (
            "action_case_no_longer_eligible" if closed_to_ordinary_actions(report.state) else None) or (
            "action_payload_schema_invalid" if refused(proposal.payload) else None)
        if row["skip_code"] is None:
            new = compensation_proposal(
                original=original_facts(proposal), token=uuid.uuid4().hex,
                idempotency_key=f"bulk-undo:{original.id}:{serial}", action_code=config["action_code"],
                target=proposal.target, payload=proposal.payload, preconditions={}, component_version_id=component.id,
                policy_version_id=report.policy_version_id, proposer_id=operator.id, now=now, destination=destination)
            new = replace(new, bulk_batch_id=undo_id, task_id=None,  # approved through the batch only
                          approval_policy={**new.approval_policy, "bulk_batch_id": undo_id})
            proposals.append(proposal_values(new))
            row["proposal_id"] = new.id
        items.append(row)
    if not proposals:
        raise ApiError(409, "bulk_nothing_to_undo", "No item of this bulk action can be undone now.")
    skipped = len(items) - len(proposals)
    counts = {Outcome.WOULD_ACT.value: len(proposals), "skipped": skipped, NOT_APPLIED: not_applied}
    action = {"undoes_batch_id": original.id, "undoes_batch_digest": original.batch_digest,
              "component_version_id": component.id, "action_code": config["action_code"]}
    list_digest = dry_run_digest(action, ((i["position"], i["subject_reference"], i["kind"], i["skip_code"] or "undo")
                                          for i in items))
    session.add(BulkBatch(
        id=undo_id, installation_id=original.installation_id, public_reference="B-" + secrets.token_hex(4).upper(),
        kind="undo", undoes_batch_id=original.id, selection={"source": "undo", "batch_id": original.id},
        workflow_version_id=original.workflow_version_id, node_id=original.node_id, component_version_id=component.id,
        action_code=config["action_code"], decision_code=original.decision_code, reason=reason,
        report_id=original.report_id, maker_id=operator.id, dry_run_digest=list_digest, counts=counts,
        item_count=len(items), expires_at=now + timedelta(seconds=COMPENSATION_EXPIRY_SECONDS),
        created_at=now, updated_at=now,
    ))
    session.flush()
    session.execute(insert(P), proposals)
    session.execute(insert(BulkItem), items)
    # COMP-3: each original the undo compensates is compensation_required from now
    move_batch_items(session, original.id, Move.COMPENSATE, ids=[i["undoes_proposal_id"] for i in items
                                                                 if i["proposal_id"] is not None])
    undo = session.get(BulkBatch, undo_id)
    digest = batch_digest(undo_id, undo.decision_code, [p["payload_digest"] for p in proposals])
    expiry = min(p["expires_at"] for p in proposals)
    record_route(session, undo)  # POL-3: the policies its approval needs
    if not move_row(session, undo, BatchMove.SUBMIT, values=dict(batch_digest=digest, submitted_at=now,
                                                                 expires_at=expiry)):
        raise ApiError(409, "bulk_undo_already_open", "This undo changed meanwhile; reload it.")
    uow.audit(original.installation_id, f"bulk-undo-started:{undo_id}", "bulk.undo_started",
              Actor("operator", operator.id), "bulk_batch", undo_id,
              {"batch_digest": digest, "undoes_batch_id": original.id, "undoes_batch_digest": original.batch_digest,
               "dry_run_digest": list_digest, "items": len(proposals), "skipped": skipped, NOT_APPLIED: not_applied,
               "reason": reason})
    return undo_id
