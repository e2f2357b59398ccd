"""The proposal's state machine against the diagram of SPEC §3, move by move."""

from __future__ import annotations

import itertools

import pytest

from app.domain.states import (
    TERMINAL_STATES,
    TRANSITIONS,
    Move,
    ProposalState,
    can,
    is_terminal,
    sources,
    target,
)

S = ProposalState
RECEIPT_FROM = {S.APPLYING, S.QUEUED, S.FAILED}  # synchronous answer, or later through the API (API-4)

# The diagram, written out independently of app.domain.states: move -> (from, to).
DIAGRAM = {
    Move.APPROVE: ({S.APPROVAL_REQUIRED}, S.APPROVED),  # approval_required --approve--> approved
    Move.REJECT: ({S.APPROVAL_REQUIRED}, S.REJECTED),  # approval_required --reject--> rejected
    Move.ENQUEUE_APPROVED: ({S.APPROVED}, S.QUEUED),  # approved --> queued
    Move.CLAIM: ({S.QUEUED, S.FAILED, S.APPLYING}, S.APPLYING),  # queued/failed(due), or an expired lease (DLV-1)
    Move.RECEIPT_ACCEPTED: (RECEIPT_FROM, S.QUEUED),  # applying --receipt accepted--> queued
    Move.RECEIPT_APPLIED: (RECEIPT_FROM, S.APPLIED),  # applying --receipt applied--> applied
    Move.RECEIPT_FAILED: (RECEIPT_FROM, S.FAILED),  # applying --receipt failed--> failed
    Move.DELIVERY_FAILED: ({S.APPLYING}, S.FAILED),  # applying --error--> failed
    Move.DELIVERY_DEFERRED: ({S.APPLYING}, S.QUEUED),  # applying --nothing sent, waits--> queued (DLV-1, issue 22)
    Move.OPERATOR_RETRY: ({S.FAILED}, S.QUEUED),  # failed(terminal) --operator retry--> queued
    Move.COMPENSATE: ({S.APPLIED, S.COMPENSATION_REQUIRED}, S.COMPENSATION_REQUIRED),  # COMP-1
    # wait timed out --> cancelled (nothing sent) or failed (something may have been sent), WAIT-2
    Move.WAIT_TIMED_OUT_UNSENT: ({S.APPROVAL_REQUIRED, S.APPROVED, S.QUEUED, S.FAILED}, S.CANCELLED),
    Move.WAIT_TIMED_OUT_SENT: ({S.QUEUED, S.APPLYING, S.FAILED}, S.FAILED),
    Move.CONFIRMATION_TIMED_OUT: ({S.QUEUED}, S.FAILED),  # accepted, past its deadline (EVT-3)
    # TEMP-3/4: a scheduled proposal nothing was sent for is cancelled
    Move.CANCEL_SCHEDULED: ({S.APPROVAL_REQUIRED, S.APPROVED, S.QUEUED}, S.CANCELLED),
    # CONN-1..3: held back by its connection before the claim, it keeps its state
    Move.HOLD_QUEUED: ({S.QUEUED}, S.QUEUED),
    Move.HOLD_FAILED: ({S.FAILED}, S.FAILED),
    # BULK-7: a cancelled batch's item sent before (waiting again, or claimed for it) fails for good
    Move.BULK_CANCEL_SENT: ({S.QUEUED, S.APPLYING, S.FAILED}, S.FAILED),
}
PAIRS = list(itertools.product(Move, S))


def test_every_move_of_the_table_is_in_the_diagram():
    """§3: no move exists that the diagram does not name."""
    assert set(TRANSITIONS) == set(DIAGRAM) == set(Move)


@pytest.mark.parametrize("move, state", [(m, s) for m, s in PAIRS if s in DIAGRAM[m][0]])
def test_every_allowed_move(move, state):
    """§3: each arrow of the diagram is allowed and ends where the diagram says."""
    assert can(move, state) and can(move, state.value)
    assert target(move) == DIAGRAM[move][1]


@pytest.mark.parametrize("move, state", [(m, s) for m, s in PAIRS if s not in DIAGRAM[m][0]])
def test_every_move_the_diagram_does_not_allow_is_refused(move, state):
    """§3: a move from a state the diagram gives it no arrow from is refused."""
    assert not can(move, state) and not can(move, state.value)
    assert state not in sources(move)


def test_terminal_states_and_failures():
    """§3: applied, rejected, cancelled, compensation_required end a proposal; failed
    only when the delivery is terminal."""
    assert {S.APPLIED, S.REJECTED, S.CANCELLED, S.COMPENSATION_REQUIRED} == TERMINAL_STATES
    for state in S:
        expected = state in TERMINAL_STATES or state == S.FAILED
        assert is_terminal(state, True) == expected
        assert is_terminal(state, False) == (state in TERMINAL_STATES)


def test_no_move_leaves_a_terminal_state_except_compensation():
    """§3: only a compensation follows an applied action; nothing follows rejected or cancelled."""
    for move, (starts, _) in DIAGRAM.items():
        for state in TERMINAL_STATES & starts:
            assert move == Move.COMPENSATE and state in (S.APPLIED, S.COMPENSATION_REQUIRED)


def test_the_named_sets_are_the_tables_answers():
    """§3: each named set is read off the transition table (COMP-1, TEMP-4, RTRY-1, DLV-1)."""
    from app.domain.states import CANCELLABLE_STATES, DEAD_LETTER_STATES, EFFECTIVE_STATES, WAITING_STATES

    assert WAITING_STATES == {S.QUEUED, S.FAILED} == sources(Move.CLAIM) - {S.APPLYING}
    assert EFFECTIVE_STATES == {S.APPLIED, S.COMPENSATION_REQUIRED}
    assert CANCELLABLE_STATES == {S.APPROVAL_REQUIRED, S.APPROVED, S.QUEUED}
    assert DEAD_LETTER_STATES == {S.FAILED}


@pytest.mark.parametrize("state", list(S))
@pytest.mark.parametrize("terminal", [False, True])
def test_the_named_predicates_over_every_state(state, terminal):
    """§3, DLV-1, DLV-7, COMP-1, RTRY-1: waiting, effective, dead letter, resolved."""
    from app.domain.states import is_dead_letter, is_effective, is_resolved, is_waiting

    assert is_waiting(state, terminal) == (state in (S.QUEUED, S.FAILED) and not terminal)
    assert is_effective(state) == (state in (S.APPLIED, S.COMPENSATION_REQUIRED))
    assert is_dead_letter(state, terminal) == (state == S.FAILED and terminal)
    assert is_resolved(state, terminal) == (state == S.APPLIED or (state == S.FAILED and terminal))
    assert is_terminal(state, terminal) == (state in TERMINAL_STATES or (state == S.FAILED and terminal))


def test_attempts_in_cycle_and_attempts_left():
    """DLV-6, RTRY-2: a cycle counts from its start; 8 attempts each."""
    from app.domain.states import attempts_in_cycle, has_attempts_left

    assert attempts_in_cycle(10, 3) == 7 and has_attempts_left(10, 3)
    assert attempts_in_cycle(11, 3) == 8 and not has_attempts_left(11, 3)
    assert has_attempts_left(0, 0) and not has_attempts_left(9, 0)
