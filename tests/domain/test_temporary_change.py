"""The "end now" / "extend" refusals and their order (app.domain.proposal.temporary_change)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from app.domain.proposal import temporary_change as C
from app.domain.proposal.delivery import Delivery

NOW = datetime(2026, 3, 1, 12, tzinfo=UTC)
APPLIED = NOW - timedelta(days=1)
LATER = NOW + timedelta(days=6)
DAY = 86_400


def reversal(state="queued", terminal=False, attempts=0, not_before=LATER) -> Delivery:
    return Delivery(
        state=state,
        expires_at=LATER,
        delivery_terminal=terminal,
        delivery_attempt_count=attempts,
        not_before=not_before,
    )


@pytest.mark.parametrize(
    ("kind", "roles", "key", "expected"),
    [
        ("end_now", ["moderator"], "k", None),
        ("extend", ["reviewer", "auditor"], "k" * 200, None),
        ("end_now", ["auditor"], "k", (403, "forbidden")),
        ("shorten", ["auditor"], None, (403, "forbidden")),  # the role is asked first
        ("shorten", ["admin"], None, (400, "action_temporary_change_invalid")),  # then the kind
        ("end_now", ["admin"], "", (400, "idempotency_key_invalid")),
        ("end_now", ["admin"], "k" * 201, (400, "idempotency_key_invalid")),
        ("end_now", ["admin"], 7, (400, "idempotency_key_invalid")),
    ],
)
def test_temp3_request_refusals_in_order(kind, roles, key, expected):
    """TEMP-3: a role that may change temporary actions, a known kind, a key of 1..200."""
    refusal = C.request_refusal(kind, roles, key)
    assert (None if refusal is None else (refusal.status, refusal.code)) == expected


@pytest.mark.parametrize(
    ("temporary", "state", "refused"),
    [
        ({"duration_seconds": DAY}, "applied", False),
        ({"duration_seconds": DAY}, "compensation_required", False),
        ({"duration_seconds": DAY}, "queued", True),
        ({"duration_seconds": DAY}, "compensated", True),
        (None, "applied", True),
    ],
)
def test_temp3_only_a_temporary_action_in_force_changes(temporary, state, refused):
    """TEMP-3: 409 action_not_temporary unless the action is temporary and in force."""
    refusal = C.original_refusal(temporary, state)
    assert (refusal is not None) == refused
    if refused:
        assert (refusal.status, refusal.code) == (409, "action_not_temporary")


@pytest.mark.parametrize(
    ("kind", "current", "seconds", "expected"),
    [
        ("end_now", reversal(), None, None),
        ("extend", reversal(), DAY, None),
        ("end_now", None, None, (409, "action_temporary_ended", None)),
        ("end_now", reversal("applied"), None, (409, "action_temporary_ended", None)),
        ("extend", reversal("applying", attempts=1), DAY, (409, "action_temporary_ended", None)),
        ("extend", reversal("failed", attempts=2), DAY, (409, "action_temporary_ended", None)),
        # FOUR-7: failed for good: end now (four-eyes) yes, extend never
        ("end_now", reversal("failed", terminal=True, attempts=3), None, None),
        ("extend", reversal("failed", terminal=True, attempts=3), DAY, (409, "action_reversal_failed", None)),
        ("extend", reversal(), "a day", (400, "action_duration_invalid", "extend_seconds")),
        ("extend", reversal(), 30, (400, "action_duration_invalid", "extend_seconds")),
        # the new end is counted from the applied time: at most 366 days
        ("extend", reversal(), 365 * DAY, (400, "action_duration_invalid", "extend_seconds")),
    ],
)
def test_temp3_four7_change_refusals_in_order(kind, current, seconds, expected):
    """TEMP-3, FOUR-7: the active reversal decides; then the extension's duration."""
    decision = C.decide_change(kind, current, seconds, APPLIED, NOW)
    refusal = decision.refusal
    assert (None if refusal is None else (refusal.status, refusal.code, refusal.field)) == expected


def test_temp3_an_extension_counts_from_the_active_reversal_or_from_now():
    """TEMP-3: from the scheduled end; from now when an approved "end now" waits."""
    assert C.decide_change("extend", reversal(), DAY, APPLIED, NOW).new_end == LATER + timedelta(days=1)
    assert C.decide_change("extend", reversal(not_before=None), DAY, APPLIED, NOW).new_end == NOW + timedelta(days=1)
    assert C.decide_change("end_now", reversal(), None, APPLIED, NOW).new_end is None
