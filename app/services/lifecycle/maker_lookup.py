"""Load the makers of proposals and filter by them (SPEC FOUR-1).

`maker_facts` loads, for any number of proposals, the ids the domain's `makers`
rule reads (two queries). `not_a_maker` is the same rule as SQL for the console's
"needs my approval" list, generated from the same `MakerSource` list: one clause
per source, and the module refuses to load if a source has no clause.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

from sqlalchemy import and_, bindparam, exists, func, or_, select
from sqlalchemy.orm import aliased

from app.domain.maker_checker import Verdict
from app.domain.proposal.makers import DecisionRef, MakerFacts, MakerSource, makers, verdict
from app.models import (
    ActionProposal,
    Appeal,
    AppealCorrection,
    AppealDecision,
    Decision,
    EmergencyReview,
    OperatorUser,
    WorkflowRun,
)
from app.models.statements import prebuilt

P = ActionProposal
Original = aliased(ActionProposal)


def _report_decisions(session, report_ids: Iterable[str]) -> dict[str, tuple[DecisionRef, ...]]:
    statement = prebuilt(("maker-decisions",), lambda: select(
        Decision.report_id, Decision.id, Decision.maker_id, Decision.seq, Decision.created_at
    ).where(Decision.report_id.in_(bindparam("report_ids", expanding=True))))
    rows = session.execute(statement, {"report_ids": list(set(report_ids))}).all()
    by_report: dict[str, list[DecisionRef]] = {}
    for report_id, *ref in rows:
        by_report.setdefault(report_id, []).append(DecisionRef(*ref))
    return {report_id: tuple(refs) for report_id, refs in by_report.items()}


def _original_id(correction_original):
    """The proposal a correction corrects, else the one a compensation compensates."""
    return func.coalesce(correction_original, P.compensates_proposal_id)


def _links():
    """SQL, built once (statements built per call cost more than they run): each
    proposal's run decision, appeal decision's maker, contested and original decisions
    and emergency actor; bound parameter ``ids`` (expanding)."""
    return (
        select(
            P.id,
            WorkflowRun.decision_id,
            AppealDecision.maker_id,
            Appeal.decision_id,
            Original.decision_id,
            EmergencyReview.acted_by,
        )
        .outerjoin(WorkflowRun, WorkflowRun.id == P.run_id)
        .outerjoin(AppealCorrection, AppealCorrection.proposal_id == P.id)
        .outerjoin(AppealDecision, AppealDecision.id == AppealCorrection.appeal_decision_id)
        .outerjoin(Appeal, Appeal.id == AppealCorrection.appeal_id)
        .outerjoin(Original, Original.id == _original_id(AppealCorrection.original_proposal_id))
        .outerjoin(EmergencyReview, EmergencyReview.proposal_id == Original.id)
        .where(P.id.in_(bindparam("ids", expanding=True)))
    )


def maker_facts(session, proposals: Iterable[ActionProposal]) -> dict[str, MakerFacts]:
    """The maker facts of each proposal (FOUR-1), in two queries whatever their number.

    Args:
        session: a session.
        proposals: proposal rows (None entries are skipped).

    Returns:
        Proposal id → `MakerFacts`: its creator, pinned decision, its run's decision,
        its report's decisions, and for a correction or compensation the appeal
        decision's maker, the original decisions and who took the original as an
        emergency action (POL-6).
    """
    proposals = [p for p in proposals if p is not None]
    if not proposals:
        return {}
    rows = session.execute(prebuilt(("maker-links",), _links), {"ids": list({p.id for p in proposals})}).all()
    linked = {row[0]: row[1:] for row in rows}
    decisions = _report_decisions(session, {p.report_id for p in proposals})
    facts = {}
    for p in proposals:
        run_decision, appeal_maker, contested, original_decision, emergency_actor = linked.get(p.id, (None,) * 5)
        facts[p.id] = MakerFacts(
            created_by_type=p.created_by_type,
            created_by_id=p.created_by_id,
            pinned_decision_id=p.decision_id,
            run_decision_id=run_decision,
            prepared_at=p.created_at,
            decisions=decisions.get(p.report_id, ()),
            appeal_decision_maker_id=appeal_maker,
            original_decision_ids=tuple(i for i in (contested, original_decision) if i),
            emergency_actor_id=emergency_actor,
        )
    return facts


def facts_of(session, proposal: ActionProposal) -> MakerFacts:
    """The maker facts of one proposal (FOUR-1)."""
    return maker_facts(session, [proposal])[proposal.id]


def makers_of(session, proposal: ActionProposal) -> frozenset[str]:
    """Operators who took part in making a proposal; none of them may approve it (FOUR-1)."""
    return makers(facts_of(session, proposal))


def approval_verdict(session, proposal: ActionProposal, operator: OperatorUser) -> Verdict:
    """Whether `operator` may decide (or claim the task of) `proposal`, and why not (APPR-4, FOUR-1)."""
    return verdict(operator.id, operator.roles, facts_of(session, proposal))


def correction_facts(session, correction: AppealCorrection) -> MakerFacts:
    """The maker facts of a correction without a proposal (manual, or before it has
    one): the appeal decision's maker and the original decision's (CORR-2, FOUR-1)."""
    row = session.execute(
        select(AppealDecision.maker_id, Appeal.decision_id, Original.decision_id, Appeal.report_id)
        .select_from(AppealCorrection)
        .join(AppealDecision, AppealDecision.id == AppealCorrection.appeal_decision_id)
        .join(Appeal, Appeal.id == AppealCorrection.appeal_id)
        .outerjoin(Original, Original.id == AppealCorrection.original_proposal_id)
        .where(AppealCorrection.id == correction.id)
    ).one()
    appeal_maker, contested, original_decision, report_id = row
    return MakerFacts(
        decisions=_report_decisions(session, [report_id]).get(report_id, ()),
        appeal_decision_maker_id=appeal_maker,
        original_decision_ids=tuple(i for i in (contested, original_decision) if i),
    )


def redaction_facts(session, appeal_decision: AppealDecision) -> MakerFacts:
    """The maker facts of an appeal decision's record: its maker and the maker of the
    decision it contested; neither may redact its rationale (FOUR-1, FOUR-9)."""
    contested = session.scalar(select(Appeal.decision_id).where(Appeal.id == appeal_decision.appeal_id))
    decisions = session.scalars(select(Decision).where(Decision.id == contested))
    return MakerFacts(
        decisions=tuple(DecisionRef(d.id, d.maker_id, d.seq, d.created_at) for d in decisions),
        appeal_decision_maker_id=appeal_decision.maker_id,
        original_decision_ids=(contested,),
    )


# -- the same rule as SQL, one clause per source ------------------------------------


def _made(operator_id: str, *conditions) -> object:
    """A decision of the proposal's report, made by the operator, matching `conditions`."""
    return exists().where(Decision.report_id == P.report_id, Decision.maker_id == operator_id, *conditions)


def _run_decision():
    return select(WorkflowRun.decision_id).where(WorkflowRun.id == P.run_id).correlate(P).scalar_subquery()


TRIGGER = aliased(Decision)  # built once (pure; costly to build per request)


def _trigger_seq():
    Trigger = TRIGGER
    return (
        select(Trigger.seq)
        .join(WorkflowRun, WorkflowRun.decision_id == Trigger.id)
        .where(WorkflowRun.id == P.run_id, Trigger.report_id == P.report_id)
        .correlate(P)
        .scalar_subquery()
    )


def _creator(operator_id: str):
    return and_(P.created_by_type == "operator", P.created_by_id == operator_id)


def _pinned(operator_id: str):
    return _made(operator_id, Decision.id == P.decision_id)


def _run(operator_id: str):
    return _made(operator_id, Decision.id == _run_decision())


def _prepared(operator_id: str):
    return _made(operator_id, Decision.seq >= func.coalesce(_trigger_seq(), 0), Decision.created_at <= P.created_at)


def _appeal(operator_id: str):
    return exists().where(
        AppealCorrection.proposal_id == P.id,
        AppealDecision.id == AppealCorrection.appeal_decision_id,
        AppealDecision.maker_id == operator_id,
    )


def _original(operator_id: str):
    contested = select(Appeal.decision_id).join(AppealCorrection, AppealCorrection.appeal_id == Appeal.id)
    contested = contested.where(AppealCorrection.proposal_id == P.id).correlate(P)
    corrected = select(AppealCorrection.original_proposal_id).where(AppealCorrection.proposal_id == P.id)
    enforced = select(Original.decision_id).where(Original.id == _original_id(corrected.correlate(P).scalar_subquery()))
    enforced = enforced.correlate(P)
    return _made(operator_id, or_(Decision.id.in_(contested), Decision.id.in_(enforced)))


def _emergency_actor(operator_id: str):
    corrected = select(AppealCorrection.original_proposal_id).where(AppealCorrection.proposal_id == P.id)
    original = _original_id(corrected.correlate(P).scalar_subquery())
    return exists().where(EmergencyReview.proposal_id == original, EmergencyReview.acted_by == operator_id)


MAKER_CLAUSES: dict[MakerSource, Callable[[str], object]] = {
    MakerSource.CREATOR: _creator,
    MakerSource.PINNED_DECISION: _pinned,
    MakerSource.RUN_DECISION: _run,
    MakerSource.PREPARED_DECISIONS: _prepared,
    MakerSource.APPEAL_DECISION: _appeal,
    MakerSource.ORIGINAL_DECISION: _original,
    MakerSource.EMERGENCY_ACTOR: _emergency_actor,
}
if set(MAKER_CLAUSES) != set(MakerSource):  # a new source needs its SQL here too
    raise RuntimeError(f"maker sources without a SQL clause: {set(MakerSource) - set(MAKER_CLAUSES)}")


def is_a_maker(operator_id: str):
    """SQL: the operator is one of the proposal's makers (`makers`, as a WHERE clause)."""
    return or_(*(clause(operator_id) for clause in MAKER_CLAUSES.values()))
