"""Admin: integrations and their API tokens."""

from __future__ import annotations

import re

import pytest
from sqlalchemy import select

from app.domain.digests import canonical_json, sha256_hex
from app.extensions import db
from app.models import Integration, IntegrationToken, Queue

from ..builders import approve_pending, pending_changes
from .test_admin import admin, assert_refused, audits, other_world, post, snapshot, text


def queue_id(installation_id: str) -> str:
    return db.session.scalar(select(Queue.id).where(Queue.installation_id == installation_id))


def test_admin_creates_an_integration(app, client, world):
    token = admin(client)
    response = post(
        client,
        "/admin/integrations",
        token,
        name="Acme Social",
        slug="acme-social",
        default_queue_id=queue_id(world.installation_id),
    )
    assert response.status_code == 303
    integration = db.session.scalar(select(Integration).where(Integration.slug == "acme-social"))
    assert response.headers["Location"].endswith(f"/admin/integrations/{integration.id}")
    assert (integration.installation_id, integration.name, integration.default_queue_id) == (
        world.installation_id,
        "Acme Social",
        queue_id(world.installation_id),
    )
    [event] = audits("admin.integration_created")
    assert (event.actor_type, event.actor_id, event.target_id) == ("operator", world.user("admin").id, integration.id)
    assert "Acme Social" in text(client.get("/admin/integrations"))


@pytest.mark.parametrize(
    "data, status, code",
    [
        ({"name": "", "slug": "x"}, 400, "name_invalid"),
        ({"name": "N" * 201, "slug": "x"}, 400, "name_invalid"),
        ({"name": "Acme", "slug": "Not A Slug"}, 400, "slug_invalid"),
        ({"name": "Acme", "slug": "-edge-"}, 400, "slug_invalid"),
        ({"name": "Acme", "slug": "a" * 101}, 400, "slug_invalid"),
        ({"name": "Acme", "slug": "demo-platform"}, 409, "slug_taken"),
        ({"name": "Acme", "slug": "acme", "default_queue_id": "que_nope"}, 400, "queue_invalid"),
    ],
)
def test_integration_refusals_change_nothing(app, client, world, data, status, code):
    token = admin(client)
    before = snapshot()
    response = post(client, "/admin/integrations", token, **data)
    page = assert_refused(response, status, code)
    assert snapshot() == before
    if data["name"] and len(data["name"]) < 100:
        assert f'value="{data["name"]}"' in page  # what was typed is kept


def test_a_queue_of_another_installation_is_refused(app, client, world, platform):
    other = other_world(platform)
    token = admin(client)
    before = snapshot()
    response = post(
        client, "/admin/integrations", token, name="X", slug="x", default_queue_id=queue_id(other.installation_id)
    )
    assert_refused(response, 400, "queue_invalid")
    assert snapshot() == before


def issued_token(page: str) -> str:
    match = re.search(r'id="issued-token"[^>]*value="(sct_[A-Za-z0-9_-]+)"', page)
    assert match, page[:3000]
    return match.group(1)


def intake(client, bearer: str, external_id: str = "admin-test-1"):
    return client.post(
        "/api/v1/reports",
        json={"external_id": external_id, "targets": [{"reference": "post:77", "kind": "post"}]},
        headers={"Authorization": f"Bearer {bearer}"},
    )


def test_token_is_shown_once_stored_hashed_and_refused_once_revoked(app, client, world):
    csrf = admin(client)
    url = f"/admin/integrations/{world.integration_id}"
    response = post(client, f"{url}/tokens", csrf, label="Moderation bot")
    assert response.status_code == 201  # FOUR-4: the change's page, the token shown this once
    plaintext = issued_token(text(response))
    [change] = pending_changes()
    assert change.kind == "integration.token" and plaintext not in canonical_json(change.content)
    assert snapshot(IntegrationToken) == (1,)  # the demo's own token only
    assert intake(client, plaintext).status_code == 401  # usable only once a second admin approves
    assert plaintext not in text(client.get(f"/admin/changes/{change.id}"))
    assert approve_pending(app) == [change.id]

    row = db.session.scalar(select(IntegrationToken).where(IntegrationToken.label == "Moderation bot"))
    assert row.token_hash == sha256_hex(plaintext) and row.token_prefix == plaintext[:12]
    stored = [str(getattr(row, c.key)) for c in IntegrationToken.__table__.columns]
    assert not any(plaintext in value for value in stored)
    [event] = [e for e in audits("integration.token_issued") if row.id in e.details_json]
    assert plaintext not in event.details_json and event.actor_id == world.user("admin").id

    page = text(client.get(url))
    assert plaintext not in page  # never shown again
    assert row.token_prefix in page and "Moderation bot" in page and "never" in page

    assert intake(client, plaintext).status_code == 201
    db.session.rollback()
    assert db.session.get(IntegrationToken, row.id).last_used_at is not None

    response = post(client, f"{url}/tokens/{row.id}/revoke", csrf)
    assert response.status_code == 303
    db.session.rollback()
    assert db.session.get(IntegrationToken, row.id).revoked_at is not None
    assert len(audits("integration.token_revoked")) == 1
    assert "revoked" in text(client.get(url))

    refused = intake(client, plaintext, "admin-test-2")
    assert refused.status_code == 401 and refused.get_json()["error"]["code"] == "unauthorized"
    assert post(client, f"{url}/tokens/{row.id}/revoke", csrf).status_code == 303  # again: nothing changes
    assert len(audits("integration.token_revoked")) == 1


def test_token_label_too_long_is_refused(app, client, world):
    csrf = admin(client)
    before = snapshot()
    response = post(client, f"/admin/integrations/{world.integration_id}/tokens", csrf, label="L" * 201)
    page = assert_refused(response, 400, "token_label_invalid")
    assert 'id="issued-token"' not in page and 'value="' + "L" * 201 + '"' in page
    assert snapshot() == before


def test_another_installations_token_cannot_be_revoked(app, client, world, platform):
    other = other_world(platform)
    other_token = db.session.scalar(
        select(IntegrationToken).where(IntegrationToken.installation_id == other.installation_id)
    )
    csrf = admin(client)
    for url in (
        f"/admin/integrations/{world.integration_id}/tokens/{other_token.id}/revoke",
        f"/admin/integrations/{other.integration_id}/tokens/{other_token.id}/revoke",
    ):
        assert post(client, url, csrf).status_code == 404
    db.session.rollback()
    assert db.session.get(IntegrationToken, other_token.id).revoked_at is None
    assert intake(client, other.console_token).status_code == 201


def test_four8_the_token_form_names_the_tokens_a_new_one_succeeds(app, client, world):
    """FOUR-8: the form lists the integration's tokens (live or revoked) to succeed;
    the approving admin sees "succeeds token <prefix>… <label> (created …)" in the
    diff, and the approved token stands since the old one's standing. Naming a token
    of another integration: 400 ``token_succeeds_invalid``, nothing stored."""
    from app.services.admin.integrations import create_integration, issue_token
    from app.services.uow import Actor

    csrf = admin(client)
    url = f"/admin/integrations/{world.integration_id}"
    db.session.rollback()
    old = db.session.scalar(select(IntegrationToken).where(IntegrationToken.integration_id == world.integration_id))
    page = text(client.get(url))
    assert f'value="{old.id}"' in page and 'name="succeeds"' in page

    other_id = create_integration(world.user("admin"), name="Other", slug="other", default_queue_id=None)
    theirs = issue_token(other_id, label="theirs", actor=Actor.system())
    before = snapshot()
    refused = post(client, f"{url}/tokens", csrf, label="rotated", succeeds=theirs.token_id)
    assert_refused(refused, 400, "token_succeeds_invalid")
    assert snapshot() == before and pending_changes() == []

    response = post(client, f"{url}/tokens", csrf, label="rotated", succeeds=old.id)
    assert response.status_code == 201
    [change] = pending_changes()
    diff = text(client.get(f"/admin/changes/{change.id}"))
    assert f"token {old.label} (prefix {old.token_prefix}, created " in diff and "succeeds" in diff
    assert "may not be what they seem" not in diff  # FOUR-10: nothing of ours is flagged
    assert approve_pending(app) == [change.id]
    new = db.session.scalar(select(IntegrationToken).where(IntegrationToken.label == "rotated"))
    assert new.standing_since == old.standing_since < new.created_at
