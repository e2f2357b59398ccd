"""Liveness, readiness and metrics endpoints for load balancers and Prometheus."""

from __future__ import annotations

from flask import Blueprint, Response, current_app, jsonify
from sqlalchemy import text

from app.domain.clock import utcnow
from app.extensions import db

bp = Blueprint("health", __name__)


@bp.route("/healthz")
def healthz():
    """The process is alive (no dependency is checked)."""
    return jsonify({"status": "ok"})


def _migration_head() -> str | None:
    """The newest migration the code ships (read once per process)."""
    head = current_app.extensions.get("migration_head")
    if head is None:
        from alembic.config import Config
        from alembic.script import ScriptDirectory

        config = Config()
        config.set_main_option("script_location", current_app.extensions["migrate"].directory)
        head = current_app.extensions["migration_head"] = ScriptDirectory.from_config(config).get_current_head()
    return head


def readiness() -> tuple[dict[str, str], bool]:
    """Check the database, Redis and the schema version; ({check: ok|reason}, ready)."""
    from app.queueing import get_redis

    checks: dict[str, str] = {}
    try:
        current = db.session.execute(text("SELECT version_num FROM alembic_version")).scalar()
        head = _migration_head()
        checks["database"] = "ok"
        checks["migrations"] = "ok" if current == head else f"database at {current}, code expects {head}"
    except Exception as error:  # any failure to reach or read the database
        checks["database"] = f"unreachable: {type(error).__name__}"
        checks["migrations"] = "unknown"
    finally:
        db.session.rollback()
    try:
        get_redis().ping()
        checks["redis"] = "ok"
    except Exception as error:
        checks["redis"] = f"unreachable: {type(error).__name__}"
    return checks, all(value == "ok" for value in checks.values())


@bp.route("/readyz")
def readyz():
    """200 when the database, Redis and migrations are ready; 503 with the reasons."""
    checks, ready = readiness()
    return jsonify({"status": "ready" if ready else "not_ready", "checks": checks}), 200 if ready else 503


@bp.route("/metrics")
def metrics():
    """Prometheus text exposition; with METRICS_TOKEN set, only for that bearer token."""
    import hmac

    from flask import request

    from app.domain.errors import ApiError
    from app.metrics import exposition

    token = current_app.config.get("METRICS_TOKEN")
    if token and not hmac.compare_digest(request.headers.get("Authorization", ""), f"Bearer {token}"):
        raise ApiError(401, "unauthorized", "The metrics token is required.")

    body, content_type = exposition(utcnow())
    return Response(body, content_type=content_type)
