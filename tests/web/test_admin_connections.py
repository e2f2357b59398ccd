"""Admin: connections and their versions; secrets are never shown after saving."""

from __future__ import annotations

import base64
import json
import re

import pytest
from sqlalchemy import select

from app.domain.digests import canonical_json
from app.extensions import db
from app.models import Connection, ConnectionVersion

from ..builders import approve_in_console, approve_pending, pending_changes
from .test_admin import admin, assert_refused, audits, other_world, post, snapshot, text

SETTINGS = {
    "base_url": "https://api.acme.example/v2",
    "bearer_token_action": "set",
    "bearer_token": "acme-bearer-secret-1",
    "signing_secret_action": "none",
    "timeout_seconds": "15",
    "allowed_hosts": "api.acme.example\nfallback.acme.example",
}


def create(client, csrf, **overrides):
    data = {"name": "Acme API", "slug": "acme-api", "integration_id": "", **SETTINGS, **overrides}
    return post(client, "/admin/connections", csrf, **data)


def connection_by_slug(slug: str) -> Connection | None:
    db.session.rollback()
    return db.session.scalar(select(Connection).where(Connection.slug == slug))


def versions_of(connection_id: str) -> list[ConnectionVersion]:
    db.session.rollback()
    return list(
        db.session.scalars(
            select(ConnectionVersion)
            .where(ConnectionVersion.connection_id == connection_id)
            .order_by(ConnectionVersion.version)
        )
    )


def shown_secret(page: str) -> str:
    match = re.search(r'id="signing-secret"[^>]*value="(whsec_[^"]+)"', page)
    assert match, page[:3000]
    return match.group(1)


def test_create_with_a_bearer_token_redirects_and_never_shows_it(app, client, world):
    csrf = admin(client)
    response = create(client, csrf, integration_id=world.integration_id)
    [creation] = pending_changes()  # FOUR-4: a new connection waits for a second admin
    assert response.status_code == 303 and response.headers["Location"].endswith(f"/admin/changes/{creation.id}")
    assert connection_by_slug("acme-api") is None
    page = text(client.get(f"/admin/changes/{creation.id}"))
    assert "acme-bearer-secret-1" not in page and "https://api.acme.example" in page
    assert "acme-bearer-secret-1" not in canonical_json(creation.content)
    assert approve_pending(app) == [creation.id]
    connection = connection_by_slug("acme-api")
    assert (connection.installation_id, connection.integration_id) == (world.installation_id, world.integration_id)
    [version] = versions_of(connection.id)
    assert (version.version, version.base_url, version.timeout_seconds) == (1, SETTINGS["base_url"], 15)
    assert version.allowed_hosts == ["api.acme.example", "fallback.acme.example"]
    assert (version.bearer_token, version.signing_secret) == ("acme-bearer-secret-1", None)
    [event] = audits("admin.connection_created")
    assert event.actor_id == world.user("admin").id and event.target_id == connection.id
    details = json.loads(event.details_json)
    assert details["bearer_token"] == "set" and details["signing_secret"] == "not set"
    assert "acme-bearer-secret-1" not in event.details_json
    for url in ("/admin/connections", f"/admin/connections/{connection.id}"):
        page = text(client.get(url))
        assert "acme-bearer-secret-1" not in page and "not set" in page and ">set<" in page


def test_a_generated_signing_secret_is_shown_once(app, client, world):
    csrf = admin(client)
    response = create(client, csrf, signing_secret_action="generate", bearer_token_action="none", bearer_token="")
    assert response.status_code == 201
    secret = shown_secret(text(response))
    assert len(base64.b64decode(secret.removeprefix("whsec_"))) == 32
    assert connection_by_slug("acme-api") is None  # FOUR-4: usable once a second admin approves
    approve_pending(app)
    connection = connection_by_slug("acme-api")
    [version] = versions_of(connection.id)
    assert version.signing_secret == secret and version.bearer_token is None
    [event] = audits("admin.connection_created")
    assert secret not in event.details_json and json.loads(event.details_json)["signing_secret"] == "generated"
    page = text(client.get(f"/admin/connections/{connection.id}"))
    assert secret not in page and "signing-secret" not in page


def test_a_new_version_keeps_or_replaces_secrets(app, client, world):
    csrf = admin(client)
    create(client, csrf, signing_secret_action="generate")
    approve_pending(app)
    connection = connection_by_slug("acme-api")
    [first] = versions_of(connection.id)
    url = f"/admin/connections/{connection.id}/versions"
    keep = {
        **SETTINGS,
        "bearer_token_action": "keep",
        "bearer_token": "",
        "signing_secret_action": "keep",
        "timeout_seconds": "120",
    }
    assert post(client, url, csrf, **keep).status_code == 303
    assert len(versions_of(connection.id)) == 1  # FOUR-4: every connection version waits
    approve_pending(app)
    second = versions_of(connection.id)[1]
    assert (second.version, second.timeout_seconds) == (2, 120)
    assert (second.bearer_token, second.signing_secret) == (first.bearer_token, first.signing_secret)

    rotate = {**keep, "bearer_token_action": "none", "signing_secret_action": "generate", "timeout_seconds": "2.5"}
    response = post(client, url, csrf, **rotate)
    assert response.status_code == 201  # stored for a second admin (FOUR-2), the new secret shown once
    secret = shown_secret(text(response))
    [pending] = pending_changes()
    assert len(versions_of(connection.id)) == 2 and secret not in canonical_json(pending.content)
    assert secret not in text(client.get(f"/admin/changes/{pending.id}"))
    assert approve_in_console(app, pending.id).status_code == 303
    third = versions_of(connection.id)[2]
    assert (third.version, third.bearer_token, third.signing_secret, third.timeout_seconds) == (3, None, secret, 2.5)
    assert secret != first.signing_secret
    assert [json.loads(e.details_json)["version"] for e in audits("admin.connection_version_created")] == [2, 3]
    page = text(client.get(f"/admin/connections/{connection.id}"))
    assert secret not in page and first.signing_secret not in page and first.bearer_token not in page


@pytest.mark.parametrize(
    "overrides, status, code",
    [
        ({"slug": "demo-platform-api"}, 409, "slug_taken"),
        ({"slug": "Bad_Slug"}, 400, "slug_invalid"),
        ({"name": " "}, 400, "name_invalid"),
        ({"base_url": "ftp://api.acme.example"}, 400, "connection_url_invalid"),
        ({"base_url": "https://user:pw@api.acme.example"}, 400, "connection_url_invalid"),
        ({"base_url": "https://api.acme.example/x?token=1"}, 400, "connection_url_invalid"),
        ({"base_url": "https://api.acme.example:99999"}, 400, "connection_url_invalid"),
        ({"base_url": "not a url"}, 400, "connection_url_invalid"),
        ({"base_url": "https://" + "a" * 2000 + ".example"}, 400, "connection_url_invalid"),
        ({"timeout_seconds": "0"}, 400, "connection_timeout_invalid"),
        ({"timeout_seconds": "121"}, 400, "connection_timeout_invalid"),
        ({"timeout_seconds": "nan"}, 400, "connection_timeout_invalid"),
        ({"timeout_seconds": "ten"}, 400, "connection_timeout_invalid"),
        ({"allowed_hosts": "other.example"}, 400, "connection_allowed_hosts_invalid"),
        ({"allowed_hosts": ""}, 400, "connection_allowed_hosts_invalid"),
        ({"allowed_hosts": "api.acme.example https://evil.example/"}, 400, "connection_allowed_hosts_invalid"),
        ({"allowed_hosts": " ".join(f"h{n}.example" for n in range(51))}, 400, "connection_allowed_hosts_invalid"),
        ({"bearer_token": ""}, 400, "connection_bearer_token_invalid"),
        ({"bearer_token": "has space"}, 400, "connection_bearer_token_invalid"),
        ({"bearer_token": "x" * 501}, 400, "connection_bearer_token_invalid"),
        ({"bearer_token_action": "keep"}, 400, "connection_bearer_token_invalid"),
        ({"signing_secret_action": "keep"}, 400, "connection_signing_secret_invalid"),
        ({"signing_secret_action": "whsec_mine"}, 400, "connection_signing_secret_invalid"),
        ({"integration_id": "int_nope"}, 400, "integration_invalid"),
    ],
)
def test_connection_refusals_change_nothing(app, client, world, overrides, status, code):
    csrf = admin(client)
    before = snapshot()
    page = assert_refused(create(client, csrf, **overrides), status, code)
    assert snapshot() == before
    assert 'value="Acme API"' in page or overrides.get("name")  # input kept
    assert "acme-bearer-secret-1" not in page  # a secret is not echoed back


def test_new_version_refusals_change_nothing(app, client, world):
    csrf = admin(client)
    connection_id = db.session.get(ConnectionVersion, world.connection_version_id).connection_id
    url = f"/admin/connections/{connection_id}/versions"
    before = snapshot()
    for overrides, code in (
        ({"base_url": "javascript:alert(1)"}, "connection_url_invalid"),
        ({"timeout_seconds": "-1"}, "connection_timeout_invalid"),
        ({"bearer_token_action": "sometimes"}, "connection_bearer_token_invalid"),
    ):
        page = assert_refused(post(client, url, csrf, **{**SETTINGS, **overrides}), 400, code)
        assert "Versions" in page
    assert snapshot() == before


def test_another_installations_connection_is_404(app, client, world, platform):
    other = other_world(platform)
    other_connection = db.session.get(ConnectionVersion, other.connection_version_id).connection_id
    csrf = admin(client)
    assert client.get(f"/admin/connections/{other_connection}").status_code == 404
    before = snapshot()
    response = post(client, f"/admin/connections/{other_connection}/versions", csrf, **SETTINGS)
    assert response.status_code == 404
    assert snapshot() == before
    assert create(client, csrf, integration_id=other.integration_id).status_code == 400


def test_conn1_health_settings_are_set_per_connection_version(app, client, world):
    """CONN-1, CONN-2, CONN-3: a version's breaker threshold and probe delays, failure
    window and rate limit come from the form; a change of them waits for a second admin
    like any connection version (FOUR-4); bad values are refused, nothing changes."""
    csrf = admin(client)
    connection_id = db.session.get(ConnectionVersion, world.connection_version_id).connection_id
    url = f"/admin/connections/{connection_id}/versions"
    current = db.session.get(ConnectionVersion, world.connection_version_id)
    same = {
        "base_url": current.base_url,
        "bearer_token_action": "keep",
        "signing_secret_action": "keep",
        "timeout_seconds": "10",
        "allowed_hosts": "\n".join(current.allowed_hosts),
    }
    before = snapshot()
    for overrides, code in (
        ({"breaker_failure_threshold": "0"}, "connection_breaker_invalid"),
        ({"breaker_failure_threshold": "2.5"}, "connection_breaker_invalid"),
        ({"breaker_first_probe_seconds": "60", "breaker_max_probe_seconds": "30"}, "connection_breaker_invalid"),
        ({"failure_window_hours": "0"}, "connection_failure_window_invalid"),
        ({"rate_limit_per_second": "fast"}, "connection_rate_limit_invalid"),
    ):
        assert_refused(post(client, url, csrf, **{**same, **overrides}), 400, code)
    assert snapshot() == before
    settings = {
        "breaker_failure_threshold": "3",
        "breaker_first_probe_seconds": "10",
        "breaker_max_probe_seconds": "120",
        "failure_window_hours": "2",
        "rate_limit_per_second": "25",
    }
    assert post(client, url, csrf, **same, **settings).status_code == 303
    approve_pending(app)
    latest = versions_of(connection_id)[-1]
    assert (
        latest.breaker_failure_threshold,
        latest.breaker_first_probe_seconds,
        latest.breaker_max_probe_seconds,
        latest.failure_window_seconds,
        latest.rate_limit_per_second,
    ) == (3, 10, 120, 7200, 25)
    page = text(client.get(f"/admin/connections/{connection_id}"))
    assert "breaker after 3 failures, probe 10–120 s; disabled after 2 h; 25/s" in page
    assert 'data-breaker="closed"' in page
