"""The second step of signing in, over HTTP (SPEC OPS-2): the half-signed-in session
grants nothing, the refusals read alike (SEC-6), moderators sign in with a password
alone until they enrol, and an admin's reset is a change for a second admin."""

from __future__ import annotations

import pyotp
from sqlalchemy import select

from app.demo import DEMO_PASSWORD
from app.domain.second_factor import REFUSAL
from app.extensions import db
from app.models import AuditEvent, OperatorUser

from ..builders import enrol, login, pass_second_factor, pending_changes, totp_code
from ..conftest import csrf_from


def password_step(client, email: str):
    token = csrf_from(client.get("/login").get_data(as_text=True))
    return client.post("/login", data={"email": email, "password": DEMO_PASSWORD, "csrf_token": token})


def code_step(client, code: str):
    page = client.get("/login/second-factor")
    token = csrf_from(page.get_data(as_text=True)) if page.status_code == 200 else csrf_from(
        client.get("/login").get_data(as_text=True)
    )
    return client.post("/login/second-factor", data={"code": code, "csrf_token": token})


def test_ops2_after_the_password_a_reviewer_is_not_signed_in_until_the_code(client, world):
    response = password_step(client, "reviewer@example.com")
    assert response.status_code == 303 and response.headers["Location"].endswith("/login/second-factor")
    assert client.get("/proposals").status_code == 302  # the pending step grants nothing
    assert client.get("/account/second-factor").status_code == 302
    done = code_step(client, totp_code("reviewer@example.com"))
    assert done.status_code == 303
    assert client.get("/proposals").status_code == 200


def test_ops2_a_moderator_signs_in_with_the_password_alone(client, world):
    response = password_step(client, "moderator@example.com")
    assert response.status_code == 303 and "/login" not in response.headers["Location"]


def test_ops2_wrong_and_expired_are_refused_with_the_same_page(app, client, world):
    password_step(client, "reviewer@example.com")
    wrong = code_step(client, "000000" if totp_code("reviewer@example.com") != "000000" else "111111")
    password_step(client, "reviewer@example.com")
    app.config["SECOND_FACTOR_PENDING_SECONDS"] = -1  # every pending step has expired
    expired = code_step(client, totp_code("reviewer@example.com"))
    app.config["SECOND_FACTOR_PENDING_SECONDS"] = 300
    none = code_step(app.test_client(), "123456")  # no pending step at all
    for refused in (wrong, expired, none):
        assert refused.status_code == 401 and REFUSAL in refused.get_data(as_text=True)
    assert client.get("/proposals").status_code == 302
    reviewer = db.session.scalar(select(OperatorUser).where(OperatorUser.email == "reviewer@example.com"))
    reasons = db.session.scalars(
        select(AuditEvent.details_json).where(
            AuditEvent.target_id == reviewer.id, AuditEvent.action == "operator.second_factor_refused"
        )
    ).all()
    assert any('"wrong"' in r for r in reasons) and any('"expired"' in r for r in reasons)


def test_ops2_failed_codes_are_rate_limited_per_account(app, client, world):
    app.config["LOGIN_FAILURE_LIMIT"] = "2 per 15 minutes"
    statuses = []
    for _ in range(3):
        password_step(client, "reviewer@example.com")
        statuses.append(code_step(client, "ABCDE-FGHJK").status_code)
    assert statuses == [401, 401, 429]


def test_ops2_a_locked_second_step_says_how_long_to_wait(app, client, world):
    """OPS-2 (new-user pass): past the limit the second step says it is a sign-in limit
    and when to try again, in minutes as its Retry-After header says, not "slow down"."""
    app.config["LOGIN_FAILURE_LIMIT"] = "1 per 15 minutes"
    password_step(client, "reviewer@example.com")
    code_step(client, "ABCDE-FGHJK")
    password_step(client, "reviewer@example.com")
    refused = code_step(client, "ABCDE-FGHJK")
    page = refused.get_data(as_text=True)
    assert refused.status_code == 429 and "login_rate_limited" in page
    minutes = -(-int(refused.headers["Retry-After"]) // 60)
    assert 14 <= minutes <= 15, page
    assert f"Try again in {minutes} minutes" in page, page[page.find("<main"):]


def test_ops2_an_account_not_enrolled_enrols_at_sign_in_and_sees_its_codes_once(client, team):
    from app.services.admin.operators import create_operator
    from app.services.uow import Actor

    create_operator(
        team.installation_id, email="newrev@example.com", password=DEMO_PASSWORD, display_name="New",
        roles=["reviewer"], actor=Actor.system("test"),
    )
    response = password_step(client, "newrev@example.com")
    assert response.headers["Location"].endswith("/login/enrol")
    page = client.get("/login/enrol")
    assert page.headers["Cache-Control"] == "no-store" and "otpauth://totp/" in page.get_data(as_text=True)
    assert pass_second_factor(client, response, "newrev@example.com").status_code == 303
    assert client.get("/proposals").status_code == 200


def test_ops2_a_moderator_enrols_voluntarily_and_then_needs_a_code(client, world):
    token = login(client, "moderator@example.com")
    page = client.get("/account/second-factor").get_data(as_text=True)
    import re

    seed = re.search(r'class="totp-seed">([A-Z2-7]+)<', page).group(1)
    done = client.post("/account/second-factor", data={"code": pyotp.TOTP(seed).now(), "csrf_token": token})
    assert done.status_code == 200 and done.get_data(as_text=True).count("<li><code>") == 10
    client.post("/logout", data={"csrf_token": token})
    response = password_step(client, "moderator@example.com")
    assert response.headers["Location"].endswith("/login/second-factor")


def test_ops2_an_admins_reset_is_a_change_for_a_second_admin(client, world):
    token = login(client, "admin@example.com")
    reviewer = db.session.scalar(select(OperatorUser).where(OperatorUser.email == "reviewer@example.com"))
    page = client.get(f"/admin/users/{reviewer.id}").get_data(as_text=True)
    assert "Reset second factor" in page and "enrolled" in page
    response = client.post(f"/admin/users/{reviewer.id}/second-factor/reset", data={"csrf_token": token})
    assert response.status_code == 303 and "/admin/changes/" in response.headers["Location"]
    assert [c.kind for c in pending_changes()] == ["operator.second_factor_reset"]
    db.session.rollback()
    assert db.session.get(OperatorUser, reviewer.id).totp_confirmed_at is not None


def seal_seed_under_missing_key(email: str) -> OperatorUser:
    """Seal an operator's TOTP seed under a key this app lacks (a host not yet
    restarted after ``rotate-secrets-key``)."""
    from sqlalchemy import text

    from app.secret_box import SecretBox, decode_key, new_key_text

    operator = db.session.scalar(select(OperatorUser).where(OperatorUser.email == email))
    lost = SecretBox(decode_key(new_key_text())).seal(pyotp.random_base32(), context="operator_users.totp_secret")
    db.session.execute(text("UPDATE operator_users SET totp_secret = :v WHERE id = :id"), {"v": lost, "id": operator.id})
    db.session.commit()
    return operator


def test_ops3_an_unreadable_seed_refuses_the_sign_in_clearly_not_500(client, world):
    """OPS-3, OPS-2: a seed no configured key opens: a TOTP code at the code page is
    answered 503 ``second_factor_seed_unreadable`` naming SECRETS_KEY, nothing is used
    up, the refusal is audited and the operator is not signed in; a recovery code (a
    hash, not sealed) still signs in, so a lost key does not lock every account out."""
    codes = enrol("reviewer@example.com")
    reviewer = seal_seed_under_missing_key("reviewer@example.com")
    last_step = reviewer.totp_last_step
    password_step(client, "reviewer@example.com")
    refused = code_step(client, totp_code("reviewer@example.com"))
    body = refused.get_data(as_text=True)
    assert refused.status_code == 503 and "second_factor_seed_unreadable" in body and "SECRETS_KEY" in body
    assert client.get("/proposals").status_code == 302
    db.session.rollback()
    assert db.session.get(OperatorUser, reviewer.id).totp_last_step == last_step
    reasons = db.session.scalars(
        select(AuditEvent.details_json).where(
            AuditEvent.target_id == reviewer.id, AuditEvent.action == "operator.second_factor_refused"
        )
    ).all()
    assert any('"seed_unreadable"' in r for r in reasons)
    assert code_step(client, "ABCDE-FGHJK").status_code == 401  # a wrong recovery code: the one refusal
    password_step(client, "reviewer@example.com")
    assert code_step(client, codes[0]).status_code == 303
    assert client.get("/proposals").status_code == 200


def test_ops2_after_a_reset_a_voluntary_enrollee_must_enrol_again_at_sign_in(client, world):
    """OPS-2: a moderator who enrolled voluntarily, then reset by two admins, is sent to
    enrolment at the next sign-in (not signed in with the password alone)."""
    from app.services.admin import mfa
    from app.services.admin.reviews import approve_change

    from ..builders import make_operator

    moderator = db.session.scalar(select(OperatorUser).where(OperatorUser.email == "moderator@example.com"))
    enrolment = mfa.start_enrolment(moderator.id)
    mfa.confirm_enrolment(moderator.id, pyotp.TOTP(enrolment.secret).now())
    admin, admin2 = make_operator(moderator.installation_id, "admin"), make_operator(moderator.installation_id, "admin2")
    pending = mfa.reset_second_factor(admin, moderator.id)
    approve_change(admin2, pending.change_id, pending.digest)
    response = password_step(client, "moderator@example.com")
    assert response.status_code == 303 and response.headers["Location"].endswith("/login/enrol")
    assert client.get("/proposals").status_code == 302
