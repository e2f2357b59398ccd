"""Bulk enforcement at size (SPEC BULK-2, BULK-3, BULK-6; issue 24 Performance), in
one run on PostgreSQL:

* ``bulk_dry_run_seconds``: `start_dry_run` of COUNT (10,000) pasted subjects
  (target <= 10 s);
* ``bulk_proposals_per_second``: `submit_batch` of those items, one proposal each
  (target >= 1,000/s), against SINGLES (300) single proposals prepared the ordinary
  way in the same run (a report taken in, a decision recorded: its workflow run
  proposes): ``bulk_single_proposals_per_second``;
* ``bulk_delivery_ratio`` (the timing): after one approval, the COUNT items delivered
  by 2 workers (as `bench/outage.py` starts them) to `bench/bulk_platform.py`, whose
  connection's ``rate_limit_per_second`` is RATE (200, set in the bench world) and
  which allows RATE requests per second (429 with ``Retry-After`` only above it; no
  injected 429s). Ratio = (COUNT / RATE) / seconds from the start of the approval to
  the last item applied (target >= 1 / 1.15 = 0.87);
* ``bulk_429_exactly_once`` (the correctness, in the same run): a second batch of
  CHECK (2,000) other subjects, approved and delivered the same way while the
  platform also answers 429 to SHARE_429 (10 %) of requests at random: true when
  every item was applied in the console and on the platform exactly once per
  ``Idempotency-Key`` (effects = distinct keys = CHECK); ``bulk_429`` keeps the
  counts (keys, effects, repeats: a key sent again after it was applied);
* ``bulk_page_ratio``: the batch page's read model (the ledger, `progress.ledger`,
  and the first keyset page of 50 items with their proposals' states) against a bare
  SELECT of the same rows through psycopg, p50 of 30 each. The batch page itself
  (``GET /bulk/<id>``) is built in parallel and not in this tree.

    python bulk.py [COUNT] [RATE] [SHARE_429] [DELIVERY_TIMEOUT_SECONDS] [SINGLES] [CHECK]

A delivery that has not ended after DELIVERY_TIMEOUT_SECONDS is reported as it stands
(``bulk_delivery_complete`` false, ``bulk_delivery_applied`` < COUNT; the ratio is then
the rate reached over RATE, what the full COUNT would give at that rate; likewise
``bulk_429.complete`` for the second batch, whose exactly-once is then false). Wall-clock figures depend on what else the machine runs:
``bulk_load_average_at_start`` and the CPU seconds of this process are kept with them.
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import time
import urllib.request

from common import BENCH_DB, BENCH_REDIS, ROOT, bench_app, free_port, save, stop_workers, wait_for_port
from delivery import settle

COUNT = int(sys.argv[1]) if len(sys.argv) > 1 else 10_000
RATE = float(sys.argv[2]) if len(sys.argv) > 2 else 200.0
SHARE_429 = float(sys.argv[3]) if len(sys.argv) > 3 else 0.10
TIMEOUT_SECONDS = float(sys.argv[4]) if len(sys.argv) > 4 else 900.0
SINGLES = int(sys.argv[5]) if len(sys.argv) > 5 else 300
CHECK = int(sys.argv[6]) if len(sys.argv) > 6 else 2_000
WORKERS = 2
PAGE = 50
READS = 30


def stats(url: str) -> dict:
    with urllib.request.urlopen(f"{url}/stats", timeout=10) as answer:
        return json.loads(answer.read())


def platform_mode(url: str, share_429: float) -> None:
    """The platform's injected share of 429s from now on, its counts started afresh."""
    request = urllib.request.Request(f"{url}/_control", data=json.dumps({"share_429": share_429}).encode(),
                                     headers={"Content-Type": "application/json"}, method="POST")
    with urllib.request.urlopen(request, timeout=10) as answer:
        answer.read()


def seed(url: str) -> dict:
    """The demo installation (human approval) on the bench platform, its connection
    at RATE requests per second, caps of max(COUNT, CHECK) items for moderators and
    reviewers."""
    from sqlalchemy import insert, select, update

    from app.demo import seed_demo
    from app.extensions import db
    from app.models import BulkCap, ConnectionVersion, Installation, Integration, OperatorUser

    seed_demo(url, slug="bench")
    installation_id = db.session.scalar(select(Installation.id))
    db.session.execute(update(ConnectionVersion).values(rate_limit_per_second=RATE))
    db.session.execute(insert(BulkCap), [
        dict(installation_id=installation_id, role=role, max_items=max(COUNT, CHECK)) for role in ("moderator", "reviewer")])
    db.session.commit()

    def operator(name: str) -> OperatorUser:
        return db.session.scalar(select(OperatorUser).where(OperatorUser.email == f"bench-{name}@example.com"))

    return {"installation_id": installation_id, "integration_id": db.session.scalar(select(Integration.id)),
            "moderator": operator("moderator"), "reviewer": operator("reviewer")}


def single_proposals(world: dict) -> float:
    """Single proposals per second, the ordinary way: intake, decision, its run's proposal."""
    from sqlalchemy import func, select

    from app.extensions import db
    from app.models import ActionProposal
    from app.services.cases.reports import intake_report, record_decision

    before = db.session.scalar(select(func.count()).select_from(ActionProposal))
    started = time.perf_counter()
    for n in range(SINGLES):
        report = intake_report({"external_id": f"s-{n}", "targets": [{"reference": f"post:s{n}", "kind": "post"}]},
                               world["integration_id"])
        record_decision(report.report_id, decision_code="remove_content", rationale="", operator=world["moderator"])
    seconds = time.perf_counter() - started
    made = db.session.scalar(select(func.count()).select_from(ActionProposal)) - before
    assert made == SINGLES, f"{made} single proposals, not {SINGLES}"
    return SINGLES / seconds


def applied_count(batch_id: str) -> int:
    from sqlalchemy import func, select

    from app.extensions import db
    from app.models import ActionProposal

    count = db.session.scalar(select(func.count()).select_from(ActionProposal).where(
        ActionProposal.bulk_batch_id == batch_id, ActionProposal.state == "applied"))
    db.session.rollback()
    return count


def read_model(batch_id: str) -> tuple[float, float]:
    """p50 ms of the page's read model (ledger + first keyset page) and of a bare
    SELECT of the same rows."""
    import psycopg
    from sqlalchemy import select

    from app.extensions import db
    from app.models import ActionProposal, BulkBatch, BulkItem
    from app.services.bulk.progress import ledger

    def model() -> None:
        batch = db.session.get(BulkBatch, batch_id)
        book = ledger(db.session, batch)
        assert book.adds_up
        rows = db.session.execute(
            select(BulkItem.position, BulkItem.subject_reference, BulkItem.skip_code, ActionProposal.state,
                   ActionProposal.delivery_attempt_count)
            .outerjoin(ActionProposal, ActionProposal.id == BulkItem.proposal_id)
            .where(BulkItem.batch_id == batch_id, BulkItem.outcome == "would_act", BulkItem.position > -1)
            .order_by(BulkItem.position).limit(PAGE)).all()
        assert len(rows) == PAGE
        db.session.rollback()
        db.session.expunge_all()

    bare_sql = [
        "SELECT p.state, p.delivery_terminal, p.delivery_attempt_count > 0, i.skip_code, count(*) FROM bulk_items i"
        " LEFT JOIN action_proposals p ON p.id = i.proposal_id WHERE i.batch_id = %(b)s AND i.outcome = 'would_act'"
        " GROUP BY 1, 2, 3, 4",
        "SELECT i.position, i.subject_reference, i.skip_code, p.state, p.delivery_attempt_count FROM bulk_items i"
        " LEFT JOIN action_proposals p ON p.id = i.proposal_id WHERE i.batch_id = %(b)s AND i.outcome = 'would_act'"
        " AND i.position > -1 ORDER BY i.position LIMIT 50",
    ]
    with psycopg.connect(BENCH_DB.replace("postgresql+psycopg://", "postgresql://")) as conn:
        def bare() -> None:
            for sql in bare_sql:
                conn.execute(sql, {"b": batch_id}).fetchall()
            conn.rollback()

        def p50(run) -> float:
            for _ in range(3):
                run()
            times = []
            for _ in range(READS):
                started = time.perf_counter()
                run()
                times.append((time.perf_counter() - started) * 1000)
            return statistics.median(times)

        return p50(model), p50(bare)


def prepare(world: dict, action, prefix: str, count: int) -> tuple[str, str, dict]:
    """Dry run and submit `count` pasted subjects ``post:{prefix}{n}``; the batch id,
    its digest and the timings."""
    from app.extensions import db
    from app.models import BulkBatch
    from app.services.bulk.dry_runs import start_dry_run
    from app.services.bulk.submission import submit_batch

    text = "\n".join(f"post:{prefix}{n}" for n in range(count))
    started, cpu = time.perf_counter(), time.process_time()
    batch_id = start_dry_run(world["moderator"], selection={"source": "list", "text": text},
                             action_key=action.key, decision_code=action.decision_code, reason="bench wave")
    timings = {"dry_run_seconds": time.perf_counter() - started, "dry_run_cpu_seconds": time.process_time() - cpu}
    batch = db.session.get(BulkBatch, batch_id)
    assert batch.counts["would_act"] == count, batch.counts
    started, cpu = time.perf_counter(), time.process_time()
    digest = submit_batch(world["moderator"], batch_id, batch.dry_run_digest)
    timings.update(submit_seconds=time.perf_counter() - started, submit_cpu_seconds=time.process_time() - cpu)
    return batch_id, digest, timings


def deliver(world: dict, batch_id: str, digest: str, count: int) -> dict:
    """Approve the batch and wait until its `count` items are applied (or the
    timeout): seconds from the approval's start, the approval's own seconds, applied."""
    from app.services.bulk.batch_approval import approve_batch

    started, cpu = time.perf_counter(), time.process_time()
    result = approve_batch(world["reviewer"], batch_id, digest)
    approve = {"approve_seconds": time.perf_counter() - started, "approve_cpu_seconds": time.process_time() - cpu}
    assert result == {"approved": count, "skipped": 0}, result
    applied, shown = 0, time.perf_counter()
    while time.perf_counter() - started < TIMEOUT_SECONDS:
        applied = applied_count(batch_id)
        if applied == count:
            break
        if time.perf_counter() - shown >= 10:
            shown = time.perf_counter()
            print(f"  {shown - started:5.1f} s: {applied} applied", flush=True)
        time.sleep(0.25)
    return {**approve, "seconds": time.perf_counter() - started, "applied": applied}


PLATFORM_KEYS = ("requests", "rate_limited", "over_rate", "injected", "applied", "repeats", "distinct_keys", "effects",
                 "max_requests_in_a_second")


def main() -> None:
    from app.extensions import db
    from app.services.bulk.actions import bulk_actions

    port = free_port()
    platform = subprocess.Popen(
        [sys.executable, str(ROOT / "bench" / "bulk_platform.py"), str(port), "0", "1", str(RATE)],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )
    wait_for_port(port)
    url = f"http://127.0.0.1:{port}"
    env = {**os.environ, "DATABASE_URL": BENCH_DB, "REDIS_URL": BENCH_REDIS, "EGRESS_ALLOW_PRIVATE": "1",
           "LOG_LEVEL": "ERROR", "INSTANCE_PATH": str(ROOT / "bench" / "out" / "worker")}
    workers: list[subprocess.Popen] = []
    figures: dict = {"bulk_count": COUNT, "bulk_rate_limit_per_second": RATE, "bulk_platform_allows_per_second": RATE,
                     "bulk_workers": WORKERS}
    try:
        app = bench_app()
        with app.app_context():
            world = seed(url)
            print(f"single proposals: {SINGLES} ...", flush=True)
            figures["bulk_single_proposals_per_second"] = round(single_proposals(world), 1)
            action = next(a for a in bulk_actions(db.session, world["installation_id"])
                          if a.decision_code == "remove_content")
            figures["bulk_load_average_at_start"] = round(os.getloadavg()[0], 1)
            batch_id, digest, timings = prepare(world, action, "b", COUNT)
            figures["bulk_dry_run_seconds"] = round(timings["dry_run_seconds"], 2)
            figures["bulk_dry_run_cpu_seconds"] = round(timings["dry_run_cpu_seconds"], 2)  # this process only
            figures["bulk_submit_seconds"] = round(timings["submit_seconds"], 2)
            figures["bulk_submit_cpu_seconds"] = round(timings["submit_cpu_seconds"], 2)
            figures["bulk_proposals_per_second"] = round(COUNT / timings["submit_seconds"], 1)
            print(f"dry run: {figures['bulk_dry_run_seconds']} s; submit: {figures['bulk_submit_seconds']} s", flush=True)
            settle()  # the planner's statistics, as autovacuum would have them (not timed)
            for n in range(WORKERS):  # long-running, with RQ's scheduler; the first runs the sweeps
                args = [sys.executable, str(ROOT / "worker.py")] + ([] if n == 0 else ["--no-cron"])
                workers.append(subprocess.Popen(args, cwd=ROOT, env=env, stdout=subprocess.DEVNULL,
                                                stderr=subprocess.DEVNULL))
            time.sleep(3)  # the workers start (not timed)
            # (a) the timing: a platform that allows RATE per second, no injected 429s
            platform_mode(url, 0.0)
            figures["bulk_load_average_at_approval"] = round(os.getloadavg()[0], 1)
            done = deliver(world, batch_id, digest, COUNT)
            seen = stats(url)
            figures["bulk_approve_seconds"] = round(done["approve_seconds"], 2)
            figures["bulk_approve_cpu_seconds"] = round(done["approve_cpu_seconds"], 2)
            figures["bulk_delivery_seconds"] = round(done["seconds"], 1)
            figures["bulk_delivery_applied"] = done["applied"]
            figures["bulk_delivery_complete"] = done["applied"] == COUNT
            # (COUNT / RATE) / seconds when all were applied; else the same at the rate reached
            figures["bulk_delivery_ratio"] = round((done["applied"] / RATE) / done["seconds"], 3)
            figures["bulk_platform"] = {k: seen[k] for k in PLATFORM_KEYS}
            print(f"delivery: {done['applied']} applied in {done['seconds']:.1f} s; platform {figures['bulk_platform']}",
                  flush=True)
            # once per key on the platform; when stopped early, items sent whose outcome
            # was not yet committed count on the platform's side only
            assert seen["effects"] == done["applied"] if figures["bulk_delivery_complete"] else seen["effects"] >= done["applied"], seen
            # (b) the correctness: CHECK other subjects, 429s injected on SHARE_429 of requests
            check_id, check_digest, _ = prepare(world, action, "c", CHECK)
            settle()
            platform_mode(url, SHARE_429)
            done = deliver(world, check_id, check_digest, CHECK)
            seen = stats(url)
            once = done["applied"] == CHECK and seen["effects"] == seen["distinct_keys"] == CHECK
            figures["bulk_429_exactly_once"] = once
            figures["bulk_429"] = {"items": CHECK, "share_429": SHARE_429, "complete": done["applied"] == CHECK,
                                   "console_applied": done["applied"], "seconds": round(done["seconds"], 1),
                                   "keys": seen["distinct_keys"], **{k: seen[k] for k in PLATFORM_KEYS}}
            print(f"429 check: {figures['bulk_429']}", flush=True)
            stop_workers(workers)  # the page's reads are timed on a quiet machine
            model_ms, bare_ms = read_model(batch_id)
            figures.update(bulk_page_model_p50_ms=round(model_ms, 2), bulk_page_bare_p50_ms=round(bare_ms, 2),
                           bulk_page_ratio=round(model_ms / bare_ms, 2))
    finally:
        stop_workers(workers)
        platform.terminate()
        platform.wait(timeout=10)
    if os.environ.get("BULK_SAVE", "1") != "0":  # BULK_SAVE=0: a trial run, not written
        save("bulk", figures)
    print(json.dumps(figures, indent=2))


if __name__ == "__main__":
    main()
