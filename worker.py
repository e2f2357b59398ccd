"""The RQ worker: delivers action proposals and runs the periodic sweeps.

    python worker.py            # a worker with RQ's scheduler, plus the sweep cron
    python worker.py --no-cron  # a worker only (run the cron in one place or many:
                                # every sweep is safe to run twice at once)

Each job runs inside the app's context (see app/jobs.py); the worker forks a work
horse per job, and the horse drops the inherited database pool.
"""

from __future__ import annotations

import argparse
import logging
import multiprocessing
import os
import signal

from rq import Worker
from rq.cron import CronScheduler

from app import create_app
from app.jobs import bind_app, sweep_job
from app.queueing import delivery_queue, get_redis


def run_cron(interval_seconds: int) -> None:
    """Enqueue the sweep every `interval_seconds` with RQ's cron scheduler."""
    app = create_app()
    bind_app(app)
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
        cron.start()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--no-cron", action="store_true", help="do not schedule the sweeps from this process")
    parser.add_argument("--burst", action="store_true", help="stop when the queue is empty")
    args = parser.parse_args()
    app = create_app()
    logging.basicConfig(level=app.config["LOG_LEVEL"])
    bind_app(app)
    cron = None
    if not args.no_cron and not args.burst:
        cron = multiprocessing.get_context("fork").Process(
            target=run_cron, args=(app.config["SWEEP_INTERVAL_SECONDS"],), daemon=True
        )
        cron.start()
    try:
        with app.app_context():
            worker = Worker([delivery_queue(app)], connection=get_redis(app))
            worker.work(with_scheduler=True, burst=args.burst)
    finally:
        if cron is not None and cron.is_alive():
            os.kill(cron.pid, signal.SIGTERM)
            cron.join(timeout=10)


if __name__ == "__main__":
    main()
