"""Events for waiting runs, written to the inbox and outbox first (SPEC EVT-1, EVT-2).

An event is written idempotently (its id is deterministic) in the same transaction
as the change it reports; the run is woken after commit. A failed wake-up leaves
the outbox row ``failed`` and the sweep retries it.
"""

from __future__ import annotations

from typing import Any

from app.domain.clock import utcnow
from app.domain.digests import canonical_json, sha256_digest
from app.models import ActionProposal, WorkflowEventInbox
from app.services.lifecycle.runs import write_dispatch
from app.services.uow import UnitOfWork


def resolution_event_id(proposal: ActionProposal) -> str:
    """``{proposal}:delivery-resolution``, with ``:{cycle}`` from cycle 2 (EVT-1)."""
    suffix = f":{proposal.delivery_cycle}" if proposal.delivery_cycle > 1 else ""
    return f"{proposal.id}:delivery-resolution{suffix}"


def write_event(
    uow: UnitOfWork,
    *,
    event_id: str,
    installation_id: str,
    run_id: str,
    event_type: str,
    event_key: str,
    source_type: str,
    source_id: str,
    payload: dict[str, Any],
) -> None:
    """Write an inbox event and its outbox dispatch, once; wake the run after commit."""
    payload_json = canonical_json(payload)
    now = utcnow()
    event = uow.insert_known(
        WorkflowEventInbox,
        dict(
            id=event_id,
            installation_id=installation_id,
            run_id=run_id,
            event_type=event_type,
            event_key=event_key,
            source_type=source_type,
            source_id=source_id,
            payload=payload,
            payload_digest=sha256_digest(payload_json),
            received_at=now,
            delivered_at=now,  # delivered by the wake-up before this commits (`write_dispatch`)
            delivery_attempts=1,
            last_error_code=None,
        ),
    )
    write_dispatch(
        uow,
        dispatch_id=event_id,
        installation_id=installation_id,
        run_id=run_id,
        operation="event",
        event_inbox_id=event_id,
        operation_key=f"workflow-event:{run_id}:{event_type}:{event_key}",
        event=event,
    )


def emit_delivery_resolution(uow: UnitOfWork, proposal: ActionProposal) -> None:
    """Tell the run that a delivery resolved: applied or terminal (DLV-7, EVT-1).

    Appeal corrections reconcile their appeal decision instead (CORR-4); a bulk
    item tells its batch (BULK-6).
    """
    if proposal.appeal_id:
        from app.services.lifecycle.corrections import reconcile_appeal_completion

        reconcile_appeal_completion(uow, proposal.report_id)
        return
    if proposal.bulk_batch_id:  # its batch, not a run, waits for it (BULK-6)
        from app.services.bulk.progress import item_resolved

        item_resolved(uow, proposal)
        return
    write_event(
        uow,
        event_id=resolution_event_id(proposal),
        installation_id=proposal.installation_id,
        run_id=proposal.run_id,
        event_type=f"action.{proposal.id}.delivery-resolved",
        event_key=f"action-delivery:{proposal.id}:{proposal.delivery_cycle}",
        source_type="system",
        source_id="action-delivery-worker",
        payload={
            "proposal_id": proposal.id,
            "state": proposal.state,
            "payload_digest": proposal.payload_digest,
            "error_code": proposal.last_error_code,
            "delivery_cycle": proposal.delivery_cycle,
        },
    )


def emit_approval_event(
    uow: UnitOfWork, proposal: ActionProposal, approval_id: str, decision: str, actor_id: str
) -> None:
    """Tell the run that a reviewer decided (APPR-5, EVT-1)."""
    write_event(
        uow,
        event_id=approval_id,
        installation_id=proposal.installation_id,
        run_id=proposal.run_id,
        event_type=f"action.{proposal.id}.resolved",
        event_key=f"action-approval:{approval_id}",
        source_type="operator",
        source_id=actor_id,
        payload={
            "proposal_id": proposal.id,
            "approval_id": approval_id,
            "decision": decision,
            "payload_digest": proposal.payload_digest,
        },
    )
