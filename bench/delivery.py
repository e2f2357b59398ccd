"""Delivery throughput: 2,000 bounded-automation proposals delivered by 2 workers to
the demo platform, in the same run against two baselines of 2,000 RQ jobs each that
POST the same body to the same platform:

* plain: the POST and nothing else (`baseline_jobs.post`);
* minimal correct delivery: claim one row with a conditional UPDATE and commit,
  POST, insert the attempt, write the result and commit (`minimal_jobs`).

`delivery_ratio` is the product's rate over the plain jobs', `delivery_ratio_minimal`
over the minimal delivery's. Also the workers' peak RSS."""

from __future__ import annotations

import json
import sys
import time

from common import BENCH_DB, BENCH_REDIS, ROOT, bench_app, demo_platform, free_port, run_workers, save

COUNT = int(sys.argv[1]) if len(sys.argv) > 1 else 2000
WORKERS = 2


def prepare(app, platform_url: str) -> list[str]:
    """A bounded-automation world with COUNT queued proposals (their jobs enqueued)."""
    from sqlalchemy import select

    from app.demo import seed_demo
    from app.extensions import db
    from app.models import ActionProposal, Installation, Integration, OperatorUser
    from app.services.cases.reports import intake_report, record_decision

    with app.app_context():
        seed_demo(platform_url, approval_mode="bounded_auto", slug="bench")
        integration_id = db.session.scalar(select(Integration.id))
        moderator = db.session.scalar(select(OperatorUser).where(OperatorUser.email == "bench-moderator@example.com"))
        assert db.session.scalar(select(Installation.id))
        for n in range(COUNT):
            report = intake_report(
                {"external_id": f"b-{n}", "targets": [{"reference": f"post:b{n}", "kind": "post"}]}, integration_id
            )
            record_decision(report.report_id, decision_code="remove_content", rationale="", operator=moderator)
        queued = db.session.scalar(select(ActionProposal.id).where(ActionProposal.state != "queued").limit(1))
        assert queued is None, "a proposal is not queued"
        return [row for row in db.session.scalars(select(ActionProposal.id))]


def all_applied(app) -> int:
    from sqlalchemy import func, select

    from app.extensions import db
    from app.models import ActionProposal

    with app.app_context():
        return db.session.scalar(select(func.count()).where(ActionProposal.state == "applied"))


def rq_worker(queue: str) -> list[str]:
    return [
        sys.executable,
        "-m",
        "rq.cli",
        "worker",
        "--burst",
        "--url",
        BENCH_REDIS,
        "--path",
        str(ROOT / "bench"),
        "--worker-class",
        "rq.SimpleWorker",
        "-q",
        queue,
    ]


def run_minimal(platform_url: str, body: bytes) -> float:
    """COUNT minimal correct deliveries by WORKERS RQ workers; the seconds they took."""
    import psycopg
    import redis
    from minimal_jobs import SCHEMA, deliver_minimal
    from rq import Queue

    with psycopg.connect(BENCH_DB.replace("postgresql+psycopg://", "postgresql://"), autocommit=True) as conn:
        conn.execute(SCHEMA)
        with conn.cursor() as cursor:
            cursor.executemany("INSERT INTO minimal_deliveries (id) VALUES (%s)", [(f"m-{n}",) for n in range(COUNT)])
    queue = Queue("minimal", connection=redis.Redis.from_url(BENCH_REDIS))
    for n in range(COUNT):
        queue.enqueue(deliver_minimal, f"m-{n}", f"{platform_url}/actions/takedown", body, result_ttl=0)
    seconds, _ = run_workers([rq_worker("minimal")] * WORKERS, {"MINIMAL_DATABASE_URL": BENCH_DB})
    with psycopg.connect(BENCH_DB.replace("postgresql+psycopg://", "postgresql://")) as conn:
        done = conn.execute("SELECT count(*) FROM minimal_deliveries WHERE state = 'applied'").fetchone()[0]
    assert done == COUNT, f"only {done} of {COUNT} minimal deliveries applied"
    return seconds


def main() -> None:
    port = free_port()
    env = {
        "DATABASE_URL": BENCH_DB,
        "REDIS_URL": BENCH_REDIS,
        "EGRESS_ALLOW_PRIVATE": "1",
        "LOG_LEVEL": "WARNING",
        "INSTANCE_PATH": str(ROOT / "bench" / "out" / "worker"),
    }
    with demo_platform(port) as platform_url:
        app = bench_app()
        print(f"preparing {COUNT} proposals ...", flush=True)
        started = time.perf_counter()
        prepare(app, platform_url)
        print(f"  prepared in {time.perf_counter() - started:.1f} s", flush=True)
        worker = [sys.executable, str(ROOT / "worker.py"), "--burst"]
        product_seconds, product_rss = run_workers([worker] * WORKERS, env)
        applied = all_applied(app)
        assert applied == COUNT, f"only {applied} of {COUNT} applied"

        import redis
        from baseline_jobs import post
        from rq import Queue

        body = json.dumps(
            {
                "schema_version": "1",
                "action_id": "x" * 60,
                "operation_id": "y" * 90,
                "payload_digest": "sha256:" + "0" * 64,
                "action_code": "takedown",
                "target": {"reference": "post:1", "kind": "post"},
                "payload": {"reason_code": "remove_content", "report_reference": "R-1"},
                "preconditions": {},
                "workflow_version_id": "wfv",
                "policy_version_id": None,
                "expires_at": "2026-12-01T00:00:00.000Z",
            }
        ).encode()
        minimal_seconds = run_minimal(platform_url, body)
        queue = Queue("baseline", connection=redis.Redis.from_url(BENCH_REDIS))
        for n in range(COUNT):
            queue.enqueue(post, f"{platform_url}/actions/takedown", body, f"baseline-{n}", result_ttl=0)
        baseline_seconds, baseline_rss = run_workers([rq_worker("baseline")] * WORKERS, {})
    product_rate, baseline_rate = COUNT / product_seconds, COUNT / baseline_seconds
    minimal_rate = COUNT / minimal_seconds
    figures = {
        "delivery_count": COUNT,
        "delivery_workers": WORKERS,
        "delivery_rate_per_s": round(product_rate, 1),
        "baseline_rate_per_s": round(baseline_rate, 1),
        "minimal_rate_per_s": round(minimal_rate, 1),
        "delivery_ratio": round(product_rate / baseline_rate, 3),
        "delivery_ratio_minimal": round(product_rate / minimal_rate, 3),
        "worker_peak_rss_mb": round(product_rss, 1),
        "baseline_worker_peak_rss_mb": round(baseline_rss, 1),
    }
    save("delivery", figures)
    print(json.dumps(figures, indent=2))


if __name__ == "__main__":
    main()
