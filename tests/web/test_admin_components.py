"""Admin: components (action types), their versions, and retiring a version."""

from __future__ import annotations

import json

import pytest
from sqlalchemy import select

from app.extensions import db
from app.models import ComponentDefinition, ComponentVersion

from ..builders import approve_in_console, approve_pending, pending_changes
from .test_admin import admin, assert_refused, audits, other_world, post, snapshot, text

INPUT_SCHEMA = {
    "type": "object",
    "required": ["reason_code"],
    "properties": {"reason_code": {"type": "string", "maxLength": 100}},
    "$defs": {"code": {"type": "string"}},
}
OUTPUT_SCHEMA = {"type": "object", "required": ["status"]}


def spec(world, **overrides) -> dict:
    return {
        "implementation_kind": "webhook",
        "implementation_reference": "POST /actions/suspend",
        "connection_version_id": world.connection_version_id,
        "input_schema": json.dumps(INPUT_SCHEMA, indent=2),
        "output_schema": json.dumps(OUTPUT_SCHEMA),
        "approval_mode": "human",
        **overrides,
    }


def create(client, csrf, world, **overrides):
    data = {"name": "Suspend account", "slug": "suspend", **spec(world), **overrides}
    return post(client, "/admin/components", csrf, **data)


def definition(slug: str) -> ComponentDefinition | None:
    db.session.rollback()
    return db.session.scalar(select(ComponentDefinition).where(ComponentDefinition.slug == slug))


def versions_of(definition_id: str) -> list[ComponentVersion]:
    db.session.rollback()
    return list(
        db.session.scalars(
            select(ComponentVersion)
            .where(ComponentVersion.definition_id == definition_id)
            .order_by(ComponentVersion.version)
        )
    )


def test_create_a_component_and_its_versions(app, client, world):
    csrf = admin(client)
    response = create(client, csrf, world)
    [creation] = pending_changes()  # FOUR-4: a human-mode component waits for a second admin too
    assert response.status_code == 303 and response.headers["Location"].endswith(f"/admin/changes/{creation.id}")
    assert approve_pending(app) == [creation.id]
    created = definition("suspend")
    assert (created.installation_id, created.effect_class, created.status) == (
        world.installation_id,
        "side_effecting",
        "active",
    )
    [first] = versions_of(created.id)
    assert (first.version, first.implementation_reference, first.connection_version_id) == (
        1,
        "POST /actions/suspend",
        world.connection_version_id,
    )
    assert (first.input_schema, first.output_schema, first.approval_policy) == (
        INPUT_SCHEMA,
        OUTPUT_SCHEMA,
        {"mode": "human"},
    )
    [event] = audits("admin.component_created")
    assert event.target_id == created.id and event.actor_id == world.user("admin").id

    page = text(client.get(f"/admin/components/{created.id}"))
    assert "<details" in page and "&#34;maxLength&#34;: 100" in page  # pretty-printed, escaped
    assert 'name="implementation_reference"' in page and "POST /actions/suspend" in page  # form starts from v1

    response = post(
        client,
        f"/admin/components/{created.id}/versions",
        csrf,
        **spec(world, implementation_reference="PATCH /v2/suspend", approval_mode="bounded_auto"),
    )
    assert response.status_code == 303
    [pending] = pending_changes()  # a bounded_auto version waits for a second admin (FOUR-2)
    assert response.headers["Location"].endswith(f"/admin/changes/{pending.id}")
    assert len(versions_of(created.id)) == 1 and audits("admin.component_version_created") == []
    assert approve_in_console(app, pending.id).status_code == 303
    second = versions_of(created.id)[1]
    assert (second.version, second.implementation_reference, second.approval_policy) == (
        2,
        "PATCH /v2/suspend",
        {"mode": "bounded_auto"},
    )
    [event] = audits("admin.component_version_created")
    assert json.loads(event.details_json)["version"] == 2


def test_retire_a_version(app, client, world):
    """FOUR-4: retiring waits for a second admin; retiring a retired version stores nothing."""
    csrf = admin(client)
    version = db.session.get(ComponentVersion, world.components["restore"])
    url = f"/admin/components/{version.definition_id}/versions/{version.id}/retire"
    assert post(client, url, csrf).status_code == 303
    db.session.rollback()
    assert db.session.get(ComponentVersion, version.id).retired_at is None
    [retirement] = pending_changes()
    assert retirement.kind == "component.retire" and approve_pending(app) == [retirement.id]
    retired_at = db.session.get(ComponentVersion, version.id).retired_at
    assert retired_at is not None
    assert post(client, url, csrf).status_code == 303 and pending_changes() == []  # again: nothing changes
    db.session.rollback()
    assert db.session.get(ComponentVersion, version.id).retired_at == retired_at
    [event] = audits("admin.component_version_retired")
    assert event.target_id == version.id
    page = text(client.get(f"/admin/components/{version.definition_id}"))
    assert "retired" in page and f'action="{url}"' not in page


@pytest.mark.parametrize(
    "overrides, status, code, shown",
    [
        ({"slug": "takedown"}, 409, "slug_taken", None),
        ({"name": ""}, 400, "name_invalid", None),
        ({"implementation_kind": "ftp"}, 400, "component_implementation_kind_invalid", None),
        ({"implementation_reference": "GET /actions/x"}, 400, "component_operation_invalid", None),
        ({"implementation_reference": "POST actions"}, 400, "component_operation_invalid", None),
        ({"implementation_reference": "POST /a b"}, 400, "component_operation_invalid", None),
        ({"implementation_reference": "POST /" + "a" * 500}, 400, "component_operation_invalid", None),
        ({"connection_version_id": "cnv_nope"}, 400, "connection_version_invalid", None),
        ({"connection_version_id": ""}, 400, "connection_version_invalid", None),
        ({"input_schema": "{not json"}, 400, "component_input_schema_invalid", "not valid JSON"),
        ({"input_schema": ""}, 400, "component_input_schema_invalid", "is required"),
        ({"input_schema": "[1, 2]"}, 400, "component_input_schema_invalid", "must be an object"),
        ({"input_schema": '{"type": "nope"}'}, 400, "component_input_schema_invalid", "not valid under any"),
        ({"input_schema": '{"$schema": 5}'}, 400, "component_input_schema_invalid", "$schema must be a string"),
        ({"input_schema": '{"$ref": "https://evil.example/s.json"}'}, 400, "component_input_schema_invalid", None),
        ({"input_schema": '{"$ref": "#/$defs/missing"}'}, 400, "component_input_schema_invalid", "points to nothing"),
        ({"input_schema": '{"maximum": NaN}'}, 400, "component_input_schema_invalid", None),
        ({"input_schema": '{"maximum": 1e400}'}, 400, "component_input_schema_invalid", None),
        ({"input_schema": '{"maximum": 9007199254740993}'}, 400, "component_input_schema_invalid", None),
        ({"input_schema": "[" * 5000 + "]" * 5000}, 400, "component_input_schema_invalid", None),
        ({"input_schema": " " * 100_001}, 400, "component_input_schema_invalid", None),
        ({"output_schema": '{"minLength": -1}'}, 400, "component_output_schema_invalid", "less than the minimum"),
        ({"approval_mode": "auto"}, 400, "approval_policy_invalid", None),
    ],
)
def test_component_refusals_change_nothing(app, client, world, overrides, status, code, shown):
    csrf = admin(client)
    before = snapshot()
    page = assert_refused(create(client, csrf, world, **overrides), status, code)
    assert snapshot() == before
    if shown:
        assert shown in page
    if "implementation_reference" in overrides and len(overrides["implementation_reference"]) < 100:
        assert overrides["implementation_reference"] in page  # what was typed is kept


def test_a_connection_version_of_another_installation_is_refused(app, client, world, platform):
    other = other_world(platform)
    csrf = admin(client)
    before = snapshot()
    response = create(client, csrf, world, connection_version_id=other.connection_version_id)
    assert_refused(response, 400, "connection_version_invalid")
    assert snapshot() == before
    page = text(client.get("/admin/components"))
    assert other.connection_version_id not in page and world.connection_version_id in page  # the choices


def test_another_installations_component_is_404(app, client, world, platform):
    other = other_world(platform)
    other_version = db.session.get(ComponentVersion, other.components["takedown"])
    csrf = admin(client)
    assert client.get(f"/admin/components/{other_version.definition_id}").status_code == 404
    before = snapshot()
    url = f"/admin/components/{other_version.definition_id}/versions"
    assert post(client, url, csrf, **spec(world)).status_code == 404
    assert post(client, f"{url}/{other_version.id}/retire", csrf).status_code == 404
    ours = db.session.get(ComponentVersion, world.components["takedown"])
    assert (
        post(client, f"/admin/components/{ours.definition_id}/versions/{other_version.id}/retire", csrf).status_code
        == 404
    )
    assert snapshot() == before
    db.session.rollback()
    assert db.session.get(ComponentVersion, other_version.id).retired_at is None
