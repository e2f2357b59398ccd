"""The pure rules of an emergency action (POL-6): a reason of substance, the review's
due time, who may review."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from app.domain.emergency_action import is_overdue, may_act_alone, reason_problem, review_due_at, review_refusal

AT = datetime(2026, 12, 3, 9, 0, tzinfo=UTC)


@pytest.mark.parametrize(
    "reason, problem",
    [
        ("Live stream of an attack, re-shared every minute it stays up", None),
        ("Child-safety material posted publicly; remove before it spreads", None),
        ("too short to say much", "emergency_reason_too_thin"),
        ("averyveryverylongsinglewordwithoutanyspaces", "emergency_reason_too_thin"),
        ("x x x x x x x x x x x x x x x x x x", "emergency_reason_too_thin"),
        ("\u200b " * 30, "emergency_reason_too_thin"),
        ("y" * 2001 + " a b c d", "emergency_reason_too_thin"),
        (None, "emergency_reason_too_thin"),
    ],
)
def test_a_reason_of_substance(reason, problem):
    """POL-6: 30 visible characters, 5 words, not one character repeated; else emergency_reason_too_thin."""
    assert reason_problem(reason) == problem


def test_the_role_the_due_time_and_overdue():
    """POL-6: only the emergency role acts alone; the review is due after the configured
    seconds and overdue from then while open."""
    assert may_act_alone({"reviewer", "emergency"}) and not may_act_alone({"reviewer", "admin"})
    due = review_due_at(AT, 24 * 3600)
    assert due == AT + timedelta(hours=24)
    assert not is_overdue("open", due, due - timedelta(seconds=1))
    assert is_overdue("open", due, due) and not is_overdue("agreed", due, due + timedelta(days=3))


def test_who_may_review():
    """POL-6: a reviewer, not the one who acted, not a maker, once."""
    assert review_refusal("r", {"reviewer"}, "lead", {"maker"}, "open") is None
    assert review_refusal("lead", {"reviewer", "emergency"}, "lead", set(), "open") == "emergency_review_by_actor"
    assert review_refusal("maker", {"reviewer"}, "lead", {"maker"}, "open") == "emergency_review_by_maker"
    assert review_refusal("m", {"moderator", "admin"}, "lead", set(), "open") == "emergency_review_not_reviewer"
    assert review_refusal("r", {"reviewer"}, "lead", set(), "disagreed") == "emergency_review_closed"
