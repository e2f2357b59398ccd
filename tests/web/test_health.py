"""Liveness, readiness and metrics endpoints (issue: running it for real)."""

from __future__ import annotations

import os
import shutil
from urllib.parse import urlsplit

import pytest
from sqlalchemy import text

from app import create_app
from app.extensions import db

from ..conftest import DATABASE_URL
from ..proxy import Proxy


def test_healthz_is_always_ok(client):
    response = client.get("/healthz")
    assert response.status_code == 200 and response.get_json() == {"status": "ok"}


def test_readyz_reports_ready(client):
    response = client.get("/readyz")
    assert response.status_code == 200
    assert response.get_json() == {"status": "ready", "checks": {"database": "ok", "migrations": "ok", "redis": "ok"}}


def _redis_target(url: str):
    parts = urlsplit(url)
    return parts.path if parts.scheme == "unix" else (parts.hostname, parts.port or 6379)


def _redis_db(url: str) -> str:
    parts = urlsplit(url)
    return "0" if parts.scheme == "unix" else parts.path.strip("/") or "0"


@pytest.fixture
def proxied(app, tmp_path):
    """A second app whose Redis (and PostgreSQL) go through proxies a test can cut."""
    redis_proxy = Proxy(_redis_target(app.config["REDIS_URL"]))
    database_url = app.config["SQLALCHEMY_DATABASE_URI"]
    db_proxy = None
    if DATABASE_URL:
        parts = urlsplit(database_url)
        db_proxy = Proxy((parts.hostname, parts.port or 5432))
        database_url = database_url.replace(f"{parts.hostname}:{parts.port or 5432}", f"127.0.0.1:{db_proxy.port}")
    other = create_app(
        {
            "TESTING": True,
            "CONFIGURE_LOGGING": False,
            "SQLALCHEMY_DATABASE_URI": database_url,
            "REDIS_URL": f"redis://127.0.0.1:{redis_proxy.port}/{_redis_db(app.config['REDIS_URL'])}",
            "INSTANCE_PATH": str(tmp_path / "proxied"),
        }
    )
    yield other, redis_proxy, db_proxy
    redis_proxy.stop()
    if db_proxy:
        db_proxy.stop()
    with other.app_context():
        db.engine.dispose()


def ready(app):
    with app.app_context():
        response = app.test_client().get("/readyz")
        db.session.remove()
    return response.status_code, response.get_json()["checks"]


def test_readyz_503_while_redis_is_down_and_200_after(proxied):
    app, redis_proxy, _ = proxied
    assert ready(app)[0] == 200
    redis_proxy.stop()
    with app.app_context():
        app.extensions["redis_client"].connection_pool.disconnect()
    status, checks = ready(app)
    assert status == 503 and checks["redis"].startswith("unreachable") and checks["database"] == "ok"
    redis_proxy.start()
    assert ready(app) == (200, {"database": "ok", "migrations": "ok", "redis": "ok"})


def test_readyz_503_while_the_database_is_down_and_200_after(proxied, app):
    other, _, db_proxy = proxied
    assert ready(other)[0] == 200
    if db_proxy is not None:  # PostgreSQL: cut the connection
        db_proxy.stop()
        status, checks = ready(other)
        assert status == 503 and checks["database"].startswith("unreachable"), checks
        db_proxy.start()
    else:  # SQLite: the file is gone (an empty database would be created in its place)
        path = urlsplit(other.config["SQLALCHEMY_DATABASE_URI"]).path
        shutil.move(path, path + ".away")
        with other.app_context():
            db.engine.dispose()
        status, checks = ready(other)
        assert status == 503 and (checks["database"] != "ok" or checks["migrations"] != "ok"), checks
        with other.app_context():
            db.engine.dispose()
        os.remove(path)
        shutil.move(path + ".away", path)
    assert ready(other) == (200, {"database": "ok", "migrations": "ok", "redis": "ok"})


def test_readyz_names_a_schema_behind_the_code(client, app):
    with app.app_context():
        app.extensions["migration_head"] = "9999_future"
        response = client.get("/readyz")
    assert response.status_code == 503
    current = db.session.scalar(text("SELECT version_num FROM alembic_version"))
    assert response.get_json()["checks"]["migrations"] == f"database at {current}, code expects 9999_future"


def test_metrics_expose_deliveries_and_database_gauges(client, world):
    from app.services.lifecycle.dispatch import deliver

    from ..builders import approve, decide_report

    proposal = decide_report(world)
    approve(world, proposal)
    deliver(proposal.id)
    body = client.get("/metrics").get_data(as_text=True)
    assert 'console_deliveries_total{error_code="",outcome="applied"}' in body
    assert 'console_proposals{state="applied"} 1.0' in body
    assert "console_approvals_waiting 0.0" in body
    assert "console_delivery_attempt_seconds_bucket" in body


def test_nul_byte_in_a_path_is_404_not_500(client, world):
    from ..builders import login

    login(client, "reviewer@example.com")
    for path in ("/proposals/a%00b", "/reports/a%00b", "/appeals/a%00b", "/api/v1/actions/a%00b"):
        assert client.get(path).status_code == 404
