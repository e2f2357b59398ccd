"""Operator retry (RTRY), waiting runs and their timeout (WAIT), events and sweeps (EVT)."""

from __future__ import annotations

import json
from datetime import timedelta

import pytest
from sqlalchemy import func, select

from app.domain.clock import utcnow
from app.domain.errors import ApiError
from app.extensions import db
from app.models import (
    ActionProposal,
    AuditEvent,
    HumanTask,
    Report,
    SweepRun,
    WorkflowDispatchOutbox,
    WorkflowEventInbox,
    WorkflowRun,
)
from app.queueing import delivery_queue
from app.services.lifecycle import sweeps
from app.services.lifecycle.dispatch import deliver
from app.services.lifecycle.retry import retry_proposal

from ..builders import approve, make_due, make_proposal, make_team, reload, set_row


def exhaust(proposal):
    """Deliver until the cycle's 8 attempts are used."""
    for _ in range(8):
        deliver(proposal.id)
        make_due(proposal)
    row = reload(proposal)
    assert row.state == "failed" and row.delivery_terminal
    return row


@pytest.fixture
def failed(team):
    """A proposal whose first cycle failed 8 times; the platform now works."""
    return make_proposal(team, state="failed", attempts=8)


def retry(team, proposal, who="reviewer", key="retry-1", digest=None):
    return retry_proposal(
        proposal.id, payload_digest=digest or proposal.payload_digest, idempotency_key=key, operator=team.user(who)
    )


# -- RTRY --------------------------------------------------------------------------


def test_retry_starts_a_new_cycle_with_its_own_attempts(app, team, failed):
    """RTRY-2: cycle +1, cycle_start_attempt = attempts so far, audit, enqueued, 8 new attempts."""
    result = retry(team, failed)
    assert (result.state, result.delivery_cycle, result.idempotent_replay) == ("queued", 2, False)
    row = reload(failed)
    assert (row.delivery_cycle, row.cycle_start_attempt, row.delivery_attempt_count) == (2, 8, 8)
    assert (row.accepted_at, row.last_error_code, row.delivery_terminal) == (None, None, False)
    audit = db.session.scalar(select(AuditEvent).where(AuditEvent.action == "action.retry_requested"))
    assert audit.details == {"payload_digest": failed.payload_digest, "delivery_cycle": 2}
    assert delivery_queue(app).count >= 1
    outcome = deliver(failed.id)
    assert (outcome.state, outcome.attempt_number) == ("applied", 9)
    event = db.session.get(WorkflowEventInbox, f"{failed.id}:delivery-resolution:2")
    assert event is not None and event.event_key == f"action-delivery:{failed.id}:2"  # EVT-1


def test_second_cycle_gets_eight_attempts(app, team, failed):
    """RTRY-2: each delivery cycle has its own 8 attempts."""
    retry(team, failed)
    team.platform.state.configure(fail_next=8, fail_status=503)
    row = exhaust(failed)
    assert (row.delivery_cycle, row.delivery_attempt_count) == (2, 16)


def test_only_terminal_failures_can_be_retried(app, team):
    """RTRY-1: 409 action_not_retryable."""
    proposal = make_proposal(team)
    with pytest.raises(ApiError) as caught:
        retry(team, proposal)
    assert (caught.value.status, caught.value.code) == (409, "action_not_retryable")


def test_retry_needs_the_exact_digest(app, team, failed):
    """RTRY-1: 409 action_retry_digest_mismatch."""
    with pytest.raises(ApiError) as caught:
        retry(team, failed, digest="sha256:" + "1" * 64)
    assert caught.value.code == "action_retry_digest_mismatch"
    assert reload(failed).delivery_cycle == 1


def test_retry_needs_an_unexpired_authorization(app, team, failed):
    """RTRY-1: 409 action_approval_expired."""
    set_row(ActionProposal, failed.id, expires_at=utcnow() - timedelta(seconds=1))
    with pytest.raises(ApiError) as caught:
        retry(team, failed)
    assert caught.value.code == "action_approval_expired"


def test_retry_needs_preconditions_still_true(app, team, failed):
    """RTRY-1, PRE-1"""
    set_row(Report, failed.report_id, state="open")
    with pytest.raises(ApiError) as caught:
        retry(team, failed)
    assert (caught.value.status, caught.value.code) == (409, "action_precondition_changed")


def test_retry_needs_an_open_run(app, team, failed):
    """RTRY-1: a terminated run cannot be retried."""
    set_row(WorkflowRun, failed.run_id, state="terminated")
    with pytest.raises(ApiError) as caught:
        retry(team, failed)
    assert caught.value.code == "action_retry_conflict"


def test_retry_keys_are_per_operator(app, team, failed):
    """RTRY-3: replay answers the current state; another proposal or operator is 409."""
    retry(team, failed)
    replay = retry(team, reload(failed))
    assert replay.idempotent_replay and replay.state == "queued"
    with pytest.raises(ApiError) as caught:
        retry(team, failed, who="admin")
    assert caught.value.code == "idempotency_key_reused"
    other = make_proposal(team)
    with pytest.raises(ApiError) as caught:
        retry(team, other)
    assert caught.value.code == "idempotency_key_reused"
    assert (
        db.session.scalar(
            select(func.count()).select_from(AuditEvent).where(AuditEvent.action == "action.retry_requested")
        )
        == 1
    )


def test_concurrent_retries_start_one_cycle(app, team, failed):
    """RTRY-2: the guarded write lets one retry through."""
    from concurrent.futures import ThreadPoolExecutor

    def attempt(index):
        with app.app_context():
            try:
                return retry(team, failed, key=f"k-{index}").delivery_cycle
            except ApiError as error:
                return error.code

    with ThreadPoolExecutor(max_workers=4) as pool:
        results = list(pool.map(attempt, range(6)))
    assert results.count(2) == 1, results
    assert set(results) - {2} <= {"action_not_retryable", "action_retry_conflict"}
    assert reload(failed).delivery_cycle == 2


# -- WAIT ------------------------------------------------------------------------------


def run_of(proposal) -> WorkflowRun:
    db.session.rollback()
    return db.session.get(WorkflowRun, proposal.run_id)


def expire_wait(proposal):
    set_row(WorkflowRun, proposal.run_id, wait_deadline_at=utcnow() - timedelta(seconds=1))


def test_run_waits_for_approval_then_delivery(app, team):
    """WAIT-1: the run waits on `.resolved`, then `.delivery-resolved`, then ends on a port."""
    proposal = make_proposal(team)
    assert run_of(proposal).waiting_event_type == f"action.{proposal.id}.resolved"
    approve(team, proposal)
    assert run_of(proposal).waiting_event_type == f"action.{proposal.id}.delivery-resolved"
    deliver(proposal.id)
    run = run_of(proposal)
    assert (run.state, run.outcome_port) == ("completed", "applied")


def test_port_leads_to_the_next_node(app):
    """WAIT-1: a port's next node runs (here: a second action after a rejection)."""

    def mutate(graph):
        second = json.loads(json.dumps(graph["nodes"]["takedown"]))
        second["input_mapping"]["idempotency_key"] = "join(':', ['second', decision.id])"
        graph["nodes"]["second"] = second
        graph["nodes"]["takedown"]["next"] = {"rejected": "second"}

    team = make_team(edit_graph=mutate)
    proposal = make_proposal(team)
    approve(team, proposal, decision="rejected")
    proposals = db.session.scalars(select(ActionProposal).order_by(ActionProposal.created_at)).all()
    assert [p.state for p in proposals] == ["rejected", "approval_required"]
    assert proposals[1].id.endswith(":second:main:proposal")


def test_timeout_before_anything_was_sent_cancels(app, team):
    """WAIT-2: cancelled, open tasks cancelled, port timeout."""
    proposal = make_proposal(team)
    expire_wait(proposal)
    assert sweeps.time_out_runs(utcnow()) == 1
    row = reload(proposal)
    assert (row.state, row.delivery_terminal) == ("cancelled", True)
    assert db.session.scalar(select(HumanTask.state)) == "cancelled"
    run = run_of(proposal)
    assert (run.state, run.outcome_port) == ("completed", "timeout")


def test_timeout_after_acceptance_fails(app, team):
    """WAIT-2: something may have been sent: failed with action_confirmation_timed_out."""
    proposal = make_proposal(team, state="accepted")
    expire_wait(proposal)
    sweeps.time_out_runs(utcnow())
    row = reload(proposal)
    assert (row.state, row.last_error_code) == ("failed", "action_confirmation_timed_out")
    assert run_of(proposal).outcome_port == "timeout"


def test_timeout_after_applied_answers_applied(app, team):
    """WAIT-2: an action applied meanwhile still answers applied."""
    proposal = make_proposal(team, state="queued")
    set_row(WorkflowRun, proposal.run_id, state="running")  # the run misses the resolution event...
    deliver(proposal.id)
    set_row(WorkflowRun, proposal.run_id, state="waiting", wait_deadline_at=utcnow() - timedelta(seconds=1))
    sweeps.time_out_runs(utcnow())  # ...and times out later
    assert reload(proposal).state == "applied"
    assert run_of(proposal).outcome_port == "applied"


# -- EVT ---------------------------------------------------------------------------------


def test_approval_event_ids(app, team):
    """EVT-1: approval events are `action.{id}.resolved` keyed action-approval:{approval}."""
    proposal = make_proposal(team)
    result = approve(team, proposal)
    event = db.session.get(WorkflowEventInbox, result.approval_id)
    assert (event.event_type, event.event_key) == (
        f"action.{proposal.id}.resolved",
        f"action-approval:{result.approval_id}",
    )
    outbox = db.session.get(WorkflowDispatchOutbox, result.approval_id)
    assert (
        outbox.state == "delivered"
        and outbox.operation_key == f"workflow-event:{proposal.run_id}:{event.event_type}:{event.event_key}"
    )


def test_failed_wake_up_is_recorded_and_retried(app, team, monkeypatch):
    """EVT-2: rows are written before the wake-up; a failure is retried by the sweep."""
    import app.services.lifecycle.runs as workflows

    proposal = make_proposal(team)
    real = workflows._resume
    monkeypatch.setattr(workflows, "_resume", lambda *a, **k: (_ for _ in ()).throw(RuntimeError("engine down")))
    result = approve(team, proposal)
    outbox = db.session.get(WorkflowDispatchOutbox, result.approval_id)
    assert (outbox.state, outbox.last_error_code, outbox.attempts) == ("failed", "platform_event_send_failed", 1)
    assert reload(proposal).state == "approved"  # the approval itself stands
    monkeypatch.setattr(workflows, "_resume", real)
    set_row(WorkflowDispatchOutbox, result.approval_id, available_at=utcnow() - timedelta(seconds=1))
    assert sweeps.retry_dispatches(utcnow()) == 1
    db.session.rollback()
    assert db.session.get(WorkflowDispatchOutbox, result.approval_id).state == "delivered"
    assert reload(proposal).state == "queued"


def test_sweep_reenqueues_due_deliveries_and_expired_leases(app, team):
    """EVT-3: due proposals and expired leases are enqueued again (Redis lost them)."""
    from app.queueing import get_redis

    make_proposal(team, state="queued")  # due now: its job was lost with Redis
    second = make_proposal(team, state="applying")  # a worker claimed it and died...
    make_due(second)  # ...and its lease expired
    get_redis(app).flushdb()
    assert sweeps.enqueue_due_deliveries(utcnow()) == 2
    assert delivery_queue(app).count == 2
    assert sweeps.enqueue_due_deliveries(utcnow()) == 0  # already waiting: not added twice


def test_sweep_fails_accepted_actions_past_their_deadline(app, team):
    """EVT-3, RCPT-2"""
    proposal = make_proposal(team, state="accepted")
    set_row(ActionProposal, proposal.id, confirmation_deadline_at=utcnow() - timedelta(seconds=1))
    assert sweeps.time_out_confirmations(utcnow()) == 1
    row = reload(proposal)
    assert (row.state, row.delivery_terminal, row.last_error_code) == ("failed", True, "action_confirmation_timed_out")
    assert db.session.get(WorkflowEventInbox, f"{proposal.id}:delivery-resolution") is not None


def test_sweep_emits_missing_resolution_events(app, team):
    """EVT-3: a worker died between the receipt and the event."""
    proposal = make_proposal(team)
    set_row(ActionProposal, proposal.id, state="applied", delivery_terminal=True)
    assert sweeps.emit_missing_resolutions() == 1
    assert sweeps.emit_missing_resolutions() == 0
    assert db.session.get(WorkflowEventInbox, f"{proposal.id}:delivery-resolution") is not None


def test_run_sweeps_records_itself(app, team):
    counts = sweeps.run_sweeps()
    assert counts.deliveries_enqueued == 0
    assert db.session.scalar(select(func.count()).select_from(SweepRun)) == 1


def test_two_sweeps_at_once_are_safe(app, team):
    """EVT-3: sweeps guard every write; two at once change each row once."""
    from concurrent.futures import ThreadPoolExecutor

    proposals = [make_proposal(team, state="accepted") for _ in range(3)]
    for proposal in proposals:
        set_row(ActionProposal, proposal.id, confirmation_deadline_at=utcnow() - timedelta(seconds=1))

    def sweep(_):
        with app.app_context():
            return sweeps.time_out_confirmations(utcnow())

    with ThreadPoolExecutor(max_workers=2) as pool:
        assert sum(pool.map(sweep, range(2))) == 3
    db.session.rollback()
    audits = db.session.scalar(
        select(func.count()).select_from(AuditEvent).where(AuditEvent.action == "action.confirmation_timed_out")
    )
    assert audits == 3
