"""RQ is at-least-once and Redis may lose jobs: the database decides (DLV-1, EVT-3).
Real worker processes race over duplicated jobs; Redis is flushed mid-run."""

from __future__ import annotations

import os
import subprocess
import sys
from datetime import timedelta
from pathlib import Path

import pytest
from sqlalchemy import func, select

from app.domain.clock import utcnow
from app.extensions import db
from app.models import ActionProposal, AuditEvent, ConnectionAttempt
from app.queueing import delivery_queue, enqueue_delivery, get_redis
from app.services.lifecycle import sweeps
from app.services.lifecycle.dispatch import take_lease

from ..builders import add_reports, decide_report, make_world, run_worker

ROOT = Path(__file__).resolve().parents[2]


def bounded_world(app, platform, reports: int):
    world = make_world(platform.url, approval_mode="bounded_auto")
    platform.configure_for(world)
    add_reports(world, reports - len(world.report_ids))
    proposals = [decide_report(world, i) for i in range(reports)]
    assert all(p.state == "queued" for p in proposals)
    return world, proposals


def worker_process(app, tmp_path, name):
    env = {
        **os.environ,
        "DATABASE_URL": app.config["SQLALCHEMY_DATABASE_URI"],
        "REDIS_URL": app.config["REDIS_URL"],
        "EGRESS_ALLOW_PRIVATE": "1",
        "INSTANCE_PATH": str(tmp_path / name),
        "LOG_LEVEL": "WARNING",
    }
    return subprocess.Popen(
        [sys.executable, str(ROOT / "worker.py"), "--burst"],
        env=env,
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )


def assert_each_applied_once(proposals, platform):
    db.session.rollback()
    rows = db.session.scalars(select(ActionProposal)).all()
    assert {r.state for r in rows} == {"applied"}
    per_proposal = dict(
        db.session.execute(
            select(ConnectionAttempt.proposal_id, func.count()).group_by(ConnectionAttempt.proposal_id)
        ).all()
    )
    assert per_proposal == {p.id: 1 for p in proposals}, "an attempt was claimed twice"
    keys = [e["idempotency_key"] for e in platform.state.effects]
    assert sorted(keys) == sorted(p.operation_id for p in proposals)  # each effect once
    applied_audits = db.session.scalar(
        select(func.count()).select_from(AuditEvent).where(AuditEvent.action == "workflow.action_applied")
    )
    assert applied_audits == len(proposals)


@pytest.mark.timeout(600)  # the workers get 300 s to finish
def test_two_workers_racing_claim_each_attempt_once(app, platform, tmp_path):
    """DLV-1: every job enqueued three times; two worker processes race; one claim each."""
    world, proposals = bounded_world(app, platform, reports=12)
    for proposal in proposals:
        for tag in ("dup1", "dup2"):
            enqueue_delivery(proposal.id, 1, 0, tag=tag)
    assert delivery_queue(app).count == 36
    workers = [worker_process(app, tmp_path, f"w{i}") for i in range(2)]
    outputs = [w.communicate(timeout=300)[0] for w in workers]
    assert [w.returncode for w in workers] == [0, 0], outputs
    assert_each_applied_once(proposals, platform)


def test_redis_flushed_mid_run_loses_nothing(app, platform):
    """EVT-3: after Redis loses its jobs (and a worker died holding a lease), the
    sweep finishes every action, none twice."""
    world, proposals = bounded_world(app, platform, reports=10)
    worker = __import__("rq").SimpleWorker([delivery_queue(app)], connection=get_redis(app))
    worker.work(burst=True, max_jobs=3, logging_level="WARNING")
    db.session.rollback()
    crashed = next(p for p in proposals if db.session.get(ActionProposal, p.id).state == "queued")
    now = utcnow()
    assert take_lease(crashed.id, now, now + timedelta(seconds=150))  # a worker took it and died
    get_redis(app).flushdb()  # every queued job is gone
    assert delivery_queue(app).count == 0

    sweeps.run_sweeps()  # the crashed lease is still live: not re-enqueued yet
    run_worker(app)
    db.session.rollback()
    assert db.session.get(ActionProposal, crashed.id).state == "applying"
    from ..builders import make_due

    make_due(crashed)  # ...until its lease expires
    sweeps.run_sweeps()
    run_worker(app)
    assert_each_applied_once(proposals, platform)


def flush_redis_then_deliver(proposal_id: str) -> str | None:
    """A delivery job during which Redis is flushed (a restart without persistence)."""
    from app.jobs import deliver_proposal_job

    get_redis().flushdb()
    return deliver_proposal_job(proposal_id)


def test_a_job_whose_rq_bookkeeping_vanished_is_not_an_error(app, platform, caplog):
    """EVT-3 (issue 22): Redis flushed while a delivery job runs; the delivery works, and
    RQ's lost bookkeeping of that job is one WARNING line, not an ERROR traceback
    (`InvalidJobOperation`) nor a failed job."""
    from rq import Queue

    from app.rq_workers import ConsoleSimpleWorker

    world, proposals = bounded_world(app, platform, reports=1)
    get_redis(app).flushdb()  # only the job below runs
    connection = get_redis(app)
    queue = Queue(app.config["DELIVERY_QUEUE"], connection=connection)
    job = queue.enqueue(
        flush_redis_then_deliver, proposals[0].id, job_id="flushed-mid-job", result_ttl=0, failure_ttl=3600
    )
    caplog.set_level("INFO")

    ConsoleSimpleWorker([queue], connection=connection).work(burst=True, logging_level="INFO")

    db.session.rollback()
    assert db.session.get(ActionProposal, proposals[0].id).state == "applied"
    assert [r.getMessage() for r in caplog.records if r.levelname in ("ERROR", "CRITICAL")] == []
    warnings = [r.getMessage() for r in caplog.records if r.levelname == "WARNING" and job.id in r.getMessage()]
    assert len(warnings) == 1 and "Redis no longer knows" in warnings[0], warnings
    assert queue.failed_job_registry.count == 0
    assert not connection.exists(job.key)  # no husk of a job hash left behind
