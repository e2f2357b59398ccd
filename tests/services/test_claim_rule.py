"""The sweep's query of due deliveries and the domain's claim rule agree (DLV-1, EVT-3)."""

from __future__ import annotations

import itertools
from datetime import timedelta

from app.domain.clock import utcnow
from app.domain.proposal import delivery as rules
from app.extensions import db
from app.models import ActionProposal
from app.services.lifecycle.proposals import delivery_of
from app.services.lifecycle.sweeps import due_proposals

from ..builders import approve, decide_report, set_row


def test_due_query_lists_exactly_what_a_worker_may_claim(app, world, platform):
    """DLV-1: every combination of state, due time, lease, attempts and acceptance."""
    now = utcnow()
    past, future = now - timedelta(seconds=5), now + timedelta(seconds=60)
    combinations = list(
        itertools.product(
            ["queued", "failed", "applying", "applied"],
            [past, future, None],  # next_attempt_at
            [past, future, None],  # lease_expires_at
            [0, 7, 8],  # attempts in the cycle
            [None, past],  # accepted_at
            [False, True],  # delivery_terminal
        )
    )
    proposal = decide_report(world)
    approve(world, proposal)
    expected, listed = set(), set()
    for state, due, lease, attempts, accepted, terminal in combinations:
        set_row(
            ActionProposal,
            proposal.id,
            state=state,
            next_attempt_at=due,
            lease_expires_at=lease,
            delivery_attempt_count=attempts + 2,
            cycle_start_attempt=2,
            accepted_at=accepted,
            delivery_terminal=terminal,
        )
        key = (state, due, lease, attempts, accepted, terminal)
        db.session.rollback()
        row = db.session.get(ActionProposal, proposal.id)
        if rules.claim(delivery_of(row), now) is not None:
            expected.add(key)
        if any(found == proposal.id for found, _, _ in due_proposals(now)):
            listed.add(key)
    assert listed == expected and expected
