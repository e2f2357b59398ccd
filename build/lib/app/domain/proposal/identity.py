"""A proposal's identity, its digest and its column values when it is created
(SPEC ID-1..3, PREP-8, COMP-2, CORR).

Three kinds of proposal are created: a workflow action node's (`workflow_proposal`),
an operator's compensation (`compensation_proposal`) and an appeal correction
(`correction_proposal`); these two, and a temporary action's reversals
(`temporary`), follow an original through one constructor (`following_proposal`).
Each builder returns a `NewProposal` of plain values, its
digest computed over exactly the fields ID-2 names; the service inserts it.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta
from typing import Any

from app.domain.clock import iso, parse_iso
from app.domain.digests import payload_digest
from app.domain.errors import ActionError
from app.domain.proposal.destination import Destination, delivery_fields, describe
from app.domain.proposal.schedule import check_not_before, scheduled_time
from app.domain.states import ProposalState

S = ProposalState
SCHEMA_VERSION = "1"
DEFAULT_EXPIRY_SECONDS = 86_400
MIN_EXPIRY_SECONDS = 60
MAX_EXPIRY_SECONDS = 2_678_400
COMPENSATION_EXPIRY_SECONDS = 86_400
CORRECTION_EXPIRY_SECONDS = 7 * 86_400
MIN_IDEMPOTENCY_KEY, MAX_IDEMPOTENCY_KEY = 8, 200


def proposal_id(step_run_id: str) -> str:
    """``{step_run_id}:proposal`` (ID-1)."""
    return f"{step_run_id}:proposal"


def operation_id(run_id: str, node_id: str, branch_key: str | None, idempotency_key: str) -> str:
    """``action:{run_id}:{node_id}:{branch_key or "main"}:{idempotency_key}`` (ID-1)."""
    return f"action:{run_id}:{node_id}:{branch_key or 'main'}:{idempotency_key}"


def compensation_operation_id(original_operation_id: str, idempotency_key: str) -> str:
    """``compensation:{original operation}:{idempotency key}`` (COMP-2)."""
    return f"compensation:{original_operation_id}:{idempotency_key}"


def correction_operation_id(original_operation_id: str, appeal_decision_id: str) -> str:
    """One correction per original operation and appeal decision (CORR)."""
    return f"correction:{original_operation_id}:{appeal_decision_id}"


def check_idempotency_key(value: Any) -> str:
    """A node's idempotency key: a string of 8..200 characters (PREP-4).

    Raises:
        ActionError: ``action_idempotency_key_invalid``.
    """
    if not isinstance(value, str) or not MIN_IDEMPOTENCY_KEY <= len(value) <= MAX_IDEMPOTENCY_KEY:
        raise ActionError("action_idempotency_key_invalid")
    return value


def expiry_seconds(config: dict[str, Any]) -> int:
    """The node's authorization lifetime in seconds (ID-3).

    Args:
        config: the action node's config; ``expiry_seconds`` defaults to 86,400.

    Raises:
        ActionError: ``action_expiry_invalid`` unless an integer in 60..2,678,400.
    """
    value = config.get("expiry_seconds", DEFAULT_EXPIRY_SECONDS)
    if isinstance(value, bool) or not isinstance(value, int):
        raise ActionError("action_expiry_invalid")
    if not MIN_EXPIRY_SECONDS <= value <= MAX_EXPIRY_SECONDS:
        raise ActionError("action_expiry_invalid")
    return value


def expires_at(start: datetime, seconds: float) -> datetime:
    """``start + seconds`` at the millisecond precision the digest carries (ID-3)."""
    return parse_iso(iso(start + timedelta(seconds=seconds)))


def approval_mode(node_policy: Any, component_mode: str | None, authority_mode: str) -> str:
    """The approval mode of a node, checked against its component (PREP-6).

    Args:
        node_policy: the node config's ``approval_policy`` (an object with ``mode``).
        component_mode: the component version's approval policy mode.
        authority_mode: the workflow version's authority.

    Raises:
        ActionError: ``action_approval_policy_invalid``, ``action_approval_policy_mismatch``,
            ``action_authority_insufficient``.
    """
    if not isinstance(node_policy, dict):
        raise ActionError("action_approval_policy_invalid")
    requested = node_policy.get("mode")
    if requested not in ("human", "bounded_auto"):
        raise ActionError("action_approval_policy_invalid")
    if component_mode != requested:
        raise ActionError("action_approval_policy_mismatch")
    if requested == "bounded_auto" and authority_mode != "bounded_auto":
        raise ActionError("action_authority_insufficient")
    return requested


def digest_material(
    *,
    action_id: str,
    action_code: str,
    target: dict[str, Any],
    payload: dict[str, Any],
    preconditions: dict[str, Any],
    component_version_id: str,
    expires_at: datetime,
    installation_id: str,
    workflow_version_id: str | None = None,
    policy_version_id: str | None = None,
    compensates_proposal_id: str | None = None,
    temporary: dict[str, Any] | None = None,
    not_before: datetime | None = None,
    reverses_proposal_id: str | None = None,
    delivery: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """The fields a proposal's payload digest covers (ID-2, COMP-2, TEMP-1, TEMP-4, FOUR-5).

    A compensation covers ``compensates_proposal_id`` in place of the workflow and
    policy versions; every other proposal covers those two. A temporary action also
    covers its duration and planned reversal (``temporary``), a scheduled one its
    ``not_before``, a reversal the action it reverses; each only when set, so the
    digest of every other proposal is what ID-2 alone gives.

    ``delivery`` (FOUR-5) is where the action goes and how its answer is read
    (`destination.describe`). Every proposal prepared since FOUR-5 carries it; it is
    left out when None, so the material of a proposal stored before (no description)
    is exactly what it was and its digest still verifies. ``schema_version`` stays
    "1": it is also the request body's version platforms read (SPEC §5).

    Returns:
        The material as a JSON-compatible dict (``expires_at`` as ISO-8601 UTC).
    """
    material: dict[str, Any] = {
        "schema_version": SCHEMA_VERSION,
        "action_id": action_id,
        "action_code": action_code,
        "target": target,
        "payload": payload,
        "preconditions": preconditions,
        "component_version_id": component_version_id,
    }
    if compensates_proposal_id is not None:
        material["compensates_proposal_id"] = compensates_proposal_id
    else:
        material["workflow_version_id"] = workflow_version_id
        material["policy_version_id"] = policy_version_id
    material["expires_at"] = iso(expires_at)
    material["installation_id"] = installation_id
    if temporary is not None:
        material["temporary"] = temporary
    if not_before is not None:
        material["not_before"] = iso(not_before)
    if reverses_proposal_id is not None:
        material["reverses_proposal_id"] = reverses_proposal_id
    if delivery is not None:
        material["delivery"] = delivery
    return material


@dataclass(frozen=True)
class NewProposal:
    """Every column of a proposal being created, as plain values (PREP-8)."""

    id: str
    operation_id: str
    installation_id: str
    report_id: str
    run_id: str
    step_run_id: str
    action_code: str
    target: dict[str, Any]
    payload: dict[str, Any]
    preconditions: dict[str, Any]
    component_version_id: str
    workflow_version_id: str | None
    policy_version_id: str | None
    authority_mode: str
    approval_mode: str
    approval_policy: dict[str, Any]
    expires_at: datetime
    state: str
    created_by_type: str
    created_by_id: str
    created_at: datetime
    payload_digest: str = ""
    appeal_id: str | None = None
    decision_id: str | None = None
    compensates_proposal_id: str | None = None
    next_attempt_at: datetime | None = None
    not_before: datetime | None = None  # TEMP-4
    temporary: dict[str, Any] | None = None  # TEMP-1: {duration_seconds, reversal}
    reverses_proposal_id: str | None = None  # TEMP-2: the temporary action a reversal ends
    task_id: str | None = None  # its approval task, when a person must approve
    delivery: dict[str, Any] | None = None  # FOUR-5: where it goes, how its answer is read
    bulk_batch_id: str | None = None  # BULK-3: the batch whose one approval authorizes it
    audit_details: dict[str, Any] = field(default_factory=dict)

    @property
    def needs_person(self) -> bool:
        return self.state == S.APPROVAL_REQUIRED


def _digested(proposal: NewProposal, destination: Destination | None = None) -> NewProposal:
    """The proposal with its delivery description (FOUR-5, from `destination`, what is
    in force) and its digest over the ID-2 material."""
    if destination is not None:
        fields = delivery_fields(proposal.id, proposal.operation_id, proposal.target)
        proposal = replace(proposal, delivery=describe(destination, fields))
    material = digest_material(
        action_id=proposal.id,
        action_code=proposal.action_code,
        target=proposal.target,
        payload=proposal.payload,
        preconditions=proposal.preconditions,
        component_version_id=proposal.component_version_id,
        expires_at=proposal.expires_at,
        installation_id=proposal.installation_id,
        workflow_version_id=proposal.workflow_version_id,
        policy_version_id=proposal.policy_version_id,
        compensates_proposal_id=proposal.compensates_proposal_id,
        temporary=proposal.temporary,
        not_before=proposal.not_before,
        reverses_proposal_id=proposal.reverses_proposal_id,
        delivery=proposal.delivery,
    )
    digest = payload_digest(material)
    details = {"action_code": proposal.action_code, "payload_digest": digest, **proposal.audit_details}
    return replace(proposal, payload_digest=digest, audit_details=details)


def enforced_decision_id(preconditions: dict[str, Any], run_decision_id: str | None) -> str | None:
    """The decision a workflow proposal enforces: the one its preconditions pin,
    else the decision that started its run (PREP-5)."""
    pinned = preconditions.get("latest_decision_id")
    decision_id = pinned if pinned is not None else run_decision_id
    return decision_id if isinstance(decision_id, str) else None


@dataclass(frozen=True)
class RunFacts:
    """The workflow run a node belongs to, as plain values."""

    id: str
    installation_id: str
    report_id: str
    workflow_version_id: str
    decision_id: str | None
    created_at: datetime


def workflow_proposal(
    *,
    run: RunFacts,
    step_run_id: str,
    node_id: str,
    branch_key: str | None,
    config: dict[str, Any],
    mapped: dict[str, Any],
    component_version_id: str,
    policy_version_id: str | None,
    mode: str,
    authority_mode: str,
    now: datetime,
    temporary: dict[str, Any] | None = None,
    destination: Destination | None = None,
) -> NewProposal:
    """The proposal an action node makes (ID-1..3, PREP-4, PREP-8, TEMP-1, TEMP-4).

    Args:
        run: the run; its created_at fixes the expiry (ID-3).
        config: the node's config (action_code, approval_policy, expiry_seconds).
        mapped: the evaluated input mapping {idempotency_key, target, payload,
            preconditions}; preconditions already pinned (PREP-5).
        mode: the checked approval mode (`approval_mode`).
        now: the creation time.
        temporary: the checked duration and reversal plan of a temporary action
            (`temporary.plan(...).as_dict()`), covered by the digest (TEMP-1).
        destination: the component's kind and reference and its connection's base
            URL in force: the digest covers where it goes and how it is read (FOUR-5).

    Returns:
        A `NewProposal`: ``approval_required`` with a task for ``human``, ``queued``
        and due now for ``bounded_auto``.

    Raises:
        ActionError: ``action_idempotency_key_invalid``, ``action_target_invalid``,
            ``action_payload_invalid``, ``action_preconditions_invalid``,
            ``action_expiry_invalid``, ``action_not_before_invalid``.
    """
    key = check_idempotency_key(mapped.get("idempotency_key"))
    target, payload, preconditions = mapped_objects(mapped)
    expiry = expires_at(run.created_at, expiry_seconds(config))
    not_before = check_not_before(scheduled_time(config, mapped, run.created_at), now, expiry)  # TEMP-4
    human = mode == "human"
    operation = operation_id(run.id, node_id, branch_key, key)
    return _digested(
        NewProposal(
            id=proposal_id(step_run_id),
            operation_id=operation,
            installation_id=run.installation_id,
            report_id=run.report_id,
            run_id=run.id,
            step_run_id=step_run_id,
            action_code=config["action_code"],
            target=target,
            payload=payload,
            preconditions=preconditions,
            component_version_id=component_version_id,
            workflow_version_id=run.workflow_version_id,
            policy_version_id=policy_version_id,
            authority_mode=authority_mode,
            approval_mode=mode,
            approval_policy={**config["approval_policy"], "expires_at": iso(expiry)},
            expires_at=expiry,
            state=S.APPROVAL_REQUIRED if human else S.QUEUED,
            created_by_type="system",
            created_by_id=run.id,
            created_at=now,
            decision_id=enforced_decision_id(preconditions, run.decision_id),
            next_attempt_at=None if human else max(now, not_before or now),
            not_before=not_before,
            temporary=temporary,
            task_id=f"{step_run_id}:action-approval-task" if human else None,
            audit_details={"approval_mode": mode, "operation_id": operation, "expires_at": iso(expiry)},
        ),
        destination,
    )


def _object(value: Any, code: str) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise ActionError(code)
    return value


def mapped_objects(mapped: dict[str, Any]) -> tuple[dict, dict, dict]:
    """(target, payload, preconditions) of an evaluated input mapping (PREP-4).

    Raises:
        ActionError: ``action_target_invalid``, ``action_payload_invalid``,
            ``action_preconditions_invalid``.
    """
    target = _object(mapped.get("target"), "action_target_invalid")
    payload = _object(mapped.get("payload"), "action_payload_invalid")
    raw = mapped.get("preconditions")
    preconditions = dict(_object({} if raw is None else raw, "action_preconditions_invalid"))
    return target, payload, preconditions


@dataclass(frozen=True)
class OriginalFacts:
    """The applied proposal a new one follows, as plain values: the compensation
    (COMP-2) or appeal correction (CORR-1) that answers it, or the reversal that ends
    it (TEMP-2, TEMP-3)."""

    id: str
    operation_id: str
    installation_id: str
    report_id: str
    run_id: str
    step_run_id: str
    workflow_version_id: str | None
    target: dict[str, Any]
    payload_digest: str
    policy_version_id: str | None = None
    decision_id: str | None = None
    approval_mode: str = ""
    authority_mode: str = ""
    temporary: dict[str, Any] | None = None  # TEMP-1: {duration_seconds, reversal}


def following_proposal(original: OriginalFacts, destination: Destination | None = None, **columns: Any) -> NewProposal:
    """A new proposal following `original` (COMP-2, CORR-1, TEMP-2, TEMP-3): the one
    place its case, run, step and workflow version are taken from the original.

    Args:
        original: the applied proposal it follows.
        destination: the delivery in force (FOUR-5), described into it; None keeps
            ``columns["delivery"]`` as given.
        columns: every other `NewProposal` field.

    Returns:
        The `NewProposal`, its digest computed (ID-2).
    """
    return _digested(
        NewProposal(
            installation_id=original.installation_id,
            report_id=original.report_id,
            run_id=original.run_id,
            step_run_id=original.step_run_id,
            workflow_version_id=original.workflow_version_id,
            **columns,
        ),
        destination,
    )


def for_a_person(proposal_id: str, expiry: datetime, **mark: Any) -> dict[str, Any]:
    """The columns of a proposal that follows an original and only a person may
    approve (COMP-2, CORR-1, TEMP-3): assist authority, human mode, its approval
    task, and `mark` naming what it is in its approval policy.

    Args:
        proposal_id: the new proposal's id (its task is ``{id}:approval-task``).
        expiry: when its approval lapses (UTC).
        mark: one entry, e.g. ``compensation=True``.
    """
    return dict(
        authority_mode="assist",
        approval_mode="human",
        approval_policy={"mode": "human", "expires_at": iso(expiry), **mark},
        state=S.APPROVAL_REQUIRED,
        task_id=f"{proposal_id}:approval-task",
    )


def compensation_proposal(
    *,
    original: OriginalFacts,
    token: str,
    idempotency_key: str,
    action_code: str,
    target: dict[str, Any],
    payload: dict[str, Any],
    preconditions: dict[str, Any],
    component_version_id: str,
    policy_version_id: str | None,
    proposer_id: str,
    now: datetime,
    destination: Destination | None = None,
) -> NewProposal:
    """An operator's compensation of an applied proposal (COMP-2): human approval
    always, 24 h expiry, its digest covering ``compensates_proposal_id``.

    Args:
        token: a random hex string; the proposal id is ``cmp_{token}``.
        proposer_id: the operator proposing it (one of its makers, FOUR-1).
    """
    proposal = f"cmp_{token}"
    expiry = expires_at(now, COMPENSATION_EXPIRY_SECONDS)
    return following_proposal(
        original,
        destination,
        id=proposal,
        operation_id=compensation_operation_id(original.operation_id, idempotency_key),
        action_code=action_code,
        target=target,
        payload=payload,
        preconditions=preconditions,
        component_version_id=component_version_id,
        policy_version_id=policy_version_id,
        expires_at=expiry,
        created_by_type="operator",
        created_by_id=proposer_id,
        created_at=now,
        compensates_proposal_id=original.id,
        **for_a_person(proposal, expiry, compensation=True),
        audit_details={"compensates_proposal_id": original.id},
    )


def correction_proposal(
    *,
    correction_id: str,
    original: OriginalFacts,
    appeal_id: str,
    appeal_decision_id: str,
    appeal_decision_at: datetime,
    contested_decision_id: str,
    action_code: str,
    payload: dict[str, Any],
    component_version_id: str,
    policy_version_id: str | None,
    now: datetime,
    destination: Destination | None = None,
) -> NewProposal:
    """The automated correction of an original action an appeal overturned (CORR-1):
    same target, human approval, 7 days from the appeal decision.

    Its preconditions name the appeal decision, the original's digest and the
    contested decision, so CORR-3 can check them before every attempt.
    """
    proposal = f"{correction_id}:proposal"
    expiry = expires_at(appeal_decision_at, CORRECTION_EXPIRY_SECONDS)
    operation = correction_operation_id(original.operation_id, appeal_decision_id)
    return following_proposal(
        original,
        destination,
        id=proposal,
        operation_id=operation,
        action_code=action_code,
        target=original.target,
        payload=payload,
        preconditions={
            "appeal_decision_id": appeal_decision_id,
            "original_payload_digest": original.payload_digest,
            "latest_decision_id": contested_decision_id,
        },
        component_version_id=component_version_id,
        policy_version_id=policy_version_id,
        expires_at=expiry,
        created_by_type="system",
        created_by_id=f"appeal-decision:{appeal_decision_id}",
        created_at=now,
        appeal_id=appeal_id,
        decision_id=contested_decision_id,
        **for_a_person(proposal, expiry, appeal_correction=correction_id),
        audit_details={"approval_mode": "human", "operation_id": operation, "appeal_correction_id": correction_id},
    )
