"""Approval policies over bulk batches (SPEC POL-1, POL-2, POL-3 for BULK-3): a route
by item count, votes bound to the batch digest that expire, makers refused, a veto."""

from __future__ import annotations

import pytest
from sqlalchemy import func, select

from app.domain.errors import ApiError
from app.extensions import db
from app.models import ActionProposal, ApprovalVote, BulkBatch
from app.services.bulk.actions import bulk_actions
from app.services.bulk.batch_approval import approve_batch, reject_batch
from app.services.bulk.dry_runs import start_dry_run
from app.services.bulk.submission import submit_batch
from app.services.read.bulk_batches import batch_detail
from tests.builders import PEER_AND_LEAD, make_operator, set_approval_settings, set_operator_attributes, set_row

LARGE = 20  # the route's min_items


def _settings() -> dict:
    """PEER_AND_LEAD for batches of LARGE or more items; one reviewer below."""
    return {**PEER_AND_LEAD, "routes": [{"policies": ["peer_and_lead"], "min_items": LARGE}]}


def _submitted(team, count: int, first: int = 0) -> BulkBatch:
    moderator = make_operator(team.installation_id, "moderator")
    action = bulk_actions(db.session, team.installation_id)[0]
    batch_id = start_dry_run(moderator, selection={"source": "list", "text": "\n".join(f"post:{n}" for n in range(first, first + count))},
                             action_key=action.key, decision_code=action.decision_code, reason="spam network")
    submit_batch(moderator, batch_id, db.session.get(BulkBatch, batch_id).dry_run_digest)
    db.session.expire_all()
    return db.session.get(BulkBatch, batch_id)


@pytest.fixture
def people(team):
    """(peer, second peer, lead): reviewers; the lead has the attribute level=lead."""
    set_approval_settings(team.installation_id, _settings())
    peer = make_operator(team.installation_id, "reviewer")
    other = make_operator(team.installation_id, "peer2", roles=["reviewer"])
    lead = make_operator(team.installation_id, "lead", roles=["reviewer"])
    set_operator_attributes(lead.id, attributes={"level": "lead"})
    db.session.expire_all()
    return peer, other, db.session.get(type(lead), lead.id)


def _unchanged(batch_id: str):
    """(votes, batch state, items waiting) of a batch, read afresh."""
    db.session.expire_all()
    return (
        db.session.scalar(select(func.count()).select_from(ApprovalVote).where(ApprovalVote.batch_id == batch_id)),
        db.session.get(BulkBatch, batch_id).state,
        db.session.scalar(select(func.count()).select_from(ActionProposal).where(
            ActionProposal.bulk_batch_id == batch_id, ActionProposal.state == "approval_required")),
    )


def _refused(code: str, call) -> None:
    with pytest.raises(ApiError) as refusal:
        call()
    assert refusal.value.code == code, refusal.value.code


def test_pol_3_a_min_items_route_picks_the_stronger_policy_for_a_large_batch_only(app, team, people):
    """POL-3: a route with min_items applies to a batch of that many items; a small
    batch has the default policy (one reviewer approves it alone, as before)."""
    large = _submitted(team, LARGE)
    assert [p["key"] for p in large.approval_route["policies"]] == ["peer_and_lead"]
    assert large.approval_route["items"] == LARGE and large.approval_route["route"]["min_items"] == LARGE
    assert large.approval_route["route_words"] == f"a batch of {LARGE} or more"
    small = _submitted(team, 3, first=1000)
    assert [p["key"] for p in small.approval_route["policies"]] == ["default"]
    peer = people[0]
    assert approve_batch(peer, small.id, small.batch_digest) == {"approved": 3, "skipped": 0}
    assert _unchanged(small.id)[1] == "running"


def test_pol_2_two_votes_are_needed_and_two_peers_do_not_release_it(app, team, people):
    """POL-1, POL-2: a peer's approval waits for a lead's; a second peer's approval
    counts for no factor (approval_factor_already_met); a repeat vote is refused
    (approval_already_given); each refusal changes no row; the lead's releases the
    batch through its ordinary approval."""
    peer, other, lead = people
    batch = _submitted(team, LARGE)
    waiting = approve_batch(peer, batch.id, batch.batch_digest)
    assert waiting == {"approved": 0, "skipped": 0, "waiting": "A peer and a lead: 1 of 1 peer, 0 of 1 lead"}
    assert _unchanged(batch.id) == (1, "submitted", LARGE)
    _refused("approval_factor_already_met", lambda: approve_batch(other, batch.id, batch.batch_digest))
    _refused("approval_already_given", lambda: approve_batch(peer, batch.id, batch.batch_digest))
    assert _unchanged(batch.id) == (1, "submitted", LARGE)
    vote = db.session.scalar(select(ApprovalVote).where(ApprovalVote.batch_id == batch.id))
    assert (vote.payload_digest, vote.batch_digest, vote.policy_key) == (batch.batch_digest, batch.batch_digest,
                                                                         "peer_and_lead")
    assert approve_batch(lead, batch.id, batch.batch_digest) == {"approved": LARGE, "skipped": 0}
    db.session.expire_all()
    released = db.session.get(BulkBatch, batch.id)
    assert released.state == "running" and released.approved_by == lead.id


def test_pol_2_the_maker_and_the_ineligible_are_refused(app, team, people):
    """POL-2: the batch's maker counts for no factor (maker_checker_violation); a
    moderator no factor admits is refused (approval_not_eligible); no row changes."""
    batch = _submitted(team, LARGE)
    maker = make_operator(team.installation_id, "moderator")
    _refused("maker_checker_violation", lambda: approve_batch(maker, batch.id, batch.batch_digest))
    _refused("maker_checker_violation", lambda: reject_batch(maker, batch.id, batch.batch_digest, "not this one"))
    outsider = make_operator(team.installation_id, "mod2", roles=["moderator"])
    _refused("approval_not_eligible", lambda: approve_batch(outsider, batch.id, batch.batch_digest))
    assert _unchanged(batch.id) == (0, "submitted", LARGE)


def test_pol_2_a_vote_for_an_earlier_batch_digest_does_not_count(app, team, people):
    """POL-2: a vote bound to another batch digest no longer counts (simulated: the
    stored vote's digests are set to an earlier batch's with set_row, since a batch's
    own digest does not change once submitted); its author may vote again."""
    peer, _, lead = people
    batch = _submitted(team, LARGE)
    approve_batch(peer, batch.id, batch.batch_digest)
    vote = db.session.scalar(select(ApprovalVote.id).where(ApprovalVote.batch_id == batch.id))
    set_row(ApprovalVote, vote, payload_digest="sha256:earlier", batch_digest="sha256:earlier")
    waiting = approve_batch(lead, batch.id, batch.batch_digest)
    assert waiting["waiting"] == "A peer and a lead: 0 of 1 peer, 1 of 1 lead"  # the lead alone counts once, as the lead
    detail = batch_detail(lead, batch.id, with_drift=False)
    assert [v.not_counting for v in detail.approval.votes] == ["bound to an earlier batch digest", None]
    assert approve_batch(peer, batch.id, batch.batch_digest)["approved"] == LARGE


def test_pol_1_a_rejection_with_a_reason_vetoes(app, team, people):
    """POL-1: a rejection needs a reason under the policy (action_decision_reason_required,
    no row changed); the lead's rejection vetoes: the batch's ordinary rejection
    runs and nothing is sent."""
    peer, _, lead = people
    batch = _submitted(team, LARGE)
    approve_batch(peer, batch.id, batch.batch_digest)
    _refused("action_decision_reason_required", lambda: reject_batch(lead, batch.id, batch.batch_digest, ""))
    assert _unchanged(batch.id) == (1, "submitted", LARGE)
    assert reject_batch(lead, batch.id, batch.batch_digest, "these are not spam") == "rejected"
    votes, state, waiting = _unchanged(batch.id)
    assert (votes, state, waiting) == (2, "rejected", 0)
    assert db.session.get(BulkBatch, batch.id).ended_by == lead.id


def test_pol_2_an_expired_vote_stops_counting(app, team, people, clock):
    """POL-2: a vote counts for the policy's time to live (an hour here); after it,
    the lead's approval does not release the batch and the page says the peer's
    vote expired."""
    peer, _, lead = people
    batch = _submitted(team, LARGE)
    approve_batch(peer, batch.id, batch.batch_digest)
    clock.advance(seconds=3601)
    waiting = approve_batch(lead, batch.id, batch.batch_digest)
    assert waiting["waiting"] == "A peer and a lead: 0 of 1 peer, 1 of 1 lead"  # the lead alone counts once, as the lead
    assert _unchanged(batch.id) == (2, "submitted", LARGE)
    detail = batch_detail(lead, batch.id, with_drift=False)
    assert [v.not_counting for v in detail.approval.votes] == ["expired", None]
    assert not detail.offers.decide.allowed  # the lead's vote counts: nothing left for them
    assert approve_batch(peer, batch.id, batch.batch_digest)["approved"] == LARGE
