"""The delivery job (DLV-1..7) and synchronous receipts (RCPT-2), against scripted
platforms on loopback."""

from __future__ import annotations

import json
from datetime import timedelta

import pytest
from sqlalchemy import func, select
from standardwebhooks import Webhook

from app.domain.clock import utcnow
from app.domain.digests import canonical_json, sha256_digest
from app.extensions import db
from app.models import (
    ActionProposal,
    AuditEvent,
    Budget,
    BudgetReservation,
    ComponentVersion,
    ConnectionAttempt,
    Report,
    ReportTarget,
    WorkflowEventInbox,
)
from app.services.lifecycle.dispatch import deliver, take_lease
from app.services.lifecycle.receipt_intake import AttemptGuard, save_receipt
from app.services.uow import Actor, unit_of_work

from .. import scripted as s
from ..builders import approve, decide_report, make_due, point_connection_at, reload, set_row, waits_between


@pytest.fixture
def approved(app, world):
    """A proposal approved and queued, ready for delivery."""
    proposal = decide_report(world)
    approve(world, proposal)
    return reload(proposal)


def attempts(proposal):
    db.session.rollback()
    return db.session.scalars(
        select(ConnectionAttempt)
        .where(ConnectionAttempt.proposal_id == proposal.id)
        .order_by(ConnectionAttempt.attempt_number)
    ).all()


def audit_actions(proposal):
    return list(
        db.session.scalars(
            select(AuditEvent.action).where(AuditEvent.target_id == proposal.id).order_by(AuditEvent.seq)
        )
    )


# -- DLV-1: the claim -------------------------------------------------------------


def test_claim_is_a_single_guarded_update(app, approved, scripted):
    """DLV-1: one claim per due attempt; duplicate jobs claim nothing."""
    script = scripted(s.applied())
    assert deliver(approved.id).state == "applied"
    again = deliver(approved.id)
    assert not again.claimed
    assert len(script.requests) == 1 and reload(approved).delivery_attempt_count == 1


def test_not_due_is_not_claimed(app, approved, scripted):
    """DLV-1: the database, not the queue, decides what is due."""
    script = scripted(s.applied())
    set_row(ActionProposal, approved.id, next_attempt_at=utcnow() + timedelta(minutes=5))
    assert not deliver(approved.id).claimed and script.requests == []


def test_live_lease_blocks_and_expired_lease_is_reclaimed(app, approved, scripted):
    """DLV-1: applying with a live lease is not claimable; an expired lease is."""
    script = scripted(s.applied())
    now = utcnow()
    assert take_lease(approved.id, now, now + timedelta(seconds=150))  # a worker holds it...
    assert not take_lease(approved.id, now, now + timedelta(seconds=150))  # ...so no one else can
    make_due(approved)  # ...until its lease expires (the worker died)
    outcome = deliver(approved.id)
    assert outcome.claimed and outcome.attempt_number == 2 and outcome.state == "applied"
    assert len(script.requests) == 1


def test_lease_outlives_the_longest_connection(app, approved, scripted):
    """DLV-1: a 150 s lease, longer than the 120 s connection cap."""
    scripted(s.applied())
    before = utcnow()
    assert take_lease(approved.id, before, before + timedelta(seconds=150))
    lease = reload(approved).lease_expires_at
    assert timedelta(seconds=149) < lease - before <= timedelta(seconds=150)


def test_a_trickled_answer_never_outlives_the_lease(app, approved, world):
    """DLV-1, DLV-4 (issue 14): a platform sends its status line and headers at once,
    then the body in pieces 1 s apart (scaled from 50 s). No single read reaches the
    2 s timeout, yet the request must end at 2 s, before the 3 s lease (scaled from
    150 s) expires: a second worker arriving at the lease's end finds nothing to
    claim, and the platform never sees two overlapping requests."""
    import threading

    from app.extensions import db as _db

    platform = s.TricklingPlatform(pieces=5, gap=1.0)
    try:
        point_connection_at(world, platform.url, timeout_seconds=2)
        app.config["DELIVERY_LEASE_SECONDS"] = 3
        second = {}

        def second_worker():
            with app.app_context():
                assert platform.first_piece.wait(10)
                lease_end = _db.session.get(ActionProposal, approved.id).lease_expires_at
                _db.session.rollback()
                if lease_end is not None:  # the first worker still holds it: come when it expires
                    threading.Event().wait(min(max((lease_end - utcnow()).total_seconds(), 0) + 0.05, 10))
                second["outcome"] = deliver(approved.id)
                _db.session.remove()

        worker = threading.Thread(target=second_worker)
        worker.start()
        first = deliver(approved.id)
        worker.join(timeout=30)
        [attempt] = attempts(approved)
        assert (first.error_code, attempt.response_class) == ("connection_timeout", "timeout")
        assert attempt.finished_at - attempt.started_at < timedelta(seconds=2.6)
        assert not second["outcome"].claimed
        assert len(platform.requests) == 1 and platform.overlapping() == 0
        row = reload(approved)
        assert (row.state, row.delivery_terminal, row.delivery_attempt_count) == ("failed", False, 1)
    finally:
        platform.close()


# -- DLV-2: checks before sending ---------------------------------------------------


def _expect_terminal_unsent(proposal, script, code):
    outcome = deliver(proposal.id)
    row = reload(proposal)
    assert (outcome.error_code, row.state, row.delivery_terminal, row.last_error_code) == (code, "failed", True, code)
    assert script.requests == [] and attempts(proposal) == []


def test_expired_authorization_is_not_sent(app, approved, scripted):
    """DLV-2: action_approval_expired."""
    script = scripted(s.applied())
    set_row(ActionProposal, approved.id, expires_at=utcnow() - timedelta(seconds=1))
    _expect_terminal_unsent(approved, script, "action_approval_expired")


def test_changed_precondition_is_not_sent(app, approved, scripted, world):
    """DLV-2, PRE-1: the target changed since the proposal was made."""
    script = scripted(s.applied())
    target = db.session.scalar(select(ReportTarget).where(ReportTarget.report_id == approved.report_id))
    set_row(ReportTarget, target.id, target_reference="post:9999")
    _expect_terminal_unsent(approved, script, "action_precondition_changed")


def test_appealed_case_is_not_sent(app, approved, scripted):
    """DLV-2, PRE-2: an appealed case accepts only corrections."""
    script = scripted(s.applied())
    set_row(Report, approved.report_id, state="appealed")
    _expect_terminal_unsent(approved, script, "action_case_no_longer_eligible")


def test_human_mode_needs_a_matching_approval(app, world, scripted):
    """DLV-2: action_approval_missing when no approval carries the digest."""
    script = scripted(s.applied())
    proposal = decide_report(world)
    set_row(ActionProposal, proposal.id, state="queued", next_attempt_at=utcnow())  # forged, no approval
    _expect_terminal_unsent(proposal, script, "action_approval_missing")


def test_implementation_reference_must_be_a_write_method(app, approved, scripted, world):
    """DLV-2: GET /path is not an action operation."""
    script = scripted(s.applied())
    set_row(ComponentVersion, world.components["takedown"], implementation_reference="GET /actions/takedown")
    _expect_terminal_unsent(approved, script, "action_component_operation_invalid")


def test_accepted_past_deadline_times_out(app, approved, scripted):
    """DLV-2, RCPT-2: once accepted, claiming again means the deadline passed."""
    script = scripted(s.accepted())
    assert deliver(approved.id).state == "queued"
    make_due(approved)
    outcome = deliver(approved.id)
    row = reload(approved)
    assert outcome.error_code == "action_confirmation_timed_out" and row.delivery_terminal
    assert row.delivery_attempt_count == 1 and len(script.requests) == 1  # no further attempt counted


def test_exhausted_cycle_fails_before_sending(app, approved, scripted):
    """DLV-2: a re-claimed lease past the cycle's 8 attempts fails exhausted."""
    script = scripted(s.applied())
    set_row(
        ActionProposal,
        approved.id,
        state="applying",
        delivery_attempt_count=8,
        lease_expires_at=utcnow() - timedelta(seconds=1),
    )
    _expect_terminal_unsent(approved, script, "action_delivery_attempts_exhausted")
    assert reload(approved).delivery_attempt_count == 8


# -- DLV-3: budgets ------------------------------------------------------------------


def add_budget(world, scope_type, scope_id, limit, window=3600):
    with unit_of_work() as uow:
        uow.session.add(
            Budget(
                installation_id=world.installation_id,
                scope_type=scope_type,
                scope_id=scope_id,
                metric="actions",
                limit_amount=limit,
                window_seconds=window,
            )
        )
        uow.commit()


def test_budget_is_consumed_when_sent_and_defers_when_exhausted(app, world, scripted):
    """DLV-3: reserve per scope, consume when sent, defer (nothing sent) when
    exhausted: a deferral is not a failure, the proposal is queued again (issue 22)."""
    script = scripted(s.applied())
    add_budget(world, "component", world.components["takedown"], limit=1)
    first = decide_report(world, 0)
    approve(world, first)
    second = decide_report(world, 1)
    approve(world, second)
    assert deliver(first.id).state == "applied"
    outcome = deliver(second.id)
    row = reload(second)
    assert (outcome.error_code, row.state, row.delivery_terminal) == ("budget_exhausted", "queued", False)
    assert row.delivery_attempt_count == 0  # a deferral does not use up an attempt
    assert row.next_attempt_at > utcnow() and len(script.requests) == 1
    reservations = db.session.scalars(select(BudgetReservation)).all()
    assert [(r.state, r.operation_id, r.attempt_id) for r in reservations] == [("consumed", first.operation_id, "1")]
    assert db.session.scalar(select(Budget.used_amount)) == 1


def test_budget_is_released_when_nothing_left(app, approved, scripted, world, httpserver):
    """DLV-3: a refused connection never left: the reservation is released."""
    add_budget(world, "workflow", world.workflow_version_id, limit=5)
    from ..builders import point_connection_at

    point_connection_at(world, "http://127.0.0.1:9/")  # nothing listens on port 9
    outcome = deliver(approved.id)
    assert outcome.error_code == "connection_failed"
    assert db.session.scalar(select(BudgetReservation.state)) == "released"
    assert db.session.scalar(select(Budget.used_amount)) == 0


def test_budget_is_consumed_on_timeout(app, approved, scripted, world):
    """DLV-3: a timed-out request may have arrived: consumed."""
    add_budget(world, "component", world.components["takedown"], limit=5)
    scripted(s.slow(1.5), timeout_seconds=0.5)
    outcome = deliver(approved.id)
    assert outcome.error_code == "connection_timeout" and not outcome.terminal
    assert db.session.scalar(select(BudgetReservation.state)) == "consumed"


# -- DLV-4: the request ----------------------------------------------------------------


def test_request_body_headers_signature_and_attempt_row(app, approved, scripted, world):
    """DLV-4: the body, Idempotency-Key, bearer token and Standard Webhooks signature."""
    script = scripted(s.applied())
    deliver(approved.id)
    headers, body = script.requests[0]
    assert headers["Idempotency-Key"] == approved.operation_id
    assert headers["Authorization"] == f"Bearer {world.platform_token}"
    assert set(body) == {
        "schema_version",
        "action_id",
        "operation_id",
        "payload_digest",
        "action_code",
        "target",
        "payload",
        "preconditions",
        "workflow_version_id",
        "policy_version_id",
        "expires_at",
    }
    assert (body["action_id"], body["payload_digest"], body["schema_version"]) == (
        approved.id,
        approved.payload_digest,
        "1",
    )
    raw = json.dumps(body, separators=(",", ":"), sort_keys=True, ensure_ascii=False)
    Webhook(world.signing_secret).verify(raw, headers)  # raises when the signature is wrong
    [attempt] = attempts(approved)
    assert attempt.request_digest == sha256_digest(raw.encode())
    assert (attempt.method, attempt.delivery_cycle, attempt.response_status) == ("POST", 1, 200)
    assert attempt.response_digest.startswith("sha256:") and attempt.finished_at and attempt.duration_ms is not None


# -- DLV-5: the response -------------------------------------------------------------


def test_response_must_match_output_schema(app, approved, scripted, world):
    """DLV-5: action_response_schema_invalid is terminal; the attempt is invalid_response."""
    set_row(
        ComponentVersion,
        world.components["takedown"],
        output_schema={"type": "object", "required": ["provider_request_id"]},
    )
    scripted(s.applied())
    outcome = deliver(approved.id)
    assert (outcome.error_code, outcome.terminal) == ("action_response_schema_invalid", True)
    [attempt] = attempts(approved)
    assert (attempt.response_class, attempt.error_code) == ("invalid_response", "action_response_schema_invalid")


def test_late_worker_cannot_overwrite_a_newer_attempt(app, approved, scripted):
    """DLV-5: the receipt write is guarded by attempt number and lease."""
    from app.domain.receipts import parse_receipt

    now = utcnow()
    old_lease = now + timedelta(seconds=150)
    assert take_lease(approved.id, now, old_lease)  # attempt 1, then its worker stalls
    make_due(approved)
    newer_lease = utcnow() + timedelta(seconds=150)
    assert take_lease(approved.id, utcnow(), newer_lease)  # attempt 2 by another worker
    row = reload(approved)
    late = parse_receipt(
        {
            "action_id": row.id,
            "operation_id": row.operation_id,
            "payload_digest": row.payload_digest,
            "status": "failed",
        },
        row.identity,
    )
    with unit_of_work() as uow:
        row = uow.session.get(ActionProposal, approved.id)
        changed = save_receipt(uow, row, late, Actor.system(), AttemptGuard(1, old_lease, "att_x", None))
        uow.commit()
    assert not changed
    row = reload(approved)
    assert (row.state, row.delivery_attempt_count, row.last_receipt) == ("applying", 2, None)


# -- DLV-6: failures and backoff -----------------------------------------------------


def test_server_error_backs_off_then_succeeds(app, approved, scripted):
    """DLV-6: 503 is retryable with backoff; the second attempt applies it."""
    script = scripted(s.http_status(503), s.applied())
    before = utcnow()
    first = deliver(approved.id)
    row = reload(approved)
    assert (first.error_code, row.state, row.delivery_terminal) == ("platform_server_error", "failed", False)
    assert waits_between(row.next_attempt_at, before, 14, 16)
    make_due(approved)
    assert deliver(approved.id).state == "applied"
    assert [(a.attempt_number, a.response_class) for a in attempts(approved)] == [(1, "server_error"), (2, "success")]
    assert len(script.effects) == 1


def test_rate_limit_honours_retry_after_and_doubles(app, approved, scripted):
    """DLV-6: 429 with Retry-After is the base delay, doubled per attempt in the cycle."""
    scripted(s.http_status(429, {"Retry-After": "7"}))
    before = utcnow()
    deliver(approved.id)
    assert waits_between(reload(approved).next_attempt_at, before, 6.5, 8)
    make_due(approved)
    before = utcnow()
    deliver(approved.id)
    assert waits_between(reload(approved).next_attempt_at, before, 13.5, 15)


def test_client_error_is_terminal(app, approved, scripted):
    """DLV-6: a 4xx other than 408/429 is not retried."""
    scripted(s.http_status(422))
    outcome = deliver(approved.id)
    assert (outcome.error_code, outcome.terminal) == ("platform_client_error", True)


def test_eight_failures_exhaust_the_cycle(app, approved, scripted):
    """DLV-6: terminal when the cycle's 8 attempts are used."""
    script = scripted(s.http_status(500))
    for number in range(1, 9):
        outcome = deliver(approved.id)
        assert outcome.attempt_number == number
        assert outcome.terminal == (number == 8)
        make_due(approved)
    assert not deliver(approved.id).claimed
    row = reload(approved)
    assert (row.state, row.delivery_attempt_count, row.last_error_code) == ("failed", 8, "platform_server_error")
    assert len(script.requests) == 8


def test_failure_write_is_guarded_by_lease(app, approved, scripted):
    """DLV-6: a stale worker's failure write changes nothing."""
    from app.domain.errors import ActionError
    from app.services.lifecycle.outcomes import fail as _fail

    now = utcnow()
    stale_lease = now + timedelta(seconds=150)
    assert take_lease(approved.id, now, stale_lease)
    make_due(approved)
    assert take_lease(approved.id, utcnow(), utcnow() + timedelta(seconds=150))
    with unit_of_work() as uow:
        _fail(uow, approved.id, ActionError("platform_server_error", True), None, 1, 1, stale_lease, [], sent=True)
        uow.commit()
    row = reload(approved)
    assert (row.state, row.last_error_code) == ("applying", None)


# -- DLV-7 and RCPT-2: resolution ------------------------------------------------------


def test_applied_emits_the_resolution_event(app, approved, scripted):
    """DLV-7, EVT-1: applied → `{id}:delivery-resolution`, key action-delivery:{id}:1."""
    scripted(s.applied())
    deliver(approved.id)
    event = db.session.get(WorkflowEventInbox, f"{approved.id}:delivery-resolution")
    assert event.event_type == f"action.{approved.id}.delivery-resolved"
    assert event.event_key == f"action-delivery:{approved.id}:1"
    assert event.payload["state"] == "applied" and event.delivered_at is not None


def test_terminal_failure_emits_the_resolution_event(app, approved, scripted):
    """DLV-7"""
    scripted(s.http_status(400))
    deliver(approved.id)
    event = db.session.get(WorkflowEventInbox, f"{approved.id}:delivery-resolution")
    assert event.payload["error_code"] == "platform_client_error"


def test_retryable_failure_emits_nothing_yet(app, approved, scripted):
    scripted(s.http_status(503))
    deliver(approved.id)
    assert db.session.get(WorkflowEventInbox, f"{approved.id}:delivery-resolution") is None


def test_accepted_waits_for_confirmation(app, approved, scripted):
    """RCPT-2: accepted stays queued with a deadline of min(expiry, now + 15 min)."""
    scripted(s.accepted())
    before = utcnow()
    outcome = deliver(approved.id)
    after = utcnow()  # the receipt was read between the two, however long the delivery took
    row = reload(approved)
    assert (outcome.state, row.accepted_at is not None, row.delivery_terminal) == ("queued", True, False)
    window = timedelta(minutes=15)
    assert before + window <= row.confirmation_deadline_at <= after + window
    assert row.next_attempt_at == row.confirmation_deadline_at
    assert "workflow.action_result_received" in audit_actions(approved)


def test_confirmation_deadline_never_outlives_authorization(app, approved, scripted):
    """RCPT-2: the deadline is capped by the expiry."""
    soon = utcnow() + timedelta(minutes=2)
    set_row(ActionProposal, approved.id, expires_at=soon)
    scripted(s.accepted())
    deliver(approved.id)
    assert reload(approved).confirmation_deadline_at == soon


def test_failed_receipt_with_terminal_false_retries(app, approved, scripted):
    """RCPT-2: failed is terminal unless terminal=false and the cycle has attempts left."""
    scripted(s.receipt("failed", terminal=False, retry_after_seconds=120, error_code="busy"), s.receipt("failed"))
    before = utcnow()
    first = deliver(approved.id)
    row = reload(approved)
    assert (first.state, row.delivery_terminal, row.last_error_code) == ("failed", False, "busy")
    assert waits_between(row.next_attempt_at, before, 119, 121)
    make_due(approved)
    second = deliver(approved.id)
    assert (second.state, second.terminal, second.error_code) == ("failed", True, "action_provider_failed")


@pytest.mark.parametrize(
    "step, code",
    [
        (s.raw("<html>ok</html>"), "action_response_invalid"),
        (s.json_body({"status": "applied"}), "action_result_identity_mismatch"),
        (s.json_body(["applied"]), "action_result_invalid"),
        (s.receipt("done"), "action_confirmation_required"),
    ],
)
def test_a_body_that_is_not_a_receipt_is_terminal(app, approved, scripted, world, step, code):
    """RCPT-1, §5: a 200 whose body is not this proposal's receipt is terminal."""
    set_row(ComponentVersion, world.components["takedown"], output_schema={})
    scripted(step)
    outcome = deliver(approved.id)
    assert (outcome.error_code, outcome.terminal) == (code, True)
    assert attempts(approved)[0].response_class == "invalid_response"


def test_receipt_for_another_action_is_refused(app, approved, scripted):
    """RCPT-1: a receipt naming another action or digest is an identity mismatch."""
    scripted(
        lambda body, request, script: s.json_response(
            s.receipt_for({**body, "payload_digest": "sha256:" + "0" * 64}, "applied")
        )
    )
    outcome = deliver(approved.id)
    assert (outcome.error_code, outcome.terminal) == ("action_result_identity_mismatch", True)
    assert reload(approved).confirmed_at is None


def test_attempt_rows_count_every_request(app, approved, scripted):
    """DLV-4: one connection_attempts row per request, whatever happened."""
    scripted(s.http_status(503), s.slow(1.0), s.applied(), timeout_seconds=0.4)
    deliver(approved.id)
    make_due(approved)
    deliver(approved.id)
    make_due(approved)
    deliver(approved.id)
    assert [a.response_class for a in attempts(approved)] == ["server_error", "timeout", "success"]
    assert db.session.scalar(select(func.count()).select_from(ConnectionAttempt)) == 3


def test_webhook_id_is_stable_for_one_operation(app, approved, scripted, world):
    """DLV-4: Standard Webhooks' webhook-id names the message, so a resent request
    (the next attempt, or a new delivery cycle) carries the same id, and it is
    signed over that id; another operation gets another id."""
    from app.services.lifecycle.retry import retry_proposal

    script = scripted(s.http_status(503), s.http_status(400), s.applied())
    deliver(approved.id)
    make_due(approved)
    deliver(approved.id)
    assert reload(approved).delivery_terminal
    row = reload(approved)
    retry_proposal(
        approved.id,
        payload_digest=row.payload_digest,
        idempotency_key="retry-key-0001",
        operator=world.user("reviewer"),
    )
    deliver(approved.id)
    assert reload(approved).state == "applied"
    ids = [headers["Webhook-Id"] for headers, _ in script.requests]
    assert len(ids) == 3 and len(set(ids)) == 1
    for headers, body in script.requests:
        Webhook(world.signing_secret).verify(canonical_json(body), {k.lower(): v for k, v in headers.items()})
