"""The approval panel under a "1 peer + 1 lead" policy (POL-1, POL-2, POL-3): the policy
and why it applied, progress in words, each vote and until when it counts, votes that no
longer count and why, and the buttons only for who may vote."""

from __future__ import annotations

import re

from app.extensions import db
from app.models import ApprovalVote, OperatorUser

from ..builders import (
    PEER_AND_LEAD,
    csrf_from,
    login,
    logout,
    make_operator,
    make_proposal,
    reload,
    set_approval_settings,
    set_operator_attributes,
    set_row,
)


def _people(team):
    set_approval_settings(team.installation_id, PEER_AND_LEAD)
    peer = make_operator(team.installation_id, "peer", ["reviewer"])
    lead = make_operator(team.installation_id, "lead", ["reviewer"])
    set_operator_attributes(lead.id, attributes={"level": "lead"})
    db.session.expire_all()
    return db.session.get(OperatorUser, peer.id), db.session.get(OperatorUser, lead.id)


def _text(html: str) -> str:
    return " ".join(re.sub(r"<[^>]+>", " ", html).split())


def _post(client, proposal, token, key, decision="approved", reason=""):
    return client.post(
        f"/proposals/{proposal.id}/decision",
        data={
            "decision": decision,
            "payload_digest": proposal.payload_digest,
            "reason": reason,
            "idempotency_key": key,
            "csrf_token": token,
        },
    )


def test_the_panel_says_what_is_missing_and_who_voted(app, client, team):
    """POL-3, POL-1: the panel names the policy and why it applied, says "1 of 1 peer,
    0 of 1 lead" after a peer's vote, lists the vote until when it counts, and shows
    the peer no buttons (their part is given) while the lead gets the form."""
    peer, lead = _people(team)
    proposal = make_proposal(team)
    token = login(client, peer.email)
    page = _text(client.get(f"/proposals/{proposal.id}").get_data(as_text=True))
    assert "A peer and a lead (1 peer (reviewer) and 1 lead (reviewer, level lead); approvals count for 1 hour)" in page
    assert "Chosen by the approval settings for every action." in page
    assert "0 of 1 peer, 0 of 1 lead — still missing 1 peer and 1 lead" in page

    response = _post(client, proposal, token, "peer-1")
    assert response.status_code == 303
    page = client.get(f"/proposals/{proposal.id}").get_data(as_text=True)
    assert "Your vote on" in page and "It still waits: A peer and a lead: 1 of 1 peer, 0 of 1 lead" in page
    text = _text(page)
    assert "1 of 1 peer, 0 of 1 lead — still missing 1 lead" in text
    assert "Peer approved as peer at" in text and "counts until" in text
    assert "You already voted on this action. It counts until" in text
    assert f'action="/proposals/{proposal.id}/decision"' not in page
    logout(client, csrf_from(page))

    login(client, lead.email)
    page = client.get(f"/proposals/{proposal.id}").get_data(as_text=True)
    assert f'action="/proposals/{proposal.id}/decision"' in page


def test_votes_that_no_longer_count_say_why(app, client, team, clock):
    """POL-2: an expired vote says "expired at HH:MM UTC"; a vote for an earlier
    payload says so (simulated by changing the stored vote's digest with `set_row`)."""
    peer, lead = _people(team)
    proposal = make_proposal(team)
    token = login(client, peer.email)
    assert _post(client, proposal, token, "peer-1").status_code == 303
    vote = db.session.query(ApprovalVote).filter_by(proposal_id=proposal.id).one()
    expired_at = vote.expires_at.strftime("%H:%M UTC")
    clock.advance(hours=2)  # past midnight when run after 22:00 UTC: the time then carries its day
    page = _text(client.get(f"/proposals/{proposal.id}").get_data(as_text=True))
    assert "No longer counting: Peer approved at" in page
    assert re.search(rf"expired at ({vote.expires_at:%Y-%m-%d} )?{expired_at}", page), page
    assert "0 of 1 peer, 0 of 1 lead" in page

    set_row(ApprovalVote, vote.id, payload_digest="sha256:" + "0" * 64)
    page = _text(client.get(f"/proposals/{proposal.id}").get_data(as_text=True))
    assert "given for an earlier payload" in page


def test_someone_not_eligible_sees_why(app, client, team):
    """POL-1: under a lead-only policy a peer sees why they cannot vote, and no form;
    a forged post is refused with ``approval_not_eligible``."""
    factors = [PEER_AND_LEAD["policies"][0]["factors"][1]]
    only_lead = {**PEER_AND_LEAD, "policies": [{**PEER_AND_LEAD["policies"][0], "label": "A lead", "factors": factors}]}
    peer, _ = _people(team)
    set_approval_settings(team.installation_id, only_lead)
    proposal = make_proposal(team)
    token = login(client, peer.email)
    page = client.get(f"/proposals/{proposal.id}").get_data(as_text=True)
    why = "You are not eligible for any part of this approval. Who may approve: A lead: lead (reviewer, level lead)."
    assert why in _text(page)
    assert f'action="/proposals/{proposal.id}/decision"' not in page
    response = _post(client, proposal, token, "forged")
    assert response.status_code == 403 and "approval_not_eligible" in response.get_data(as_text=True)
    assert reload(proposal).state == "approval_required"
