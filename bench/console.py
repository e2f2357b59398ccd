"""Console latency under gunicorn: the proposal page with 50 attempts and 200 audit
rows, the approval tasks page, the queue with REPORTS reports (1,000,000 by default)
and the proposals list, each against a bare route rendering a template of the same
size, served the same way in the same run. Sequential requests, each page's request
alternating with its bare twin's (so a loaded machine slows both alike); p50 and p95.

    python console.py [REQUESTS] [REPORTS]

The figures go into bench/results.json only at REPORTS >= 1,000,000 (the target's size).

SQLite file bench/out/console.sqlite by default; BENCH_CONSOLE_DATABASE_URL
chooses another database (PostgreSQL: its public schema is dropped first)."""

from __future__ import annotations

import json
import os
import re
import statistics
import subprocess
import sys
import time

import requests
import psutil
from common import BENCH_REDIS, ROOT, bench_app, free_port, save, sign_in, wait_for_port
from queue_seed import seed_queue

REQUESTS = int(sys.argv[1]) if len(sys.argv) > 1 else 300
REPORTS = int(sys.argv[2]) if len(sys.argv) > 2 else 1_000_000
SUBJECTS = max(1, REPORTS // 10)  # 100,000 subjects at a million reports
DB = os.environ.get("BENCH_CONSOLE_DATABASE_URL", f"sqlite:///{ROOT / 'bench' / 'out' / 'console.sqlite'}")


def seed(app) -> str:
    """A proposal with 50 attempts and 200 audit rows, among 120 proposals."""
    from sqlalchemy import select

    from app.demo import seed_demo
    from app.domain.clock import utcnow
    from app.extensions import db
    from app.models import (
        ActionProposal,
        ConnectionAttempt,
        ConnectionVersion,
        Integration,
        OperatorUser,
        Queue,
    )
    from app.services.cases.reports import intake_report, record_decision
    from app.services.uow import Actor, unit_of_work

    with app.app_context():
        seed_demo("http://127.0.0.1:9", slug="bench")
        integration_id = db.session.scalar(select(Integration.id))
        moderator = db.session.scalar(select(OperatorUser).where(OperatorUser.email == "bench-moderator@example.com"))
        for n in range(120):
            # a post with its posted time and a rationale: the demo has DSA on, and a statement of
            # reasons needs both (DSA-2)
            target = {"reference": f"post:c{n}", "kind": "post", "evidence": {"posted_at": "2026-11-01T09:00:00Z"}}
            report = intake_report({"external_id": f"c-{n}", "targets": [target]}, integration_id)
            record_decision(report.report_id, decision_code="remove_content", rationale="Spam links, seen on review.",
                            operator=moderator)
        proposal = db.session.scalar(select(ActionProposal).order_by(ActionProposal.created_at))
        connection_id = db.session.scalar(select(ConnectionVersion.id))
        with unit_of_work() as uow:
            for i in range(50):
                uow.session.add(
                    ConnectionAttempt(
                        installation_id=proposal.installation_id,
                        proposal_id=proposal.id,
                        attempt_number=1000 + i,
                        delivery_cycle=1 + i // 8,
                        connection_version_id=connection_id,
                        method="POST",
                        url="http://127.0.0.1:9/actions/takedown",
                        request_digest="sha256:" + "a" * 64,
                        response_status=503,
                        response_class="server_error",
                        error_code="platform_server_error",
                        finished_at=utcnow(),
                        duration_ms=12,
                    )
                )
            audits = 200 - 2  # the proposal already has its proposal and approval-less history
            for i in range(audits):
                uow.audit(
                    proposal.installation_id,
                    f"bench-audit:{i}",
                    "action.delivery_failed",
                    Actor.system(),
                    "action_proposal",
                    proposal.id,
                    {"attempt_number": i, "error_code": "x"},
                )
            uow.commit()
        queue_id = db.session.scalar(select(Queue.id).where(Queue.installation_id == proposal.installation_id))
        proposal_id, installation_id = proposal.id, proposal.installation_id
        started = time.perf_counter()
        seed_queue(installation_id, integration_id, queue_id, REPORTS, SUBJECTS)
        print(f"seeded {REPORTS} reports about {SUBJECTS} subjects in {time.perf_counter() - started:.0f} s")
        return proposal_id


def gunicorn(app_path: str, port: int, env: dict) -> subprocess.Popen:
    process = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "gunicorn",
            "-c",
            "gunicorn.conf.py",
            "--bind",
            f"127.0.0.1:{port}",
            "--chdir",
            str(ROOT),
            app_path,
        ],
        cwd=ROOT,
        env={**os.environ, **env},
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    wait_for_port(port)
    return process


def timed(session: requests.Session, url: str) -> tuple[float, int]:
    started = time.perf_counter()
    response = session.get(url)
    elapsed = (time.perf_counter() - started) * 1000
    assert response.status_code == 200, (url, response.status_code)
    return elapsed, len(response.content)


def p95(times: list[float]) -> float:
    return statistics.quantiles(times, n=20, method="inclusive")[18]


def against_bare(session, url: str, bare_session, bare_base: str) -> dict[str, float]:
    """The page and the bare route of its size, requests alternating: p50 and p95 of each (ms)."""
    for _ in range(10):  # warm up every gunicorn process
        _, size = timed(session, url)
        timed(bare_session, f"{bare_base}/bare/{size}")
    page, bare = [], []
    for _ in range(REQUESTS):
        elapsed, size = timed(session, url)
        page.append(elapsed)
        bare.append(timed(bare_session, f"{bare_base}/bare/{size}")[0])
    return {
        "p50_ms": statistics.median(page),
        "p95_ms": p95(page),
        "bare_p50_ms": statistics.median(bare),
        "bare_p95_ms": p95(bare),
        "page_bytes": size,
    }


def main() -> None:
    app = bench_app(DB)
    proposal_id = seed(app)
    env = {
        "DATABASE_URL": DB,
        "REDIS_URL": BENCH_REDIS,
        "LOG_LEVEL": "WARNING",
        "WEB_CONCURRENCY": "2",
        "SECRET_KEY": "bench-" + "k" * 40,
        "INSTANCE_PATH": str(ROOT / "bench" / "out" / "web"),
        "LOGIN_RATE_LIMIT": "1000 per minute",
    }
    console_port, bare_port = free_port(), free_port()
    console = gunicorn("app:create_app()", console_port, env)
    bare = gunicorn("bench.bare_app:create_app()", bare_port, {"PYTHONPATH": str(ROOT)})
    load_before = os.getloadavg()
    psutil.cpu_percent()
    try:
        session = requests.Session()
        base = f"http://127.0.0.1:{console_port}"
        sign_in(
            lambda path: session.get(base + path).text,
            lambda path, data: session.post(base + path, data=data, allow_redirects=False).headers.get("Location", ""),
            "bench-reviewer@example.com",
        )
        pages = {
            "detail": f"/proposals/{proposal_id}",
            "task": "/tasks",
            "queue": "/queue",
            "list": "/proposals",
            # the floor: a signed-in page with nothing in it (session, user, navigation, CSRF)
            "floor": "/appeals",
        }
        bare_session, bare_base = requests.Session(), f"http://127.0.0.1:{bare_port}"
        measured = {name: against_bare(session, base + path, bare_session, bare_base) for name, path in pages.items()}
    finally:
        for process in (console, bare):
            process.terminate()
            process.wait(timeout=30)
    figures = {"latency_requests": REQUESTS, "queue_reports": REPORTS, "queue_subjects": SUBJECTS}
    for name, m in measured.items():
        figures.update(
            {
                f"{name}_p50_ms": round(m["p50_ms"], 2),
                f"{name}_p95_ms": round(m["p95_ms"], 2),
                f"{name}_bare_p50_ms": round(m["bare_p50_ms"], 2),
                f"{name}_bare_p95_ms": round(m["bare_p95_ms"], 2),
                f"{name}_p50_ratio": round(m["p50_ms"] / m["bare_p50_ms"], 2),
                f"{name}_p95_ratio": round(m["p95_ms"] / m["bare_p95_ms"], 2),
                f"{name}_page_bytes": m["page_bytes"],
            }
        )
    # how loaded the shared machine was while measuring (the ratios are against the same run)
    figures["console_load_average"] = [round(x, 2) for x in (*load_before, *os.getloadavg())]
    figures["console_cpu_busy_percent"] = round(psutil.cpu_percent(), 1)
    figures["console_database"] = DB.split(":", 1)[0]
    if REPORTS >= 1_000_000:  # the target's size; a quicker run is printed, not recorded
        save("console", figures)
    else:
        print(f"{REPORTS:,} reports: not saved to bench/results.json (the target is measured at 1,000,000)")
    print(json.dumps(figures, indent=2))


if __name__ == "__main__":
    main()
