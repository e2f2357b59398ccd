"""Signing in and out: sign-out ends the session on the server (SEC-1), and every
refused sign-in costs one password-hash check and reads the same (SEC-6)."""

from __future__ import annotations

import pytest
from sqlalchemy import select
from sqlalchemy.exc import OperationalError

from app.extensions import db
from app.models import OperatorUser
from app.services.admin.operators import set_operator_active

from ..builders import approve_change, login, logout, set_row
from ..conftest import csrf_from


def session_cookie(client) -> str:
    cookie = client.get_cookie("session")
    assert cookie is not None, "no session cookie"
    return cookie.value


def signed_in(client) -> bool:
    response = client.get("/proposals")
    assert response.status_code in (200, 302), response.status_code
    return response.status_code == 200


def test_a_session_cookie_replayed_after_sign_out_is_signed_out(app, client, world):
    """SEC-1: the cookie captured before sign-out no longer signs anyone in."""
    token = login(client, "reviewer@example.com")
    stolen = session_cookie(client)
    logout(client, token)
    assert not signed_in(client)
    client.set_cookie("session", stolen)
    assert not signed_in(client)
    htmx = client.get("/proposals", headers={"HX-Request": "true"})
    assert htmx.status_code == 401 and "/login" in htmx.headers["HX-Redirect"]


def test_sign_out_ends_every_session_of_the_operator(app, client, world):
    """SEC-1: sign-out ends all of that operator's sessions (other browsers too), and
    no other operator's; signing in again works."""
    other_browser = app.test_client()
    token = login(client, "reviewer@example.com")
    login(other_browser, "reviewer@example.com")
    someone_else = app.test_client()
    login(someone_else, "moderator@example.com")
    logout(client, token)
    assert not signed_in(other_browser)
    assert signed_in(someone_else)
    login(client, "reviewer@example.com")
    assert signed_in(client)


def test_sign_out_without_a_session_changes_nothing(app, client, world):
    """SEC-1: a signed-out visitor's sign-out is a redirect to the login page, no row changed."""
    before = db.session.scalars(select(OperatorUser.session_version).order_by(OperatorUser.id)).all()
    token = csrf_from(client.get("/login").get_data(as_text=True))
    response = client.post("/logout", data={"csrf_token": token})
    assert response.status_code == 303 and response.headers["Location"].endswith("/login")
    db.session.rollback()
    assert db.session.scalars(select(OperatorUser.session_version).order_by(OperatorUser.id)).all() == before


def test_deactivation_ends_open_sessions_and_they_stay_ended(app, client, world):
    """SEC-1: deactivating an operator ends their sessions; reactivating them does not
    bring an old cookie back."""
    login(client, "reviewer@example.com")
    stolen = session_cookie(client)
    set_operator_active(world.user("admin"), world.users["reviewer"], False)
    assert not signed_in(client)
    pending = set_operator_active(world.user("admin"), world.users["reviewer"], True)
    approve_change(world, pending)  # FOUR-4: a second admin approves the reactivation
    assert world.user("reviewer").active
    client.set_cookie("session", stolen)
    assert not signed_in(client)


def test_a_store_outage_at_sign_out_is_said_and_signs_no_one_in(app, client, world, monkeypatch):
    """SEC-1: when the session version cannot be bumped, the browser is signed out and
    told the server-side end failed (503 with a code), never a 500 or a silent success."""
    token = login(client, "reviewer@example.com")

    def outage(*args, **kwargs):
        raise OperationalError("UPDATE operator_users", {}, Exception("database is down"))

    monkeypatch.setattr("app.web.auth.routes.end_sessions", outage)
    response = client.post("/logout", data={"csrf_token": token})
    assert response.status_code == 503 and "sign_out_incomplete" in response.get_data(as_text=True)
    assert not signed_in(client)


@pytest.fixture
def hash_checks(monkeypatch):
    """Count password-hash checks, wherever the login code makes them."""
    calls = []
    from werkzeug.security import check_password_hash as real

    def counting(pwhash, password):
        calls.append(pwhash)
        return real(pwhash, password)

    for where in ("werkzeug.security", "app.models.tenancy", "app.services.admin.operators"):
        monkeypatch.setattr(f"{where}.check_password_hash", counting)
    return calls


def attempt(client, email: str, password: str):
    token = csrf_from(client.get("/login").get_data(as_text=True))
    return client.post("/login", data={"email": email, "password": password, "csrf_token": token})


def test_refused_sign_ins_cost_the_same_and_say_the_same(app, client, world, hash_checks):
    """SEC-6: unknown, deactivated and wrong-password sign-ins each run exactly one
    password-hash check, with the same method, and answer the same page; a
    deactivated account's right password is refused too."""
    set_row(OperatorUser, world.users["auditor"], active=False)
    real_hash = db.session.get(OperatorUser, world.users["reviewer"]).password_hash
    cases = [
        ("nobody@example.com", "demo-password-1"),  # unknown
        ("auditor@example.com", "demo-password-1"),  # deactivated, right password
        ("auditor@example.com", "wrong-password"),  # deactivated, wrong password
        ("reviewer@example.com", "wrong-password"),  # active, wrong password
    ]
    answers = []
    for email, password in cases:
        hash_checks.clear()
        response = attempt(client, email, password)
        assert len(hash_checks) == 1, (email, password, hash_checks)
        assert hash_checks[0].split("$")[0] == real_hash.split("$")[0], "the dummy hash uses the same method"
        body = response.get_data(as_text=True)
        message = body[body.index('role="alert"') :].split("</div>")[0]
        answers.append((response.status_code, message))
    assert len(set(answers)) == 1 and answers[0][0] == 401, answers
    hash_checks.clear()
    assert attempt(client, "reviewer@example.com", "demo-password-1").status_code == 303
    assert len(hash_checks) == 1
