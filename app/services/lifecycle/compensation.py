"""Compensating actions: propose an action that undoes an applied one (SPEC COMP-1..3)."""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from typing import Any

from sqlalchemy import select

from app.domain.clock import utcnow
from app.domain.digests import json_problem
from app.domain.errors import ActionError, ApiError
from app.domain.expressions import schema_errors
from app.domain.preconditions import closed_to_ordinary_actions
from app.domain.proposal import delivery as delivery_rules
from app.domain.proposal.identity import compensation_operation_id, compensation_proposal
from app.domain.proposal.retirement import prepared_versions
from app.models import ActionProposal, OperatorUser, Report, move_proposal
from app.services.cases.tasks import open_approval_task
from app.services.lifecycle.action_targets import destination_of, load_action_component
from app.services.lifecycle.proposals import delivery_of, guard, insert_proposal, original_facts
from app.services.uow import Actor, unit_of_work

COMPENSATION_REFUSALS = {
    "action_compensation_unavailable": "Only an applied or compensation-required action can be compensated.",
    "action_notice_not_compensable": "A notice told the user why; it cannot be taken back. Compensate the "
    "restriction it was about instead.",
}


@dataclass(frozen=True)
class CompensationResult:
    proposal_id: str
    payload_digest: str
    state: str
    idempotent_replay: bool


def _object(value: Any, code: str, field: str) -> dict:
    if not isinstance(value, dict):
        raise ApiError(400, code, f"{field} must be a JSON object.", field)
    problem = json_problem(value)
    if problem:
        raise ApiError(400, code, f"{field} cannot be used: {problem}.", field)
    return value


def propose_compensation(
    proposal_id: str,
    *,
    component_version_id: Any,
    action_code: Any,
    target: Any,
    payload: Any,
    preconditions: Any = None,
    idempotency_key: str,
    operator: OperatorUser,
) -> CompensationResult:
    """Propose an action that compensates an applied one; it always needs approval.

    Args:
        proposal_id: the applied (or already compensation_required) original.
        component_version_id: the compensating component (e.g. ``restore``).
        action_code: 1..200 characters.
        target, payload, preconditions: JSON objects (payload checked against the
            component's input schema).
        idempotency_key: 1..200 characters; the operation id is
            ``compensation:{original operation}:{key}`` and a replay returns it.
        operator: the proposer (a reviewer or admin); they can never approve it.

    Raises:
        ApiError: 404 ``action_not_found``; 409 ``action_compensation_unavailable``;
            400 ``action_compensation_invalid``, ``action_target_invalid``,
            ``action_payload_invalid``, ``action_preconditions_invalid``,
            ``idempotency_key_invalid``; 422 ``action_payload_schema_invalid``
            and the component's availability codes (COMP-1, COMP-2).
    """
    with unit_of_work() as uow:
        result = propose_compensation_in(
            uow,
            proposal_id,
            component_version_id=component_version_id,
            action_code=action_code,
            target=target,
            payload=payload,
            preconditions=preconditions,
            idempotency_key=idempotency_key,
            operator=operator,
        )
        if not result.idempotent_replay:
            uow.commit()
    return result


def propose_compensation_in(
    uow,
    proposal_id: str,
    *,
    component_version_id: Any,
    action_code: Any,
    target: Any,
    payload: Any,
    preconditions: Any = None,
    idempotency_key: str,
    operator: OperatorUser,
) -> CompensationResult:
    """`propose_compensation` inside the caller's unit of work, which commits (or
    rolls back) with its own writes; e.g. a disagreeing emergency review (POL-6).
    Same arguments and errors as `propose_compensation`."""
    if not isinstance(idempotency_key, str) or not 1 <= len(idempotency_key) <= 200:
        raise ApiError(400, "idempotency_key_invalid", "An idempotency key of 1 to 200 characters is required.")
    session = uow.session
    original = session.get(ActionProposal, proposal_id)
    if original is None or original.installation_id != operator.installation_id:
        raise ApiError(404, "action_not_found", "No such action proposal.")
    operation_id = compensation_operation_id(original.operation_id, idempotency_key)
    existing = session.scalar(select(ActionProposal).where(ActionProposal.operation_id == operation_id))
    if existing is not None:
        return CompensationResult(existing.id, existing.payload_digest, existing.state, True)
    refusal = delivery_rules.compensation_refusal(delivery_of(original))
    if refusal:
        raise ApiError(409, refusal, COMPENSATION_REFUSALS[refusal])
    report = session.get(Report, original.report_id)
    if closed_to_ordinary_actions(report.state):  # PRE-2: only appeal corrections may act now
        raise ApiError(
            409, "action_case_no_longer_eligible", f"The case is {report.state}; it takes no new action."
        )
    target = _object(target, "action_target_invalid", "target")
    payload = _object(payload, "action_payload_invalid", "payload")
    preconditions = _object(
        {} if preconditions is None else preconditions, "action_preconditions_invalid", "preconditions"
    )
    if (
        not isinstance(component_version_id, str)
        or not component_version_id
        or not isinstance(action_code, str)
        or not 1 <= len(action_code) <= 200
    ):
        raise ApiError(
            400,
            "action_compensation_invalid",
            "component_version_id and an action_code of 1 to 200 characters are required.",
        )
    try:
        # FOUR-7: a retired version only if the action compensated was prepared with it
        prepared_with = prepared_versions(original.component_version_id, original.temporary)
        component = load_action_component(session, component_version_id, original.installation_id, prepared_with)
    except ActionError as error:
        raise ApiError(409, error.code, "That component cannot act.", "component_version_id") from error
    if schema_errors(payload, component.input_schema):
        raise ApiError(
            422,
            "action_payload_schema_invalid",
            "The payload does not match the component's input schema.",
            "payload",
        )
    new = compensation_proposal(
        original=original_facts(original),
        token=uuid.uuid4().hex,
        idempotency_key=idempotency_key,
        action_code=action_code,
        target=target,
        payload=payload,
        preconditions=preconditions,
        component_version_id=component.id,
        policy_version_id=report.policy_version_id,
        proposer_id=operator.id,
        now=utcnow(),
        destination=destination_of(session, component),  # FOUR-5
    )
    proposal = insert_proposal(session, new)
    open_approval_task(
        uow,
        proposal,
        task_id=new.task_id,
        queue_id=report.queue_id,
        extra={"compensates_proposal_id": original.id},
    )
    change = delivery_rules.mark_compensated(delivery_of(original))
    if change is not None and move_proposal(session, original.id, change.move, where=guard(change)):
        uow.audit(
            original.installation_id,
            f"action-compensation-required:{original.id}",
            "action.compensation_required",
            Actor("operator", operator.id),
            "action_proposal",
            original.id,
            {"compensation_proposal_id": new.id},
        )
    uow.audit(
        original.installation_id,
        f"action-compensation:{operation_id}",
        "workflow.compensation_proposed",
        Actor("operator", operator.id),
        "action_proposal",
        new.id,
        new.audit_details,
    )
    return CompensationResult(new.id, new.payload_digest, new.state, False)
