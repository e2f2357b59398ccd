"""Receipts from the platform, synchronous or through the async result API
(SPEC RCPT-1..3, API-1..4)."""

from __future__ import annotations

import logging
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import func, select

from app.domain.clock import iso, utcnow
from app.domain.connection_health import WAIT_CODES
from app.domain.digests import canonical_json, sha256_digest, sha256_hex
from app.domain.errors import ActionError, ApiError
from app.domain.proposal import delivery as delivery_rules
from app.domain.proposal import results as result_rules
from app.domain.proposal.delivery import Lease
from app.domain.receipts import Receipt, parse_receipt
from app.models import ActionProposal, ActionReceiptRecord, AuditEvent, ConnectionAttempt, Report, move_loaded, new_id
from app.queueing import enqueue_delivery
from app.services.lifecycle.events import emit_delivery_resolution
from app.services.lifecycle.proposals import delivery_of, move_at_commit
from app.services.uow import Actor, UnitOfWork, unit_of_work

log = logging.getLogger(__name__)

LATE_RESULT_REFUSALS = {
    "action_result_terminal": "The action is not awaiting a result from the platform.",
    "action_result_conflict": "Another result or operator action was recorded first, or the action's "
    "authorization expired. Refresh the action before retrying.",
}
TOKEN_TOO_NEW_MESSAGE = (
    "This token was created after the action was first sent, so it cannot report the action's result. "
    "Send the result with the token the platform held when it received the action."
)
FIELD_MESSAGES = {  # API-1: a malformed optional field, named
    "terminal": "terminal must be true or false.",
    "retry_after_seconds": "retry_after_seconds must be a whole number of seconds from 1 to 21600.",
    "error_code": "error_code must be 1 to 200 letters, digits or _ . : -",
    "provider_request_id": "provider_request_id must be text of at most 500 characters.",
}


@dataclass(frozen=True)
class AttemptGuard:
    """The claimed attempt a synchronous receipt belongs to (DLV-5)."""

    number: int
    lease_expires_at: Any
    connection_attempt_id: str
    response_digest: str


def save_receipt(
    uow: UnitOfWork,
    proposal: ActionProposal,
    receipt: Receipt,
    actor: Actor,
    attempt: AttemptGuard | None = None,
    source: str | None = None,
) -> bool:
    """Apply a receipt to its proposal with one guarded UPDATE (RCPT-2, RCPT-3).

    ``accepted`` keeps the proposal ``queued`` until a confirmation deadline of
    min(expiry, now + 15 min); ``applied`` confirms it; ``failed`` is terminal unless
    the platform said ``terminal: false`` and the cycle has attempts left. The write
    only matches the same delivery cycle and, for a synchronous receipt, the same
    attempt and lease, so a late worker cannot overwrite a newer attempt.

    Args:
        source: how the receipt came: ``sync`` (default with an attempt), ``async``
            (default without), or ``observed`` (written by the console from a
            read-back, PLAT-2).

    Returns:
        True when the proposal changed (and one audit row was written).

    Raises:
        ActionError: ``appeal_correction_precondition_changed`` when an appeal
            correction stopped being eligible (CORR-3).
    """
    session = uow.session
    now = utcnow()
    if proposal.appeal_id:
        from app.services.lifecycle.corrections import check_correction_eligible

        check_correction_eligible(session, proposal, lock=True)
    lease = Lease(attempt.number, proposal.delivery_cycle, attempt.lease_expires_at) if attempt else None
    change = delivery_rules.receipt(delivery_of(proposal), receipt, now, lease)
    receipt_json = canonical_json(receipt.as_sent())  # shown as the platform sent it (REV-6)
    values = {**change.values, "last_receipt": receipt.as_sent()}
    if uow.savepoints:
        if not move_loaded(session, proposal, change.move, expect=change.expect, values=values):
            return False
    else:  # a batch's first try: written at commit with the batch's others
        move_at_commit(uow, proposal, change.move, change.expect, values)
    terminal = change.terminal
    receipt_hex = sha256_hex(receipt_json)
    source = source or ("sync" if attempt else "async")
    details = {**receipt.as_dict(), "terminal": terminal, "delivery_cycle": proposal.delivery_cycle}
    if source == "observed":
        details["source"] = source
    if attempt is not None:
        details.update(connection_attempt_id=attempt.connection_attempt_id, response_digest=attempt.response_digest)
    key = f"action-result:{proposal.operation_id}:{proposal.delivery_cycle}:{receipt_hex}"
    if attempt is not None:  # REC-5: each attempt's receipt is its own change, even when the bodies match
        key += f":attempt-{attempt.number}"
    uow.audit(
        proposal.installation_id,
        key,
        "workflow.action_applied" if receipt.status == "applied" else "workflow.action_result_received",
        actor,
        "action_proposal",
        proposal.id,
        details,
    )
    uow.insert_ignore_later(  # nothing in the transaction reads it back: written with the others at commit
        ActionReceiptRecord,
        dict(
            id=new_id("rcp"),
            installation_id=proposal.installation_id,
            proposal_id=proposal.id,
            delivery_cycle=proposal.delivery_cycle,
            attempt_number=attempt.number if attempt else None,
            source=source,
            status=receipt.status,
            receipt=receipt.as_dict(),
            receipt_digest=sha256_digest(receipt_json),
            applied_to_proposal=True,
            connection_attempt_id=attempt.connection_attempt_id if attempt else None,
            received_at=now,
        ),
    )
    if receipt.status == "applied":  # the one place applied is written: TEMP-2/3 and DSA-2/4 follow it here
        from app.services.dsa.applied import on_applied as dsa_on_applied
        from app.services.lifecycle.reversals import on_applied

        on_applied(uow, proposal)
        dsa_on_applied(uow, proposal)
    return True


@dataclass(frozen=True)
class ResultToken:
    """The bearer token a result came with: its id, creation time and standing (FOUR-8:
    its creation, or the earliest standing of the tokens it was approved to succeed)."""

    id: str
    created_at: datetime
    standing_since: datetime | None = None  # None: since its creation

    @property
    def standing(self) -> datetime:
        return self.standing_since or self.created_at


@dataclass(frozen=True)
class ResultAnswer:
    proposal_id: str
    state: str
    idempotent_replay: bool


def accept_async_result(value: Any, integration_id: str, token: ResultToken | None = None) -> ResultAnswer:
    """Take a receipt a platform sent later to ``POST /api/v1/action-results``.

    A refused result changes no proposal, receipt or run; two refusals are recorded
    nonetheless (once per distinct body): a token too new to speak for the action
    (``action.result_refused``, FOUR-8), and a result contradicting the outcome
    already recorded (``action.result_contradicted`` and a receipt kept as not
    applied, shown on the proposal's page). Both are logged as warnings.

    Args:
        value: a body the API's contract accepted (`app.web.api.contract`, the
            OpenAPI ``ActionResult`` schema: RCPT-1 fields; status applied|failed).
        integration_id: the integration whose bearer token authenticated the call.
        token: that bearer token (the API always names it; None skips FOUR-8's check).

    Returns:
        The proposal's state after the receipt; ``idempotent_replay`` when it was
        already in that terminal state.

    Raises:
        ApiError: 400 with the receipt's own code (RCPT; the shape, API-1, is the
            contract's); 404 ``action_result_unavailable`` for a proposal that does not
            exist or belongs to another integration (API-2); 403
            ``result_token_too_new`` (FOUR-8); 409 ``action_result_identity_mismatch``
            (API-3); 409 ``action_result_terminal`` or ``action_result_conflict`` (API-4).
    """
    with unit_of_work() as uow:
        proposal = uow.session.get(ActionProposal, value["action_id"])
        report = uow.session.get(Report, proposal.report_id) if proposal else None
        if report is None or report.integration_id != integration_id:
            raise ApiError(404, "action_result_unavailable", "This action is not available to this integration.")
        try:
            receipt = parse_receipt(value, proposal.identity)
        except ActionError as error:
            status_code = 409 if error.code == "action_result_identity_mismatch" else 400
            field = getattr(error, "field", None)
            message = FIELD_MESSAGES.get(
                field, "The result must match the immutable action operation, payload digest and receipt format."
            )
            raise ApiError(status_code, error.code, message, field) from error
        actor = Actor("service_identity", integration_id)
        if token is not None and _token_refused(uow, proposal, receipt, token, actor):
            uow.commit()  # the refusal's audit row only
            raise ApiError(403, result_rules.TOKEN_TOO_NEW, TOKEN_TOO_NEW_MESSAGE)
        check = delivery_rules.late_result_check(delivery_of(proposal), receipt.status, utcnow())
        if check == delivery_rules.REPLAY:
            return ResultAnswer(proposal.id, proposal.state, True)
        if check is not None:
            if result_rules.contradicts(delivery_of(proposal), receipt.status):
                _record_contradiction(uow, proposal, receipt, actor, check)
                uow.commit()  # the record of what was claimed; the proposal stays as it is
            raise ApiError(409, check, LATE_RESULT_REFUSALS[check])
        try:
            changed = save_receipt(uow, proposal, receipt, actor)
        except ActionError as error:
            raise ApiError(409, error.code, "The appeal correction is no longer eligible.") from error
        if not changed:
            if proposal.state == receipt.status:
                return ResultAnswer(proposal.id, proposal.state, True)
            raise ApiError(409, "action_result_conflict", LATE_RESULT_REFUSALS["action_result_conflict"])
        after_result(uow, proposal)
        uow.commit()
        return ResultAnswer(proposal.id, proposal.state, False)


def _token_refused(
    uow: UnitOfWork, proposal: ActionProposal, receipt: Receipt, token: ResultToken, actor: Actor
) -> bool:
    """FOUR-8: whether `token` is too new to speak for `proposal`; a refusal is
    audited ``action.result_refused`` (once per token and body) and logged."""
    first_attempt_at = uow.session.scalar(
        select(func.min(ConnectionAttempt.started_at)).where(ConnectionAttempt.proposal_id == proposal.id)
    )
    refusal = result_rules.token_refusal(token.standing, first_attempt_at)
    if refusal is None:
        return False
    log.warning(
        "result for %s refused: %s (token %s standing since %s, after the first attempt %s)",
        proposal.id,
        refusal,
        token.id,
        iso(token.standing),
        iso(first_attempt_at),
    )
    receipt_hex = sha256_hex(canonical_json(receipt.as_sent()))
    uow.audit(
        proposal.installation_id,
        f"action-result-refused:{proposal.id}:{token.id}:{receipt_hex}",
        "action.result_refused",
        actor,
        "action_proposal",
        proposal.id,
        {
            "error_code": refusal,
            "token_id": token.id,
            "token_created_at": iso(token.created_at),
            "token_standing_since": iso(token.standing),
            "first_attempt_at": iso(first_attempt_at),
            "status": receipt.status,
            "receipt": receipt.as_sent(),
        },
    )
    return True


def _record_contradiction(uow: UnitOfWork, proposal: ActionProposal, receipt: Receipt, actor: Actor, code: str) -> None:
    """A result that contradicts the outcome already recorded (API-4): an audit row
    ``action.result_contradicted`` with what was claimed, the receipt kept as not
    applied (the proposal page shows it), and a warning log line. Once per body."""
    receipt_json = canonical_json(receipt.as_sent())
    receipt_hex = sha256_hex(receipt_json)
    key = f"action-result-contradicted:{proposal.operation_id}:{proposal.delivery_cycle}:{receipt_hex}"
    log.warning(
        "platform result contradicts %s: it reported %s, the action is %s (kept as it is)",
        proposal.id,
        receipt.status,
        proposal.state,
    )
    if uow.session.scalar(select(AuditEvent.id).where(AuditEvent.idempotency_key == key)) is not None:
        return  # the same contradiction again: recorded once
    uow.audit(
        proposal.installation_id,
        key,
        "action.result_contradicted",
        actor,
        "action_proposal",
        proposal.id,
        {
            "claimed_status": receipt.status,
            "state": proposal.state,
            "delivery_cycle": proposal.delivery_cycle,
            "error_code": code,
            "receipt": receipt.as_sent(),
        },
    )
    uow.session.add(
        ActionReceiptRecord(
            id=new_id("rcp"),
            installation_id=proposal.installation_id,
            proposal_id=proposal.id,
            delivery_cycle=proposal.delivery_cycle,
            attempt_number=None,
            source="async",
            status=receipt.status,
            receipt=receipt.as_dict(),
            receipt_digest=sha256_digest(receipt_json),
            applied_to_proposal=False,
            connection_attempt_id=None,
            received_at=utcnow(),
        )
    )


def after_result(uow: UnitOfWork, proposal: ActionProposal) -> None:
    """Resolve the run, or schedule the next delivery job, after a recorded result (DLV-7)."""
    if delivery_rules.after_result(delivery_of(proposal)) == "resolve":
        emit_delivery_resolution(uow, proposal)
    else:
        schedule_next_attempt(uow, proposal)


# Deferred without using an attempt: an exhausted budget (DLV-3), a connection holding
# its deliveries back (CONN-1..3), a batch member released unsent (DLV-1).
DEFERRAL_CODES = frozenset({"budget_exhausted", delivery_rules.BATCH_RELEASED}) | WAIT_CODES


def schedule_next_attempt(uow: UnitOfWork, proposal: ActionProposal) -> None:
    """Enqueue the proposal's next delivery job for when it is due (after commit)."""
    due = proposal.next_attempt_at or utcnow()
    delay = max(0.0, (due - utcnow()).total_seconds())
    proposal_id, cycle, attempts = proposal.id, proposal.delivery_cycle, proposal.delivery_attempt_count
    tag = "confirm" if proposal.accepted_at else "a"
    if proposal.last_error_code in DEFERRAL_CODES:
        # A deferral gives its attempt back, so "a" would name the job running now
        # (a duplicate, not enqueued): name the job by when it is due instead.
        tag = f"w{int(due.timestamp() * 1000)}"
    uow.after_commit(lambda: enqueue_delivery(proposal_id, cycle, attempts, delay, tag=tag))
