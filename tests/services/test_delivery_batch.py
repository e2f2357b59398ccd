"""Batch claims (DLV-1): one delivery job claims several due proposals of one
component version, sends them in turn and records them in one more commit; each
proposal keeps its own claim, attempt row, budget reservation, receipt and audit row."""

from __future__ import annotations

import logging
import threading
from datetime import timedelta

import pytest
from sqlalchemy import func, select

from app.domain.clock import utcnow
from app.domain.proposal.delivery import BATCH_RELEASED
from app.extensions import db
from app.models import ActionProposal, ActionReceiptRecord, AuditEvent, Budget, BudgetReservation, ConnectionAttempt
from app.queueing import delivery_queue
from app.services.lifecycle.dispatch import deliver

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


def test_dlv1_one_job_claims_a_burst_and_records_each_proposal_as_its_own(app, platform, burst, caplog):
    """DLV-1, DLV-4, DLV-5: one job delivers the whole burst; every proposal has its
    own attempt row, receipt, audit row and consumed reservations, and the jobs of
    the ones taken along are off the queue. Nothing failed, so neither transaction
    needed its careful try with savepoints."""
    world, proposals = burst
    queued_jobs = delivery_queue(app).count
    with caplog.at_level(logging.INFO, logger="app.services.lifecycle.dispatch"):
        outcome = deliver(proposals[0].id)
    assert not [r for r in caplog.records if "with savepoints" in r.getMessage()]
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
    back, queued again (a deferral is no failure, issue 22), waits as long as the
    failure's base delay (here its Retry-After), and its own job delivers it."""
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
            "queued",
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
        "queued",
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


@pytest.mark.skipif(BACKEND != "postgresql", reason="reads PostgreSQL's plan (EXPLAIN)")
def test_dlv1_companions_are_read_in_order_from_the_waiting_index_not_sorted(app, platform, burst):
    """DLV-1: the companions' SELECT can be answered by `ix_action_proposals_waiting`
    in due order, so its LIMIT ends the scan (with 2,000 due, 0.15 ms); before, every batch claim sorted every
    due row of the table (7.6 ms per batch with 2,000 due)."""
    from sqlalchemy import text

    from app.services.lifecycle.dispatch import companions_query

    world, proposals = burst
    query = companions_query(proposals[0], utcnow(), 9)
    compiled = query.compile(db.engine, compile_kwargs={"render_postcompile": True})  # as sent
    connection = db.session.connection()
    # A few rows: the planner would rather scan and sort. Penalise both, and see
    # whether an index can give the rows in due order at all.
    connection.execute(text("SET LOCAL enable_seqscan = off"))
    connection.execute(text("SET LOCAL enable_sort = off"))
    plan = "\n".join(row[0] for row in connection.exec_driver_sql("EXPLAIN " + str(compiled), compiled.params))
    db.session.rollback()
    assert "ix_action_proposals_waiting" in plan and "Sort" not in plan, plan
    # inline, not bound: a prepared statement's generic plan could not prove the
    # partial index's predicate from parameters
    assert "action_proposals.state IN ('queued', 'failed')" in str(compiled)
    assert len(db.session.scalars(query).all()) == BURST - 1
    db.session.rollback()


def _fails_for(real, proposal_id: str, message: str):
    """`real`, except that it raises for one proposal (the first argument naming it)."""

    def wrapped(*args, **kwargs):
        named = [a for a in args if getattr(a, "id", a) == proposal_id or getattr(a, "run_id", None) == proposal_id]
        if named:
            raise RuntimeError(message)
        return real(*args, **kwargs)

    return wrapped


def _after(real, proposal_id: str, message: str):
    """`real`, then an error for one proposal: what it wrote must be undone."""

    def wrapped(uow, proposal, *args, **kwargs):
        result = real(uow, proposal, *args, **kwargs)
        if proposal.id == proposal_id:
            raise RuntimeError(message)
        return result

    return wrapped


@pytest.mark.parametrize("where", ["save_receipt", "after_result"])
def test_dlv5_an_outcome_that_cannot_be_written_leaves_only_that_one_to_its_lease(
    app, platform, burst, monkeypatch, where
):
    """DLV-5, EDGE-4: the batch's outcomes are first written without savepoints; when
    one fails (before its receipt, or after its run's event was written), all are
    written again, each in a savepoint: the others are applied with their receipts
    and audit rows, the one that failed keeps its lease, its run is not woken, and
    the sweep delivers it again (its idempotency key makes the resend harmless)."""
    import app.services.lifecycle.outcomes as outcomes
    from app.models import WorkflowDispatchOutbox, WorkflowRun

    world, proposals = burst
    broken = reload(proposals[2])
    wrap = _fails_for if where == "save_receipt" else _after
    monkeypatch.setattr(outcomes, where, wrap(getattr(outcomes, where), broken.id, "disk full"))
    outcome = deliver(proposals[0].id)
    states = {o.proposal_id: o.state for o in [outcome, *outcome.extra["batch"]]}
    assert states == {p.id: ("applying" if p.id == broken.id else "applied") for p in proposals}
    for proposal in proposals:
        row = reload(proposal)
        receipts = count(ActionReceiptRecord, ActionReceiptRecord.proposal_id == proposal.id)
        applied_audits = count(
            AuditEvent, AuditEvent.target_id == proposal.id, AuditEvent.action == "workflow.action_applied"
        )
        if proposal.id == broken.id:
            assert (row.state, row.lease_expires_at is not None, receipts, applied_audits) == ("applying", True, 0, 0)
            events = (WorkflowDispatchOutbox.run_id == row.run_id, WorkflowDispatchOutbox.operation == "event")
            assert count(WorkflowDispatchOutbox, *events) == 0
            assert db.session.get(WorkflowRun, row.run_id).state == "waiting"
        else:
            assert (row.state, row.lease_expires_at, receipts, applied_audits) == ("applied", None, 1, 1)
    assert platform.state.requests_seen == BURST


def test_evt2_a_wake_up_that_fails_in_a_batch_is_left_to_the_sweep_alone(app, platform, burst, monkeypatch):
    """EVT-2, DLV-7: one run's wake-up fails while the batch is recorded: every
    proposal is still applied, that run's outbox row is ``failed`` for the sweep to
    retry, and the other runs moved on."""
    import app.services.lifecycle.runs as runs
    from app.models import WorkflowDispatchOutbox, WorkflowEventInbox, WorkflowRun

    world, proposals = burst
    stuck = reload(proposals[3])
    monkeypatch.setattr(runs, "_resume", _fails_for(runs._resume, stuck.run_id, "engine down"))
    deliver(proposals[0].id)
    assert {reload(p).state for p in proposals} == {"applied"}
    db.session.rollback()
    for proposal in proposals:
        row = reload(proposal)
        outbox = db.session.scalars(
            select(WorkflowDispatchOutbox).where(
                WorkflowDispatchOutbox.run_id == row.run_id, WorkflowDispatchOutbox.operation == "event"
            )
        ).one()
        run_state = db.session.get(WorkflowRun, row.run_id).state
        event = db.session.get(WorkflowEventInbox, outbox.event_inbox_id)
        if proposal.id == stuck.id:
            assert (outbox.state, outbox.last_error_code, outbox.attempts, run_state) == (
                "failed",
                "platform_event_send_failed",
                1,
                "waiting",
            )
            assert (event.delivered_at, event.delivery_attempts, event.last_error_code) == (
                None,
                1,
                "platform_event_send_failed",
            )
        else:
            assert (outbox.state, outbox.attempts, run_state) == ("delivered", 1, "completed")
            assert event.delivered_at is not None and event.delivery_attempts == 1


def test_pre1_a_member_whose_case_changed_fails_its_checks_and_the_rest_go(app, platform, burst):
    """PRE-1, DLV-2: the batch's reports are read together before the claims; a
    member whose case was appealed meanwhile fails ``action_case_no_longer_eligible``
    without a request, and the others are sent and applied."""
    from app.models import Report

    world, proposals = burst
    changed = reload(proposals[2])
    set_row(Report, changed.report_id, state="appealed")
    outcome = deliver(proposals[0].id)
    by_id = {o.proposal_id: o for o in [outcome, *outcome.extra["batch"]]}
    assert by_id[changed.id].error_code == "action_case_no_longer_eligible"
    assert count(ConnectionAttempt, ConnectionAttempt.proposal_id == changed.id) == 0
    assert {reload(p).state for p in proposals if p.id != changed.id} == {"applied"}
    assert platform.state.requests_seen == BURST - 1
