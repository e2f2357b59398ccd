"""Which operator actions a proposal offers, in its state, to the operator looking
at it (SPEC §4 proposal detail and approval tasks, APPR-4, RTRY-1, COMP-1, FOUR-1).

Each action is an `Offer`: ``shown`` when the proposal's state and the operator's
role make it a possibility at all, and ``allowed`` when this operator may take it
now (otherwise ``reason`` says why, beside the disabled control). Views and
templates ask `offers`; the services enforce the same rules on every request.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime

from app.domain.maker_checker import REVIEWER_ROLE, Verdict
from app.domain.states import Move, ProposalState, can, is_dead_letter, is_effective

from .cancel import ASK, CHANGE_ROLES, CONFIRM, CancelFacts, cancel_step
from .delivery import Delivery, awaits_decision
from .makers import MakerFacts, verdict
from .temporary import REPLACEMENT_KINDS, change_refusal

S = ProposalState
OPERATOR_ROLES = ("reviewer", "admin")  # who may retry deliveries and propose compensations


@dataclass(frozen=True)
class Offer:
    """One operator action: shown at all, and open to this operator or why not."""

    shown: bool
    allowed: bool = False
    reason: str | None = None
    kind: str | None = None  # which form of the action, when it has several (cancel: FOUR-9)

    def __bool__(self) -> bool:
        return self.shown and self.allowed

    @classmethod
    def hidden(cls) -> Offer:
        return cls(False)

    @classmethod
    def of(cls, decided: Verdict) -> Offer:
        return cls(True, decided.allowed, decided.reason)


@dataclass(frozen=True)
class Offers:
    decide: Offer  # approve and reject
    retry: Offer
    compensate: Offer
    claim: Offer  # its approval task
    release: Offer
    cancel: Offer = Offer(False)  # a scheduled proposal, before it is sent (TEMP-4, FOUR-9)
    end_now: Offer = Offer(False)  # a temporary action in force (TEMP-3)
    extend: Offer = Offer(False)

    @property
    def approve(self) -> Offer:
        return self.decide

    @property
    def reject(self) -> Offer:
        return self.decide


def decide_offer(d: Delivery, operator_id: str, roles: Iterable[str], facts: MakerFacts, now: datetime) -> Offer:
    """Approve/reject: shown while awaiting approval; open to a reviewer who is not a
    maker, while the authorization lasts (APPR-3, APPR-4, FOUR-1); an item of a bulk
    batch only with its batch (BULK-3)."""
    if not can(Move.APPROVE, d.state):
        return Offer.hidden()
    if d.in_batch:
        return Offer(True, False, "This action is approved or rejected with its bulk batch.")
    allowed = verdict(operator_id, roles, facts)
    if allowed and not awaits_decision(d, now):
        return Offer(True, False, "The authorization expired; the action can no longer be approved.")
    return Offer.of(allowed)


def retry_offer(d: Delivery, roles: Iterable[str], now: datetime) -> Offer:
    """Retry: shown to reviewers and admins for a delivery that failed for good;
    open while the authorization lasts (RTRY-1)."""
    if not is_dead_letter(d.state, d.delivery_terminal) or not dead_letter_retry_offer(roles):
        return Offer.hidden()
    if d.expires_at <= now:
        return Offer(True, False, "The authorization expired; propose the action again instead.")
    return Offer(True, True)


def dead_letter_retry_offer(roles: Iterable[str]) -> Offer:
    """Retry failed deliveries (one, or the dead letters in bulk): open to reviewers
    and admins (RTRY-1, CONN-4)."""
    if not set(roles) & set(OPERATOR_ROLES):
        return Offer.hidden()
    return Offer(True, True)


def temporary_change_offer(
    kind: str, d: Delivery, temporary: bool, reversal: Delivery | None, roles: Iterable[str]
) -> Offer:
    """"End now" or "extend" (`kind`): shown, and open, to a moderator, reviewer or
    admin for a temporary action that took effect while `temporary.change_refusal`
    allows it: its reversal waits unsent (approved or queued), or failed for good
    ("end now" only) (TEMP-3, FOUR-7). Either is a new proposal a second person approves.

    Args:
        kind: ``end_now`` or ``extend``.
        d: the temporary action as read.
        temporary: it carries a temporary plan.
        reversal: its active reversal (`temporary.is_active_reversal`), or None.
    """
    if kind not in REPLACEMENT_KINDS or not temporary or not is_effective(d.state) or not CHANGE_ROLES & set(roles):
        return Offer.hidden()
    if change_refusal(kind, reversal) is not None:
        return Offer.hidden()
    return Offer(True, True, kind=kind)


def compensate_offer(d: Delivery, roles: Iterable[str]) -> Offer:
    """Compensate: shown to reviewers and admins for an applied action that is not
    itself an appeal correction (COMP-1), nor a notice to the affected user (DSA-4)."""
    if not is_effective(d.state) or d.is_correction or d.is_notice or not set(roles) & set(OPERATOR_ROLES):
        return Offer.hidden()
    return Offer(True, True)


def claim_offer(task_state: str | None, operator_id: str, roles: Iterable[str], facts: MakerFacts) -> Offer:
    """Claim the approval task: shown to reviewers while it is open; open to one who
    may decide the proposal — a maker sees it as not theirs to decide (FOUR-1)."""
    if task_state != "open" or REVIEWER_ROLE not in set(roles):
        return Offer.hidden()
    return Offer.of(verdict(operator_id, roles, facts))


def release_offer(task_state: str | None, task_assignee_id: str | None, operator_id: str) -> Offer:
    """Release: the reviewer holding a claimed task gives it back."""
    if task_state != "claimed" or task_assignee_id != operator_id:
        return Offer.hidden()
    return Offer(True, True)


def cancel_offer(d: Delivery, facts: CancelFacts | None, operator_id: str, roles: Iterable[str]) -> Offer:
    """Cancel: shown to operators for a scheduled proposal nothing was sent for yet
    (not a reversal: TEMP-3); its `kind` says what the button does (withdraw, reject,
    ask, confirm, cancel) and a refusal its reason (TEMP-4, FOUR-9, `cancel_step`)."""
    if facts is None:
        return Offer.hidden()
    step = cancel_step(d, facts, operator_id, roles)
    if step.allowed:
        return Offer(True, True, None, step.kind)
    if step.code in ("forbidden", "action_not_scheduled", "action_already_sent", "action_reversal_not_cancellable"):
        return Offer.hidden()
    kind = CONFIRM if step.code == "maker_checker_violation" else ASK
    return Offer(True, False, step.reason, kind)


def offers(
    d: Delivery,
    *,
    operator_id: str,
    roles: Iterable[str],
    facts: MakerFacts,
    now: datetime,
    task_state: str | None = None,
    task_assignee_id: str | None = None,
    cancel: CancelFacts | None = None,
    temporary: bool = False,
    reversal: Delivery | None = None,
) -> Offers:
    """What this operator may do with this proposal now.

    Args:
        d: the proposal as read.
        operator_id, roles: the operator looking at it.
        facts: its maker facts (FOUR-1).
        now: the current time (an expired authorization closes approve and retry).
        task_state, task_assignee_id: its approval task, when it has one.
        cancel: its cancel facts (TEMP-4, FOUR-9); None hides cancel.
        temporary, reversal: it is a temporary action, and its active reversal
            (TEMP-3: end now, extend).
    """
    roles = frozenset(roles)
    return Offers(
        decide=decide_offer(d, operator_id, roles, facts, now),
        retry=retry_offer(d, roles, now),
        compensate=compensate_offer(d, roles),
        claim=claim_offer(task_state, operator_id, roles, facts),
        release=release_offer(task_state, task_assignee_id, operator_id),
        cancel=cancel_offer(d, cancel, operator_id, roles),
        end_now=temporary_change_offer("end_now", d, temporary, reversal, roles),
        extend=temporary_change_offer("extend", d, temporary, reversal, roles),
    )
