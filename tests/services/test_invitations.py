"""Accounts by invitation (SPEC FOUR-6) and lookalike operator e-mails (FOUR-10).

An admin proposes an account (e-mail, name, roles: no password); a second admin
approves; the account then exists with no usable password and a one-time, expiring
invitation whose hash only is stored. The link goes by mail to the invitee when an
SMTP server is configured (a real aiosmtpd server on loopback here), else it is shown
once to the approving admin, never to the proposer.
"""

from __future__ import annotations

import json
import socket
from email import message_from_bytes, policy
import threading
from datetime import timedelta

import pytest
from aiosmtpd.controller import Controller
from sqlalchemy import func, select, update

from app.domain.clock import utcnow
from app.domain.digests import canonical_json
from app.domain.errors import ApiError
from app.extensions import db
from app.models import AuditEvent, ConfigChange, OperatorInvitation, OperatorUser
from app.services.admin import invitations, operators, reviews
from app.services.admin.changes import PendingChange
from app.services.admin.operators import authenticate_operator

from ..builders import approve_change

PASSWORD = "my-own-long-password"


class Inbox:
    """Messages a real SMTP server on loopback received."""

    def __init__(self) -> None:
        self.messages: list = []
        self.arrived = threading.Event()

    async def handle_DATA(self, server, session, envelope):  # noqa: N802 (aiosmtpd's hook name)
        self.messages.append(envelope)
        self.arrived.set()
        return "250 OK"


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


@pytest.fixture
def smtp(app):
    inbox = Inbox()
    controller = Controller(inbox, hostname="127.0.0.1", port=free_port())
    controller.start()
    app.config.update(MAIL_SERVER="127.0.0.1", MAIL_PORT=controller.port, PUBLIC_URL="https://console.example.org")
    yield inbox
    controller.stop()


def propose(world, email="nina@example.com", roles=("moderator",)) -> PendingChange:
    return operators.add_operator(world.user("admin"), email=email, display_name="Nina", roles=list(roles))


def account(email="nina@example.com") -> OperatorUser | None:
    db.session.rollback()
    return db.session.scalar(select(OperatorUser).where(OperatorUser.email == email))


def token_from(link: str) -> str:
    return link.rsplit("/invitations/", 1)[1]


def audits(action: str) -> list[AuditEvent]:
    db.session.rollback()
    return list(db.session.scalars(select(AuditEvent).where(AuditEvent.action == action).order_by(AuditEvent.seq)))


def test_four6_an_account_is_proposed_without_a_password_and_created_by_a_second_admin(app, world):
    """FOUR-6: every account waits for a second admin; the proposer gets no link, no password."""
    with pytest.raises(TypeError):
        operators.add_operator(
            world.user("admin"), email="x@example.com", password=PASSWORD, display_name="X", roles=["moderator"]
        )
    pending = propose(world)
    assert isinstance(pending, PendingChange) and pending.shown_once == {}
    assert account() is None
    row = db.session.get(ConfigChange, pending.change_id)
    assert row.secrets is None and "password" not in canonical_json(row.content)

    result = approve_change(world, pending)
    created = account()
    assert created.roles == {"moderator"} and created.active
    link = result["invitation_link"]  # no mail server: shown to the approving admin, once
    assert link.endswith(f"/invitations/{token_from(link)}") and len(token_from(link)) >= 40
    db.session.rollback()
    stored = db.session.get(ConfigChange, pending.change_id)
    assert token_from(link) not in canonical_json(stored.result) and stored.secrets is None
    [invitation] = db.session.scalars(select(OperatorInvitation)).all()
    assert invitation.operator_id == created.id and token_from(link) not in invitation.token_hash
    assert timedelta(hours=71) < invitation.expires_at - utcnow() <= timedelta(hours=72)
    for event in audits("operator.created") + audits("operator.invited") + audits("config.change_approved"):
        assert token_from(link) not in event.details_json

    # Nobody knows a password: the invited account cannot sign in, as with a wrong password.
    assert authenticate_operator("nina@example.com", "") is None
    assert authenticate_operator("nina@example.com", PASSWORD) is None


def test_four6_the_invitee_sets_their_own_password_once(app, world):
    """FOUR-6: the link sets the password (the project's rules), then it is spent (410)."""
    link = approve_change(world, propose(world))["invitation_link"]
    token = token_from(link)
    assert invitations.open_invitation(token).email == "nina@example.com"
    for password, confirm, code in (
        ("short", "short", "password_invalid"),
        (PASSWORD, PASSWORD + "x", "password_mismatch"),
    ):
        with pytest.raises(ApiError) as refused:
            invitations.accept_invitation(token, password, confirm)
        assert (refused.value.status, refused.value.code) == (400, code)
    version = account().session_version
    invitations.accept_invitation(token, PASSWORD, PASSWORD)
    signed_in = authenticate_operator("nina@example.com", PASSWORD)
    assert signed_in is not None and signed_in.session_version == version + 1
    [accepted] = audits("operator.invitation_accepted")
    assert accepted.actor_id == signed_in.id and PASSWORD not in accepted.details_json
    for call in (
        lambda: invitations.open_invitation(token),
        lambda: invitations.accept_invitation(token, "a" * 20, "a" * 20),
    ):
        with pytest.raises(ApiError) as spent:
            call()
        assert (spent.value.status, spent.value.code) == (410, "invitation_used")
    assert authenticate_operator("nina@example.com", "a" * 20) is None
    for unknown in ("nope", "", "x" * 5000, "a\x00b"):
        with pytest.raises(ApiError) as missing:
            invitations.open_invitation(unknown)
        assert (missing.value.status, missing.value.code) == (404, "invitation_not_found")


def test_four6_an_expired_invitation_is_refused_and_a_resent_one_replaces_it(app, world):
    """FOUR-6: expiry (72 h) answers 410; without mail, re-sending is a change for a second admin."""
    token = token_from(approve_change(world, propose(world))["invitation_link"])
    with db.engine.begin() as conn:
        conn.execute(update(OperatorInvitation).values(expires_at=utcnow() - timedelta(seconds=1)))
    with pytest.raises(ApiError) as expired:
        invitations.accept_invitation(token, PASSWORD, PASSWORD)
    assert (expired.value.status, expired.value.code) == (410, "invitation_expired")

    nina = account()
    again = invitations.resend_invitation(world.user("admin"), nina.id)
    assert isinstance(again, PendingChange) and again.shown_once == {}  # the asker never sees the link
    fresh = token_from(approve_change(world, again)["invitation_link"])
    with pytest.raises(ApiError) as replaced:
        invitations.open_invitation(token)
    assert replaced.value.code == "invitation_replaced"
    invitations.accept_invitation(fresh, PASSWORD, PASSWORD)
    assert authenticate_operator("nina@example.com", PASSWORD) is not None
    with pytest.raises(ApiError) as done:
        invitations.resend_invitation(world.user("admin"), nina.id)
    assert (done.value.status, done.value.code) == (409, "invitation_not_pending")
    with pytest.raises(ApiError) as not_invited:  # accounts made by the CLI or seed have no invitation
        invitations.resend_invitation(world.user("admin"), world.user("moderator").id)
    assert not_invited.value.code == "invitation_not_pending"


def test_four6_with_a_mail_server_the_link_goes_to_the_invitee_only(app, world, smtp):
    """FOUR-6: with MAIL_SERVER set the invitation is mailed; the approving admin sees no link;
    re-sending is then single-admin (the link still goes to the invitee only)."""
    result = approve_change(world, propose(world))
    assert "invitation_link" not in result and result["invitation_sent_to"] == "nina@example.com"
    assert smtp.arrived.wait(10)
    [message] = smtp.messages
    assert message.rcpt_tos == ["nina@example.com"]
    body = message_from_bytes(message.content, policy=policy.default).get_content()
    assert "https://console.example.org/invitations/" in body
    token = body.split("https://console.example.org/invitations/", 1)[1].split()[0]
    assert invitations.open_invitation(token).email == "nina@example.com"

    smtp.arrived.clear()
    nina = account()
    resent = invitations.resend_invitation(world.user("admin"), nina.id)
    assert resent == {"operator_id": nina.id, "invitation_sent_to": "nina@example.com"}
    assert smtp.arrived.wait(10) and len(smtp.messages) == 2
    with pytest.raises(ApiError) as replaced:
        invitations.open_invitation(token)
    assert replaced.value.code == "invitation_replaced"
    [_, event] = audits("operator.invited")
    assert json.loads(event.details_json)["delivery"] == "mail" and event.actor_id == world.user("admin").id


def test_four6_a_failed_mail_says_so_and_shows_no_link(app, world):
    """FOUR-6: an SMTP server that does not answer leaves the account invited; the approver is told."""
    app.config.update(MAIL_SERVER="127.0.0.1", MAIL_PORT=free_port(), PUBLIC_URL="https://console.example.org")
    result = approve_change(world, propose(world))
    assert "invitation_link" not in result and "invitation_mail_failed" in result
    assert account() is not None


def mailed_links(inbox: Inbox) -> list[str]:
    bodies = [message_from_bytes(m.content, policy=policy.default).get_content() for m in inbox.messages]
    return [word for body in bodies for word in body.split() if "/invitations/" in word]


def test_four6_a_mailed_link_is_built_from_public_url_never_from_the_request(app, world, smtp):
    """FOUR-6: a re-send is single-admin with mail, so its link must not come from the request
    (a Host header of the admin's choosing would hand the invitee's token to another host)."""
    approve_change(world, propose(world))
    nina = account()
    with app.test_request_context(f"/admin/users/{nina.id}/invitation", method="POST", base_url="http://evil.example/"):
        resent = invitations.resend_invitation(world.user("admin"), nina.id)
    assert resent == {"operator_id": nina.id, "invitation_sent_to": "nina@example.com"}
    first, second = mailed_links(smtp)
    assert second.startswith("https://console.example.org/invitations/") and "evil" not in second
    assert invitations.open_invitation(token_from(second)).email == "nina@example.com"


def test_four6_with_a_mail_server_but_no_public_url_invitations_go_the_approver_way(app, world, smtp):
    """FOUR-6: mail counts as configured only with MAIL_SERVER and PUBLIC_URL; without PUBLIC_URL
    nothing is mailed (there is no trustworthy base for the link) and a re-send is an
    operator.invite change for a second admin, who is shown the link."""
    app.config.update(PUBLIC_URL=None)
    assert not invitations.mail_configured()
    created = approve_change(world, propose(world))
    assert "invitation_sent_to" not in created and "/invitations/" in created["invitation_link"]
    nina = account()
    with app.test_request_context(f"/admin/users/{nina.id}/invitation", method="POST", base_url="http://evil.example/"):
        again = invitations.resend_invitation(world.user("admin"), nina.id)
    assert isinstance(again, PendingChange) and again.shown_once == {}
    assert db.session.get(ConfigChange, again.change_id).content["delivery"] == "approver"
    fresh = approve_change(world, again)["invitation_link"]
    assert invitations.open_invitation(token_from(fresh)).email == "nina@example.com"
    assert smtp.messages == []  # sent synchronously when at all: nothing went out
    assert [json.loads(e.details_json)["delivery"] for e in audits("operator.invited")] == ["approver", "approver"]


def test_four6_the_approvers_link_prefers_public_url_to_the_request(app, world):
    """FOUR-6: without mail the approving admin is shown the link; on PUBLIC_URL when it is set,
    on the request's host (their own browser's) only when it is not."""
    pending = propose(world)
    app.config.update(PUBLIC_URL="https://console.example.org/")
    with app.test_request_context("/admin/changes/x/approve", method="POST", base_url="http://evil.example/"):
        shown = approve_change(world, pending)["invitation_link"]
    assert shown.startswith("https://console.example.org/invitations/")
    app.config.update(PUBLIC_URL=None)
    again = invitations.resend_invitation(world.user("admin"), account().id)
    with app.test_request_context("/admin/changes/x/approve", method="POST", base_url="http://console.local:5000/"):
        assert approve_change(world, again)["invitation_link"].startswith("http://console.local:5000/invitations/")


def test_four6_an_invalid_public_url_stops_the_console_at_start(monkeypatch, tmp_path):
    """FOUR-6: PUBLIC_URL is read once at start and checked; a link on it must be one plain address."""
    from app.config import Config

    monkeypatch.setenv("PUBLIC_URL", " https://console.example.org/ ")
    assert Config(str(tmp_path)).PUBLIC_URL == "https://console.example.org"
    monkeypatch.setenv("PUBLIC_URL", "")
    assert Config(str(tmp_path)).PUBLIC_URL is None
    for wrong in ("console.example.org", "https://admin@evil.example", "https://console.example.org/?x=1"):
        monkeypatch.setenv("PUBLIC_URL", wrong)
        with pytest.raises(ValueError, match="PUBLIC_URL"):
            Config(str(tmp_path))


@pytest.mark.parametrize(
    "email",
    ["\u0430dmin2@example.com", "admin2@ex\u0430mple.com", "ad\u200bmin3@example.com", "admin3@example.com\u202e"],
)
def test_four10_a_lookalike_email_is_refused_and_stores_nothing(app, world, email):
    """FOUR-10: non-ASCII, invisible or bidi characters in an operator e-mail: 400, nothing stored."""
    before = db.session.scalar(select(func.count()).select_from(ConfigChange))
    with pytest.raises(ApiError) as refused:
        operators.add_operator(world.user("admin"), email=email, display_name="Eve", roles=["moderator"])
    assert (refused.value.status, refused.value.code, refused.value.field) == (400, "operator_email_not_ascii", "email")
    assert db.session.scalar(select(func.count()).select_from(ConfigChange)) == before


def test_four6_break_glass_of_an_account_prints_the_link_to_the_server_operator(app, world):
    """FOUR-6: an account applied by break-glass (no mail) gives its link to the CLI, not the proposer."""
    pending = propose(world)
    outcome = reviews.break_glass(pending.change_id, "Incident 4711: the second admin is on leave")
    token = token_from(outcome.delivered["invitation_link"])
    assert outcome.change.state == "applied" and invitations.open_invitation(token).email == "nina@example.com"
    [event] = audits("config.break_glass")
    assert token not in event.details_json
