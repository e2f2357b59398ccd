"""The bulk batch page under an approval policy (SPEC POL-3 for BULK-3): the policy
that applied, its progress in words, each vote and the votes that no longer count,
and approve/reject buttons only for who may vote."""

from __future__ import annotations

import re

from sqlalchemy import select

from app.extensions import db
from app.models import ApprovalVote

from ..builders import make_operator, set_approval_settings, set_operator_attributes, set_row
from .test_bulk_pages import digest_on, sign_in, submitted

PEERS_AND_LEAD = {
    "policies": [{
        "key": "peers_and_lead", "label": "Two peers and a lead", "ttl_seconds": 3600,
        "factors": [
            {"key": "peer", "label": "peer", "count": 2, "roles": ["reviewer"]},
            {"key": "lead", "label": "lead", "count": 1, "roles": ["reviewer"], "attributes": {"level": "lead"}},
        ],
    }],
    "routes": [{"policies": ["peers_and_lead"], "min_items": 2}],
}


def _panel(html: str) -> str:
    match = re.search(r'<section class="card" aria-labelledby="policy-h" id="approval-policy">(.*?)</section>', html, re.S)
    assert match, "no approval policy panel"
    return re.sub(r"\s+", " ", match.group(1))


def test_pol_3_the_batch_page_shows_the_policy_its_progress_the_votes_and_buttons_for_who_may_vote(app, client, team):
    """POL-3: "1 of 2 peers, 0 of 1 lead" after one peer's approval; the vote is
    listed with its author; a vote bound to an earlier batch digest is shown as no
    longer counting; the maker and the peer who voted see no buttons, the lead does."""
    set_approval_settings(team.installation_id, PEERS_AND_LEAD)
    lead = make_operator(team.installation_id, "lead", roles=["reviewer"])
    set_operator_attributes(lead.id, attributes={"level": "lead"})
    make_operator(team.installation_id, "peer2", roles=["reviewer"])
    batch_id, _ = submitted(client, team, ["post:1", "post:2", "post:3"])

    html = client.get(f"/bulk/{batch_id}").get_data(as_text=True)  # the maker
    panel = _panel(html)
    assert "<strong>Two peers and a lead</strong> — chosen for a batch of 2 or more." in panel
    assert "Two peers and a lead: <strong>0 of 2 peers, 0 of 1 lead</strong>" in panel and "No vote yet." in panel
    assert "You cannot vote on this batch." in html and 'action="/bulk/' + batch_id + '/approve"' not in html

    token = sign_in(client, team, "reviewer")
    html = client.get(f"/bulk/{batch_id}").get_data(as_text=True)
    response = client.post(f"/bulk/{batch_id}/approve", data={"csrf_token": token, "digest": digest_on(html, "approve")},
                           follow_redirects=True)
    html = response.get_data(as_text=True)
    assert "Your approval is recorded; the policy still waits: Two peers and a lead: 1 of 2 peers, 0 of 1 lead." in html
    panel = _panel(html)
    assert "<strong>1 of 2 peers, 0 of 1 lead</strong>" in panel
    assert re.search(r"<td><bdi>Reviewer</bdi></td> <td>approved</td>", panel)
    assert f'action="/bulk/{batch_id}/approve"' not in html  # their vote counts: nothing left for them

    sign_in(client, team, "lead")
    html = client.get(f"/bulk/{batch_id}").get_data(as_text=True)
    assert f'action="/bulk/{batch_id}/approve"' in html and f'action="/bulk/{batch_id}/reject"' in html

    vote = db.session.scalar(select(ApprovalVote.id).where(ApprovalVote.batch_id == batch_id))
    set_row(ApprovalVote, vote, payload_digest="sha256:earlier", batch_digest="sha256:earlier")  # as if cast before
    panel = _panel(client.get(f"/bulk/{batch_id}").get_data(as_text=True))
    assert "<strong>0 of 2 peers, 0 of 1 lead</strong>" in panel
    assert "No longer counts: bound to an earlier batch digest" in panel
