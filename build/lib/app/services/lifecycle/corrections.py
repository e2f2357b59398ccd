"""Appeal corrections: undo the enforcement of a decision an appeal overturned
(SPEC CORR-1..4).

A correction is prepared when an appeal decision is ``modified`` or ``reversed``.
The case conditions (`case_problems`, CORR-1) are checked when preparing, at
approval, before every delivery attempt, and inside the guarded receipt write;
when one stops holding the correction fails with
``appeal_correction_precondition_changed`` and nothing is sent.

The approver's eligibility (CORR-2) is decided once, when they approve or record
the correction (`correction_problems`), and bound there with the payload digest:
deactivating the approver or removing their reviewer role afterwards does not
fail the delivery, a retry or the receipt (FOUR-7: nothing approved is stranded;
FOUR-9: one admin alone cannot in effect cancel an approved action). The
rationale's text is no condition at all: the correction follows the appeal
decision's outcome, so redacting the rationale (privacy) stops nothing.
"""

from __future__ import annotations

from dataclasses import dataclass

from sqlalchemy import select

from app.domain import case_states as cs
from app.domain.clock import utcnow
from app.domain.digests import canonical_json
from app.domain.errors import ActionError
from app.domain.maker_checker import REVIEWER_ROLE
from app.domain.proposal.makers import verdict
from app.domain.states import ProposalState
from app.models import (
    ActionProposal,
    Appeal,
    AppealCorrection,
    AppealDecision,
    OperatorUser,
    Report,
    move_row,
)
from app.services.cases.snapshot import latest_decision
from app.services.lifecycle.maker_lookup import correction_facts, facts_of

CORRECTABLE_OUTCOMES = ("modified", "reversed")
C, M = cs.CorrectionState, cs.CorrectionMove


@dataclass(frozen=True)
class CorrectionContext:
    correction: AppealCorrection
    appeal_decision: AppealDecision
    appeal: Appeal
    report: Report
    original: ActionProposal


def load_context(session, correction: AppealCorrection, lock: bool = False) -> CorrectionContext:
    """The rows a correction's eligibility depends on (locked on PostgreSQL when asked)."""

    def get(model, id):
        return session.get(model, id, with_for_update=lock) if lock else session.get(model, id)

    return CorrectionContext(
        correction=correction,
        appeal_decision=get(AppealDecision, correction.appeal_decision_id),
        appeal=get(Appeal, correction.appeal_id),
        report=get(Report, correction.report_id),
        original=session.get(ActionProposal, correction.original_proposal_id),
    )


def reviewer_problem(session, correction: AppealCorrection, reviewer_id: str | None, you: bool = False) -> str | None:
    """Why the reviewer may not approve or record this correction (CORR-2, FOUR-1), or None.

    The reviewer must be active, hold the reviewer role and be none of the
    correction's makers: the makers of its proposal when it has one (which include
    the appeal decision's and the original decision's), else those two.

    Args:
        you: word the reason for the reviewer themselves (the console) rather than
            about "the approver" (the recorded checks).
    """
    if reviewer_id is None:
        return None
    reviewer = session.get(OperatorUser, reviewer_id)
    if reviewer is None or not reviewer.active or REVIEWER_ROLE not in reviewer.roles:
        return "Only active reviewers can approve corrections." if you else "The approver must be an active reviewer."
    proposal = session.get(ActionProposal, correction.proposal_id) if correction.proposal_id else None
    facts = facts_of(session, proposal) if proposal is not None else correction_facts(session, correction)
    allowed = verdict(reviewer_id, reviewer.roles, facts)
    if allowed:
        return None
    return allowed.reason if you else "The approver took part in making this correction."


def case_problems(
    session,
    correction: AppealCorrection,
    target: dict | None = None,
    preconditions: dict | None = None,
    lock: bool = False,
) -> list[str]:
    """Every CORR-1 condition of the case that does not hold (empty: eligible).

    These are what the correction relies on until its receipt: checked when
    preparing, at approval, before every delivery attempt and inside the guarded
    receipt write (CORR-3). The rationale's text is not one: the correction follows
    the appeal decision's outcome, and a redacted rationale (privacy) changes it not.

    Args:
        correction: the correction row.
        target: the correction proposal's target, when one exists.
        preconditions: the correction proposal's preconditions, when one exists.
        lock: lock the appeal decision, appeal and report rows (the receipt write).
    """
    ctx = load_context(session, correction, lock)
    ad, report, original = ctx.appeal_decision, ctx.report, ctx.original
    # Targets compare as canonical text, the form they were recorded in: as Python
    # values, true would equal 1.
    recorded_target = canonical_json(correction.original_target)
    problems = []
    if report.state != cs.ReportState.APPEALED:
        problems.append("The report is no longer appealed.")
    waiting = ad.completion_state == cs.CompletionState.WAITING and not ad.correction_confirmed_at
    if ad.outcome not in CORRECTABLE_OUTCOMES or not waiting:
        problems.append("The appeal decision is no longer waiting for a correction.")
    if original is None or original.state != ProposalState.APPLIED or original.confirmed_at is None:
        problems.append("The original action is not applied and confirmed.")
    elif (original.operation_id, canonical_json(original.target)) != (
        correction.original_operation_id,
        recorded_target,
    ) or original.payload_digest != correction.original_payload_digest:
        problems.append("The original action is not the one recorded on the correction.")
    if target is not None and canonical_json(target) != recorded_target:
        problems.append("The correction's target is not the original action's target.")
    latest = latest_decision(session, report.id)
    if latest is None or latest.id != ctx.appeal.decision_id:
        problems.append("The appeal no longer contests the report's latest decision.")
    if preconditions is not None and (
        preconditions.get("appeal_decision_id") != ad.id
        or preconditions.get("original_payload_digest") != correction.original_payload_digest
        or preconditions.get("latest_decision_id") != ctx.appeal.decision_id
    ):
        problems.append("The correction's preconditions do not name this appeal decision and original action.")
    if _newer_upheld(session, report.id, ad):
        problems.append("A newer appeal decision upheld the original decision.")
    if correction.integration_id != report.integration_id:
        problems.append("The correction belongs to another integration.")
    return problems


def correction_problems(
    session,
    correction: AppealCorrection,
    target: dict | None = None,
    preconditions: dict | None = None,
    lock: bool = False,
) -> list[str]:
    """The CORR-1 case conditions and the CORR-2 approver check, at approval (empty: eligible).

    Call it when ``correction.approved_by`` was just set (the approval, a manual
    record) or when none is set yet (preparing). After approval the approver is
    bound: deliveries, retries and receipts check `case_problems` only (FOUR-7, FOUR-9).

    Args: as `case_problems`.
    """
    problems = case_problems(session, correction, target, preconditions, lock)
    reviewer = reviewer_problem(session, correction, correction.approved_by)
    if reviewer:
        problems.append(reviewer)
    return problems


def _newer_upheld(session, report_id: str, ad: AppealDecision) -> bool:
    return (
        session.scalar(
            select(AppealDecision.id)
            .join(Appeal, Appeal.id == AppealDecision.appeal_id)
            .where(
                Appeal.report_id == report_id,
                AppealDecision.created_at > ad.created_at,
                AppealDecision.outcome == "upheld",
            )
            .limit(1)
        )
        is not None
    )


def check_correction_eligible(session, proposal: ActionProposal, lock: bool = False) -> None:
    """Raise unless an appeal correction proposal may still be delivered (CORR-1, CORR-3).

    Before a delivery attempt, a retry and inside the receipt write: the case
    conditions only. The approver was checked when they approved, bound to the
    digest; neither their deactivation, nor the loss of their role, nor a redacted
    rationale fails an approved correction (FOUR-7, FOUR-9).

    Raises:
        ActionError: ``appeal_correction_precondition_changed``.
    """
    correction = session.scalar(select(AppealCorrection).where(AppealCorrection.proposal_id == proposal.id))
    if correction is None or correction.mode != "automated" or correction.appeal_id != proposal.appeal_id:
        raise ActionError("appeal_correction_precondition_changed")
    if case_problems(session, correction, proposal.target, proposal.preconditions, lock=lock):
        raise ActionError("appeal_correction_precondition_changed")


def _following(state: str, proposal: ActionProposal, now) -> tuple[cs.CorrectionMove, dict] | None:
    """The move an automated correction in `state` takes after its proposal, and the
    columns it sets with it; None when it stays as it is (FOUR-7, CORR-4)."""
    if proposal.state == ProposalState.APPLIED:
        return M.CONFIRM, {"confirmed_at": now, "last_error_code": None}
    if proposal.is_terminal:
        # one already failed keeps its code: its proposal ended the same way
        return (M.PROPOSAL_ENDED, {"last_error_code": proposal.last_error_code}) if state != C.FAILED else None
    if state == C.FAILED:  # retried: a new delivery cycle is under way
        return M.PROPOSAL_RETRIED, {"last_error_code": None}
    return None


def reconcile_appeal_completion(uow, report_id: str) -> None:
    """Complete appeal decisions whose corrections are all confirmed (CORR-4).

    A correction is confirmed when its proposal is applied (automated) or a reviewer
    recorded it (manual); a correction whose proposal failed for good is marked
    failed, and proposed again when that proposal is retried (FOUR-7). When every
    correction of a waiting appeal decision is confirmed, the decision is completed
    and the report closed.
    """
    from app.services.uow import Actor

    session = uow.session
    now = utcnow()
    corrections = session.scalars(select(AppealCorrection).where(AppealCorrection.report_id == report_id)).all()
    for correction in corrections:
        if correction.mode != "automated" or correction.proposal_id is None or correction.state == C.CONFIRMED:
            continue
        # A failed correction is looked at again: its proposal may have been retried (FOUR-7).
        proposal = session.get(ActionProposal, correction.proposal_id)
        followed = _following(correction.state, proposal, now)
        if followed is not None:
            move_row(session, correction, followed[0], values=followed[1])
    by_decision: dict[str, list[AppealCorrection]] = {}
    for correction in corrections:
        by_decision.setdefault(correction.appeal_decision_id, []).append(correction)
    for decision_id, group in by_decision.items():
        ad = session.get(AppealDecision, decision_id)
        if ad.completion_state != cs.CompletionState.WAITING or not all(c.state == C.CONFIRMED for c in group):
            continue
        move_row(session, ad, cs.CompletionMove.COMPLETE, values={"correction_confirmed_at": now})
        move_row(session, session.get(Report, report_id), cs.ReportMove.CLOSE)
        uow.audit(
            ad.installation_id,
            f"appeal-decision-completed:{ad.id}",
            "appeal.decision_completed",
            Actor.system("corrections"),
            "appeal_decision",
            ad.id,
            {"corrections": [c.id for c in group], "report_state": "closed"},
        )
