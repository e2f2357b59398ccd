"""Approval policies edited as four-eyes changes (SPEC POL-1, POL-3, POL-5, FOUR-4):
the settings document proposed on /admin/approvals (or by the CLI) applies only when a
second admin approves it by its digest, as a new settings version; a bad document is
refused with its code and every problem, and stores nothing; an operator's team and
attributes are a change too; a component version declares whether its action can be
undone, which the change's digest covers, routing reads and the approval panel says."""

from __future__ import annotations

import json
import re

import pytest
from sqlalchemy import func, select

from app.domain.approval_policy import settings_to_json
from app.domain.approval_settings import normalised
from app.domain.digests import json_digest
from app.extensions import db
from app.models import ApprovalSettingsVersion, ComponentVersion, ConfigChange, OperatorUser
from app.services.admin.changes import change_digest

from ..builders import (
    PEER_AND_LEAD,
    approve_in_console,
    approve_pending,
    decide_report,
    login,
    pending_changes,
    set_graph,
)
from .test_admin import admin, assert_refused, audits, post, text
from .test_admin_components import spec

DOCUMENT = {
    **PEER_AND_LEAD,
    "emergency_review_seconds": 4 * 3600,
    "notify_webhook_url": "https://approvals.example.org/notify",
}


def versions() -> list[ApprovalSettingsVersion]:
    db.session.rollback()
    return list(db.session.scalars(select(ApprovalSettingsVersion).order_by(ApprovalSettingsVersion.version)))


def propose(client, csrf, document) -> object:
    text_ = document if isinstance(document, str) else json.dumps(document)
    return post(client, "/admin/approvals", csrf, settings=text_)


def test_pol3_settings_apply_only_when_a_second_admin_approves_them(app, client, world):
    """POL-3, FOUR-2: one admin's settings document is stored as a pending change whose
    digest binds the document, shown in words; its proposer cannot approve it; a second
    admin's approval writes version 1 (digest of the document, audited), which the admin
    page then shows in words and routing uses for proposals prepared after it."""
    csrf = admin(client)
    page = text(client.get("/admin/approvals"))
    assert "The built-in defaults are in force" in page
    assert "When an irreversible action: Two reviewers [two_reviewers]" in page  # the defaults in words
    response = propose(client, csrf, DOCUMENT)
    [change] = pending_changes()
    assert response.status_code == 303 and response.headers["Location"].endswith(f"/admin/changes/{change.id}")
    assert change.kind == "approval.settings" and versions() == []
    assert change.content == {"settings": normalised(DOCUMENT)}
    assert change.digest == change_digest(change.id, world.installation_id, change.kind, None, change.content)
    shown = text(client.get(f"/admin/changes/{change.id}"))
    assert "Waiting for a second admin." in shown
    assert "When every action: A peer and a lead [peer_and_lead]" in shown  # the change in words
    assert "1 lead (role reviewer, level = lead)" in shown and "an approval counts for 1 h" in shown
    assert f"/admin/changes/{change.id}" in text(client.get("/admin/approvals"))

    alone = approve_in_console(app, change.id, "admin@example.com")
    assert alone.status_code == 403 and "maker_checker_violation" in text(alone) and versions() == []
    assert approve_pending(app) == [change.id]
    [version] = versions()
    assert (version.version, version.change_id) == (1, change.id)
    assert version.settings == normalised(DOCUMENT) and version.settings_digest == json_digest(normalised(DOCUMENT))
    [audit] = audits("approval.settings_set")
    assert json.loads(audit.details_json)["config_change_id"] == change.id

    page = text(client.get("/admin/approvals"))
    assert "Version 1 of this installation" in page
    assert "1 peer (role reviewer); 1 rejection vetoes" in page
    assert "An approval counts for 1 h." in page and "A rejection needs a reason." in page
    assert "When every action: A peer and a lead [peer_and_lead]" in page
    assert "due within 4 h" in page and "https://approvals.example.org/notify" in page
    proposal = decide_report(world, 0)
    assert [p["key"] for p in proposal.approval_route["policies"]] == ["peer_and_lead"]


@pytest.mark.parametrize(
    ("document", "problem"),
    [
        ("{not json", "not valid JSON"),
        ({"policies": []}, "'routes' is a required property"),
        ({**PEER_AND_LEAD, "routes": [{"policies": ["peer_and_lead"], "min_items": "5"}]}, "At routes/0/min_items"),
        ({**PEER_AND_LEAD, "routes": [{"policies": ["nobody"]}]}, "unknown one (nobody)"),
        (
            {**PEER_AND_LEAD, "policies": [{**PEER_AND_LEAD["policies"][0], "ttl_seconds": 5}]},
            "the time to live must be 60 s to 30 days",
        ),
        (
            {"policies": [{"key": "boss", "label": "Boss", "factors": [{"key": "b", "label": "boss", "roles": ["boss"]}]}],
             "routes": []},
            "no such role boss",
        ),
        ({**PEER_AND_LEAD, "notify_webhook_url": "http://10.0.0.7/hook"}, "private or special-purpose address"),
        ({**PEER_AND_LEAD, "notify_webhook_url": "ftp://example.org/x"}, "must be an http:// or https:// URL"),
    ],
)
def test_pol3_a_bad_settings_document_is_refused_with_its_problems_and_nothing_stored(
    app, client, world, document, problem
):
    """POL-3: a document that is not JSON, of the wrong shape, naming an unknown policy or
    role, with a time to live out of range or a webhook egress would refuse: 400
    ``approval_settings_invalid`` naming the problem; no change, no version."""
    app.config["EGRESS_ALLOW_PRIVATE"] = False  # as in production (the tests' platforms are on loopback)
    csrf = admin(client)
    before = db.session.scalar(select(func.count()).select_from(ConfigChange))
    page = assert_refused(propose(client, csrf, document), 400, "approval_settings_invalid")
    assert problem in page.replace("&#39;", "'"), page[:3000]
    assert pending_changes() == [] and versions() == []
    assert db.session.scalar(select(func.count()).select_from(ConfigChange)) == before


def test_pol3_the_settings_in_force_again_store_nothing_and_only_admins_propose(app, client, world):
    """POL-3: proposing the settings in force is "nothing to change"; an auditor sees the
    page read-only and is refused (403) a proposal."""
    from app.domain.approval_policy import DEFAULT_SETTINGS

    csrf = admin(client)
    response = propose(client, csrf, settings_to_json(DEFAULT_SETTINGS))
    assert response.status_code == 303 and response.headers["Location"].endswith("/admin/approvals")
    assert pending_changes() == []
    auditor = app.test_client()
    token = login(auditor, "auditor@example.com")
    page = text(auditor.get("/admin/approvals"))
    assert "Read-only" in page and 'action="/admin/approvals"' not in page
    assert propose(auditor, token, DOCUMENT).status_code == 403 and pending_changes() == []


def test_pol3_the_cli_proposes_the_same_change(app, runner, world, tmp_path):
    """POL-3, FOUR-4: ``flask approval-settings --file`` stores the same pending change
    (the CLI is no way round a second admin); a bad file exits 1 with the code."""
    path = tmp_path / "settings.json"
    path.write_text(json.dumps(DOCUMENT))
    args = ["approval-settings", "--file", str(path), "--installation", "demo", "--proposer", "admin@example.com"]
    result = runner.invoke(args=args)
    assert result.exit_code == 0, result.output
    [change] = pending_changes()
    assert change.kind == "approval.settings" and change.digest in result.output and versions() == []
    path.write_text(json.dumps({**PEER_AND_LEAD, "routes": [{"policies": ["nobody"]}]}))
    bad = runner.invoke(args=args)
    assert bad.exit_code == 1 and "approval_settings_invalid" in bad.output and "unknown one (nobody)" in bad.output
    assert len(pending_changes()) == 1


def operator(operator_id: str) -> OperatorUser:
    db.session.rollback()
    return db.session.get(OperatorUser, operator_id)


def test_pol1_an_operators_team_and_attributes_are_a_four_eyes_change(app, client, world):
    """POL-1, FOUR-2: an operator's team and attributes (what eligibility reads) are
    proposed on their page and set when a second admin approves; then shown on the
    users list and the user's page. Bad input is refused with its code; nobody approves
    a change of their own attributes."""
    csrf = admin(client)
    reviewer = world.user("reviewer")
    url = f"/admin/users/{reviewer.id}/attributes"
    assert_refused(post(client, url, csrf, team="Trust Leads", attributes=""), 400, "operator_attributes_invalid")
    assert_refused(post(client, url, csrf, team="", attributes="level"), 400, "operator_attributes_invalid")
    assert pending_changes() == []
    response = post(client, url, csrf, team="trust-leads", attributes="level=lead\nregion = eu")
    [change] = pending_changes()
    assert response.status_code == 303 and change.kind == "operator.attributes"
    assert change.summary == f"Team and attributes of {reviewer.display_name} <{reviewer.email}>: trust-leads;" \
        " level=lead, region=eu"
    assert change.content == {"operator_id": reviewer.id, "team": "trust-leads",
                              "attributes": {"level": "lead", "region": "eu"}}
    assert (operator(reviewer.id).team, operator(reviewer.id).attributes) == (None, {})
    approve_pending(app)
    assert (operator(reviewer.id).team, operator(reviewer.id).attributes) == ("trust-leads",
                                                                                 {"level": "lead", "region": "eu"})
    assert "trust-leads, level=lead, region=eu" in text(client.get("/admin/users"))
    page = text(client.get(f"/admin/users/{reviewer.id}"))
    assert re.search(r'id="operator-team">trust-leads<', page) and "<code>level=lead</code>" in page

    other = world.user("admin2")
    post(client, f"/admin/users/{other.id}/attributes", csrf, team="", attributes="level=lead")
    [own] = pending_changes()
    refused = approve_in_console(app, own.id, "admin2@example.com")
    assert refused.status_code == 403 and "your own team or attributes" in text(refused)
    assert operator(other.id).attributes == {}


def test_pol5_an_irreversible_version_is_declared_routed_and_said_on_the_approval_panel(app, client, world):
    """POL-5, POL-3: a component version declared irreversible (the form's checkbox) is
    part of the change and its digest and shown on the change page; once approved, a
    proposal with it routes by default to two reviewers (recorded on the proposal), and
    its approval panel says in words that it cannot be undone; a reversible one does not."""
    csrf = admin(client)
    takedown = db.session.get(ComponentVersion, world.components["takedown"])
    url = f"/admin/components/{takedown.definition_id}/versions"
    data = spec(world, implementation_reference="POST /actions/takedown", irreversible="y")
    assert post(client, url, csrf, **data).status_code == 303
    [change] = pending_changes()
    assert change.content["irreversible"] is True
    assert change.digest == change_digest(change.id, world.installation_id, change.kind, change.subject_id,
                                          change.content)
    page = text(client.get(f"/admin/changes/{change.id}"))
    assert "irreversible" in change.summary and re.search(r"<th scope=\"row\">irreversible <strong>\(changes\)", page)
    assert approve_pending(app) == [change.id]
    version = db.session.scalar(
        select(ComponentVersion).where(ComponentVersion.definition_id == takedown.definition_id,
                                       ComponentVersion.version == 2)
    )
    assert version.irreversible is True
    assert "no — irreversible" in text(client.get(f"/admin/components/{takedown.definition_id}"))

    reversible = decide_report(world, 0)
    assert reversible.approval_route["irreversible"] is False
    assert [p["key"] for p in reversible.approval_route["policies"]] == ["default"]

    def use_irreversible(graph):
        graph["nodes"]["takedown"]["config"]["component_version_id"] = version.id

    set_graph(world, use_irreversible)
    proposal = decide_report(world, 1)
    route = proposal.approval_route
    assert route["irreversible"] is True and route["route_words"] == "an irreversible action"
    assert [p["key"] for p in route["policies"]] == ["two_reviewers"]
    assert route["policies"][0]["factors"][0]["count"] == 2

    reviewer = app.test_client()
    login(reviewer, "reviewer@example.com")
    panel = text(reviewer.get(f"/proposals/{proposal.id}"))
    assert "This action cannot be undone." in panel and "declares no compensation" in panel
    assert "cannot be undone" not in text(reviewer.get(f"/proposals/{reversible.id}"))
