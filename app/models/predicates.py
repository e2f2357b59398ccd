"""The SQL twin of each named proposal predicate (SPEC §3, DLV-1, DLV-7, COMP-1, RTRY-1, POL-2).

The rules live in `app.domain.states` and `app.domain.proposal.delivery`; a query that
must ask the same question in SQL (a sweep, a batch claim, a read model, a metric)
uses the expression here, never its own ``state IN (...)``.
`tests/models/test_predicates.py` checks every pair against each other over every
state and flag, on SQLite and PostgreSQL.
"""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import and_, bindparam, false, or_, true
from sqlalchemy.sql.elements import ColumnElement

from app.domain.states import (
    DEAD_LETTER_STATES,
    EFFECTIVE_STATES,
    MAX_ATTEMPTS_PER_CYCLE,
    TERMINAL_STATES,
    WAITING_STATES,
    Move,
    ProposalState,
    sources,
    target,
)

from app.domain.proposal.notice_action import NOTICE_CREATOR_PREFIX

from .approvals import ApprovalVote
from .proposals import ActionProposal

P = ActionProposal


def _values(states) -> list[str]:
    """The states' values in the table's order (stable SQL text: the partial index's
    WHERE must read exactly as the queries that use it)."""
    return [state.value for state in ProposalState if state in states]


def attempts_in_cycle() -> ColumnElement:
    """`states.attempts_in_cycle`: attempts used in the current delivery cycle."""
    return P.delivery_attempt_count - P.cycle_start_attempt


def has_attempts_left() -> ColumnElement:
    """`states.has_attempts_left`: fewer than 8 attempts used in the cycle (DLV-6)."""
    return attempts_in_cycle() < MAX_ATTEMPTS_PER_CYCLE


def in_waiting_states() -> ColumnElement:
    """``state IN ('queued', 'failed')`` with the states rendered inline, so the planner
    can use the partial index `ix_action_proposals_waiting` (DLV-1's batch claim)."""
    states = bindparam("waiting_states", _values(WAITING_STATES), expanding=True, literal_execute=True)
    return P.state.in_(states)


def waiting() -> ColumnElement:
    """`states.is_waiting`: queued or failed, not terminal (DLV-1)."""
    return and_(in_waiting_states(), P.delivery_terminal.is_(false()))


def effective() -> ColumnElement:
    """`states.is_effective`: applied or compensation_required (COMP-1, TEMP-2)."""
    return P.state.in_(_values(EFFECTIVE_STATES))


def notice() -> ColumnElement:
    """`ActionProposal.is_notice`: a restriction's notice to the affected user (DSA-4)."""
    return and_(P.created_by_type == "system", P.created_by_id.startswith(NOTICE_CREATOR_PREFIX, autoescape=True))


def dead_letter() -> ColumnElement:
    """`states.is_dead_letter`: failed for good (RTRY-1, CONN-4)."""
    return and_(P.state.in_(_values(DEAD_LETTER_STATES)), P.delivery_terminal.is_(true()))


def terminal() -> ColumnElement:
    """`states.is_terminal`: nothing more happens without a person (§3, WAIT-1)."""
    return or_(P.state.in_(_values(TERMINAL_STATES)), dead_letter())


def resolved() -> ColumnElement:
    """`states.is_resolved`: applied, or failed for good (DLV-7)."""
    return or_(P.state == target(Move.RECEIPT_APPLIED).value, dead_letter())


def awaits_decision(now: datetime) -> ColumnElement:
    """`delivery.awaits_decision`: awaiting approval, its authorization not expired (APPR-3)."""
    return and_(P.state.in_(_values(sources(Move.APPROVE))), P.expires_at > now)


def counting_vote(now: datetime) -> ColumnElement:
    """`approval_policy.counting`'s first part for a proposal decided on its own (POL-2):
    the vote is on this proposal, bound to its current payload digest and not expired.
    (A batch's items are decided with their batch and its digest: BULK-3.)"""
    return and_(
        ApprovalVote.proposal_id == P.id,
        ApprovalVote.payload_digest == P.payload_digest,
        ApprovalVote.expires_at > now,
    )


def _past_not_before(now: datetime) -> ColumnElement:
    return or_(P.not_before.is_(None), P.not_before <= now)  # TEMP-4


def due(now: datetime) -> ColumnElement:
    """`delivery.is_due`: waiting, due by `now`, past its `not_before`, with attempts
    left or accepted (DLV-1, TEMP-4)."""
    return and_(
        waiting(),
        P.next_attempt_at <= now,
        _past_not_before(now),
        or_(has_attempts_left(), P.accepted_at.is_not(None)),
    )


def lease_expired(now: datetime) -> ColumnElement:
    """`delivery.lease_expired`: applying, not terminal, its lease over by `now` (DLV-1)."""
    return and_(
        P.state == target(Move.CLAIM).value,
        P.delivery_terminal.is_(false()),
        P.lease_expires_at <= now,
    )


def claimable(now: datetime) -> ColumnElement:
    """`delivery.is_claimable`: due, or applying with an expired lease (DLV-1)."""
    return or_(due(now), lease_expired(now))


def sendable(now: datetime) -> ColumnElement:
    """`delivery.is_sendable`: waiting for a fresh attempt whatever its due time: not
    accepted, attempts left, past its `not_before` (DLV-1, CONN-1)."""
    return and_(waiting(), P.accepted_at.is_(None), has_attempts_left(), _past_not_before(now))
