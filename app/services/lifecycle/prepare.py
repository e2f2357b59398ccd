"""Prepare an action when a workflow's action node runs, and finish its wait
(SPEC PREP-1..8, ID-1..3, WAIT-1..2)."""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import select

from app.domain import workflow as wf
from app.domain.clock import iso, parse_iso, utcnow
from app.domain.digests import payload_digest
from app.domain.errors import ActionError
from app.domain.expressions import evaluate_mapping, schema_errors
from app.domain.states import Move, ProposalState
from app.domain.workflow import NodeOutcome
from app.models import (
    ActionApproval,
    ActionProposal,
    ComponentVersion,
    HumanTask,
    Report,
    WorkflowRun,
    move_proposal,
)
from app.queueing import enqueue_delivery
from app.services.cases.snapshot import latest_decision, run_context
from app.services.cases.tasks import open_approval_task
from app.services.lifecycle.components import load_action_component
from app.services.uow import Actor, UnitOfWork

S = ProposalState
DEFAULT_EXPIRY_SECONDS = 86_400
MIN_EXPIRY_SECONDS = 60
MAX_EXPIRY_SECONDS = 2_678_400


def _object(value: Any, code: str) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise ActionError(code)
    return value


def expiry_seconds(config: dict[str, Any]) -> int:
    """The node's authorization lifetime in seconds (ID-3).

    Raises:
        ActionError: ``action_expiry_invalid`` unless an integer in 60..2,678,400.
    """
    value = config.get("expiry_seconds", DEFAULT_EXPIRY_SECONDS)
    if isinstance(value, bool) or not isinstance(value, int):
        raise ActionError("action_expiry_invalid")
    if not MIN_EXPIRY_SECONDS <= value <= MAX_EXPIRY_SECONDS:
        raise ActionError("action_expiry_invalid")
    return value


def approval_mode(config: dict[str, Any], component: ComponentVersion, authority_mode: str) -> str:
    """The approval mode of a node, checked against its component (PREP-6).

    Raises:
        ActionError: ``action_approval_policy_invalid``, ``action_approval_policy_mismatch``,
            ``action_authority_insufficient``.
    """
    policy = _object(config.get("approval_policy"), "action_approval_policy_invalid")
    requested = policy.get("mode")
    if requested not in ("human", "bounded_auto"):
        raise ActionError("action_approval_policy_invalid")
    if component.approval_policy.get("mode") != requested:
        raise ActionError("action_approval_policy_mismatch")
    if requested == "bounded_auto" and authority_mode != "bounded_auto":
        raise ActionError("action_authority_insufficient")
    return requested


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
    move_proposal(
        uow.session,
        proposal.id,
        Move.ENQUEUE_APPROVED,
        values=dict(next_attempt_at=utcnow(), lease_expires_at=None, last_error_code=None, delivery_terminal=False),
    )
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


def _replay(uow: UnitOfWork, existing: ActionProposal, digest: str, await_recovery: bool) -> NodeOutcome:
    """The stored outcome of an operation prepared before (PREP-7)."""
    if existing.payload_digest != digest:
        raise ActionError("action_operation_payload_changed")
    common = dict(proposal_id=existing.id, payload_digest=digest, idempotent_replay=True)
    state = existing.state
    if state in (S.APPLIED, S.COMPENSATION_REQUIRED):
        return wf.finished("applied", **common)
    if state == S.REJECTED:
        return wf.finished("rejected", **common)
    if state == S.CANCELLED:
        return wf.finished("timeout", **common)
    if state == S.FAILED and existing.delivery_terminal:
        if await_recovery and existing.expires_at > utcnow():
            return _delivery_pending(existing, recovery_required=True, idempotent_replay=True)
        return wf.finished("error", error_code=existing.last_error_code or "action_delivery_failed", **common)
    if state == S.APPROVAL_REQUIRED:
        task = uow.session.scalar(select(HumanTask).where(HumanTask.action_proposal_id == existing.id))
        if task is None:
            raise ActionError("action_approval_task_missing")
        return wf.waiting(f"action.{existing.id}.resolved", _pending_deadline(task.due_at), task_id=task.id, **common)
    if state == S.APPROVED:
        _enqueue_approved(uow, existing)
    _schedule(uow, existing)
    return _delivery_pending(existing, idempotent_replay=True)


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
    component = load_action_component(session, component_version_id, run.installation_id)  # PREP-3
    mapped = evaluate_mapping(node.get("input_mapping") or {}, run_context(session, run))
    idempotency_key = mapped.get("idempotency_key")
    if not isinstance(idempotency_key, str) or not 8 <= len(idempotency_key) <= 200:
        raise ActionError("action_idempotency_key_invalid")  # PREP-4
    target = _object(mapped.get("target"), "action_target_invalid")
    payload = _object(mapped.get("payload"), "action_payload_invalid")
    raw_preconditions = mapped.get("preconditions")
    preconditions = dict(
        _object({} if raw_preconditions is None else raw_preconditions, "action_preconditions_invalid")
    )
    if schema_errors(payload, component.input_schema):
        raise ActionError("action_payload_schema_invalid")

    proposal_id = f"{step_run_id}:proposal"
    operation_id = f"action:{run.id}:{node_id}:{branch_key or 'main'}:{idempotency_key}"
    existing = session.scalar(select(ActionProposal).where(ActionProposal.operation_id == operation_id))
    _pin_decision(uow, run.report_id, preconditions, existing)
    mode = approval_mode(config, component, authority_mode)
    expires_at = run.created_at + timedelta(seconds=expiry_seconds(config))
    report = session.get(Report, run.report_id)
    digest = payload_digest(
        {
            "schema_version": "1",
            "action_id": proposal_id,
            "action_code": action_code,
            "target": target,
            "payload": payload,
            "preconditions": preconditions,
            "component_version_id": component_version_id,
            "workflow_version_id": run.workflow_version_id,
            "policy_version_id": report.policy_version_id,
            "expires_at": iso(expires_at),
            "installation_id": run.installation_id,
        }
    )
    if existing is not None:
        return _replay(uow, existing, digest, await_recovery)
    if session.get(ActionProposal, proposal_id) is not None:
        # This step already proposed another operation (its idempotency key changed).
        raise ActionError("action_operation_payload_changed")
    return _create(
        uow,
        run=run,
        report=report,
        proposal_id=proposal_id,
        operation_id=operation_id,
        step_run_id=step_run_id,
        action_code=action_code,
        target=target,
        payload=payload,
        preconditions=preconditions,
        digest=digest,
        component=component,
        mode=mode,
        authority_mode=authority_mode,
        config=config,
        expires_at=expires_at,
    )


def _create(
    uow: UnitOfWork,
    *,
    run,
    report,
    proposal_id,
    operation_id,
    step_run_id,
    action_code,
    target,
    payload,
    preconditions,
    digest,
    component,
    mode,
    authority_mode,
    config,
    expires_at,
) -> NodeOutcome:
    """Insert a new proposal, with its approval task when a person must approve (PREP-8)."""
    now = utcnow()
    policy = {**config["approval_policy"], "expires_at": iso(expires_at)}
    # The decision it enforces: the pinned one, else the decision that started the run.
    decision_id = preconditions.get("latest_decision_id") or run.decision_id
    proposal = ActionProposal(
        id=proposal_id,
        installation_id=run.installation_id,
        report_id=run.report_id,
        run_id=run.id,
        step_run_id=step_run_id,
        appeal_id=None,
        decision_id=decision_id
        if isinstance(decision_id, str) and _decision_of(uow, decision_id, run.report_id)
        else None,
        action_code=action_code,
        target=target,
        payload=payload,
        preconditions=preconditions,
        payload_digest=digest,
        component_version_id=component.id,
        workflow_version_id=run.workflow_version_id,
        policy_version_id=report.policy_version_id,
        authority_mode=authority_mode,
        approval_mode=mode,
        approval_policy=policy,
        expires_at=parse_iso(iso(expires_at)),
        state=S.APPROVAL_REQUIRED if mode == "human" else S.QUEUED,
        operation_id=operation_id,
        created_by_type="system",
        created_by_id=run.id,
        next_attempt_at=None if mode == "human" else now,
        created_at=now,
        updated_at=now,
    )
    uow.session.add(proposal)
    uow.session.flush()
    uow.audit(
        run.installation_id,
        f"action-proposed:{operation_id}",
        "action.proposed",
        Actor.system(run.id),
        "action_proposal",
        proposal_id,
        {
            "action_code": action_code,
            "payload_digest": digest,
            "approval_mode": mode,
            "operation_id": operation_id,
            "expires_at": iso(expires_at),
        },
    )
    if mode == "human":
        task = open_approval_task(
            uow, proposal, task_id=f"{step_run_id}:action-approval-task", queue_id=report.queue_id
        )
        return wf.waiting(
            f"action.{proposal_id}.resolved",
            _pending_deadline(proposal.expires_at),
            proposal_id=proposal_id,
            payload_digest=digest,
            task_id=task.id,
        )
    _schedule(uow, proposal)
    return _delivery_pending(proposal)


def _decision_of(uow: UnitOfWork, decision_id: str, report_id: str) -> bool:
    from app.models import Decision

    decision = uow.session.get(Decision, decision_id)
    return decision is not None and decision.report_id == report_id


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
    common = dict(proposal_id=proposal.id, payload_digest=proposal.payload_digest)
    if proposal.state in (S.APPLIED, S.COMPENSATION_REQUIRED):
        return wf.finished("applied", **common)
    if proposal.state == S.REJECTED:
        return wf.finished("rejected", **common)
    if proposal.state == S.FAILED and proposal.delivery_terminal:
        if await_recovery and not timed_out and proposal.expires_at > utcnow():
            return _delivery_pending(proposal, recovery_required=True, error_code=proposal.last_error_code)
        return wf.finished("error", error_code=proposal.last_error_code or "action_delivery_failed", **common)
    if proposal.state == S.CANCELLED:
        return wf.finished("timeout", **common)
    if timed_out:
        return _time_out(uow, proposal)
    if proposal.state in (S.QUEUED, S.APPLYING, S.FAILED):
        if proposal.state != S.APPLYING:
            _schedule(uow, proposal)
        return _delivery_pending(proposal)
    approval = session.scalar(select(ActionApproval).where(ActionApproval.proposal_id == proposal.id))
    if approval is None or approval.payload_digest != proposal.payload_digest:
        raise ActionError("action_approval_digest_mismatch")
    if approval.decision == "rejected":
        return wf.finished("rejected", **common)
    if proposal.state == S.APPROVAL_REQUIRED:  # an approval event for a changed proposal
        raise ActionError("action_approval_digest_mismatch")
    _enqueue_approved(uow, proposal)
    _schedule(uow, proposal)
    return _delivery_pending(proposal)


def _time_out(uow: UnitOfWork, proposal: ActionProposal) -> NodeOutcome:
    """The wait expired: cancel what was never sent, fail what may have been (WAIT-2)."""
    from app.services.cases.tasks import cancel_open_tasks

    session = uow.session
    values = dict(delivery_terminal=True, lease_expires_at=None, last_error_code="action_confirmation_timed_out")
    not_terminal = ActionProposal.delivery_terminal.is_(False)
    sent = proposal.accepted_at is not None or proposal.state == S.APPLYING
    move = Move.WAIT_TIMED_OUT_SENT if sent else Move.WAIT_TIMED_OUT_UNSENT
    guard = (
        (ActionProposal.accepted_at.is_not(None) | (ActionProposal.state == S.APPLYING))
        if sent
        else (ActionProposal.accepted_at.is_(None) & (ActionProposal.state != S.APPLYING))
    )
    moved = move_proposal(session, proposal.id, move, where=(not_terminal, guard), values=values)
    session.refresh(proposal)
    if moved:
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
    if proposal.state in (S.APPLIED, S.COMPENSATION_REQUIRED):
        return wf.finished("applied", proposal_id=proposal.id, payload_digest=proposal.payload_digest)
    return wf.finished("timeout", proposal_id=proposal.id, payload_digest=proposal.payload_digest)
