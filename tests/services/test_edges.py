"""Edges of timeouts, pre-send checks and late receipts (EDGE-3, EDGE-4, EDGE-5)."""

from __future__ import annotations

from datetime import timedelta

import pytest
from sqlalchemy import update

from app.domain.clock import utcnow
from app.extensions import db
from app.models import ActionProposal, AppealCorrection, WorkflowRun
from app.services.cases.appeals import decide_appeal, file_appeal
from app.services.lifecycle import prepare
from app.services.lifecycle.dispatch import deliver
from app.services.lifecycle.runs import time_out_run
from app.services.uow import Actor

from ..builders import approve, decide_report, reload, set_row


def waiting_on_delivery(world):
    """An approved action, queued; its run waits for the delivery to resolve."""
    proposal = decide_report(world)
    approve(world, proposal)
    proposal = reload(proposal)
    assert proposal.state == "queued" and proposal.accepted_at is None
    run = db.session.get(WorkflowRun, proposal.run_id)
    assert run.state == "waiting"
    set_row(WorkflowRun, run.id, wait_deadline_at=utcnow() - timedelta(seconds=1))
    return proposal


def race_before_the_timeout_write(monkeypatch, **columns):
    """Another writer changes the proposal between the timeout's read and its write."""
    real = prepare.move_proposal
    raced = []

    def move(session, proposal_id, move, **kwargs):
        if not raced:
            raced.append(move)
            session.execute(
                update(ActionProposal)
                .where(ActionProposal.id == proposal_id)
                .values(**columns)
                .execution_options(synchronize_session=False)
            )
        return real(session, proposal_id, move, **kwargs)

    monkeypatch.setattr(prepare, "move_proposal", move)
    return raced


def test_timeout_decides_inside_the_guarded_write(app, world, platform, monkeypatch):
    """EDGE-3: a worker claimed the action after the timeout read it as unsent: the
    proposal still ends terminal, failed as something may have been sent."""
    proposal = waiting_on_delivery(world)
    raced = race_before_the_timeout_write(
        monkeypatch,
        state="applying",
        delivery_attempt_count=1,
        lease_expires_at=utcnow() + timedelta(seconds=150),
    )
    assert time_out_run(proposal.run_id)
    assert raced
    row = reload(proposal)
    assert (row.state, row.delivery_terminal, row.last_error_code) == (
        "failed",
        True,
        "action_confirmation_timed_out",
    )
    run = db.session.get(WorkflowRun, proposal.run_id)
    assert (run.state, run.outcome_port) == ("completed", "timeout")


def test_a_receipt_that_won_the_race_with_the_timeout_wins(app, world, platform, monkeypatch):
    """EDGE-3: the action was applied between the timeout's read and its write: it
    stays applied and the run answers applied."""
    proposal = waiting_on_delivery(world)
    race_before_the_timeout_write(
        monkeypatch, state="applied", delivery_terminal=True, delivery_attempt_count=1, confirmed_at=utcnow()
    )
    assert time_out_run(proposal.run_id)
    row = reload(proposal)
    assert (row.state, row.last_error_code) == ("applied", None)
    assert db.session.get(WorkflowRun, proposal.run_id).outcome_port == "applied"


def test_an_unexpected_error_in_the_pre_send_checks_counts_as_a_failed_attempt(app, world, platform, monkeypatch):
    """EDGE-4: the claim is kept, the attempt counted, and the next one waits for its
    backoff instead of being claimed again at once."""
    import app.services.lifecycle.dispatch.plan as plan

    proposal = decide_report(world)
    approve(world, proposal)

    def broken(*args, **kwargs):
        raise RuntimeError("a bug in a pre-send check")

    monkeypatch.setattr(plan, "report_snapshot", broken)
    before = utcnow()
    outcome = deliver(proposal.id)
    assert (outcome.claimed, outcome.state, outcome.error_code, outcome.terminal) == (
        True,
        "failed",
        "action_delivery_failed",
        False,
    )
    row = reload(proposal)
    assert (row.delivery_attempt_count, row.lease_expires_at) == (1, None)
    assert row.next_attempt_at >= before + timedelta(seconds=15)
    assert not deliver(proposal.id).claimed  # not due again at once
    assert platform.state.requests_seen == 0


@pytest.fixture
def accepted_correction(app, world, platform):
    """An appeal correction the platform accepted and has not confirmed yet."""
    original = decide_report(world)
    approve(world, original)
    assert deliver(original.id).state == "applied"
    appeal_id = file_appeal(
        world.report_ids[0],
        statement="It was satire.",
        actor=Actor("operator", world.users["moderator"]),
        installation_id=world.installation_id,
    ).appeal_id
    [correction_id] = decide_appeal(
        appeal_id, outcome="reversed", rationale="Satire", operator=world.user("reviewer2")
    ).correction_ids
    proposal = db.session.get(ActionProposal, db.session.get(AppealCorrection, correction_id).proposal_id)
    approve(world, proposal, reviewer="admin")
    platform.state.configure(mode="async")  # answers accepted; confirms through the API later
    assert deliver(proposal.id).state == "queued"
    proposal = reload(proposal)
    assert proposal.accepted_at is not None
    return proposal


def test_a_corrections_receipt_after_its_authorization_expired_is_refused(app, client, world, accepted_correction):
    """EDGE-5: 409 action_result_conflict, and nothing changes."""
    set_row(ActionProposal, accepted_correction.id, expires_at=utcnow() - timedelta(seconds=1))
    before = reload(accepted_correction)
    response = client.post(
        "/api/v1/action-results",
        json={
            "action_id": before.id,
            "operation_id": before.operation_id,
            "payload_digest": before.payload_digest,
            "status": "applied",
        },
        headers={"Authorization": f"Bearer {world.console_token}"},
    )
    assert response.status_code == 409 and response.get_json()["error"]["code"] == "action_result_conflict"
    after = reload(accepted_correction)
    assert (after.state, after.updated_at, after.confirmed_at) == ("queued", before.updated_at, None)


def test_a_corrections_receipt_in_time_is_applied(app, client, world, accepted_correction):
    """EDGE-5: before its expiry the same receipt confirms the correction."""
    response = client.post(
        "/api/v1/action-results",
        json={
            "action_id": accepted_correction.id,
            "operation_id": accepted_correction.operation_id,
            "payload_digest": accepted_correction.payload_digest,
            "status": "applied",
        },
        headers={"Authorization": f"Bearer {world.console_token}"},
    )
    assert response.status_code == 200 and reload(accepted_correction).state == "applied"
