"""The port a proposal answers and what its waiting run does (WAIT-1, WAIT-2, PREP-7)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from app.domain.proposal.delivery import Delivery
from app.domain.proposal.ports import Answer, Next, answer, error_code, port, timed_out_port
from app.domain.states import ProposalState as S

NOW = datetime(2026, 3, 1, tzinfo=UTC)


def d(state, terminal=False, code=None, expires=NOW + timedelta(hours=1)) -> Delivery:
    return Delivery(state=state, expires_at=expires, delivery_terminal=terminal, last_error_code=code)


@pytest.mark.parametrize(
    "state, terminal, expected",
    [
        (S.APPLIED, True, "applied"),
        (S.COMPENSATION_REQUIRED, True, "applied"),
        (S.REJECTED, False, "rejected"),
        (S.CANCELLED, True, "timeout"),
        (S.FAILED, True, "error"),
        (S.FAILED, False, None),
        (S.QUEUED, False, None),
        (S.APPLYING, False, None),
        (S.APPROVED, False, None),
        (S.APPROVAL_REQUIRED, False, None),
    ],
)
def test_port_of_each_state(state, terminal, expected):
    """WAIT-1: the four ports, none while the proposal can still change."""
    assert port(d(state, terminal)) == expected


def test_error_code_of_a_failure():
    """WAIT-1: the error port carries the failure's code."""
    assert error_code(d(S.FAILED, True, "platform_rejected")) == "platform_rejected"
    assert error_code(d(S.FAILED, True)) == "action_delivery_failed"


@pytest.mark.parametrize(
    "state, expected",
    [
        (S.APPROVAL_REQUIRED, Next.AWAIT_APPROVAL),
        (S.APPROVED, Next.ENQUEUE),
        (S.APPLYING, Next.WAIT),
        (S.QUEUED, Next.SCHEDULE),
        (S.FAILED, Next.SCHEDULE),
    ],
)
def test_what_an_open_proposal_asks_of_its_run(state, expected):
    """WAIT-1, PREP-7: wait for the approval, queue, wait for the worker, or schedule."""
    assert answer(d(state), NOW) == Answer(expected)


def test_finished_proposals_answer_their_port():
    """PREP-7: a replay answers the stored outcome."""
    assert answer(d(S.APPLIED, True), NOW) == Answer(Next.FINISH, "applied")
    assert answer(d(S.REJECTED), NOW) == Answer(Next.FINISH, "rejected")
    assert answer(d(S.CANCELLED, True), NOW, await_recovery=True) == Answer(Next.FINISH, "timeout")
    assert answer(d(S.FAILED, True, "x"), NOW) == Answer(Next.FINISH, "error", "x")


def test_a_terminal_failure_can_wait_for_recovery_while_authorized():
    """PREP-7, WAIT-1: a node that awaits recovery keeps waiting, until it expires or times out."""
    failed = d(S.FAILED, True, "x")
    assert answer(failed, NOW, await_recovery=True) == Answer(Next.RECOVER, error_code="x")
    assert answer(failed, NOW, await_recovery=True, timed_out=True) == Answer(Next.FINISH, "error", "x")
    expired = d(S.FAILED, True, "x", expires=NOW)
    assert answer(expired, NOW, await_recovery=True) == Answer(Next.FINISH, "error", "x")


def test_after_a_timeout_only_an_applied_action_answers_applied():
    """WAIT-2: an action applied meanwhile still answers applied."""
    assert timed_out_port(d(S.APPLIED, True)) == "applied"
    assert timed_out_port(d(S.COMPENSATION_REQUIRED, True)) == "applied"
    assert timed_out_port(d(S.CANCELLED, True)) == "timeout"
    assert timed_out_port(d(S.FAILED, True)) == "timeout"
