"""Admin: operators, their roles, deactivation, and what happens to open sessions."""

from __future__ import annotations

import html
import json
import re

import pytest
from sqlalchemy import select

from app.demo import DEMO_PASSWORD
from app.domain.digests import canonical_json
from app.extensions import db
from app.models import OperatorUser

from ..builders import approve_in_console, approve_pending, login, pending_changes
from ..conftest import csrf_from
from .test_admin import admin, assert_refused, audits, other_world, post, snapshot, text

PASSWORD = "a-long-enough-password"


def operator(email: str) -> OperatorUser:
    db.session.rollback()
    return db.session.scalar(select(OperatorUser).where(OperatorUser.email == email))


def signed_in(app, client) -> bool:
    """Whether the client's session still works (a signed-out console redirects to login).

    The request runs in a fresh app context: the test's own context keeps `g`, where
    Flask-Login caches the user of the previous request, whichever client sent it.
    """
    with app.app_context():
        return client.get("/proposals").status_code == 200


def sign_in(app, email: str, password: str = DEMO_PASSWORD):
    """A new browser signed in as `email` (in its own app context, see `signed_in`)."""
    browser = app.test_client()
    with app.app_context():
        login(browser, email, password)
    return browser


def test_create_a_user_who_sets_their_own_password(app, client, world):
    """FOUR-6: the admin proposes e-mail, name and roles; a second admin approves; the
    user sets their own password with the link the approver was shown."""
    csrf = admin(client)
    response = post(
        client,
        "/admin/users",
        csrf,
        email="New.Reviewer@Example.com",
        display_name="Nora Newcomer",
        roles=["reviewer", "moderator"],
    )
    assert response.status_code == 303
    [pending] = pending_changes()  # every account waits for a second admin (FOUR-2, FOUR-6)
    assert response.headers["Location"].endswith(f"/admin/changes/{pending.id}")
    assert operator("new.reviewer@example.com") is None and "password" not in canonical_json(pending.content)
    approved = approve_in_console(app, pending.id)
    assert approved.status_code == 200
    token = re.search(r"/invitations/([A-Za-z0-9_-]+)", text(approved)).group(1)
    created = operator("new.reviewer@example.com")
    assert (created.installation_id, created.display_name, created.roles, created.active) == (
        world.installation_id,
        "Nora Newcomer",
        frozenset({"reviewer", "moderator"}),
        True,
    )
    [event] = audits("operator.created")[-1:]
    assert event.target_id == created.id and event.actor_id == world.user("admin").id
    assert token not in event.details_json
    invitee = app.test_client()
    with app.app_context():
        page = invitee.get(f"/invitations/{token}").get_data(as_text=True)
        form = {"csrf_token": csrf_from(page), "password": PASSWORD, "confirm": PASSWORD}
        assert invitee.post(f"/invitations/{token}", data=form).status_code == 303
    assert signed_in(app, sign_in(app, "new.reviewer@example.com", PASSWORD))


@pytest.mark.parametrize(
    "overrides, status, code",
    [
        ({"email": "not-an-email"}, 400, "email_invalid"),
        ({"email": "moderator@example.com"}, 409, "email_taken"),
        ({"email": "\u0430dmin2@example.com"}, 400, "operator_email_not_ascii"),  # FOUR-10: a Cyrillic а
        ({"display_name": ""}, 400, "display_name_invalid"),
        ({"roles": []}, 400, "roles_invalid"),
        ({"roles": ["root"]}, 400, "roles_invalid"),
    ],
)
def test_user_refusals_change_nothing(app, client, world, overrides, status, code):
    """FOUR-10: refusals, a lookalike e-mail among them, answer their code and store nothing."""
    csrf = admin(client)
    data = {
        "email": "someone@example.com",
        "display_name": "Some One",
        "roles": ["moderator"],
        **overrides,
    }
    before = snapshot()
    page = assert_refused(post(client, "/admin/users", csrf, **data), status, code)
    assert snapshot() == before
    assert f'value="{html.escape(data["email"])}"' in page


def test_changing_roles_ends_the_users_sessions(app, client, world):
    target = sign_in(app, "moderator@example.com")
    assert signed_in(app, target)
    version = operator("moderator@example.com").session_version

    csrf = admin(client)
    user_id = world.user("moderator").id
    response = post(client, f"/admin/users/{user_id}/roles", csrf, roles=["moderator", "reviewer"])
    assert response.status_code == 303
    [pending] = pending_changes()  # granting reviewer waits for a second admin (FOUR-2)
    assert operator("moderator@example.com").roles == {"moderator"} and signed_in(app, target)
    assert approve_in_console(app, pending.id).status_code == 303
    changed = operator("moderator@example.com")
    assert changed.roles == {"moderator", "reviewer"} and changed.session_version == version + 1
    [event] = audits("admin.operator_roles_changed")
    assert json.loads(event.details_json)["after"] == ["moderator", "reviewer"]
    assert not signed_in(app, target)
    assert "reviewer" in text(client.get(f"/admin/users/{user_id}"))

    assert post(client, f"/admin/users/{user_id}/roles", csrf, roles=["reviewer", "moderator"]).status_code == 303
    assert operator("moderator@example.com").session_version == version + 1  # same roles: nothing changes
    assert len(audits("admin.operator_roles_changed")) == 1

    before = snapshot()
    assert_refused(post(client, f"/admin/users/{user_id}/roles", csrf, roles=["superuser"]), 400, "roles_invalid")
    assert_refused(post(client, f"/admin/users/{user_id}/roles", csrf), 400, "roles_invalid")
    assert snapshot() == before


def test_deactivating_logs_the_user_out_and_keeps_them_out(app, client, world):
    target = sign_in(app, "reviewer@example.com")
    assert signed_in(app, target)

    csrf = admin(client)
    user_id = world.user("reviewer").id
    assert post(client, f"/admin/users/{user_id}/deactivate", csrf).status_code == 303
    assert operator("reviewer@example.com").active is False
    assert [e.target_id for e in audits("admin.operator_deactivated")] == [user_id]
    assert not signed_in(app, target)
    with app.app_context():
        response = target.get("/proposals")
    assert response.status_code == 302 and "/login" in response.headers["Location"]
    with pytest.raises(AssertionError):
        sign_in(app, "reviewer@example.com")
    assert "deactivated" in text(client.get("/admin/users"))

    assert post(client, f"/admin/users/{user_id}/reactivate", csrf).status_code == 303
    assert operator("reviewer@example.com").active is False  # FOUR-4: a second admin approves it
    [change] = pending_changes()
    assert change.kind == "operator.reactivate" and approve_pending(app) == [change.id]
    assert operator("reviewer@example.com").active is True
    assert len(audits("admin.operator_reactivated")) == 1
    assert not signed_in(app, target)  # the old session stays ended
    assert signed_in(app, sign_in(app, "reviewer@example.com"))


def test_an_admin_cannot_lock_themselves_out(app, client, world):
    csrf = admin(client)
    me = world.user("admin")
    before = snapshot()
    page = assert_refused(
        post(client, f"/admin/users/{me.id}/roles", csrf, roles=["reviewer"]), 409, "own_admin_role_required"
    )
    assert 'value="reviewer" checked' in page or 'checked id="roles-1"' in page or "reviewer" in page
    assert_refused(post(client, f"/admin/users/{me.id}/deactivate", csrf), 409, "cannot_deactivate_self")
    assert snapshot() == before
    mine = operator("admin@example.com")
    assert mine.active and mine.roles == {"admin", "reviewer"}
    assert signed_in(app, client)

    # Dropping another role of one's own keeps the admin signed in (their session is renewed).
    assert post(client, f"/admin/users/{me.id}/roles", csrf, roles=["admin"]).status_code == 303
    assert operator("admin@example.com").roles == {"admin"}
    assert signed_in(app, client)
    with app.app_context():
        assert client.get("/admin/users").status_code == 200


def test_another_installations_user_is_404(app, client, world, platform):
    other = other_world(platform)
    stranger = other.user("moderator")
    csrf = admin(client)
    assert client.get(f"/admin/users/{stranger.id}").status_code == 404
    before = snapshot()
    assert post(client, f"/admin/users/{stranger.id}/roles", csrf, roles=["admin"]).status_code == 404
    assert post(client, f"/admin/users/{stranger.id}/deactivate", csrf).status_code == 404
    assert snapshot() == before
    assert "other-moderator@example.com" not in text(client.get("/admin/users"))
    stranger = operator("other-moderator@example.com")
    assert stranger.active and stranger.roles == {"moderator"}
