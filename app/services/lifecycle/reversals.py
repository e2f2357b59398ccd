"""Temporary and scheduled actions: schedule a reversal when its action is applied,
create missing ones, end early, extend, cancel (SPEC TEMP-1..4).

The rules live in `app.domain.proposal.temporary`; this module loads, writes through
guarded moves, audits, and lets the unit of work commit. The reversal is created in
the same transaction as the receipt that applied its action, so it exists as soon
as the action does; the sweep (`create_missing_reversals`) covers anything older.
"""

from __future__ import annotations

import logging
import uuid
from dataclasses import dataclass
from typing import Any

from sqlalchemy import and_, exists, select
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import aliased

from app.domain.clock import iso, utcnow
from app.domain.errors import ApiError
from app.domain.proposal import temporary as temporary_rules
from app.domain.proposal import temporary_change as change
from app.domain.states import ProposalState, is_dead_letter
from app.models import (
    ActionProposal,
    AppealCorrection,
    OperatorUser,
    Report,
    move_proposal,
    predicates,
)
from app.queueing import enqueue_delivery
from app.services.lifecycle.action_targets import destination_of
from app.services.lifecycle.proposals import (
    add_inherited_approval,
    approval_of_digest,
    delivery_of,
    guard,
    insert_proposal,
    original_facts,
)
from app.services.uow import Actor, UnitOfWork, unit_of_work

log = logging.getLogger(__name__)
S = ProposalState
P = ActionProposal
BATCH = 200
REFUSALS = {
    "forbidden": "Your role cannot change temporary actions.",
    "idempotency_key_invalid": "An idempotency key of 1 to 200 characters is required.",
    "action_not_temporary": "This action is not a temporary action that is in force.",
    "action_temporary_ended": "The temporary action has already ended (its reversal was sent).",
    "action_temporary_changed": "The reversal is being sent right now. Refresh the action and try again.",
    "action_duration_invalid": "The new end must be at least a minute away and within 366 days of the action.",
    "action_temporary_change_invalid": "Choose end now or extend.",
    "action_not_scheduled": "Only a proposal with a not-before time can be cancelled.",
    "action_already_sent": "The proposal was already sent (or is being sent); it can no longer be cancelled.",
    "action_reversal_not_cancellable": "A scheduled reversal is ended early or extended, with a second person, "
    "never cancelled.",
    "action_reversal_superseded": "An approved end now or extension replaced this reversal; retry that one instead.",
    "action_reversal_failed": "The reversal failed for good, so the temporary action is still in force: retry the "
    "reversal from its page, or propose ending it now, to end it.",
}


def _destination(session, original: ActionProposal):
    """Where the reversal of a temporary action goes and how its answer is read (FOUR-5):
    its component version's, as in force; None when that version is gone (its delivery
    then fails with the component's own error)."""
    from app.models import ComponentVersion

    reversal = (original.temporary or {}).get("reversal") or {}
    component = session.get(ComponentVersion, reversal.get("component_version_id") or "")
    return destination_of(session, component) if component is not None else None


def reversals_of(session, original_id: str) -> list[ActionProposal]:
    """Every reversal of a temporary action (scheduled, replacements), newest first."""
    return list(
        session.scalars(
            select(P).where(P.reverses_proposal_id == original_id).order_by(P.created_at.desc(), P.id.desc())
        )
    )


def _enqueue_at_due(uow: UnitOfWork, proposal: ActionProposal) -> None:
    """A delivery job for when the proposal is due (the sweep enqueues it too, TEMP-2)."""
    due = proposal.next_attempt_at or utcnow()
    delay = max(0.0, (due - utcnow()).total_seconds())
    proposal_id, cycle, attempts = proposal.id, proposal.delivery_cycle, proposal.delivery_attempt_count
    uow.after_commit(lambda: enqueue_delivery(proposal_id, cycle, attempts, delay, tag="due"))


def schedule_reversal(uow: UnitOfWork, original: ActionProposal) -> ActionProposal | None:
    """Create the reversal of a temporary action that was just applied (TEMP-2).

    Queued for applied time + duration, authorized by the action's own approval: an
    approval row for the reversal's digest records that authorization, naming the
    approval it comes from (no second person is asked). Idempotent: an existing
    reversal is returned unchanged.

    Args:
        uow: the unit of work that records the applied receipt (or the sweep's).
        original: the applied temporary action (its ``confirmed_at`` set).

    Returns:
        The reversal, or None when the action is not temporary.
    """
    if not original.temporary or original.confirmed_at is None:
        return None
    session = uow.session
    operation = temporary_rules.reversal_operation_id(original.operation_id)
    existing = session.scalar(select(P).where(P.operation_id == operation))
    if existing is not None:
        return existing
    approval = approval_of_digest(session, original)
    authorized_by = approval.id if approval else None
    new = temporary_rules.reversal_proposal(
        original_facts(original), original.confirmed_at, authorized_by, _destination(session, original)
    )
    reversal = insert_proposal(session, new)
    if approval is not None:
        add_inherited_approval(
            session, approval, reversal, key_prefix="reversal-authorized-by", at=original.confirmed_at,
            reason=f"Authorized by approval {approval.id} of {original.id}: its digest covered this reversal.",
        )
    uow.audit(
        original.installation_id,
        f"action-reversal-scheduled:{original.operation_id}",
        "action.reversal_scheduled",
        Actor.system(original.run_id),
        "action_proposal",
        reversal.id,
        new.audit_details,
    )
    _enqueue_at_due(uow, reversal)
    return reversal


def _undone_original(session, proposal: ActionProposal) -> str | None:
    """The action an applied correction or compensation undid, if any."""
    if proposal.compensates_proposal_id:
        return proposal.compensates_proposal_id
    if proposal.appeal_id:
        return session.scalar(
            select(AppealCorrection.original_proposal_id).where(AppealCorrection.proposal_id == proposal.id)
        )
    return None


def _cancel(uow: UnitOfWork, proposal: ActionProposal, code: str, action: str, actor: Actor, details: dict) -> bool:
    """Cancel one proposal nothing was sent for, with its open task, audited (TEMP-3/4)."""
    from app.services.cases.tasks import cancel_open_tasks

    change = temporary_rules.cancel(delivery_of(proposal), code)
    if change is None or not move_proposal(
        uow.session, proposal.id, change.move, where=guard(change), values=change.values
    ):
        return False
    uow.session.refresh(proposal)
    cancel_open_tasks(uow, proposal.id, reason=code)
    uow.audit(
        proposal.installation_id,
        f"{action}:{proposal.id}",
        action,
        actor,
        "action_proposal",
        proposal.id,
        {"error_code": code, "not_before": iso(proposal.not_before) if proposal.not_before else None, **details},
    )
    return True


def on_applied(uow: UnitOfWork, proposal: ActionProposal) -> None:
    """What an applied receipt means for temporary actions (TEMP-2, TEMP-3).

    A temporary action gets its reversal; an appeal correction (or a compensation)
    that undid a temporary action cancels that action's scheduled reversal and any
    pending "end now"/"extend" (audited). A reversal already being sent is not
    cancelled: it lost nothing (its effect is the correction's), and a scheduled one
    that a worker read before this commit is refused by its claim's guarded write.
    """
    if proposal.temporary:
        schedule_reversal(uow, proposal)
        return
    original_id = _undone_original(uow.session, proposal)
    if original_id is None:
        return
    actor = Actor.system(proposal.run_id)
    for reversal in reversals_of(uow.session, original_id):
        _cancel(
            uow,
            reversal,
            temporary_rules.UNDONE,
            "action.reversal_cancelled",
            actor,
            {"reverses_proposal_id": original_id, "undone_by_proposal_id": proposal.id},
        )


def create_missing_reversals(now) -> int:
    """Sweep: create the reversal of every applied temporary action that has none
    (TEMP-2); due ones are then enqueued with every other due delivery. Safe to run
    twice at once: the reversal's operation id is unique."""
    from app.extensions import db

    Reversal = aliased(ActionProposal)
    missing = ~exists().where(and_(Reversal.reverses_proposal_id == P.id, Reversal.created_by_type == "system"))
    ids = db.session.scalars(
        select(P.id)
        .where(P.temporary.is_not(None), predicates.effective(), missing)
        .limit(BATCH)
    ).all()
    db.session.rollback()
    created = 0
    for proposal_id in ids:
        try:
            with unit_of_work() as uow:
                original = uow.session.get(P, proposal_id)
                if schedule_reversal(uow, original) is not None:
                    uow.commit()
                    created += 1
        except IntegrityError:  # another sweep created it a moment ago
            log.info("reversal of %s created concurrently", proposal_id)
    return created


# -- operators: end early, extend (cancel: `app.services.lifecycle.cancel_scheduled`) ----------


def _load(session, proposal_id: str, operator: OperatorUser) -> ActionProposal:
    proposal = session.get(P, proposal_id)
    if proposal is None or proposal.installation_id != operator.installation_id:
        raise ApiError(404, "action_not_found", "No such action proposal.")
    return proposal


@dataclass(frozen=True)
class ChangeResult:
    proposal_id: str
    payload_digest: str
    state: str
    idempotent_replay: bool


def active_reversal(session, original_id: str) -> ActionProposal | None:
    """The reversal that will end a temporary action: the newest one not cancelled or
    rejected (queued, being sent, or applied)."""
    for reversal in reversals_of(session, original_id):
        if temporary_rules.is_active_reversal(reversal.state):
            return reversal
    return None


def superseded(session, reversal: ActionProposal) -> bool:
    """Whether an approved "end now" or "extend" replaced this reversal (TEMP-3): then
    retrying it would end the temporary action on one person's say (FOUR-1)."""
    if not reversal.reverses_proposal_id:
        return False
    current = active_reversal(session, reversal.reverses_proposal_id)
    return current is not None and current.id != reversal.id


def propose_change(
    proposal_id: str,
    *,
    kind: str,
    operator: OperatorUser,
    idempotency_key: str,
    extend_seconds: Any = None,
) -> ChangeResult:
    """Propose ending a temporary action now, or extending it (TEMP-3).

    The proposal is a new reversal that needs a second person (FOUR-1: its proposer
    and the makers of the decision it carries may not approve it); once approved it
    replaces the scheduled reversal (`replace_scheduled`).

    Args:
        proposal_id: the applied temporary action.
        kind: ``end_now`` or ``extend``.
        operator: a moderator, reviewer or admin.
        idempotency_key: 1..200 characters; the same key replays the same proposal.
        extend_seconds: for ``extend``: seconds added to the current end (integer).

    Raises:
        ApiError: 403 ``forbidden``; 404 ``action_not_found``; 400
            ``action_temporary_change_invalid``, ``idempotency_key_invalid``,
            ``action_duration_invalid``; 409 ``action_not_temporary``,
            ``action_temporary_ended``, ``action_reversal_failed`` (an extension
            while its reversal failed for good: the action is still in force, TEMP-3;
            "end now" is then allowed, under four-eyes like any, FOUR-7).
    """
    from app.services.cases.tasks import open_approval_task

    _refuse(change.request_refusal(kind, operator.roles, idempotency_key))
    with unit_of_work() as uow:
        session = uow.session
        original = _load(session, proposal_id, operator)
        _refuse(change.original_refusal(original.temporary, original.state))
        operation = f"{temporary_rules.reversal_operation_id(original.operation_id)}:{kind}:{idempotency_key}"
        existing = session.scalar(select(P).where(P.operation_id == operation))
        if existing is not None:
            return ChangeResult(existing.id, existing.payload_digest, existing.state, True)
        now = utcnow()
        active = active_reversal(session, original.id)
        current = delivery_of(active) if active is not None else None
        decision = change.decide_change(kind, current, extend_seconds, original.confirmed_at, now)
        _refuse(decision.refusal)
        new = temporary_rules.replacement_proposal(
            original_facts(original),
            kind=kind,
            new_end=decision.new_end,
            token=uuid.uuid4().hex,
            idempotency_key=idempotency_key,
            operator_id=operator.id,
            now=now,
            destination=_destination(session, original),
        )
        proposal = insert_proposal(session, new)
        report = session.get(Report, original.report_id)
        open_approval_task(
            uow, proposal, task_id=new.task_id, queue_id=report.queue_id, extra={"reverses_proposal_id": original.id}
        )
        uow.audit(
            original.installation_id,
            f"action-temporary-change:{operation}",
            "action.temporary_change_proposed",
            Actor("operator", operator.id),
            "action_proposal",
            new.id,
            new.audit_details,
        )
        result = ChangeResult(new.id, new.payload_digest, new.state, False)
        uow.commit()
    return result


def _refuse(refusal: change.Refusal | None) -> None:
    """Raise the domain's refusal as an API error, with its words.

    Raises:
        ApiError: the refusal's status, code and field.
    """
    if refusal is not None:
        raise ApiError(refusal.status, refusal.code, REFUSALS[refusal.code], refusal.field)


def replace_scheduled(uow: UnitOfWork, replacement: ActionProposal, approver: OperatorUser) -> None:
    """An approved "end now"/"extend" replaces the scheduled reversal (TEMP-3): the one
    scheduled before is cancelled in the same transaction, guarded on nothing having
    been sent for it.

    Raises:
        ApiError: 409 ``action_temporary_ended`` when a reversal was already sent
            (the approval is not recorded); 409 ``action_temporary_changed`` when one
            is being sent right now.
    """
    actor = Actor("operator", approver.id)
    for other in reversals_of(uow.session, replacement.reverses_proposal_id):
        if other.id == replacement.id or not temporary_rules.is_active_reversal(other.state):
            continue
        if is_dead_letter(other.state, other.delivery_terminal):
            continue  # failed for good: it will not run unless an operator retries it
        if other.state == S.APPLIED:
            raise ApiError(409, "action_temporary_ended", REFUSALS["action_temporary_ended"])
        details = {"reverses_proposal_id": replacement.reverses_proposal_id, "replaced_by": replacement.id}
        if not _cancel(uow, other, temporary_rules.SUPERSEDED, "action.reversal_superseded", actor, details):
            raise ApiError(409, "action_temporary_changed", REFUSALS["action_temporary_changed"])
