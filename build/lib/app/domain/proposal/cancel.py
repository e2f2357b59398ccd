"""Cancelling a scheduled proposal before it is sent (SPEC TEMP-4, FOUR-9): who may,
and whether it takes one person or two.

* A proposal still waiting for approval: one of its makers (FOUR-1) may withdraw it;
  anyone else cancelling it rejects it, so they need the reviewer role.
* An approved proposal (a person's approval of its digest): one person asks, and a
  second person confirms: a reviewer who is neither the one who asked nor a maker.
  An unconfirmed ask does not hold delivery back: holding it would let one person
  delay an approved action until its authorization lapses, which is a rejection on
  one person's say. The ask is recorded and shown; delivery goes ahead at its time.
* Anything else (bounded automation, never approved by a person): one operator
  cancels it, as TEMP-4 always allowed: cancelling sends nothing.

Pure; `app.services.lifecycle.cancel_scheduled.cancel_scheduled` enforces it and the
console's offers (`offers.cancel_offer`) show it.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import datetime

from app.domain.maker_checker import REVIEWER_ROLE
from app.domain.states import ProposalState

from .delivery import Delivery
from .makers import MakerFacts, makers, verdict
from .temporary import cancel_refusal

S = ProposalState
# who may cancel a scheduled proposal and propose "end now"/"extend" (TEMP-3, TEMP-4)
CHANGE_ROLES = frozenset({"moderator", "reviewer", "admin"})
APPROVED_STATES = frozenset({S.APPROVED, S.QUEUED})

CANCEL = "cancel"  # one person cancels at once (nothing approved it)
WITHDRAW = "withdraw"  # a maker withdraws their own proposal before approval
REJECT = "reject"  # a reviewer (not a maker) cancels a proposal awaiting approval: a rejection
ASK = "ask"  # the first person asks to cancel an approved proposal
CONFIRM = "confirm"  # a second person confirms the cancel: it is cancelled
CANCELS_NOW = frozenset({CANCEL, WITHDRAW, REJECT, CONFIRM})

MESSAGES = {
    "forbidden": "Your role cannot cancel actions.",
    "action_cancel_needs_reviewer": "Cancelling a proposal someone else made, before it is approved, rejects it: "
    "only a reviewer who is not one of its makers can do that.",
    "action_cancel_awaiting_second_person": "You asked to cancel this approved action; a second reviewer, "
    "not one of its makers, must confirm. Until then it is sent at its time.",
}


@dataclass(frozen=True)
class CancelFacts:
    """What the cancel rule reads besides the delivery (FOUR-9, TEMP-4).

    Attributes:
        not_before: the proposal's scheduled time (only scheduled ones are cancellable).
        is_reversal: a reversal is ended early or extended instead (TEMP-3).
        approved: a person approved its current digest.
        asked_by: operators who asked to cancel it and wait for a second person.
        makers: its maker facts (FOUR-1).
    """

    not_before: datetime | None
    is_reversal: bool
    approved: bool
    asked_by: frozenset[str] = frozenset()
    makers: MakerFacts = field(default_factory=MakerFacts)


@dataclass(frozen=True)
class CancelStep:
    """What a cancel by this operator does now, or why it is refused.

    Attributes:
        kind: CANCEL, WITHDRAW, REJECT, ASK or CONFIRM; None when refused.
        status, code: the refusal's HTTP status and error code.
        reason: the refusal in words (for the page and the API).
    """

    kind: str | None
    status: int = 200
    code: str | None = None
    reason: str | None = None

    @property
    def allowed(self) -> bool:
        return self.kind is not None

    @classmethod
    def refused(cls, status: int, code: str, reason: str | None = None) -> CancelStep:
        return cls(None, status, code, reason or MESSAGES.get(code))


def cancel_step(d: Delivery, facts: CancelFacts, operator_id: str, roles: Iterable[str]) -> CancelStep:
    """What cancelling this scheduled proposal by this operator does (TEMP-4, FOUR-9).

    Args:
        d: the proposal as read.
        facts: its schedule, approval, pending asks and makers.
        operator_id, roles: who cancels.

    Returns:
        A `CancelStep`: its kind, or a refusal: 403 ``forbidden`` (no operator role),
        403 ``action_cancel_needs_reviewer`` (rejecting needs a reviewer who is not a
        maker), 403 ``maker_checker_violation`` (confirming needs a reviewer who is
        not a maker), 409 ``action_cancel_awaiting_second_person`` (the asker again),
        409 ``action_not_scheduled``, ``action_already_sent``,
        ``action_reversal_not_cancellable`` (TEMP-3/4).
    """
    roles = frozenset(roles)
    if not CHANGE_ROLES & roles:
        return CancelStep.refused(403, "forbidden")
    refusal = cancel_refusal(d, facts.not_before, facts.is_reversal)
    if refusal is not None:
        return CancelStep.refused(409, refusal)
    if d.state == S.APPROVAL_REQUIRED:
        if operator_id in makers(facts.makers):
            return CancelStep(WITHDRAW)
        if REVIEWER_ROLE not in roles:
            return CancelStep.refused(403, "action_cancel_needs_reviewer")
        return CancelStep(REJECT)
    if not (facts.approved and d.state in APPROVED_STATES):
        return CancelStep(CANCEL)
    others = facts.asked_by - {operator_id}
    if not others:
        if operator_id in facts.asked_by:
            return CancelStep.refused(409, "action_cancel_awaiting_second_person")
        return CancelStep(ASK)
    allowed = verdict(operator_id, roles, facts.makers)
    if not allowed:
        reason = f"{allowed.reason} Cancelling an approved action needs a second reviewer who did not make it."
        return CancelStep.refused(403, "maker_checker_violation", reason)
    return CancelStep(CONFIRM)
