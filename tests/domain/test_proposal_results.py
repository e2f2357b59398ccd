"""Who may report a result, and which refused results contradict the recorded outcome
(SPEC FOUR-8, API-4): pure rules."""

from __future__ import annotations

from datetime import timedelta

from app.domain.clock import utcnow
from app.domain.proposal.delivery import Delivery
from app.domain.proposal.results import TOKEN_TOO_NEW, contradicts, token_refusal


def test_four8_a_token_newer_than_the_first_attempt_is_refused():
    """FOUR-8: created after the first attempt: refused; before or at it: may speak;
    no attempt yet or no token named: this rule says nothing."""
    first = utcnow()
    assert token_refusal(first + timedelta(milliseconds=1), first) == TOKEN_TOO_NEW
    assert token_refusal(first - timedelta(days=1), first) is None
    assert token_refusal(first, first) is None
    assert token_refusal(first, None) is None and token_refusal(None, first) is None


def test_a_result_contradicts_only_an_ended_outcome():
    """API-4: failed after applied, applied after failed for good: contradictions; the
    same status, or a result while delivery goes on, is not."""
    later = utcnow() + timedelta(days=1)
    applied = Delivery(state="applied", expires_at=later)
    failed_for_good = Delivery(state="failed", expires_at=later, delivery_terminal=True)
    retrying = Delivery(state="failed", expires_at=later, delivery_terminal=False)
    owed = Delivery(state="compensation_required", expires_at=later)
    assert contradicts(applied, "failed") and not contradicts(applied, "applied")
    assert contradicts(failed_for_good, "applied") and not contradicts(failed_for_good, "failed")
    assert contradicts(owed, "failed") and not contradicts(owed, "applied")
    cancelled = Delivery(state="cancelled", expires_at=later)
    assert not contradicts(retrying, "applied") and not contradicts(cancelled, "applied")
