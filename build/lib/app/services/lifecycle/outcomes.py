"""What a claimed delivery attempt came to, written after its request (SPEC DLV-4..7).

Below both the delivery job (`delivery`) and the platform kinds (`platforms`): each
sends its own requests, and both record the outcome here, so the two never import
each other. Every write is guarded by the attempt, the delivery cycle and the lease,
so a late worker cannot overwrite a newer attempt.

`write_receipt` and `write_failure` run in the caller's unit of work (a batch
records several proposals in one commit); `save_sync_receipt` and `record_failure`
open their own.
"""

from __future__ import annotations

import logging
import os
import threading
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

import requests
from flask import current_app
from sqlalchemy import bindparam, delete, func, update

from app import egress
from app.domain.clock import utcnow
from app.domain.digests import sha256_digest
from app.domain.errors import ActionError
from app.domain.proposal import delivery as delivery_rules
from app.domain.proposal.delivery import Lease
from app.domain.states import LEASE_SECONDS, Move
from app.faults import failpoint
from app.models import ActionProposal, ConnectionAttempt, move_loaded, new_id, statements
from app.services.lifecycle import breaker
from app.services.lifecycle import budget_reservations
from app.services.lifecycle.proposals import delivery_of
from app.services.lifecycle.events import emit_delivery_resolution
from app.services.lifecycle.receipt_intake import AttemptGuard, after_result, save_receipt
from app.services.uow import Actor, UnitOfWork, unit_of_work

log = logging.getLogger(__name__)
UNEXPECTED_FAILURE = "action_delivery_failed"
_http = threading.local()


@dataclass
class DeliveryOutcome:
    """What one delivery job did for one proposal (for logs, metrics and tests)."""

    claimed: bool
    proposal_id: str
    state: str | None = None
    attempt_number: int | None = None
    error_code: str | None = None
    terminal: bool = False
    extra: dict[str, Any] = field(default_factory=dict)


class AttemptRow:
    """The connection_attempts row of one request: written (with the claim, or
    before a platform kind's next request) before the request leaves, finished
    after it, whatever happened (DLV-4, PLAT-4)."""

    def __init__(
        self,
        uow: UnitOfWork,
        *,
        installation_id: str,
        proposal_id: str,
        attempt_number: int,
        delivery_cycle: int,
        connection_version_id: str,
        purpose: str,
        method: str,
        url: str,
        body: bytes,
    ) -> None:
        self.id = new_id("att")
        self.finish: dict[str, Any] = {}
        row = dict(
            id=self.id,
            installation_id=installation_id,
            proposal_id=proposal_id,
            attempt_number=attempt_number,
            purpose=purpose,
            delivery_cycle=delivery_cycle,
            connection_version_id=connection_version_id,
            method=method,
            url=url,
            request_digest=sha256_digest(body),
            started_at=utcnow(),
        )
        uow.write_later(statements.insert_statement(ConnectionAttempt), row)  # committed before the request leaves

    def record(self, **values: Any) -> None:
        self.finish.update(values)

    @property
    def seconds(self) -> float | None:
        """How long the HTTP request took, once it finished."""
        duration = self.finish.get("duration_ms")
        return None if duration is None else duration / 1000

    def discard(self, session) -> None:
        """Delete the row of a request that certainly never left (a batch member
        released unsent): its attempt is given back, and the next claim writes the
        row for that attempt number again."""
        session.execute(
            delete(ConnectionAttempt)
            .where(ConnectionAttempt.id == self.id, ConnectionAttempt.finished_at.is_(None))
            .execution_options(synchronize_session=False)
        )

    def write(self, uow: UnitOfWork) -> None:
        """Finish the row with one UPDATE (no read: the row is ours since the claim),
        at the unit of work's commit with the batch's others."""
        if not self.finish:
            return
        columns = tuple(sorted(self.finish))
        params = {f"v_{name}": value for name, value in self.finish.items()}
        uow.write_later(_finish_statement(columns), {"k_id": self.id, "now": utcnow(), **params})


def _finish_statement(columns: tuple[str, ...]):
    """``UPDATE connection_attempts SET <columns>, finished_at = COALESCE(finished_at,
    :now) WHERE id = :k_id``, built once per set of columns."""

    def build():
        table = ConnectionAttempt.__table__
        values = {table.c[name]: bindparam(f"v_{name}", type_=table.c[name].type) for name in columns}
        now = bindparam("now", type_=table.c.finished_at.type)
        values[table.c.finished_at] = func.coalesce(table.c.finished_at, now)
        return update(table).where(table.c.id == bindparam("k_id")).values(values)

    return statements.prebuilt(("attempt-finish", columns), build)


class EgressFailed(ActionError):
    """An egress error as a delivery failure; remembers whether anything was sent."""

    def __init__(self, error: egress.EgressError) -> None:
        super().__init__(error.code, error.retryable, error.delay_seconds)
        self.sent = error.sent
        self.detail = error.detail  # e.g. the TLS verifier's reason


def http_session() -> requests.Session:
    """This thread's HTTP session (kept-alive connections to the platforms).

    Egress uses no proxy (one would defeat address pinning, SEC-2), so the session
    does not look for proxy settings in the environment on every request, which
    cost more than the rest of the request's own work; a CA bundle named by
    ``REQUESTS_CA_BUNDLE`` or ``CURL_CA_BUNDLE`` is still used, read once here.
    """
    if getattr(_http, "session", None) is None:
        session = requests.Session()
        session.trust_env = False
        session.verify = os.environ.get("REQUESTS_CA_BUNDLE") or os.environ.get("CURL_CA_BUNDLE") or True
        _http.session = session
    return _http.session


def lease_seconds() -> float:
    """How long a claim holds the proposal (DLV-1; DELIVERY_LEASE_SECONDS, 150 s)."""
    return current_app.config.get("DELIVERY_LEASE_SECONDS", LEASE_SECONDS)


def request_timeout(connection_timeout: float, lease: datetime) -> float:
    """Seconds the next request of a claimed attempt may take (DLV-1, DLV-4): the
    connection's timeout, within what is left of the lease less its last fifth
    (`delivery_rules.request_timeout`). Every request of an attempt asks again, so an attempt
    of several requests (platform kinds: update, then read-back) also ends in time.

    Raises:
        egress.EgressError: ``action_lease_too_short`` (retryable, class ``refused``,
            nothing sent) when too little of the lease is left.
    """
    timeout = delivery_rules.request_timeout(connection_timeout, lease_seconds(), (lease - utcnow()).total_seconds())
    if timeout is None:
        raise egress.EgressError(delivery_rules.LEASE_TOO_SHORT, retryable=True, response_class="refused", sent=False)
    return timeout


def unexpected(error: Exception, stage: str) -> ActionError:
    """An unexpected error in a claimed attempt counts as a failed, retryable attempt
    with backoff (EDGE-4): it never leaves the proposal to be claimed again at once."""
    log.error("delivery %s failed unexpectedly", stage, exc_info=error)
    return ActionError(UNEXPECTED_FAILURE, True, 15)


def write_receipt(
    uow: UnitOfWork,
    proposal_id: str,
    receipt,
    plan,
    lease,
    attempt_number: int,
    source: str | None = None,
    loaded: ActionProposal | None = None,
) -> DeliveryOutcome:
    """Record a platform's receipt in `uow`, guarded by attempt and lease, with its
    run's resolution (DLV-5, DLV-7); ``source="observed"`` for a receipt the console
    wrote from a read-back (PLAT-2).

    Args:
        plan: the claimed attempt's plan (its ``attempt`` row, ``reservations`` and
            connection ``gate``).
        loaded: the proposal as this transaction just read it (else it is read).
    """
    attempt = plan.attempt
    attempt_guard = AttemptGuard(attempt_number, lease, attempt.id, attempt.finish.get("response_digest"))
    proposal = loaded or _read(uow, proposal_id)
    attempt.write(uow)
    budget_reservations.settle(uow, plan.reservations, consumed=True)
    breaker.record_success(uow, plan.gate)  # CONN-1
    try:
        changed = save_receipt(uow, proposal, receipt, Actor.system(proposal.run_id), attempt_guard, source=source)
    except ActionError as error:  # an appeal correction stopped being eligible (CORR-3)
        return fail(uow, proposal_id, error, attempt, attempt_number, proposal.delivery_cycle, lease, [], True)
    if changed:
        after_result(uow, proposal)
    return DeliveryOutcome(
        claimed=True,
        proposal_id=proposal.id,
        state=proposal.state,
        attempt_number=attempt_number,
        error_code=proposal.last_error_code,
        terminal=proposal.delivery_terminal,
        extra={"receipt_status": receipt.status, "changed": changed, "http_seconds": attempt.seconds},
    )


def save_sync_receipt(
    proposal_id: str, receipt, plan, lease, attempt_number: int, source: str | None = None
) -> DeliveryOutcome:
    """`write_receipt` in a transaction of its own (DLV-5, DLV-7)."""
    with unit_of_work() as uow:
        outcome = write_receipt(uow, proposal_id, receipt, plan, lease, attempt_number, source)
        failpoint("before_receipt_write")
        uow.commit()
    return outcome


def write_failure(
    uow: UnitOfWork,
    proposal_id: str,
    error: ActionError,
    plan,
    attempt_number: int,
    cycle: int,
    lease,
    sent: bool,
    loaded: ActionProposal | None = None,
) -> DeliveryOutcome:
    """Record a failed attempt in `uow`, with what it says about the connection
    (CONN-1..3: breaker, 429 pause, 410) and its backoff (DLV-6).

    Args:
        sent: whether the request may have reached the platform (budgets consumed).
    """
    # CONN-1..3: what the failure says about the connection (breaker, 429 pause, 410).
    status = plan.attempt.finish.get("response_status")
    reached = isinstance(error, EgressFailed)
    error = breaker.record_failure(uow, plan.gate, error, status, reached)
    return fail(uow, proposal_id, error, plan.attempt, attempt_number, cycle, lease, plan.reservations, sent, loaded)


def record_failure(proposal_id, error: ActionError, plan, attempt_number, cycle, lease, sent: bool) -> DeliveryOutcome:
    """`write_failure` in a transaction of its own (DLV-6)."""
    with unit_of_work() as uow:
        outcome = write_failure(uow, proposal_id, error, plan, attempt_number, cycle, lease, sent)
        uow.commit()
    return outcome


def fail(
    uow, proposal_id, error: ActionError, attempt, attempt_number, cycle, lease, reservations, sent, loaded=None
) -> DeliveryOutcome:
    """Write a failed attempt, guarded by attempt, cycle and lease (DLV-6). A deferral
    (an exhausted budget, a connection holding back, a batch member released unsent)
    gives its attempt back."""
    deferred = isinstance(error, budget_reservations.BudgetExhausted | breaker.ConnectionHeld | BatchReleased)
    proposal = loaded or _read(uow, proposal_id)
    if isinstance(error, BulkStopped):  # BULK-7: nothing was sent; held, or ended with its batch
        return _bulk_stopped(uow, proposal, error, Lease(attempt_number, cycle, lease), reservations)
    change = delivery_rules.failure(
        delivery_of(proposal),
        Lease(attempt_number, cycle, lease),
        code=error.code,
        retryable=error.retryable,
        delay_seconds=error.delay_seconds,
        deferred=deferred,  # nothing was sent: the deferral does not use up an attempt
        now=utcnow(),
        max_delay_seconds=getattr(error, "max_delay_seconds", None),  # a 429: with the pause (CONN-2)
    )
    changed = move_loaded(uow.session, proposal, change.move, expect=change.expect, values=change.values)
    if isinstance(error, BatchReleased) and changed:
        attempt.discard(uow.session)
    elif attempt is not None:
        attempt.write(uow)
    budget_reservations.settle(uow, reservations, consumed=sent)
    if changed:
        _audit_failure(uow, proposal, error, change, cycle, attempt_number)
        after_result(uow, proposal)
    return DeliveryOutcome(
        claimed=True,
        proposal_id=proposal_id,
        state=proposal.state,
        attempt_number=attempt_number,
        error_code=error.code,
        terminal=proposal.delivery_terminal,
        extra={"http_seconds": attempt.seconds if attempt else None},
    )


def _audit_failure(uow: UnitOfWork, proposal: ActionProposal, error: ActionError, change, cycle, attempt_number):
    """The audit row of a failed attempt (``action.delivery_failed``: a request that
    may have reached the platform, or a check that stopped it for good).

    A deferral is not a failure and writes no ``delivery_failed`` row (DLV-1,
    CONN-1): a connection's wait is audited once on the connection itself
    (``connection.opened``, ``connection.paused``, ...) and a batch release is a
    scheduling detail; an exhausted budget, which nothing else audits, writes one
    ``action.delivery_deferred`` row per cycle and attempt however often it defers
    it (DLV-3).
    """
    actor = Actor.system(proposal.run_id)
    if change.move == Move.DELIVERY_DEFERRED:
        if isinstance(error, budget_reservations.BudgetExhausted):
            key = f"action-deferred:{proposal.operation_id}:{cycle}:{attempt_number}:{error.code}"
            details = {"attempt_number": attempt_number, "delivery_cycle": cycle, "reason": error.code}
            target = ("action_proposal", proposal.id)
            uow.audit(proposal.installation_id, key, "action.delivery_deferred", actor, *target, details)
        return
    uow.audit(
        proposal.installation_id,
        f"action-attempt-failed:{proposal.operation_id}:{cycle}:{attempt_number}:{error.code}",
        "action.delivery_failed",
        actor,
        "action_proposal",
        proposal.id,
        {
            "attempt_number": attempt_number,
            "delivery_cycle": cycle,
            "error_code": error.code,
            "terminal": change.terminal,
            "retry_in_seconds": None if change.terminal else round(change.delay_seconds, 3),
            **({"detail": error.detail} if getattr(error, "detail", None) else {}),
        },
    )


def _read(uow: UnitOfWork, proposal_id: str) -> ActionProposal:
    """The proposal as it is now: the guarded write decides from this read."""
    return uow.session.get(ActionProposal, proposal_id, populate_existing=True)


class BatchReleased(ActionError):
    """A proposal claimed with others of its connection but not sent: an earlier one
    failed (it waits `delay_seconds`, `delivery_rules.released_delay`), or too little of the
    shared lease was left for a whole request (no wait). It is deferred without
    using an attempt and delivered by a job of its own (DLV-1)."""

    def __init__(self, delay_seconds: float = 0.0) -> None:
        super().__init__(delivery_rules.BATCH_RELEASED, retryable=True, delay_seconds=delay_seconds)


class BulkStopped(ActionError):
    """A claimed bulk item whose batch was paused or cancelled meanwhile (BULK-7):
    released before any request, its attempt given back (`delivery_rules.bulk_stopped`)."""

    def __init__(self, cancelled: bool) -> None:
        code = delivery_rules.BULK_CANCELLED if cancelled else delivery_rules.BULK_PAUSED
        super().__init__(code, retryable=not cancelled, delay_seconds=0.0)
        self.cancelled = cancelled


def _bulk_stopped(uow, proposal: ActionProposal, error: BulkStopped, lease: Lease, reservations) -> DeliveryOutcome:
    """Write a `BulkStopped` release: held (paused), failed for good (cancelled, sent
    before) or cancelled (cancelled, never sent); no audit row of its own, the
    batch's ``bulk.paused`` / ``bulk.cancelled`` row says why."""
    change = delivery_rules.bulk_stopped(delivery_of(proposal), lease, cancelled=error.cancelled)
    changed = move_loaded(uow.session, proposal, change.move, expect=change.expect, values=change.values)
    budget_reservations.settle(uow, reservations, consumed=False)
    if changed and error.cancelled and change.move == Move.DELIVERY_DEFERRED:
        move_loaded(uow.session, proposal, Move.CANCEL_SCHEDULED, expect={"delivery_attempt_count": 0,
                                                                          "accepted_at": None})
    if changed and proposal.is_terminal:
        emit_delivery_resolution(uow, proposal)  # its batch hears of it (BULK-6)
    return DeliveryOutcome(claimed=True, proposal_id=proposal.id, state=proposal.state,
                           attempt_number=lease.attempt_number, error_code=error.code,
                           terminal=proposal.is_terminal)
