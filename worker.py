"""The RQ worker: delivers action proposals and runs the periodic sweeps.

    python worker.py               # a delivery worker with RQ's scheduler, plus two
                                   # children: the sweep cron and a sweep worker
    python worker.py --no-cron     # a delivery worker only: run the sweeps where you
                                   # like, once or more (every sweep is safe to run
                                   # twice at once)
    python worker.py --queue sweeps --no-cron
                                   # a worker for the sweeps queue only
    python worker.py --burst       # work until the queue is empty, then exit

Sweeps have a queue of their own (``SWEEP_QUEUE``, default ``sweeps``), so a slow
platform holding every delivery worker never holds back the sweeps. The children
die with their worker, even on ``kill -9`` (Linux's parent-death signal).

Run as many as you need, on any number of machines: the database claim and lease
decide who delivers what. Jobs run in the worker process itself (RQ's
SimpleWorker): no fork and no new database connection per job; a worker that dies
mid-job leaves a lease that expires, and the sweep re-enqueues the action.
``--fork`` uses RQ's forking Worker instead (each job in a work horse that drops
the inherited database pool).
"""

from __future__ import annotations

import argparse
import logging
import multiprocessing
import os
import signal
import time

import redis
from rq import Queue
from rq.exceptions import StopRequested

os.environ.setdefault("PROCESS_ROLE", "worker")

from app import create_app  # noqa: E402
from app.jobs import bind_app, sweep_job  # noqa: E402
from app.queueing import get_redis  # noqa: E402
from app.rq_workers import ConsoleCronScheduler, ConsoleSimpleWorker, ConsoleWorker, die_with_parent  # noqa: E402

log = logging.getLogger("worker")


RECONNECT_MAX_SECONDS = 30


def _reconnect_delays():
    """1, 2, 4, ... seconds, at most RECONNECT_MAX_SECONDS."""
    delay = 1
    while True:
        yield delay
        delay = min(delay * 2, RECONNECT_MAX_SECONDS)


def run_cron(interval_seconds: int, parent_pid: int) -> None:
    """Enqueue the sweep on the sweeps queue every `interval_seconds` (RQ's cron).

    RQ's cron loop stops on a Redis error; start it again once Redis answers. A stop
    request (SIGTERM/SIGINT, from the worker or its death) ends it quietly wherever it
    arrives: also while it waits to start again.
    """
    die_with_parent(parent_pid)
    app = create_app(web=False)
    bind_app(app)
    try:
        _cron_loop(app, interval_seconds)
    except StopRequested:  # raised by the cron's signal handler outside its own loop
        return


def _cron_loop(app, interval_seconds: int) -> None:
    delays = _reconnect_delays()
    while True:
        try:
            with app.app_context():
                cron = ConsoleCronScheduler(connection=get_redis(app), name=f"sweeps-{os.getpid()}")
                cron.register(
                    sweep_job,
                    queue_name=app.config["SWEEP_QUEUE"],
                    interval=interval_seconds,
                    result_ttl=600,
                    failure_ttl=3600,
                    job_timeout=600,
                )
                cron.start()  # returns on SIGTERM/SIGINT
                return
        except redis.RedisError as error:
            delay = next(delays)
            log.warning("sweep cron lost Redis; starting again in %s s", delay, extra={"error": str(error)})
            time.sleep(delay)


def run_sweep_worker(parent_pid: int) -> None:
    """Serve the sweeps queue in a child process of the delivery worker."""
    die_with_parent(parent_pid)
    app = create_app(web=False)
    bind_app(app)
    run_worker(app, ConsoleSimpleWorker, burst=False, queue_name=app.config["SWEEP_QUEUE"], scheduler=False)


def run_worker(app, worker_class, burst: bool, queue_name: str, scheduler: bool = True) -> None:
    """Run RQ's worker loop, and start it again when Redis went away under it.

    RQ retries a lost connection while it waits for jobs, but quits when Redis
    fails in the middle of a job; the job's lease and the sweep recover the
    action, and this loop brings the worker back.
    """
    delays = _reconnect_delays()
    while True:
        worker = None
        try:
            connection = get_redis(app)
            # Building a worker talks to Redis too (CLIENT SETNAME): keep it inside.
            worker = worker_class(
                [Queue(queue_name, connection=connection)],
                connection=connection,
                worker_ttl=app.config["WORKER_TTL_SECONDS"],
            )
            log.info("worker starting", extra={"worker": worker.name, "queue": queue_name})
            worker.work(with_scheduler=scheduler, burst=burst, logging_level=app.config["LOG_LEVEL"])
        except redis.RedisError as error:
            log.warning("worker lost Redis", extra={"error": str(error)})
        if burst or getattr(worker, "_shutdown_requested_date", None):  # done, or asked to stop
            return
        delay = next(delays)
        log.warning("worker starting again in %s s", delay)
        time.sleep(delay)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--no-cron", action="store_true", help="do not schedule the sweeps from this process")
    parser.add_argument("--burst", action="store_true", help="stop when the queue is empty")
    parser.add_argument("--fork", action="store_true", help="run each job in a forked work horse")
    parser.add_argument("--queue", default=None, help="the queue to serve (default: DELIVERY_QUEUE)")
    parser.add_argument(
        "--metrics-port", type=int, default=None, help="serve this worker's Prometheus metrics on 127.0.0.1:PORT"
    )
    args = parser.parse_args()
    app = create_app(web=False)
    bind_app(app)
    if args.metrics_port:
        from prometheus_client import start_http_server

        start_http_server(args.metrics_port, addr="127.0.0.1")
    children = []
    if not args.no_cron and not args.burst:
        fork = multiprocessing.get_context("fork")
        me = os.getpid()
        children = [
            fork.Process(target=run_cron, args=(app.config["SWEEP_INTERVAL_SECONDS"], me), daemon=True),
            fork.Process(target=run_sweep_worker, args=(me,), daemon=True),
        ]
        for child in children:
            child.start()
    try:
        worker_class = ConsoleWorker if args.fork else ConsoleSimpleWorker
        run_worker(app, worker_class, args.burst, args.queue or app.config["DELIVERY_QUEUE"])
    finally:
        for child in children:
            if child.is_alive():
                os.kill(child.pid, signal.SIGTERM)
        for child in children:
            child.join(timeout=10)


if __name__ == "__main__":
    main()
