"""Held deliveries flow at the full rate once a platform recovers (issue 24, CONN-1):
the deliveries the close releases go in batches, each batch's job taking the others'
jobs off the queue, and a hold or deferral that committed just as the connection
closed does not wait out its whole wait."""

from __future__ import annotations

from datetime import timedelta

import pytest
from rq import SimpleWorker

from app.domain.clock import utcnow
from app.extensions import db
from app.models import ActionProposal, ConnectionHealth, ConnectionVersion
from app.queueing import delivery_queue, get_redis
from app.services.lifecycle import breaker
from app.services.lifecycle.connection_holds import release_if_recovered
from app.services.lifecycle.dispatch import deliver
from app.services.uow import unit_of_work

from .. import scripted as s
from ..builders import add_reports, approve, decide_report, pass_connection_waits, reload, set_row


@pytest.fixture
def proposals(app, world):
    """Four approved proposals of the world's one connection."""
    add_reports(world, 4, prefix="recovery")
    made = []
    for index in range(len(world.report_ids) - 4, len(world.report_ids)):
        proposal = decide_report(world, index)
        approve(world, proposal)
        made.append(reload(proposal))
    return made


def connection_id(world) -> str:
    return db.session.get(ConnectionVersion, world.connection_version_id).connection_id


def empty_queues(app) -> None:
    """Forget every delivery job (queued and scheduled): what follows counts its own."""
    queue = delivery_queue(app)
    queue.empty()
    for job_id in queue.scheduled_job_registry.get_job_ids():
        queue.scheduled_job_registry.remove(job_id, delete_job=True)


def queued_for(app, proposals) -> list[str]:
    """The queued delivery jobs' proposal ids, in queue order."""
    wanted = {p.id for p in proposals}
    return [job.args[0] for job in delivery_queue(app).get_jobs() if job.args and job.args[0] in wanted]


def open_breaker(app, world, proposals) -> None:
    """The platform fails once (threshold 1): the breaker opens; the other three are
    held before they are claimed, each waiting for the probe time."""
    app.config["DELIVERY_BATCH_SIZE"] = 1
    set_row(ConnectionVersion, world.connection_version_id, breaker_failure_threshold=1)
    first, *others = proposals
    assert deliver(first.id).error_code == "platform_server_error"
    for proposal in others:
        assert deliver(proposal.id).error_code == "connection_circuit_open"


def test_conn1_the_close_releases_held_deliveries_together_and_one_job_delivers_a_batch(
    app, world, proposals, scripted
):
    """CONN-1, DLV-1 (issue 24): when the probe's success closes the breaker, every
    held delivery is due at once and enqueued; the first job claims them all as one
    batch and takes the others' release jobs off the queue, so no worker spends a
    job per proposal finding it already claimed."""
    script = scripted(s.http_status(503), s.applied())
    open_breaker(app, world, proposals)
    app.config["DELIVERY_BATCH_SIZE"] = 10
    first, *others = proposals
    empty_queues(app)
    pass_connection_waits()
    set_row(ActionProposal, first.id, next_attempt_at=utcnow() - timedelta(seconds=1))
    assert deliver(first.id).state == "applied"  # the probe: the breaker closes
    assert db.session.get(ConnectionHealth, connection_id(world)).state == "closed"
    now = utcnow()
    assert all(reload(p).next_attempt_at <= now for p in others)
    assert sorted(queued_for(app, others)) == sorted(p.id for p in others)
    worker = SimpleWorker([delivery_queue(app)], connection=get_redis(app))
    worker.work(burst=True, max_jobs=1, logging_level="WARNING")  # one job
    assert {reload(p).state for p in others} == {"applied"}
    assert queued_for(app, others) == []  # the other release jobs are gone
    assert len(script.requests) == 1 + 1 + 3


def test_conn1_a_hold_committed_after_the_close_released_is_released_again(app, world, proposals, scripted):
    """CONN-1 (issue 24): a hold decided on the connection as read before it closed
    commits after the close's release (which did not see it): the close releases
    once more after its own commit, so that delivery is due at once, not after the
    probe's lease (the request's timeout and 10 s)."""
    scripted(s.http_status(503), s.applied())
    open_breaker(app, world, proposals)
    late = proposals[1]
    cid = connection_id(world)
    pass_connection_waits()
    lease_end = utcnow() + timedelta(seconds=25)

    def late_hold() -> None:  # another worker's hold, committing just after the close
        set_row(ActionProposal, late.id, next_attempt_at=lease_end, last_error_code="connection_probe_in_flight")

    with unit_of_work() as uow:
        uow.after_commit(late_hold)
        read = breaker.load(uow.session, cid)
        gate = breaker.Gate(cid, world.installation_id, breaker.Settings(), True, read)
        breaker.record_success(uow, gate)  # the probe answered: closed, held ones released
        uow.commit()
    assert db.session.get(ConnectionHealth, cid).state == "closed"
    row = reload(late)
    assert row.next_attempt_at <= utcnow() and row.state == "queued"
    assert late.id in queued_for(app, [late])


@pytest.mark.parametrize(
    "health_state, code, released",
    [
        ("closed", "connection_circuit_open", True),
        ("closed", "connection_probe_in_flight", True),
        ("open", "connection_circuit_open", False),  # still open: it waits for the probe
        ("closed", "connection_rate_limited", False),  # the rate limit's slot time stands (CONN-2)
    ],
)
def test_conn1_a_deferral_that_read_the_connection_before_it_closed_is_due_at_once(
    app, world, proposals, scripted, health_state, code, released
):
    """CONN-1 (issue 24): after a job's hold or deferral for its connection commits,
    it looks at the connection again: closed meanwhile, the delivery is due now and
    enqueued (its wait ended with the connection's); still open, or a rate-limit
    slot, it keeps its time."""
    scripted(s.http_status(503), s.applied())
    open_breaker(app, world, proposals)
    held = proposals[2]
    cid = connection_id(world)
    empty_queues(app)
    if health_state == "closed":
        set_row(ConnectionHealth, cid, state="closed", consecutive_failures=0, next_probe_at=None)
    until = utcnow() + timedelta(seconds=30)
    set_row(ActionProposal, held.id, next_attempt_at=until, last_error_code=code)
    assert release_if_recovered([held.id]) == (1 if released else 0)
    row = reload(held)
    if released:
        assert row.next_attempt_at <= utcnow() and queued_for(app, [held]) == [held.id]
    else:
        assert abs((row.next_attempt_at - until).total_seconds()) < 0.01 and queued_for(app, [held]) == []
