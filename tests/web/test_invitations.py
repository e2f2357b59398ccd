"""Accounts by invitation in the console (SPEC FOUR-6): an admin proposes a user without a
password, a second admin approves and is shown the link once (no mail server), the
invitee sets their own password on the invitation page (CSRF form), and the link is
then spent."""

from __future__ import annotations

import re
from datetime import timedelta

import pytest
from sqlalchemy import select, update
from werkzeug.middleware.proxy_fix import ProxyFix

from app import create_app
from app.domain.clock import utcnow
from app.extensions import db
from app.models import OperatorInvitation, OperatorUser

from ..builders import approve_in_console, login, pending_changes
from ..conftest import csrf_from
from ..services.test_invitations import mailed_links, smtp  # noqa: F401 (smtp: the loopback SMTP fixture)
from .test_admin import admin, assert_refused, post, snapshot, text

PASSWORD = "nora-chose-this-one"
LINK = re.compile(r'value="(https?://[^"]+/invitations/([A-Za-z0-9_-]+))"')


def invite(app, client, email="nora@example.com"):
    """The admin proposes Nora; admin2 approves; the approval's answer (with the link)."""
    csrf = admin(client)
    response = post(client, "/admin/users", csrf, email=email, display_name="Nora", roles=["moderator"])
    assert response.status_code == 303
    proposer_view = text(client.get(response.headers["Location"]))
    assert "/invitations/" not in proposer_view and "password" not in proposer_view.lower()
    [pending] = pending_changes()
    return pending, approve_in_console(app, pending.id)


def test_four6_the_approving_admin_sees_the_link_once_and_the_invitee_sets_a_password(app, client, world):
    """FOUR-6: the link is shown once to the approver; the invitation page's CSRF form sets the
    password; the link is then spent (410) and an unknown one is 404, never 500."""
    pending, approved = invite(app, client)
    page = text(approved)
    assert approved.status_code == 200 and "only time" in page
    url, token = LINK.search(page).groups()
    assert "/invitations/" not in text(client.get(f"/admin/changes/{pending.id}"))  # not shown again

    # Not signed in yet: the invited account is refused like a wrong password.
    browser = app.test_client()
    form = browser.get("/login").get_data(as_text=True)
    refused = browser.post(
        "/login", data={"email": "nora@example.com", "password": PASSWORD, "csrf_token": csrf_from(form)}
    )
    assert refused.status_code == 401 and "not right" in text(refused)

    invitee = app.test_client()
    opened = invitee.get(f"/invitations/{token}")
    assert opened.status_code == 200 and "nora@example.com" in text(opened)
    assert opened.headers["Referrer-Policy"] == "no-referrer"
    csrf = csrf_from(text(opened))
    before = snapshot()
    no_csrf = invitee.post(f"/invitations/{token}", data={"password": PASSWORD, "confirm": PASSWORD})
    assert no_csrf.status_code == 400 and snapshot() == before
    assert_refused(
        invitee.post(f"/invitations/{token}", data={"csrf_token": csrf, "password": PASSWORD, "confirm": "x" * 20}),
        400,
        "password_mismatch",
    )
    assert snapshot() == before
    done = invitee.post(f"/invitations/{token}", data={"csrf_token": csrf, "password": PASSWORD, "confirm": PASSWORD})
    assert done.status_code == 303 and done.headers["Location"].endswith("/login")
    login(app.test_client(), "nora@example.com", PASSWORD)

    spent = invitee.get(f"/invitations/{token}")
    assert spent.status_code == 410 and "invitation_used" in text(spent)
    again = invitee.post(f"/invitations/{token}", data={"csrf_token": csrf, "password": "a" * 20, "confirm": "a" * 20})
    assert again.status_code == 410
    assert invitee.get("/invitations/not-a-token").status_code == 404
    assert invitee.get("/invitations/" + "x" * 3000).status_code == 404


def test_four6_an_expired_link_is_410_and_the_admin_can_ask_for_a_new_one(app, client, world):
    """FOUR-6: an expired link answers 410; re-sending (no mail) waits for a second admin."""
    _, approved = invite(app, client)
    _, token = LINK.search(text(approved)).groups()
    with db.engine.begin() as conn:
        conn.execute(update(OperatorInvitation).values(expires_at=utcnow() - timedelta(minutes=1)))
    expired = app.test_client().get(f"/invitations/{token}")
    assert expired.status_code == 410 and "invitation_expired" in text(expired)

    db.session.rollback()
    nora = db.session.scalar(select(OperatorUser).where(OperatorUser.email == "nora@example.com"))
    csrf = csrf_from(text(client.get("/proposals")))  # the admin is still signed in
    user_page = text(client.get(f"/admin/users/{nora.id}"))
    assert "Invited" in user_page and f"/admin/users/{nora.id}/invitation" in user_page
    asked = post(client, f"/admin/users/{nora.id}/invitation", csrf)
    assert asked.status_code == 303 and "/admin/changes/" in asked.headers["Location"]
    assert "/invitations/" not in text(client.get(asked.headers["Location"]))
    [pending] = pending_changes()
    _, fresh = LINK.search(text(approve_in_console(app, pending.id))).groups()
    assert fresh != token and app.test_client().get(f"/invitations/{fresh}").status_code == 200
    never_invited = world.user("moderator").id
    assert_refused(post(client, f"/admin/users/{never_invited}/invitation", csrf), 409, "invitation_not_pending")


def invited_nora(app, client):
    """Nora proposed and approved; the admin (signed in on `client`) and Nora's row."""
    invite(app, client)
    db.session.rollback()
    return db.session.scalar(select(OperatorUser).where(OperatorUser.email == "nora@example.com"))


def post_as_host(client, url: str, csrf: str, host: str):
    """POST as a hand-made request would: the admin's own session cookie, another Host header."""
    name = client.application.config["SESSION_COOKIE_NAME"]
    client.set_cookie(name, client.get_cookie(name).value, domain=host)
    return client.post(url, data={"csrf_token": csrf}, headers={"Host": host})


@pytest.fixture
def behind_a_proxy(app, tmp_path):
    """A second app as production runs it behind one trusted proxy (TRUSTED_PROXIES=1):
    X-Forwarded-Host is then believed for the request's host."""
    other = create_app(
        {
            "TESTING": True,
            "CONFIGURE_LOGGING": False,
            "SQLALCHEMY_DATABASE_URI": app.config["SQLALCHEMY_DATABASE_URI"],
            "REDIS_URL": app.config["REDIS_URL"],
            "PASSWORD_HASH_METHOD": "pbkdf2:sha256:1000",
            "INSTANCE_PATH": str(tmp_path / "proxied"),
            "TRUSTED_PROXIES": 1,
        }
    )
    yield other
    with other.app_context():
        db.engine.dispose()


def test_four6_a_resent_mail_carries_public_url_whatever_host_the_admin_sends(app, client, world, smtp):  # noqa: F811
    """FOUR-6: with MAIL_SERVER and PUBLIC_URL the re-send is single-admin and mailed; a Host
    header of the admin's choosing does not reach the link (the token would go to that host)."""
    app.config.update(MAIL_SERVER=None)  # the account itself: shown to the approver
    nora = invited_nora(app, client)
    app.config.update(MAIL_SERVER="127.0.0.1")
    csrf = csrf_from(text(client.get("/proposals")))
    sent = post_as_host(client, f"/admin/users/{nora.id}/invitation", csrf, "evil.example")
    assert sent.status_code == 303 and pending_changes() == []
    [link] = mailed_links(smtp)
    assert link.startswith("https://console.example.org/invitations/") and "evil" not in link
    assert app.test_client().get(link.split("console.example.org", 1)[1]).status_code == 200


def test_four6_x_forwarded_host_from_a_trusted_proxy_does_not_reach_a_mailed_link(
    app, world, smtp, behind_a_proxy  # noqa: F811
):
    """FOUR-6: behind TRUSTED_PROXIES the proxy's X-Forwarded-Host is the request's host, yet a
    mailed link is still on PUBLIC_URL."""
    behind_a_proxy.config.update(MAIL_SERVER=None)
    with behind_a_proxy.app_context():
        client = behind_a_proxy.test_client()
        nora = invited_nora(behind_a_proxy, client)
        behind_a_proxy.config.update(
            MAIL_SERVER="127.0.0.1", MAIL_PORT=app.config["MAIL_PORT"], PUBLIC_URL=app.config["PUBLIC_URL"]
        )
        csrf = csrf_from(text(client.get("/proposals")))
        assert isinstance(behind_a_proxy.wsgi_app, ProxyFix)  # X-Forwarded-Host is believed
        forwarded = {"X-Forwarded-Host": "evil.example", "X-Forwarded-For": "203.0.113.9"}
        sent = client.post(f"/admin/users/{nora.id}/invitation", data={"csrf_token": csrf}, headers=forwarded)
        assert sent.status_code == 303 and pending_changes() == []
        db.session.remove()
    [link] = mailed_links(smtp)
    assert link.startswith("https://console.example.org/invitations/") and "evil" not in link


def test_four6_with_mail_but_no_public_url_a_resend_waits_for_a_second_admin(app, client, world, smtp):  # noqa: F811
    """FOUR-6: MAIL_SERVER without PUBLIC_URL is not mail: the re-send (Host: evil.example) is an
    operator.invite change, nothing is mailed, and the approving admin is shown the link."""
    app.config.update(PUBLIC_URL=None)
    nora = invited_nora(app, client)
    csrf = csrf_from(text(client.get("/proposals")))
    assert "Invitations are not mailed" in text(client.get(f"/admin/users/{nora.id}"))
    asked = post_as_host(client, f"/admin/users/{nora.id}/invitation", csrf, "evil.example")
    assert asked.status_code == 303 and "/admin/changes/" in asked.headers["Location"]
    [pending] = pending_changes()
    assert pending.kind == "operator.invite" and pending.content["delivery"] == "approver"
    assert LINK.search(text(approve_in_console(app, pending.id)))
    assert smtp.messages == []
