"""Temporary and scheduled actions: every rule about a duration, the reversal it
plans, `not_before`, ending early, extending and cancelling (SPEC TEMP-1..4).

Pure functions over plain values. The reversal of a temporary action is a proposal
of its own (`reversal_proposal`), created when the action is applied and authorized
by the action's approval, whose digest already covered the duration and the plan.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from app.domain.clock import iso
from app.domain.errors import ActionError
from app.domain.proposal.delivery import Change, Delivery
from app.domain.proposal.destination import Destination
from app.domain.proposal.identity import NewProposal, OriginalFacts, expires_at, following_proposal, for_a_person
from app.domain.proposal.schedule import NOT_BEFORE_INVALID, check_not_before, scheduled_time  # noqa: F401
from app.domain.states import CANCELLABLE_STATES, Move, ProposalState, is_dead_letter

S = ProposalState
MIN_DURATION_SECONDS = 60
MAX_DURATION_SECONDS = 366 * 86_400
# A reversal stays authorized this long past its due time: an outage of weeks delays it
# and never lets it lapse (within ID-3's 31-day bound).
REVERSAL_GRACE_SECONDS = 30 * 86_400
END_NOW_EXPIRY_SECONDS = 7 * 86_400  # an "end now" proposal waits this long for its checker
OVERDUE_GRACE_SECONDS = 5 * 60  # a reversal this late past its time is overdue (Operations, metric)
DURATION_INVALID = "action_duration_invalid"
REVERSAL_INVALID = "action_reversal_invalid"
CANCELLED = "action_cancelled"
SUPERSEDED = "action_reversal_superseded"
UNDONE = "action_reversal_undone_by_correction"
REPLACEMENT_KINDS = ("end_now", "extend")


@dataclass(frozen=True)
class ReversalPlan:
    """The action that undoes a temporary one at its end (TEMP-1)."""

    component_version_id: str
    action_code: str
    target: dict[str, Any]
    payload: dict[str, Any]
    # FOUR-5: where the reversal goes and how its answer is read, approved with the
    # action (the action's digest covers the plan); None in plans made before FOUR-5.
    delivery: dict[str, Any] | None = None

    def as_dict(self) -> dict[str, Any]:
        plan = {
            "component_version_id": self.component_version_id,
            "action_code": self.action_code,
            "target": self.target,
            "payload": self.payload,
        }
        if self.delivery is not None:  # absent otherwise: older plans keep their digest
            plan["delivery"] = self.delivery
        return plan


@dataclass(frozen=True)
class TemporaryPlan:
    """A temporary action's duration and its reversal, as the digest covers them (TEMP-1)."""

    duration_seconds: int
    reversal: ReversalPlan

    def as_dict(self) -> dict[str, Any]:
        return {"duration_seconds": self.duration_seconds, "reversal": self.reversal.as_dict()}

    @classmethod
    def from_dict(cls, value: dict[str, Any]) -> TemporaryPlan:
        """The plan stored on a proposal (``proposal.temporary``)."""
        return cls(value["duration_seconds"], ReversalPlan(**value["reversal"]))


def check_duration(value: Any) -> int:
    """A duration in whole seconds, 60 s .. 366 days (TEMP-1).

    Args:
        value: an integer number of seconds (an integer-valued float such as
            ``604800.0`` is accepted, as JSON numbers are, EDGE-1).

    Raises:
        ActionError: ``action_duration_invalid``.
    """
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    if isinstance(value, bool) or not isinstance(value, int):
        raise ActionError(DURATION_INVALID)
    if not MIN_DURATION_SECONDS <= value <= MAX_DURATION_SECONDS:
        raise ActionError(DURATION_INVALID)
    return value


def temporary_config(component: dict | None, node: dict | None, mapped_duration: Any = None) -> dict | None:
    """The temporary settings of one action (TEMP-1): the workflow node's over the
    component version's, its duration computed by the input mapping when it gives one.

    Args:
        component: the component version's ``temporary`` (or None).
        node: the node config's ``temporary`` (or None).
        mapped_duration: the input mapping's ``duration_seconds`` value, if any.

    Returns:
        {duration_seconds, reversal} merged, or None for a permanent action.

    Raises:
        ActionError: ``action_reversal_invalid`` for a ``temporary`` that is not an object.
    """
    merged: dict[str, Any] = {}
    for layer in (component, node):
        if layer is None:
            continue
        if not isinstance(layer, dict):
            raise ActionError(REVERSAL_INVALID)
        merged.update(layer)
    if mapped_duration is not None:
        merged["duration_seconds"] = mapped_duration
    return merged or None


def plan(config: dict[str, Any], target: dict[str, Any]) -> TemporaryPlan:
    """The checked duration and reversal of a temporary action (TEMP-1).

    Args:
        config: {duration_seconds, reversal: {component_version_id, action_code,
            payload (object, default {}), target (object, default the action's)}}.
        target: the action's own target.

    Raises:
        ActionError: ``action_duration_invalid``; ``action_reversal_invalid`` when the
            reversal does not name a component version, an action code of 1..200
            characters, and object target and payload.
    """
    duration = check_duration(config.get("duration_seconds"))
    reversal = config.get("reversal")
    if not isinstance(reversal, dict):
        raise ActionError(REVERSAL_INVALID)
    component, code = reversal.get("component_version_id"), reversal.get("action_code")
    payload = reversal.get("payload", {})
    reversal_target = reversal.get("target", target)
    if not isinstance(component, str) or not component or not isinstance(code, str) or not 1 <= len(code) <= 200:
        raise ActionError(REVERSAL_INVALID)
    if not isinstance(payload, dict) or not isinstance(reversal_target, dict):
        raise ActionError(REVERSAL_INVALID)
    return TemporaryPlan(duration, ReversalPlan(component, code, reversal_target, payload))


def due_at(applied_at: datetime, duration_seconds: int) -> datetime:
    """When the reversal of an action applied at `applied_at` is due (TEMP-2)."""
    return expires_at(applied_at, duration_seconds)


def format_duration(seconds: float) -> str:
    """``7 days``, ``3 minutes``, ``1 day 2 hours``: the two largest units, for people."""
    seconds = max(0, int(seconds))
    parts = []
    for name, size in (("day", 86_400), ("hour", 3600), ("minute", 60), ("second", 1)):
        count, seconds = divmod(seconds, size)
        if count:
            parts.append(f"{count} {name}{'s' if count != 1 else ''}")
    return " ".join(parts[:2]) or "0 seconds"


def summary(action_code: str, temporary: dict[str, Any]) -> str:
    """What a reviewer approves: ``suspend_account for 7 days, then unsuspend_account`` (TEMP-1)."""
    duration, reversal = temporary["duration_seconds"], temporary["reversal"]["action_code"]
    return f"{action_code} for {format_duration(duration)}, then {reversal}"


def reversal_operation_id(original_operation_id: str) -> str:
    """The one scheduled reversal of an operation (TEMP-2)."""
    return f"reversal:{original_operation_id}"


def _reversal(
    original: OriginalFacts,
    *,
    id_: str,
    operation: str,
    not_before: datetime | None,
    expiry: datetime,
    destination: Destination | None = None,
    delivery: dict[str, Any] | None = None,
    **columns,
) -> NewProposal:
    reversal = TemporaryPlan.from_dict(original.temporary).reversal
    return following_proposal(
        original,
        None if delivery is not None else destination,
        id=id_,
        operation_id=operation,
        action_code=reversal.action_code,
        target=reversal.target,
        payload=reversal.payload,
        preconditions={},
        component_version_id=reversal.component_version_id,
        policy_version_id=original.policy_version_id,
        expires_at=expiry,
        decision_id=original.decision_id,
        not_before=not_before,
        reverses_proposal_id=original.id,
        delivery=delivery,
        **columns,
    )


def reversal_proposal(
    original: OriginalFacts, applied_at: datetime, approval_id: str | None, destination: Destination | None = None
) -> NewProposal:
    """The scheduled reversal of an applied temporary action (TEMP-2): queued for
    applied time + duration, authorized by the action's approval (no second one).

    Args:
        original: the applied action.
        applied_at: when it was applied (its confirmation time).
        approval_id: the approval that authorized the action and its plan (None for
            bounded automation, whose reversal runs under the same budgets).
        destination: the reversal component's delivery in force (FOUR-5), used only
            when the plan carries no approved description (a plan made before FOUR-5):
            otherwise the reversal keeps the delivery approved with the action, and a
            delivery in force that differs is refused when it is due.
    """
    duration = TemporaryPlan.from_dict(original.temporary).duration_seconds
    when = due_at(applied_at, duration)
    expiry = expires_at(when, REVERSAL_GRACE_SECONDS)
    operation = reversal_operation_id(original.operation_id)
    authorized = {"authorized_by_approval_id": approval_id, "authorized_by_digest": original.payload_digest}
    return _reversal(
        original,
        id_=f"{original.id}:reversal",
        operation=operation,
        not_before=when,
        expiry=expiry,
        destination=destination,
        delivery=TemporaryPlan.from_dict(original.temporary).reversal.delivery,
        authority_mode=original.authority_mode,
        approval_mode=original.approval_mode,
        approval_policy={"mode": original.approval_mode, "expires_at": iso(expiry), "reversal": authorized},
        state=S.QUEUED,
        created_by_type="system",
        created_by_id=f"reversal-of:{original.id}",
        created_at=applied_at,
        next_attempt_at=when,
        audit_details={
            "operation_id": operation,
            "reverses_proposal_id": original.id,
            "not_before": iso(when),
            **authorized,
        },
    )


def draws_on_budget(*, is_correction: bool, is_reversal: bool, is_notice: bool = False) -> bool:
    """Whether a delivery reserves against the enforcement budgets (DLV-3, FOUR-7).

    A reversal (scheduled, "end now", "extend") and an appeal correction undo an
    action: they are never refused or deferred for lack of budget, so no one admin
    can keep a temporary action in force by lowering a budget until its reversal
    passes its grace period. A restriction's notice to the affected user (DSA-4)
    restricts nothing and is owed by law once the restriction applied: it never waits
    for budget either. Every other proposal reserves (FOUR-3 for bounded automation).

    Args:
        is_correction: the proposal is an appeal correction.
        is_reversal: the proposal ends a temporary action.
        is_notice: the proposal is a restriction's notice (DSA-4).
    """
    return not (is_correction or is_reversal or is_notice)


def replacement_refusal(kind: str, applied_at: datetime | None, new_end: datetime | None, now: datetime) -> str | None:
    """Why an "end now" or "extend" proposal cannot be made (TEMP-3), or None.

    An extension's new end must be at least a minute away and within 366 days of the
    time the action was applied.
    """
    if kind not in REPLACEMENT_KINDS:
        return "action_temporary_change_invalid"
    if applied_at is None:
        return "action_not_temporary"
    if kind == "extend":
        if new_end is None or new_end < now + timedelta(seconds=MIN_DURATION_SECONDS):
            return DURATION_INVALID
        if (new_end - applied_at).total_seconds() > MAX_DURATION_SECONDS:
            return DURATION_INVALID
    return None


def replacement_proposal(
    original: OriginalFacts,
    *,
    kind: str,
    new_end: datetime | None,
    token: str,
    idempotency_key: str,
    operator_id: str,
    now: datetime,
    destination: Destination | None = None,
) -> NewProposal:
    """An operator's "end now" (reversal as soon as approved) or "extend" (reversal at
    `new_end`): a new reversal under four-eyes that replaces the scheduled one when it
    is approved (TEMP-3). The operator is its maker (FOUR-1).
    """
    not_before = new_end if kind == "extend" else None
    start = new_end if kind == "extend" else now
    expiry = expires_at(start, REVERSAL_GRACE_SECONDS if kind == "extend" else END_NOW_EXPIRY_SECONDS)
    proposal = f"rvs_{token}"
    operation = f"{reversal_operation_id(original.operation_id)}:{kind}:{idempotency_key}"
    return _reversal(
        original,
        id_=proposal,
        operation=operation,
        not_before=not_before,
        expiry=expiry,
        destination=destination,
        created_by_type="operator",
        created_by_id=operator_id,
        created_at=now,
        **for_a_person(proposal, expiry, temporary_change=kind),
        audit_details={
            "operation_id": operation,
            "reverses_proposal_id": original.id,
            "change": kind,
            "not_before": iso(not_before) if not_before else None,
        },
    )


def unsent(d: Delivery) -> bool:
    """Nothing was sent for it and nothing ended it: no attempt claimed, nothing
    accepted, not terminal, in a state a cancel starts from (TEMP-3, TEMP-4). The one
    rule the cancel refusal, the guarded cancel and the "end now"/"extend" offer ask."""
    return (
        d.state in CANCELLABLE_STATES
        and d.delivery_attempt_count == 0
        and d.accepted_at is None
        and not d.delivery_terminal
    )


def is_active_reversal(state: str) -> bool:
    """Whether a reversal of a temporary action is the one that will end it (TEMP-2,
    TEMP-3): approved or on its way, sent, or ended (not cancelled, rejected or still
    awaiting its approval)."""
    return state not in (S.CANCELLED, S.REJECTED, S.APPROVAL_REQUIRED)


def waits_scheduled(d: Delivery) -> bool:
    """A scheduled proposal nothing was sent for yet: the page counts down to its
    `not_before` and follows it (TEMP-4)."""
    return d.not_before is not None and unsent(d)


def change_refusal(kind: str, active: Delivery | None) -> str | None:
    """Why "end now" or "extend" cannot be proposed for a temporary action in force,
    from its active reversal (TEMP-3, FOUR-7), or None.

    Args:
        kind: ``end_now`` or ``extend``.
        active: the reversal that will end the action (`active_reversal`), or None.

    Returns:
        ``action_reversal_failed`` for an extension once the reversal failed for good
        (retrying it, or ending now under four-eyes, ends the action);
        ``action_temporary_ended`` when no reversal waits unsent (none, or one was
        sent or applied); None when the change may be proposed: the reversal waits
        unsent, approved or queued (an approved "end now" not sent yet included).
    """
    if active is not None and is_dead_letter(active.state, active.delivery_terminal):
        return None if kind == "end_now" else "action_reversal_failed"
    if active is None or not unsent(active):
        return "action_temporary_ended"
    return None


def cancel_refusal(d: Delivery, not_before: datetime | None, is_reversal: bool) -> str | None:
    """Why an operator cannot cancel a scheduled proposal (TEMP-4), or None.

    Only a proposal with a `not_before` that nothing was sent for yet; a scheduled
    reversal is ended early or extended under four-eyes instead (TEMP-3), so that no
    one person can make a temporary action permanent.
    """
    if is_reversal:
        return "action_reversal_not_cancellable"
    if not_before is None:
        return "action_not_scheduled"
    if not unsent(d):
        return "action_already_sent"
    return None


def cancel(d: Delivery, code: str = CANCELLED) -> Change | None:
    """Cancel a proposal nothing was sent for (TEMP-3, TEMP-4): guarded on its state and
    on no attempt having been claimed, so it loses every race with a worker's claim.

    Returns:
        None when it is no longer cancellable (claimed, sent, ended).
    """
    if not unsent(d):
        return None
    values = {"delivery_terminal": True, "lease_expires_at": None, "last_error_code": code}
    expect = {"state": d.state, "delivery_attempt_count": 0, "delivery_terminal": False, "accepted_at": None}
    return Change(Move.CANCEL_SCHEDULED, values, expect)


def time_left(not_before: datetime | None, now: datetime) -> float | None:
    """Seconds until a scheduled proposal may be sent (the console's countdown), or None."""
    if not_before is None:
        return None
    return max(0.0, (not_before - now).total_seconds())


def is_overdue(not_before: datetime | None, now: datetime) -> bool:
    """A reversal still unsent five minutes past its time (Operations, metric)."""
    return not_before is not None and (now - not_before).total_seconds() > OVERDUE_GRACE_SECONDS
