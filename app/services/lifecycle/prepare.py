"""Prepare an action when a workflow's action node runs, and finish its wait
(SPEC PREP-1..8, ID-1..3, WAIT-1..2).

The proposal's identity, digest and columns come from `app.domain.proposal.identity`;
which port it answers from `app.domain.proposal.ports`; its timeout from
`app.domain.proposal.delivery`. This module loads, writes and audits.
"""

from __future__ import annotations

from dataclasses import replace
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import select

from app.domain import workflow as wf
from app.domain.clock import utcnow
from app.domain.errors import ActionError
from app.domain.expressions import evaluate_mapping, schema_errors
from app.domain.proposal import delivery as delivery_rules
from app.domain.proposal import identity, temporary
from app.domain.proposal.destination import delivery_fields, describe
from app.domain.proposal.ports import Next, answer, timed_out_port
from app.domain.proposal.retirement import prepared_versions
from app.domain.workflow import NodeOutcome
from app.models import (
    ActionApproval,
    ActionProposal,
    Decision,
    HumanTask,
    Report,
    WorkflowRun,
    move_proposal,
)
from app.queueing import enqueue_delivery
from app.services.cases.snapshot import latest_decision, run_context
from app.services.cases.tasks import cancel_open_tasks, open_approval_task
from app.services.lifecycle.action_targets import destination_of, load_action_component
from app.services.lifecycle.proposals import delivery_of, guard, insert_proposal, run_facts
from app.services.uow import Actor, UnitOfWork

TIME_OUT_TRIES = 20  # each lost write means another writer moved the proposal on


def _pending_deadline(expires_at: datetime) -> datetime:
    return max(expires_at, utcnow() + timedelta(seconds=1))


def _delivery_pending(proposal: ActionProposal, **extra: Any) -> NodeOutcome:
    return wf.waiting(
        f"action.{proposal.id}.delivery-resolved",
        _pending_deadline(proposal.expires_at),
        proposal_id=proposal.id,
        payload_digest=proposal.payload_digest,
        **extra,
    )


def _schedule(uow: UnitOfWork, proposal: ActionProposal) -> None:
    proposal_id, cycle, attempts = proposal.id, proposal.delivery_cycle, proposal.delivery_attempt_count
    uow.after_commit(lambda: enqueue_delivery(proposal_id, cycle, attempts))


def _enqueue_approved(uow: UnitOfWork, proposal: ActionProposal) -> None:
    """approved → queued, due now (the run moves an approved action on)."""
    change = delivery_rules.enqueue_approved(utcnow(), proposal.not_before)
    move_proposal(uow.session, proposal.id, change.move, where=guard(change), values=change.values)
    uow.session.refresh(proposal)


def _pin_decision(uow: UnitOfWork, report_id: str, preconditions: dict, existing: ActionProposal | None) -> None:
    """Pin the decision a ``decision_code`` precondition refers to (PREP-5)."""
    if not isinstance(preconditions.get("decision_code"), str) or "latest_decision_id" in preconditions:
        return
    if existing is not None:
        pinned = existing.preconditions.get("latest_decision_id")
        if pinned is not None:
            preconditions["latest_decision_id"] = pinned
        return
    decision = latest_decision(uow.session, report_id)
    if decision is None or decision.decision_code != preconditions["decision_code"]:
        raise ActionError("action_precondition_changed")
    preconditions["latest_decision_id"] = decision.id


def _finished(proposal: ActionProposal, port: str, **extra: Any) -> NodeOutcome:
    return wf.finished(port, proposal_id=proposal.id, payload_digest=proposal.payload_digest, **extra)


def _replay(uow: UnitOfWork, existing: ActionProposal, digest: str, await_recovery: bool) -> NodeOutcome:
    """The stored outcome of an operation prepared before (PREP-7)."""
    if existing.payload_digest != digest:
        raise ActionError("action_operation_payload_changed")
    found = answer(delivery_of(existing), utcnow(), await_recovery=await_recovery)
    if found.next == Next.FINISH:
        return _finished(existing, found.port, error_code=found.error_code, idempotent_replay=True)
    if found.next == Next.RECOVER:
        return _delivery_pending(existing, recovery_required=True, idempotent_replay=True)
    if found.next == Next.AWAIT_APPROVAL:
        task = uow.session.scalar(select(HumanTask).where(HumanTask.action_proposal_id == existing.id))
        if task is None:
            raise ActionError("action_approval_task_missing")
        return wf.waiting(
            f"action.{existing.id}.resolved",
            _pending_deadline(task.due_at),
            task_id=task.id,
            proposal_id=existing.id,
            payload_digest=digest,
            idempotent_replay=True,
        )
    if found.next == Next.ENQUEUE:
        _enqueue_approved(uow, existing)
    _schedule(uow, existing)
    return _delivery_pending(existing, idempotent_replay=True)


def _protected_under_automation(session, mode: str, run: WorkflowRun, target: dict) -> dict[str, str] | None:
    """Why a bounded_auto action must wait for a person instead (POL-4): its target is a
    protected subject. Returns ``{"requested_mode", "protected_subject_id"}`` (recorded
    in the proposal's approval policy and its audit), or None when automation may go on."""
    if mode != "bounded_auto":
        return None
    from app.services.approval_routing import protection_of

    mark = protection_of(session, run.installation_id, target, run.report_id)
    if mark is None:
        return None
    return {"requested_mode": mode, "protected_subject_id": mark.id}


def prepare_action(
    uow: UnitOfWork,
    *,
    run: WorkflowRun,
    node_id: str,
    node: dict[str, Any],
    step_run_id: str,
    branch_key: str,
    authority_mode: str,
    await_recovery: bool = False,
) -> NodeOutcome:
    """Turn an action node into an immutable proposal, or replay the one made before.

    Args:
        uow: the run's unit of work (the proposal, its task and audit commit together).
        run: the workflow run; its created_at fixes the expiry (ID-3).
        node_id: the node's id in the graph.
        node: {"config": {component_version_id, action_code, approval_policy,
            expiry_seconds}, "input_mapping": {idempotency_key, target, payload,
            preconditions}} with JMESPath expressions.
        step_run_id: the step run; the proposal id is ``{step_run_id}:proposal`` (ID-1).
        branch_key: the branch ("main" when empty).
        authority_mode: the workflow version's authority.
        await_recovery: the caller waits for an operator retry of a terminal failure.

    Returns:
        A finished outcome (replays: applied, rejected, timeout, error) or a wait on
        ``action.{id}.resolved`` (human approval) or ``action.{id}.delivery-resolved``.

    Raises:
        ActionError: the PREP codes: action_authority_insufficient,
            action_configuration_invalid, action_component_unavailable,
            action_component_implementation_invalid, action_idempotency_key_invalid,
            action_target_invalid, action_payload_invalid, action_preconditions_invalid,
            action_payload_schema_invalid, action_precondition_changed,
            action_approval_policy_invalid, action_approval_policy_mismatch,
            action_expiry_invalid, action_operation_payload_changed.
    """
    if authority_mode in ("off", "shadow"):
        raise ActionError("action_authority_insufficient")  # PREP-1
    config = node.get("config") or {}
    component_version_id = config.get("component_version_id")
    action_code = config.get("action_code")
    if (
        not isinstance(component_version_id, str)
        or not component_version_id
        or not isinstance(action_code, str)
        or not action_code
    ):
        raise ActionError("action_configuration_invalid")  # PREP-2
    session = uow.session
    # PREP-3; FOUR-7: a replay of this step keeps the versions it was prepared with, even retired
    prior = session.get(ActionProposal, identity.proposal_id(step_run_id))
    prepared_with = prepared_versions(prior.component_version_id, prior.temporary) if prior is not None else ()
    component = load_action_component(session, component_version_id, run.installation_id, prepared_with)
    mapped = evaluate_mapping(node.get("input_mapping") or {}, run_context(session, run))
    key = identity.check_idempotency_key(mapped.get("idempotency_key"))  # PREP-4
    target, payload, preconditions = identity.mapped_objects(mapped)
    if schema_errors(payload, component.input_schema):
        raise ActionError("action_payload_schema_invalid")
    operation_id = identity.operation_id(run.id, node_id, branch_key, key)
    existing = session.scalar(select(ActionProposal).where(ActionProposal.operation_id == operation_id))
    _pin_decision(uow, run.report_id, preconditions, existing)
    mode = identity.approval_mode(config.get("approval_policy"), component.approval_policy.get("mode"), authority_mode)
    protected = _protected_under_automation(session, mode, run, target)
    if protected is not None:  # POL-4: a protected subject's action waits for a person, always
        mode = "human"
        config = {**config, "approval_policy": {**config["approval_policy"], "mode": mode, **protected}}
    # FOUR-5: the digest covers the delivery, except in the replay of a proposal stored
    # before FOUR-5 (its digest was made without it, ID-2)
    binds = existing is None or existing.delivery is not None
    ids = (identity.proposal_id(step_run_id), operation_id) if binds else None
    plan = temporary_plan(session, component, config, mapped, target, run.installation_id, ids, prepared_with)
    report = session.get(Report, run.report_id)
    new = identity.workflow_proposal(
        run=run_facts(run),
        step_run_id=step_run_id,
        node_id=node_id,
        branch_key=branch_key,
        config=config,
        mapped={**mapped, "target": target, "payload": payload, "preconditions": preconditions},
        component_version_id=component.id,
        policy_version_id=report.policy_version_id,
        mode=mode,
        authority_mode=authority_mode,
        now=utcnow(),
        temporary=plan,
        destination=destination_of(session, component) if binds else None,
    )
    if protected is not None:
        new = replace(new, audit_details={**new.audit_details, **protected})
    if existing is not None:
        return _replay(uow, existing, new.payload_digest, await_recovery)
    if session.get(ActionProposal, new.id) is not None:
        # This step already proposed another operation (its idempotency key changed).
        raise ActionError("action_operation_payload_changed")
    return _create(uow, new, queue_id=report.queue_id)


def temporary_plan(
    session, component, config: dict, mapped: dict, target: dict, installation_id: str, ids=None, prepared_with=()
):
    """The duration and reversal of a temporary action, as its digest covers them
    (TEMP-1): the node's settings over the component version's; the input mapping may
    compute ``duration_seconds`` and ``reversal_payload``. None for a permanent action.

    With ``ids`` (the action's proposal and operation ids) the plan also carries where
    its scheduled reversal will go and how its answer is read (FOUR-5): approved with
    the action, since that reversal needs no second approval.

    Raises:
        ActionError: ``action_duration_invalid`` (60 s .. 366 days),
            ``action_reversal_invalid`` (a reversal that cannot act or whose payload
            its component refuses).
    """
    settings = temporary.temporary_config(component.temporary, config.get("temporary"), mapped.get("duration_seconds"))
    if settings is None:
        return None
    if mapped.get("reversal_payload") is not None:
        settings = {**settings, "reversal": {**(settings.get("reversal") or {}), "payload": mapped["reversal_payload"]}}
    plan = temporary.plan(settings, target)
    try:
        reversal = load_action_component(session, plan.reversal.component_version_id, installation_id, prepared_with)
    except ActionError as error:
        raise ActionError(temporary.REVERSAL_INVALID) from error
    if schema_errors(plan.reversal.payload, reversal.input_schema):
        raise ActionError(temporary.REVERSAL_INVALID)
    if ids is not None:
        action_id, operation = ids
        reversal_id, reversal_operation = f"{action_id}:reversal", temporary.reversal_operation_id(operation)
        fields = delivery_fields(reversal_id, reversal_operation, plan.reversal.target)
        described = describe(destination_of(session, reversal), fields)
        plan = replace(plan, reversal=replace(plan.reversal, delivery=described))
    return plan.as_dict()


def _create(uow: UnitOfWork, new: identity.NewProposal, *, queue_id: str | None) -> NodeOutcome:
    """Insert a new proposal, with its approval task when a person must approve (PREP-8)."""
    if new.decision_id is not None:
        decision = uow.session.get(Decision, new.decision_id)
        if decision is None or decision.report_id != new.report_id:
            new = replace(new, decision_id=None)
    proposal = insert_proposal(uow.session, new)
    uow.audit(
        new.installation_id,
        f"action-proposed:{new.operation_id}",
        "action.proposed",
        Actor.system(new.run_id),
        "action_proposal",
        new.id,
        new.audit_details,
    )
    if new.needs_person:
        task = open_approval_task(uow, proposal, task_id=new.task_id, queue_id=queue_id)
        return wf.waiting(
            f"action.{new.id}.resolved",
            _pending_deadline(proposal.expires_at),
            proposal_id=new.id,
            payload_digest=new.payload_digest,
            task_id=task.id,
        )
    _schedule(uow, proposal)
    return _delivery_pending(proposal)


def complete_workflow_action(
    uow: UnitOfWork, proposal_id: str, *, timed_out: bool, await_recovery: bool = False
) -> NodeOutcome:
    """Resume a run that waited on an action: its event arrived or its wait timed out.

    Args:
        proposal_id: the proposal the run waited on.
        timed_out: the wait passed its deadline (WAIT-2).
        await_recovery: keep waiting on a terminal failure while authorized.

    Returns:
        The node outcome: a port, or a new wait (approved → delivery pending).

    Raises:
        ActionError: ``action_proposal_missing``, ``action_approval_digest_mismatch``.
    """
    session = uow.session
    proposal = session.get(ActionProposal, proposal_id)
    if proposal is None:
        raise ActionError("action_proposal_missing")
    found = answer(delivery_of(proposal), utcnow(), await_recovery=await_recovery, timed_out=timed_out)
    if found.next == Next.FINISH:
        return _finished(proposal, found.port, error_code=found.error_code)
    if found.next == Next.RECOVER:
        return _delivery_pending(proposal, recovery_required=True, error_code=found.error_code)
    if timed_out:
        return _time_out(uow, proposal)
    if found.next in (Next.SCHEDULE, Next.WAIT):
        if found.next == Next.SCHEDULE:
            _schedule(uow, proposal)
        return _delivery_pending(proposal)
    approval = session.scalar(select(ActionApproval).where(ActionApproval.proposal_id == proposal.id))
    if approval is None or approval.payload_digest != proposal.payload_digest:
        raise ActionError("action_approval_digest_mismatch")
    if approval.decision == "rejected":
        return _finished(proposal, "rejected")
    if found.next == Next.AWAIT_APPROVAL:  # an approval event for a changed proposal
        raise ActionError("action_approval_digest_mismatch")
    _enqueue_approved(uow, proposal)
    _schedule(uow, proposal)
    return _delivery_pending(proposal)


def _time_out(uow: UnitOfWork, proposal: ActionProposal) -> NodeOutcome:
    """The wait expired: cancel what was never sent, fail what may have been (WAIT-2).

    The choice is made from the row the write is guarded on (EDGE-3): when another
    writer moved the proposal first, it is read again and decided again, so the
    proposal always ends terminal and a receipt that won the race keeps its outcome.
    """
    session = uow.session
    for _ in range(TIME_OUT_TRIES):
        session.refresh(proposal)
        change = delivery_rules.time_out(delivery_of(proposal))
        if change is None:  # it ended meanwhile (applied, rejected, failed for good)
            break
        if move_proposal(session, proposal.id, change.move, where=guard(change), values=change.values):
            session.refresh(proposal)
            cancel_open_tasks(uow, proposal.id, reason="authorization_expired")
            uow.audit(
                proposal.installation_id,
                f"action-wait-timed-out:{proposal.operation_id}:{proposal.delivery_cycle}",
                "action.timed_out",
                Actor.system(proposal.run_id),
                "action_proposal",
                proposal.id,
                {"state": proposal.state, "error_code": proposal.last_error_code},
            )
            break
    else:
        raise ActionError("action_timeout_conflict")  # the run stays waiting; the sweep tries again
    return _finished(proposal, timed_out_port(delivery_of(proposal)))
