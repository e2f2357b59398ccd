"""Record every outcome of a batch in one transaction: guarded receipt or failure
writes, budgets settled, runs woken (SPEC DLV-5..7), and each outcome logged and
counted (`observe`).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any

from sqlalchemy import select

from app.domain.errors import ActionError
from app.domain.states import ProposalState
from app.faults import failpoint
from app.metrics import record_delivery
from app.models import ActionProposal, StepRun, WorkflowRun, WorkflowVersion
from app.services.lifecycle.dispatch.claim import Claimed
from app.services.lifecycle.outcomes import DeliveryOutcome, write_failure, write_receipt
from app.services.lifecycle.receipt_intake import DEFERRAL_CODES
from app.services.uow import RetryWithSavepoints, unit_of_work

log = logging.getLogger(__name__)
S = ProposalState
P = ActionProposal


@dataclass
class Sent:
    """What one request came to: the platform's receipt, or the error and whether
    the request may have reached the platform."""

    receipt: Any = None
    error: ActionError | None = None
    sent: bool = False


def record_outcomes(results: list[tuple[Claimed, Sent]]) -> dict[str, DeliveryOutcome]:
    """Write every outcome of the batch in one transaction. The first try opens no
    savepoints; when anything in it fails, it is rolled back and the outcomes are
    written again, each in a savepoint: one that fails unexpectedly is then left to
    its lease (the sweep re-enqueues it, and the idempotency key makes a resend
    harmless), the others still commit."""
    try:
        return _record_in(results, savepoints=False)
    except RetryWithSavepoints:  # one failed: write them again, each in a savepoint
        log.info("batch outcomes written again with savepoints", extra={"batch": len(results)})
        return _record_in(results, savepoints=True)


def _record_in(results: list[tuple[Claimed, Sent]], savepoints: bool) -> dict[str, DeliveryOutcome]:
    outcomes: dict[str, DeliveryOutcome] = {}
    with unit_of_work(savepoints) as uow:
        loaded = _load_for_outcomes(uow.session, [c.identity.action_id for c, _ in results])
        for c, result in results:
            try:
                with uow.savepoint(), c.bound():
                    outcomes[c.identity.action_id] = _write(uow, c, result, loaded.proposals.get(c.identity.action_id))
            except Exception:
                log.exception("recording the outcome of %s failed; its lease will expire", c.identity.action_id)
                outcomes[c.identity.action_id] = DeliveryOutcome(
                    claimed=True, proposal_id=c.identity.action_id, state=S.APPLYING, attempt_number=c.attempt_number
                )
        failpoint("before_receipt_write")
        uow.commit()
    return outcomes


@dataclass
class _Fresh:
    """The batch's proposals as they are now, read in one query for the guarded
    outcome writes, and their runs, step runs and workflow versions: all stay
    referenced while the outcomes are written, so the runs' wake-ups find them in
    the session (and take each run guarded on it as read)."""

    proposals: dict[str, ActionProposal]
    held: list


def _load_for_outcomes(session, proposal_ids: list[str]) -> _Fresh:
    fresh = select(P).where(P.id.in_(proposal_ids)).execution_options(populate_existing=True)
    proposals = {p.id: p for p in session.scalars(fresh)}
    version_ids = {p.workflow_version_id for p in proposals.values() if p.workflow_version_id}
    versions = session.scalars(select(WorkflowVersion).where(WorkflowVersion.id.in_(version_ids))).all()
    step_ids = {p.step_run_id for p in proposals.values() if p.step_run_id}
    steps = session.scalars(select(StepRun).where(StepRun.id.in_(step_ids))).all() if step_ids else []
    run_ids = {p.run_id for p in proposals.values() if p.run_id}
    runs = session.scalars(select(WorkflowRun).where(WorkflowRun.id.in_(run_ids))).all() if run_ids else []
    return _Fresh(proposals, [*versions, *steps, *runs])


def _write(uow, c: Claimed, result: Sent, loaded: ActionProposal | None) -> DeliveryOutcome:
    pid = c.identity.action_id
    if result.error is None:
        return write_receipt(uow, pid, result.receipt, c.plan, c.lease, c.attempt_number, loaded=loaded)
    return write_failure(uow, pid, result.error, c.plan, c.attempt_number, c.cycle, c.lease, result.sent, loaded)


def observe(outcome: DeliveryOutcome, seconds: float) -> None:
    """Log and count the outcome of one claimed attempt."""
    if outcome.state == S.APPLIED:
        result = "applied"
    elif outcome.error_code in DEFERRAL_CODES:
        result = "deferred"
    elif outcome.state == S.FAILED:
        result = "failed" if outcome.terminal else "retry"
    else:
        result = "accepted" if outcome.state == S.QUEUED else (outcome.state or "unknown")
    record_delivery(result, outcome.error_code, outcome.extra.get("http_seconds"))
    log.info(
        "delivery attempt finished",
        extra={
            "outcome": result,
            "error_code": outcome.error_code,
            "state": outcome.state,
            "duration_ms": round(seconds * 1000, 1),
        },
    )
