"""Configuration is four-eyes as a class (SPEC FOUR-4): every admin route and CLI
command is declared four-eyes, single-admin (with why it is harmless) or not a
configuration write; and each kind of pending change, made by one admin through the
console, changes nothing until a second admin approves it."""

from __future__ import annotations

import json

import pytest
from sqlalchemy import select

from app.domain.config_changes import (
    FOUR_EYES_WRITES,
    NOT_CONFIGURATION_BLUEPRINTS,
    NOT_CONFIGURATION_WRITES,
    SINGLE_ADMIN_WRITES,
    ChangeKind,
    second_admin_reasons,
)
from app.extensions import db
from app.models import (
    OperatorInvitation,
    Budget,
    CodeLabel,
    ComponentDefinition,
    ComponentVersion,
    Connection,
    ConnectionVersion,
    IntegrationToken,
    OperatorUser,
    Queue,
    WorkflowDefinition,
    WorkflowVersion,
)
from app.services.uow import unit_of_work

from ..builders import approve_pending, pending_changes, set_row
from .test_admin import admin, post, snapshot, text
from .test_admin_components import create as create_component
from .test_admin_components import spec
from .test_admin_connections import SETTINGS
from .test_admin_connections import create as create_connection
from .test_admin_workflows import create as create_workflow
from .test_admin_workflows import graph_of

WRITE_METHODS = {"POST", "PUT", "PATCH", "DELETE"}


def write_endpoints(app) -> dict[str, str]:
    """Every route that accepts a write: endpoint -> URL rule."""
    return {rule.endpoint: rule.rule for rule in app.url_map.iter_rules() if rule.methods & WRITE_METHODS}


def test_four4_every_admin_route_and_cli_command_is_declared(app):
    """FOUR-4: a write route or CLI command in none of the lists fails this test, so a
    new one cannot apply configuration alone unnoticed; no list names one that is gone."""
    declared = FOUR_EYES_WRITES.keys() | SINGLE_ADMIN_WRITES.keys()
    routes = write_endpoints(app)
    for endpoint, rule in routes.items():
        blueprint = endpoint.split(".", 1)[0]
        if rule.startswith("/admin") or blueprint == "admin":
            assert endpoint in declared, f"{endpoint} ({rule}) is neither four-eyes nor a single-admin write"
        else:
            assert blueprint in NOT_CONFIGURATION_BLUEPRINTS, f"{endpoint} ({rule}) writes: declare it"
    commands = {f"cli:{name}" for name in app.cli.commands}
    for command in commands:
        assert command in declared | NOT_CONFIGURATION_WRITES.keys(), f"{command} is not declared"
    for name in declared | NOT_CONFIGURATION_WRITES.keys():
        assert name in commands or name in routes, f"{name} is declared but does not exist"
    assert not NOT_CONFIGURATION_WRITES.keys() & declared
    for reason in (*SINGLE_ADMIN_WRITES.values(), *NOT_CONFIGURATION_WRITES.values()):
        assert reason.endswith(".") and len(reason) > 20
    assert {"cli:demo", "cli:sweep", "cli:verify-audit"} <= NOT_CONFIGURATION_WRITES.keys()
    assert {kind for kinds in FOUR_EYES_WRITES.values() for kind in kinds} == set(ChangeKind)
    assert set(CASES) == set(ChangeKind), "each kind needs a behavioural case below"


@pytest.mark.parametrize("kind", list(ChangeKind))
def test_four4_every_kind_needs_a_second_admin_for_its_plain_case(kind):
    """FOUR-4: with nothing making it harmless, every kind of change gives a reason."""
    plain = {
        ChangeKind.BUDGET_LIMIT: ({"limit_amount": 5}, {"limit_amount": 4}),
        ChangeKind.BUDGET_ACTIVE: ({"active": True}, {"active": False}),
        ChangeKind.OPERATOR_ROLES: ({"roles": ["moderator"]}, {"roles": []}),
        ChangeKind.CONNECTION_VERSION: ({"base_url": "https://a.example/v2"}, {"base_url": "https://a.example/v1"}),
    }
    proposed, current = plain.get(kind, ({}, None))
    assert second_admin_reasons(kind, proposed, current)


# -- one case per kind: (url, form data), and what must not change before approval ---------


def _count(model):
    def observe():
        db.session.rollback()
        return snapshot(model)

    return observe


def _column(model, row_id, column):
    def observe():
        db.session.rollback()
        return getattr(db.session.get(model, row_id), column)

    return observe


def _budget(world, active: bool = True) -> str:
    """A budget written directly (this test is about the change, not about creating budgets)."""
    with unit_of_work() as uow:
        queue = uow.session.scalar(select(Queue).where(Queue.installation_id == world.installation_id))
        budget = Budget(
            installation_id=world.installation_id,
            scope_type="queue",
            scope_id=queue.id,
            metric="actions",
            limit_amount=4,
            window_seconds=3600,
            used_amount=0,
            active=active,
        )
        uow.session.add(budget)
        uow.commit()
        return budget.id


def _takedown(world) -> ComponentVersion:
    return db.session.get(ComponentVersion, world.components["takedown"])


def _workflow(world) -> WorkflowVersion:
    return db.session.get(WorkflowVersion, world.workflow_version_id)


def _connection_id(world) -> str:
    return db.session.get(ConnectionVersion, world.connection_version_id).connection_id


def case_workflow_create(client, csrf, world):
    return _count(WorkflowDefinition), lambda: create_workflow(client, csrf, world)


def case_workflow_version(client, csrf, world):
    url = f"/admin/workflows/{_workflow(world).definition_id}/versions"
    graph = json.dumps(graph_of(world))
    return _count(WorkflowVersion), lambda: post(client, url, csrf, authority_mode="assist", graph=graph, active="y")


def case_workflow_active(client, csrf, world):
    version = _workflow(world)
    url = f"/admin/workflows/{version.definition_id}/versions/{version.id}/deactivate"
    return _column(WorkflowVersion, version.id, "active"), lambda: post(client, url, csrf)


def case_component_create(client, csrf, world):
    return _count(ComponentDefinition), lambda: create_component(client, csrf, world)


def case_component_version(client, csrf, world):
    """The red team's finding: a human-mode version posting elsewhere applied alone."""
    url = f"/admin/components/{_takedown(world).definition_id}/versions"
    data = spec(world, implementation_reference="POST /nowhere", approval_mode="human")
    return _count(ComponentVersion), lambda: post(client, url, csrf, **data)


def case_component_retire(client, csrf, world):
    version = db.session.get(ComponentVersion, world.components["restore"])
    url = f"/admin/components/{version.definition_id}/versions/{version.id}/retire"
    return _column(ComponentVersion, version.id, "retired_at"), lambda: post(client, url, csrf)


def case_connection_create(client, csrf, world):
    """The red team's finding: a new connection to another host applied at once."""
    return _count(Connection), lambda: create_connection(client, csrf)


def case_connection_version(client, csrf, world):
    current = db.session.get(ConnectionVersion, world.connection_version_id)
    same_place = {
        **SETTINGS,
        "base_url": current.base_url,
        "allowed_hosts": " ".join(current.allowed_hosts),
        "bearer_token_action": "keep",
        "signing_secret_action": "keep",
        "timeout_seconds": "9",
    }
    url = f"/admin/connections/{_connection_id(world)}/versions"
    return _count(ConnectionVersion), lambda: post(client, url, csrf, **same_place)


def case_budget_create(client, csrf, world):
    scope = {"scope_type": "component", "scope_id": world.components["takedown"]}
    data = {**scope, "limit_amount": "4", "window_seconds": "3600"}
    return _count(Budget), lambda: post(client, "/admin/budgets", csrf, **data)


def case_budget_limit(client, csrf, world):
    budget_id = _budget(world)
    url = f"/admin/budgets/{budget_id}/limit"
    return _column(Budget, budget_id, "limit_amount"), lambda: post(client, url, csrf, limit_amount="40")


def case_budget_active(client, csrf, world):
    budget_id = _budget(world, active=False)
    return _column(Budget, budget_id, "active"), lambda: post(client, f"/admin/budgets/{budget_id}/activate", csrf)


def case_integration_token(client, csrf, world):
    url = f"/admin/integrations/{world.integration_id}/tokens"
    return _count(IntegrationToken), lambda: post(client, url, csrf, label="bot")


def case_label_set(client, csrf, world):
    """The red team's finding: a label could rename an action code alone."""
    data = {"kind": "action", "code": "takedown", "label": "Send a friendly warning"}
    return _count(CodeLabel), lambda: post(client, "/admin/labels", csrf, **data)


def case_operator_create(client, csrf, world):
    data = {"email": "new@example.com", "display_name": "New", "roles": "moderator"}
    return _count(OperatorUser), lambda: post(client, "/admin/users", csrf, **data)


def case_operator_roles(client, csrf, world):
    moderator = world.user("moderator")
    url = f"/admin/users/{moderator.id}/roles"
    roles = _column(OperatorUser, moderator.id, "roles")
    return lambda: sorted(roles()), lambda: post(client, url, csrf, roles=["moderator", "auditor"])


def case_operator_reactivate(client, csrf, world):
    auditor = world.user("auditor")
    set_row(OperatorUser, auditor.id, active=False)
    url = f"/admin/users/{auditor.id}/reactivate"
    return _column(OperatorUser, auditor.id, "active"), lambda: post(client, url, csrf)


def case_operator_invite(client, csrf, world):
    """FOUR-6: without a mail server a new invitation link is shown to an admin: four-eyes."""
    from app.services.admin import operators

    operators.add_operator(world.user("admin"), email="invited@example.com", display_name="Ivy", roles=["moderator"])
    approve_pending(client.application)
    invited = db.session.scalar(select(OperatorUser).where(OperatorUser.email == "invited@example.com"))
    invitations = lambda: len(  # noqa: E731
        db.session.scalars(select(OperatorInvitation).where(OperatorInvitation.operator_id == invited.id)).all()
    )
    return invitations, lambda: post(client, f"/admin/users/{invited.id}/invitation", csrf)


def case_operator_second_factor_reset(client, csrf, world):
    """OPS-2: resetting a reviewer's second factor lets whoever has the password enrol a device."""
    reviewer = world.user("reviewer")
    url = f"/admin/users/{reviewer.id}/second-factor/reset"
    return _column(OperatorUser, reviewer.id, "totp_confirmed_at"), lambda: post(client, url, csrf)


def case_bulk_cap(client, csrf, world):
    """BULK-5: a cap on items per bulk batch, raised or lowered, waits for a second admin."""
    from app.services.bulk.dry_runs import operator_cap

    moderator = world.user("moderator")

    def observe():
        db.session.rollback()
        return operator_cap(db.session, moderator)

    return observe, lambda: post(client, "/admin/bulk-caps", csrf, role="moderator", max_items="5000")


def case_sso_mapping(client, csrf, world):
    """OPS-1: the single sign-on group→role mapping waits for a second admin."""
    from app.services.admin.sso_mapping import current_mapping

    def observe():
        db.session.rollback()
        return current_mapping(world.installation_id)

    return observe, lambda: post(client, "/admin/sso", csrf, mapping="ts-admins = admin")


def case_approval_settings(client, csrf, world):
    """POL-3: who must approve which actions waits for a second admin."""
    from app.domain.approval_policy import DEFAULT_SETTINGS, settings_to_json
    from app.services.admin.approval_policies import settings_in_force

    document = settings_to_json(DEFAULT_SETTINGS)
    document["routes"] = []  # protected subjects and irreversible actions: one reviewer

    def observe():
        db.session.rollback()
        return settings_in_force(world.installation_id)

    return observe, lambda: post(client, "/admin/approvals", csrf, settings=json.dumps(document))


def case_dsa_settings(client, csrf, world):
    """DSA-1: what statements of reasons say and where they go waits for a second admin."""
    from app.services.admin.dsa_config import settings_in_force

    from .test_dsa_settings import console_document

    def observe():
        db.session.rollback()
        return settings_in_force(world.installation_id)

    return observe, lambda: post(client, "/admin/dsa", csrf, settings=json.dumps(console_document()))


def case_operator_attributes(client, csrf, world):
    """POL-1: an operator's team and attributes decide which factors they count for."""
    reviewer = world.user("reviewer")

    def observe():
        db.session.rollback()
        row = db.session.get(OperatorUser, reviewer.id)
        return row.team, dict(row.attributes or {})

    url = f"/admin/users/{reviewer.id}/attributes"
    return observe, lambda: post(client, url, csrf, team="trust-leads", attributes="level=lead")
def case_subject_protect(client, csrf, world):
    """POL-4: marking an account protected waits for a second admin."""
    from app.services.read.protection import protected_marks

    def observe():
        db.session.rollback()
        return protected_marks(db.session, world.installation_id, ["user:5120"])

    return observe, lambda: post(client, "/admin/protected", csrf, kind="account", reference="user:5120",
                                 reason="a verified public figure")


def case_subject_unprotect(client, csrf, world):
    """POL-4: unmarking a protected subject waits for a second admin."""
    from app.models import ProtectedSubject
    from app.services.read.protection import protected_marks

    with unit_of_work() as uow:
        row = ProtectedSubject(installation_id=world.installation_id, kind="account", subject_reference="user:5120",
                               reason="a verified public figure")
        uow.session.add(row)
        uow.commit()

    def observe():
        db.session.rollback()
        return protected_marks(db.session, world.installation_id, ["user:5120"])

    return observe, lambda: post(client, f"/admin/protected/{row.id}/unmark", csrf, reason="no longer public")


CASES = {
    ChangeKind.WORKFLOW_CREATE: case_workflow_create,
    ChangeKind.WORKFLOW_VERSION: case_workflow_version,
    ChangeKind.WORKFLOW_ACTIVE: case_workflow_active,
    ChangeKind.COMPONENT_CREATE: case_component_create,
    ChangeKind.COMPONENT_VERSION: case_component_version,
    ChangeKind.COMPONENT_RETIRE: case_component_retire,
    ChangeKind.CONNECTION_CREATE: case_connection_create,
    ChangeKind.CONNECTION_VERSION: case_connection_version,
    ChangeKind.BUDGET_CREATE: case_budget_create,
    ChangeKind.BUDGET_LIMIT: case_budget_limit,
    ChangeKind.BUDGET_ACTIVE: case_budget_active,
    ChangeKind.INTEGRATION_TOKEN: case_integration_token,
    ChangeKind.LABEL_SET: case_label_set,
    ChangeKind.OPERATOR_CREATE: case_operator_create,
    ChangeKind.OPERATOR_ROLES: case_operator_roles,
    ChangeKind.OPERATOR_REACTIVATE: case_operator_reactivate,
    ChangeKind.OPERATOR_INVITE: case_operator_invite,
    ChangeKind.BULK_CAP: case_bulk_cap,
    ChangeKind.SSO_MAPPING: case_sso_mapping,
    ChangeKind.SUBJECT_PROTECT: case_subject_protect,
    ChangeKind.SUBJECT_UNPROTECT: case_subject_unprotect,
    ChangeKind.OPERATOR_SECOND_FACTOR_RESET: case_operator_second_factor_reset,
    ChangeKind.APPROVAL_SETTINGS: case_approval_settings,
    ChangeKind.OPERATOR_ATTRIBUTES: case_operator_attributes,
    ChangeKind.DSA_SETTINGS: case_dsa_settings,
}


@pytest.mark.parametrize("kind", list(CASES))
def test_four4_one_admin_stores_a_pending_change_that_applies_only_when_a_second_approves(app, client, world, kind):
    """FOUR-4: one admin's request through the console stores one pending change of its
    kind, answered with the change's page, and changes nothing; a second admin's
    approval, bound to the digest, applies it."""
    csrf = admin(client)
    observe, send = CASES[kind](client, csrf, world)
    before = observe()
    response = send()
    [change] = pending_changes()
    assert response.status_code in (201, 303), text(response)[-2000:]
    assert response.status_code == 201 or response.headers["Location"].endswith(f"/admin/changes/{change.id}")
    assert change.kind == kind.value and change.proposed_by == world.user("admin").id
    page = text(client.get(f"/admin/changes/{change.id}"))
    assert "Waiting for a second admin." in page and change.digest in page
    assert observe() == before, f"{kind}: one admin's request changed something"
    assert approve_pending(app) == [change.id]
    assert observe() != before, f"{kind}: approving applied nothing"
