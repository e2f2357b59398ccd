"""The cancel rule as a pure function (SPEC FOUR-9, TEMP-4)."""

from __future__ import annotations

from datetime import timedelta

from app.domain.clock import utcnow
from app.domain.proposal.cancel import ASK, CANCEL, CONFIRM, REJECT, WITHDRAW, CancelFacts, cancel_step
from app.domain.proposal.delivery import Delivery
from app.domain.proposal.makers import MakerFacts
from app.domain.proposal.offers import cancel_offer

LATER = utcnow() + timedelta(days=1)
MADE_BY_MAYA = MakerFacts(created_by_type="operator", created_by_id="maya")


def facts(approved=False, asked_by=(), is_reversal=False, not_before=LATER) -> CancelFacts:
    return CancelFacts(not_before, is_reversal, approved, frozenset(asked_by), MADE_BY_MAYA)


def step(state, f, who, *roles):
    return cancel_step(Delivery(state=state, expires_at=LATER), f, who, roles)


def test_four9_awaiting_approval_a_maker_withdraws_others_reject_as_reviewers():
    """FOUR-9: before approval a maker withdraws; a non-maker needs the reviewer role."""
    assert step("approval_required", facts(), "maya", "moderator").kind == WITHDRAW
    refused = step("approval_required", facts(), "mo", "moderator")
    assert (refused.status, refused.code) == (403, "action_cancel_needs_reviewer")
    assert step("approval_required", facts(), "rita", "reviewer").kind == REJECT


def test_four9_approved_takes_an_ask_and_a_second_non_maker_reviewer():
    """FOUR-9: approved: the first person asks; the asker again is 409; a maker or a
    non-reviewer cannot confirm; another reviewer confirms."""
    approved = facts(approved=True)
    assert step("queued", approved, "ada", "admin").kind == ASK
    asked = facts(approved=True, asked_by={"ada"})
    assert step("queued", asked, "ada", "admin").code == "action_cancel_awaiting_second_person"
    assert step("queued", asked, "maya", "reviewer").code == "maker_checker_violation"
    assert step("queued", asked, "mo", "moderator").code == "maker_checker_violation"
    assert step("queued", asked, "rita", "reviewer").kind == CONFIRM


def test_four9_not_approved_by_a_person_is_cancelled_by_one_and_refusals_keep_their_codes():
    """TEMP-4: bounded automation (no person's approval) is cancelled by one operator;
    an auditor, an unscheduled proposal, a reversal and a sent one are refused."""
    assert step("queued", facts(), "mo", "moderator").kind == CANCEL
    assert step("queued", facts(), "aude", "auditor").code == "forbidden"
    assert step("queued", facts(not_before=None), "mo", "moderator").code == "action_not_scheduled"
    assert step("queued", facts(is_reversal=True), "mo", "moderator").code == "action_reversal_not_cancellable"
    sent = Delivery(state="queued", expires_at=LATER, delivery_attempt_count=1)
    assert cancel_step(sent, facts(approved=True), "rita", ["reviewer"]).code == "action_already_sent"


def test_four9_the_offer_follows_the_rule():
    """FOUR-9: the page's control is the rule's step; refusals about the proposal hide it,
    refusals about the person show it disabled with the reason."""
    d = Delivery(state="queued", expires_at=LATER)
    assert cancel_offer(d, None, "ada", ["admin"]).shown is False
    offer = cancel_offer(d, facts(approved=True), "ada", ["admin"])
    assert (offer.shown, offer.allowed, offer.kind) == (True, True, ASK)
    disabled = cancel_offer(d, facts(approved=True, asked_by={"ada"}), "maya", ["reviewer"])
    assert (disabled.shown, disabled.allowed, disabled.kind) == (True, False, CONFIRM) and disabled.reason
    assert not cancel_offer(d, facts(is_reversal=True), "ada", ["admin"]).shown
