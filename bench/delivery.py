"""Delivery throughput: 2,000 bounded-automation proposals delivered by 2 workers to
the demo platform, against two baselines of 2,000 RQ jobs each that POST the same
body to the same platform:

* plain: the POST and nothing else (`baseline_jobs.post`);
* minimal correct delivery: claim one row with a conditional UPDATE and commit,
  POST, insert the attempt, write the result and commit (`minimal_jobs`).

The three run in ROUNDS rounds (3; ``python delivery.py COUNT ROUNDS``), in turn and
in a rotating order, and each rate is the median of its rounds: on this machine one
run of the same jobs measured anywhere from 234 to 362 per second from one minute to
the next, so a ratio of two single runs said more about the minute than the code.
`delivery_ratio` is the product's median rate over the plain jobs',
`delivery_ratio_minimal` over the minimal delivery's; every round's rates and its own
ratios are kept too. Each timed run starts after a CHECKPOINT and VACUUM ANALYZE
(`settle`), and reports its CPU milliseconds per delivery: the workers, the platform and
the rest of the machine (PostgreSQL, Redis). Also the workers' peak RSS."""

from __future__ import annotations

import json
import statistics
import sys
import time

from common import (
    BENCH_DB,
    BENCH_REDIS,
    ROOT,
    CpuUse,
    bench_app,
    demo_platform,
    free_port,
    platform_pid,
    run_workers,
    save,
)

COUNT = 2000
ROUNDS = 3
WORKERS = 2


def prepare(app, platform_url: str, round_number: int = 0) -> list[str]:
    """A bounded-automation world (seeded in round 0) with COUNT more queued
    proposals, their jobs enqueued; their ids."""
    from sqlalchemy import select

    from app.demo import seed_demo
    from app.extensions import db
    from app.models import ActionProposal, Installation, Integration, OperatorUser
    from app.services.cases.reports import intake_report, record_decision

    with app.app_context():
        if round_number == 0:
            seed_demo(platform_url, approval_mode="bounded_auto", slug="bench")
        integration_id = db.session.scalar(select(Integration.id))
        moderator = db.session.scalar(select(OperatorUser).where(OperatorUser.email == "bench-moderator@example.com"))
        assert db.session.scalar(select(Installation.id))
        for n in range(COUNT):
            reference = f"{round_number}-{n}"
            report = intake_report(
                {"external_id": f"b-{reference}", "targets": [{"reference": f"post:b{reference}", "kind": "post"}]},
                integration_id,
            )
            record_decision(report.report_id, decision_code="remove_content", rationale="", operator=moderator)
        queued = select(ActionProposal.id).where(ActionProposal.state == "queued")
        ids = list(db.session.scalars(queued))
        assert len(ids) == COUNT, f"{len(ids)} proposals queued, not {COUNT}"
        return ids


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


def run_minimal(platform_url: str, body: bytes, round_number: int, timed) -> None:
    """COUNT minimal correct deliveries by WORKERS RQ workers, run by ``timed(run)``."""
    import psycopg
    import redis
    from minimal_jobs import SCHEMA, deliver_minimal
    from rq import Queue

    ids = [f"m-{round_number}-{n}" for n in range(COUNT)]
    with psycopg.connect(BENCH_DB.replace("postgresql+psycopg://", "postgresql://"), autocommit=True) as conn:
        conn.execute(SCHEMA)
        with conn.cursor() as cursor:
            cursor.executemany("INSERT INTO minimal_deliveries (id) VALUES (%s)", [(i,) for i in ids])
    queue = Queue("minimal", connection=redis.Redis.from_url(BENCH_REDIS))
    for delivery_id in ids:
        queue.enqueue(deliver_minimal, delivery_id, f"{platform_url}/actions/takedown", body, result_ttl=0)
    timed(lambda: run_workers([rq_worker("minimal")] * WORKERS, {"MINIMAL_DATABASE_URL": BENCH_DB}))
    with psycopg.connect(BENCH_DB.replace("postgresql+psycopg://", "postgresql://")) as conn:
        done = conn.execute("SELECT count(*) FROM minimal_deliveries WHERE state = 'applied'").fetchone()[0]
    assert done == COUNT * (round_number + 1), f"only {done} minimal deliveries applied"


def enqueue_plain(platform_url: str, body: bytes, round_number: int) -> None:
    """COUNT plain POST jobs on the ``baseline`` queue."""
    import redis
    from baseline_jobs import post
    from rq import Queue

    queue = Queue("baseline", connection=redis.Redis.from_url(BENCH_REDIS))
    for n in range(COUNT):
        queue.enqueue(post, f"{platform_url}/actions/takedown", body, f"baseline-{round_number}-{n}", result_ttl=0)


BODY = json.dumps(
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


def settle() -> None:
    """Before each timed run: write out what the preparation left dirty and update
    the planner's statistics, so no run pays for the writes before it (whichever ran
    first after `prepare` used to meet its checkpoint and autovacuum)."""
    import psycopg

    with psycopg.connect(BENCH_DB.replace("postgresql+psycopg://", "postgresql://"), autocommit=True) as conn:
        conn.execute("CHECKPOINT")
        conn.execute("VACUUM ANALYZE")


def main() -> None:
    port = free_port()
    env = {
        "DATABASE_URL": BENCH_DB,
        "REDIS_URL": BENCH_REDIS,
        "EGRESS_ALLOW_PRIVATE": "1",
        "LOG_LEVEL": "WARNING",
        "INSTANCE_PATH": str(ROOT / "bench" / "out" / "worker"),
    }
    rates: dict[str, list[float]] = {"product": [], "minimal": [], "plain": []}
    cpu: dict[str, list[dict[str, float]]] = {"product": [], "minimal": [], "plain": []}
    rss = {"product": 0.0, "plain": 0.0}
    with demo_platform(port) as platform_url:
        app = bench_app()
        platform = platform_pid()
        worker = [sys.executable, str(ROOT / "worker.py"), "--burst"]

        def timed(name: str, run) -> float:
            settle()
            with CpuUse(platform) as use:
                seconds, peak = run()
            rates[name].append(COUNT / seconds)
            cpu[name].append({k: v * 1000 / COUNT for k, v in use.split.items()})
            rss[name] = max(rss.get(name, 0.0), peak)
            return seconds

        def product(round_number: int) -> None:
            timed("product", lambda: run_workers([worker] * WORKERS, env))
            applied = all_applied(app)
            assert applied == COUNT * (round_number + 1), f"only {applied} applied"

        def minimal(round_number: int) -> None:
            run_minimal(platform_url, BODY, round_number, lambda run: timed("minimal", run))

        def plain(round_number: int) -> None:
            enqueue_plain(platform_url, BODY, round_number)
            timed("plain", lambda: run_workers([rq_worker("baseline")] * WORKERS, {}))

        order = [product, minimal, plain]
        for round_number in range(ROUNDS):
            started = time.perf_counter()
            prepare(app, platform_url, round_number)  # not timed: the proposals wait queued
            print(f"round {round_number + 1}: {COUNT} proposals prepared in {time.perf_counter() - started:.1f} s")
            for run in order[round_number % 3 :] + order[: round_number % 3]:  # a rotating order
                run(round_number)
            print("  rates so far:", {k: [round(r, 1) for r in v] for k, v in rates.items()}, flush=True)
    median = {k: statistics.median(v) for k, v in rates.items()}
    cpu_ms = {k: {part: round(statistics.median(r[part] for r in v), 2) for part in v[0]} for k, v in cpu.items()}
    figures = {
        "delivery_count": COUNT,
        "delivery_rounds": ROUNDS,
        "delivery_workers": WORKERS,
        "delivery_rate_per_s": round(median["product"], 1),
        "baseline_rate_per_s": round(median["plain"], 1),
        "minimal_rate_per_s": round(median["minimal"], 1),
        "delivery_ratio": round(median["product"] / median["plain"], 3),
        "delivery_ratio_minimal": round(median["product"] / median["minimal"], 3),
        "delivery_round_rates_per_s": {k: [round(r, 1) for r in v] for k, v in rates.items()},
        # each round's own ratios: the product against the baselines of the same round
        "delivery_round_ratios": {
            base: [round(p / b, 3) for p, b in zip(rates["product"], rates[base], strict=True)]
            for base in ("plain", "minimal")
        },
        # CPU milliseconds per delivery (medians of the rounds): the worker processes,
        # the platform, and the rest of the machine (PostgreSQL, Redis)
        "delivery_cpu_ms_per_delivery": cpu_ms,
        "worker_peak_rss_mb": round(rss["product"], 1),
        "baseline_worker_peak_rss_mb": round(rss["plain"], 1),
    }
    save("delivery", figures)
    print(json.dumps(figures, indent=2))


if __name__ == "__main__":
    COUNT = int(sys.argv[1]) if len(sys.argv) > 1 else COUNT
    ROUNDS = int(sys.argv[2]) if len(sys.argv) > 2 else ROUNDS
    main()
