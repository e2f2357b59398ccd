"""Read models for the console: the queries behind each screen.

Each function runs a fixed number of queries whatever the number of attempts,
receipts or audit rows, so pages stay fast as history grows.
"""

from __future__ import annotations

import base64
import contextlib
from collections import OrderedDict
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from sqlalchemy import func, select, tuple_

from app.domain.clock import iso, parse_iso, utcnow
from app.domain.maker_checker import Verdict
from app.domain.proposal.makers import MakerFacts, appeal_verdict
from app.domain.proposal.offers import Offers, claim_offer, offers, release_offer
from app.domain.states import ProposalState
from app.extensions import db
from app.models import (
    ActionApproval,
    ActionProposal,
    ActionReceiptRecord,
    AuditEvent,
    ConnectionAttempt,
    Decision,
    HumanTask,
    OperatorUser,
    Queue,
    Report,
    WorkflowRun,
)
from app.services.lifecycle.makers import facts_of, is_a_maker, maker_facts
from app.services.lifecycle.proposals import delivery_of

P = ActionProposal
NO_FACTS = MakerFacts()  # a task whose proposal is gone: nobody is its maker
PAGE_SIZE = 50


@dataclass(frozen=True)
class ProposalFilters:
    state: str | None = None
    queue_id: str | None = None
    action_code: str | None = None
    needs_my_approval: bool = False
    failed: bool = False
    report_id: str | None = None


def encode_cursor(created_at: datetime, id: str) -> str:
    return base64.urlsafe_b64encode(f"{iso(created_at)}|{id}".encode()).decode().rstrip("=")


def decode_cursor(cursor: str | None) -> tuple[datetime, str] | None:
    """Decode a keyset cursor; a malformed one reads as the first page."""
    if not cursor:
        return None
    try:
        text = base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4)).decode()
        stamp, id = text.split("|", 1)
        if "\x00" in id or len(id) > 700:
            return None
        return parse_iso(stamp), id
    except (ValueError, UnicodeDecodeError, OverflowError):
        return None


def operator_names(ids) -> dict[str, str]:
    """Display names by operator id (one query, even for no ids: page cost stays fixed)."""
    ids = {i for i in ids if i}
    return dict(
        db.session.execute(select(OperatorUser.id, OperatorUser.display_name).where(OperatorUser.id.in_(ids))).all()
    )


def report_references(report_ids) -> dict[str, str]:
    """Public references by report id (one query)."""
    return dict(
        db.session.execute(select(Report.id, Report.public_reference).where(Report.id.in_(set(report_ids)))).all()
    )


def _filtered(installation_id: str, filters: ProposalFilters, operator: OperatorUser):
    query = select(P).where(P.installation_id == installation_id)
    if filters.state:
        query = query.where(P.state == filters.state)
    if filters.failed:
        query = query.where(P.state == ProposalState.FAILED)
    if filters.action_code:
        query = query.where(P.action_code == filters.action_code)
    if filters.report_id:
        query = query.where(P.report_id == filters.report_id)
    if filters.queue_id:
        query = query.where(P.report_id.in_(select(Report.id).where(Report.queue_id == filters.queue_id)))
    if filters.needs_my_approval:
        # FOUR-1: never a proposal the viewer made (the domain's makers, as SQL)
        query = query.where(P.state == ProposalState.APPROVAL_REQUIRED, ~is_a_maker(operator.id))
    return query


@dataclass
class ProposalPage:
    rows: list[dict[str, Any]]
    next_cursor: str | None
    counts: dict[str, int]
    queues: list[tuple[str, str]] = field(default_factory=list)  # (id, name) for the filter


def list_proposals(
    operator: OperatorUser,
    filters: ProposalFilters,
    cursor: str | None,
    limit: int = PAGE_SIZE,
    with_counts: bool = True,
) -> ProposalPage:
    """One page of proposals, newest first, by keyset (created_at, id)."""
    query = _filtered(operator.installation_id, filters, operator)
    position = decode_cursor(cursor)
    if position:
        created_at, id = position
        # A row-value comparison: the database walks the (created_at, id) index from the cursor.
        query = query.where(tuple_(P.created_at, P.id) < tuple_(created_at, id))
    proposals = db.session.scalars(query.order_by(P.created_at.desc(), P.id.desc()).limit(limit + 1)).all()
    more = len(proposals) > limit
    proposals = proposals[:limit]
    references = report_references(p.report_id for p in proposals)
    rows = [{"proposal": p, "report_reference": references.get(p.report_id)} for p in proposals]
    last = proposals[-1] if proposals and more else None
    queues = db.session.execute(
        select(Queue.id, Queue.name).where(Queue.installation_id == operator.installation_id).order_by(Queue.name)
    ).all()
    return ProposalPage(
        rows,
        encode_cursor(last.created_at, last.id) if last else None,
        state_counts(operator.installation_id) if with_counts else {},
        [tuple(q) for q in queues],
    )


COUNTS_TTL_SECONDS = 10


def state_counts(installation_id: str) -> dict[str, int]:
    """Proposals by state. Counting millions of rows takes a while, so the answer is
    cached in Redis for a few seconds (and computed directly when Redis is down)."""
    import json

    import redis

    from app.queueing import get_redis

    key = f"console:state-counts:{installation_id}"
    try:
        cached = get_redis().get(key)
        if cached:
            return json.loads(cached)
    except redis.RedisError:
        cached = None
    rows = db.session.execute(
        select(P.state, func.count()).where(P.installation_id == installation_id).group_by(P.state)
    ).all()
    counts = {state.value: 0 for state in ProposalState}
    counts.update({state: count for state, count in rows})
    with contextlib.suppress(redis.RedisError):
        get_redis().set(key, json.dumps(counts), ex=COUNTS_TTL_SECONDS)
    return counts


@dataclass
class ProposalDetail:
    proposal: ActionProposal
    report: Report
    approval: ActionApproval | None
    approver: OperatorUser | None
    task: HumanTask | None
    offers: Offers  # what this operator may do with it now
    attempts_by_cycle: OrderedDict[int, list[ConnectionAttempt]]
    receipts: list[ActionReceiptRecord]
    audit: list
    actors: dict[str, str] = field(default_factory=dict)
    audit_total: int = 0


AUDIT_SHOWN = 50


def proposal_detail(operator: OperatorUser, proposal_id: str, all_audit: bool = False) -> ProposalDetail | None:
    """Everything the proposal page shows, or None outside the operator's tenant."""
    proposal = db.session.get(P, proposal_id)
    if proposal is None or proposal.installation_id != operator.installation_id:
        return None
    report = db.session.get(Report, proposal.report_id)
    approval = db.session.scalar(select(ActionApproval).where(ActionApproval.proposal_id == proposal.id))
    task = db.session.scalar(select(HumanTask).where(HumanTask.action_proposal_id == proposal.id))
    attempts = db.session.scalars(
        select(ConnectionAttempt)
        .where(ConnectionAttempt.proposal_id == proposal.id)
        .order_by(ConnectionAttempt.delivery_cycle.desc(), ConnectionAttempt.attempt_number.desc())
    ).all()
    by_cycle: OrderedDict[int, list[ConnectionAttempt]] = OrderedDict()
    for attempt in attempts:
        by_cycle.setdefault(attempt.delivery_cycle, []).append(attempt)
    receipts = db.session.scalars(
        select(ActionReceiptRecord)
        .where(ActionReceiptRecord.proposal_id == proposal.id)
        .order_by(ActionReceiptRecord.received_at.desc())
    ).all()
    mine = (AuditEvent.target_type == "action_proposal", AuditEvent.target_id == proposal.id)
    audit_total = db.session.scalar(select(func.count()).select_from(AuditEvent).where(*mine))
    audit = list(
        reversed(
            db.session.execute(  # the newest events; plain rows, not entities
                select(
                    AuditEvent.seq,
                    AuditEvent.action,
                    AuditEvent.actor_type,
                    AuditEvent.actor_id,
                    AuditEvent.details_json,
                    AuditEvent.created_at,
                )
                .where(*mine)
                .order_by(AuditEvent.seq.desc())
                .limit(None if all_audit else AUDIT_SHOWN)
            ).all()
        )
    )
    actor_ids = {a.actor_id for a in audit if a.actor_type == "operator"}
    if approval:
        actor_ids.add(approval.approver_id)
    actors = operator_names(actor_ids)
    return ProposalDetail(
        proposal=proposal,
        report=report,
        approval=approval,
        approver=None,
        task=task,
        offers=offers(
            delivery_of(proposal),
            operator_id=operator.id,
            roles=operator.roles,
            facts=facts_of(db.session, proposal),
            now=utcnow(),
            task_state=task.state if task else None,
            task_assignee_id=task.assigned_operator_id if task else None,
        ),
        attempts_by_cycle=by_cycle,
        receipts=list(receipts),
        audit=audit,
        actors=actors,
        audit_total=audit_total,
    )


def open_tasks(operator: OperatorUser, limit: int = 200, task_id: str | None = None) -> list[dict[str, Any]]:
    """Open and claimed approval tasks, soonest due first, with the claimant's name."""
    query = select(HumanTask).where(HumanTask.installation_id == operator.installation_id)
    query = query.where(HumanTask.id == task_id) if task_id else query.where(HumanTask.state.in_(("open", "claimed")))
    tasks = db.session.scalars(query.order_by(HumanTask.due_at, HumanTask.id).limit(limit)).all()
    proposals = {p.id: p for p in db.session.scalars(select(P).where(P.id.in_({t.action_proposal_id for t in tasks})))}
    facts = maker_facts(db.session, proposals.values())
    names = operator_names(t.assigned_operator_id for t in tasks)
    return [
        {
            "task": t,
            "proposal": proposals.get(t.action_proposal_id),
            "assignee": names.get(t.assigned_operator_id),
            # FOUR-1: a maker's queue shows the task as not theirs to decide
            "claim": claim_offer(t.state, operator.id, operator.roles, facts.get(t.action_proposal_id, NO_FACTS)),
            "release": release_offer(t.state, t.assigned_operator_id, operator.id),
        }
        for t in tasks
    ]


def open_task(operator: OperatorUser, task_id: str) -> dict[str, Any] | None:
    """One task row (any state) of the operator's installation."""
    rows = open_tasks(operator, limit=1, task_id=task_id)
    return rows[0] if rows else None


def list_reports(operator: OperatorUser, limit: int = 200) -> list[Report]:
    return list(
        db.session.scalars(
            select(Report)
            .where(Report.installation_id == operator.installation_id)
            .order_by(Report.created_at.desc(), Report.id.desc())
            .limit(limit)
        )
    )


@dataclass
class ReportDetail:
    report: Report
    targets: list
    decisions: list
    runs: list
    proposals: list
    makers: dict[str, str]
    appeals: list = field(default_factory=list)


def report_detail(operator: OperatorUser, report_id: str) -> ReportDetail | None:
    from app.models import ReportTarget

    report = db.session.get(Report, report_id)
    if report is None or report.installation_id != operator.installation_id:
        return None
    targets = db.session.scalars(
        select(ReportTarget).where(ReportTarget.report_id == report.id).order_by(ReportTarget.position)
    ).all()
    decisions = db.session.scalars(
        select(Decision)
        .where(Decision.report_id == report.id)
        .order_by(Decision.created_at.desc(), Decision.seq.desc())
    ).all()
    runs = db.session.scalars(
        select(WorkflowRun).where(WorkflowRun.report_id == report.id).order_by(WorkflowRun.created_at.desc())
    ).all()
    proposals = db.session.scalars(select(P).where(P.report_id == report.id).order_by(P.created_at.desc())).all()
    makers = operator_names(d.maker_id for d in decisions)
    return ReportDetail(
        report, list(targets), list(decisions), list(runs), list(proposals), makers, report_appeals(report.id)
    )


def list_appeals(operator: OperatorUser, limit: int = 200) -> list[dict[str, Any]]:
    from app.models import Appeal

    appeals = db.session.scalars(
        select(Appeal)
        .where(Appeal.installation_id == operator.installation_id)
        .order_by(Appeal.created_at.desc(), Appeal.id.desc())
        .limit(limit)
    ).all()
    references = report_references(a.report_id for a in appeals)
    return [{"appeal": a, "report_reference": references.get(a.report_id)} for a in appeals]


@dataclass
class CorrectionView:
    correction: Any
    original: ActionProposal | None
    proposal: ActionProposal | None
    problems: list[str]
    verdict: Verdict | None  # may the viewing operator approve or record it


@dataclass
class AppealDetail:
    appeal: Any
    report: Report
    contested: Decision | None
    decisions: list
    corrections: list[CorrectionView]
    names: dict[str, str]
    can_decide: Verdict


def appeal_detail(operator: OperatorUser, appeal_id: str) -> AppealDetail | None:
    """An appeal with its decisions and each correction: original action, correction
    proposal, what blocks it, and whether this operator may approve it."""
    from app.models import Appeal, AppealCorrection, AppealDecision
    from app.services.lifecycle.corrections import correction_problems, reviewer_problem

    appeal = db.session.get(Appeal, appeal_id)
    if appeal is None or appeal.installation_id != operator.installation_id:
        return None
    report = db.session.get(Report, appeal.report_id)
    contested = db.session.get(Decision, appeal.decision_id)
    decisions = db.session.scalars(
        select(AppealDecision).where(AppealDecision.appeal_id == appeal.id).order_by(AppealDecision.created_at)
    ).all()
    corrections = db.session.scalars(
        select(AppealCorrection).where(AppealCorrection.appeal_id == appeal.id).order_by(AppealCorrection.created_at)
    ).all()
    proposals = {
        p.id: p
        for p in db.session.scalars(
            select(P).where(
                P.id.in_({c.proposal_id for c in corrections} | {c.original_proposal_id for c in corrections})
            )
        )
    }
    views = []
    for c in corrections:
        proposal = proposals.get(c.proposal_id)
        open_ = c.state in ("pending", "proposed")
        problems = (
            correction_problems(
                db.session, c, proposal.target_json if proposal else None, proposal.preconditions if proposal else None
            )
            if open_
            else []
        )
        problem = reviewer_problem(db.session, c, operator.id, you=True) if open_ else None
        verdict = Verdict(False, problem) if problem else Verdict(True)
        views.append(CorrectionView(c, proposals.get(c.original_proposal_id), proposal, problems, verdict))
    names = operator_names(
        [d.maker_id for d in decisions]
        + [c.approved_by for c in corrections]
        + [contested.maker_id if contested else None]
    )
    can_decide = appeal_verdict(operator.id, operator.roles, contested.maker_id if contested else None)
    return AppealDetail(appeal, report, contested, list(decisions), views, names, can_decide)


def report_appeals(report_id: str) -> list:
    from app.models import Appeal

    return list(
        db.session.scalars(select(Appeal).where(Appeal.report_id == report_id).order_by(Appeal.created_at.desc()))
    )


def action_components(installation_id: str) -> list[tuple[str, str]]:
    """(component version id, label) of the versions that can act, for forms."""
    from app.models import ComponentDefinition, ComponentVersion

    rows = db.session.execute(
        select(ComponentVersion.id, ComponentDefinition.name, ComponentVersion.version)
        .join(ComponentDefinition, ComponentDefinition.id == ComponentVersion.definition_id)
        .where(
            ComponentVersion.installation_id == installation_id,
            ComponentVersion.retired_at.is_(None),
            ComponentDefinition.status == "active",
        )
        .order_by(ComponentDefinition.name, ComponentVersion.version.desc())
    ).all()
    return [(id, f"{name} v{version}") for id, name, version in rows]
