"""The proposal page and its live panel offer what the domain's `offers` say, and
agree with each other (§4, RTRY-1, COMP-1, APPR-4)."""

from __future__ import annotations

from datetime import timedelta

from app.domain.clock import utcnow
from app.models import ActionProposal
from app.services.lifecycle.dispatch import deliver

from .. import scripted as s
from ..builders import approve, decide_report, login, logout, reload, set_row

RETRY = "Retry delivery (starts cycle 2)"


def pages(client, proposal) -> tuple[str, str]:
    detail = client.get(f"/proposals/{proposal.id}").get_data(as_text=True)
    live = client.get(f"/proposals/{proposal.id}/live").get_data(as_text=True)
    return detail, live


def test_a_failure_waiting_to_retry_offers_no_retry_anywhere(app, client, world, scripted):
    """RTRY-1: only a terminal failure is retried; the page and its live panel agree
    (the live view and the template used to decide this each in its own way)."""
    scripted(s.http_status(503))
    proposal = decide_report(world)
    approve(world, proposal)
    assert deliver(proposal.id).state == "failed" and not reload(proposal).delivery_terminal
    login(client, "reviewer@example.com")
    detail, live = pages(client, proposal)
    assert RETRY not in detail and RETRY not in live
    assert 'name="payload_digest"' not in live


def test_a_terminal_failure_offers_a_retry_on_both(app, client, world, scripted):
    """RTRY-1: offered to reviewers and admins, on the page and in the live panel."""
    scripted(s.http_status(400))
    proposal = decide_report(world)
    approve(world, proposal)
    assert deliver(proposal.id).terminal
    login(client, "reviewer@example.com")
    detail, live = pages(client, proposal)
    assert RETRY in detail and RETRY in live


def test_an_expired_terminal_failure_says_why_it_cannot_be_retried(app, client, world, scripted):
    """RTRY-1: the authorization expired: the reason instead of the button."""
    scripted(s.http_status(400))
    proposal = decide_report(world)
    approve(world, proposal)
    deliver(proposal.id)
    set_row(ActionProposal, proposal.id, expires_at=utcnow() - timedelta(seconds=1))
    login(client, "admin@example.com")
    detail, live = pages(client, proposal)
    assert RETRY not in detail and "Retry is not available" in detail and "authorization expired" in live


def test_moderators_are_offered_neither_retry_nor_compensation(app, client, world, platform):
    """COMP-1, RTRY-1: those forms are for reviewers and admins."""
    proposal = decide_report(world)
    approve(world, proposal)
    assert deliver(proposal.id).state == "applied"
    token = login(client, "moderator@example.com")
    detail, _ = pages(client, proposal)
    assert "Propose a compensating action" not in detail
    logout(client, token)
    login(client, "admin@example.com")
    detail, _ = pages(client, proposal)
    assert "Propose a compensating action" in detail
