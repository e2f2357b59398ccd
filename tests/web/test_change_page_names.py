"""What a second admin reviews is what it is (SPEC FOUR-10, part): a change's page names
connections by host and path, component versions by name, version and destination,
accounts by name and e-mail, never by bare ids; and it flags lookalike, invisible and
bidirectional characters in what the change would set."""

from __future__ import annotations

import html
import json

from app.extensions import db
from app.models import ComponentVersion, ConnectionVersion, WorkflowVersion

from ..builders import pending_changes
from .test_admin import admin, post, text
from .test_admin_components import spec
from .test_admin_workflows import graph_of


def page_of_only_change(client) -> str:
    [change] = pending_changes()
    return html.unescape(text(client.get(f"/admin/changes/{change.id}")))


def test_four10_a_component_change_names_its_connection_and_destination(app, client, world):
    """FOUR-10: hosts and paths, not the connection version's id."""
    csrf = admin(client)
    takedown = db.session.get(ComponentVersion, world.components["takedown"])
    connection = db.session.get(ConnectionVersion, world.connection_version_id)
    data = spec(world, implementation_reference="POST /nowhere", approval_mode="human")
    post(client, f"/admin/components/{takedown.definition_id}/versions", csrf, **data)
    page = page_of_only_change(client)
    base = connection.base_url.rstrip("/")
    assert f"Demo platform API v1 ({connection.base_url})" in page
    assert f"POST {base}/nowhere" in page and f"POST {base}/actions/takedown" in page  # proposed, and now
    assert world.connection_version_id not in page
    assert 'id="suspicious-warning"' not in page


def test_four10_a_workflow_change_lists_its_components_by_name(app, client, world):
    csrf = admin(client)
    workflow = db.session.get(WorkflowVersion, world.workflow_version_id)
    graph = json.dumps(graph_of(world))
    post(client, f"/admin/workflows/{workflow.definition_id}/versions", csrf, authority_mode="assist", graph=graph)
    page = page_of_only_change(client)
    assert "components used" in page and "Take down content v1: POST http" in page


def test_four10_an_account_change_names_the_account(app, client, world):
    csrf = admin(client)
    moderator = world.user("moderator")
    post(client, f"/admin/users/{moderator.id}/roles", csrf, roles=["moderator", "reviewer"])
    page = page_of_only_change(client)
    assert f"{moderator.display_name} <{moderator.email}>" in page


def test_four10_lookalike_invisible_and_bidi_characters_are_flagged_in_the_diff(app, client, world):
    """FOUR-10: a Cyrillic а and an RLO in a display name, a zero-width space in a label
    (a Cyrillic а in an e-mail is refused outright: test_invitations)."""
    csrf = admin(client)
    data = {"display_name": "\u0430dmin Second\u202eAdmin", "roles": "moderator"}
    post(client, "/admin/users", csrf, email="admin3@example.com", **data)
    page = page_of_only_change(client)
    assert 'id="suspicious-warning"' in page
    assert "U+0430</code> CYRILLIC SMALL LETTER A — looks like an ASCII character it is not" in page
    assert "U+202E</code> RIGHT-TO-LEFT OVERRIDE — reorders the text shown" in page
    [change] = pending_changes()
    db.session.rollback()
    from app.services.admin.reviews import reject_change

    reject_change(world.user("admin2"), change.id, "lookalike")
    post(client, "/admin/labels", csrf, kind="action", code="takedown", label="Send a friendly\u200b warning")
    page = page_of_only_change(client)
    assert "U+200B</code> ZERO WIDTH SPACE — invisible" in page
