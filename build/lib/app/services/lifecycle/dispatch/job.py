"""The delivery job: claim, check, reserve, send, record, settle (SPEC DLV-1..7).

`deliver` is what an RQ worker runs for a proposal id. The database decides what
is due: a job that claims nothing returns at once, so duplicate or early jobs are
harmless and losing every job in Redis loses no action (the sweep re-enqueues).

Where a burst is queued for one connection, the job claims up to
``DELIVERY_BATCH_SIZE`` due proposals of the same component version in one
transaction, sends them one after the other, and records their outcomes in one
more: two commits for the batch instead of two per proposal. Each proposal keeps
its own claim, attempt row, budget reservation, guarded receipt write and audit
row; the jobs of the proposals it took along are taken off the queue.

The job's steps, one module each: `claim` (and `plan`, in the claim's
transaction), `send`, `record`.
"""

from __future__ import annotations

import logging
import time
from datetime import timedelta

from app.domain.clock import utcnow
from app.observability import bind
from app.services.lifecycle import connection_holds
from app.services.lifecycle.connection_holds import RECOVERY_ENDS
from app.services.lifecycle.dispatch import send
from app.services.lifecycle.dispatch.claim import Claimed, claim_batch
from app.services.lifecycle.dispatch.record import observe
from app.services.lifecycle.outcomes import DeliveryOutcome, lease_seconds
from app.services.uow import RetryWithSavepoints

log = logging.getLogger(__name__)


def deliver(proposal_id: str) -> DeliveryOutcome:
    """Run one delivery attempt of a proposal, if it is due, and of the other due
    proposals of its component version this job can take along (DLV-1..7).

    Two transactions around the HTTP requests: the first claims, checks, reserves
    budgets and records the attempt rows; the second records the outcomes, settles
    the budgets and resolves the runs. No transaction is held while a platform
    answers.

    Args:
        proposal_id: the proposal to deliver.

    Returns:
        The `DeliveryOutcome` of `proposal_id`; ``claimed`` is False when nothing was
        due. ``extra["batch"]`` holds the outcomes of the others taken along.
    """
    now = utcnow()
    started = time.monotonic()
    waiting = connection_holds.hold_before_claim(proposal_id, now)  # CONN-1..3: deferred unclaimed
    if waiting is not None:
        return DeliveryOutcome(claimed=False, proposal_id=proposal_id, error_code=waiting)
    lease = now + timedelta(seconds=lease_seconds())
    log_fields: dict[str, dict] = {}  # what each claimed proposal's log lines name
    try:
        batch = claim_batch(proposal_id, now, lease, log_fields, savepoints=False)
    except RetryWithSavepoints:  # a check or write failed: claim again, each member in a savepoint
        log.info("batch claim tried again with savepoints", extra={"proposal_id": proposal_id})
        log_fields.clear()
        batch = claim_batch(proposal_id, now, lease, log_fields, savepoints=True)
    if not batch:
        log.debug("nothing due for %s", proposal_id, extra={"proposal_id": proposal_id})
        return DeliveryOutcome(claimed=False, proposal_id=proposal_id)
    held = [c.proposal_id for c in batch if isinstance(c, DeliveryOutcome) and c.error_code in RECOVERY_ENDS]
    connection_holds.release_if_recovered(held)  # CONN-1: the connection closed as they were deferred
    sendable = [c for c in batch if isinstance(c, Claimed)]
    outcomes = send.send_and_record(sendable) if sendable else {}  # nothing to send: no empty transaction
    outcomes.update({c.proposal_id: c for c in batch if isinstance(c, DeliveryOutcome)})
    seconds = (time.monotonic() - started) / len(outcomes)
    for pid, outcome in outcomes.items():
        with bind(**log_fields[pid]):
            observe(outcome, seconds)
    named = outcomes.pop(proposal_id)
    if outcomes:
        named.extra["batch"] = list(outcomes.values())
    return named
