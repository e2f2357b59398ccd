"""Bounded automation is bounded: no budget, nothing sent (SPEC FOUR-3)."""

from __future__ import annotations

from sqlalchemy import select, update

from app.extensions import db
from app.models import Budget, ConnectionAttempt
from app.services.lifecycle.dispatch import deliver

from ..builders import decide_report, make_world, reload


def test_no_active_budget_fails_before_anything_is_sent(app, platform):
    """FOUR-3: a bounded-automation proposal with no active budget covering it fails
    terminal ``action_budget_missing``; the platform on loopback sees no request."""
    world = make_world(platform.url, approval_mode="bounded_auto")
    platform.configure_for(world)
    db.session.execute(update(Budget).values(active=False))
    db.session.commit()
    proposal = decide_report(world)
    assert proposal.state == "queued"
    outcome = deliver(proposal.id)
    row = reload(proposal)
    assert (outcome.error_code, row.state, row.delivery_terminal) == ("action_budget_missing", "failed", True)
    assert platform.state.requests_seen == 0 and platform.state.effects == []
    assert db.session.scalar(select(ConnectionAttempt.id)) is None
