"""Sessions and headers: login throttling, cookie flags in production, session
protection, memory-hard password hashes, a CSP that htmx works under (the browser
tests run under it), metrics behind a token."""

from __future__ import annotations

import re

import pytest

from app import create_app
from app.extensions import db
from app.models import OperatorUser

from ..builders import login


def attempt(client, email, password):
    token = re.search(
        r'name="csrf_token" (?:type="hidden" )?value="([^"]+)"', client.get("/login").get_data(as_text=True)
    ).group(1)
    return client.post("/login", data={"email": email, "password": password, "csrf_token": token})


def test_failed_logins_per_email_are_throttled(app, client, world):
    for _ in range(5):
        assert attempt(client, "reviewer@example.com", "wrong-password").status_code == 401
    refused = attempt(client, "reviewer@example.com", "demo-password-1")
    assert refused.status_code == 429 and "login_rate_limited" in refused.get_data(as_text=True)
    assert attempt(client, "moderator@example.com", "demo-password-1").status_code == 303  # another account


def test_logins_per_client_address_are_throttled(app, client, world):
    app.config["LOGIN_RATE_LIMIT"] = "3 per minute"
    statuses = [attempt(client, f"user{n}@example.com", "wrong-password").status_code for n in range(4)]
    assert statuses == [401, 401, 401, 429]


def test_successful_logins_do_not_count_as_failures(app, client, world):
    for _ in range(6):
        assert attempt(client, "moderator@example.com", "demo-password-1").status_code in (303, 302)
        client.post(
            "/logout",
            data={
                "csrf_token": re.search(r'value="([^"]+)"', client.get("/proposals").get_data(as_text=True)).group(1)
            },
        )


def test_security_headers_and_csp(client):
    response = client.get("/login")
    csp = response.headers["Content-Security-Policy"]
    assert "script-src 'self'" in csp and "unsafe-inline" not in csp and "unsafe-eval" not in csp
    assert "frame-ancestors 'none'" in csp
    assert response.headers["X-Frame-Options"] == "DENY"
    assert response.headers["X-Content-Type-Options"] == "nosniff"
    assert response.headers["Cache-Control"] == "no-store" and "HX-Request" in response.headers["Vary"]


def test_passwords_are_hashed_with_scrypt(app, world):
    from app.services.admin.operators import create_operator
    from app.services.uow import Actor

    app.config.pop("PASSWORD_HASH_METHOD")  # the tests use a fast hash; production's default is scrypt
    operator = create_operator(
        world.installation_id,
        email="new@example.com",
        password="correct horse battery",
        display_name="New",
        roles=["moderator"],
        actor=Actor.system(),
    )
    stored = db.session.get(OperatorUser, operator.id).password_hash
    assert stored.startswith("scrypt:") and "correct horse" not in stored


@pytest.fixture
def production(app, monkeypatch, tmp_path):
    monkeypatch.setenv("CONSOLE_ENV", "production")
    monkeypatch.setenv("SECRET_KEY", "production-session-key-" + "s" * 20)  # refused if short
    prod = create_app(
        {
            "TESTING": True,
            "CONFIGURE_LOGGING": False,
            "INSTANCE_PATH": str(tmp_path / "prod"),
            "SQLALCHEMY_DATABASE_URI": app.config["SQLALCHEMY_DATABASE_URI"],
            "REDIS_URL": app.config["REDIS_URL"],
            "PASSWORD_HASH_METHOD": "pbkdf2:sha256:1000",
        }
    )
    yield prod
    with prod.app_context():
        db.engine.dispose()


def test_production_cookies_are_secure_and_sessions_strongly_protected(production, world):
    from app.extensions import login_manager

    with production.app_context():
        client = production.test_client()
        response = attempt(client, "moderator@example.com", "demo-password-1")
        assert response.status_code == 303
        cookie = response.headers["Set-Cookie"]
        assert "Secure" in cookie and "HttpOnly" in cookie and "SameSite=Lax" in cookie
        assert response.headers["Strict-Transport-Security"].startswith("max-age=")
        assert login_manager.session_protection == "strong"
        db.session.remove()


def test_metrics_can_require_a_token(app, client):
    app.config["METRICS_TOKEN"] = "scrape-me"
    assert client.get("/metrics").status_code == 401
    assert client.get("/metrics", headers={"Authorization": "Bearer scrape-me"}).status_code == 200


def test_session_of_a_disabled_operator_ends(app, client, world):
    login(client, "reviewer@example.com")
    assert client.get("/proposals").status_code == 200
    from ..builders import set_row

    set_row(OperatorUser, world.users["reviewer"], active=False)
    assert client.get("/proposals").status_code == 302
