"""The test builders reach each proposal state through the real moves (tests/builders.py)."""

from __future__ import annotations

import pytest
from sqlalchemy import func, select

from app.extensions import db
from app.models import ActionApproval, ConnectionAttempt, Installation, OperatorUser, Report

from .builders import (
    OPERATOR_ROLES,
    PROPOSAL_STATES,
    make_decision,
    make_operator,
    make_proposal,
    make_report,
    make_team,
)


def count(model) -> int:
    db.session.rollback()
    return db.session.scalar(select(func.count()).select_from(model))


@pytest.mark.parametrize("state", PROPOSAL_STATES)
def test_make_proposal_reaches_each_state(app, platform, state):
    team = make_team(platform)
    proposal = make_proposal(team, state=state)
    expected = "queued" if state == "accepted" else state
    assert proposal.state == expected
    if state == "failed":
        assert (proposal.delivery_terminal, proposal.last_error_code) == (True, "platform_client_error")
    sent = db.session.scalar(select(func.count()).select_from(ConnectionAttempt))
    assert sent == (1 if state in ("accepted", "applied", "failed", "compensation_required") else 0)
    assert platform.state.requests_seen == sent


def test_failed_after_a_whole_cycle(app, platform):
    """DLV-6: eight retryable failures use up the cycle; the platform works afterwards."""
    proposal = make_proposal(make_team(platform), state="failed", attempts=8)
    assert (proposal.delivery_attempt_count, proposal.delivery_terminal) == (8, True)
    assert proposal.last_error_code == "platform_server_error"
    assert platform.state.fail_next == 0


def test_failed_and_waiting_to_retry(app, platform):
    proposal = make_proposal(make_team(platform), state="failed", attempts=2, terminal=False)
    assert (proposal.delivery_attempt_count, proposal.delivery_terminal) == (2, False)
    assert proposal.next_attempt_at is not None


def test_bounded_automation_is_queued_without_an_approval(app):
    proposal = make_proposal(make_team(approval_mode="bounded_auto"), state="queued")
    assert proposal.approval_mode == "bounded_auto"
    assert db.session.scalar(select(func.count()).select_from(ActionApproval)) == 0


def test_builders_make_only_what_they_are_asked_for(app):
    team = make_team()
    report = make_report(team, target="post:77")
    assert (report.state, report.installation_id) == ("open", team.installation_id)
    decision = make_decision(report, code="no_violation", maker="reviewer2")
    assert (decision.decision_code, decision.maker_id) == ("no_violation", team.user("reviewer2").id)
    assert count(Report) == 1 and count(Installation) == 1
    emails = set(db.session.scalars(select(OperatorUser.email)))
    assert emails == {f"{name}@{team.slug}.example.com" for name in OPERATOR_ROLES}
    assert make_operator(team.installation_id, "reviewer2").roles == {"reviewer", "moderator"}
    assert make_operator(team.installation_id, "reviewer2").id == decision.maker_id  # made once
    lead = make_operator(team.installation_id, "lead", roles=["admin"])
    assert lead.roles == {"admin"} and count(OperatorUser) == len(OPERATOR_ROLES) + 1
