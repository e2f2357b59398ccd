"""Batch claims (DLV-1): one delivery job claims several due proposals of one
component version, sends them in turn and records them in one more commit; each
proposal keeps its own claim, attempt row, budget reservation, receipt and audit row."""

from __future__ import annotations

import threading
from datetime import timedelta

import pytest
from sqlalchemy import func, select

from app.domain.clock import utcnow
from app.domain.proposal.delivery import BATCH_RELEASED
from app.extensions import db
from app.models import ActionProposal, ActionReceiptRecord, AuditEvent, Budget, BudgetReservation, ConnectionAttempt
from app.queueing import delivery_queue
from app.services.lifecycle.delivery import deliver

from .. import scripted as s
from ..builders import add_reports, decide_report, make_due, make_world, point_connection_at, reload, set_row
from ..conftest import BACKEND

BURST = 5


@pytest.fixture
def burst(app, platform):
    """BURST bounded-automation proposals of one component version, all due, with
    their delivery jobs queued; jobs claim up to 10 proposals."""
    app.config["DELIVERY_BATCH_SIZE"] = 10
    world = make_world(platform.url, approval_mode="bounded_auto")
    platform.configure_for(world)
    add_reports(world, BURST - len(world.report_ids))
    proposals = [decide_report(world, n) for n in range(BURST)]
    assert {p.state for p in proposals} == {"queued"}
    return world, [reload(p) for p in proposals]


def scripted_platform(httpserver, world, *steps) -> s.Script:
    script = s.Script(*steps)
    httpserver.expect_request("/actions/takedown", method="POST").respond_with_handler(script)
    point_connection_at(world, httpserver.url_for("/"))
    return script


def count(model, *where) -> int:
    db.session.rollback()
    return db.session.scalar(select(func.count()).select_from(model).where(*where))


def test_dlv1_one_job_claims_a_burst_and_records_each_proposal_as_its_own(app, platform, burst):
    """DLV-1, DLV-4, DLV-5: one job delivers the whole burst; every proposal has its
    own attempt row, receipt, audit row and consumed reservations, and the jobs of
    the ones taken along are off the queue."""
    world, proposals = burst
    queued_jobs = delivery_queue(app).count
    outcome = deliver(proposals[0].id)
    taken = outcome.extra["batch"]
    assert outcome.state == "applied" and len(taken) == BURST - 1
    assert {o.state for o in taken} == {"applied"} and {o.attempt_number for o in taken} == {1}
    assert delivery_queue(app).count == queued_jobs - (BURST - 1)  # the named job is this call
    assert len({e["idempotency_key"] for e in platform.state.effects}) == BURST == platform.state.requests_seen
    for proposal in proposals:
        row = reload(proposal)
        assert (row.state, row.delivery_attempt_count, row.lease_expires_at) == ("applied", 1, None)
        pid = ActionProposal.id == proposal.id
        assert count(ConnectionAttempt, ConnectionAttempt.proposal_id == proposal.id) == 1
        assert count(ActionReceiptRecord, ActionReceiptRecord.proposal_id == proposal.id) == 1
        assert count(AuditEvent, AuditEvent.target_id == proposal.id, AuditEvent.action == "workflow.action_applied")
        assert db.session.scalar(select(ActionProposal.run_id).where(pid))
        reservations = db.session.scalars(
            select(BudgetReservation.state).where(BudgetReservation.operation_id == proposal.operation_id)
        ).all()
        assert reservations and set(reservations) == {"consumed"}
    assert count(ConnectionAttempt, ConnectionAttempt.finished_at.is_(None)) == 0
    assert not deliver(proposals[1].id).claimed  # a job that was missed claims nothing


def test_dlv1_only_due_ordinary_proposals_are_taken_along(app, platform, burst):
    """DLV-1, TEMP-4: a proposal not yet due, or not before its time, stays for its
    own job; the claim takes only what its own claim rule allows."""
    world, proposals = burst
    later = utcnow() + timedelta(minutes=5)
    set_row(ActionProposal, proposals[1].id, next_attempt_at=later)
    set_row(ActionProposal, proposals[2].id, not_before=later)
    outcome = deliver(proposals[0].id)
    assert sorted(o.proposal_id for o in outcome.extra["batch"]) == sorted(p.id for p in proposals[3:])
    for waiting in proposals[1:3]:
        row = reload(waiting)
        assert (row.state, row.delivery_attempt_count) == ("queued", 0)
    assert platform.state.requests_seen == BURST - 2


def test_dlv6_after_a_failure_the_rest_are_released_unsent_without_using_an_attempt(app, burst, httpserver):
    """DLV-6, CONN-1: once one request of the batch fails, the others are not sent:
    each is deferred ``delivery_batch_released`` with its attempt and budget given
    back, waits as long as the failure's base delay (here its Retry-After), and its
    own job delivers it."""
    world, proposals = burst
    struggling = s.http_status(503, headers={"Retry-After": "7"})
    script = scripted_platform(httpserver, world, s.applied(), struggling, s.applied())
    outcome = deliver(proposals[0].id)
    by_id = {o.proposal_id: o for o in [outcome, *outcome.extra["batch"]]}
    first, failed = reload(proposals[0]), reload(proposals[1])
    assert first.state == "applied"
    assert (failed.state, failed.last_error_code, failed.delivery_attempt_count) == (
        "failed",
        "platform_server_error",
        1,
    )
    assert len(script.requests) == 2
    for released in proposals[2:]:
        row = reload(released)
        assert (row.state, row.last_error_code, row.delivery_attempt_count, row.delivery_terminal) == (
            "failed",
            BATCH_RELEASED,
            0,
            False,
        )
        assert utcnow() + timedelta(seconds=5) < row.next_attempt_at <= utcnow() + timedelta(seconds=7)
        assert by_id[released.id].error_code == BATCH_RELEASED
        assert count(ConnectionAttempt, ConnectionAttempt.proposal_id == released.id) == 0  # never sent: no row
        states = db.session.scalars(
            select(BudgetReservation.state).where(BudgetReservation.operation_id == released.operation_id)
        ).all()
        assert states and set(states) == {"released"}
    charged = select(BudgetReservation.budget_id).where(BudgetReservation.state == "consumed")
    used = db.session.scalars(select(Budget.used_amount).where(Budget.id.in_(charged))).all()
    assert used and set(used) == {2}  # the applied one and the failed one: the released gave theirs back
    make_due(proposals[2])
    assert deliver(proposals[2].id).state == "applied"  # the released ones go on their own


def test_dlv1_a_member_goes_only_while_the_shared_lease_allows_a_whole_request(app, platform, burst):
    """DLV-1, DLV-4: members share one lease and go one after the other; one whose
    request could no longer take the connection's whole timeout is released unsent."""
    world, proposals = burst
    app.config["DELIVERY_LEASE_SECONDS"] = 3  # a request may take 2.4 s: nothing is left after the first
    outcome = deliver(proposals[0].id)
    assert outcome.state == "applied"
    assert {o.error_code for o in outcome.extra["batch"]} == {BATCH_RELEASED}
    assert platform.state.requests_seen == 1
    assert {reload(p).delivery_attempt_count for p in proposals[1:]} == {0}


def test_dlv3_an_exhausted_budget_defers_one_and_leaves_the_rest_unclaimed(app, platform, burst):
    """DLV-3: a budget with room for two sends two; the third is deferred
    ``budget_exhausted`` without using an attempt, and the batch stops there."""
    world, proposals = burst
    db.session.execute(Budget.__table__.update().values(limit_amount=2))
    db.session.commit()
    audited = {p.id: count(AuditEvent, AuditEvent.target_id == p.id) for p in proposals}
    outcome = deliver(proposals[0].id)
    codes = [o.error_code for o in outcome.extra["batch"]]
    assert codes == [None, "budget_exhausted"]
    assert platform.state.requests_seen == 2
    deferred = reload(proposals[2])
    assert (deferred.state, deferred.delivery_attempt_count, deferred.last_error_code) == (
        "failed",
        0,
        "budget_exhausted",
    )
    for untouched in proposals[3:]:
        row = reload(untouched)
        assert (row.state, row.delivery_attempt_count, row.last_error_code) == ("queued", 0, None)
        assert count(AuditEvent, AuditEvent.target_id == untouched.id) == audited[untouched.id]


def test_dlv1_a_batch_size_of_one_claims_one_per_job(app, platform, burst):
    """DLV-1: ``DELIVERY_BATCH_SIZE=1`` is one proposal per job."""
    world, proposals = burst
    app.config["DELIVERY_BATCH_SIZE"] = 1
    outcome = deliver(proposals[0].id)
    assert outcome.state == "applied" and "batch" not in outcome.extra
    assert {reload(p).state for p in proposals[1:]} == {"queued"}


@pytest.mark.skipif(BACKEND != "postgresql", reason="row locks are PostgreSQL's; SQLite locks the whole file")
def test_dlv1_a_proposal_another_worker_holds_is_skipped_not_waited_for(app, platform, burst):
    """DLV-1: a job whose proposal another transaction holds (a worker's batch claim
    or outcome) returns at once, claiming nothing; once released, a job claims it."""
    from sqlalchemy import create_engine, text

    world, proposals = burst
    app.config["DELIVERY_BATCH_SIZE"] = 1
    other = create_engine(app.config["SQLALCHEMY_DATABASE_URI"])
    done: dict = {}

    def job() -> None:
        with app.app_context():
            done["outcome"] = deliver(proposals[0].id)

    with other.connect() as holder:
        holder.execute(text("SELECT id FROM action_proposals WHERE id = :id FOR UPDATE"), {"id": proposals[0].id})
        worker = threading.Thread(target=job)
        worker.start()
        worker.join(timeout=30)  # a job that waited for the lock would still be waiting
        finished_while_held = not worker.is_alive()
        holder.rollback()
    worker.join()
    other.dispose()
    assert finished_while_held and not done["outcome"].claimed
    assert platform.state.requests_seen == 0
    assert deliver(proposals[0].id).state == "applied"
