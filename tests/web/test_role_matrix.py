"""Every route × every role × another installation's ids: the expected
200/302/403/404 (issue: the whole console)."""

from __future__ import annotations

import re

import pytest
from sqlalchemy import select

from app.domain.clock import utcnow
from app.extensions import db
from app.models import (
    AppealCorrection,
    AppealDecision,
    Budget,
    ComponentDefinition,
    ComponentVersion,
    Connection,
    DsaStatement,
    HumanTask,
    IntegrationToken,
    ProtectedSubject,
    ReportSubject,
    WorkflowDefinition,
)
from app.services.admin.budgets import change_budget_limit
from app.services.admin.operators import create_operator
from app.services.bulk.actions import bulk_actions
from app.services.bulk.dry_runs import start_dry_run
from app.services.cases.appeals import decide_appeal, file_appeal
from app.services.lifecycle.dispatch import deliver
from app.services.lifecycle.emergency import act_in_emergency
from app.services.admin.erasure_requests import request_erasure
from app.services.uow import Actor, unit_of_work

from ..builders import approve, decide_report, make_world, pass_second_factor

ROLES = ("moderator", "reviewer", "admin", "auditor", "emergency")
ALL = {"moderator", "reviewer", "admin", "auditor"}  # every page's readers; "emergency" is held beside them (POL-6)
PASSWORD = "a-long-password-1"

# (method, path template, roles allowed). {...} are filled from the world.
ROUTES = [
    ("GET", "/", ALL | {"emergency"}),  # any role lands somewhere
    ("GET", "/proposals", ALL),
    ("GET", "/proposals/{proposal_id}", ALL),
    ("GET", "/proposals/{proposal_id}/live", ALL),
    ("GET", "/proposals/{proposal_id}/decision", ALL),  # reloads of refused forms redirect
    ("GET", "/proposals/{proposal_id}/retry", ALL),
    ("GET", "/proposals/{proposal_id}/compensate", ALL),
    ("GET", "/proposals/{proposal_id}/temporary", ALL),  # the temporary panel (TEMP-2)
    ("GET", "/proposals/{proposal_id}/cancel", ALL),
    ("GET", "/proposals/{proposal_id}/temporary-change", ALL),
    ("GET", "/reports/{report_id}/decisions", ALL),
    ("GET", "/reports/{report_id}/appeals", ALL),
    ("GET", "/appeals/{appeal_id}/decision", ALL),
    ("POST", "/proposals/{proposal_id}/decision", {"reviewer"}),  # the service refuses non-reviewers (APPR-4)
    ("POST", "/proposals/{proposal_id}/retry", {"reviewer", "admin"}),
    ("POST", "/proposals/{proposal_id}/retry-now", {"reviewer", "admin"}),  # QUEUE-6: 409 unless it will be retried
    ("POST", "/proposals/{proposal_id}/compensate", {"reviewer", "admin"}),
    ("POST", "/proposals/{proposal_id}/cancel", {"moderator", "reviewer", "admin"}),  # TEMP-4
    ("POST", "/proposals/{proposal_id}/temporary-change", {"moderator", "reviewer", "admin"}),  # TEMP-3
    ("GET", "/proposals/{proposal_id}/emergency", ALL),  # POL-6: a reload of a refused form
    ("POST", "/proposals/{proposal_id}/emergency", {"emergency"}),  # without a reason: 400 emergency_reason_too_thin
    ("GET", "/emergency-reviews", {"reviewer", "admin", "auditor", "emergency"}),  # POL-6
    ("POST", "/emergency-reviews/{emergency_review_id}", {"reviewer"}),  # without a verdict: 400
    ("GET", "/tasks", {"reviewer", "admin", "auditor"}),
    ("GET", "/inbox", ALL | {"emergency"}),  # POL-7: a factor may admit any role
    ("POST", "/tasks/{task_id}/claim", {"reviewer"}),
    ("POST", "/tasks/{task_id}/release", {"reviewer"}),
    ("GET", "/reports", ALL),
    ("GET", "/reports/{report_id}", ALL),
    ("POST", "/reports/{report_id}/decisions", {"moderator"}),
    ("POST", "/reports/{report_id}/appeals", {"moderator", "reviewer"}),
    ("GET", "/appeals", ALL),
    ("GET", "/appeals/{appeal_id}", ALL),
    ("POST", "/appeals/{appeal_id}/decision", {"reviewer"}),
    ("POST", "/appeals/{appeal_id}/decisions/{appeal_decision_id}/redact", {"admin"}),
    ("POST", "/appeals/{appeal_id}/corrections/{correction_id}/record", {"reviewer"}),
    ("GET", "/operations", {"reviewer", "admin", "auditor"}),
    ("GET", "/operations/dead-letters/retry", {"reviewer", "admin", "auditor"}),
    ("POST", "/operations/dead-letters/retry", {"reviewer", "admin"}),  # without the digest: 400
    ("GET", "/transparency", {"admin", "auditor"}),  # DSA-6: the transparency report
    ("GET", "/transparency.csv", {"admin", "auditor"}),  # DSA-6: its CSV
    ("GET", "/operations/statements/{statement_id}/requeue", {"admin"}),  # DSA-3: a reload: back to Operations
    ("POST", "/operations/statements/{statement_id}/requeue", {"admin"}),  # without a key: 400
    ("GET", "/queue", ALL),  # QUEUE-1
    ("GET", "/bulk", ALL),  # BULK-1..8
    ("GET", "/bulk/new", {"moderator"}),
    ("POST", "/bulk/new", {"moderator"}),  # without its fields: 400, nothing stored
    ("GET", "/bulk/{batch_id}", ALL),
    ("GET", "/bulk/{batch_id}/live", ALL),
    *[("GET", f"/bulk/{{batch_id}}/{step}", ALL) for step in
      ("submit", "approve", "reject", "pause", "resume", "cancel", "undo")],  # reloads redirect
    ("POST", "/bulk/{batch_id}/submit", {"moderator"}),  # without the digest: 400
    ("POST", "/bulk/{batch_id}/approve", {"reviewer"}),
    ("POST", "/bulk/{batch_id}/reject", {"reviewer"}),
    *[("POST", f"/bulk/{{batch_id}}/{step}", {"moderator", "reviewer", "admin"}) for step in
      ("pause", "resume", "cancel", "undo")],
    ("GET", "/queue", ALL),  # QUEUE-1..4
    ("GET", "/queue/{subject_id}", ALL),
    *[("GET", f"/queue/{{subject_id}}/{step}", ALL) for step in ("claim", "release", "decision")],  # reloads
    ("POST", "/queue/{subject_id}/claim", {"moderator"}),
    ("POST", "/queue/{subject_id}/release", {"moderator"}),  # not held: a notice, no 500
    ("POST", "/queue/{subject_id}/decision", {"moderator"}),  # without a decision: 400
    ("GET", "/reports/new", {"moderator"}),  # a proactive report
    ("POST", "/reports/new", {"moderator"}),  # without its fields: 400, nothing stored
    ("GET", "/admin/queues", {"admin", "auditor"}),  # QUEUE-4 targets
    ("POST", "/admin/queues", {"admin"}),  # without a queue: 400
    ("GET", "/admin/", {"admin", "auditor"}),
    ("GET", "/admin/integrations", {"admin", "auditor"}),
    ("POST", "/admin/integrations", {"admin"}),
    ("GET", "/admin/integrations/{integration_id}", {"admin", "auditor"}),
    ("POST", "/admin/integrations/{integration_id}/tokens", {"admin"}),
    ("POST", "/admin/integrations/{integration_id}/tokens/{token_id}/revoke", {"admin"}),
    ("GET", "/admin/connections", {"admin", "auditor"}),
    ("POST", "/admin/connections", {"admin"}),
    ("GET", "/admin/connections/{connection_id}", {"admin", "auditor"}),
    ("POST", "/admin/connections/{connection_id}/versions", {"admin"}),
    ("POST", "/admin/connections/{connection_id}/re-enable", {"admin"}),  # CONN-3
    ("GET", "/admin/components", {"admin", "auditor"}),
    ("POST", "/admin/components", {"admin"}),
    ("GET", "/admin/components/{component_id}", {"admin", "auditor"}),
    ("POST", "/admin/components/{component_id}/versions", {"admin"}),
    ("POST", "/admin/components/{component_id}/versions/{component_version_id}/retire", {"admin"}),
    ("GET", "/admin/workflows", {"admin", "auditor"}),
    ("POST", "/admin/workflows", {"admin"}),
    ("GET", "/admin/workflows/{workflow_id}", {"admin", "auditor"}),
    ("POST", "/admin/workflows/{workflow_id}/versions", {"admin"}),
    ("POST", "/admin/workflows/{workflow_id}/versions/{workflow_version_id}/deactivate", {"admin"}),
    ("POST", "/admin/workflows/{workflow_id}/versions/{workflow_version_id}/activate", {"admin"}),
    ("GET", "/admin/budgets", {"admin", "auditor"}),
    ("POST", "/admin/budgets", {"admin"}),
    ("POST", "/admin/budgets/{budget_id}/limit", {"admin"}),
    ("POST", "/admin/budgets/{budget_id}/deactivate", {"admin"}),
    ("POST", "/admin/budgets/{budget_id}/activate", {"admin"}),
    ("GET", "/admin/labels", {"admin", "auditor"}),
    ("POST", "/admin/labels", {"admin"}),
    ("GET", "/admin/bulk-caps", {"admin", "auditor"}),  # BULK-5
    ("POST", "/admin/bulk-caps", {"admin"}),  # without a role: 400
    ("GET", "/admin/sso", {"admin", "auditor"}),  # OPS-1
    ("POST", "/admin/sso", {"admin"}),  # without a mapping: the same empty mapping, nothing stored
    ("GET", "/admin/approvals", {"admin", "auditor"}),  # POL-3
    ("POST", "/admin/approvals", {"admin"}),  # without a document: 400 approval_settings_invalid
    ("GET", "/admin/dsa", {"admin", "auditor"}),  # DSA-1
    ("POST", "/admin/dsa", {"admin"}),  # without a document: 400 dsa_settings_invalid
    ("POST", "/admin/users/{operator_id}/attributes", {"admin"}),  # POL-1: nothing to change, or a pending change
    ("GET", "/admin/protected", {"admin", "auditor"}),  # POL-4
    ("POST", "/admin/protected", {"admin"}),  # without a kind: 400, nothing stored
    ("POST", "/admin/protected/{protected_id}/unmark", {"admin"}),  # without a reason: 400, nothing stored
    ("GET", "/admin/erasure", {"admin", "auditor"}),  # OPS-4
    ("POST", "/admin/erasure", {"admin"}),  # without a subject: 400, nothing stored
    ("POST", "/admin/erasure-retention", {"admin"}),  # without days or reason: 400
    ("POST", "/admin/erasure/{erasure_id}/approve", {"admin"}),  # by the one who asked: 403 erasure_same_admin
    ("POST", "/admin/erasure/{erasure_id}/reject", {"admin"}),
    # bulk batches as console JSON: a form body is 415, never written
    ("POST", "/bulk-batches", {"moderator", "reviewer", "admin"}),
    ("GET", "/bulk-batches/{bulk_batch_id}", ALL),
    ("POST", "/bulk-batches/{bulk_batch_id}/submit", {"moderator", "reviewer", "admin"}),
    ("POST", "/bulk-batches/{bulk_batch_id}/approve", {"moderator", "reviewer", "admin"}),
    ("POST", "/bulk-batches/{bulk_batch_id}/reject", {"moderator", "reviewer", "admin"}),
    ("GET", "/admin/users", {"admin", "auditor"}),
    ("POST", "/admin/users", {"admin"}),
    ("GET", "/admin/users/{operator_id}", {"admin", "auditor"}),
    ("POST", "/admin/users/{operator_id}/roles", {"admin"}),
    ("POST", "/admin/users/{operator_id}/deactivate", {"admin"}),
    ("POST", "/admin/users/{operator_id}/reactivate", {"admin"}),
    ("POST", "/admin/users/{operator_id}/second-factor/reset", {"admin"}),  # OPS-2: a change for a second admin
    ("GET", "/account/second-factor", ALL | {"emergency"}),  # OPS-2: one's own second factor
    ("POST", "/account/second-factor", ALL | {"emergency"}),  # without a code: 401, nothing changes
    ("POST", "/admin/users/{operator_id}/invitation", {"admin"}),  # FOUR-6: not invited: 409
    ("GET", "/admin/changes", {"admin", "auditor"}),
    ("GET", "/admin/changes/{change_id}", {"admin", "auditor"}),
    ("POST", "/admin/changes/{change_id}/approve", {"admin"}),  # without the digest: 409, never applied
    ("POST", "/admin/changes/{change_id}/reject", {"admin"}),  # without a reason: 400
]
PUBLIC = ["/login", "/healthz", "/readyz", "/metrics", "/api/v1/openapi.json"]


def ids_of(world, platform_url) -> dict[str, str]:
    """One id of every kind in this installation, with history behind it."""
    iid = world.installation_id
    original = decide_report(world, 0)
    approve(world, original)
    deliver(original.id)
    appeal_id = file_appeal(world.report_ids[0], statement="", actor=Actor.system(), installation_id=iid).appeal_id
    decide_appeal(appeal_id, outcome="reversed", rationale="r", operator=world.user("admin"))
    decide_report(world, 1)  # an open approval task
    with unit_of_work() as uow:
        budget = Budget(
            installation_id=iid, scope_type="component", scope_id=world.components["takedown"], limit_amount=5
        )
        uow.session.add(budget)
        uow.commit()
    raise_limit = change_budget_limit(world.user("admin"), budget.id, 50)  # waits for a second admin
    victim = create_operator(
        iid,
        email=f"victim-{iid}@example.com",
        password=PASSWORD,
        display_name="Victim",
        roles=["moderator"],
        actor=Actor.system(),
    )
    action = bulk_actions(db.session, iid)[0]
    bulk_batch_id = start_dry_run(
        world.user("moderator"),
        selection={"source": "list", "text": "post:1"},
        action_key=action.key,
        decision_code=action.decision_code,
        reason="a bulk dry run",
    )
    one = lambda statement: db.session.scalar(statement)  # noqa: E731
    component = one(
        select(ComponentDefinition).where(
            ComponentDefinition.installation_id == iid, ComponentDefinition.slug == "takedown"
        )
    )
    batch_id = start_dry_run(world.user("moderator"), selection={"source": "list", "text": "post:1005"},
                             action_key=action.key, decision_code=action.decision_code, reason="a bulk action")
    lead = create_operator(iid, email=f"lead-{iid}@example.com", password=PASSWORD, display_name="Lead",
                           roles=["moderator", "emergency"], actor=Actor.system())
    urgent = decide_report(world, 2)
    emergency_review_id = act_in_emergency(urgent.id, reason="A live-streamed attack is spreading right now",
                                           payload_digest=urgent.payload_digest, idempotency_key="matrix",
                                           operator=lead).review_id  # POL-6
    erasure_id = request_erasure(world.user("admin"), "user:777", "a privacy request, ticket 42").id  # OPS-4
    with unit_of_work() as uow:  # POL-4: a protected subject, as if two admins had marked it
        protected = ProtectedSubject(installation_id=iid, kind="account", subject_reference="user:5120", reason="r")
        uow.session.add(protected)
        uow.commit()
    with unit_of_work() as uow:  # DSA-3: a statement of reasons the database refused
        statement = DsaStatement(installation_id=iid, proposal_id=original.id, puid="sor-matrix", statement={},
                                 state="dead_letter", applied_at=utcnow(), complaint_until=utcnow())
        uow.session.add(statement)
        uow.commit()
    return {
        "statement_id": statement.id,
        "protected_id": protected.id,
        "erasure_id": erasure_id,
        "emergency_review_id": emergency_review_id,
        "batch_id": batch_id,
        "proposal_id": original.id,
        "task_id": one(select(HumanTask.id).where(HumanTask.installation_id == iid, HumanTask.state == "open")),
        "report_id": world.report_ids[1],
        "appeal_id": appeal_id,
        "appeal_decision_id": one(select(AppealDecision.id).where(AppealDecision.installation_id == iid)),
        "correction_id": one(select(AppealCorrection.id).where(AppealCorrection.installation_id == iid)),
        "integration_id": world.integration_id,
        "token_id": one(select(IntegrationToken.id).where(IntegrationToken.installation_id == iid)),
        "connection_id": one(select(Connection.id).where(Connection.installation_id == iid)),
        "component_id": component.id,
        "component_version_id": one(select(ComponentVersion.id).where(ComponentVersion.definition_id == component.id)),
        "workflow_id": one(select(WorkflowDefinition.id).where(WorkflowDefinition.installation_id == iid)),
        "workflow_version_id": world.workflow_version_id,
        "budget_id": one(select(Budget.id).where(Budget.installation_id == iid)),
        "operator_id": victim.id,
        "change_id": raise_limit.change_id,
        "bulk_batch_id": bulk_batch_id,
        "subject_id": one(select(ReportSubject.id).where(ReportSubject.installation_id == iid)),
    }


@pytest.fixture
def matrix(app, world, platform):
    """Single-role operators in the world, the ids of both installations, a client per role."""
    users = {}
    for role in ROLES:
        users[role] = create_operator(
            world.installation_id,
            email=f"only-{role}@example.com",
            password=PASSWORD,
            display_name=f"Only {role}",
            roles=[role],
            actor=Actor.system(),
        ).email
    mine = ids_of(world, platform.url)
    theirs = ids_of(make_world(platform.url, slug="other"), platform.url)
    return users, mine, theirs


def signed_in(app, email):
    client = app.test_client()
    page = client.get("/login").get_data(as_text=True)
    token = re.search(r'name="csrf_token" (?:type="hidden" )?value="([^"]+)"', page).group(1)
    response = client.post("/login", data={"email": email, "password": PASSWORD, "csrf_token": token})
    assert pass_second_factor(client, response, email).status_code == 303  # reviewers and admins enrol (OPS-2)
    return client, token


def call(client, method, path, token):
    if method == "GET":
        return client.get(path)
    return client.post(path, data={"csrf_token": token})


def test_every_route_for_every_role_and_tenant(app, matrix):
    users, mine, theirs = matrix
    problems = []
    anonymous = app.test_client()
    for method, template, _allowed in ROUTES:
        response = call(anonymous, method, template.format(**mine), None)
        if method == "POST" and response.status_code == 400:  # refused by CSRF before anything else
            continue
        if response.status_code != 302 or "/login" not in response.headers.get("Location", ""):
            problems.append(f"anonymous {method} {template}: {response.status_code}")
    for role, email in users.items():
        client, token = signed_in(app, email)
        for method, template, allowed in ROUTES:
            status = call(client, method, template.format(**mine), token).status_code
            if role in allowed:
                ok = status in (200, 201, 302, 303) if method == "GET" else status not in (403, 404, 500)
            else:
                ok = status == 403
            if not ok:
                problems.append(f"{role} {method} {template}: {status}")
            if role in allowed and "{" in template:
                foreign = call(client, method, template.format(**theirs), token).status_code
                if foreign != 404:
                    problems.append(f"{role} {method} {template} with another installation's ids: {foreign}")
    assert problems == [], "\n".join(problems)


def test_public_routes_answer_without_a_session(app, client):
    for path in PUBLIC:
        assert client.get(path).status_code in (200, 503), path


def test_the_matrix_lists_every_console_route(app):
    """A new route cannot slip in without its roles being checked here."""
    listed = {(method, re.sub(r"\{\w+\}", "<>", path)) for method, path, _ in ROUTES}
    listed |= {("GET", path) for path in PUBLIC} | {("POST", "/login"), ("POST", "/logout"), ("GET", "/")}
    # FOUR-6: the invitee's one-time link (tests/web/test_invitations.py): no session, the token is the key.
    listed |= {("GET", "/invitations/<>"), ("POST", "/invitations/<>")}
    # OPS-2: the second step of a sign-in (tests/web/test_ops2_sign_in.py): no session yet, only its pending marker.
    listed |= {(method, path) for method in ("GET", "POST") for path in ("/login/second-factor", "/login/enrol")}
    # OPS-1: signing in through the identity provider (tests/web/test_ops1_sso.py): no session yet.
    listed |= {("GET", "/login/sso"), ("GET", "/login/sso/callback")}
    missing = []
    for rule in app.url_map.iter_rules():
        if rule.endpoint == "static" or rule.rule.startswith("/api/"):
            continue
        path = re.sub(r"<[^>]+>", "<>", rule.rule)
        for method in sorted(rule.methods - {"HEAD", "OPTIONS"}):
            if (method, path) not in listed:
                missing.append(f"{method} {rule.rule}")
    assert missing == []
