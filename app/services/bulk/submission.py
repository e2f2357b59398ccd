"""Submit a dry run: one proposal per acting item and a batch digest over them
(SPEC BULK-3, BULK-9).

The batch becomes a case: its own report (what list-selected items are proposed
on), the decision its maker took, and a run that waits for the batch. Items selected
through reports are proposed on their own report, whose open reports about the same
subject are decided together, each with its decision recorded, as a single decision
would. Proposals are written in one statement, so 10,000 items take seconds.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from sqlalchemy import func, insert, select, update

from app.domain.bulk.batch import Outcome, batch_digest
from app.domain.case_states import BatchMove, ReportMove, RunState
from app.domain.clock import iso, utcnow
from app.domain.errors import ActionError, ApiError
from app.domain.proposal import identity
from app.domain.proposal.identity import RunFacts
from app.models import (
    ActionProposal,
    BulkBatch,
    BulkItem,
    ComponentVersion,
    Connection,
    ConnectionVersion,
    Decision,
    Integration,
    OperatorUser,
    Report,
    WorkflowRun,
    move_many,
    move_row,
    new_id,
)
from app.models.statements import insert_rows
from app.services.bulk.actions import BulkAction, load_action
from app.services.bulk.batch_votes import record_route
from app.services.bulk.dry_runs import operator_cap
from app.services.bulk.item_proposals import ItemCase, item_proposal, mapped_item
from app.services.cases.snapshot import decision_json, report_json
from app.services.cases.queue_subjects import ensure_reports_decidable_by, refresh_subjects
from app.services.dsa.refusal import ensure_items_yield_statements
from app.services.lifecycle.action_targets import destination_of
from app.services.lifecycle.prepare import temporary_plan
from app.services.lifecycle.proposals import proposal_values
from app.services.uow import Actor, unit_of_work

CASE_NOT_DECIDABLE = "action_case_no_longer_eligible"


def load_batch(session, operator: OperatorUser, batch_id: str, *, lock: bool = False) -> BulkBatch:
    """The batch, if it is the operator's installation's.

    Args:
        lock: hold the batch's row until the unit of work ends (a step that changes
            it: two at once are taken one after the other, and the second sees the
            first's result, instead of colliding on a unique key). SQLite's write lock
            already serialises them.

    Raises:
        ApiError: 404 ``bulk_batch_not_found``.
    """
    options = {"with_for_update": True, "populate_existing": True} if lock else {}
    batch = session.get(BulkBatch, batch_id, **options) if isinstance(batch_id, str) else None
    if batch is None or batch.installation_id != operator.installation_id:
        raise ApiError(404, "bulk_batch_not_found", "No such bulk action.")
    return batch


def _check_submittable(session, batch: BulkBatch, operator: OperatorUser, dry_run_digest: str) -> BulkAction:
    if batch.state != "dry_run":
        raise ApiError(409, "bulk_batch_not_submittable", f"This bulk action is {batch.state}; it cannot be submitted.")
    if batch.maker_id != operator.id:
        raise ApiError(403, "bulk_batch_not_yours", "Only the moderator who ran this dry run can submit it.")
    if batch.expires_at <= utcnow():
        raise ApiError(409, "bulk_dry_run_expired", "This dry run expired; start a new one.")
    if dry_run_digest != batch.dry_run_digest:
        raise ApiError(409, "bulk_dry_run_changed", "This is not the dry run you reviewed; reload it.")
    if batch.item_count == 0:
        raise ApiError(409, "bulk_nothing_to_act_on", "No subject of this dry run would be acted on.")
    if batch.item_count > operator_cap(session, operator):
        raise ApiError(403, "bulk_selection_over_cap", "This batch is over your role's cap of items per batch.")
    try:
        return load_action(session, batch.installation_id, f"{batch.workflow_version_id}:{batch.node_id}",
                           batch.decision_code)
    except ApiError as error:
        raise ApiError(409, "bulk_action_changed", "The action changed since the dry run; start a new one.") from error


def _case_integration(session, component: ComponentVersion, installation_id: str) -> str:
    """The integration that speaks for the batch's case: its connection's, else the
    installation's first (a receipt through the API must come from it, FOUR-8)."""
    connection = session.get(ConnectionVersion, component.connection_version_id) if component.connection_version_id else None
    owner = session.get(Connection, connection.connection_id) if connection else None
    if owner is not None and owner.integration_id:
        return owner.integration_id
    first = session.scalar(select(Integration.id).where(Integration.installation_id == installation_id)
                           .order_by(Integration.created_at, Integration.id).limit(1))
    if first is None:
        raise ApiError(409, "bulk_action_invalid", "The installation has no integration to hold the batch's case.")
    return first


@dataclass
class _Cases:
    """The reports items are proposed on, with the decision recorded on each."""

    reports: dict[str, dict]  # report id -> report_json
    decisions: dict[str, dict]  # report id -> decision_json
    not_decidable: set[str]


def _open_case(uow, batch: BulkBatch, component: ComponentVersion, operator: OperatorUser, now: datetime) -> Report:
    session = uow.session
    report = Report(
        installation_id=batch.installation_id, integration_id=_case_integration(session, component, batch.installation_id),
        external_id=f"bulk:{batch.id}", public_reference=batch.public_reference, category="bulk",
        summary=batch.reason[:2000], created_at=now, updated_at=now,
    )
    session.add(report)
    session.flush()
    return report


def _decide_reports(session, batch: BulkBatch, report_ids: list[str], operator: OperatorUser, now: datetime) -> _Cases:
    """Decide every report the items name, together (BULK-9): one guarded move for
    all, one decision row each. A report appealed or closed meanwhile is not decided."""
    ensure_reports_decidable_by(session, report_ids, operator, now)  # a subject another holds (QUEUE-2)
    moved = move_many(session, Report, report_ids, ReportMove.DECIDE)
    ids = sorted(moved)
    seqs = dict(session.execute(select(Decision.report_id, func.max(Decision.seq))
                                .where(Decision.report_id.in_(ids)).group_by(Decision.report_id)).all()) if ids else {}
    rows = [dict(id=new_id("dec"), installation_id=batch.installation_id, report_id=rid, seq=(seqs.get(rid) or 0) + 1,
                 decision_code=batch.decision_code, maker_id=operator.id, rationale=batch.reason, created_at=now)
            for rid in ids]
    if rows:
        session.execute(insert(Decision), rows)
    loaded = session.scalars(select(Report).where(Report.id.in_(ids))).all() if ids else []
    refresh_subjects(session, [report.subject_id for report in loaded], now)  # they leave the queue (QUEUE-1)
    reports = {r.id: report_json(r) for r in loaded}
    decisions = {row["report_id"]: decision_json(Decision(**row)) for row in rows}
    return _Cases(reports, decisions, set(report_ids) - moved)


def submit_batch(operator: OperatorUser, batch_id: str, dry_run_digest: str) -> str:
    """Turn a dry run into one proposal per acting item awaiting one approval (BULK-3).

    Args:
        operator: the moderator who ran the dry run.
        batch_id: the batch (state ``dry_run``).
        dry_run_digest: the digest of the dry run the moderator reviewed.

    Returns:
        The batch digest a reviewer approves.

    Raises:
        ApiError: 404 / 403 / 409 for another's, expired, changed or empty dry runs,
            over the cap (BULK-5) or an action changed since (BULK-3); 422
            ``dsa_statement_incomplete`` when an item's restriction could not yield
            a valid statement of reasons (DSA-2). Nothing is stored.
    """
    with unit_of_work() as uow:
        session = uow.session
        batch = load_batch(session, operator, batch_id, lock=True)
        action = _check_submittable(session, batch, operator, dry_run_digest)
        now = utcnow().replace(microsecond=utcnow().microsecond // 1000 * 1000)
        component = session.get(ComponentVersion, action.component_version_id)
        items = session.scalars(select(BulkItem).where(BulkItem.batch_id == batch.id,
                                                       BulkItem.outcome == Outcome.WOULD_ACT.value)
                                .order_by(BulkItem.position)).all()
        case = _open_case(uow, batch, component, operator, now)
        report_ids = sorted({rid for item in items for rid in item.report_ids} | {case.id})
        cases = _decide_reports(session, batch, report_ids, operator, now)
        run = WorkflowRun(installation_id=batch.installation_id, report_id=case.id, workflow_version_id=action.workflow_version_id,
                          decision_id=cases.decisions[case.id]["id"], trigger_key=f"bulk:{batch.id}",
                          state=RunState.WAITING.value, current_node_id=action.node_id,
                          waiting_event_type=f"bulk.{batch.id}.finished", created_at=now, updated_at=now)
        session.add(run)
        session.flush()
        proposals, links = _item_proposals(session, batch, action, component, items, cases, case.id, run, now)
        # DSA-2: each item's restriction must be able to yield its statement of reasons
        ensure_items_yield_statements(session, batch.installation_id, batch.decision_code, batch.reason, proposals)
        insert_rows(session, ActionProposal, proposals)
        session.execute(update(BulkItem), links)
        digest = batch_digest(batch.id, batch.decision_code, [p["payload_digest"] for p in proposals])
        expiry = min((p["expires_at"] for p in proposals), default=now)
        record_route(session, batch)  # POL-3: the policies its approval needs
        if not move_row(session, batch, BatchMove.SUBMIT, values=dict(
                batch_digest=digest, submitted_at=now, report_id=case.id, expires_at=expiry)):
            raise ApiError(409, "bulk_batch_not_submittable", "This bulk action changed meanwhile; reload it.")
        skipped = len(items) - len(proposals)
        uow.audit(batch.installation_id, f"bulk-submitted:{batch.id}", "bulk.submitted", Actor("operator", operator.id),
                  "bulk_batch", batch.id, {"batch_digest": digest, "dry_run_digest": batch.dry_run_digest,
                                           "items": len(proposals), "skipped": skipped, "case_report_id": case.id})
        uow.commit()
    return digest


def _item_proposals(session, batch, action, component, items, cases: _Cases, case_id: str, run: WorkflowRun, now):
    """Each item's proposal row, or its skip code when its reports can no longer be
    decided or the action refuses it now (BULK-3, BULK-4)."""
    destination = destination_of(session, component)
    proposals, links = [], []
    run_json = {"id": run.id, "workflow_version_id": run.workflow_version_id, "decision_id": run.decision_id,
                "created_at": iso(run.created_at)}
    for item in items:
        own = item.report_ids[0] if item.report_ids else None
        report_id = own or case_id
        if own is not None and (set(item.report_ids) & cases.not_decidable):
            links.append({"id": item.id, "skip_code": CASE_NOT_DECIDABLE})
            continue
        case = ItemCase(cases.reports[report_id], cases.decisions[report_id], own_report=own is not None)
        facts = RunFacts(id=run.id, installation_id=batch.installation_id, report_id=report_id,
                         workflow_version_id=run.workflow_version_id, decision_id=case.decision["id"],
                         created_at=run.created_at)
        try:
            mapped = mapped_item(action, component.input_schema, case, item.subject_reference, item.kind, run_json)
            plan = _plan(session, component, action, mapped, batch, run.id, item.position)
            new = item_proposal(action=action, batch_id=batch.id, position=item.position, run=facts, mapped=mapped,
                                policy_version_id=case.report.get("policy_version_id"), now=now,
                                destination=destination, temporary=plan)
        except ActionError as error:
            links.append({"id": item.id, "skip_code": error.code})
            continue
        proposals.append(proposal_values(new))
        links.append({"id": item.id, "proposal_id": new.id})
    return proposals, links


def _plan(session, component, action: BulkAction, mapped: dict, batch: BulkBatch, run_id: str, position: int):
    """The temporary plan of a temporary action (TEMP-1), with where its reversal
    goes (FOUR-5); None for a permanent one."""
    if component.temporary is None and not action.config.get("temporary"):
        return None
    key = identity.check_idempotency_key(mapped.get("idempotency_key"))
    ids = (f"{batch.id}:{position}:proposal", identity.operation_id(run_id, action.node_id, f"item-{position}", key))
    return temporary_plan(session, component, action.config, mapped, mapped["target"], batch.installation_id, ids)
