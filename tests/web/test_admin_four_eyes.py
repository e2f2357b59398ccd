"""The break-it findings about configuration that let one admin act alone (SPEC FOUR-2,
FOUR-3, SEC-4), reproduced through the admin screens."""

from __future__ import annotations

import json
import re

import pytest
from sqlalchemy import select

from app.demo import enforcement_graph
from app.extensions import db
from app.models import Budget, ComponentVersion, ConnectionVersion, WorkflowVersion
from app.services.lifecycle.dispatch import deliver

from ..builders import approve, approve_in_console, decide_report, login, pending_changes, reload, run_worker
from ..scripted import receipt_for
from .test_admin import admin, assert_refused, post, snapshot, text
from .test_admin_components import spec


def newest(model, **where):
    db.session.rollback()
    statement = select(model).order_by(model.created_at.desc(), model.version.desc())
    for column, value in where.items():
        statement = statement.where(getattr(model, column) == value)
    return db.session.scalars(statement).first()


def test_one_admin_cannot_switch_a_workflow_to_bounded_auto(app, client, world, platform):
    """FOUR-2: publishing bounded_auto component and workflow versions alone changes
    nothing, so a moderator's decision still waits for a reviewer (it used to be applied
    with nobody else involved)."""
    csrf = admin(client)
    takedown = db.session.get(ComponentVersion, world.components["takedown"])
    response = post(
        client,
        f"/admin/components/{takedown.definition_id}/versions",
        csrf,
        **spec(world, implementation_reference="POST /actions/takedown", approval_mode="bounded_auto"),
    )
    assert response.status_code == 303
    component = newest(ComponentVersion, definition_id=takedown.definition_id)
    workflow = db.session.get(WorkflowVersion, world.workflow_version_id)
    graph = enforcement_graph(component.id, world.components["restore"], "bounded_auto")
    response = post(
        client,
        f"/admin/workflows/{workflow.definition_id}/versions",
        csrf,
        authority_mode="bounded_auto",
        graph=json.dumps(graph),
        active="y",
    )
    assert response.status_code == 303
    assert newest(ComponentVersion, definition_id=takedown.definition_id).approval_policy == {"mode": "human"}
    assert newest(WorkflowVersion, definition_id=workflow.definition_id).authority_mode == "assist"
    assert [c.kind for c in pending_changes()] == ["component.version", "workflow.version"]

    proposal = decide_report(world)
    run_worker(app)
    assert reload(proposal).state == "approval_required"
    assert platform.state.effects == [] and platform.state.requests_seen == 0


def test_a_new_origin_cannot_keep_the_stored_secrets(app, client, world, httpserver):
    """SEC-4: a version whose base URL has another origin (here another port) must not
    keep the bearer token and signing secret: 400, and no version is saved."""
    csrf = admin(client)
    current = db.session.get(ConnectionVersion, world.connection_version_id)
    evil = httpserver.url_for("/")
    before = snapshot()
    response = post(
        client,
        f"/admin/connections/{current.connection_id}/versions",
        csrf,
        base_url=evil,
        bearer_token_action="keep",
        signing_secret_action="keep",
        timeout_seconds="5",
        allowed_hosts="127.0.0.1\nlocalhost",
    )
    assert_refused(response, 400, "connection_secrets_reentry_required")
    assert snapshot() == before
    assert newest(ConnectionVersion, connection_id=current.connection_id).id == current.id


def propose_bounded_auto(client, csrf, world) -> str:
    """The admin publishes bounded_auto takedown (approved by admin2) and proposes a
    bounded_auto workflow version using it; returns the workflow change's id."""
    takedown = db.session.get(ComponentVersion, world.components["takedown"])
    post(
        client,
        f"/admin/components/{takedown.definition_id}/versions",
        csrf,
        **spec(world, implementation_reference="POST /actions/takedown", approval_mode="bounded_auto"),
    )
    [component_change] = pending_changes()
    assert approve_in_console(app_of(client), component_change.id).status_code == 303
    component = newest(ComponentVersion, definition_id=takedown.definition_id)
    assert component.approval_policy == {"mode": "bounded_auto"}
    workflow = db.session.get(WorkflowVersion, world.workflow_version_id)
    graph = enforcement_graph(component.id, world.components["restore"], "bounded_auto")
    response = post(
        client,
        f"/admin/workflows/{workflow.definition_id}/versions",
        csrf,
        authority_mode="bounded_auto",
        graph=json.dumps(graph),
        active="y",
    )
    [workflow_change] = pending_changes()
    assert response.headers["Location"].endswith(f"/admin/changes/{workflow_change.id}")
    return workflow_change.id


def app_of(client):
    return client.application


def test_two_admins_make_it_bounded_auto_and_still_no_budget_means_nothing_sent(app, client, world, platform):
    """FOUR-2, FOUR-3: both versions apply once a second admin approves them; with no
    budget covering the workflow the action fails ``action_budget_missing`` and the
    platform sees no request; a budget then lets it through."""
    csrf = admin(client)
    change_id = propose_bounded_auto(client, csrf, world)
    assert newest(WorkflowVersion, installation_id=world.installation_id).authority_mode == "assist"
    assert approve_in_console(app, change_id).status_code == 303
    version = newest(WorkflowVersion, installation_id=world.installation_id)
    assert (version.authority_mode, version.active) == ("bounded_auto", True)

    proposal = decide_report(world)
    assert proposal.state == "queued"
    run_worker(app)
    row = reload(proposal)
    assert (row.state, row.last_error_code, row.delivery_terminal) == ("failed", "action_budget_missing", True)
    assert platform.state.requests_seen == 0

    response = post(
        client,
        "/admin/budgets",
        csrf,
        scope_type="workflow",
        scope_id=version.id,
        limit_amount="3",
        window_seconds="3600",
    )
    assert response.status_code == 303 and reload(proposal).state == "failed"  # FOUR-4: a budget waits too
    [budget] = pending_changes()
    assert budget.kind == "budget.create" and approve_in_console(app, budget.id).status_code == 303
    second = decide_report(world, 1)
    run_worker(app)
    assert reload(second).state == "applied" and platform.state.requests_seen == 1


def test_the_change_screens(app, client, world):
    """FOUR-2: the pending list (and its count on the admin index), the change with its
    digest and diff, the proposer's disabled approval, a forged POST, a wrong digest,
    the second admin's approval, and the history; auditors look, never decide."""
    csrf = admin(client)
    budget_id = create_budget(client, csrf, world)
    post(client, f"/admin/budgets/{budget_id}/limit", csrf, limit_amount="40")
    [change] = pending_changes()
    assert '<span class="badge" id="pending-changes">1 waiting</span>' in text(client.get("/admin/"))
    listing = text(client.get("/admin/changes"))
    assert "Waiting for a second admin (1)" in listing and "limit 4 → 40" in listing

    page = text(client.get(f"/admin/changes/{change.id}"))
    assert f'<code id="change-digest">{change.digest}</code>' in page
    assert "It raises a budget&#39;s limit from 4 to 40." in page
    assert re.search(r'<tr class="changed">\s*<th scope="row">limit amount <strong>\(changes\)</strong></th>', page)
    assert "<td><code>4</code></td>\n      <td><code>40</code></td>" in page
    assert "You proposed this change; a second admin must approve it." in page
    assert f'action="/admin/changes/{change.id}/approve"' not in page

    second = app.test_client()
    with app.app_context():
        token = login(second, "admin2@example.com")  # audited (OPS-2): before the snapshot
    before = snapshot()
    forged = post(client, f"/admin/changes/{change.id}/approve", csrf, digest=change.digest)
    assert_refused(forged, 403, "maker_checker_violation")
    assert snapshot() == before

    with app.app_context():
        page = text(second.get(f"/admin/changes/{change.id}"))
        assert f'action="/admin/changes/{change.id}/approve"' in page
        wrong = post(second, f"/admin/changes/{change.id}/approve", token, digest="sha256:" + "f" * 64)
        assert 'value="sha256:ffff' in assert_refused(wrong, 409, "config_change_digest_mismatch")
        assert snapshot() == before
        ok = post(second, f"/admin/changes/{change.id}/approve", token, digest=change.digest)
        assert ok.status_code == 303 and ok.headers["Location"].endswith(f"/admin/changes/{change.id}")
    db.session.rollback()
    assert db.session.get(Budget, budget_id).limit_amount == 40
    page = text(client.get(f"/admin/changes/{change.id}"))
    assert "state-applied" in page and "Arne Admin (admin2@example.com)" in page and "What it set" in page
    assert "Nothing waits for a second admin." in text(client.get("/admin/changes"))
    assert "limit 4 → 40" in text(client.get("/admin/changes"))  # in the history

    auditor = app.test_client()
    with app.app_context():
        token = login(auditor, "auditor@example.com")
        for url in ("/admin/changes", f"/admin/changes/{change.id}"):
            page = text(auditor.get(url))
            assert "Read-only" in page and 'action="/admin/' not in page
        assert post(auditor, f"/admin/changes/{change.id}/reject", token, reason="no").status_code == 403


def create_budget(client, csrf, world) -> str:
    """A budget of 4 for the takedown component, proposed and approved by a second admin (FOUR-4)."""
    post(
        client,
        "/admin/budgets",
        csrf,
        scope_type="component",
        scope_id=world.components["takedown"],
        limit_amount="4",
        window_seconds="3600",
    )
    [change] = pending_changes()
    assert approve_in_console(client.application, change.id).status_code == 303
    db.session.rollback()
    return db.session.scalar(select(Budget.id))


def test_rejecting_in_the_console(app, client, world):
    """FOUR-2: a rejected change applies nothing and shows its reason in the history."""
    csrf = admin(client)
    user_id = world.user("moderator").id
    post(client, f"/admin/users/{user_id}/roles", csrf, roles=["moderator", "admin"])
    [change] = pending_changes()
    second = app.test_client()
    with app.app_context():
        token = login(second, "admin2@example.com")
        before = snapshot()
        assert_refused(
            post(second, f"/admin/changes/{change.id}/reject", token, reason=""), 400, "config_change_reason_invalid"
        )
        assert snapshot() == before
        response = post(second, f"/admin/changes/{change.id}/reject", token, reason="Maya moderates; no admin role.")
        assert response.status_code == 303
    assert world.user("moderator").roles == {"moderator"}
    page = text(client.get(f"/admin/changes/{change.id}"))
    assert "state-rejected" in page and "Maya moderates; no admin role." in page
    assert f'action="/admin/changes/{change.id}/approve"' not in page


def test_a_new_destination_gets_only_the_secrets_entered_for_it(app, client, world, httpserver):
    """SEC-4, FOUR-2: the admin moves the connection with new secrets; a second admin
    approves; the delivery there carries the new token and signature, never the old."""
    from standardwebhooks import Webhook, WebhookVerificationError
    from werkzeug import Response

    arrived = []

    def platform(request):
        arrived.append((dict(request.headers), request.get_data()))
        body = json.loads(request.get_data())
        return Response(json.dumps(receipt_for(body)), content_type="application/json")

    httpserver.expect_request("/actions/takedown", method="POST").respond_with_handler(platform)
    csrf = admin(client)
    current = db.session.get(ConnectionVersion, world.connection_version_id)
    response = post(
        client,
        f"/admin/connections/{current.connection_id}/versions",
        csrf,
        base_url=httpserver.url_for("/").rstrip("/"),
        bearer_token_action="set",
        bearer_token="token-for-the-new-host",
        signing_secret_action="generate",
        timeout_seconds="5",
        allowed_hosts="127.0.0.1",
    )
    assert response.status_code == 201
    secret = re.search(r'id="signing-secret"[^>]*value="(whsec_[^"]+)"', text(response)).group(1)
    [change] = pending_changes()
    assert newest(ConnectionVersion, connection_id=current.connection_id).id == current.id  # nothing yet
    assert approve_in_console(app, change.id).status_code == 303
    moved = newest(ConnectionVersion, connection_id=current.connection_id)

    takedown = db.session.get(ComponentVersion, world.components["takedown"])
    post(
        client,
        f"/admin/components/{takedown.definition_id}/versions",
        csrf,
        **spec(world, implementation_reference="POST /actions/takedown", connection_version_id=moved.id),
    )
    [change] = pending_changes()  # FOUR-4: a human-mode version waits for a second admin too
    assert approve_in_console(app, change.id).status_code == 303
    component = newest(ComponentVersion, definition_id=takedown.definition_id)
    workflow = db.session.get(WorkflowVersion, world.workflow_version_id)
    graph = enforcement_graph(component.id, world.components["restore"])
    post(
        client,
        f"/admin/workflows/{workflow.definition_id}/versions",
        csrf,
        authority_mode="assist",
        graph=json.dumps(graph),
        active="y",
    )
    [change] = pending_changes()
    assert approve_in_console(app, change.id).status_code == 303
    proposal = decide_report(world)
    approve(world, proposal)
    deliver(proposal.id)
    assert reload(proposal).state == "applied"
    [(headers, body)] = arrived
    assert headers["Authorization"] == "Bearer token-for-the-new-host" != f"Bearer {world.platform_token}"
    Webhook(secret).verify(body, headers)
    with pytest.raises(WebhookVerificationError):
        Webhook(world.signing_secret).verify(body, headers)
