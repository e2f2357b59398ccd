"""The RQ worker: delivers action proposals and runs the periodic sweeps.

    python worker.py               # a worker with RQ's scheduler, plus the sweep cron
    python worker.py --no-cron     # a worker only: run the cron where you like, once
                                   # or more (every sweep is safe to run twice at once)
    python worker.py --burst       # work until the queue is empty, then exit

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
from rq import SimpleWorker, Worker
from rq.cron import CronScheduler

os.environ.setdefault("PROCESS_ROLE", "worker")

from app import create_app  # noqa: E402
from app.jobs import bind_app, sweep_job  # noqa: E402
from app.queueing import delivery_queue, get_redis  # noqa: E402

log = logging.getLogger("worker")


RECONNECT_MAX_SECONDS = 30


def _reconnect_delays():
    """1, 2, 4, ... seconds, at most RECONNECT_MAX_SECONDS."""
    delay = 1
    while True:
        yield delay
        delay = min(delay * 2, RECONNECT_MAX_SECONDS)


def run_cron(interval_seconds: int) -> None:
    """Enqueue the sweep every `interval_seconds` with RQ's cron scheduler.

    RQ's cron loop stops on a Redis error; start it again once Redis answers.
    """
    app = create_app()
    bind_app(app)
    delays = _reconnect_delays()
    while True:
        try:
            with app.app_context():
                cron = CronScheduler(connection=get_redis(app), name=f"sweeps-{os.getpid()}")
                cron.register(
                    sweep_job,
                    queue_name=app.config["DELIVERY_QUEUE"],
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


def run_worker(app, worker_class, burst: bool) -> None:
    """Run RQ's worker loop, and start it again when Redis went away under it.

    RQ retries a lost connection while it waits for jobs, but quits when Redis
    fails in the middle of a job; the job's lease and the sweep recover the
    action, and this loop brings the worker back.
    """
    delays = _reconnect_delays()
    while True:
        worker = None
        try:
            # RQ's Worker talks to Redis as it is built: inside the try, so a restart
            # while Redis is still away waits and tries again instead of ending the process.
            worker = worker_class([delivery_queue(app)], connection=get_redis(app))
            log.info("worker starting", extra={"worker": worker.name})
            worker.work(with_scheduler=True, burst=burst, logging_level=app.config["LOG_LEVEL"])
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
    parser.add_argument(
        "--metrics-port", type=int, default=None, help="serve this worker's Prometheus metrics on 127.0.0.1:PORT"
    )
    args = parser.parse_args()
    app = create_app()
    bind_app(app)
    if args.metrics_port:
        from prometheus_client import start_http_server

        start_http_server(args.metrics_port, addr="127.0.0.1")
    cron = None
    if not args.no_cron and not args.burst:
        cron = multiprocessing.get_context("fork").Process(
            target=run_cron, args=(app.config["SWEEP_INTERVAL_SECONDS"],), daemon=True
        )
        cron.start()
    try:
        run_worker(app, Worker if args.fork else SimpleWorker, args.burst)
    finally:
        if cron is not None and cron.is_alive():
            os.kill(cron.pid, signal.SIGTERM)
            cron.join(timeout=10)


if __name__ == "__main__":
    main()
