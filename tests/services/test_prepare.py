"""Prepare: a workflow action node becomes an immutable proposal (PREP-1..8, ID-1..3)."""

from __future__ import annotations

from datetime import timedelta

import pytest
from sqlalchemy import func, select

from app.domain.clock import iso, utcnow
from app.domain.digests import payload_digest
from app.domain.errors import ActionError
from app.extensions import db
from app.domain.proposal.destination import origin_of
from app.models import (
    ActionProposal,
    ComponentVersion,
    ConnectionVersion,
    Decision,
    HumanTask,
    WorkflowRun,
    WorkflowVersion,
)
from app.queueing import delivery_queue
from app.services.lifecycle.prepare import prepare_action
from app.services.uow import unit_of_work

from ..builders import approve, decide_report, make_world, reload, set_graph, set_row


def node(graph):
    return graph["nodes"]["takedown"]


def run_for(world, report_index=0) -> WorkflowRun:
    db.session.rollback()
    return db.session.scalar(select(WorkflowRun).where(WorkflowRun.report_id == world.report_ids[report_index]))


def prepare_again(proposal_or_run, **overrides):
    """Run the action node of a run once more (a replay, PREP-7)."""
    run = (
        proposal_or_run
        if isinstance(proposal_or_run, WorkflowRun)
        else db.session.get(WorkflowRun, proposal_or_run.run_id)
    )
    version = db.session.get(WorkflowVersion, run.workflow_version_id)
    with unit_of_work() as uow:
        run = uow.session.get(WorkflowRun, run.id)
        outcome = prepare_action(
            uow,
            run=run,
            node_id="takedown",
            node=node(version.graph),
            step_run_id=f"{run.id}:takedown:main",
            branch_key="main",
            authority_mode=overrides.get("authority_mode", version.authority_mode),
            await_recovery=overrides.get("await_recovery", False),
        )
        uow.commit()
    return outcome


def failed_with(world, code, report_index=0):
    run = run_for(world, report_index)
    assert (run.state, run.outcome_port, run.last_error_code) == ("failed", "error", code)
    assert db.session.scalar(select(func.count()).select_from(ActionProposal)) == 0


def test_new_human_proposal_has_task_digest_and_ids(app, world):
    """PREP-8, ID-1, ID-2, ID-3: approval_required with a task due at expiry."""
    proposal = decide_report(world)
    run = db.session.get(WorkflowRun, proposal.run_id)
    decision = db.session.scalar(select(Decision).where(Decision.report_id == world.report_ids[0]))
    assert proposal.id == f"{run.id}:takedown:main:proposal"
    assert proposal.operation_id == f"action:{run.id}:takedown:main:takedown:{decision.id}"
    assert proposal.state == "approval_required" and proposal.next_attempt_at is None
    assert proposal.expires_at == run.created_at + timedelta(seconds=86_400)
    material = {
        "schema_version": "1",
        "action_id": proposal.id,
        "action_code": "takedown",
        "target": proposal.target,
        "payload": proposal.payload,
        "preconditions": proposal.preconditions,
        "component_version_id": proposal.component_version_id,
        "workflow_version_id": run.workflow_version_id,
        "policy_version_id": "policy-2026-11",
        "expires_at": iso(proposal.expires_at),
        "installation_id": world.installation_id,
        # FOUR-5: where it goes and how its answer is read
        "delivery": {
            "kind": "webhook",
            "origin": origin_of(db.session.get(ConnectionVersion, world.connection_version_id).base_url),
            "method": "POST",
            "path": "/actions/takedown",
            "answer": "receipt",
        },
    }
    assert proposal.delivery == material["delivery"]
    assert proposal.payload_digest == payload_digest(material)
    task = db.session.scalar(select(HumanTask).where(HumanTask.action_proposal_id == proposal.id))
    assert (task.state, task.due_at, task.task_type) == ("open", proposal.expires_at, "approval")
    assert "rejected" in task.response_schema["properties"]["decision"]["enum"]
    assert (run.state, run.waiting_event_type) == ("waiting", f"action.{proposal.id}.resolved")


def test_bounded_auto_proposal_is_queued_and_enqueued(app, platform):
    """PREP-8: bounded automation queues the proposal and enqueues its delivery."""
    world = make_world(platform.url, approval_mode="bounded_auto")
    proposal = decide_report(world)
    assert proposal.state == "queued" and proposal.next_attempt_at is not None
    assert db.session.scalar(select(func.count()).select_from(HumanTask)) == 0
    assert delivery_queue(app).count == 1
    run = db.session.get(WorkflowRun, proposal.run_id)
    assert run.waiting_event_type == f"action.{proposal.id}.delivery-resolved"


@pytest.mark.parametrize("mode", ["off", "shadow"])
def test_authority_off_or_shadow_cannot_act(app, world, mode):
    """PREP-1"""
    set_row(WorkflowVersion, world.workflow_version_id, authority_mode=mode)
    decide_report(world)
    failed_with(world, "action_authority_insufficient")


@pytest.mark.parametrize("missing", ["component_version_id", "action_code"])
def test_node_needs_component_and_action_code(app, world, missing):
    """PREP-2"""
    set_graph(world, lambda g: node(g)["config"].pop(missing))
    decide_report(world)
    failed_with(world, "action_configuration_invalid")


def test_retired_component_is_unavailable(app, world):
    """PREP-3"""
    set_row(ComponentVersion, world.components["takedown"], retired_at=utcnow())
    decide_report(world)
    failed_with(world, "action_component_unavailable")


def test_component_without_connection_is_invalid(app, world):
    """PREP-3"""
    set_row(ComponentVersion, world.components["takedown"], implementation_kind="function")
    decide_report(world)
    failed_with(world, "action_component_implementation_invalid")


@pytest.mark.parametrize(
    "key, expression, code",
    [
        ("idempotency_key", "'short'", "action_idempotency_key_invalid"),
        ("idempotency_key", "`12345678`", "action_idempotency_key_invalid"),
        ("target", "'post:1'", "action_target_invalid"),
        ("payload", "[decision.id]", "action_payload_invalid"),
        ("preconditions", "'x'", "action_preconditions_invalid"),
        ("payload", "{reason_code: decision.decision_code}", "action_payload_schema_invalid"),
        ("target", "targets[0].[", "action_configuration_invalid"),
    ],
)
def test_input_mapping_results_are_validated(app, world, key, expression, code):
    """PREP-4: idempotency key 8..200 chars; objects; payload matches the input schema."""
    set_graph(world, lambda g: node(g)["input_mapping"].__setitem__(key, expression))
    decide_report(world)
    failed_with(world, code)


def test_missing_preconditions_default_to_empty(app, world):
    """PREP-4: preconditions default to {}."""
    set_graph(world, lambda g: node(g)["input_mapping"].pop("preconditions"))
    proposal = decide_report(world)
    run = db.session.get(WorkflowRun, proposal.run_id)
    assert proposal.preconditions == {} and proposal.decision_id == run.decision_id  # the decision it enforces


def test_decision_code_precondition_pins_latest_decision(app, world):
    """PREP-5: the latest decision is pinned into the preconditions."""
    proposal = decide_report(world)
    decision = db.session.scalar(select(Decision).where(Decision.report_id == world.report_ids[0]))
    assert proposal.preconditions["latest_decision_id"] == decision.id
    assert proposal.decision_id == decision.id


def test_decision_code_precondition_must_match_latest_decision(app, world):
    """PREP-5: a different latest decision code is a changed precondition."""

    def mutate(g):
        g["trigger"]["decision_codes"].append("restrict_account")
        node(g)["input_mapping"]["preconditions"] = "{decision_code: 'remove_content'}"

    set_graph(world, mutate)
    decide_report(world, code="restrict_account")
    failed_with(world, "action_precondition_changed")


def test_replay_reuses_the_pinned_decision(app, world):
    """PREP-5, PREP-7: a replay after a newer decision keeps the pinned one (same digest)."""
    set_graph(
        world, lambda g: node(g)["input_mapping"].__setitem__("idempotency_key", "join(':', ['takedown', report.id])")
    )
    proposal = decide_report(world)
    with unit_of_work() as uow:  # a newer decision with the same code, not through the workflow
        uow.session.add(
            Decision(
                installation_id=world.installation_id,
                report_id=world.report_ids[0],
                seq=9,
                decision_code="remove_content",
                maker_id=world.users["moderator"],
            )
        )
        uow.commit()
    outcome = prepare_again(proposal)
    assert outcome.waiting and outcome.idempotent_replay and outcome.payload_digest == proposal.payload_digest


@pytest.mark.parametrize(
    "policy, authority, code",
    [
        ({"mode": "auto"}, "assist", "action_approval_policy_invalid"),
        ("human", "assist", "action_approval_policy_invalid"),
        ({"mode": "bounded_auto"}, "bounded_auto", "action_approval_policy_mismatch"),
    ],
)
def test_approval_policy_rules(app, world, policy, authority, code):
    """PREP-6: node mode human|bounded_auto, equal to the component's."""
    set_row(WorkflowVersion, world.workflow_version_id, authority_mode=authority)
    set_graph(world, lambda g: node(g)["config"].__setitem__("approval_policy", policy))
    decide_report(world)
    failed_with(world, code)


def test_bounded_auto_needs_bounded_auto_authority(app, platform):
    """PREP-6"""
    world = make_world(platform.url, approval_mode="bounded_auto")
    set_row(WorkflowVersion, world.workflow_version_id, authority_mode="assist")
    decide_report(world)
    failed_with(world, "action_authority_insufficient")


@pytest.mark.parametrize("value", [59, 2_678_401, "120", 120.5, True])
def test_expiry_must_be_an_integer_in_range(app, world, value):
    """ID-3"""
    set_graph(world, lambda g: node(g)["config"].__setitem__("expiry_seconds", value))
    decide_report(world)
    failed_with(world, "action_expiry_invalid")


def test_expiry_bounds_are_inclusive(app, world):
    """ID-3"""
    set_graph(world, lambda g: node(g)["config"].__setitem__("expiry_seconds", 60))
    proposal = decide_report(world)
    run = db.session.get(WorkflowRun, proposal.run_id)
    assert proposal.expires_at == run.created_at + timedelta(seconds=60)


def test_replays_never_create_a_second_row_or_task(app, world):
    """PREP-7: approval_required replays the open task."""
    proposal = decide_report(world)
    task = db.session.scalar(select(HumanTask).where(HumanTask.action_proposal_id == proposal.id))
    outcome = prepare_again(proposal)
    assert outcome.waiting and outcome.task_id == task.id and outcome.idempotent_replay
    assert db.session.scalar(select(func.count()).select_from(ActionProposal)) == 1
    assert db.session.scalar(select(func.count()).select_from(HumanTask)) == 1


def test_new_operation_for_same_step_is_refused(app, world):
    """PREP-7: a step that already proposed cannot propose a second operation."""
    proposal = decide_report(world)
    with unit_of_work() as uow:
        uow.session.add(
            Decision(
                installation_id=world.installation_id,
                report_id=world.report_ids[0],
                seq=9,
                decision_code="remove_content",
                maker_id=world.users["moderator"],
            )
        )
        uow.commit()
    with pytest.raises(ActionError) as caught:
        prepare_again(proposal)  # the idempotency key names the newer decision
    assert caught.value.code == "action_operation_payload_changed"
    assert db.session.scalar(select(func.count()).select_from(ActionProposal)) == 1


def test_changed_payload_for_same_operation_is_refused(app, world):
    """PREP-7: same operation id, different digest."""
    proposal = decide_report(world)
    set_graph(
        world,
        lambda g: node(g)["input_mapping"].__setitem__(
            "payload", "{reason_code: 'other', report_reference: report.public_reference}"
        ),
    )
    with pytest.raises(ActionError) as caught:
        prepare_again(proposal)
    assert caught.value.code == "action_operation_payload_changed"


@pytest.mark.parametrize(
    "state, terminal, port",
    [
        ("applied", True, "applied"),
        ("rejected", False, "rejected"),
        ("cancelled", True, "timeout"),
        ("failed", True, "error"),
    ],
)
def test_replay_answers_the_stored_outcome(app, world, state, terminal, port):
    """PREP-7: applied, rejected, cancelled (timeout), terminal failure (error)."""
    proposal = decide_report(world)
    set_row(
        ActionProposal,
        proposal.id,
        state=state,
        delivery_terminal=terminal,
        last_error_code="x_failed" if state == "failed" else None,
    )
    outcome = prepare_again(proposal)
    assert outcome.port == port and outcome.proposal_id == proposal.id and outcome.idempotent_replay
    if state == "failed":
        assert outcome.error_code == "x_failed"


def test_replay_of_terminal_failure_waits_for_recovery_when_asked(app, world):
    """PREP-7: awaiting recovery while authorized answers delivery pending."""
    proposal = decide_report(world)
    set_row(ActionProposal, proposal.id, state="failed", delivery_terminal=True, last_error_code="x_failed")
    outcome = prepare_again(proposal, await_recovery=True)
    assert outcome.waiting and outcome.recovery_required
    assert outcome.event_type == f"action.{proposal.id}.delivery-resolved"


def test_replay_of_approved_queues_it(app, world):
    """PREP-7: approved → queued and enqueued, no second row."""
    proposal = decide_report(world)
    set_row(ActionProposal, proposal.id, state="approved")
    outcome = prepare_again(proposal)
    assert outcome.waiting and reload(proposal).state == "queued"
    assert delivery_queue(app).count == 1


def test_approved_proposal_is_moved_on_by_the_run(app, world):
    """PREP-8, WAIT-1: the approval event wakes the run, which queues the action."""
    proposal = decide_report(world)
    approve(world, proposal)
    run = db.session.get(WorkflowRun, proposal.run_id)
    db.session.refresh(run)
    assert reload(proposal).state == "queued"
    assert run.waiting_event_type == f"action.{proposal.id}.delivery-resolved"


def test_component_of_another_installation_is_unavailable(app, world, platform):
    """PREP-3: a graph cannot borrow another tenant's component."""
    other = make_world(platform.url, slug="other")
    set_graph(world, lambda g: node(g)["config"].__setitem__("component_version_id", other.components["takedown"]))
    decide_report(world)
    failed_with(world, "action_component_unavailable")
