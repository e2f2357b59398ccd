"""Console latency under gunicorn: the proposal page with 50 attempts and 200 audit
rows, and the proposals list, against a bare route rendering a template of the same
size, served the same way in the same run. p50 of sequential requests."""

from __future__ import annotations

import json
import os
import re
import statistics
import subprocess
import sys
import time

import requests
from common import BENCH_DB, BENCH_REDIS, ROOT, bench_app, free_port, save, wait_for_port

REQUESTS = int(sys.argv[1]) if len(sys.argv) > 1 else 300


def seed(app) -> str:
    """A proposal with 50 attempts and 200 audit rows, among 120 proposals."""
    from sqlalchemy import select

    from app.demo import seed_demo
    from app.domain.clock import utcnow
    from app.extensions import db
    from app.models import ActionProposal, ConnectionAttempt, ConnectionVersion, Integration, OperatorUser
    from app.services.cases.reports import intake_report, record_decision
    from app.services.uow import Actor, unit_of_work

    with app.app_context():
        seed_demo("http://127.0.0.1:9", slug="bench")
        integration_id = db.session.scalar(select(Integration.id))
        moderator = db.session.scalar(select(OperatorUser).where(OperatorUser.email == "bench-moderator@example.com"))
        for n in range(120):
            report = intake_report({"external_id": f"c-{n}", "targets": [{"reference": f"post:c{n}"}]}, integration_id)
            record_decision(report.report_id, decision_code="remove_content", rationale="", operator=moderator)
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
        return proposal.id


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


def p50(session: requests.Session, url: str) -> tuple[float, int]:
    times, size = [], 0
    for _ in range(10):  # warm up every gunicorn process
        session.get(url)
    for _ in range(REQUESTS):
        started = time.perf_counter()
        response = session.get(url)
        times.append((time.perf_counter() - started) * 1000)
        assert response.status_code == 200, (url, response.status_code)
        size = len(response.content)
    return statistics.median(times), size


def main() -> None:
    app = bench_app()
    proposal_id = seed(app)
    env = {
        "DATABASE_URL": BENCH_DB,
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
    try:
        session = requests.Session()
        base = f"http://127.0.0.1:{console_port}"
        token = re.search(r'value="([^"]+)"', session.get(f"{base}/login").text).group(1)
        session.post(
            f"{base}/login",
            data={"email": "bench-reviewer@example.com", "password": "demo-password-1", "csrf_token": token},
        )
        detail_ms, detail_size = p50(session, f"{base}/proposals/{proposal_id}")
        list_ms, list_size = p50(session, f"{base}/proposals")
        bare_session = requests.Session()
        bare_detail_ms, _ = p50(bare_session, f"http://127.0.0.1:{bare_port}/bare/{detail_size}")
        bare_list_ms, _ = p50(bare_session, f"http://127.0.0.1:{bare_port}/bare/{list_size}")
    finally:
        for process in (console, bare):
            process.terminate()
            process.wait(timeout=30)
    figures = {
        "detail_p50_ms": round(detail_ms, 2),
        "detail_bare_p50_ms": round(bare_detail_ms, 2),
        "detail_p50_ratio": round(detail_ms / bare_detail_ms, 2),
        "detail_page_bytes": detail_size,
        "list_p50_ms": round(list_ms, 2),
        "list_bare_p50_ms": round(bare_list_ms, 2),
        "list_p50_ratio": round(list_ms / bare_list_ms, 2),
        "list_page_bytes": list_size,
        "latency_requests": REQUESTS,
    }
    save("console", figures)
    print(json.dumps(figures, indent=2))


if __name__ == "__main__":
    main()
