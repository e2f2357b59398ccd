"""Configuration changes for a second admin (SPEC FOUR-2): stored pending with the
digest of their exact content, approved by another admin bound to it (the change
applying in the same transaction), rejected, or applied by the CLI break-glass."""

from __future__ import annotations

import os
import pwd
import json
import socket

import pytest
from sqlalchemy import func, select

from app.demo import enforcement_graph
from app.domain.config_changes import ChangeKind
from app.domain.digests import canonical_json
from app.domain.errors import ApiError
from app.extensions import db
from app.models import (
    AuditEvent,
    Budget,
    ConfigChange,
    ConnectionVersion,
    OperatorUser,
    WorkflowDefinition,
    WorkflowVersion,
)
from app.services.admin import budgets, connections, operators, reviews, workflows
from app.services.admin.changes import ChangeType, PendingChange, change_digest, setting
from app.services.uow import unit_of_work

from ..builders import approve_change, make_world

TABLES = (AuditEvent, Budget, ConfigChange, ConnectionVersion, OperatorUser, WorkflowDefinition, WorkflowVersion)


def counts() -> tuple[int, ...]:
    db.session.rollback()
    return tuple(db.session.scalar(select(func.count()).select_from(m)) for m in TABLES)


def audits(action: str) -> list[AuditEvent]:
    db.session.rollback()
    return list(db.session.scalars(select(AuditEvent).where(AuditEvent.action == action).order_by(AuditEvent.seq)))


def add_budget(world, limit: int = 5) -> str:
    with unit_of_work() as uow:
        budget = Budget(
            installation_id=world.installation_id,
            scope_type="workflow",
            scope_id=world.workflow_version_id,
            limit_amount=limit,
            window_seconds=3600,
        )
        uow.session.add(budget)
        uow.commit()
        return budget.id


def change_row(pending: PendingChange) -> ConfigChange:
    db.session.rollback()
    return db.session.get(ConfigChange, pending.change_id)


def bounded_graph(world) -> str:
    return json.dumps(enforcement_graph(world.components["takedown"], world.components["restore"], "bounded_auto"))


def test_every_kind_of_change_can_be_applied():
    """FOUR-2: each kind the domain names has the service code that applies it."""
    assert set(reviews.CHANGE_TYPES) == {kind.value for kind in ChangeKind}


def test_a_declaration_names_its_subject_once():
    """FOUR-2: a change names the content key of what it changes; that key is its
    subject id and stays out of the diff; a creation has no subject and replaces nothing."""
    change = ChangeType(ChangeKind.OPERATOR_ROLES, "operator_user", lambda c, n: "", lambda *a: {}, subject="operator_id")
    content = {"operator_id": "opr_1", "roles": ["reviewer"]}
    assert change.subject_id(content) == "opr_1"
    assert change.diff_sides(content, {"roles": []}) == ({"roles": []}, {"roles": ["reviewer"]})
    creation = ChangeType(ChangeKind.OPERATOR_CREATE, "operator_user", lambda c, n: "", lambda *a: {})
    assert creation.subject_id(content) is None and creation.replaced(None, "ins_1", content) is None
    label = ChangeType(ChangeKind.LABEL_SET, "code_label", lambda c, n: "", lambda *a: {}, subject=lambda c: "a:b")
    assert label.subject_id({}) == "a:b"


def test_a_change_setting_one_field_shows_the_subject_with_it_set():
    display = setting("active", True)
    assert display({}, {"account": "Ann", "active": False}) == (
        {"account": "Ann", "active": False},
        {"account": "Ann", "active": True},
    )
    assert display({}, None) == ({}, {"active": True})  # a decided change: no "now"


def test_a_pending_change_changes_nothing_and_is_audited(app, world):
    """FOUR-2: raising a limit is stored pending with the digest of its exact content."""
    budget_id = add_budget(world)
    pending = budgets.change_budget_limit(world.user("admin"), budget_id, "50")
    assert isinstance(pending, PendingChange) and pending.reasons == ["It raises a budget's limit from 5 to 50."]
    assert db.session.get(Budget, budget_id).limit_amount == 5
    row = change_row(pending)
    assert (row.kind, row.subject_type, row.subject_id, row.state, row.proposed_by) == (
        "budget.limit",
        "budget",
        budget_id,
        "pending",
        world.user("admin").id,
    )
    assert row.content == {"budget_id": budget_id, "limit_amount": 50}
    assert (
        row.digest == pending.digest == change_digest(row.id, world.installation_id, row.kind, budget_id, row.content)
    )
    assert row.digest.startswith("sha256:") and len(row.digest) == 71
    [event] = audits("config.change_proposed")
    assert (event.idempotency_key, event.target_id, event.actor_id) == (
        f"config:change-proposed:{row.id}",
        row.id,
        world.user("admin").id,
    )
    assert json.loads(event.details_json)["digest"] == row.digest
    assert audits("admin.budget_limit_changed") == []


def test_lowering_a_limit_applies_at_once(app, world):
    """FOUR-2: a change that weakens nothing is not held for a second admin."""
    budget_id = add_budget(world)
    assert budgets.change_budget_limit(world.user("admin"), budget_id, 2) is None
    assert reload_budget(budget_id).limit_amount == 2
    assert db.session.scalar(select(func.count()).select_from(ConfigChange)) == 0


def reload_budget(budget_id: str) -> Budget:
    db.session.rollback()
    return db.session.get(Budget, budget_id)


def test_a_second_admin_approves_and_the_change_applies_with_both_steps_audited(app, world):
    """FOUR-2: approval bound to the digest applies the change in the same transaction."""
    budget_id = add_budget(world)
    pending = budgets.change_budget_limit(world.user("admin"), budget_id, 50)
    assert approve_change(world, pending) == {"budget_id": budget_id}
    assert reload_budget(budget_id).limit_amount == 50
    row = change_row(pending)
    assert (row.state, row.decided_by, row.decided_via) == ("applied", world.user("admin2").id, "console")
    assert row.decided_at is not None and row.result == {"budget_id": budget_id}
    [approved] = audits("config.change_approved")
    assert approved.idempotency_key == f"config:change-approved:{row.id}"
    assert approved.actor_id == world.user("admin2").id and json.loads(approved.details_json)["digest"] == row.digest
    [changed] = audits("admin.budget_limit_changed")
    assert changed.actor_id == world.user("admin").id  # made by its proposer, approved by another
    assert json.loads(changed.details_json) == {"before": 5, "after": 50, "config_change_id": row.id}
    from app.services.audit import verify_chain

    assert verify_chain(world.installation_id).ok


@pytest.mark.parametrize(
    "who, digest, status, code",
    [
        ("admin", None, 403, "maker_checker_violation"),  # the proposer
        ("reviewer", None, 403, "forbidden"),
        ("admin2", "sha256:" + "0" * 64, 409, "config_change_digest_mismatch"),
        ("admin2", "", 409, "config_change_digest_mismatch"),
        ("other-admin", None, 404, "config_change_not_found"),
    ],
)
def test_approval_refusals_change_nothing(app, world, platform, who, digest, status, code):
    """FOUR-2: the proposer gets 403 maker_checker_violation, a wrong digest 409; no row changes."""
    other = make_world(platform.url, slug="other")
    budget_id = add_budget(world)
    pending = budgets.change_budget_limit(world.user("admin"), budget_id, 50)
    approver = other.user("admin") if who == "other-admin" else world.user(who)
    before = counts()
    with pytest.raises(ApiError) as refused:
        reviews.approve_change(approver, pending.change_id, pending.digest if digest is None else digest)
    assert (refused.value.status, refused.value.code) == (status, code)
    assert counts() == before
    assert change_row(pending).state == "pending" and reload_budget(budget_id).limit_amount == 5


def test_a_decided_change_cannot_be_decided_again(app, world):
    """FOUR-2: exactly one decision lands."""
    budget_id = add_budget(world)
    pending = budgets.change_budget_limit(world.user("admin"), budget_id, 50)
    approve_change(world, pending)
    before = counts()
    for attempt in (
        lambda: approve_change(world, pending, approver="admin2"),
        lambda: reviews.reject_change(world.user("admin2"), pending.change_id, "too late"),
        lambda: reviews.break_glass(pending.change_id, "an emergency, but decided already"),
    ):
        with pytest.raises(ApiError) as refused:
            attempt()
        assert (refused.value.status, refused.value.code) == (409, "config_change_not_pending")
    assert counts() == before


def test_a_pending_change_is_one_that_would_apply_now(app, world):
    """FOUR-2: a change that cannot apply is refused when proposed, and nothing is stored."""
    before = counts()
    for slug, graph, status, code in (
        ("enforcement", bounded_graph(world), 409, "slug_taken"),
        ("auto", '{"nodes": {}}', 400, "workflow_graph_invalid"),
    ):
        with pytest.raises(ApiError) as refused:
            workflows.create_workflow(
                world.user("admin"), name="Auto", slug=slug, authority_mode="bounded_auto", graph=graph, active=True
            )
        assert (refused.value.status, refused.value.code) == (status, code)
    assert counts() == before


def test_a_change_that_no_longer_applies_is_refused_and_stays_pending(app, world):
    """FOUR-2: approval re-checks the change against the database as it is now."""
    pending = workflows.create_workflow(
        world.user("admin"),
        name="Auto",
        slug="auto",
        authority_mode="bounded_auto",
        graph=bounded_graph(world),
        active=True,
    )
    assert isinstance(pending, PendingChange)
    other = workflows.create_workflow(
        world.user("admin2"),
        name="Other",
        slug="auto",
        authority_mode="assist",
        graph=bounded_graph(world),
        active=False,
    )
    approve_change(world, other, approver="admin")  # FOUR-4: this one waits for a second admin too
    before = counts()
    with pytest.raises(ApiError) as refused:
        approve_change(world, pending)
    assert (refused.value.status, refused.value.code) == (409, "slug_taken")
    assert counts() == before and change_row(pending).state == "pending"


def test_a_bounded_auto_workflow_applies_only_when_approved(app, world):
    """FOUR-2: publishing a bounded_auto workflow version waits for the second admin."""
    definition_id = db.session.get(WorkflowVersion, world.workflow_version_id).definition_id
    pending = workflows.create_workflow_version(
        world.user("admin"), definition_id, authority_mode="bounded_auto", graph=bounded_graph(world), active=True
    )
    assert isinstance(pending, PendingChange)
    versions = select(func.count()).where(WorkflowVersion.definition_id == definition_id)
    assert db.session.scalar(versions) == 1
    result = approve_change(world, pending)
    version = db.session.get(WorkflowVersion, result["version_id"])
    assert (version.version, version.authority_mode, version.active) == (2, "bounded_auto", True)
    [event] = audits("admin.workflow_version_created")
    assert json.loads(event.details_json)["config_change_id"] == pending.change_id


def new_origin_settings(**overrides) -> connections.ConnectionSettings:
    values = {
        "base_url": "https://platform.example/v1",
        "bearer_token_action": "set",
        "bearer_token": "a-brand-new-token",
        "signing_secret_action": "generate",
        "timeout_seconds": 5,
        "allowed_hosts": "platform.example",
        **overrides,
    }
    return connections.ConnectionSettings(**values)


def connection_id(world) -> str:
    return db.session.get(ConnectionVersion, world.connection_version_id).connection_id


def test_a_connection_change_keeps_its_secrets_out_of_the_content(app, world):
    """FOUR-2: a new destination waits; its new secrets are never in the content, and are
    forgotten once the change is decided."""
    pending = connections.create_connection_version(world.user("admin"), connection_id(world), new_origin_settings())
    assert isinstance(pending, PendingChange) and pending.shown_once["signing_secret"].startswith("whsec_")
    row = change_row(pending)
    stored = canonical_json(row.content)
    assert "a-brand-new-token" not in stored and pending.shown_once["signing_secret"] not in stored
    assert set(row.content["secret_digests"]) == {"bearer_token", "signing_secret"}
    assert row.secrets["bearer_token"] == "a-brand-new-token"
    proposed = audits("config.change_proposed")[0].details_json
    assert "a-brand-new-token" not in proposed and "whsec_" not in proposed
    result = approve_change(world, pending)
    version = db.session.get(ConnectionVersion, result["version_id"])
    assert (version.base_url, version.bearer_token, version.signing_secret) == (
        "https://platform.example/v1",
        "a-brand-new-token",
        pending.shown_once["signing_secret"],
    )
    assert change_row(pending).secrets is None


def test_rejecting_needs_a_reason_and_forgets_the_secrets(app, world):
    """FOUR-2: a rejected change applies nothing; its reason is kept, its secrets are not."""
    pending = connections.create_connection_version(world.user("admin"), connection_id(world), new_origin_settings())
    before = counts()
    with pytest.raises(ApiError) as refused:
        reviews.reject_change(world.user("admin2"), pending.change_id, " no")
    assert (refused.value.status, refused.value.code) == (400, "config_change_reason_invalid")
    with pytest.raises(ApiError) as refused:
        reviews.reject_change(world.user("moderator"), pending.change_id, "not my call")
    assert (refused.value.status, refused.value.code) == (403, "forbidden")
    assert counts() == before
    reviews.reject_change(world.user("admin2"), pending.change_id, "Unknown host; ask the platform first.")
    row = change_row(pending)
    assert (row.state, row.reason, row.secrets, row.decided_by) == (
        "rejected",
        "Unknown host; ask the platform first.",
        None,
        world.user("admin2").id,
    )
    [event] = audits("config.change_rejected")
    assert event.idempotency_key == f"config:change-rejected:{row.id}"
    assert db.session.scalar(select(func.count()).select_from(ConnectionVersion)) == 1


def test_a_connection_change_made_against_an_older_version_is_stale(app, world):
    """FOUR-2: what the approver reviews is what applies: a newer version in between refuses it."""
    pending = connections.create_connection_version(world.user("admin"), connection_id(world), new_origin_settings())
    current = db.session.get(ConnectionVersion, world.connection_version_id)
    same_place = new_origin_settings(
        base_url=current.base_url,
        allowed_hosts=current.allowed_hosts,
        bearer_token_action="keep",
        signing_secret_action="keep",
        timeout_seconds=9,
    )
    between = connections.create_connection_version(world.user("admin2"), connection_id(world), same_place)
    assert approve_change(world, between, approver="admin")["version"] == 2  # FOUR-4: a timeout change waits too
    before = counts()
    with pytest.raises(ApiError) as refused:
        approve_change(world, pending)
    assert (refused.value.status, refused.value.code) == (409, "config_change_stale")
    assert counts() == before


def test_nobody_approves_a_role_granted_to_themselves(app, world):
    """FOUR-2: granting admin to an operator waits, and that operator cannot approve it."""
    moderator = world.user("moderator")
    pending = operators.change_operator_roles(world.user("admin"), moderator.id, ["moderator", "admin"])
    assert isinstance(pending, PendingChange)
    promoted = operators.change_operator_roles(world.user("admin"), world.user("admin2").id, ["admin", "reviewer"])
    with pytest.raises(ApiError) as refused:
        reviews.approve_change(world.user("admin2"), promoted.change_id, promoted.digest)
    assert (refused.value.status, refused.value.code) == (403, "maker_checker_violation")
    assert db.session.get(OperatorUser, world.user("admin2").id).roles == {"admin"}
    approve_change(world, pending)  # admin2 approves the moderator's promotion
    db.session.rollback()
    assert db.session.get(OperatorUser, moderator.id).roles == {"moderator", "admin"}


def test_a_new_user_waits_for_a_second_admin_without_a_password(app, world):
    """FOUR-2, FOUR-6: adding a user (any roles) stores it pending, with no password at all."""
    for roles in (["reviewer"], ["moderator"]):
        pending = operators.add_operator(
            world.user("admin"), email=f"{roles[0]}-nina@example.com", display_name="Nina", roles=roles
        )
        assert isinstance(pending, PendingChange)
        row = change_row(pending)
        assert row.secrets is None and "password" not in canonical_json(row.content)
        email = f"{roles[0]}-nina@example.com"
        assert db.session.scalar(select(OperatorUser).where(OperatorUser.email == email)) is None
        result = approve_change(world, pending)
        created = db.session.get(OperatorUser, result["operator_id"])
        assert created.roles == set(roles) and "invitation_link" in result


def test_break_glass_applies_without_a_second_admin_and_says_so(app, world):
    """FOUR-2, FOUR-10: the CLI break-glass needs a reason of substance (invisible characters do
    not count), writes config.break_glass with the OS user and host, and prints them."""
    budget_id = add_budget(world)
    pending = budgets.change_budget_limit(world.user("admin"), budget_id, 50)
    runner = app.test_cli_runner()
    listed = runner.invoke(args=["config-changes"]).output
    assert pending.change_id in listed and pending.digest in listed
    before = counts()
    for args, code in (
        (["--reason", "urgent"], "break_glass_reason_invalid"),
        (["--reason", "\u200b" * 10], "break_glass_reason_invalid"),  # issue 22
        (["--reason", "\u2067\u200b" * 20 + "ok ok"], "break_glass_reason_invalid"),
        (["--reason", "the second admin is on leave", "--digest", "sha256:x"], "config_change_digest_mismatch"),
    ):
        result = runner.invoke(args=["config-break-glass", pending.change_id, *args])
        assert result.exit_code == 1 and code in result.output, result.output
    result = runner.invoke(args=["config-break-glass", "cfg_nope", "--reason", "the second admin is on leave"])
    assert result.exit_code == 1 and "config_change_not_found" in result.output
    assert counts() == before

    reason = "Incident 4711: the second admin is on leave"
    result = runner.invoke(
        args=["config-break-glass", pending.change_id, "--reason", reason, "--digest", pending.digest]
    )
    assert result.exit_code == 0, result.output
    assert pending.change_id in result.output
    assert f"OS user {pwd.getpwuid(os.getuid()).pw_name} on host {socket.gethostname()}" in result.output
    assert reload_budget(budget_id).limit_amount == 50
    row = change_row(pending)
    assert (row.state, row.decided_via, row.decided_by, row.reason) == ("applied", "break_glass", None, reason)
    [event] = audits("config.break_glass")
    assert (event.idempotency_key, event.actor_type) == (f"config:break-glass:{row.id}", "system")
    details = json.loads(event.details_json)
    assert (details["reason"], details["os_user"], details["host"]) == (reason, pwd.getpwuid(os.getuid()).pw_name, socket.gethostname())
    assert audits("config.change_approved") == []
    assert "nothing waits" in runner.invoke(args=["config-changes"]).output


def test_the_cli_creates_the_first_admin_as_the_system(app):
    """FOUR-2: bootstrapping (no admin exists yet) is the system's, recorded as such."""
    runner = app.test_cli_runner()
    result = runner.invoke(
        args=["create-admin", "--email", "ada@example.org", "--name", "Ada", "--installation", "ops"],
        input="a-long-password-1\na-long-password-1\n",
    )
    assert result.exit_code == 0, result.output
    [event] = audits("operator.created")
    assert (event.actor_type, event.actor_id) == ("system", "cli")


def test_the_demo_seed_is_the_systems_and_bounds_its_automation(app, platform):
    """FOUR-2, FOUR-3: the seed builds its installation as the system, before any admin
    exists, recorded as such; its bounded_auto workflow has a budget."""
    world = make_world(platform.url, approval_mode="bounded_auto", slug="auto")
    [seeded] = audits("installation.seeded")
    details = json.loads(seeded.details_json)
    assert (seeded.actor_type, seeded.actor_id, details["approval_mode"]) == ("system", "demo-seed", "bounded_auto")
    budget = db.session.get(Budget, details["budget_id"])
    assert (budget.scope_type, budget.scope_id, budget.active) == ("workflow", world.workflow_version_id, True)
    assert {"admin", "admin2"} <= set(world.users)  # two admins: configuration changes can be approved
    assert db.session.scalar(select(func.count()).select_from(ConfigChange)) == 0
