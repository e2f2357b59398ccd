"""Retiring a component version never strands what was approved (SPEC FOUR-7, part):
a version that open proposals or scheduled reversals use cannot be retired (409
``component_version_in_use`` with how many, nothing changes); once they are done it
can, as a change for a second admin (FOUR-4)."""

from __future__ import annotations

from datetime import timedelta

from sqlalchemy import select

from app.domain.clock import utcnow
from app.extensions import db
from app.models import ActionProposal, ComponentVersion
from app.services.lifecycle.dispatch import deliver

from ..builders import approve, approve_in_console, approve_pending, decide_report, pending_changes, reload, set_row
from .test_admin import admin, assert_refused, post, snapshot


def retire_url(version_id: str) -> str:
    version = db.session.get(ComponentVersion, version_id)
    return f"/admin/components/{version.definition_id}/versions/{version_id}/retire"


def retired(version_id: str) -> bool:
    db.session.rollback()
    return db.session.get(ComponentVersion, version_id).retired_at is not None


def reversal_of(original) -> ActionProposal | None:
    db.session.rollback()
    return db.session.scalar(select(ActionProposal).where(ActionProposal.reverses_proposal_id == original.id))


def test_four7_a_version_in_use_is_not_retired_until_what_uses_it_is_done(app, client, world, platform):
    """FOUR-7: a temporary action with its scheduled reversal and a queued proposal; retiring
    the reversal's version or the queued proposal's is refused with how many use it and
    changes nothing (it used to fail them all for good with action_component_unavailable);
    once they are applied, retiring is a pending change a second admin approves."""
    suspension = decide_report(world, 0, code="suspend_account")
    approve(world, suspension)
    assert deliver(suspension.id).state == "applied"
    reversal = reversal_of(suspension)
    assert reversal.state == "queued" and reversal.component_version_id == world.components["unsuspend_account"]
    queued = decide_report(world, 1)
    approve(world, queued)
    assert reload(queued).state == "queued"

    csrf = admin(client)
    before = snapshot()
    for version_id in (world.components["unsuspend_account"], world.components[queued_slug(world, queued)]):
        page = assert_refused(post(client, retire_url(version_id), csrf), 409, "component_version_in_use")
        assert "1 open proposal or scheduled reversal uses this version" in page
        assert not retired(version_id)
    assert snapshot() == before and pending_changes() == []

    past = utcnow() - timedelta(seconds=1)
    set_row(ActionProposal, reversal.id, not_before=past, next_attempt_at=past)
    assert deliver(reversal.id).state == "applied"
    assert deliver(queued.id).state == "applied"
    for version_id in (world.components["unsuspend_account"], world.components[queued_slug(world, queued)]):
        assert post(client, retire_url(version_id), csrf).status_code == 303
        assert not retired(version_id)  # FOUR-4: it waits for a second admin
    assert len(approve_pending(app)) == 2
    assert retired(world.components["unsuspend_account"]) and retired(world.components[queued_slug(world, queued)])


def test_four7_a_temporary_action_not_yet_applied_holds_its_reversals_version(app, client, world, platform):
    """FOUR-7: an approved suspension still queued will schedule its reversal: the
    reversal's version is in use already."""
    suspension = decide_report(world, 0, code="suspend_account")
    approve(world, suspension)
    assert reload(suspension).state == "queued"
    csrf = admin(client)
    response = post(client, retire_url(world.components["unsuspend_account"]), csrf)
    assert_refused(response, 409, "component_version_in_use")


def test_four7_approval_refuses_a_retirement_that_would_now_strand_a_proposal(app, client, world, platform):
    """FOUR-7: a retirement proposed while nothing used the version is checked again when
    approved: a proposal queued since refuses it, and the change stays pending."""
    takedown = world.components["takedown"]
    csrf = admin(client)
    assert post(client, retire_url(takedown), csrf).status_code == 303
    [change] = pending_changes()
    queued = decide_report(world, 0)
    approve(world, queued)
    response = approve_in_console(app, change.id)
    assert_refused(response, 409, "component_version_in_use")
    assert not retired(takedown) and [c.id for c in pending_changes()] == [change.id]
    assert reload(queued).state == "queued"


def queued_slug(world, proposal) -> str:
    return next(slug for slug, version_id in world.components.items() if version_id == proposal.component_version_id)
