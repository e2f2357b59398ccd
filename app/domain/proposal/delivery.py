"""What each event does to a proposal: the move, the columns it sets, and what the
row must still hold for the decision to stand (SPEC DLV, RCPT, RTRY, WAIT-2, COMP,
APPR-3, EDGE-3..5).

Every function reads a `Delivery` (the proposal's state and bookkeeping as loaded)
and returns a `Change`. The service writes it with one guarded UPDATE: the move's
source states plus ``expect`` (each column still equal to what was read or held),
so a decision taken on a stale read changes nothing and the service reads again.
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields, replace
from datetime import datetime, timedelta
from typing import Any

from app.domain.backoff import retry_delay
from app.domain.receipts import Receipt
from app.domain.states import (
    CONFIRMATION_WINDOW_SECONDS,
    LEASE_SECONDS,
    MAX_ATTEMPTS_PER_CYCLE,
    MAX_TIMEOUT_SECONDS,
    REQUEST_SHARE_OF_LEASE,
    Move,
    ProposalState,
    attempts_in_cycle,
    can,
    has_attempts_left,
    is_effective,
    is_resolved,
    is_terminal,
    is_waiting,
    sources,
    target,
)

S = ProposalState
EXHAUSTED = "action_delivery_attempts_exhausted"
CONFIRMATION_TIMED_OUT = "action_confirmation_timed_out"
APPROVAL_EXPIRED = "action_approval_expired"
APPROVAL_MISSING = "action_approval_missing"
DELIVERY_FAILED = "action_delivery_failed"
AWAITING_RESULT = sources(Move.RECEIPT_APPLIED)  # a result may still arrive (RCPT-2, API-4)


@dataclass(frozen=True)
class Delivery:
    """A proposal's state and delivery bookkeeping, as read (field names are columns)."""

    state: str
    expires_at: datetime
    payload_digest: str = ""
    approval_mode: str = "human"
    delivery_terminal: bool = False
    delivery_attempt_count: int = 0
    delivery_cycle: int = 1
    cycle_start_attempt: int = 0
    next_attempt_at: datetime | None = None
    lease_expires_at: datetime | None = None
    accepted_at: datetime | None = None
    confirmation_deadline_at: datetime | None = None
    confirmed_at: datetime | None = None
    last_error_code: str | None = None
    not_before: datetime | None = None  # TEMP-4: never sent before this time
    is_correction: bool = False
    is_compensation: bool = False
    is_notice: bool = False  # DSA-4: a restriction's notice to the affected user
    in_batch: bool = False  # BULK-3: approved or rejected with its bulk batch only

    @property
    def attempts_in_cycle(self) -> int:
        return attempts_in_cycle(self.delivery_attempt_count, self.cycle_start_attempt)

    @property
    def terminal(self) -> bool:
        """Nothing more happens without a person (states.is_terminal)."""
        return is_terminal(self.state, self.delivery_terminal)

    @property
    def resolved(self) -> bool:
        """Applied, or failed for good: the run hears of it (DLV-7, states.is_resolved)."""
        return is_resolved(self.state, self.delivery_terminal)


COLUMNS = frozenset(f.name for f in fields(Delivery)) - {"is_correction", "is_compensation", "is_notice"}


@dataclass(frozen=True)
class Change:
    """A move, the columns it sets, and the columns that must still hold `expect`."""

    move: Move
    values: dict[str, Any] = field(default_factory=dict)
    expect: dict[str, Any] = field(default_factory=dict)
    delay_seconds: float | None = None  # until the next attempt, when one is planned

    @property
    def terminal(self) -> bool:
        return bool(self.values.get("delivery_terminal", False))


@dataclass(frozen=True)
class Lease:
    """The claimed attempt a worker holds (DLV-1, DLV-5)."""

    attempt_number: int
    delivery_cycle: int
    expires_at: datetime


def write(delivery: Delivery, change: Change) -> Delivery | None:
    """What the guarded UPDATE does to a row: the new row, or None when it does not
    match (a state the move cannot start from, or an expected column that changed)."""
    if not can(change.move, delivery.state):
        return None
    if any(getattr(delivery, column) != value for column, value in change.expect.items()):
        return None
    values = {k: v for k, v in change.values.items() if k in COLUMNS}
    return replace(delivery, state=target(change.move).value, **values)


def is_due(d: Delivery, now: datetime) -> bool:
    """Waiting, due, past its `not_before`, with attempts left in the cycle or
    accepted and at its confirmation deadline (DLV-1, TEMP-4: refused before its
    time, no attempt used). SQL twin: `predicates.due`."""
    return (
        is_waiting(d.state, d.delivery_terminal)
        and d.next_attempt_at is not None
        and d.next_attempt_at <= now
        and (d.not_before is None or d.not_before <= now)
        and (has_attempts_left(d.delivery_attempt_count, d.cycle_start_attempt) or d.accepted_at is not None)
    )


def lease_expired(d: Delivery, now: datetime) -> bool:
    """Applying, not terminal, and its worker's lease ran out: another worker takes
    over (DLV-1, DLV-5). SQL twin: `predicates.lease_expired`."""
    return (
        d.state == target(Move.CLAIM)
        and not d.delivery_terminal
        and d.lease_expires_at is not None
        and d.lease_expires_at <= now
    )


def is_claimable(d: Delivery, now: datetime) -> bool:
    """What a worker may claim now (DLV-1): due, or applying with an expired lease.
    SQL twin: `predicates.claimable`."""
    return is_due(d, now) or lease_expired(d, now)


def awaits_decision(d: Delivery, now: datetime) -> bool:
    """Awaiting approval with its authorization still running: a reviewer may still
    decide it (APPR-3). SQL twin: `predicates.awaits_decision`."""
    return can(Move.APPROVE, d.state) and d.expires_at > now


def is_sendable(d: Delivery, now: datetime) -> bool:
    """Waiting for a fresh attempt whatever its due time: not accepted, attempts left,
    past its `not_before` (DLV-1, CONN-1: what a connection that recovers makes due).
    SQL twin: `predicates.sendable`."""
    return (
        is_waiting(d.state, d.delivery_terminal)
        and d.accepted_at is None
        and has_attempts_left(d.delivery_attempt_count, d.cycle_start_attempt)
        and (d.not_before is None or d.not_before <= now)
    )


def claim(d: Delivery, now: datetime, lease_expires_at: datetime | None = None) -> Change | None:
    """Claim the proposal for one attempt (DLV-1), or None when nothing is due
    (`is_claimable`).

    The attempt counts only while the cycle has attempts left and nothing was
    accepted; a claim past the last attempt marks
    ``action_delivery_attempts_exhausted`` for the pre-send check.

    Args:
        lease_expires_at: when the lease ends; 150 s from `now` unless given.
    """
    if not is_claimable(d, now):
        return None
    has_attempts = has_attempts_left(d.delivery_attempt_count, d.cycle_start_attempt)
    counts = d.accepted_at is None and has_attempts
    values: dict[str, Any] = {
        "delivery_attempt_count": d.delivery_attempt_count + (1 if counts else 0),
        "lease_expires_at": lease_expires_at or now + timedelta(seconds=LEASE_SECONDS),
    }
    if d.accepted_at is None and not has_attempts:
        values["last_error_code"] = EXHAUSTED
    return Change(Move.CLAIM, values, _as_read(d, "delivery_attempt_count", "lease_expires_at", "next_attempt_at"))


def lease_of(change: Change, d: Delivery) -> Lease:
    """The lease a successful `claim` gives its worker."""
    return Lease(change.values["delivery_attempt_count"], d.delivery_cycle, change.values["lease_expires_at"])


def _as_read(d: Delivery, *columns: str) -> dict[str, Any]:
    """Expect the row unchanged in its state, terminal flag, cycle, acceptance and `columns`."""
    base = ("state", "delivery_terminal", "delivery_cycle", "accepted_at", *columns)
    return {column: getattr(d, column) for column in base}


LEASE_TOO_SHORT = "action_lease_too_short"
MIN_REQUEST_SECONDS = 0.5  # less than this left on the lease: the request does not go


def request_timeout(connection_timeout: float, lease_seconds: float, lease_left: float) -> float | None:
    """How long the whole request of a claimed attempt may take, in seconds (DLV-1,
    DLV-4): the connection's timeout, at most 120 s and at most four fifths of the
    lease, and never past what is left of the lease less its last fifth (kept for
    recording the outcome). None when what is left of the lease leaves less than
    half a second: the request must not go.

    Args:
        connection_timeout: the connection's timeout (seconds).
        lease_seconds: the lease's full length (seconds).
        lease_left: seconds until the held lease expires.
    """
    room = lease_left - lease_seconds * (1 - REQUEST_SHARE_OF_LEASE)
    if room < MIN_REQUEST_SECONDS:
        return None
    return min(connection_timeout, MAX_TIMEOUT_SECONDS, lease_seconds * REQUEST_SHARE_OF_LEASE, room)


BATCH_RELEASED = "delivery_batch_released"
MAX_RELEASED_SECONDS = 3600  # as connection_health.MAX_PAUSE_SECONDS


def batch_member_may_send(connection_timeout: float, lease_seconds: float, lease_left: float) -> bool:
    """Whether the next proposal of a batch claim may still be sent (DLV-1, DLV-4).

    The proposals one job claims together share one lease and are sent one after
    the other. The next one goes only while its request could still take the
    connection's whole timeout before the lease's last fifth; otherwise it is
    released unsent (``BATCH_RELEASED``, no attempt used) rather than sent with a
    shorter timeout than its connection allows.

    Args:
        connection_timeout: the connection's timeout (seconds).
        lease_seconds: the lease's full length (seconds).
        lease_left: seconds until the shared lease expires.
    """
    whole = min(connection_timeout, MAX_TIMEOUT_SECONDS, lease_seconds * REQUEST_SHARE_OF_LEASE)
    allowed = request_timeout(connection_timeout, lease_seconds, lease_left)
    return allowed is not None and allowed >= whole


def released_delay(retryable: bool, delay_seconds: float) -> float:
    """How long the rest of a batch wait, released unsent after one of them failed
    (DLV-1, DLV-6, CONN-1), in seconds: a retryable failure's base delay (the
    platform may be struggling, so the batch does not try it again at once); none
    after a terminal failure, which was that proposal's own.

    Args:
        retryable: whether the failure may be tried again.
        delay_seconds: its base delay (``Retry-After``, or the error's default);
            at most `MAX_RELEASED_SECONDS` (a platform's Retry-After of days holds
            the rest no longer than a 429 pauses the connection, CONN-2).
    """
    return min(max(0.0, delay_seconds), MAX_RELEASED_SECONDS) if retryable else 0.0


def pre_send_problem(d: Delivery, now: datetime) -> str | None:
    """Why a claimed attempt must not send, from the proposal alone (DLV-2), or None.

    An accepted action is claimed only at its confirmation deadline; a claim past the
    cycle's last attempt is exhausted; an expired authorization sends nothing.
    """
    if d.accepted_at is not None:
        return CONFIRMATION_TIMED_OUT
    if d.last_error_code == EXHAUSTED:
        return EXHAUSTED
    if d.expires_at <= now:
        return APPROVAL_EXPIRED
    return None


def approval_missing(d: Delivery, approved_with_digest: bool) -> bool:
    """Human mode needs an approval of exactly this digest before sending (DLV-2)."""
    return d.approval_mode == "human" and not approved_with_digest


def failure(
    d: Delivery,
    lease: Lease,
    *,
    code: str,
    retryable: bool,
    delay_seconds: float,
    now: datetime,
    deferred: bool = False,
    max_delay_seconds: float | None = None,
) -> Change:
    """A failed attempt (DLV-6): terminal when not retryable or the cycle's 8 attempts
    are used; otherwise due again after the backoff.

    Args:
        lease: the attempt the worker held; the write is guarded by its attempt
            number, cycle and lease.
        code: the error code recorded as ``last_error_code``.
        retryable: whether this kind of failure may be tried again.
        delay_seconds: the failure's base delay (``Retry-After``, a receipt's
            ``retry_after_seconds``, or the error's default).
        deferred: nothing was sent (a budget had no room): the attempt is given
            back and the delay is not multiplied; a retryable one is a `deferral`
            (``queued`` again, no failure).
        max_delay_seconds: the wait never exceeds this (a 429's: the pause's bound,
            CONN-2, so the proposal that received it resumes with the others).
    """
    if deferred and retryable:
        return deferral(d, lease, code=code, delay_seconds=delay_seconds, now=now)
    in_cycle = attempts_in_cycle(lease.attempt_number, d.cycle_start_attempt)
    terminal = not retryable or (not deferred and in_cycle >= MAX_ATTEMPTS_PER_CYCLE)
    delay = delay_seconds if deferred else retry_delay(delay_seconds, in_cycle)
    if max_delay_seconds is not None:
        delay = min(delay, max_delay_seconds)
    values: dict[str, Any] = {
        "delivery_terminal": terminal,
        "next_attempt_at": now + timedelta(seconds=delay),
        "lease_expires_at": None,
        "last_error_code": code,
    }
    if deferred:
        values["delivery_attempt_count"] = lease.attempt_number - 1
    expect = {
        "delivery_terminal": False,
        "delivery_attempt_count": lease.attempt_number,
        "delivery_cycle": lease.delivery_cycle,
        "lease_expires_at": lease.expires_at,
    }
    return Change(Move.DELIVERY_FAILED, values, expect, None if terminal else delay)


def deferral(d: Delivery, lease: Lease, *, code: str, delay_seconds: float, now: datetime) -> Change:
    """A claimed attempt that sent nothing and waits (DLV-1, DLV-3, CONN-1): a budget
    had no room, the connection holds deliveries back, or a batch released it. Not a
    failure: the proposal is ``queued`` again, due after `delay_seconds` (not
    multiplied), its attempt given back; ``last_error_code`` says why it waits.

    Args:
        lease: the attempt the worker held; the write is guarded by it.
        code: why it waits (``budget_exhausted``, a connection wait code,
            ``delivery_batch_released``).
        delay_seconds: until it is due again.
    """
    values: dict[str, Any] = {
        "delivery_terminal": False,
        "next_attempt_at": now + timedelta(seconds=delay_seconds),
        "lease_expires_at": None,
        "last_error_code": code,
        "delivery_attempt_count": lease.attempt_number - 1,
    }
    expect = {
        "delivery_terminal": False,
        "delivery_attempt_count": lease.attempt_number,
        "delivery_cycle": lease.delivery_cycle,
        "lease_expires_at": lease.expires_at,
    }
    return Change(Move.DELIVERY_DEFERRED, values, expect, delay_seconds)


HOLD_MOVES = {S.QUEUED: Move.HOLD_QUEUED, S.FAILED: Move.HOLD_FAILED}


def hold(d: Delivery, now: datetime, *, code: str, until: datetime) -> Change | None:
    """A due delivery its connection holds back, before it is claimed (CONN-1..3).

    It keeps its state (queued, or failed waiting to retry: `HOLD_MOVES`) and is due
    at `until`; ``last_error_code`` says why it waits. Nothing is claimed, so no
    attempt is used. The write is guarded on the row as read, so a claim or a
    release that came first wins.

    Args:
        code: the connection's wait code (``connection_circuit_open``, ...).
        until: the end of the connection's wait (aware UTC).

    Returns:
        The change, or None when the delivery is not waiting and due (another
        state, terminal, accepted, or not due yet): claim it as usual.
    """
    if not is_waiting(d.state, d.delivery_terminal) or d.accepted_at is not None:
        return None
    if d.next_attempt_at is None or d.next_attempt_at > now:
        return None
    move = HOLD_MOVES[d.state]
    expect = {
        "delivery_terminal": False,
        "accepted_at": None,
        "next_attempt_at": d.next_attempt_at,
        "delivery_cycle": d.delivery_cycle,
        "delivery_attempt_count": d.delivery_attempt_count,
    }
    values = {"next_attempt_at": until, "last_error_code": code}
    return Change(move, values, expect, (until - now).total_seconds())


BULK_PAUSED = "bulk_batch_paused"
BULK_CANCELLED = "bulk_batch_cancelled"


def bulk_stopped(d: Delivery, lease: Lease, *, cancelled: bool) -> Change:
    """A claimed item of a bulk batch that was paused or cancelled meanwhile, released
    before any request leaves (BULK-7): its attempt is given back and it is never
    due on its own (``next_attempt_at`` cleared).

    Paused: ``queued`` again, held with ``bulk_batch_paused`` until the batch
    resumes. Cancelled: sent before (an attempt before this one) → failed for good
    (`Move.BULK_CANCEL_SENT`, ``bulk_batch_cancelled``); never sent → ``queued``
    with ``bulk_batch_cancelled``, which the caller then cancels
    (`Move.CANCEL_SCHEDULED`), so it ends cancelled before sending.

    Args:
        lease: the attempt the worker holds; the write is guarded by it.
        cancelled: the batch was cancelled (else paused).
    """
    given_back = lease.attempt_number - 1
    sent_before = cancelled and given_back > 0
    values: dict[str, Any] = {
        "delivery_terminal": sent_before,
        "next_attempt_at": None,
        "lease_expires_at": None,
        "last_error_code": BULK_CANCELLED if cancelled else BULK_PAUSED,
        "delivery_attempt_count": given_back,
    }
    expect = {
        "delivery_terminal": False,
        "delivery_attempt_count": lease.attempt_number,
        "delivery_cycle": lease.delivery_cycle,
        "lease_expires_at": lease.expires_at,
    }
    return Change(Move.BULK_CANCEL_SENT if sent_before else Move.DELIVERY_DEFERRED, values, expect)


RECEIPT_MOVES = {"accepted": Move.RECEIPT_ACCEPTED, "applied": Move.RECEIPT_APPLIED, "failed": Move.RECEIPT_FAILED}


def receipt(d: Delivery, result: Receipt, now: datetime, lease: Lease | None = None) -> Change:
    """Apply a platform's receipt (RCPT-2).

    ``accepted`` keeps the proposal queued until a confirmation deadline of
    min(expiry, now + 15 min), counting no attempt while it waits; ``applied``
    confirms it; ``failed`` is terminal unless the platform said ``terminal: false``
    and the cycle has attempts left.

    Args:
        lease: set for the synchronous answer of a claimed attempt: the write then
            needs that attempt and lease still held (DLV-5).
    """
    deadline = d.confirmation_deadline_at or min(d.expires_at, now + timedelta(seconds=CONFIRMATION_WINDOW_SECONDS))
    terminal = result.terminal or (result.status == "failed" and d.attempts_in_cycle >= MAX_ATTEMPTS_PER_CYCLE)
    accepted = result.status == "accepted"
    values: dict[str, Any] = {
        "delivery_terminal": terminal,
        "next_attempt_at": deadline if accepted else now + timedelta(seconds=result.retry_after_seconds),
        "lease_expires_at": None,
        "last_error_code": result.error_code,
    }
    if accepted:
        values["accepted_at"] = d.accepted_at or now
        values["confirmation_deadline_at"] = deadline
    elif result.status == "failed" and not terminal:
        values["accepted_at"] = None
        values["confirmation_deadline_at"] = None
    if result.status == "applied":
        values["confirmed_at"] = now
    expect = _as_read(d, "delivery_attempt_count", "confirmation_deadline_at")
    expect["delivery_terminal"] = False
    if lease is not None:
        expect.update(
            state=S.APPLYING,
            delivery_attempt_count=lease.attempt_number,
            delivery_cycle=lease.delivery_cycle,
            lease_expires_at=lease.expires_at,
        )
    return Change(RECEIPT_MOVES[result.status], values, expect)


REPLAY = "replay"


def late_result_check(d: Delivery, status: str, now: datetime) -> str | None:
    """Whether a receipt sent later through the result API applies (API-4, EDGE-5).

    Returns:
        None when it applies; ``"replay"`` when the proposal already ended in that
        status; otherwise the refusal's code: ``action_result_terminal`` when it
        awaits no result, ``action_result_conflict`` for an appeal correction
        whose authorization expired.
    """
    if (d.state == status and d.delivery_terminal) or (status == S.APPLIED and d.state == S.COMPENSATION_REQUIRED):
        return REPLAY
    if d.state not in AWAITING_RESULT or d.delivery_terminal or d.attempts_in_cycle <= 0:
        return "action_result_terminal"
    if d.is_correction and d.expires_at <= now:
        return "action_result_conflict"
    return None


def after_result(d: Delivery) -> str:
    """What follows a recorded result (DLV-7): ``resolve`` the run when the proposal
    is applied or failed for good, else ``schedule`` its next delivery job."""
    return "resolve" if d.resolved else "schedule"


def time_out(d: Delivery) -> Change | None:
    """A waiting run passed its deadline (WAIT-2, EDGE-3).

    ``cancelled`` when nothing can have been sent, ``failed`` with
    ``action_confirmation_timed_out`` when it was accepted or is applying. Decided
    from the row the write is guarded on; None when the proposal already ended
    (a receipt that won the race keeps its outcome).
    """
    if d.terminal:
        return None
    sent = d.accepted_at is not None or d.state == S.APPLYING
    values = {"delivery_terminal": True, "lease_expires_at": None, "last_error_code": CONFIRMATION_TIMED_OUT}
    move = Move.WAIT_TIMED_OUT_SENT if sent else Move.WAIT_TIMED_OUT_UNSENT
    return Change(move, values, _as_read(d, "delivery_attempt_count"))


def confirmation_timeout(d: Delivery, now: datetime) -> Change | None:
    """An accepted action whose confirmation deadline passed fails (RCPT-2, EVT-3)."""
    if d.delivery_terminal or d.state != S.QUEUED or d.accepted_at is None:
        return None
    if d.confirmation_deadline_at is None or d.confirmation_deadline_at > now:
        return None
    values = {"delivery_terminal": True, "lease_expires_at": None, "last_error_code": CONFIRMATION_TIMED_OUT}
    return Change(Move.CONFIRMATION_TIMED_OUT, values, _as_read(d, "confirmation_deadline_at"))


# An item of a bulk batch is approved by the batch's one approval, bound to the batch
# digest, never alone (BULK-3).
BATCH_DECIDES = "action_decided_with_its_batch"


def decision_refusal(d: Delivery, payload_digest: str, now: datetime) -> str | None:
    """Why a reviewer's decision cannot be recorded now (APPR-3, BULK-3), or None."""
    if d.in_batch:
        return BATCH_DECIDES
    if d.state != S.APPROVAL_REQUIRED:
        return "action_not_awaiting_approval"
    if payload_digest != d.payload_digest:
        return "action_approval_digest_mismatch"
    if d.expires_at <= now:
        return "action_approval_changed"
    return None


def decide(decision: str) -> Change:
    """approval_required → approved or rejected (APPR-5)."""
    return Change(Move.APPROVE if decision == "approved" else Move.REJECT, {}, {"state": S.APPROVAL_REQUIRED})


def enqueue_approved(now: datetime, not_before: datetime | None = None) -> Change:
    """approved → queued and due now (or at its `not_before`, TEMP-4): the approved
    action goes to delivery."""
    values = {
        "next_attempt_at": max(now, not_before or now),
        "lease_expires_at": None,
        "last_error_code": None,
        "delivery_terminal": False,
    }
    return Change(Move.ENQUEUE_APPROVED, values)


def retry_refusal(d: Delivery, payload_digest: str, now: datetime) -> str | None:
    """Why an operator retry is refused from the proposal alone (RTRY-1), or None."""
    if payload_digest != d.payload_digest:
        return "action_retry_digest_mismatch"
    if d.state != S.FAILED or not d.delivery_terminal:
        return "action_not_retryable"
    if d.expires_at <= now:
        return APPROVAL_EXPIRED
    return None


def retry(d: Delivery, now: datetime) -> Change:
    """A new delivery cycle with its own 8 attempts, due now (RTRY-2)."""
    values = {
        "delivery_terminal": False,
        "cycle_start_attempt": d.delivery_attempt_count,
        "delivery_cycle": d.delivery_cycle + 1,
        "accepted_at": None,
        "confirmation_deadline_at": None,
        "next_attempt_at": now,
        "lease_expires_at": None,
        "last_error_code": None,
    }
    expect = {"delivery_terminal": True, "delivery_cycle": d.delivery_cycle}
    expect["delivery_attempt_count"] = d.delivery_attempt_count
    return Change(Move.OPERATOR_RETRY, values, expect)


def compensation_refusal(d: Delivery) -> str | None:
    """Only an applied (or already compensation-required) action is compensated (COMP-1);
    a notice to the affected user cannot be taken back (DSA-4)."""
    if not is_effective(d.state):
        return "action_compensation_unavailable"
    if d.is_notice:
        return "action_notice_not_compensable"
    return None


def mark_compensated(d: Delivery) -> Change | None:
    """applied → compensation_required when its first compensation is proposed (COMP-3)."""
    if d.state != S.APPLIED:
        return None
    return Change(Move.COMPENSATE, {}, {"state": S.APPLIED})
