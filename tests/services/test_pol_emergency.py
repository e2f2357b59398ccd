"""Emergency action, reviewed afterwards (POL-6): one person with the emergency role
approves alone with a reason of substance; the action is sent at once; a second
reviewer reviews it within the configured time; disagreeing proposes the compensation."""

from __future__ import annotations

from dataclasses import replace

import pytest
from sqlalchemy import func, select

from app.domain import approval_policy as pol
from app.domain.clock import utcnow
from app.domain.emergency_action import reason_problem
from app.domain.errors import ApiError
from app.extensions import db
from app.metrics import exposition
from app.models import ActionApproval, ActionProposal, AuditEvent, EmergencyReview, HumanTask
from app.services.lifecycle.dispatch import deliver
from app.services.lifecycle.emergency import act_in_emergency, review_emergency
from app.services.read.emergency_reviews import overdue_count, overdue_rows, review_rows

from ..builders import make_operator, make_proposal, reload, run_worker, set_approval_settings

REASON = "Live-streamed attack spreading now; every minute it stays up it is re-shared"


@pytest.fixture
def lead(team):
    """An operator who may act alone: a moderator and reviewer with the emergency role."""
    return make_operator(team.installation_id, "lead", roles=["moderator", "reviewer", "emergency"])


def act(proposal, operator, **overrides):
    args = dict(reason=REASON, payload_digest=proposal.payload_digest, idempotency_key="emergency-1", operator=operator)
    args.update(overrides)
    return act_in_emergency(proposal.id, **args)


def count(model) -> int:
    db.session.rollback()
    return db.session.scalar(select(func.count()).select_from(model))


def stored(proposal_id):
    """What a refused emergency action must leave unchanged."""
    db.session.rollback()
    p = db.session.get(ActionProposal, proposal_id)
    return (p.state, p.emergency, count(ActionApproval), count(EmergencyReview),
            db.session.scalar(
                select(func.count()).select_from(AuditEvent).where(AuditEvent.action == "action.emergency")),
            db.session.scalar(select(HumanTask.state).where(HumanTask.action_proposal_id == proposal_id)))


def test_an_emergency_action_by_its_maker_is_sent_at_once_and_opens_a_review(app, team, lead):
    """POL-6: the emergency role approves alone (even as the maker), the decision is
    flagged, the action is delivered at once, a review is due in 24 h and audited."""
    proposal = make_proposal(team, maker="lead")
    result = act(proposal, lead)
    row = reload(proposal)
    assert row.emergency is True and row.state == "queued"
    run_worker(app)  # the delivery job enqueued after the commit
    assert reload(proposal).state == "applied"
    assert team.demo_platform.state.requests_seen >= 1
    approval = db.session.get(ActionApproval, result.approval_id)
    assert (approval.approver_id, approval.decision) == (lead.id, "approved")
    assert approval.reason.startswith("EMERGENCY: ") and REASON in approval.reason
    review = db.session.get(EmergencyReview, result.review_id)
    assert (review.state, review.acted_by, review.reason) == ("open", lead.id, REASON)
    assert abs((review.due_at - review.acted_at).total_seconds() - 24 * 3600) < 1
    audit = db.session.scalar(select(AuditEvent).where(AuditEvent.action == "action.emergency"))
    assert audit.actor_id == lead.id and audit.details["review_id"] == review.id
    assert db.session.scalar(select(HumanTask.state).where(HumanTask.action_proposal_id == proposal.id)) == "completed"
    again = act(reload(proposal), lead)
    assert again.idempotent_replay and again.review_id == result.review_id and count(EmergencyReview) == 1


@pytest.mark.parametrize(
    "reason",
    ["urgent", "", "   ", "!" * 40, "a a a a a a a a a a a a a a a a a a a", "Thisisonelongwordwithoutanyspacesatall",
     None,
     "\u200b" * 40 + "now"],
)
def test_a_thin_reason_is_refused_and_nothing_is_stored(app, team, lead, reason):
    """POL-6: a reason of substance — 400 emergency_reason_too_thin, nothing stored, nothing sent."""
    proposal = make_proposal(team)
    before = stored(proposal.id)
    with pytest.raises(ApiError) as caught:
        act(proposal, lead, reason=reason)
    assert (caught.value.status, caught.value.code) == (400, "emergency_reason_too_thin")
    assert stored(proposal.id) == before
    assert team.demo_platform.state.requests_seen == 0


def test_the_reason_rule():
    """POL-6: at least 30 characters and 5 words, not one character repeated."""
    assert reason_problem(REASON) is None
    assert reason_problem("one two three four five six seven") is None
    assert reason_problem("x " * 20) == "emergency_reason_too_thin"
    assert reason_problem("short but five words") == "emergency_reason_too_thin"


@pytest.mark.parametrize("who", ["reviewer", "admin", "moderator"])
def test_without_the_emergency_role_it_is_refused(app, team, who):
    """POL-6: only the emergency role acts alone — 403 emergency_not_permitted."""
    proposal = make_proposal(team)
    before = stored(proposal.id)
    with pytest.raises(ApiError) as caught:
        act(proposal, team.user(who))
    assert (caught.value.status, caught.value.code) == (403, "emergency_not_permitted")
    assert stored(proposal.id) == before


def test_a_changed_digest_or_a_decided_proposal_is_refused(app, team, lead):
    """POL-6: bound to the payload digest; only a proposal awaiting approval."""
    proposal = make_proposal(team)
    before = stored(proposal.id)
    with pytest.raises(ApiError) as caught:
        act(proposal, lead, payload_digest="sha256:other")
    assert (caught.value.status, caught.value.code) == (409, "action_approval_digest_mismatch")
    assert stored(proposal.id) == before
    decided = make_proposal(team, state="rejected")
    with pytest.raises(ApiError) as caught:
        act(decided, lead, idempotency_key="emergency-2")
    assert caught.value.code == "action_not_awaiting_approval"


def test_the_review_is_overdue_after_the_configured_time(app, team, lead, clock):
    """POL-6: due within the configured time (default 24 h); overdue reviews are listed
    and counted (Operations, the metric), tested with the injected clock."""
    first = act(make_proposal(team), lead)
    assert overdue_count(utcnow(), team.installation_id) == 0
    clock.advance(hours=23)
    assert overdue_count(utcnow()) == 0
    clock.advance(hours=2)
    assert overdue_count(utcnow(), team.installation_id) == 1
    assert [row.review.id for row in overdue_rows(team.installation_id)] == [first.review_id]
    text = exposition(utcnow())[0].decode()
    assert "console_emergency_reviews_overdue 1.0" in text
    two_hours = replace(pol.DEFAULT_SETTINGS, emergency_review_seconds=7200)
    set_approval_settings(team.installation_id, pol.settings_to_json(two_hours))
    second = act(make_proposal(team), lead, idempotency_key="emergency-2")
    review = db.session.get(EmergencyReview, second.review_id)
    assert abs((review.due_at - review.acted_at).total_seconds() - 7200) < 1
    clock.advance(hours=1)
    assert overdue_count(utcnow(), team.installation_id) == 1
    clock.advance(hours=1, minutes=1)
    assert overdue_count(utcnow(), team.installation_id) == 2
    rows = review_rows(team.installation_id)
    assert [r.review.id for r in rows] == [first.review_id, second.review_id] and all(r.overdue for r in rows)


def test_a_disagreeing_review_proposes_the_compensation(app, team, lead):
    """POL-6: a second reviewer disagrees; the compensation (the workflow's restore) is
    proposed in the same step and linked; it waits for another person's approval."""
    proposal = make_proposal(team)
    result = act(proposal, lead)
    deliver(proposal.id)
    assert reload(proposal).state == "applied"
    reviewer = team.user("reviewer")
    done = review_emergency(
        result.review_id, verdict="disagree", reason="Routine spam, not an emergency", operator=reviewer)
    assert done.state == "disagreed" and done.compensation_proposal_id
    compensation = db.session.get(ActionProposal, done.compensation_proposal_id)
    assert (compensation.compensates_proposal_id, compensation.action_code, compensation.state) == (
        proposal.id, "restore", "approval_required")
    assert reload(proposal).state == "compensation_required"
    review = db.session.get(EmergencyReview, result.review_id)
    assert (review.reviewer_id, review.compensation_proposal_id, review.review_reason) == (
        reviewer.id, compensation.id, "Routine spam, not an emergency")
    assert db.session.scalar(select(AuditEvent).where(AuditEvent.action == "action.emergency_review_disagreed"))
    again = review_emergency(result.review_id, verdict="disagree", reason="again", operator=reviewer)
    assert again.idempotent_replay and again.compensation_proposal_id == compensation.id
    with pytest.raises(ApiError) as caught:
        review_emergency(result.review_id, verdict="agree", reason="changed my mind", operator=team.user("admin"))
    assert (caught.value.status, caught.value.code) == (409, "emergency_review_closed")


def test_who_may_review(app, team, lead):
    """POL-6: a second person — a reviewer, not the one who acted, not a maker; an
    agreeing review closes it; before the action applied a disagreement is refused."""
    proposal = make_proposal(team, maker="reviewer2")
    result = act(proposal, lead)
    cases = [(lead, 403, "emergency_review_by_actor"), (team.user("reviewer2"), 403, "emergency_review_by_maker"),
             (team.user("moderator"), 403, "emergency_review_not_reviewer")]
    for operator, status, code in cases:
        with pytest.raises(ApiError) as caught:
            review_emergency(result.review_id, verdict="agree", reason="fine by me", operator=operator)
        assert (caught.value.status, caught.value.code) == (status, code)
    with pytest.raises(ApiError) as caught:  # queued, not applied yet: nothing to compensate
        review_emergency(result.review_id, verdict="disagree", reason="not urgent", operator=team.user("reviewer"))
    assert (caught.value.status, caught.value.code) == (409, "action_compensation_unavailable")
    assert db.session.get(EmergencyReview, result.review_id).state == "open"
    assert count(ActionProposal) == 1
    with pytest.raises(ApiError) as caught:
        review_emergency(result.review_id, verdict="agree", reason="", operator=team.user("reviewer"))
    assert caught.value.code == "emergency_review_reason_invalid"
    done = review_emergency(result.review_id, verdict="agree", reason="Right call", operator=team.user("reviewer"))
    assert (done.state, done.compensation_proposal_id) == ("agreed", None)
