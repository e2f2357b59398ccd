"""Which operator actions a proposal offers to whom (§4, APPR-4, RTRY-1, COMP-1, FOUR-1)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from app.domain.proposal.delivery import Delivery
from app.domain.proposal.makers import DecisionRef, MakerFacts
from app.domain.proposal.offers import (
    Offer,
    claim_offer,
    compensate_offer,
    dead_letter_retry_offer,
    decide_offer,
    offers,
    release_offer,
    retry_offer,
    temporary_change_offer,
)
from app.domain.states import ProposalState as S

NOW = datetime(2026, 3, 1, tzinfo=UTC)
FACTS = MakerFacts(run_decision_id="dec_1", prepared_at=NOW, decisions=(DecisionRef("dec_1", "maya", 1, NOW),))


def d(state, terminal=False, expires=NOW + timedelta(hours=1), correction=False) -> Delivery:
    return Delivery(state=state, expires_at=expires, delivery_terminal=terminal, is_correction=correction)


def test_offer_truthiness():
    assert Offer(True, True) and not Offer(True, False, "x") and not Offer(False, True) and not Offer.hidden()
    assert (Offer.hidden().shown, Offer.hidden().allowed, Offer.hidden().reason) == (False, False, None)


def test_decide_offer():
    """APPR-3, APPR-4, FOUR-1: shown while awaiting approval; closed to makers and non-reviewers."""
    waiting = d(S.APPROVAL_REQUIRED)
    assert decide_offer(waiting, "zoe", ["reviewer"], FACTS, NOW) == Offer(True, True)
    maker = decide_offer(waiting, "maya", ["reviewer"], FACTS, NOW)
    assert maker.shown and not maker.allowed and "second reviewer" in maker.reason
    assert decide_offer(waiting, "zoe", ["moderator"], FACTS, NOW).reason.startswith("Only reviewers")
    expired = decide_offer(d(S.APPROVAL_REQUIRED, expires=NOW), "zoe", ["reviewer"], FACTS, NOW)
    assert expired == Offer(True, False, "The authorization expired; the action can no longer be approved.")
    assert not decide_offer(d(S.APPROVAL_REQUIRED, expires=NOW), "maya", ["reviewer"], FACTS, NOW).allowed
    assert decide_offer(d(S.QUEUED), "zoe", ["reviewer"], FACTS, NOW) == Offer.hidden()


@pytest.mark.parametrize("roles", [["reviewer"], ["admin"]])
def test_retry_offer(roles):
    """RTRY-1: only a terminal failure, to reviewers and admins, while authorized."""
    assert retry_offer(d(S.FAILED, True), roles, NOW) == Offer(True, True)
    expired = retry_offer(d(S.FAILED, True, expires=NOW), roles, NOW)
    assert expired == Offer(True, False, "The authorization expired; propose the action again instead.")
    assert retry_offer(d(S.FAILED, False), roles, NOW) == Offer.hidden()
    assert retry_offer(d(S.APPLIED, True), roles, NOW) == Offer.hidden()


def test_retry_is_not_shown_to_moderators():
    assert retry_offer(d(S.FAILED, True), ["moderator", "auditor"], NOW) == Offer.hidden()


def test_compensate_offer():
    """COMP-1: applied actions that are not corrections, to reviewers and admins."""
    assert compensate_offer(d(S.APPLIED, True), ["admin"]) == Offer(True, True)
    assert compensate_offer(d(S.COMPENSATION_REQUIRED, True), ["reviewer"]) == Offer(True, True)
    assert compensate_offer(d(S.APPLIED, True, correction=True), ["admin"]) == Offer.hidden()
    assert compensate_offer(d(S.APPLIED, True), ["moderator"]) == Offer.hidden()
    assert compensate_offer(d(S.FAILED, True), ["admin"]) == Offer.hidden()


def test_claim_offer():
    """FOUR-1: an open task, to reviewers; a maker sees it as not theirs to decide."""
    assert claim_offer("open", "zoe", ["reviewer"], FACTS) == Offer(True, True)
    maker = claim_offer("open", "maya", ["reviewer"], FACTS)
    assert maker.shown and not maker.allowed and maker.reason
    assert claim_offer("claimed", "zoe", ["reviewer"], FACTS) == Offer.hidden()
    assert claim_offer("open", "zoe", ["admin"], FACTS) == Offer.hidden()
    assert claim_offer(None, "zoe", ["reviewer"], FACTS) == Offer.hidden()


def test_release_offer():
    assert release_offer("claimed", "zoe", "zoe") == Offer(True, True)
    assert release_offer("claimed", "rita", "zoe") == Offer.hidden()
    assert release_offer("open", None, "zoe") == Offer.hidden()


def test_offers_together():
    """§4: the detail page asks one function for every form."""
    all_offers = offers(
        d(S.APPROVAL_REQUIRED),
        operator_id="zoe",
        roles=["reviewer"],
        facts=FACTS,
        now=NOW,
        task_state="claimed",
        task_assignee_id="zoe",
    )
    assert all_offers.decide == all_offers.approve == all_offers.reject == Offer(True, True)
    assert all_offers.retry == all_offers.compensate == all_offers.claim == Offer.hidden()
    assert all_offers.release == Offer(True, True)
    maker = offers(
        d(S.APPROVAL_REQUIRED), operator_id="maya", roles=["reviewer"], facts=FACTS, now=NOW, task_state="open"
    )
    assert not maker.decide.allowed and not maker.claim.allowed and maker.claim.shown
    failed = offers(d(S.FAILED, True), operator_id="zoe", roles=["admin"], facts=FACTS, now=NOW)
    assert failed.retry == Offer(True, True) and failed.compensate == Offer.hidden()
    expired = offers(d(S.FAILED, True, expires=NOW), operator_id="zoe", roles=["admin"], facts=FACTS, now=NOW)
    assert not expired.retry.allowed
    applied = offers(d(S.APPLIED, True), operator_id="zoe", roles=["reviewer"], facts=FACTS, now=NOW)
    assert applied.compensate == Offer(True, True) and applied.retry == Offer.hidden()


REVERSAL = Delivery(state=S.QUEUED, expires_at=NOW + timedelta(days=30), not_before=NOW + timedelta(days=7))


@pytest.mark.parametrize(
    "reversal, end_now, extend",
    [
        (REVERSAL, True, True),  # scheduled, nothing sent
        (Delivery(state=S.APPROVED, expires_at=NOW), True, True),  # an approved "end now" not sent yet (TEMP-3)
        (Delivery(state=S.QUEUED, expires_at=NOW, delivery_attempt_count=1), False, False),  # being sent
        (Delivery(state=S.APPLYING, expires_at=NOW, delivery_attempt_count=1), False, False),
        (Delivery(state=S.APPLIED, expires_at=NOW, delivery_attempt_count=1, delivery_terminal=True), False, False),
        (Delivery(state=S.FAILED, expires_at=NOW, delivery_attempt_count=8, delivery_terminal=True), True, False),
        (None, False, False),  # no reversal in force (cancelled by an appeal correction)
    ],
)
def test_end_now_and_extend_offers_follow_the_service_rule(reversal, end_now, extend):
    """TEMP-3, FOUR-7: the page offers "end now"/"extend" exactly when `propose_change`
    accepts it (`temporary.change_refusal`): an approved reversal waiting unsent
    included (the template used to offer it only while `queued`)."""
    applied = d(S.APPLIED)
    got = offers(applied, operator_id="zoe", roles=["moderator"], facts=FACTS, now=NOW, temporary=True, reversal=reversal)
    assert (bool(got.end_now), bool(got.extend)) == (end_now, extend)
    assert not temporary_change_offer("end_now", applied, True, reversal, ["auditor"])
    assert not temporary_change_offer("extend", applied, False, REVERSAL, ["admin"])  # not temporary
    assert not temporary_change_offer("end_now", d(S.QUEUED), True, REVERSAL, ["admin"])  # not in effect yet


def test_dead_letter_retry_offer():
    """RTRY-1, CONN-4: reviewers and admins retry failed deliveries."""
    assert dead_letter_retry_offer(["reviewer"]) and dead_letter_retry_offer(["admin", "moderator"])
    assert not dead_letter_retry_offer(["moderator", "auditor"]).shown
