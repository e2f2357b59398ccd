"""Cancel a scheduled proposal before it is sent (SPEC TEMP-4, FOUR-9).

The rule is the domain's (`app.domain.proposal.cancel`): a maker withdraws their own
proposal awaiting approval, a reviewer who is not a maker rejects one, and an
approved proposal is cancelled by two people: one asks (audited
``action.cancel_requested``; delivery is not held), a second reviewer who is neither
the asker nor a maker confirms. This module loads the facts, enforces the step,
writes through the guarded cancel of `reversals`, audits, and commits.
"""

from __future__ import annotations

from dataclasses import dataclass

from sqlalchemy import select

from app.domain.clock import iso
from app.domain.errors import ApiError
from app.domain.proposal import cancel as cancel_rules
from app.domain.proposal import temporary
from app.domain.proposal.makers import MakerFacts
from app.models import ActionApproval, ActionProposal, AuditEvent, OperatorUser
from app.services.lifecycle.maker_lookup import facts_of
from app.services.lifecycle.proposals import delivery_of
from app.services.lifecycle.reversals import REFUSALS, _cancel, _load
from app.services.uow import Actor, unit_of_work

ASKED = "action.cancel_requested"


@dataclass(frozen=True)
class CancelResult:
    """The proposal's state after the request, and what the request did (a `cancel_rules` kind)."""

    proposal_id: str
    state: str
    step: str


def cancel_facts(session, proposal: ActionProposal, makers: MakerFacts | None = None) -> cancel_rules.CancelFacts:
    """What the cancel rule reads about `proposal` (FOUR-9): its schedule, whether a
    person approved its digest, who asked to cancel it, and its makers (FOUR-1;
    `makers` when the caller loaded them already)."""
    approved = session.scalar(
        select(ActionApproval.id).where(
            ActionApproval.proposal_id == proposal.id,
            ActionApproval.decision == "approved",
            ActionApproval.payload_digest == proposal.payload_digest,
        )
    )
    asked_by = session.scalars(
        select(AuditEvent.actor_id).where(
            AuditEvent.target_type == "action_proposal",
            AuditEvent.target_id == proposal.id,
            AuditEvent.action == ASKED,
        )
    ).all()
    return cancel_rules.CancelFacts(
        not_before=proposal.not_before,
        is_reversal=proposal.is_reversal,
        approved=approved is not None and proposal.approval_mode == "human",
        asked_by=frozenset(asked_by),
        makers=makers if makers is not None else facts_of(session, proposal),
    )


def cancel_scheduled(proposal_id: str, operator: OperatorUser) -> CancelResult:
    """Cancel a proposal that carries `not_before`, until it is sent (TEMP-4, FOUR-9).

    Cancelled at once when nothing a person approved is undone: bounded automation
    (one operator), or a proposal awaiting approval withdrawn by one of its makers
    or rejected by a reviewer who is not one. An approved proposal needs two people:
    the first call records the ask (``action.cancel_requested``, the state
    unchanged, delivery not held); a second reviewer, neither the asker nor a maker,
    confirms and it is cancelled. Audited ``action.cancelled`` naming the step; the
    run waiting on it resumes on its ``timeout`` port.

    Args:
        proposal_id: the scheduled proposal.
        operator: a moderator, reviewer or admin of its installation.

    Returns:
        A `CancelResult`: its state (``cancelled``, or unchanged after an ask) and the step.

    Raises:
        ApiError: 404 ``action_not_found``; 403 ``forbidden``,
            ``action_cancel_needs_reviewer``, ``maker_checker_violation``; 409
            ``action_cancel_awaiting_second_person``, ``action_not_scheduled``,
            ``action_already_sent``, ``action_reversal_not_cancellable``.
    """
    from app.services.lifecycle.events import emit_delivery_resolution

    if not cancel_rules.CHANGE_ROLES & set(operator.roles):
        raise ApiError(403, "forbidden", cancel_rules.MESSAGES["forbidden"])
    with unit_of_work() as uow:
        proposal = _load(uow.session, proposal_id, operator)
        facts = cancel_facts(uow.session, proposal)
        step = cancel_rules.cancel_step(delivery_of(proposal), facts, operator.id, operator.roles)
        if not step.allowed:
            raise ApiError(step.status, step.code, step.reason or REFUSALS[step.code])
        actor = Actor("operator", operator.id)
        scheduled = iso(proposal.not_before) if proposal.not_before else None
        if step.kind == cancel_rules.ASK:
            uow.audit(
                proposal.installation_id,
                f"action-cancel-requested:{proposal.id}:{operator.id}",
                ASKED,
                actor,
                "action_proposal",
                proposal.id,
                {"requested_by": operator.id, "payload_digest": proposal.payload_digest, "not_before": scheduled},
            )
            result = CancelResult(proposal.id, proposal.state, step.kind)
            uow.commit()
            return result
        details = {"cancelled_by": operator.id, "step": step.kind}
        if step.kind == cancel_rules.CONFIRM:
            details["asked_by"] = sorted(facts.asked_by - {operator.id})
        if not _cancel(uow, proposal, temporary.CANCELLED, "action.cancelled", actor, details):
            raise ApiError(409, "action_already_sent", REFUSALS["action_already_sent"])
        if not proposal.appeal_id:
            emit_delivery_resolution(uow, proposal)
        result = CancelResult(proposal.id, proposal.state, step.kind)
        uow.commit()
        return result
