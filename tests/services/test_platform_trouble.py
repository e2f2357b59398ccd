"""Platforms that misbehave (issue 22): a certificate that does not verify is named
(CONN-1, DLV-4, DLV-6), a synchronous receipt with a bad field that does not decide
its outcome keeps the outcome (RCPT-1, RCPT-2), a Retry-After beyond the pause's
bound (CONN-2), deferrals that are not failures (DLV-1, CONN-1, DLV-3), and the
half-open probe sent when due (OPS-7)."""

from __future__ import annotations

import json
import ssl
import subprocess
from datetime import timedelta
from pathlib import Path

import pytest
import requests
from pytest_httpserver import HTTPServer
from sqlalchemy import select

from app import egress
from app.extensions import db
from app.models import AuditEvent, ConnectionAttempt, ConnectionHealth, ConnectionVersion
from app.services.lifecycle.dispatch import deliver

from .. import scripted as s
from ..builders import approve, decide_report, login, point_connection_at, reload


def make_certificate(directory: Path, name: str) -> tuple[Path, Path]:
    """A self-signed certificate for `name` (and its key), made with the openssl CLI."""
    cert, key = directory / f"{name}.pem", directory / f"{name}.key"
    subprocess.run(
        ["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes"]
        + ["-keyout", str(key), "-out", str(cert), "-days", "2", "-subj", f"/CN={name}"]
        + ["-addext", f"subjectAltName=DNS:{name}"],
        check=True,
        capture_output=True,
    )
    return cert, key


@pytest.fixture
def tls_platform(tmp_path):
    """An HTTPS platform on loopback whose certificate is made per test: ``start(name)``
    serves a self-signed certificate for `name` and returns (server, certificate)."""
    servers = []

    def start(name: str) -> tuple[HTTPServer, Path]:
        cert, key = make_certificate(tmp_path, name)
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        context.load_cert_chain(cert, key)
        server = HTTPServer(host="127.0.0.1", port=0, ssl_context=context)
        server.start()
        servers.append(server)
        return server, cert

    yield start
    for server in servers:
        server.clear()
        server.stop()


def egress_request(url: str) -> egress.EgressRequest:
    return egress.EgressRequest(
        method="POST", url=url, body=b"{}", message_id="msg_1", idempotency_key="op-1", timeout_seconds=5
    )


@pytest.mark.parametrize(
    "name, trusted, reason",
    [("localhost", False, "self-signed certificate"), ("other.example", True, "hostname mismatch")],
)
def test_dlv4_a_certificate_that_does_not_verify_is_named_and_nothing_is_sent(tls_platform, name, trusted, reason):
    """DLV-4, CONN-1: HTTPS to a platform whose certificate is self-signed, or is for
    another name: nothing is sent, and the error says "certificate"
    (``tls_certificate_invalid``, class ``tls_error``) with the verifier's reason,
    retryable (the platform fixes its certificate; the breaker stops the hammering)."""
    server, cert = tls_platform(name)
    server.expect_request("/x").respond_with_data("{}")
    session = requests.Session()
    session.trust_env = False
    session.verify = str(cert) if trusted else True
    with pytest.raises(egress.EgressError) as caught:
        egress.send(
            egress_request(f"https://localhost:{server.port}/x"),
            egress.EgressPolicy(allowed_hosts=("localhost",), allow_private=True),
            session=session,
            resolver=lambda host, port: ["127.0.0.1"],
        )
    error = caught.value
    assert (error.code, error.response_class, error.sent, error.retryable) == (
        "tls_certificate_invalid",
        "tls_error",
        False,
        True,
    )
    assert reason in error.detail
    assert server.log == []


def test_conn1_dlv6_a_delivery_to_a_self_signed_platform_is_named_retried_and_counted(app, world, tls_platform, client):
    """DLV-4, DLV-6, CONN-1: a delivery to a platform whose certificate is
    self-signed: nothing reaches it; the attempt row says ``tls_certificate_invalid``
    with the verifier's reason; the proposal waits for its retry (backoff as for any
    retryable failure) and the failure counts towards the breaker; the proposal's
    page says "certificate"."""
    server, _ = tls_platform("localhost")
    server.expect_request("/actions/takedown").respond_with_data("{}")
    point_connection_at(world, f"https://localhost:{server.port}/")
    proposal = decide_report(world, 0)
    approve(world, proposal)
    outcome = deliver(proposal.id)
    assert (outcome.error_code, outcome.terminal) == ("tls_certificate_invalid", False)
    assert server.log == []
    row = reload(proposal)
    assert (row.state, row.delivery_terminal, row.last_error_code) == ("failed", False, "tls_certificate_invalid")
    attempt = db.session.scalars(select(ConnectionAttempt).where(ConnectionAttempt.proposal_id == proposal.id)).one()
    assert (attempt.error_code, attempt.response_class) == ("tls_certificate_invalid", "tls_error")
    assert "self-signed certificate" in attempt.detail
    connection_id = db.session.get(ConnectionVersion, world.connection_version_id).connection_id
    assert db.session.get(ConnectionHealth, connection_id).consecutive_failures == 1
    audit = db.session.scalars(
        select(AuditEvent).where(AuditEvent.target_id == proposal.id, AuditEvent.action == "action.delivery_failed")
    ).one()
    assert "self-signed certificate" in audit.details_json
    login(client, "reviewer@example.com")
    page = client.get(f"/proposals/{proposal.id}").get_data(as_text=True)
    assert "certificate does not verify" in page and "self-signed certificate" in page


def test_rcpt1_rcpt2_an_applied_receipt_with_an_overlong_provider_request_id_stays_applied(app, world, scripted):
    """RCPT-1, RCPT-2, DLV-5: the platform applied the action and said so, with a
    ``provider_request_id`` of 501 characters: the proposal is ``applied`` (the record
    says what happened), the field is cut to 500 characters, and the attempt row says
    so ("provider_request_id over 500 characters, truncated")."""
    script = scripted(s.applied(provider_request_id="r" * 501))
    proposal = decide_report(world, 0)
    approve(world, proposal)
    outcome = deliver(proposal.id)
    row = reload(proposal)
    assert (outcome.state, row.state, row.delivery_terminal, row.last_error_code) == ("applied", "applied", True, None)
    assert row.last_receipt["provider_request_id"] == "r" * 500
    attempt = db.session.scalars(select(ConnectionAttempt).where(ConnectionAttempt.proposal_id == proposal.id)).one()
    assert (attempt.response_class, attempt.error_code) == ("success", None)
    assert attempt.detail == "provider_request_id over 500 characters, truncated"
    assert len(script.requests) == 1


@pytest.mark.parametrize(
    "status, field, value, note",
    [
        ("applied", "provider_request_id", 42, "provider_request_id not text, dropped"),
        ("applied", "retry_after_seconds", 0, "retry_after_seconds out of range, dropped"),
        ("applied", "error_code", "bad code!", "error_code malformed, dropped"),
        ("accepted", "terminal", "yes", "terminal not a boolean, dropped"),
        ("failed", "provider_request_id", "p" * 600, "provider_request_id over 500 characters, truncated"),
    ],
)
def test_rcpt1_a_field_that_does_not_decide_the_outcome_is_dropped_visibly(status, field, value, note):
    """RCPT-1: of a synchronous receipt, only fields that do not decide its outcome
    are cut or dropped, each with a note; the outcome is kept."""
    from app.domain.receipts import ProposalIdentity
    from app.domain.sync_receipts import lenient_receipt

    identity = ProposalIdentity("act_1", "op_1", "sha256:x")
    body = {"action_id": "act_1", "operation_id": "op_1", "payload_digest": "sha256:x", "status": status, field: value}
    receipt, notes = lenient_receipt(body, identity)
    assert receipt.status == status and notes == [note]


@pytest.mark.parametrize(
    "body, code",
    [
        ({"status": "done"}, "action_confirmation_required"),
        ({"status": "failed", "terminal": "no"}, "action_result_invalid"),  # decides a failure's outcome
        ({"status": "failed", "retry_after_seconds": 0}, "action_result_invalid"),
        ({"status": "applied", "action_id": "act_2"}, "action_result_identity_mismatch"),
    ],
)
def test_rcpt1_a_receipt_whose_outcome_is_unreadable_still_fails(body, code):
    """RCPT-1: a receipt whose identity, status, or the fields a failure's outcome
    depends on (terminal, retry_after_seconds) are unreadable is refused as before."""
    from app.domain.errors import ActionError
    from app.domain.receipts import ProposalIdentity
    from app.domain.sync_receipts import lenient_receipt

    identity = ProposalIdentity("act_1", "op_1", "sha256:x")
    value = {"action_id": "act_1", "operation_id": "op_1", "payload_digest": "sha256:x", **body}
    with pytest.raises(ActionError) as caught:
        lenient_receipt(value, identity)
    assert caught.value.code == code


def test_rcpt1_a_receipt_with_a_duplicate_key_is_refused_not_read_last_wins(app, world, scripted):
    """RCPT-1, DLV-5 (break-it pass): ``{"status": "applied", ..., "status": "failed"}`` says
    two things; it is an invalid response (``action_response_invalid``), not whichever key
    came last."""
    from flask import Response

    def duplicate_status(body, request, script):
        receipt = s.receipt_for(body, "applied")
        text = json.dumps(receipt)[:-1] + ', "status": "failed"}'
        return Response(text, status=200, content_type="application/json")

    scripted(duplicate_status)
    proposal = decide_report(world, 0)
    approve(world, proposal)
    deliver(proposal.id)
    row = reload(proposal)
    attempt = db.session.scalars(select(ConnectionAttempt).where(ConnectionAttempt.proposal_id == proposal.id)).one()
    assert (attempt.response_class, attempt.error_code) == ("invalid_response", "action_response_invalid")
    assert row.state != "applied" and row.last_error_code == "action_response_invalid"


@pytest.fixture
def proposals(app, world):
    """Four approved proposals of the world's one connection."""
    from ..builders import add_reports

    add_reports(world, 4, prefix="trouble")
    made = []
    for index in range(len(world.report_ids) - 4, len(world.report_ids)):
        proposal = decide_report(world, index)
        approve(world, proposal)
        made.append(reload(proposal))
    return made


def connection_health(world) -> ConnectionHealth:
    db.session.rollback()
    version = db.session.get(ConnectionVersion, world.connection_version_id)
    return db.session.get(ConnectionHealth, version.connection_id)


def held_back(client) -> int:
    """The "Held back" figure of the world's one connection on Operations."""
    import re

    page = client.get("/operations").get_data(as_text=True)
    return int(re.search(r'<td data-label="Held back">(\d+)</td>', page).group(1))


def test_conn2_a_retry_after_beyond_the_pause_bound_resumes_with_the_others(app, world, proposals, scripted, client):
    """CONN-2, DLV-6: a 429 with ``Retry-After: 864000`` (10 days) pauses the
    connection for at most an hour; the proposal that received it resumes with the
    others at the end of that pause (not after the 6 h backoff cap), and Operations
    counts every proposal the pause holds back, that one included."""
    from app.domain.clock import utcnow

    from ..builders import login

    scripted(s.http_status(429, {"Retry-After": "864000"}), s.applied())
    first, second, *_ = proposals
    assert deliver(first.id).error_code == "platform_rate_limited"
    paused_until = connection_health(world).paused_until
    assert paused_until - utcnow() <= timedelta(hours=1)
    assert deliver(second.id).error_code == "connection_paused"
    assert reload(second).next_attempt_at == paused_until
    assert abs((reload(first).next_attempt_at - paused_until).total_seconds()) < 2
    login(client, "admin@example.com")
    assert held_back(client) == 4  # the 429's proposal, the deferred one and the two not yet tried


def test_dlv1_conn1_a_deferral_is_not_a_failure(app, world, scripted, client):
    """DLV-1, CONN-1, DLV-6: six takedowns against a platform that always answers
    503, through batch releases, the breaker opening, its probe and its waits: every
    ``action.delivery_failed`` audit row is a request that was sent, and a proposal
    that was never sent is ``queued`` (waiting for the platform, its due time moved),
    never ``failed``, and its page does not say "Delivery failed"."""
    from app.domain.clock import utcnow
    from app.models import ActionProposal

    from ..builders import add_reports, login, pass_connection_waits, set_row

    app.config["DELIVERY_BATCH_SIZE"] = 10  # one job claims the others along (DLV-1)
    add_reports(world, 6, prefix="always503")
    six = []
    for index in range(len(world.report_ids) - 6, len(world.report_ids)):
        proposal = decide_report(world, index)
        approve(world, proposal)
        six.append(proposal)
    script = scripted(s.http_status(503))
    for _ in range(7):
        pass_connection_waits()
        for proposal in six:
            if not reload(proposal).delivery_terminal:
                set_row(ActionProposal, proposal.id, next_attempt_at=utcnow() - timedelta(seconds=1))
        for proposal in six:
            deliver(proposal.id)
    db.session.rollback()
    failed_rows = db.session.scalars(select(AuditEvent).where(AuditEvent.action == "action.delivery_failed")).all()
    assert len(failed_rows) == len(script.requests) >= 5
    assert db.session.scalars(select(AuditEvent).where(AuditEvent.action.like("action.delivery_defer%"))).all() == []
    never_sent = [reload(p) for p in six if reload(p).delivery_attempt_count == 0]
    assert never_sent, "some proposals were held back throughout"
    assert {p.state for p in never_sent} == {"queued"}
    login(client, "reviewer@example.com")
    page = client.get(f"/proposals/{never_sent[0].id}").get_data(as_text=True)
    live = page[page.index('id="live"') : page.index("<h3>Last receipt</h3>")]
    assert "Delivery failed" not in live and "waiting for the platform" in live


def test_dlv3_a_budget_deferral_is_queued_and_audited_once(app, world, scripted):
    """DLV-3: a delivery a budget has no room for is deferred, ``queued`` (not
    ``failed``), its attempt given back; deferred again for the same reason it writes
    no second ``action.delivery_deferred`` row."""
    from app.domain.clock import utcnow
    from app.models import ActionProposal

    from ..builders import set_row
    from .test_delivery import add_budget

    scripted(s.applied())
    add_budget(world, "component", world.components["takedown"], limit=1)
    first, second = decide_report(world, 0), decide_report(world, 1)
    approve(world, first)
    approve(world, second)
    assert deliver(first.id).state == "applied"
    for _ in range(2):
        set_row(ActionProposal, second.id, next_attempt_at=utcnow() - timedelta(seconds=1))
        assert deliver(second.id).error_code == "budget_exhausted"
    row = reload(second)
    assert (row.state, row.delivery_attempt_count, row.last_error_code) == ("queued", 0, "budget_exhausted")
    db.session.rollback()
    actions = db.session.scalars(select(AuditEvent.action).where(AuditEvent.target_id == second.id)).all()
    assert "action.delivery_failed" not in actions
    assert actions.count("action.delivery_deferred") == 1


def test_ops7_a_half_open_breaker_sends_its_probe_when_due_and_wakes_the_others(app, world, scripted):
    """OPS-7, CONN-1: a platform that is down, then back. The breaker opens with the
    second failure; each proposal's own backoff is 15 s and more, but the probe is
    scheduled for its due time (1 s here) when the breaker opens: a real RQ
    SimpleWorker with its scheduler sends it then, its success closes the breaker
    and wakes the other waiting proposal at once, so both are applied within one
    probe interval of the platform's recovery, long before their own retries."""
    from app.domain.clock import utcnow

    from ..builders import run_worker, set_row

    set_row(ConnectionVersion, world.connection_version_id, breaker_failure_threshold=2, breaker_first_probe_seconds=1)
    script = scripted(s.http_status(503), s.http_status(503), s.applied())  # down, then back
    first, second = decide_report(world, 0), decide_report(world, 1)
    approve(world, first)
    approve(world, second)
    for proposal in (first, second):
        deliver(proposal.id)
    health = connection_health(world)
    assert (health.state, len(script.requests)) == ("open", 2)
    own_retry = min(reload(first).next_attempt_at, reload(second).next_attempt_at)
    assert own_retry - health.next_probe_at > timedelta(seconds=10)
    probe_time_comes(health)
    run_worker(app, with_scheduler=True)
    assert (reload(first).state, reload(second).state) == ("applied", "applied")
    assert len(script.requests) == 4
    assert utcnow() < own_retry
    assert connection_health(world).state == "closed"


def probe_time_comes(health) -> None:
    """Time travel: the breaker's probe time is now, for the database and for the
    probe job RQ holds scheduled (a worker's scheduler then enqueues it)."""
    from rq.job import Job
    from rq.registry import ScheduledJobRegistry

    from app.domain.clock import utcnow
    from app.queueing import delivery_queue

    from ..builders import set_row

    now = utcnow() - timedelta(milliseconds=1)
    set_row(ConnectionHealth, health.connection_id, next_probe_at=now)
    queue = delivery_queue()
    registry = ScheduledJobRegistry(queue=queue)
    probes = [job_id for job_id in registry.get_job_ids() if job_id.startswith("probe-")]
    assert probes, "no probe job scheduled"
    for job_id in probes:
        registry.schedule(Job.fetch(job_id, connection=queue.connection), now)


def test_ops7_the_probe_job_is_safe_to_run_twice(app, world, proposals, scripted):
    """OPS-7, CONN-1: the scheduled probe job run twice (RQ is at-least-once) sends
    one probe; run before its time, or after the breaker closed, it sends nothing."""
    from app.domain.clock import utcnow
    from app.services.lifecycle.probes import probe_when_due

    from ..builders import pass_connection_waits, set_row

    set_row(ConnectionVersion, world.connection_version_id, breaker_failure_threshold=1, breaker_first_probe_seconds=60)
    script = scripted(s.http_status(503), s.http_status(503))
    deliver(proposals[0].id)
    connection_id = db.session.get(ConnectionVersion, world.connection_version_id).connection_id
    assert probe_when_due(connection_id) is None  # not due yet: nothing sent
    pass_connection_waits(utcnow() - timedelta(seconds=1))
    probe_when_due(connection_id)
    probe_when_due(connection_id)  # the same job again: the probe is in flight or reopened
    assert len(script.requests) == 2
    assert connection_health(world).state == "open"


def test_ops7_the_sweep_schedules_an_overdue_probe_again(app, world, proposals, scripted):
    """OPS-7, CONN-1: a probe job lost with Redis: the sweep schedules the overdue
    probe again, and a worker sends it."""
    from app.queueing import delivery_queue
    from app.services.lifecycle.sweeps import run_sweeps

    from ..builders import pass_connection_waits, run_worker, set_row

    set_row(ConnectionVersion, world.connection_version_id, breaker_failure_threshold=1, breaker_first_probe_seconds=60)
    script = scripted(s.http_status(503), s.applied())
    deliver(proposals[0].id)
    queue = delivery_queue(app)
    queue.empty()  # Redis lost every job
    for job_id in queue.scheduled_job_registry.get_job_ids():
        queue.scheduled_job_registry.remove(job_id, delete_job=True)
    assert run_sweeps().probes_scheduled == 0  # not due yet
    pass_connection_waits()
    assert run_sweeps().probes_scheduled == 1
    assert run_sweeps().probes_scheduled == 0  # its job waits: not scheduled twice
    run_worker(app)
    assert len(script.requests) >= 2 and connection_health(world).state == "closed"
    assert {reload(p).state for p in proposals} == {"applied"}
