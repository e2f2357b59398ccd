"""Admin screens for the platform kinds (SPEC PLAT-1, PLAT-3): a PDS component names its
operation and subject kind, a REST component its outcome mapping and read-back, both
validated at save with every problem listed; the connection form says where the PDS
admin password goes."""

from __future__ import annotations

import html
import json

import pytest

from ..builders import approve_pending
from .test_admin import admin, assert_refused, snapshot, text
from .test_admin_components import create, definition, versions_of

REST_REFERENCE = {
    "request": "POST /v2/moderation/requests",
    "body": "{post: target.reference, action: 'remove'}",
    "outcome": {"2xx": "request.state == 'done' && 'applied' || 'accepted'", "404": "'failed'"},
    "read_back": {
        "request": "GET /v2/posts/{target.reference}/moderation",
        "value": "visibility",
        "expected": "removed",
    },
}


def test_plat1_admin_saves_a_pds_component_with_its_subject_kind(app, client, world):
    """PLAT-1: an atproto_pds component's reference is its operation and subject kind."""
    csrf = admin(client)
    response = create(
        client, csrf, world, implementation_kind="atproto_pds", implementation_reference="takedown record"
    )
    assert response.status_code == 303, text(response)[:1000]
    approve_pending(app)  # FOUR-4: a second admin approves it
    [version] = versions_of(definition("suspend").id)
    assert (version.implementation_kind, version.implementation_reference) == ("atproto_pds", "takedown record")
    page = text(client.get(f"/admin/components/{version.definition_id}"))
    assert "takedown record" in page


def test_plat3_admin_saves_a_rest_component_with_its_outcome_mapping(app, client, world):
    """PLAT-3: a REST component's JSON reference (outcome mapping, read-back) is saved as typed."""
    csrf = admin(client)
    reference = json.dumps(REST_REFERENCE, indent=2)
    response = create(client, csrf, world, implementation_kind="rest", implementation_reference=reference)
    assert response.status_code == 303, text(response)[:1000]
    approve_pending(app)  # FOUR-4: a second admin approves it
    [version] = versions_of(definition("suspend").id)
    assert json.loads(version.implementation_reference) == REST_REFERENCE


@pytest.mark.parametrize(
    "kind, reference, shown",
    [
        ("atproto_pds", "POST /actions/takedown", "reversal account"),
        ("atproto_pds", "takedown post", "takedown record"),
        ("rest", "POST /v2/x", "not JSON"),
        ("rest", json.dumps({"request": "POST /x"}), "outcome must map status classes"),
        ("rest", json.dumps({**REST_REFERENCE, "outcome": {"4xx": "'failed'"}}), "needs a 2xx key"),
        ("rest", json.dumps({**REST_REFERENCE, "outcome": {"2xx": "a[?"}}), "is not a JMESPath expression"),
        ("rest", json.dumps({**REST_REFERENCE, "read_back": {"request": "GET /x/{token}"}}), "unknown placeholder"),
        ("rest", json.dumps({**REST_REFERENCE, "request": "POST //evil.example/x"}), "stays under"),
        ("rest", json.dumps({**REST_REFERENCE, "body": "x" * 9000}), "too long"),
    ],
)
def test_plat3_platform_references_are_validated_at_save(app, client, world, kind, reference, shown):
    """PLAT-1, PLAT-3: a reference the kind cannot use is refused with a clear error
    (each problem listed), nothing changes, and what was typed stays in the form."""
    csrf = admin(client)
    before = snapshot()
    page = assert_refused(
        create(client, csrf, world, implementation_kind=kind, implementation_reference=reference),
        400,
        "component_operation_invalid",
    )
    assert snapshot() == before
    assert shown in html.unescape(page)


def test_plat1_connection_form_says_the_pds_admin_password_is_its_secret(app, client, world):
    """PLAT-1: the PDS admin password is entered as the connection's secret, never shown again."""
    admin(client)
    page = html.unescape(text(client.get("/admin/connections")))
    assert "PDS admin password" in page and "Basic admin:<password>" in page
