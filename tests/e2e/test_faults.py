"""Delivery under platform faults, end to end: console → RQ worker → platform on
loopback (issue: delivery engine). Each test asserts states, attempt rows, audit
rows, and that the platform saw each operation's effect once."""

from __future__ import annotations

from datetime import timedelta

import pytest
from sqlalchemy import select

from app.demo_platform import serve
from app.domain.clock import utcnow
from app.extensions import db
from app.models import ActionProposal, AuditEvent, ConnectionAttempt, WorkflowRun
from app.services.lifecycle import sweeps

from .. import scripted as s
from ..builders import (
    approve,
    decide_report,
    login,
    make_due,
    pass_connection_waits,
    point_connection_at,
    reload,
    run_worker,
    set_row,
    waits_between,
)


def attempts(proposal):
    db.session.rollback()
    return [
        (a.delivery_cycle, a.attempt_number, a.response_status, a.response_class, a.error_code)
        for a in db.session.scalars(
            select(ConnectionAttempt)
            .where(ConnectionAttempt.proposal_id == proposal.id)
            .order_by(ConnectionAttempt.attempt_number)
        )
    ]


def audit_actions(proposal):
    return list(
        db.session.scalars(
            select(AuditEvent.action).where(AuditEvent.target_id == proposal.id).order_by(AuditEvent.seq)
        )
    )


def next_round(app, proposal):
    """Time passes: the retry is due; the sweep enqueues it; a worker runs it."""
    make_due(proposal)
    sweeps.enqueue_due_deliveries(utcnow())
    run_worker(app)


@pytest.fixture
def approved(app, world):
    proposal = decide_report(world)
    approve(world, proposal)
    return proposal


def test_503_then_success(app, approved, scripted):
    script = scripted(s.http_status(503), s.applied())
    run_worker(app)
    assert reload(approved).state == "failed"
    next_round(app, approved)
    assert reload(approved).state == "applied"
    assert attempts(approved) == [(1, 1, 503, "server_error", "platform_server_error"), (1, 2, 200, "success", None)]
    assert audit_actions(approved) == [
        "action.proposed",
        "action.approved",
        "action.delivery_failed",
        "workflow.action_applied",
    ]
    assert script.effects == {approved.operation_id: 1}


def test_429_with_retry_after(app, approved, scripted):
    script = scripted(s.http_status(429, {"Retry-After": "3"}), s.applied())
    before = utcnow()
    run_worker(app)
    row = reload(approved)
    assert (row.state, row.last_error_code) == ("failed", "platform_rate_limited")
    assert waits_between(row.next_attempt_at, before, 2.5, 4)
    next_round(app, approved)
    assert reload(approved).state == "applied" and script.effects == {approved.operation_id: 1}
    assert [a[3] for a in attempts(approved)] == ["client_error", "success"]


def test_timeout_then_success_applies_once(app, approved, scripted):
    """A timed-out request may have arrived: the retry carries the same Idempotency-Key."""
    script = scripted(s.slow(1.0), s.applied(), timeout_seconds=0.3)
    run_worker(app)
    assert reload(approved).last_error_code == "connection_timeout"
    next_round(app, approved)
    assert reload(approved).state == "applied"
    assert [a[3] for a in attempts(approved)] == ["timeout", "success"]
    keys = {headers["Idempotency-Key"] for headers, _ in script.requests}
    assert keys == {approved.operation_id} and script.effects == {approved.operation_id: 1}


def test_connection_refused_then_success(app, approved, scripted, world, httpserver):
    script = scripted(s.applied())
    point_connection_at(world, "http://127.0.0.1:9/")
    run_worker(app)
    assert reload(approved).last_error_code == "connection_failed"
    point_connection_at(world, httpserver.url_for("/"))
    next_round(app, approved)
    assert [a[3] for a in attempts(approved)] == ["network_error", "success"]
    assert script.effects == {approved.operation_id: 1}


def test_200_that_is_not_a_receipt_is_terminal(app, approved, scripted):
    scripted(s.raw("OK"))
    run_worker(app)
    row = reload(approved)
    assert (row.state, row.delivery_terminal, row.last_error_code) == ("failed", True, "action_response_invalid")
    assert attempts(approved) == [(1, 1, 200, "invalid_response", "action_response_invalid")]
    run = db.session.get(WorkflowRun, approved.run_id)
    assert (run.state, run.outcome_port, run.last_error_code) == ("failed", "error", "action_response_invalid")


def test_receipt_naming_another_action_is_terminal(app, approved, scripted):
    scripted(lambda body, request, script: s.json_response(s.receipt_for({**body, "action_id": "someone-else"})))
    run_worker(app)
    row = reload(approved)
    assert (row.state, row.last_error_code, row.confirmed_at) == ("failed", "action_result_identity_mismatch", None)
    assert "workflow.action_applied" not in audit_actions(approved)


@pytest.fixture
def live_console(app):
    """The console served over HTTP on loopback, for platforms that call back."""
    server, url = serve(app)
    yield url
    server.shutdown()


def test_accepted_then_async_applied(app, world, platform, live_console):
    """RCPT-2, API-4: the demo platform accepts, then confirms through the API."""
    platform.state.configure(console_url=live_console, mode="async", async_delay_seconds=0.05)
    proposal = decide_report(world)
    approve(world, proposal)
    run_worker(app)
    assert platform.state.confirmed.wait(timeout=30)  # the platform called back on its own thread
    assert platform.state.confirmations == [200]
    row = reload(proposal)
    assert row.state == "applied" and row.accepted_at and row.confirmed_at
    assert audit_actions(proposal)[-2:] == ["workflow.action_result_received", "workflow.action_applied"]
    assert [e["reference"] for e in platform.state.effects] == ["post:1001"]
    run = db.session.get(WorkflowRun, proposal.run_id)
    assert run.outcome_port == "applied"


def test_accepted_then_nothing_times_out(app, approved, scripted):
    """RCPT-2: no confirmation before the deadline: failed, terminal, once."""
    script = scripted(s.accepted())
    run_worker(app)
    assert reload(approved).state == "queued"
    set_row(
        ActionProposal,
        approved.id,
        confirmation_deadline_at=utcnow() - timedelta(seconds=1),
        next_attempt_at=utcnow() - timedelta(seconds=1),
    )
    sweeps.run_sweeps()
    run_worker(app)
    row = reload(approved)
    assert (row.state, row.delivery_terminal, row.last_error_code) == ("failed", True, "action_confirmation_timed_out")
    assert len(script.requests) == 1 and row.delivery_attempt_count == 1


def test_eight_failures_then_operator_retry_in_cycle_two(app, client, approved, scripted):
    """DLV-6, RTRY-2: a cycle's 8 attempts fail; a reviewer retries from the page."""
    script = scripted(*[s.http_status(502)] * 8, s.applied())
    run_worker(app)
    for _ in range(7):
        next_round(app, approved)
    row = reload(approved)
    assert (row.state, row.delivery_terminal, row.delivery_attempt_count) == ("failed", True, 8)
    token = login(client, "reviewer@example.com")
    page = client.get(f"/proposals/{approved.id}").get_data(as_text=True)
    assert "Retry delivery (starts cycle 2)" in page
    response = client.post(
        f"/proposals/{approved.id}/retry",
        data={"payload_digest": approved.payload_digest, "idempotency_key": "retry-page-1", "csrf_token": token},
    )
    assert response.status_code == 303
    pass_connection_waits()  # the breaker the 8 failures opened may probe by now (CONN-1)
    run_worker(app)
    row = reload(approved)
    assert (row.state, row.delivery_cycle, row.delivery_attempt_count) == ("applied", 2, 9)
    assert attempts(approved)[-1] == (2, 9, 200, "success", None)
    assert [c for c, *_ in attempts(approved)] == [1] * 8 + [2]
    assert audit_actions(approved).count("action.retry_requested") == 1
    assert script.effects == {approved.operation_id: 1}


def test_404_with_a_superscript_digit_retry_after_is_still_terminal(app, approved, scripted):
    """§5, DLV-6: another 4xx is terminal whatever its Retry-After says. ``Retry-After: ²``
    (byte 0xB2, a digit to `str.isdigit` but not to `float`) once raised inside egress, so
    the 404 became an unexpected, retryable failure without its status on the attempt."""
    scripted(s.http_status(404, {"Retry-After": "\u00b2"}))
    run_worker(app)
    row = reload(approved)
    assert (row.state, row.delivery_terminal, row.last_error_code) == ("failed", True, "platform_client_error")
    assert attempts(approved) == [(1, 1, 404, "client_error", "platform_client_error")]


def test_200_with_absurdly_deep_json_is_terminal_not_retried(app, approved, scripted):
    """§5, DLV-5: a body that is not a receipt is terminal, and so is JSON nested too deep
    to decode (`json.loads` raises RecursionError, not ValueError): it was once taken for
    an unexpected, retryable failure and sent again."""
    script = scripted(s.raw("[" * 200_000))
    run_worker(app)
    row = reload(approved)
    assert (row.state, row.delivery_terminal, row.last_error_code) == ("failed", True, "action_response_invalid")
    assert attempts(approved) == [(1, 1, 200, "invalid_response", "action_response_invalid")]
    assert len(script.requests) == 1
