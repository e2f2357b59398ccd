"""Running it for real: gunicorn with two web processes and two worker processes
share one database and one Redis; the story runs over HTTP; /metrics counts the
delivery once; the JSON logs of the delivery can be followed by its operation id
across web and worker, and hold no secret."""

from __future__ import annotations

import json
import os
import re
import socket
import subprocess
import sys
from pathlib import Path

import pytest
import requests

from app.demo import DEMO_PASSWORD

from ..builders import http_sign_in, proposal_of, reload
from ..processes import eventually

ROOT = Path(__file__).resolve().parents[2]
BIN = Path(sys.executable).parent


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture
def stack(app, world, tmp_path):
    port = free_port()
    env = {
        **os.environ,
        "DATABASE_URL": app.config["SQLALCHEMY_DATABASE_URI"],
        "REDIS_URL": app.config["REDIS_URL"],
        "EGRESS_ALLOW_PRIVATE": "1",
        "INSTANCE_PATH": str(tmp_path / "instance"),
        "LOG_FORMAT": "json",
        "SECRET_KEY": "test-secret-key-" + "x" * 32,
        "SECRETS_KEY": app.config["SECRETS_KEY"],  # the test's sealed columns (a TOTP seed, OPS-2/OPS-3) open there too
        "PROMETHEUS_MULTIPROC_DIR": str(tmp_path / "metrics"),
        "WEB_CONCURRENCY": "2",
        "LOG_LEVEL": "INFO",
    }
    (tmp_path / "metrics").mkdir()
    logs = {name: open(tmp_path / f"{name}.log", "w") for name in ("web", "worker1", "worker2")}  # noqa: SIM115 (closed at teardown)
    processes = [
        subprocess.Popen(
            [str(BIN / "gunicorn"), "-c", "gunicorn.conf.py", "--bind", f"127.0.0.1:{port}", "app:create_app()"],
            env=env,
            cwd=ROOT,
            stdout=logs["web"],
            stderr=subprocess.STDOUT,
        )
    ]
    for name in ("worker1", "worker2"):
        processes.append(
            subprocess.Popen(
                [sys.executable, "worker.py", "--no-cron"],
                env=env,
                cwd=ROOT,
                stdout=logs[name],
                stderr=subprocess.STDOUT,
            )
        )
    base = f"http://127.0.0.1:{port}"

    def ready():
        try:
            # the first answer waits for a web process to boot the app (slow on a busy machine)
            return requests.get(f"{base}/readyz", timeout=10).status_code == 200
        except (requests.ConnectionError, requests.Timeout):
            return False

    try:
        eventually(ready, timeout=60)
        yield base, tmp_path
    finally:  # also when the stack never became ready: no process outlives the test
        for process in processes:
            process.terminate()
        for process in processes:
            try:
                process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                process.kill()
        for handle in logs.values():
            handle.close()


def csrf(html: str) -> str:
    return re.search(r'name="csrf_token" (?:type="hidden" )?value="([^"]+)"', html).group(1)


def sign_in(base: str, email: str) -> tuple[requests.Session, str]:
    session = requests.Session()
    response = http_sign_in(session, base, email)  # the second step too, for reviewers and admins (OPS-2)
    assert response.status_code == 303
    return session, csrf(session.get(f"{base}/proposals").text)


def json_lines(path: Path) -> list[dict]:
    lines = []
    for line in path.read_text().splitlines():
        try:
            lines.append(json.loads(line))
        except ValueError:
            continue  # gunicorn's own start-up lines
    return lines


def test_story_under_gunicorn_with_two_workers(stack, world, platform):
    base, folder = stack
    report_id = world.report_ids[0]
    moderator, token = sign_in(base, "moderator@example.com")
    response = moderator.post(
        f"{base}/reports/{report_id}/decisions",
        data={"decision_code": "remove_content", "csrf_token": token},
        allow_redirects=False,
    )
    assert response.status_code == 303
    proposal = proposal_of(report_id)
    reviewer, token = sign_in(base, "reviewer@example.com")
    response = reviewer.post(
        f"{base}/proposals/{proposal.id}/decision",
        allow_redirects=False,
        data={
            "decision": "approved",
            "payload_digest": proposal.payload_digest,
            "idempotency_key": "k1",
            "csrf_token": token,
        },
    )
    assert response.status_code == 303
    eventually(lambda: reload(proposal).state == "applied")
    assert platform.state.content["post:1001"] == "removed" and len(platform.state.effects) == 1

    metrics = requests.get(f"{base}/metrics", timeout=5).text
    applied = re.findall(r'^console_deliveries_total\{error_code="",outcome="applied"\} (\S+)$', metrics, re.M)
    assert applied == ["1.0"], metrics[:3000]
    assert 'console_proposals{state="applied"} 1.0' in metrics

    # Follow the delivery by its operation id across web and worker logs.
    lines = [line for name in ("web", "worker1", "worker2") for line in json_lines(folder / f"{name}.log")]
    mine = [line for line in lines if line.get("operation_id") == proposal.operation_id]
    assert {line["role"] for line in mine} == {"web", "worker"}, mine
    messages = [line["message"] for line in mine]
    assert "action approved" in messages and "delivery attempt claimed" in messages
    finished = [line for line in mine if line["message"] == "delivery attempt finished"]
    assert [(line["outcome"], line["attempt"], line["cycle"]) for line in finished] == [("applied", 1, 1)]
    requests_logged = [line for line in lines if line.get("message") == "request" and line.get("status") == 303]
    assert requests_logged and all(line.get("request_id") for line in requests_logged)
    everything = "\n".join((folder / f"{name}.log").read_text() for name in ("web", "worker1", "worker2"))
    for secret in (world.console_token, world.signing_secret, world.platform_token, DEMO_PASSWORD):
        assert secret not in everything
