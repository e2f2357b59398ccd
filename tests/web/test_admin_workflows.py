"""Admin: workflows, their versions, and which version decisions start."""

from __future__ import annotations

import json

import pytest
from sqlalchemy import select

from app.demo import enforcement_graph
from app.extensions import db
from app.models import WorkflowDefinition, WorkflowRun, WorkflowVersion

from ..builders import approve_pending, decide_report, pending_changes
from .test_admin import admin, assert_refused, audits, other_world, post, snapshot, text


def graph_of(world) -> dict:
    return enforcement_graph(world.components["takedown"], world.components["restore"])


def create(client, csrf, world, **overrides):
    data = {
        "name": "Escalation",
        "slug": "escalation",
        "authority_mode": "assist",
        "graph": json.dumps(graph_of(world)),
        **overrides,
    }
    return post(client, "/admin/workflows", csrf, **data)


def versions_of(definition_id: str) -> list[WorkflowVersion]:
    db.session.rollback()
    return list(
        db.session.scalars(
            select(WorkflowVersion)
            .where(WorkflowVersion.definition_id == definition_id)
            .order_by(WorkflowVersion.version)
        )
    )


def test_create_a_workflow_inactive_then_a_version_activated(app, client, world):
    csrf = admin(client)
    response = create(client, csrf, world)
    assert response.status_code == 303
    assert len(approve_pending(app)) == 1  # FOUR-4: a second admin approves every workflow
    created = db.session.scalar(select(WorkflowDefinition).where(WorkflowDefinition.slug == "escalation"))
    [first] = versions_of(created.id)
    assert (first.version, first.authority_mode, first.active, first.graph) == (1, "assist", False, graph_of(world))
    [event] = audits("admin.workflow_created")
    assert event.target_id == created.id and event.actor_id == world.user("admin").id

    page = text(client.get(f"/admin/workflows/{created.id}"))
    assert "inactive" in page and "&#34;start&#34;: &#34;takedown&#34;" in page

    response = post(
        client,
        f"/admin/workflows/{created.id}/versions",
        csrf,
        authority_mode="shadow",
        graph=json.dumps(graph_of(world)),
        active="y",
    )
    assert response.status_code == 303 and len(versions_of(created.id)) == 1
    assert len(approve_pending(app)) == 1
    second = versions_of(created.id)[1]
    assert (second.version, second.authority_mode, second.active) == (2, "shadow", True)
    assert len(audits("admin.workflow_version_created")) == 1
    assert "in use" in text(client.get(f"/admin/workflows/{created.id}"))


def test_deactivating_the_version_stops_decisions_starting_it(app, client, world):
    csrf = admin(client)
    version = db.session.get(WorkflowVersion, world.workflow_version_id)
    base = f"/admin/workflows/{version.definition_id}/versions/{version.id}"
    assert post(client, f"{base}/deactivate", csrf).status_code == 303
    db.session.rollback()
    assert db.session.get(WorkflowVersion, version.id).active is True  # FOUR-4: it waits for a second admin
    [change] = pending_changes()
    assert change.kind == "workflow.active" and approve_pending(app) == [change.id]
    assert db.session.get(WorkflowVersion, version.id).active is False
    assert [e.target_id for e in audits("admin.workflow_version_deactivated")] == [version.id]
    assert post(client, f"{base}/deactivate", csrf).status_code == 303  # again: nothing changes
    assert len(audits("admin.workflow_version_deactivated")) == 1 and pending_changes() == []

    assert decide_report(world, 0) is None  # no active version: no run, no proposal
    assert db.session.scalar(select(WorkflowRun.id)) is None

    assert post(client, f"{base}/activate", csrf).status_code == 303
    assert len(approve_pending(app)) == 1
    assert len(audits("admin.workflow_version_activated")) == 1
    assert decide_report(world, 1) is not None


@pytest.mark.parametrize(
    "overrides, status, code, shown",
    [
        ({"slug": "enforcement"}, 409, "slug_taken", None),
        ({"slug": ""}, 400, "slug_invalid", None),
        ({"authority_mode": "god"}, 400, "workflow_authority_mode_invalid", None),
        ({"graph": ""}, 400, "workflow_graph_invalid", "is required"),
        ({"graph": "{nodes"}, 400, "workflow_graph_invalid", "not valid JSON"),
        ({"graph": "[]"}, 400, "workflow_graph_invalid", "must be a JSON object"),
        ({"graph": '{"nodes": {}}'}, 400, "workflow_graph_invalid", "non-empty"),
        ({"graph": "x" * 200_001}, 400, "workflow_graph_invalid", "longer than"),
    ],
)
def test_workflow_refusals_change_nothing(app, client, world, overrides, status, code, shown):
    csrf = admin(client)
    before = snapshot()
    page = assert_refused(create(client, csrf, world, **overrides), status, code)
    assert snapshot() == before
    if shown:
        assert shown in page
    assert 'value="Escalation"' in page  # what was typed is kept


def test_every_graph_problem_is_listed(app, client, world):
    graph = {
        "trigger": {"decision_codes": "remove_content"},
        "start": "nowhere",
        "nodes": {"a": {"type": "script"}, "b": {"type": "action", "next": {"maybe": "a"}}},
    }
    csrf = admin(client)
    before = snapshot()
    page = assert_refused(create(client, csrf, world, graph=json.dumps(graph)), 400, "workflow_graph_invalid")
    for message in (
        "&#39;start&#39; must name a node.",
        "&#39;trigger.decision_codes&#39; must be a list of decision codes.",
        "Node &#39;a&#39; must be an object with type &#39;action&#39;.",
        "Node &#39;b&#39;: next[&#39;maybe&#39;] must map a port to a node.",
    ):
        assert f"<li>{message}</li>" in page, message
    assert "4 problems" in page
    assert snapshot() == before


def test_a_graph_naming_another_installations_component_is_refused(app, client, world, platform):
    other = other_world(platform)
    graph = enforcement_graph(other.components["takedown"], world.components["restore"])
    csrf = admin(client)
    before = snapshot()
    page = assert_refused(create(client, csrf, world, graph=json.dumps(graph)), 400, "workflow_graph_invalid")
    assert "config.component_version_id must name one of this installation" in page
    version = db.session.get(WorkflowVersion, world.workflow_version_id)
    response = post(
        client,
        f"/admin/workflows/{version.definition_id}/versions",
        csrf,
        authority_mode="assist",
        graph=json.dumps(enforcement_graph(world.components["takedown"], other.components["restore"])),
    )
    assert "config.correction.component_version_id" in assert_refused(response, 400, "workflow_graph_invalid")
    assert snapshot() == before


def test_another_installations_workflow_is_404(app, client, world, platform):
    other = other_world(platform)
    other_version = db.session.get(WorkflowVersion, other.workflow_version_id)
    csrf = admin(client)
    assert client.get(f"/admin/workflows/{other_version.definition_id}").status_code == 404
    before = snapshot()
    base = f"/admin/workflows/{other_version.definition_id}/versions"
    graph = json.dumps(graph_of(other))
    assert post(client, base, csrf, authority_mode="assist", graph=graph).status_code == 404
    assert post(client, f"{base}/{other_version.id}/deactivate", csrf).status_code == 404
    ours = db.session.get(WorkflowVersion, world.workflow_version_id)
    url = f"/admin/workflows/{ours.definition_id}/versions/{other_version.id}/deactivate"
    assert post(client, url, csrf).status_code == 404
    assert snapshot() == before
    db.session.rollback()
    assert db.session.get(WorkflowVersion, other_version.id).active is True
