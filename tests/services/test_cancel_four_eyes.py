"""Cancel is not a quiet reject (SPEC FOUR-9, TEMP-4): cancelling an approved
proposal takes a second person who did not make it; cancelling one that awaits
approval is a rejection (reviewer role, FOUR-1), unless one of its makers withdraws it."""

from __future__ import annotations

from datetime import timedelta

import pytest
from sqlalchemy import select

from app.domain.clock import utcnow
from app.domain.errors import ApiError
from app.extensions import db
from app.models import ActionProposal, AuditEvent, WorkflowRun
from app.services.lifecycle.cancel_scheduled import cancel_scheduled
from app.services.lifecycle.dispatch import deliver

from ..builders import approve, decide_report, login, make_operator, reload, set_graph, set_row


def audits(action: str) -> list[AuditEvent]:
    db.session.rollback()
    return list(db.session.scalars(select(AuditEvent).where(AuditEvent.action == action).order_by(AuditEvent.seq)))


def scheduled_takedown(world, maker="moderator", delay_seconds=3600) -> ActionProposal:
    set_graph(world, lambda g: g["nodes"]["takedown"]["config"].__setitem__("delay_seconds", delay_seconds))
    proposal = decide_report(world, maker=maker)
    assert proposal.state == "approval_required" and proposal.not_before > utcnow()
    return reload(proposal)


def refused(call) -> tuple[int, str]:
    with pytest.raises(ApiError) as error:
        call()
    return error.value.status, error.value.code


def test_four9_an_approved_proposal_is_cancelled_by_two_people(app, world, platform):
    """FOUR-9: an admin alone cannot cancel a reviewer-approved scheduled takedown: the
    first call records the ask (audited, the state unchanged); asking again, or a
    confirmation by someone without the reviewer role, is refused; a second reviewer who
    is neither the asker nor a maker confirms, and it is cancelled (audited, naming both)."""
    proposal = scheduled_takedown(world)
    approve(world, proposal)
    asked = cancel_scheduled(proposal.id, world.user("admin2"))
    assert (asked.state, asked.step) == ("queued", "ask")
    assert reload(proposal).state == "queued"
    [ask] = audits("action.cancel_requested")
    assert (ask.actor_id, ask.target_id) == (world.users["admin2"], proposal.id)
    assert refused(lambda: cancel_scheduled(proposal.id, world.user("admin2"))) == (
        409,
        "action_cancel_awaiting_second_person",
    )
    assert refused(lambda: cancel_scheduled(proposal.id, world.user("moderator"))) == (403, "maker_checker_violation")
    assert reload(proposal).state == "queued" and audits("action.cancelled") == []
    done = cancel_scheduled(proposal.id, world.user("reviewer2"))
    assert (done.state, done.step) == ("cancelled", "confirm")
    [event] = audits("action.cancelled")
    assert event.actor_id == world.users["reviewer2"]
    assert event.details["asked_by"] == [world.users["admin2"]] and event.details["step"] == "confirm"
    time_past = utcnow() - timedelta(seconds=1)
    set_row(ActionProposal, proposal.id, not_before=time_past, next_attempt_at=time_past)
    assert not deliver(proposal.id).claimed and platform.state.effects == []


def test_four9_a_maker_cannot_confirm_the_cancel(app, world, platform):
    """FOUR-9, FOUR-1: a reviewer who made the decision the proposal carries cannot be the
    second person of its cancel."""
    proposal = scheduled_takedown(world, maker="reviewer2")
    approve(world, proposal, reviewer="reviewer")
    assert cancel_scheduled(proposal.id, world.user("moderator")).step == "ask"
    assert refused(lambda: cancel_scheduled(proposal.id, world.user("reviewer2"))) == (403, "maker_checker_violation")
    assert reload(proposal).state == "queued"
    assert cancel_scheduled(proposal.id, world.user("admin")).state == "cancelled"


def test_four9_an_ask_does_not_hold_delivery(app, world, platform):
    """FOUR-9: an unconfirmed ask does not stop the approved action (holding it would let
    one person delay it until its authorization lapses): it is sent at its time, and a
    later confirmation answers ``action_already_sent``."""
    proposal = scheduled_takedown(world)
    approve(world, proposal)
    cancel_scheduled(proposal.id, world.user("admin2"))
    time_past = utcnow() - timedelta(seconds=1)
    set_row(ActionProposal, proposal.id, not_before=time_past, next_attempt_at=time_past)
    assert deliver(proposal.id).state == "applied"
    assert refused(lambda: cancel_scheduled(proposal.id, world.user("reviewer2"))) == (409, "action_already_sent")


def test_four9_cancelling_someone_elses_proposal_awaiting_approval_is_a_rejection(app, world, platform):
    """FOUR-9, FOUR-1: a plain moderator cannot cancel a proposal awaiting approval that
    was made from someone else's decision (403 ``action_cancel_needs_reviewer``); a
    reviewer who is not a maker can, as a rejection (audited step ``reject``)."""
    proposal = scheduled_takedown(world)
    other = make_operator(world.installation_id, "moderator2", roles=["moderator"])
    assert refused(lambda: cancel_scheduled(proposal.id, other)) == (403, "action_cancel_needs_reviewer")
    assert reload(proposal).state == "approval_required"
    done = cancel_scheduled(proposal.id, world.user("reviewer2"))
    assert (done.state, done.step) == ("cancelled", "reject")
    [event] = audits("action.cancelled")
    assert event.details["step"] == "reject"


def test_four9_a_maker_withdraws_their_own_proposal(app, world, platform):
    """FOUR-9: the moderator whose decision made the proposal may withdraw it alone
    before it is approved; its run resumes (the proposal is cancelled, nothing sent)."""
    proposal = scheduled_takedown(world)
    done = cancel_scheduled(proposal.id, world.user("moderator"))
    assert (done.state, done.step) == ("cancelled", "withdraw")
    db.session.rollback()
    assert db.session.get(WorkflowRun, proposal.run_id) is not None and platform.state.effects == []


def test_four9_the_page_offers_the_cancel_each_person_may_make(client, world, platform):
    """FOUR-9: the proposal page's cancel control comes from the offers: "Ask to cancel"
    for the first person, the ask and "Confirm the cancel" for a second reviewer, and for
    a maker a disabled control with the reason."""
    proposal = scheduled_takedown(world)
    approve(world, proposal)
    token = login(client, "admin2@example.com")
    page = client.get(f"/proposals/{proposal.id}").get_data(as_text=True)
    assert 'data-cancel="ask"' in page and "Ask to cancel it" in page
    client.post(f"/proposals/{proposal.id}/cancel", data={"csrf_token": token})
    client.post("/logout", data={"csrf_token": token})
    token = login(client, "moderator@example.com")
    page = client.get(f"/proposals/{proposal.id}").get_data(as_text=True)
    assert 'id="cancel-asked"' in page and "Arne Admin" in page
    assert "Confirm the cancel (nothing is sent) is not available" in page
    client.post("/logout", data={"csrf_token": token})
    login(client, "reviewer2@example.com")
    page = client.get(f"/proposals/{proposal.id}").get_data(as_text=True)
    assert 'data-cancel="confirm"' in page and "Confirm the cancel" in page
