"""Whether an operator may propose ending a temporary action now or extending it,
and which refusal comes first (SPEC TEMP-3, FOUR-7).

Pure: the service (`app.services.lifecycle.reversals.propose_change`) loads the
action and its active reversal, asks `request_refusal`, `original_refusal` and
`decide_change` in that order, and writes the new reversal only when none refuses.
The durations and the replacement itself are `app.domain.proposal.temporary`'s.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from app.domain.errors import ActionError
from app.domain.proposal.cancel import CHANGE_ROLES
from app.domain.proposal.delivery import Delivery
from app.domain.proposal.temporary import REPLACEMENT_KINDS, change_refusal, check_duration, replacement_refusal
from app.domain.states import is_effective

MAX_KEY = 200
FORBIDDEN = "forbidden"
CHANGE_INVALID = "action_temporary_change_invalid"
KEY_INVALID = "idempotency_key_invalid"
NOT_TEMPORARY = "action_not_temporary"
ENDED = "action_temporary_ended"
REVERSAL_FAILED = "action_reversal_failed"


@dataclass(frozen=True)
class Refusal:
    """Why the change is refused: HTTP status, error code and the field it names."""

    status: int
    code: str
    field: str | None = None


@dataclass(frozen=True)
class ChangeDecision:
    """What `decide_change` found: a refusal, or the new end (``extend`` only)."""

    refusal: Refusal | None = None
    new_end: datetime | None = None


def request_refusal(kind: Any, roles: Iterable[str], idempotency_key: Any) -> Refusal | None:
    """The checks before anything is loaded (TEMP-3), in this order.

    Args:
        kind: ``end_now`` or ``extend`` (anything else is refused).
        roles: the operator's roles; one of `CHANGE_ROLES` is needed.
        idempotency_key: a string of 1..200 characters.

    Returns:
        403 ``forbidden``, 400 ``action_temporary_change_invalid``, 400
        ``idempotency_key_invalid``, or None.
    """
    if not CHANGE_ROLES & set(roles):
        return Refusal(403, FORBIDDEN)
    if kind not in REPLACEMENT_KINDS:
        return Refusal(400, CHANGE_INVALID)
    if not isinstance(idempotency_key, str) or not 1 <= len(idempotency_key) <= MAX_KEY:
        return Refusal(400, KEY_INVALID)
    return None


def original_refusal(temporary: dict | None, state: str) -> Refusal | None:
    """409 ``action_not_temporary`` unless the action is a temporary one in force
    (applied, or applied with its compensation pending) (TEMP-3)."""
    if not temporary or not is_effective(state):
        return Refusal(409, NOT_TEMPORARY)
    return None


def decide_change(
    kind: str, current: Delivery | None, extend_seconds: Any, applied_at: datetime | None, now: datetime
) -> ChangeDecision:
    """Whether "end now" or "extend" may be proposed against the active reversal
    (TEMP-3, FOUR-7), checked after a replay of the same key was ruled out.

    A reversal that failed for good leaves the action in force: it may be ended now
    (under four-eyes), never extended. Otherwise the active reversal must not have
    been sent (no attempt yet, not applied). An extension counts from the active
    reversal's end (from now when an approved "end now" waits to be sent).

    Args:
        kind: ``end_now`` or ``extend`` (checked by `request_refusal`).
        current: the active reversal as read (`delivery_of`), or None when there is none.
        extend_seconds: for ``extend``: seconds added to the current end.
        applied_at: when the action was applied (its confirmation time).
        now: the time of the request (UTC).

    Returns:
        A refusal (409 ``action_reversal_failed``, 409 ``action_temporary_ended``,
        400 ``action_duration_invalid`` on ``extend_seconds``) or the new end.
    """
    ended = change_refusal(kind, current)  # FOUR-7: a failed reversal is retried or ended now, not extended
    if ended is not None:
        return ChangeDecision(Refusal(409, ended))
    new_end = None
    if kind == "extend":
        try:
            seconds = check_duration(extend_seconds)
        except ActionError as error:
            return ChangeDecision(Refusal(400, error.code, "extend_seconds"))
        # An approved "end now" waiting to be sent ends the action now: extend from now.
        new_end = (current.not_before or now) + timedelta(seconds=seconds)
    refusal = replacement_refusal(kind, applied_at, new_end, now)
    if refusal is not None:
        return ChangeDecision(Refusal(400, refusal, "extend_seconds"))
    return ChangeDecision(new_end=new_end)
