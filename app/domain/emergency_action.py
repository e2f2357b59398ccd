"""Emergency action, reviewed afterwards (SPEC POL-6): who may act alone, what makes
a reason of substance, when the retrospective review is due and who may give it.

Pure rules: no Flask, no database. The service (`app.services.lifecycle.emergency`)
loads the facts, asks these functions and writes what they decide.
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime, timedelta
from enum import Enum

from app.domain.reasons import visible_text

EMERGENCY_ROLE = "emergency"
REVIEWER_ROLES = frozenset({"reviewer"})  # who gives the retrospective review
MIN_REASON_CHARACTERS = 30
MIN_REASON_WORDS = 5
MAX_REASON_CHARACTERS = 2000
REASON_PREFIX = "EMERGENCY: "  # the decision's reason says how it was taken


class ReviewState(str, Enum):
    OPEN = "open"
    AGREED = "agreed"
    DISAGREED = "disagreed"


# The review's transition table: each verdict moves an open review to its end state.
REVIEW_MOVES: dict[str, tuple[frozenset[ReviewState], ReviewState]] = {
    "agree": (frozenset({ReviewState.OPEN}), ReviewState.AGREED),
    "disagree": (frozenset({ReviewState.OPEN}), ReviewState.DISAGREED),
}

REFUSALS = {
    "emergency_not_permitted": "Only an operator with the emergency role may act alone.",
    "emergency_reason_too_thin": (
        f"Say why this cannot wait: at least {MIN_REASON_CHARACTERS} characters and {MIN_REASON_WORDS} words "
        f"that a later reviewer can check."
    ),
    "emergency_review_not_reviewer": "Only a reviewer may give the retrospective review.",
    "emergency_review_by_actor": "The person who acted in the emergency cannot review it.",
    "emergency_review_by_maker": "A maker of this action cannot review its emergency use.",
    "emergency_review_closed": "This emergency action was already reviewed.",
    "emergency_review_verdict_invalid": "The review agrees or disagrees.",
    "emergency_review_reason_invalid": "Give the review's reason: 3 to 2,000 characters.",
}


def reason_problem(reason: object) -> str | None:
    """Why `reason` is not a reason of substance for acting alone, or None (POL-6).

    A reason counts only by what it draws (`reasons.visible_text`): at least
    `MIN_REASON_CHARACTERS` visible characters, at least `MIN_REASON_WORDS` words,
    at most `MAX_REASON_CHARACTERS`, and not one character repeated ("!!!!…").

    Returns:
        ``emergency_reason_too_thin`` or None.
    """
    if not isinstance(reason, str):
        return "emergency_reason_too_thin"
    seen = visible_text(reason).strip()
    drawn = "".join(seen.split())
    if (
        len(seen) < MIN_REASON_CHARACTERS
        or len(reason) > MAX_REASON_CHARACTERS
        or len(seen.split()) < MIN_REASON_WORDS
        or len(set(drawn.casefold())) <= 1
    ):
        return "emergency_reason_too_thin"
    return None


def may_act_alone(roles: Iterable[str]) -> bool:
    """Whether an operator holding `roles` may take an emergency action (POL-6)."""
    return EMERGENCY_ROLE in set(roles)


def review_due_at(acted_at: datetime, review_seconds: int) -> datetime:
    """When the retrospective review is due: `review_seconds` after the action (POL-6)."""
    return acted_at + timedelta(seconds=review_seconds)


def is_overdue(state: str, due_at: datetime, now: datetime) -> bool:
    """An open review past its due time is overdue (POL-6)."""
    return state == ReviewState.OPEN.value and due_at <= now


def review_refusal(
    reviewer_id: str, roles: Iterable[str], acted_by: str, makers: Iterable[str], state: str
) -> str | None:
    """Why this person cannot give the retrospective review, or None (POL-6): a second
    person — a reviewer, not the one who acted, not a maker of the action (FOUR-1) —
    reviews an open review once."""
    if state != ReviewState.OPEN.value:
        return "emergency_review_closed"
    if not REVIEWER_ROLES & set(roles):
        return "emergency_review_not_reviewer"
    if reviewer_id == acted_by:
        return "emergency_review_by_actor"
    if reviewer_id in set(makers):
        return "emergency_review_by_maker"
    return None
