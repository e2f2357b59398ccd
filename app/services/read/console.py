"""Read models for the console: the queries behind each screen.

Each function runs a fixed number of queries whatever the number of attempts,
receipts or audit rows, so pages stay fast as history grows.
"""

from __future__ import annotations

import contextlib
from collections import OrderedDict
from dataclasses import dataclass, field, replace
from typing import Any

from sqlalchemy import bindparam, func, select, tuple_
from sqlalchemy.orm import joinedload, selectinload

from app.domain.case_states import OPEN_CORRECTION_STATES
from app.domain.attempts import attempt_status
from app.domain.clock import utcnow
from app.domain.maker_checker import Verdict
from app.domain.proposal.makers import appeal_verdict, makers as maker_ids
from app.domain.proposal.offers import Offer, Offers, offers
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
    predicates,
)
from app.services.lifecycle.cancel_scheduled import cancel_facts
from app.services.lifecycle.maker_lookup import facts_of, is_a_maker
from app.services.read.approval_votes import VotePanel, vote_panel
from app.services.lifecycle.proposals import delivery_of
from app.services.lifecycle.reversals import active_reversal
from app.services.read.list_columns import list_row_options
from app.models.statements import prebuilt
from app.services.read.pagination import decode_cursor, encode_cursor

P = ActionProposal
PAGE_SIZE = 50


@dataclass(frozen=True)
class ProposalFilters:
    state: str | None = None
    queue_id: str | None = None
    action_code: str | None = None
    needs_my_approval: bool = False
    failed: bool = False
    report_id: str | None = None


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
        # what `offers.decide_offer` opens: still decidable (APPR-3), never a
        # proposal the viewer made (FOUR-1: the domain's makers, as SQL), and not an
        # item of a bulk batch, which is decided with its batch (BULK-3)
        query = query.where(
            predicates.awaits_decision(utcnow()), ~is_a_maker(operator.id), P.bulk_batch_id.is_(None)
        )
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
    # the report's reference only (not the whole report row, which the list never shows)
    query = query.add_columns(Report.public_reference).join(Report, Report.id == P.report_id)
    query = query.options(*list_row_options())
    found = db.session.execute(query.order_by(P.created_at.desc(), P.id.desc()).limit(limit + 1)).all()
    more = len(found) > limit
    rows = [{"proposal": p, "report_reference": reference} for p, reference in found[:limit]]
    proposals = [row["proposal"] for row in rows]
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
    attempt_statuses: dict[str, str] = field(default_factory=dict)  # attempt id -> finished|in_flight|abandoned
    votes: VotePanel | None = None  # the approval's votes in words, while it awaits approval (POL-1..3)

    @property
    def last_failure(self) -> ConnectionAttempt | None:
        """The latest attempt that ended in an error: its status and the start of the
        platform's answer say what went wrong (QUEUE-6). No query: the attempts are loaded."""
        failed = [a for rows in self.attempts_by_cycle.values() for a in rows if a.error_code]
        return max(failed, key=lambda a: (a.delivery_cycle, a.attempt_number, a.started_at), default=None)


AUDIT_SHOWN = 50


def _page_proposal():
    """SQL, built once: the proposal page's proposal with what it shows and what the
    approval verdict reads (bound ``proposal_id``, ``installation_id``)."""
    return (
        select(P)
        .where(P.id == bindparam("proposal_id"), P.installation_id == bindparam("installation_id"))
        .options(
            joinedload(P.report),
            joinedload(P.approval),
            joinedload(P.task),
            # the rows the approval verdict reads (its session.get calls find them loaded)
            joinedload(P.decision),
            joinedload(P.run).joinedload(WorkflowRun.decision),
            selectinload(P.attempts),
            selectinload(P.receipts),
        )
    )


def _audit_of_proposal():
    return AuditEvent.target_type == "action_proposal", AuditEvent.target_id == bindparam("proposal_id")


def _audit_count():
    return select(func.count()).select_from(AuditEvent).where(*_audit_of_proposal())


def _audit_rows(limited: bool):
    """SQL, built once per shape: a proposal's newest audit events as plain rows (bound
    ``proposal_id``; ``limit`` when `limited`, else all)."""
    statement = (
        select(AuditEvent.seq, AuditEvent.action, AuditEvent.actor_type, AuditEvent.actor_id,
               AuditEvent.details_json, AuditEvent.created_at)
        .where(*_audit_of_proposal())
        .order_by(AuditEvent.seq.desc())
    )
    return statement.limit(bindparam("limit")) if limited else statement


def proposal_detail(operator: OperatorUser, proposal_id: str, all_audit: bool = False) -> ProposalDetail | None:
    """Everything the proposal page shows, or None outside the operator's tenant."""
    mine = {"proposal_id": proposal_id, "installation_id": operator.installation_id}
    proposal = db.session.scalar(prebuilt(("proposal-page",), _page_proposal), mine)
    if proposal is None:
        return None
    by_cycle: OrderedDict[int, list[ConnectionAttempt]] = OrderedDict()
    for attempt in reversed(proposal.attempts):  # the newest cycle and attempt first
        by_cycle.setdefault(attempt.delivery_cycle, []).append(attempt)
    approval, task = proposal.approval, proposal.task
    audit_total = db.session.scalar(prebuilt(("proposal-audit-count",), _audit_count), {"proposal_id": proposal.id})
    rows = prebuilt(("proposal-audit", all_audit), lambda: _audit_rows(limited=not all_audit))
    audit = list(reversed(db.session.execute(rows, {"proposal_id": proposal.id, "limit": AUDIT_SHOWN}).all()))
    actor_ids = {a.actor_id for a in audit if a.actor_type == "operator"}
    if approval:
        actor_ids.add(approval.approver_id)
    actors = operator_names(actor_ids)
    made_by = facts_of(db.session, proposal)
    reversal = active_reversal(db.session, proposal.id) if proposal.temporary else None
    shown = offers(
        delivery_of(proposal),
        operator_id=operator.id,
        roles=operator.roles,
        facts=made_by,
        now=utcnow(),
        task_state=task.state if task else None,
        task_assignee_id=task.assigned_operator_id if task else None,
        cancel=cancel_facts(db.session, proposal, made_by) if proposal.not_before else None,
        temporary=bool(proposal.temporary),
        reversal=delivery_of(reversal) if reversal is not None else None,
    )
    votes = None
    if shown.decide.shown and not proposal.bulk_batch_id:  # POL-1..3: the policy, progress and votes
        votes = vote_panel(operator, proposal, maker_ids(made_by), db.session)
        if shown.decide.allowed and votes.refusal:
            shown = replace(shown, decide=Offer(True, False, votes.refusal))
        if shown.claim.allowed and votes.refusal_code == "approval_not_eligible":
            shown = replace(shown, claim=Offer(True, False, votes.refusal))
    return ProposalDetail(
        proposal=proposal,
        report=proposal.report,
        approval=approval,
        approver=None,
        task=task,
        votes=votes,
        offers=shown,
        attempts_by_cycle=by_cycle,
        receipts=list(reversed(proposal.receipts)),
        audit=audit,
        actors=actors,
        audit_total=audit_total,
        attempt_statuses=attempt_statuses(proposal, [a for rows in by_cycle.values() for a in rows]),
    )


def attempt_statuses(proposal: ActionProposal, attempts: list[ConnectionAttempt]) -> dict[str, str]:
    """Each attempt's status (DLV-4): finished, in flight, or abandoned by its worker."""
    now = utcnow()
    return {
        a.id: attempt_status(
            a.finished_at is not None,
            a.attempt_number,
            proposal.delivery_attempt_count,
            proposal.state,
            proposal.lease_expires_at,
            now,
        )
        for a in attempts
    }


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
    """A report with its targets, decisions (newest first, with their makers), runs,
    proposals and appeals, or None outside the operator's tenant."""
    report = db.session.scalar(
        select(Report)
        .where(Report.id == report_id, Report.installation_id == operator.installation_id)
        .options(
            selectinload(Report.targets),
            selectinload(Report.decisions).joinedload(Decision.maker),
            selectinload(Report.runs),
            selectinload(Report.proposals),
            selectinload(Report.appeals),
        )
    )
    if report is None:
        return None
    makers = {d.maker_id: d.maker.display_name for d in report.decisions}
    if report.opened_by_id:  # a report opened in the console names who opened it (issue 25)
        opener = db.session.get(OperatorUser, report.opened_by_id)
        makers[report.opened_by_id] = opener.display_name if opener else report.opened_by_id
    return ReportDetail(
        report,
        list(report.targets),
        list(report.decisions),
        list(report.runs),
        list(report.proposals),
        makers,
        list(report.appeals),
    )


def list_appeals(operator: OperatorUser, limit: int = 200) -> list[dict[str, Any]]:
    from app.models import Appeal

    appeals = db.session.scalars(
        select(Appeal)
        .where(Appeal.installation_id == operator.installation_id)
        .options(joinedload(Appeal.report, innerjoin=True))
        .order_by(Appeal.created_at.desc(), Appeal.id.desc())
        .limit(limit)
    ).all()
    return [{"appeal": a, "report_reference": a.report.public_reference} for a in appeals]


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
    from app.services.lifecycle.corrections import case_problems, reviewer_problem

    # Everything the correction checks read is loaded here (their session.get calls find it).
    appeal = db.session.scalar(
        select(Appeal)
        .where(Appeal.id == appeal_id, Appeal.installation_id == operator.installation_id)
        .options(
            joinedload(Appeal.report),
            joinedload(Appeal.contested).joinedload(Decision.maker),
            selectinload(Appeal.decisions).joinedload(AppealDecision.maker),
            selectinload(Appeal.corrections).options(
                joinedload(AppealCorrection.original),
                joinedload(AppealCorrection.proposal),
                joinedload(AppealCorrection.approver),
            ),
        )
    )
    if appeal is None:
        return None
    report, contested, decisions, corrections = appeal.report, appeal.contested, appeal.decisions, appeal.corrections
    views = []
    for c in corrections:
        proposal = c.proposal
        open_ = c.state in OPEN_CORRECTION_STATES
        problems = (  # the case's conditions; the approver is bound at approval (FOUR-7)
            case_problems(
                db.session, c, proposal.target if proposal else None, proposal.preconditions if proposal else None
            )
            if open_
            else []
        )
        problem = reviewer_problem(db.session, c, operator.id, you=True) if open_ else None
        verdict = Verdict(False, problem) if problem else Verdict(True)
        views.append(CorrectionView(c, c.original, proposal, problems, verdict))
    people = [d.maker for d in decisions] + [c.approver for c in corrections] + [contested.maker if contested else None]
    names = {person.id: person.display_name for person in people if person is not None}
    can_decide = appeal_verdict(operator.id, operator.roles, contested.maker_id if contested else None)
    return AppealDetail(appeal, report, contested, list(decisions), views, names, can_decide)

