"""Approval tasks: claim, release, complete, cancel (SPEC §4 approval tasks).

A task's state moves only through `move_row` and the table
`app.domain.case_states.TASK`."""

from __future__ import annotations

from sqlalchemy import select, update

from app.domain.case_states import OPEN_TASK_STATES, TaskMove, TaskState
from app.domain.clock import utcnow
from app.domain.digests import json_digest
from app.domain.errors import ApiError
from app.models import ActionProposal, HumanTask, HumanTaskClaim, OperatorUser, move_row
from app.services.lifecycle.maker_lookup import approval_verdict
from app.services.lifecycle.votes import NOT_ELIGIBLE, REFUSALS, eligibility_refusal
from app.services.uow import Actor, UnitOfWork, unit_of_work

APPROVAL_RESPONSE_SCHEMA = {
    "type": "object",
    "properties": {
        "decision": {"type": "string", "enum": ["approved", "rejected"]},
        "reason": {"type": "string", "maxLength": 1000},
    },
    "required": ["decision"],
    "additionalProperties": False,
}


def open_approval_task(
    uow: UnitOfWork, proposal, *, task_id: str, queue_id: str | None, extra: dict | None = None
) -> HumanTask:
    """The approval task of a proposal that needs a person (PREP-8): due at its
    expiry, showing what will be sent and the digest to confirm.

    Args:
        proposal: the new proposal (flushed).
        task_id: deterministic, so a replay finds the same task.
        queue_id: the report's queue (the task lands in that reviewers' queue).
        extra: more context, e.g. what a compensation compensates.
    """
    context = {
        "action_code": proposal.action_code,
        "target": proposal.target,
        "payload": proposal.payload,
        "preconditions": proposal.preconditions,
        "payload_digest": proposal.payload_digest,
        **(extra or {}),
    }
    task = HumanTask(
        id=task_id,
        installation_id=proposal.installation_id,
        report_id=proposal.report_id,
        run_id=proposal.run_id,
        step_run_id=proposal.step_run_id,
        task_type="approval",
        state=TaskState.OPEN,
        queue_id=queue_id,
        context=context,
        context_digest=json_digest(context),
        response_schema=APPROVAL_RESPONSE_SCHEMA,
        action_proposal_id=proposal.id,
        due_at=proposal.expires_at,
    )
    uow.session.add(task)
    uow.session.flush()
    from app.services.approval_notices import queue_notices

    queue_notices(uow, proposal)  # POL-7: its eligible approvers are told, through the outbox
    return task


def _release_claims(uow: UnitOfWork, task_id: str, reason: str) -> None:
    uow.session.execute(
        update(HumanTaskClaim)
        .where(HumanTaskClaim.task_id == task_id, HumanTaskClaim.released_at.is_(None))
        .values(released_at=utcnow(), release_reason=reason)
        .execution_options(synchronize_session=False)
    )


def finish_task_for_proposal(uow: UnitOfWork, proposal_id: str, move: TaskMove, reason: str) -> None:
    """Complete or cancel a proposal's open approval task and release its claims (APPR-5).

    Args:
        move: `TaskMove.COMPLETE` (its proposal was decided) or `TaskMove.CANCEL`.
        reason: why the claims end, e.g. ``authorization_expired``.
    """
    task = uow.session.scalar(select(HumanTask).where(HumanTask.action_proposal_id == proposal_id))
    if task is None or task.state not in OPEN_TASK_STATES:
        return
    completed_at = utcnow() if move == TaskMove.COMPLETE else None
    if move_row(uow.session, task, move, values={"completed_at": completed_at}):
        _release_claims(uow, task.id, reason)


def cancel_open_tasks(uow: UnitOfWork, proposal_id: str, reason: str) -> None:
    """Cancel a proposal's open approval task (it ended undecided) and release its claims."""
    finish_task_for_proposal(uow, proposal_id, TaskMove.CANCEL, reason)


def _load_task(uow: UnitOfWork, task_id: str, operator: OperatorUser) -> HumanTask:
    task = uow.session.get(HumanTask, task_id)
    if task is None or task.installation_id != operator.installation_id:
        raise ApiError(404, "task_not_found", "No such approval task.")
    return task


def claim_task(task_id: str, operator: OperatorUser) -> HumanTask:
    """Claim an open task for the operator, who must be able to decide its proposal.

    Raises:
        ApiError: 404 ``task_not_found``; 403 ``maker_checker_violation`` for one of
            the proposal's makers (FOUR-1); 403 ``approval_not_eligible`` for one no
            factor of its approval policies admits (POL-1); 409 ``task_not_claimable`` when it is
            claimed by someone else, completed or cancelled.
    """
    with unit_of_work() as uow:
        task = _load_task(uow, task_id, operator)
        proposal = uow.session.get(ActionProposal, task.action_proposal_id) if task.action_proposal_id else None
        if proposal is not None:
            allowed = approval_verdict(uow.session, proposal, operator)
            if not allowed:
                raise ApiError(403, "maker_checker_violation", allowed.reason)
            if eligibility_refusal(uow.session, proposal, operator) is not None:  # POL-1
                raise ApiError(403, NOT_ELIGIBLE, REFUSALS[NOT_ELIGIBLE][1])
        if task.state == TaskState.CLAIMED and task.assigned_operator_id == operator.id:
            return task
        if not move_row(uow.session, task, TaskMove.CLAIM, values={"assigned_operator_id": operator.id}):
            raise ApiError(409, "task_not_claimable", "Someone else claimed this task, or it is closed.")
        uow.session.add(HumanTaskClaim(installation_id=task.installation_id, task_id=task.id, operator_id=operator.id))
        uow.audit(
            task.installation_id,
            f"task-claimed:{task.id}:{utcnow().isoformat()}",
            "task.claimed",
            Actor("operator", operator.id),
            "human_task",
            task.id,
            {},
        )
        uow.commit()
    return task


def release_task(task_id: str, operator: OperatorUser) -> HumanTask:
    """Give a claimed task back to the queue.

    Raises:
        ApiError: 404 ``task_not_found``; 409 ``task_not_released`` unless the
            operator holds the claim.
    """
    with unit_of_work() as uow:
        task = _load_task(uow, task_id, operator)
        holder = (HumanTask.assigned_operator_id == operator.id,)
        if not move_row(uow.session, task, TaskMove.RELEASE, where=holder, values={"assigned_operator_id": None}):
            raise ApiError(409, "task_not_released", "Only the operator who claimed this task can release it.")
        _release_claims(uow, task.id, "released")
        uow.audit(
            task.installation_id,
            f"task-released:{task.id}:{utcnow().isoformat()}",
            "task.released",
            Actor("operator", operator.id),
            "human_task",
            task.id,
            {},
        )
        uow.commit()
    return task
