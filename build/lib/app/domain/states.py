"""The action proposal's state machine: every state and every allowed move (SPEC §3).

This table is the one place that says which states a change may start from. Services
never write ``state`` directly: they name a `Move` and the guarded UPDATE in
`app.models.proposals` takes its from-states and to-state from here.
"""

from __future__ import annotations

from enum import StrEnum


class ProposalState(StrEnum):
    APPROVAL_REQUIRED = "approval_required"
    APPROVED = "approved"
    REJECTED = "rejected"
    QUEUED = "queued"
    APPLYING = "applying"
    APPLIED = "applied"
    FAILED = "failed"
    CANCELLED = "cancelled"
    COMPENSATION_REQUIRED = "compensation_required"


class Move(StrEnum):
    """Named transitions; the value is what audit and logs call them."""

    APPROVE = "approve"
    REJECT = "reject"
    ENQUEUE_APPROVED = "enqueue_approved"
    CLAIM = "claim"
    RECEIPT_ACCEPTED = "receipt_accepted"
    RECEIPT_APPLIED = "receipt_applied"
    RECEIPT_FAILED = "receipt_failed"
    DELIVERY_FAILED = "delivery_failed"
    DELIVERY_DEFERRED = "delivery_deferred"
    OPERATOR_RETRY = "operator_retry"
    COMPENSATE = "compensate"
    WAIT_TIMED_OUT_UNSENT = "wait_timed_out_unsent"
    WAIT_TIMED_OUT_SENT = "wait_timed_out_sent"
    CONFIRMATION_TIMED_OUT = "confirmation_timed_out"
    CANCEL_SCHEDULED = "cancel_scheduled"
    HOLD_QUEUED = "hold_queued"
    HOLD_FAILED = "hold_failed"
    BULK_CANCEL_SENT = "bulk_cancel_sent"


S = ProposalState

# move -> (states it may start from, state it ends in)
TRANSITIONS: dict[Move, tuple[frozenset[ProposalState], ProposalState]] = {
    Move.APPROVE: (frozenset({S.APPROVAL_REQUIRED}), S.APPROVED),
    Move.REJECT: (frozenset({S.APPROVAL_REQUIRED}), S.REJECTED),
    Move.ENQUEUE_APPROVED: (frozenset({S.APPROVED}), S.QUEUED),
    # queued/failed when due, applying when its lease expired (DLV-1)
    Move.CLAIM: (frozenset({S.QUEUED, S.FAILED, S.APPLYING}), S.APPLYING),
    # a receipt arrives synchronously (applying) or through the API (RCPT-2, API-4)
    Move.RECEIPT_ACCEPTED: (frozenset({S.APPLYING, S.QUEUED, S.FAILED}), S.QUEUED),
    Move.RECEIPT_APPLIED: (frozenset({S.APPLYING, S.QUEUED, S.FAILED}), S.APPLIED),
    Move.RECEIPT_FAILED: (frozenset({S.APPLYING, S.QUEUED, S.FAILED}), S.FAILED),
    Move.DELIVERY_FAILED: (frozenset({S.APPLYING}), S.FAILED),
    # a claimed attempt sent nothing (a budget, the connection, a batch released it):
    # waiting again, not failed (DLV-1, DLV-3, CONN-1)
    Move.DELIVERY_DEFERRED: (frozenset({S.APPLYING}), S.QUEUED),
    Move.OPERATOR_RETRY: (frozenset({S.FAILED}), S.QUEUED),
    Move.COMPENSATE: (frozenset({S.APPLIED, S.COMPENSATION_REQUIRED}), S.COMPENSATION_REQUIRED),
    # WAIT-2: nothing can have been sent -> cancelled; something may have -> failed
    Move.WAIT_TIMED_OUT_UNSENT: (
        frozenset({S.APPROVAL_REQUIRED, S.APPROVED, S.QUEUED, S.FAILED}),
        S.CANCELLED,
    ),
    Move.WAIT_TIMED_OUT_SENT: (frozenset({S.QUEUED, S.APPLYING, S.FAILED}), S.FAILED),
    # EVT-3 sweep: accepted and past its confirmation deadline
    Move.CONFIRMATION_TIMED_OUT: (frozenset({S.QUEUED}), S.FAILED),
    # TEMP-3/4: a scheduled proposal nothing was sent for is cancelled (operator, an
    # approved "end now"/"extend", or an appeal correction that undid its action)
    Move.CANCEL_SCHEDULED: (frozenset({S.APPROVAL_REQUIRED, S.APPROVED, S.QUEUED}), S.CANCELLED),
    # CONN-1..3: a due delivery its connection holds back before it is claimed keeps
    # its state (queued, or failed waiting to retry) and is due at the end of the wait
    Move.HOLD_QUEUED: (frozenset({S.QUEUED}), S.QUEUED),
    Move.HOLD_FAILED: (frozenset({S.FAILED}), S.FAILED),
    # BULK-7: a cancelled batch's item that was sent before and waits to be sent
    # again (or was claimed for that) fails for good, never sent again; one never
    # sent is cancelled (`CANCEL_SCHEDULED`)
    Move.BULK_CANCEL_SENT: (frozenset({S.QUEUED, S.APPLYING, S.FAILED}), S.FAILED),
}


def sources(move: Move) -> frozenset[ProposalState]:
    """States `move` may start from."""
    return TRANSITIONS[move][0]


def target(move: Move) -> ProposalState:
    """State `move` ends in."""
    return TRANSITIONS[move][1]


# The sets the rules keep asking about, derived from the table above (never listed by
# hand). `app.models.predicates` holds each one's SQL twin.
#
# Waiting to be sent or sent again: what a claim takes when due, besides an expired
# lease of its own target state (DLV-1): queued, failed.
WAITING_STATES = sources(Move.CLAIM) - {target(Move.CLAIM)}
# Effective: the action took effect on the platform, so a compensation can undo it
# (COMP-1): applied, compensation_required.
EFFECTIVE_STATES = sources(Move.COMPENSATE)
# Nothing was sent yet: a scheduled proposal may still be cancelled (TEMP-3, TEMP-4).
CANCELLABLE_STATES = sources(Move.CANCEL_SCHEDULED)
# Ended whatever the flags say: no move leaves them but a compensation, which is a new
# proposal (§3): applied, rejected, cancelled, compensation_required.
TERMINAL_STATES = frozenset(
    state for state in S if not any(state in sources(m) for m in TRANSITIONS if m is not Move.COMPENSATE)
)
# Only an operator's retry leaves it, once its delivery is terminal: a dead letter (RTRY-1, CONN-4).
DEAD_LETTER_STATES = sources(Move.OPERATOR_RETRY)

# Per delivery cycle (DLV-1, DLV-6).
MAX_ATTEMPTS_PER_CYCLE = 8
LEASE_SECONDS = 150
# A connection's timeout bounds its whole request (connect, send, every read), at
# most 120 s; the request gets at most four fifths of the lease, so the last fifth
# (30 s of 150) is kept for recording its outcome while the lease still holds.
MAX_TIMEOUT_SECONDS = 120
REQUEST_SHARE_OF_LEASE = 0.8
assert LEASE_SECONDS * REQUEST_SHARE_OF_LEASE >= MAX_TIMEOUT_SECONDS, "the lease must outlast the longest request"
CONFIRMATION_WINDOW_SECONDS = 15 * 60


def can(move: Move, state: str) -> bool:
    """Whether a proposal in `state` may take `move`."""
    return state in TRANSITIONS[move][0]


def is_terminal(state: str, delivery_terminal: bool) -> bool:
    """Whether nothing more will happen without a person (§3; the console stops
    polling, a waiting run answers a port: WAIT-1). SQL twin: `predicates.terminal`.

    Args:
        state: a `ProposalState` value.
        delivery_terminal: the proposal's ``delivery_terminal`` flag.
    """
    return state in TERMINAL_STATES or is_dead_letter(state, delivery_terminal)


def is_dead_letter(state: str, delivery_terminal: bool) -> bool:
    """A delivery that failed for good: only an operator's retry moves it (RTRY-1,
    CONN-4). SQL twin: `predicates.dead_letter`."""
    return state in DEAD_LETTER_STATES and delivery_terminal


def is_waiting(state: str, delivery_terminal: bool) -> bool:
    """Queued or failed and not terminal: a delivery that will be sent (again) when
    due (DLV-1). SQL twin: `predicates.waiting`."""
    return state in WAITING_STATES and not delivery_terminal


def is_effective(state: str) -> bool:
    """The action took effect (applied, or applied and compensated since): what a
    compensation or a reversal can undo (COMP-1, TEMP-2). SQL twin: `predicates.effective`."""
    return state in EFFECTIVE_STATES


def is_resolved(state: str, delivery_terminal: bool) -> bool:
    """Applied, or failed for good: the run hears of the delivery's end (DLV-7).
    SQL twin: `predicates.resolved`."""
    return state == target(Move.RECEIPT_APPLIED) or is_dead_letter(state, delivery_terminal)


def attempts_in_cycle(delivery_attempt_count: int, cycle_start_attempt: int) -> int:
    """Attempts used in the current delivery cycle (DLV-1, DLV-6, RTRY-2): an operator
    retry starts a cycle at the attempt count it had. SQL twin: `predicates.attempts_in_cycle`."""
    return delivery_attempt_count - cycle_start_attempt


def has_attempts_left(delivery_attempt_count: int, cycle_start_attempt: int) -> bool:
    """Whether the cycle has attempts left (DLV-1, DLV-6): at most 8 per cycle."""
    return attempts_in_cycle(delivery_attempt_count, cycle_start_attempt) < MAX_ATTEMPTS_PER_CYCLE
