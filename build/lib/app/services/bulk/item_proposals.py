"""One item's proposal, made as the batch's workflow node would make it (SPEC BULK-3,
PREP-4, ID-1..3).

The node's input mapping reads the context a run would give it, with the item's
subject as the report's first target: so a batch and a single decision propose the
same payload for the same subject. Each item is its own proposal (its own digest,
preconditions and operation id ``action:{run}:{node}:item-{position}:{key}``); a
person approves it through the batch only (mode ``human``, no approval task).
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from datetime import datetime
from typing import Any

from app.domain.errors import ActionError
from app.domain.expressions import evaluate_mapping, schema_errors
from app.domain.proposal import identity
from app.domain.proposal.destination import Destination
from app.domain.proposal.identity import NewProposal, RunFacts

from .actions import BulkAction

# On the batch's own case (a pasted list, an author's subjects) the report has no
# target: the item's subject is its target, fixed by its digest, so a precondition
# naming the report's first target is left out there.
CASE_TARGET_PRECONDITION = "target_reference"


@dataclass(frozen=True)
class ItemCase:
    """The case an item is proposed on: its own report (selected through reports) or
    the batch's case, with the decision it enforces.

    Attributes:
        report: `app.services.cases.snapshot.report_json` of that report.
        decision: `decision_json` of the decision recorded for it.
        own_report: the item's own report (its first target is the subject).
    """

    report: dict[str, Any]
    decision: dict[str, Any] | None
    own_report: bool


def item_context(case: ItemCase, reference: str, kind: str, run: dict[str, Any]) -> dict[str, Any]:
    """The JSON an action node's input mapping reads, for one item (PREP-4)."""
    return {
        "report": case.report,
        "targets": [{"target_reference": reference, "kind": kind}],
        "decision": case.decision,
        "appeal": None,
        "run": run,
    }


def mapped_item(action: BulkAction, input_schema: dict, case: ItemCase, reference: str, kind: str, run: dict) -> dict:
    """The evaluated input mapping of one item, checked (PREP-4, PREP-5).

    Returns:
        {idempotency_key, target, payload, preconditions, ...} with preconditions
        pinned to the item's decision.

    Raises:
        ActionError: the PREP codes of a mapping the component refuses
            (``action_payload_schema_invalid``, ``action_target_invalid``, ...).
    """
    mapped = evaluate_mapping(action.node.get("input_mapping") or {}, item_context(case, reference, kind, run))
    identity.check_idempotency_key(mapped.get("idempotency_key"))
    target, payload, preconditions = identity.mapped_objects(mapped)
    if schema_errors(payload, input_schema):
        raise ActionError("action_payload_schema_invalid")
    if not case.own_report:
        preconditions.pop(CASE_TARGET_PRECONDITION, None)
    if isinstance(preconditions.get("decision_code"), str) and case.decision is not None:
        preconditions.setdefault("latest_decision_id", case.decision["id"])
    return {**mapped, "target": target, "payload": payload, "preconditions": preconditions}


def item_proposal(
    *,
    action: BulkAction,
    batch_id: str,
    position: int,
    run: RunFacts,
    mapped: dict[str, Any],
    policy_version_id: str | None,
    now: datetime,
    destination: Destination,
    temporary: dict[str, Any] | None = None,
) -> NewProposal:
    """The proposal of one item (BULK-3): human approval through the batch.

    Args:
        run: the batch's run, with the item's report and decision.
        mapped: `mapped_item`'s result.
        destination: what is in force for the component (FOUR-5), read once per batch.

    Raises:
        ActionError: the identity codes of `identity.workflow_proposal`.
    """
    config = {**action.config, "approval_policy": {"mode": "human", "bulk_batch_id": batch_id}}
    new = identity.workflow_proposal(
        run=run,
        step_run_id=f"{batch_id}:{position}",
        node_id=action.node_id,
        branch_key=f"item-{position}",
        config=config,
        mapped=mapped,
        component_version_id=action.component_version_id,
        policy_version_id=policy_version_id,
        mode="human",
        authority_mode=action.authority_mode,
        now=now,
        temporary=temporary,
        destination=destination,
    )
    return replace(new, bulk_batch_id=batch_id, task_id=None)
