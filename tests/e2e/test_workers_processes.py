"""worker.py as a process tree: sweeps on their own queue, children that die with
their worker, and a worker list that tells live workers from dead ones (EVT-3)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from datetime import timedelta
from pathlib import Path

import pytest
from rq import Queue, Worker
from sqlalchemy import func, select

from app.domain.clock import utcnow
from app.extensions import db
from app.models import ConnectionAttempt, SweepRun
from app.queueing import get_redis
from app.rq_workers import heartbeat_is_live
from app.services.read.operations import queue_status

from ..builders import decide_report, make_world, point_connection_at
from ..processes import alive, children_of, eventually, wait_for_exit

ROOT = Path(__file__).resolve().parents[2]


def start_worker(app, tmp_path, *args, **env):
    environment = {
        **os.environ,
        "DATABASE_URL": app.config["SQLALCHEMY_DATABASE_URI"],
        "REDIS_URL": app.config["REDIS_URL"],
        "EGRESS_ALLOW_PRIVATE": "1",
        "INSTANCE_PATH": str(tmp_path / "worker"),
        "LOG_LEVEL": "WARNING",
        **env,
    }
    return subprocess.Popen(
        [sys.executable, str(ROOT / "worker.py"), *args],
        env=environment,
        cwd=ROOT,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )


def wait_for(condition, timeout: float, what: str):
    """Wait for what a worker process brings about (`processes.eventually`)."""
    return eventually(condition, timeout, what)


def stop(process):
    if process.poll() is None:
        process.send_signal(signal.SIGTERM)
        try:
            process.wait(timeout=20)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


@pytest.mark.slow
def test_children_die_with_their_worker(app, tmp_path):
    """EVT-3: after kill -9 of a worker, its sweep cron, its sweep worker and RQ's
    scheduler process exit too."""
    worker = start_worker(app, tmp_path)
    try:
        # the sweep cron, the sweep worker, and RQ's scheduler of the delivery worker
        children = wait_for(lambda: len(children_of(worker.pid)) >= 3 and children_of(worker.pid), 60, "children")
        worker.send_signal(signal.SIGKILL)
        worker.wait(timeout=10)
        assert wait_for_exit(children, 30) == set(), "the children outlived their worker"
    finally:
        stop(worker)


@pytest.mark.slow
def test_sweeps_run_while_a_slow_platform_holds_the_delivery_worker(app, platform, httpserver, tmp_path):
    """EVT-3: sweeps have their own queue: a delivery held by a slow platform does not
    hold back the sweeps."""
    world = make_world(platform.url, approval_mode="bounded_auto")
    release = threading.Event()

    def slow(request):
        release.wait(60)  # the platform holds the request until the test lets go
        from werkzeug import Response

        return Response("unavailable", status=503)

    httpserver.expect_request("/actions/takedown", method="POST").respond_with_handler(slow)
    point_connection_at(world, httpserver.url_for("/"), timeout_seconds=60)
    decide_report(world, 0)
    worker = start_worker(app, tmp_path, SWEEP_INTERVAL_SECONDS="1")
    try:

        def attempt_in_flight():
            db.session.rollback()
            return db.session.scalar(select(func.count()).select_from(ConnectionAttempt)) >= 1

        wait_for(attempt_in_flight, 30, "the delivery to reach the platform")
        db.session.rollback()
        sweeps_before = db.session.scalar(select(func.count()).select_from(SweepRun))

        def another_sweep():
            db.session.rollback()
            return db.session.scalar(select(func.count()).select_from(SweepRun)) > sweeps_before

        wait_for(another_sweep, 20, "a sweep while the delivery is held")
        assert not release.is_set()
    finally:
        release.set()
        stop(worker)


@pytest.mark.slow
def test_a_worker_is_listed_again_after_redis_forgets_it(app, tmp_path):
    """EVT-3: after Redis is flushed (or restarted) a running worker lists itself again."""
    redis_client = get_redis(app)
    worker = start_worker(app, tmp_path, "--no-cron", WORKER_TTL_SECONDS="17")
    try:
        queue = Queue(app.config["DELIVERY_QUEUE"], connection=redis_client)
        wait_for(lambda: Worker.all(queue=queue), 30, "the worker to register")
        # No check that the registry is empty here: the worker's heartbeat may list it
        # again between the flush and any read of it (a race the test must not depend on).
        redis_client.flushdb()
        listed = wait_for(lambda: Worker.all(queue=queue), 30, "the worker to register again")
        assert queue_status(queue, 17).workers[0]["live"] is True
        assert len(listed) == 1
    finally:
        stop(worker)


def test_heartbeat_liveness():
    """EVT-3: a worker whose heartbeat is older than its TTL plus a grace is dead."""
    now = utcnow()
    assert heartbeat_is_live(now - timedelta(seconds=60), 60, now)
    assert heartbeat_is_live(now - timedelta(seconds=75), 60, now)
    assert not heartbeat_is_live(now - timedelta(seconds=76), 60, now)
    assert not heartbeat_is_live(None, 60, now)


@pytest.mark.slow
def test_a_killed_worker_is_shown_dead(app, tmp_path):
    """EVT-3: Operations tells a kill -9ed worker (still in Redis) from a live one."""
    redis_client = get_redis(app)
    queue = Queue(app.config["DELIVERY_QUEUE"], connection=redis_client)
    worker = start_worker(app, tmp_path, "--no-cron", WORKER_TTL_SECONDS="17")
    try:
        wait_for(lambda: Worker.all(queue=queue), 30, "the worker to register")
        status = queue_status(queue, 17)
        assert [w["live"] for w in status.workers] == [True]
        worker.send_signal(signal.SIGKILL)
        worker.wait(timeout=10)
        later = utcnow() + timedelta(seconds=17 + 16)
        status = queue_status(queue, 17, now=later)
        assert len(status.workers) == 1 and status.workers[0]["live"] is False
        assert status.live_workers == 0
    finally:
        stop(worker)


@pytest.mark.slow
def test_a_killed_workers_dequeue_dies_with_it(app, tmp_path):
    """EVT-3: after kill -9 of a worker waiting for a job, the next job stays on the
    queue. RQ's scheduler child inherited the worker's Redis socket, which kept the dead
    worker's blocking dequeue open in Redis until that child exited: the next job was
    moved into the dead worker's hands (the racing-workers test found one job missing
    when it ran right after this file). The child is paused here, so the test does not
    depend on how fast it exits."""
    redis_client = get_redis(app)
    queue = Queue(app.config["DELIVERY_QUEUE"], connection=redis_client)
    worker = start_worker(app, tmp_path, "--no-cron", WORKER_TTL_SECONDS="60")  # dequeue blocks 45 s
    scheduler = None
    try:
        wait_for(lambda: Worker.all(queue=queue), 30, "the worker to register")
        scheduler = wait_for(lambda: children_of(worker.pid), 30, "RQ's scheduler child")[0]
        wait_for(lambda: _blocked(redis_client), 30, "the blocking dequeue")
        os.kill(scheduler, signal.SIGSTOP)  # alive, but not running, as if slow to exit
        worker.send_signal(signal.SIGKILL)
        worker.wait(timeout=10)
        queue.enqueue("app.jobs.sweep_job", job_id="after-the-kill")
        assert queue.job_ids == ["after-the-kill"]
    finally:
        if scheduler and alive(scheduler):
            os.kill(scheduler, signal.SIGCONT)
        stop(worker)


def _blocked(redis_client) -> bool:
    """Whether a client of this Redis waits in a blocking command (the dequeue)."""
    return any("b" in client["flags"] for client in redis_client.client_list())


@pytest.mark.slow
def test_a_stopped_sweep_cron_ends_quietly(app, tmp_path):
    """EVT-3 (issue 22): the sweep cron child asked to stop -- here SIGTERM after SIGTERM
    until it is gone, as when its worker is killed (the parent-death signal) while a
    terminal's signal reaches the group -- ends quietly: no uncaught `StopRequested`
    traceback (one arriving while it registered its death escaped)."""
    from rq.cron import CronScheduler

    log = tmp_path / "worker.log"
    with open(log, "w") as output:
        worker = subprocess.Popen(
            [sys.executable, str(ROOT / "worker.py")],
            env={
                **os.environ,
                "DATABASE_URL": app.config["SQLALCHEMY_DATABASE_URI"],
                "REDIS_URL": app.config["REDIS_URL"],
                "EGRESS_ALLOW_PRIVATE": "1",
                "INSTANCE_PATH": str(tmp_path / "worker"),
                "LOG_LEVEL": "WARNING",
            },
            cwd=ROOT,
            stdout=output,
            stderr=subprocess.STDOUT,
        )
    try:
        connection = get_redis(app)

        def cron_pid():
            names = {s.name for s in CronScheduler.all(connection)}
            return next((pid for pid in children_of(worker.pid) if f"sweeps-{pid}" in names), None)

        pid = wait_for(cron_pid, 60, "the sweep cron to run")
        deadline = time.monotonic() + 30
        while alive(pid) and time.monotonic() < deadline:  # one more while it stops, as a second sender would
            os.kill(pid, signal.SIGTERM)
            time.sleep(0.0005)
        assert not alive(pid)
    finally:
        stop(worker)
    output = log.read_text()
    assert "StopRequested" not in output and "Traceback" not in output, output
