"""A two-factor approval in Debian's Chromium (POL-1, POL-3): under "1 peer + 1 lead" a
peer approves and the panel says what is still missing; the lead approves and the
action is queued and applied."""

from __future__ import annotations

from playwright.sync_api import expect
from sqlalchemy import select

from app.extensions import db
from app.models import ActionApproval, OperatorUser

from ..builders import (
    PEER_AND_LEAD,
    decide_report,
    make_operator,
    reload,
    set_approval_settings,
    set_operator_attributes,
)
from .test_console_stories import approve_in_page, sign_in, sign_out


def test_a_peer_then_a_lead_approve(page, world, platform, screenshots):
    """POL-1, POL-3: the peer's approval leaves "1 of 1 peer, 0 of 1 lead" on the
    panel and the proposal waiting; the lead's approval releases it."""
    set_approval_settings(world.installation_id, PEER_AND_LEAD)
    lead = make_operator(world.installation_id, "lead", ["reviewer"])
    set_operator_attributes(lead.id, attributes={"level": "lead"})
    lead_email = db.session.get(OperatorUser, lead.id).email
    proposal = decide_report(world)
    assert proposal.approval_route["policies"][0]["key"] == "peer_and_lead"

    sign_in(page, "reviewer@example.com")
    page.goto(f"/proposals/{proposal.id}")
    expect(page.locator("#approval-progress")).to_contain_text("0 of 1 peer, 0 of 1 lead")
    approve_in_page(page, proposal.id)
    expect(page.get_by_text("is recorded. It still waits: A peer and a lead")).to_be_visible()
    expect(page.locator("#approval-progress")).to_contain_text("1 of 1 peer, 0 of 1 lead — still missing 1 lead")
    expect(page.locator("#approval-votes-counting")).to_contain_text("approved as peer")
    expect(page.get_by_role("button", name="Record decision")).to_have_count(0)
    page.screenshot(path=str(screenshots / "pol-one-of-two-factors.png"), full_page=True)
    assert reload(proposal).state == "approval_required"
    page.goto("/inbox")  # off the proposal page: its live panel's poll would meet the sign-out (401)
    sign_out(page)

    sign_in(page, lead_email)
    approve_in_page(page, proposal.id)
    expect(page.locator("#live .badge.state-applied")).to_be_visible(timeout=30_000)
    db.session.rollback()
    decided = db.session.scalar(select(ActionApproval).where(ActionApproval.proposal_id == proposal.id))
    assert decided.approver_id == lead.id
    assert platform.state.content["post:1001"] == "removed"
    assert page.js_errors == []
