"""Platform outage (SPEC CONN-1): COUNT bounded-automation proposals to a platform
that is down (503) for the first 30 s after the first request it receives, then
answers. Measured three times on fresh databases, 2 workers each: with no outage at
all (the delivery rate the machine sustains in this world), with the circuit breaker
(the connection's defaults: open after 5 failures, first probe after 30 s) and without
it (a failure threshold no outage reaches), for comparison.

Figures: the requests the platform received during the outage, the seconds from the
platform's recovery to the last proposal applied, and `outage_recovery_ratio`: the
seconds COUNT deliveries take at the sustained rate (from the platform's first
request to the last applied, no outage) over the recovery's seconds with the breaker
(1.0: the held deliveries flow at the full rate once the platform is back).

    python outage.py [COUNT] [OUTAGE_SECONDS]

    OUTAGE_ONLY=breaker   only the run with the breaker
    OUTAGE_ONLY=ratio     only the runs without an outage and with the breaker (saves the
                          ratio's figures, with ``outage_ratio_count``)
    OUTAGE_VERBOSE=1      the states, wait codes and queues every 5 s
    OUTAGE_LOGS=DIR       the workers log at INFO into DIR
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
import urllib.request

from common import BENCH_DB, BENCH_REDIS, ROOT, bench_app, free_port, save, stop_workers, wait_for_port

COUNT = int(sys.argv[1]) if len(sys.argv) > 1 else 2000
OUTAGE_SECONDS = float(sys.argv[2]) if len(sys.argv) > 2 else 30.0
WORKERS = 2
TIMEOUT_SECONDS = 900
NO_BREAKER_THRESHOLD = 1_000_000


def prepare(app, platform_url: str, breaker: bool) -> None:
    """A bounded-automation world with COUNT queued proposals (their jobs enqueued)."""
    from sqlalchemy import select, update

    from app.demo import seed_demo
    from app.extensions import db
    from app.models import ConnectionVersion, Integration, OperatorUser
    from app.services.cases.reports import intake_report, record_decision

    with app.app_context():
        seed_demo(platform_url, approval_mode="bounded_auto", slug="bench")
        if not breaker:
            db.session.execute(update(ConnectionVersion).values(breaker_failure_threshold=NO_BREAKER_THRESHOLD))
            db.session.commit()
        integration_id = db.session.scalar(select(Integration.id))
        moderator = db.session.scalar(select(OperatorUser).where(OperatorUser.email == "bench-moderator@example.com"))
        for n in range(COUNT):
            report = intake_report(
                {"external_id": f"o-{n}", "targets": [{"reference": f"post:o{n}", "kind": "post"}]}, integration_id
            )
            record_decision(report.report_id, decision_code="remove_content", rationale="", operator=moderator)


def counts(app) -> dict[str, int]:
    from sqlalchemy import func, select

    from app.extensions import db
    from app.models import ActionProposal

    with app.app_context():
        rows = db.session.execute(select(ActionProposal.state, func.count()).group_by(ActionProposal.state)).all()
        db.session.rollback()
        return dict(rows)


def waiting(app) -> dict[str, int]:
    from sqlalchemy import func, select

    from app.extensions import db
    from app.models import ActionProposal

    with app.app_context():
        rows = db.session.execute(
            select(ActionProposal.last_error_code, func.count())
            .where(ActionProposal.state != "applied")
            .group_by(ActionProposal.last_error_code)
        ).all()
        db.session.rollback()
        return dict(rows)


def transitions(app) -> list[str]:
    from sqlalchemy import select

    from app.extensions import db
    from app.models import AuditEvent

    with app.app_context():
        return list(
            db.session.scalars(
                select(AuditEvent.action).where(AuditEvent.target_type == "connection").order_by(AuditEvent.seq)
            )
        )


def queues() -> str:
    """The delivery queue's length and its scheduled jobs, and the jobs each worker
    ran so far (OUTAGE_VERBOSE)."""
    import redis
    from rq import Queue, Worker

    connection = redis.Redis.from_url(BENCH_REDIS)
    queue = Queue("deliveries", connection=connection)
    ran = sorted(w.successful_job_count for w in Worker.all(connection=connection))
    return f"queued jobs {len(queue)}, scheduled {queue.scheduled_job_registry.count}, jobs run {ran}"


def stats(url: str) -> dict:
    with urllib.request.urlopen(f"{url}/stats", timeout=10) as answer:
        return json.loads(answer.read())


def run(breaker: bool, outage_seconds: float = OUTAGE_SECONDS) -> dict:
    """One run on a fresh database: COUNT proposals to a platform down for its first
    `outage_seconds` (0: never down), 2 workers. ``recovery_seconds``: from the end
    of the outage (with none, the platform's first request) to the last applied."""
    port = free_port()
    platform = subprocess.Popen(
        [sys.executable, str(ROOT / "bench" / "outage_platform.py"), str(port), str(outage_seconds)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    wait_for_port(port)
    url = f"http://127.0.0.1:{port}"
    env = {
        **os.environ,
        "DATABASE_URL": BENCH_DB,
        "REDIS_URL": BENCH_REDIS,
        "EGRESS_ALLOW_PRIVATE": "1",
        "LOG_LEVEL": "ERROR",
        "INSTANCE_PATH": str(ROOT / "bench" / "out" / "worker"),
    }
    workers = []
    try:
        app = bench_app()
        label = "no outage" if not outage_seconds else "with the breaker" if breaker else "without the breaker"
        print(f"{label}: preparing {COUNT} proposals ...", flush=True)
        prepare(app, url, breaker)
        # Long-running workers with RQ's scheduler (deferred and backed-off jobs are
        # scheduled); the first also runs the sweeps, as in production.
        logs = os.environ.get("OUTAGE_LOGS")  # a directory: the workers log there at INFO
        for n in range(WORKERS):
            args = [sys.executable, str(ROOT / "worker.py")] + ([] if n == 0 else ["--no-cron"])
            name = f"{logs}/worker-{label.replace(' ', '-')}-{n}.log"
            out = open(name, "w") if logs else subprocess.DEVNULL  # noqa: SIM115 (closed with the process)
            workers.append(
                subprocess.Popen(
                    args, cwd=ROOT, env={**env, "LOG_LEVEL": "INFO"} if logs else env, stdout=out, stderr=out
                )
            )
        started = time.time()
        applied_at, shown = None, started
        while time.time() - started < TIMEOUT_SECONDS:
            now_counts = counts(app)
            if now_counts.get("applied", 0) == COUNT:
                applied_at = time.time()
                break
            if os.environ.get("OUTAGE_VERBOSE") and time.time() - shown >= 5:
                shown = time.time()
                print(f"    {shown - started:5.1f} s {now_counts} {waiting(app)} {queues()}", flush=True)
            time.sleep(0.1)
        seen = stats(url)
        final = counts(app)
        assert applied_at is not None, f"not all applied after {TIMEOUT_SECONDS} s: {final}"
        assert seen["applied"] == COUNT, seen  # each action applied once on the platform
        moves = transitions(app)
        print(f"  {label}: {seen}, states {final}, breaker {moves[:8]}{' ...' if len(moves) > 8 else ''}", flush=True)
        return {
            "requests_during_outage": seen["during_outage"],
            "requests_after_outage": seen["after_outage"],
            "recovery_seconds": applied_at - seen["outage_ends_at"],
            "transitions": len(moves),
        }
    finally:
        stop_workers(workers)
        platform.terminate()
        platform.wait(timeout=10)


def main() -> None:
    only = os.environ.get("OUTAGE_ONLY")
    if only == "breaker":
        print(run(breaker=True))
        return
    steady = run(breaker=True, outage_seconds=0)  # the rate this machine sustains, same world
    with_breaker = run(breaker=True)
    rate = COUNT / steady["recovery_seconds"]
    ratio = steady["recovery_seconds"] / with_breaker["recovery_seconds"]
    if only == "ratio":  # saved on their own, named with the count they were measured with
        figures = {
            "outage_ratio_count": COUNT,
            "outage_ratio_recovery_seconds": round(with_breaker["recovery_seconds"], 1),
            "outage_steady_seconds": round(steady["recovery_seconds"], 1),
            "outage_steady_rate_per_s": round(rate, 1),
            "outage_recovery_ratio": round(ratio, 3),
        }
        save("outage_ratio", figures)
        print(json.dumps(figures, indent=2))
        return
    without = run(breaker=False)
    figures = {
        "outage_count": COUNT,
        "outage_seconds": OUTAGE_SECONDS,
        "outage_workers": WORKERS,
        "outage_requests_during_outage": with_breaker["requests_during_outage"],
        "outage_recovery_seconds": round(with_breaker["recovery_seconds"], 1),
        "outage_requests_after_outage": with_breaker["requests_after_outage"],
        "outage_breaker_transitions": with_breaker["transitions"],
        "outage_requests_during_outage_no_breaker": without["requests_during_outage"],
        "outage_recovery_seconds_no_breaker": round(without["recovery_seconds"], 1),
        "outage_requests_after_outage_no_breaker": without["requests_after_outage"],
        # the same world with no outage: COUNT deliveries from the first request to the last applied
        "outage_steady_seconds": round(steady["recovery_seconds"], 1),
        "outage_steady_rate_per_s": round(rate, 1),
        # (COUNT / the sustained rate) / the recovery's seconds with the breaker; target >= 0.8
        "outage_recovery_ratio": round(ratio, 3),
    }
    save("outage", figures)
    print(json.dumps(figures, indent=2))


if __name__ == "__main__":
    main()
