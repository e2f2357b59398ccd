"""What a new user of the approval policies ran into on the pages (SPEC POL-1, POL-2, POL-7)."""

from __future__ import annotations

import re

from ..builders import PEER_AND_LEAD, approve, decide_report, login, set_approval_settings, set_operator_attributes
from .test_pol_inbox import badge, inbox_ids


def lead_block(client, proposal_id: str) -> str:
    page = client.get(f"/proposals/{proposal_id}").get_data(as_text=True)
    return re.sub(r"\s+", " ", re.search(r'<section id="lead".*?</section>', page, re.S).group(0))


def peer_approved(world):
    """Under "a peer and a lead" (the admin is the lead), the reviewer approved as the peer."""
    set_approval_settings(world.installation_id, PEER_AND_LEAD)
    set_operator_attributes(world.users["admin"], attributes={"level": "lead"})
    proposal = decide_report(world)
    approve(world, proposal, "reviewer")
    return proposal


def test_pol7_a_proposal_where_an_approval_would_count_for_nothing_waits_for_no_one_else(app, client, world):
    """POL-7, POL-1: once the peer factor is met, a second peer's approval would count
    for nothing (``approval_factor_already_met``): the proposal is not in that peer's
    inbox nor count, and its page does not say it waits for them; the lead's inbox
    still lists it."""
    proposal = peer_approved(world)
    login(client, "reviewer2@example.com")
    assert inbox_ids(client) == []
    assert badge(client.get("/reports").get_data(as_text=True)) is None
    block = lead_block(client, proposal.id)
    assert "Waiting for your approval" not in block and "Still missing: 1 lead." in block
    assert "you may still reject it" in block
    lead = app.test_client()
    login(lead, "admin@example.com")
    assert inbox_ids(lead) == [proposal.id]
    assert badge(lead.get("/reports").get_data(as_text=True)) == 1


def test_pol2_the_lead_block_says_what_is_still_missing(app, client, world):
    """POL-2: while the lead is missing, the proposal's lead block says "Still missing:
    1 lead" (the standing), not a generic "a reviewer other than its maker"."""
    proposal = peer_approved(world)
    login(client, "reviewer@example.com")  # the peer, whose vote is in
    block = lead_block(client, proposal.id)
    assert "Still missing: 1 lead." in block
    assert "A reviewer other than its maker" not in block


def test_pol3_the_summary_names_the_policy_that_applied_and_pol1_the_reject_reason_is_required(app, client, world):
    """POL-3: the summary row "Approval" names the policy recorded on the proposal
    (its label), not "A second person approves"; POL-1: under a policy with
    ``reason_on_reject`` the reject form says the reason is required."""
    proposal = peer_approved(world)
    login(client, "admin@example.com")
    page = client.get(f"/proposals/{proposal.id}").get_data(as_text=True)
    row = re.sub(r"\s+", " ", page.split("<dt>Approval</dt>")[1].split("</dd>")[0])
    assert "A peer and a lead" in row and "A second person approves" not in row
    assert "Reason (required to reject" in page and "Reason (optional" not in page


def test_pol4_a_protection_reason_ending_with_a_full_stop_is_not_doubled(app, client, world):
    """POL-4: the lead block's protected note reads "…: a verified public figure." even
    when the mark's reason already ends with a full stop."""
    from app.services.admin.protected_subjects import propose_mark

    from ..builders import approve_change

    proposal = decide_report(world)
    reference = proposal.target["reference"]
    approve_change(world, propose_mark(world.user("admin"), "account", reference, "A verified public figure."))
    login(client, "reviewer@example.com")
    block = lead_block(client, proposal.id)
    assert "figure.." not in block
