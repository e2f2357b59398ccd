"""The admin screens: who may see them, who may change things, and tenant isolation.

The other ``test_admin_*.py`` modules test each section; the helpers below are
shared with them.
"""

from __future__ import annotations

import re

import pytest
from sqlalchemy import func, select

from app.extensions import db
from app.models import (
    AuditEvent,
    Budget,
    ComponentDefinition,
    ComponentVersion,
    ConfigChange,
    Connection,
    ConnectionVersion,
    Integration,
    IntegrationToken,
    OperatorUser,
    WorkflowDefinition,
    WorkflowVersion,
)
from app.services.admin.budgets import change_budget_limit
from app.services.uow import Actor

from ..builders import login, make_world

ALL_TABLES = (
    AuditEvent,
    Budget,
    ConfigChange,
    ComponentDefinition,
    ComponentVersion,
    Connection,
    ConnectionVersion,
    Integration,
    IntegrationToken,
    OperatorUser,
    WorkflowDefinition,
    WorkflowVersion,
)


# --- helpers shared by the test_admin_* modules ---------------------------------------


def snapshot(*models) -> tuple[int, ...]:
    """Row counts of the admin tables (all of them by default)."""
    db.session.rollback()
    return tuple(db.session.scalar(select(func.count()).select_from(m)) for m in (models or ALL_TABLES))


def audits(action: str) -> list[AuditEvent]:
    db.session.rollback()
    return list(db.session.scalars(select(AuditEvent).where(AuditEvent.action == action).order_by(AuditEvent.seq)))


def text(response) -> str:
    return response.get_data(as_text=True)


def post(client, url: str, token: str, **data):
    return client.post(url, data={"csrf_token": token, **data})


def admin(client) -> str:
    """Sign in as the demo admin; returns the CSRF token."""
    return login(client, "admin@example.com")


def other_world(platform):
    """A second installation (slug ``other``; its users' emails start with ``other-``)."""
    return make_world(platform.url, slug="other")


def assert_refused(response, status: int, code: str) -> str:
    """The answer is `status` and names `code` on the page; returns the page."""
    page = text(response)
    assert response.status_code == status, page[:2000]
    assert code in page, page[:2000]
    return page


def ids_for_paths(world) -> dict[str, str]:
    """A real id of the world's installation for each URL parameter of the admin routes."""
    from app.services.admin.erasure_requests import request_erasure
    from app.services.admin.integrations import issue_token

    token = issue_token(world.integration_id, label="t", actor=Actor.system())
    component_version = db.session.get(ComponentVersion, world.components["takedown"])
    workflow_version = db.session.get(WorkflowVersion, world.workflow_version_id)
    connection_version = db.session.get(ConnectionVersion, world.connection_version_id)
    budget = Budget(
        installation_id=world.installation_id,
        scope_type="workflow",
        scope_id=workflow_version.id,
        limit_amount=5,
        window_seconds=3600,
    )
    db.session.add(budget)
    db.session.commit()
    pending = change_budget_limit(world.user("admin"), budget.id, 50)  # a raise waits for a second admin
    erasure = request_erasure(world.user("admin"), "user:1", "Data subject request, ticket DSR-1")  # OPS-4
    from app.models import ProtectedSubject

    protected = ProtectedSubject(installation_id=world.installation_id, kind="account", subject_reference="user:1",
                                 reason="r")  # POL-4, as if two admins had marked it
    db.session.add(protected)
    db.session.commit()
    return {
        "protected_id": protected.id,
        "integration_id": world.integration_id,
        "token_id": token.token_id,
        "connection_id": connection_version.connection_id,
        "component_definition_id": component_version.definition_id,
        "component_version_id": component_version.id,
        "workflow_definition_id": workflow_version.definition_id,
        "workflow_version_id": workflow_version.id,
        "budget_id": budget.id,
        "operator_id": world.user("moderator").id,
        "change_id": pending.change_id,
        "erasure_id": erasure.id,
    }


def admin_urls(app, ids: dict[str, str], method: str) -> list[str]:
    """Every admin URL answering `method`, with real ids in its path."""
    urls = []
    for rule in app.url_map.iter_rules():
        if not rule.endpoint.startswith("admin.") or method not in rule.methods:
            continue
        values = {}
        for argument in rule.arguments:
            if argument in ("definition_id", "version_id"):
                kind = "workflow" if "workflow" in rule.endpoint else "component"
                key = f"{kind}_{argument.replace('_id', '')}_id"
                values[argument] = ids[key]
            else:
                values[argument] = ids[argument]
        urls.append(rule.build(values)[1])
    return sorted(urls)


# --- who may see and change ------------------------------------------------------------


def test_admin_sees_every_page_with_its_forms(app, client, world):
    ids = ids_for_paths(world)
    admin(client)
    for url in admin_urls(app, ids, "GET"):
        response = client.get(url)
        assert response.status_code == 200, url
    for url in (
        "/admin/integrations",
        "/admin/connections",
        "/admin/components",
        "/admin/budgets",
        "/admin/users",
        f"/admin/changes/{ids['change_id']}",
    ):
        assert re.search(r'<form method="post" action="/admin/', text(client.get(url))), url
    assert "Read-only" not in text(client.get("/admin/"))


def test_auditor_sees_every_page_without_forms_and_every_post_is_403(app, client, world):
    ids = ids_for_paths(world)
    token = login(client, "auditor@example.com")
    get_urls = admin_urls(app, ids, "GET")
    assert len(get_urls) >= 11
    for url in get_urls:
        response = client.get(url)
        assert response.status_code == 200, url
        page = text(response)
        assert 'action="/admin/' not in page, url
        assert "Read-only" in page, url
    post_urls = admin_urls(app, ids, "POST")
    assert len(post_urls) >= 20
    before = snapshot()
    for url in post_urls:
        response = post(
            client, url, token, name="x", slug="x", label="x", limit_amount="9", roles="admin", base_url="http://x"
        )
        assert response.status_code == 403, url
        assert "forbidden" in text(response)
    assert snapshot() == before


@pytest.mark.parametrize("email", ["moderator@example.com", "reviewer@example.com"])
def test_operators_without_admin_or_auditor_role_get_403(app, client, world, email):
    ids = ids_for_paths(world)
    token = login(client, email)
    for url in admin_urls(app, ids, "GET"):
        assert client.get(url).status_code == 403, url
    before = snapshot()
    for url in admin_urls(app, ids, "POST"):
        assert post(client, url, token, name="x", slug="x").status_code == 403, url
    assert snapshot() == before
    assert 'href="/admin/"' not in text(client.get("/proposals"))


def test_signed_out_visitors_are_sent_to_login(app, client, world):
    response = client.get("/admin/integrations")
    assert response.status_code == 302 and "/login" in response.headers["Location"]


def test_another_installations_ids_answer_404(app, client, world, platform):
    """Every detail page and every change of another installation's rows: 404, no data."""
    other = other_world(platform)
    other_ids = ids_for_paths(other)
    token = admin(client)
    for url in admin_urls(app, other_ids, "GET"):
        if url.count("/") <= 2:  # list pages show this installation's rows only
            page = text(client.get(url))
            assert "other-" not in page and other.integration_id not in page, url
            continue
        response = client.get(url)
        assert response.status_code == 404, url
        assert "not_found" in text(response)
    before = snapshot()
    for url in admin_urls(app, other_ids, "POST"):
        if url.count("/") <= 2:  # create routes take no id in the path
            continue
        response = post(
            client,
            url,
            token,
            label="x",
            limit_amount="9",
            roles="admin",
            base_url="http://x.example",
            timeout_seconds="5",
            allowed_hosts="x.example",
            bearer_token_action="none",
            signing_secret_action="none",
            implementation_kind="webhook",
            implementation_reference="POST /x",
            authority_mode="assist",
            graph="{}",
        )
        assert response.status_code == 404, url
    assert snapshot() == before


def test_lists_show_only_this_installations_rows(app, client, world, platform):
    other = other_world(platform)
    other_ids = ids_for_paths(other)
    markers = {
        "/admin/integrations": other_ids["integration_id"],
        "/admin/connections": other_ids["connection_id"],
        "/admin/components": other_ids["component_definition_id"],
        "/admin/workflows": other_ids["workflow_definition_id"],
        "/admin/budgets": other_ids["budget_id"],
        "/admin/users": "other-admin@example.com",
    }
    admin(client)
    for url, marker in markers.items():
        page = text(client.get(url))
        assert marker not in page, url
    ours = ids_for_paths(world)
    assert ours["connection_id"] in text(client.get("/admin/connections"))
    assert ours["budget_id"] in text(client.get("/admin/budgets"))
    assert "admin@example.com" in text(client.get("/admin/users"))


HOSTILE_VALUES = ["x\x00y", "é" * 5000, "<script>alert(1)</script>", "[" * 3000, " ", "-1e999"]
FIELDS = [
    "name",
    "slug",
    "label",
    "default_queue_id",
    "integration_id",
    "base_url",
    "bearer_token_action",
    "bearer_token",
    "signing_secret_action",
    "timeout_seconds",
    "allowed_hosts",
    "implementation_kind",
    "implementation_reference",
    "connection_version_id",
    "input_schema",
    "output_schema",
    "approval_mode",
    "authority_mode",
    "graph",
    "active",
    "scope_type",
    "scope_id",
    "limit_amount",
    "window_seconds",
    "email",
    "display_name",
    "password",
    "roles",
    "digest",
    "reason",
]


@pytest.mark.parametrize("value", HOSTILE_VALUES)
def test_hostile_input_never_answers_500(app, client, world, value):
    """NUL bytes, huge or nested text, markup: every admin form answers 2xx, 3xx or 4xx."""
    ids = ids_for_paths(world)
    token = admin(client)
    for url in admin_urls(app, ids, "POST"):
        if url.endswith(("/deactivate", "/revoke", "/retire")):
            continue  # buttons without fields; covered by their own tests
        response = post(client, url, token, **{name: value for name in FIELDS})
        assert response.status_code < 500, (url, text(response)[:500])
        assert "<script>alert(1)</script>" not in text(response)
    nul_ids = {key: "bad\x00id" for key in ids}
    for url in admin_urls(app, nul_ids, "GET"):
        assert client.get(url).status_code in (200, 404), url
    for url in admin_urls(app, nul_ids, "POST"):
        assert post(client, url, token).status_code < 500, url
