"""A proposal approved by votes under a "1 peer + 1 lead" policy (POL-1, POL-2).

The issue's first Done-when: two peers do not release it; the maker's approval is
refused; an approval given before the payload changed does not count; a lead's
rejection vetoes; an expired approval stops counting; each with a clear code; the
releasing vote checks the preconditions again.
"""

from __future__ import annotations

import pytest
from sqlalchemy import func, select

from app.domain.errors import ApiError
from app.extensions import db
from app.models import ActionApproval, ActionProposal, ApprovalVote, AuditEvent, HumanTask, Report
from app.services.cases.tasks import claim_task
from app.services.lifecycle.approval import decide_proposal

from ..builders import (
    PEER_AND_LEAD,
    make_operator,
    make_proposal,
    reload,
    set_approval_settings,
    set_operator_attributes,
    set_row,
)


@pytest.fixture
def people(app, team):
    """The team under "1 peer + 1 lead": peers `reviewer`, `peer`; leads `lead`, `lead2`."""
    set_approval_settings(team.installation_id, PEER_AND_LEAD)
    found = {"reviewer": team.user("reviewer"), "peer": make_operator(team.installation_id, "peer", ["reviewer"])}
    for name in ("lead", "lead2"):
        lead = make_operator(team.installation_id, name, ["reviewer"])
        set_operator_attributes(lead.id, team="safety", attributes={"level": "lead"})
        found[name] = lead
    db.session.expire_all()
    return {name: db.session.get(type(op), op.id) for name, op in found.items()}


def vote(proposal, operator, decision="approved", reason=None, key=None):
    return decide_proposal(
        proposal.id,
        decision=decision,
        payload_digest=proposal.payload_digest,
        reason=reason,
        idempotency_key=key or f"{operator.id}-{decision}",
        operator=operator,
    )


def refused(proposal, operator, decision="approved", reason=None):
    """The refusal's (status, code), asserting it changed no row."""
    before = rows(proposal)
    with pytest.raises(ApiError) as caught:
        vote(proposal, operator, decision, reason, key=f"refused-{operator.id}-{decision}")
    assert rows(proposal) == before
    return caught.value.status, caught.value.code


def rows(proposal):
    db.session.rollback()
    count = lambda model: db.session.scalar(select(func.count()).select_from(model))  # noqa: E731
    state = db.session.get(ActionProposal, proposal.id).state
    return state, count(ApprovalVote), count(ActionApproval), count(AuditEvent)


def test_a_peer_and_a_lead_release_it_two_peers_do_not(app, team, people):
    """POL-1, POL-2: the policy is an AND of factors; two peers meet one factor only
    (``approval_factor_already_met``); the lead's approval releases the proposal, and
    the one decision is written by the releasing person."""
    proposal = make_proposal(team)
    assert proposal.approval_route["policies"][0]["key"] == "peer_and_lead"
    first = vote(proposal, people["reviewer"])
    assert first.state == "approval_required" and first.missing == "A peer and a lead: 1 of 1 peer, 0 of 1 lead"
    assert refused(proposal, people["peer"]) == (409, "approval_factor_already_met")
    assert refused(proposal, people["reviewer"]) == (409, "approval_already_given")
    assert reload(proposal).state == "approval_required"
    recorded = db.session.scalar(select(AuditEvent).where(AuditEvent.action == "action.vote_recorded"))
    assert (recorded.details["policy"], recorded.details["factor"]) == ("peer_and_lead", "peer")
    released = vote(proposal, people["lead"])
    assert released.state == "approved" and not released.idempotent_replay
    approval = db.session.scalar(select(ActionApproval).where(ActionApproval.proposal_id == proposal.id))
    assert approval.approver_id == people["lead"].id
    assert reload(proposal).state == "queued"
    assert vote(proposal, people["reviewer"]).idempotent_replay  # a replayed vote answers as before
    assert vote(proposal, people["lead"]).idempotent_replay


def test_the_order_of_votes_does_not_decide(app, team, people):
    """POL-2: a lead who approves first is counted as the lead when a peer follows
    (one person counts for at most one factor, matched whatever the order)."""
    proposal = make_proposal(team)
    assert vote(proposal, people["lead"]).state == "approval_required"
    assert vote(proposal, people["lead2"]).state == "approved"  # the first lead moves to the peer factor


def test_the_maker_is_refused(app, team, people):
    """POL-2, FOUR-1: a maker counts for no factor: 403 ``maker_checker_violation``."""
    proposal = make_proposal(team, maker="reviewer2")
    assert refused(proposal, team.user("reviewer2")) == (403, "maker_checker_violation")


def test_someone_no_factor_admits_is_refused(app, team, people):
    """POL-1: under a lead-only policy a reviewer without the lead attribute is
    refused with ``approval_not_eligible``, at the vote and at the task's claim."""
    policy = PEER_AND_LEAD["policies"][0]
    only_lead = {**PEER_AND_LEAD, "policies": [{**policy, "factors": [policy["factors"][1]]}]}
    set_approval_settings(team.installation_id, only_lead)
    proposal = make_proposal(team)
    assert refused(proposal, people["peer"]) == (403, "approval_not_eligible")
    task = db.session.scalar(select(HumanTask).where(HumanTask.action_proposal_id == proposal.id))
    with pytest.raises(ApiError) as caught:
        claim_task(task.id, people["peer"])
    assert caught.value.code == "approval_not_eligible"
    claim_task(task.id, people["lead"])


def test_an_approval_given_before_the_payload_changed_does_not_count(app, team, people):
    """POL-2: every vote is bound to the payload digest. The payload of an open
    proposal cannot change through the console, so the test simulates it: the
    stored vote's digest is set to an earlier payload's with `set_row`. That vote no
    longer counts, so the lead's approval does not release the proposal and the peer
    may approve again."""
    proposal = make_proposal(team)
    first = vote(proposal, people["peer"])
    set_row(ApprovalVote, first.approval_id, payload_digest="sha256:" + "0" * 64)
    assert vote(proposal, people["lead"]).state == "approval_required"
    assert vote(proposal, people["peer"], key="again").state == "approved"


def test_a_leads_rejection_vetoes(app, team, people):
    """POL-1: one rejection by someone eligible vetoes (deny count 1), and it needs a
    reason (``action_decision_reason_required``); the rejection is the decision."""
    proposal = make_proposal(team)
    vote(proposal, people["peer"])
    assert refused(proposal, people["lead"], "rejected") == (400, "action_decision_reason_required")
    result = vote(proposal, people["lead"], "rejected", reason="Not a violation of policy 4.2")
    assert result.state == "rejected"
    assert reload(proposal).state == "rejected"
    approval = db.session.scalar(select(ActionApproval).where(ActionApproval.proposal_id == proposal.id))
    assert (approval.approver_id, approval.decision) == (people["lead"].id, "rejected")
    assert refused(proposal, people["lead2"]) == (409, "action_not_awaiting_approval")


def test_an_expired_approval_stops_counting(app, team, people, clock):
    """POL-2: a vote counts for the policy's time to live (one hour here); after it,
    the lead's approval does not release the proposal and the peer may vote again."""
    proposal = make_proposal(team)
    first = vote(proposal, people["peer"])
    stored = db.session.get(ApprovalVote, first.approval_id)
    assert (stored.expires_at - stored.created_at).total_seconds() == 3600
    clock.advance(hours=2)
    assert vote(proposal, people["lead"]).state == "approval_required"
    assert vote(proposal, people["peer"], key="again").state == "approved"


def test_the_release_checks_the_preconditions_again(app, team, people):
    """POL-2, PRE-2: the vote that meets the last factor finds the case appealed:
    409 ``action_case_no_longer_eligible``, nothing stored; the proposal waits."""
    proposal = make_proposal(team)
    vote(proposal, people["peer"])
    set_row(Report, proposal.report_id, state="appealed")
    assert refused(proposal, people["lead"]) == (409, "action_case_no_longer_eligible")
    assert reload(proposal).state == "approval_required"
