"""What each event does to a proposal (DLV-1..7, RCPT-2, RTRY, WAIT-2, COMP, APPR-3, EDGE-3..5)."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime, timedelta

import pytest

from app.domain.proposal import delivery as D
from app.domain.receipts import Receipt
from app.domain.states import Move

NOW = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)
LATER = NOW + timedelta(days=1)
S = D.S


def proposal(**fields) -> D.Delivery:
    base = dict(state=S.QUEUED, expires_at=LATER, payload_digest="sha256:d", next_attempt_at=NOW)
    base.update(fields)
    return D.Delivery(**base)


def receipt(status="applied", terminal=None, retry_after=30, error_code=None) -> Receipt:
    if terminal is None:
        terminal = status != "accepted"
    code = (error_code or "action_provider_failed") if status == "failed" else None
    return Receipt("a", "o", "sha256:d", status, terminal, code, retry_after, None)


# -- Delivery -------------------------------------------------------------------------


def test_delivery_properties():
    """DLV-1, DLV-7: attempts per cycle, terminal, resolved."""
    d = proposal(delivery_attempt_count=10, cycle_start_attempt=8)
    assert d.attempts_in_cycle == 2
    assert not d.terminal and not d.resolved
    assert proposal(state=S.FAILED, delivery_terminal=True).terminal
    assert proposal(state=S.FAILED, delivery_terminal=True).resolved
    assert proposal(state=S.APPLIED).resolved and proposal(state=S.APPLIED).terminal
    assert not proposal(state=S.FAILED).resolved
    assert not proposal(state=S.REJECTED).resolved and proposal(state=S.REJECTED).terminal


def test_write_applies_a_matching_change():
    """The guarded write: source state and every expected column must match."""
    d = proposal(delivery_attempt_count=1)
    change = D.Change(Move.CLAIM, {"delivery_attempt_count": 2, "not_a_column": 1}, {"delivery_attempt_count": 1})
    written = D.write(d, change)
    assert (written.state, written.delivery_attempt_count) == ("applying", 2)
    assert not hasattr(written, "not_a_column")
    assert D.write(replace(d, delivery_attempt_count=3), change) is None
    assert D.write(replace(d, state=S.APPLIED), change) is None
    assert D.write(d, D.Change(Move.CLAIM)) is not None


# -- claim (DLV-1) --------------------------------------------------------------------


def test_claim_counts_an_attempt_and_takes_a_lease():
    """DLV-1: applying, one more attempt, a 150 s lease, guarded on the row as read."""
    d = proposal(delivery_attempt_count=3, cycle_start_attempt=2, delivery_cycle=2)
    change = D.claim(d, NOW)
    assert change.move == Move.CLAIM
    assert change.values == {"delivery_attempt_count": 4, "lease_expires_at": NOW + timedelta(seconds=150)}
    assert change.expect == {
        "state": S.QUEUED,
        "delivery_terminal": False,
        "delivery_cycle": 2,
        "accepted_at": None,
        "delivery_attempt_count": 3,
        "lease_expires_at": None,
        "next_attempt_at": NOW,
    }
    assert D.lease_of(change, d) == D.Lease(4, 2, NOW + timedelta(seconds=150))
    given = NOW + timedelta(seconds=9)
    assert D.claim(d, NOW, given).values["lease_expires_at"] == given


@pytest.mark.parametrize(
    "fields",
    [
        {"next_attempt_at": NOW + timedelta(seconds=1)},
        {"next_attempt_at": None},
        {"delivery_terminal": True},
        {"delivery_attempt_count": 8},
        {"state": S.APPLYING, "lease_expires_at": NOW + timedelta(seconds=1)},
        {"state": S.APPLYING, "lease_expires_at": None},
        {"state": S.APPROVAL_REQUIRED},
        {"state": S.APPROVED},
        {"state": S.APPLIED},
        {"state": S.CANCELLED},
    ],
)
def test_not_claimable(fields):
    """DLV-1: not due, terminal, out of attempts, leased, or not deliverable."""
    assert D.claim(proposal(**fields), NOW) is None


def test_due_at_exactly_now_and_failed_are_claimable():
    """DLV-1: queued or failed, due now."""
    assert D.claim(proposal(state=S.FAILED), NOW).values["delivery_attempt_count"] == 1
    assert D.claim(proposal(next_attempt_at=NOW - timedelta(seconds=1)), NOW) is not None


def test_expired_lease_is_reclaimed_with_a_new_attempt():
    """DLV-1: applying with an expired lease."""
    d = proposal(state=S.APPLYING, lease_expires_at=NOW, delivery_attempt_count=1, next_attempt_at=None)
    assert D.claim(d, NOW).values["delivery_attempt_count"] == 2


def test_accepted_action_is_claimed_at_its_deadline_without_counting():
    """DLV-1, RCPT-2: no attempt is counted while an accepted action waits."""
    d = proposal(accepted_at=NOW - timedelta(minutes=15), delivery_attempt_count=8)
    change = D.claim(d, NOW)
    assert change.values["delivery_attempt_count"] == 8 and "last_error_code" not in change.values


def test_claim_past_the_last_attempt_marks_exhaustion():
    """DLV-1: an expired lease after the cycle's 8th attempt is claimed without counting."""
    d = proposal(state=S.APPLYING, lease_expires_at=NOW, delivery_attempt_count=9, cycle_start_attempt=1)
    change = D.claim(d, NOW)
    assert change.values["delivery_attempt_count"] == 9
    assert change.values["last_error_code"] == "action_delivery_attempts_exhausted"


# -- pre-send checks (DLV-2) ----------------------------------------------------------


def test_pre_send_problems_in_order():
    """DLV-2: confirmation timed out, attempts exhausted, authorization expired."""
    exhausted = "action_delivery_attempts_exhausted"
    assert D.pre_send_problem(proposal(), NOW) is None
    assert (
        D.pre_send_problem(proposal(accepted_at=NOW, last_error_code=exhausted), NOW) == "action_confirmation_timed_out"
    )
    assert D.pre_send_problem(proposal(last_error_code=exhausted, expires_at=NOW), NOW) == exhausted
    assert D.pre_send_problem(proposal(expires_at=NOW), NOW) == "action_approval_expired"
    assert D.pre_send_problem(proposal(expires_at=NOW + timedelta(microseconds=1)), NOW) is None
    assert D.pre_send_problem(proposal(last_error_code="other"), NOW) is None


def test_human_mode_needs_an_approval_of_the_digest():
    """DLV-2: action_approval_missing only in human mode."""
    assert D.approval_missing(proposal(approval_mode="human"), False)
    assert not D.approval_missing(proposal(approval_mode="human"), True)
    assert not D.approval_missing(proposal(approval_mode="bounded_auto"), False)


# -- failure (DLV-6) ------------------------------------------------------------------

LEASE = D.Lease(3, 1, NOW + timedelta(seconds=150))


def test_retryable_failure_backs_off():
    """DLV-6: delay × 2^(attempt_in_cycle − 1), guarded by attempt, cycle and lease."""
    d = proposal(state=S.APPLYING, delivery_attempt_count=3)
    change = D.failure(d, LEASE, code="platform_server_error", retryable=True, delay_seconds=15, now=NOW)
    assert change.move == Move.DELIVERY_FAILED and not change.terminal
    assert change.values == {
        "delivery_terminal": False,
        "next_attempt_at": NOW + timedelta(seconds=60),
        "lease_expires_at": None,
        "last_error_code": "platform_server_error",
    }
    assert change.expect == {
        "delivery_terminal": False,
        "delivery_attempt_count": 3,
        "delivery_cycle": 1,
        "lease_expires_at": LEASE.expires_at,
    }
    assert change.delay_seconds == 60


def test_backoff_counts_attempts_of_this_cycle():
    """DLV-6: a new cycle starts its backoff again."""
    d = proposal(state=S.APPLYING, delivery_attempt_count=3, cycle_start_attempt=2)
    change = D.failure(d, LEASE, code="x", retryable=True, delay_seconds=10, now=NOW)
    assert change.delay_seconds == 10


def test_failure_is_terminal_when_not_retryable_or_on_the_last_attempt():
    """DLV-6: terminal when not retryable or the cycle's 8 attempts are used."""
    d = proposal(state=S.APPLYING)
    assert D.failure(d, LEASE, code="x", retryable=False, delay_seconds=15, now=NOW).terminal
    last = D.Lease(8, 1, LEASE.expires_at)
    change = D.failure(d, last, code="x", retryable=True, delay_seconds=15, now=NOW)
    assert change.terminal and change.delay_seconds is None
    seventh = D.Lease(7, 1, LEASE.expires_at)
    assert not D.failure(d, seventh, code="x", retryable=True, delay_seconds=15, now=NOW).terminal


def test_deferral_gives_the_attempt_back():
    """DLV-3: a budget with no room sends nothing and uses no attempt; its delay is not multiplied."""
    d = proposal(state=S.APPLYING)
    last = D.Lease(8, 1, LEASE.expires_at)
    change = D.failure(d, last, code="budget_exhausted", retryable=True, delay_seconds=40, now=NOW, deferred=True)
    assert not change.terminal
    assert change.values["delivery_attempt_count"] == 7
    assert change.values["next_attempt_at"] == NOW + timedelta(seconds=40)



def test_conn1_hold_keeps_the_state_and_moves_the_due_time():
    """CONN-1: a due delivery held back by its connection before the claim keeps its
    state (queued, or failed waiting to retry), is due at the end of the wait, and
    uses no attempt; the write is guarded on the row as read."""
    until = NOW + timedelta(seconds=30)
    for state, move in ((S.QUEUED, Move.HOLD_QUEUED), (S.FAILED, Move.HOLD_FAILED)):
        d = proposal(state=state, delivery_attempt_count=3, delivery_cycle=2, next_attempt_at=NOW)
        change = D.hold(d, NOW, code="connection_circuit_open", until=until)
        assert change == D.Change(
            move,
            {"next_attempt_at": until, "last_error_code": "connection_circuit_open"},
            {
                "delivery_terminal": False,
                "accepted_at": None,
                "next_attempt_at": NOW,
                "delivery_cycle": 2,
                "delivery_attempt_count": 3,
            },
            30.0,
        )
        held = D.write(d, change)
        assert (held.state, held.delivery_attempt_count, held.next_attempt_at) == (state, 3, until)
        assert D.write(replace(d, next_attempt_at=NOW - timedelta(seconds=1)), change) is None  # a claim came first


@pytest.mark.parametrize(
    "fields",
    [
        {"state": S.APPLYING},
        {"state": S.APPROVED},
        {"state": S.FAILED, "delivery_terminal": True},
        {"accepted_at": NOW},
        {"next_attempt_at": None},
        {"next_attempt_at": NOW + timedelta(microseconds=1)},
    ],
)
def test_conn1_hold_leaves_what_is_not_waiting_and_due(fields):
    """CONN-1: only a waiting, due, unaccepted delivery is held before the claim."""
    assert D.hold(proposal(**fields), NOW, code="connection_paused", until=LATER) is None

# -- receipts (RCPT-2, DLV-5) ---------------------------------------------------------


def test_applied_receipt_confirms():
    """RCPT-2: applied is terminal with confirmed_at."""
    d = proposal(state=S.APPLYING, delivery_attempt_count=1)
    change = D.receipt(d, receipt("applied"), NOW)
    assert change.move == Move.RECEIPT_APPLIED and change.terminal
    assert change.values["confirmed_at"] == NOW and change.values["last_error_code"] is None
    assert "accepted_at" not in change.values
    assert change.expect == {
        "state": S.APPLYING,
        "delivery_terminal": False,
        "delivery_cycle": 1,
        "accepted_at": None,
        "delivery_attempt_count": 1,
        "confirmation_deadline_at": None,
    }


def test_accepted_receipt_waits_until_the_deadline():
    """RCPT-2: accepted stays queued until min(expiry, now + 15 min)."""
    d = proposal(state=S.APPLYING, delivery_attempt_count=1)
    change = D.receipt(d, receipt("accepted"), NOW)
    deadline = NOW + timedelta(minutes=15)
    assert change.move == Move.RECEIPT_ACCEPTED and not change.terminal
    assert change.values == {
        "delivery_terminal": False,
        "next_attempt_at": deadline,
        "lease_expires_at": None,
        "last_error_code": None,
        "accepted_at": NOW,
        "confirmation_deadline_at": deadline,
    }
    soon = proposal(state=S.APPLYING, expires_at=NOW + timedelta(minutes=5))
    assert D.receipt(soon, receipt("accepted"), NOW).values["confirmation_deadline_at"] == NOW + timedelta(minutes=5)


def test_a_second_accepted_keeps_the_first_acceptance_and_deadline():
    """RCPT-2: the deadline is set once."""
    first, deadline = NOW - timedelta(minutes=5), NOW + timedelta(minutes=10)
    d = proposal(accepted_at=first, confirmation_deadline_at=deadline, delivery_attempt_count=1)
    change = D.receipt(d, receipt("accepted"), NOW)
    assert (change.values["accepted_at"], change.values["confirmation_deadline_at"]) == (first, deadline)


def test_failed_receipt_terminal_unless_told_otherwise():
    """RCPT-2: failed is terminal unless terminal: false and attempts are left."""
    d = proposal(state=S.APPLYING, delivery_attempt_count=1)
    terminal = D.receipt(d, receipt("failed"), NOW)
    assert terminal.move == Move.RECEIPT_FAILED and terminal.terminal
    assert terminal.values["last_error_code"] == "action_provider_failed"
    assert "accepted_at" not in terminal.values
    later = D.receipt(d, receipt("failed", terminal=False, retry_after=45), NOW)
    assert not later.terminal
    assert later.values["next_attempt_at"] == NOW + timedelta(seconds=45)
    assert later.values["accepted_at"] is None and later.values["confirmation_deadline_at"] is None
    used_up = proposal(state=S.APPLYING, delivery_attempt_count=8)
    assert D.receipt(used_up, receipt("failed", terminal=False), NOW).terminal
    seven = proposal(state=S.APPLYING, delivery_attempt_count=7)
    assert not D.receipt(seven, receipt("failed", terminal=False), NOW).terminal


def test_synchronous_receipt_needs_the_held_lease():
    """DLV-5: the write is guarded by the attempt, cycle and lease the worker holds."""
    d = proposal(state=S.APPLYING, delivery_attempt_count=2)
    change = D.receipt(d, receipt("applied"), NOW, LEASE)
    assert change.expect["state"] == S.APPLYING
    assert (change.expect["delivery_attempt_count"], change.expect["lease_expires_at"]) == (3, LEASE.expires_at)
    assert change.expect["delivery_cycle"] == 1
    moved_on = proposal(state=S.QUEUED, delivery_attempt_count=3, delivery_cycle=2)  # the row as read now
    guarded = D.receipt(moved_on, receipt("applied"), NOW, LEASE).expect
    assert (guarded["state"], guarded["delivery_cycle"]) == (S.APPLYING, 1)  # what the worker held
    async_change = D.receipt(proposal(state=S.FAILED, delivery_attempt_count=2), receipt("applied"), NOW)
    assert "lease_expires_at" not in async_change.expect and async_change.expect["state"] == S.FAILED


def test_late_results():
    """API-4, EDGE-5: replays, results for proposals awaiting none, expired corrections."""
    waiting = proposal(accepted_at=NOW, delivery_attempt_count=1)
    assert D.late_result_check(waiting, "applied", NOW) is None
    assert D.late_result_check(replace(waiting, state=S.APPLYING), "failed", NOW) is None
    assert D.late_result_check(replace(waiting, state=S.FAILED), "applied", NOW) is None
    applied = proposal(state=S.APPLIED, delivery_terminal=True, delivery_attempt_count=1)
    assert D.late_result_check(applied, "applied", NOW) == D.REPLAY
    assert D.late_result_check(applied, "failed", NOW) == "action_result_terminal"
    assert D.late_result_check(replace(applied, state=S.COMPENSATION_REQUIRED), "applied", NOW) == D.REPLAY
    assert D.late_result_check(replace(applied, state=S.COMPENSATION_REQUIRED), "failed", NOW) == (
        "action_result_terminal"
    )
    failed = proposal(state=S.FAILED, delivery_terminal=True, delivery_attempt_count=1)
    assert D.late_result_check(failed, "failed", NOW) == D.REPLAY
    assert D.late_result_check(failed, "applied", NOW) == "action_result_terminal"
    assert D.late_result_check(replace(waiting, state=S.FAILED, delivery_terminal=False), "failed", NOW) is None
    assert D.late_result_check(proposal(state=S.APPROVAL_REQUIRED), "applied", NOW) == "action_result_terminal"
    nothing_sent = proposal(delivery_attempt_count=2, cycle_start_attempt=2)
    assert D.late_result_check(nothing_sent, "applied", NOW) == "action_result_terminal"
    correction = replace(waiting, is_correction=True)
    assert D.late_result_check(correction, "applied", NOW) is None
    assert D.late_result_check(replace(correction, expires_at=NOW), "applied", NOW) == "action_result_conflict"
    assert D.late_result_check(replace(waiting, expires_at=NOW), "applied", NOW) is None


def test_after_result():
    """DLV-7: resolve the run when applied or failed for good, else schedule."""
    assert D.after_result(proposal(state=S.APPLIED)) == "resolve"
    assert D.after_result(proposal(state=S.FAILED, delivery_terminal=True)) == "resolve"
    assert D.after_result(proposal(state=S.FAILED)) == "schedule"
    assert D.after_result(proposal(state=S.QUEUED, accepted_at=NOW)) == "schedule"


# -- waits, timeouts (WAIT-2, EDGE-3, EVT-3) --------------------------------------------


@pytest.mark.parametrize(
    "fields, move",
    [
        ({"state": S.APPROVAL_REQUIRED}, Move.WAIT_TIMED_OUT_UNSENT),
        ({"state": S.APPROVED}, Move.WAIT_TIMED_OUT_UNSENT),
        ({"state": S.QUEUED}, Move.WAIT_TIMED_OUT_UNSENT),
        ({"state": S.FAILED}, Move.WAIT_TIMED_OUT_UNSENT),
        ({"state": S.QUEUED, "accepted_at": NOW}, Move.WAIT_TIMED_OUT_SENT),
        ({"state": S.APPLYING}, Move.WAIT_TIMED_OUT_SENT),
    ],
)
def test_timeout_cancels_what_was_never_sent_and_fails_what_may_have_been(fields, move):
    """WAIT-2, EDGE-3: decided from the row the write is guarded on."""
    d = proposal(delivery_attempt_count=2, **fields)
    change = D.time_out(d)
    assert change.move == move
    assert change.values == {
        "delivery_terminal": True,
        "lease_expires_at": None,
        "last_error_code": "action_confirmation_timed_out",
    }
    assert change.expect == {
        "state": d.state,
        "delivery_terminal": False,
        "delivery_cycle": 1,
        "accepted_at": d.accepted_at,
        "delivery_attempt_count": 2,
    }


@pytest.mark.parametrize(
    "fields",
    [
        {"state": S.APPLIED},
        {"state": S.REJECTED},
        {"state": S.CANCELLED},
        {"state": S.COMPENSATION_REQUIRED},
        {"state": S.FAILED, "delivery_terminal": True},
    ],
)
def test_timeout_leaves_an_ended_proposal_alone(fields):
    """EDGE-3: a receipt that won the race keeps its outcome."""
    assert D.time_out(proposal(**fields)) is None


def test_confirmation_timeout():
    """RCPT-2, EVT-3: an accepted action past its deadline fails."""
    due = proposal(accepted_at=NOW - timedelta(minutes=15), confirmation_deadline_at=NOW)
    change = D.confirmation_timeout(due, NOW)
    assert change.move == Move.CONFIRMATION_TIMED_OUT and change.terminal
    assert change.values == {
        "delivery_terminal": True,
        "lease_expires_at": None,
        "last_error_code": "action_confirmation_timed_out",
    }
    assert change.expect["confirmation_deadline_at"] == NOW and change.expect["accepted_at"] == due.accepted_at
    assert D.confirmation_timeout(replace(due, confirmation_deadline_at=NOW + timedelta(seconds=1)), NOW) is None
    assert D.confirmation_timeout(replace(due, confirmation_deadline_at=None), NOW) is None
    assert D.confirmation_timeout(replace(due, accepted_at=None), NOW) is None
    assert D.confirmation_timeout(replace(due, state=S.APPLYING), NOW) is None
    assert D.confirmation_timeout(replace(due, delivery_terminal=True), NOW) is None


# -- approval, retry, compensation (APPR-3, RTRY, COMP) -----------------------------------


def test_decision_refusals():
    """APPR-3: not awaiting approval, digest mismatch, authorization expired."""
    waiting = proposal(state=S.APPROVAL_REQUIRED)
    assert D.decision_refusal(waiting, "sha256:d", NOW) is None
    assert D.decision_refusal(replace(waiting, state=S.APPROVED), "sha256:x", NOW) == "action_not_awaiting_approval"
    assert D.decision_refusal(waiting, "sha256:x", NOW) == "action_approval_digest_mismatch"
    assert D.decision_refusal(replace(waiting, expires_at=NOW), "sha256:d", NOW) == "action_approval_changed"


def test_decide_and_enqueue():
    """APPR-5: approve or reject from approval_required; approved goes to delivery, due now."""
    assert D.decide("approved") == D.Change(Move.APPROVE, {}, {"state": S.APPROVAL_REQUIRED})
    assert D.decide("rejected").move == Move.REJECT
    change = D.enqueue_approved(NOW)
    assert change.move == Move.ENQUEUE_APPROVED and change.expect == {}
    assert change.values == {
        "next_attempt_at": NOW,
        "lease_expires_at": None,
        "last_error_code": None,
        "delivery_terminal": False,
    }


def test_retry_refusals():
    """RTRY-1: digest, terminal failure, unexpired authorization."""
    failed = proposal(state=S.FAILED, delivery_terminal=True)
    assert D.retry_refusal(failed, "sha256:d", NOW) is None
    assert D.retry_refusal(failed, "sha256:x", NOW) == "action_retry_digest_mismatch"
    assert D.retry_refusal(replace(failed, delivery_terminal=False), "sha256:d", NOW) == "action_not_retryable"
    assert D.retry_refusal(replace(failed, state=S.APPLIED), "sha256:d", NOW) == "action_not_retryable"
    assert D.retry_refusal(replace(failed, expires_at=NOW), "sha256:d", NOW) == "action_approval_expired"


def test_retry_starts_a_new_cycle():
    """RTRY-2: cycle + 1, its own 8 attempts, acceptance cleared, due now."""
    failed = proposal(state=S.FAILED, delivery_terminal=True, delivery_attempt_count=8, delivery_cycle=1)
    change = D.retry(failed, NOW)
    assert change.move == Move.OPERATOR_RETRY
    assert change.values == {
        "delivery_terminal": False,
        "cycle_start_attempt": 8,
        "delivery_cycle": 2,
        "accepted_at": None,
        "confirmation_deadline_at": None,
        "next_attempt_at": NOW,
        "lease_expires_at": None,
        "last_error_code": None,
    }
    assert change.expect == {"delivery_terminal": True, "delivery_cycle": 1, "delivery_attempt_count": 8}


def test_compensation():
    """COMP-1, COMP-3: only applied actions; the first compensation marks it."""
    assert D.compensation_refusal(proposal(state=S.APPLIED)) is None
    assert D.compensation_refusal(proposal(state=S.COMPENSATION_REQUIRED)) is None
    assert D.compensation_refusal(proposal(state=S.FAILED)) == "action_compensation_unavailable"
    assert D.mark_compensated(proposal(state=S.APPLIED)) == D.Change(Move.COMPENSATE, {}, {"state": S.APPLIED})
    assert D.mark_compensated(proposal(state=S.COMPENSATION_REQUIRED)) is None


# -- DLV-1, DLV-4 (issue 14): the lease outlasts the whole request ----------------------


def test_the_longest_request_takes_four_fifths_of_the_lease():
    """DLV-1: a 120 s connection fits in a fresh 150 s lease, with 30 s left to record."""
    from app.domain.states import LEASE_SECONDS, MAX_TIMEOUT_SECONDS

    assert D.request_timeout(MAX_TIMEOUT_SECONDS, LEASE_SECONDS, LEASE_SECONDS) == MAX_TIMEOUT_SECONDS
    assert D.request_timeout(900, LEASE_SECONDS, LEASE_SECONDS) == MAX_TIMEOUT_SECONDS
    assert D.request_timeout(30, LEASE_SECONDS, LEASE_SECONDS) == 30


@pytest.mark.parametrize(
    "timeout, lease, left, expected",
    [
        (5, 3, 3, 2.4),  # a short lease clamps the connection's timeout
        (30, 150, 40, 10),  # checks took long: the request gets what is left, less the reserve
        (30, 150, 30, None),  # only the reserve is left: nothing is sent
        (30, 150, -5, None),  # already expired
    ],
)
def test_a_request_never_outlives_its_lease(timeout, lease, left, expected):
    """DLV-1, DLV-4: the request ends before the lease less its last fifth."""
    result = D.request_timeout(timeout, lease, left)
    assert result == pytest.approx(expected) if expected is not None else result is None
    if result is not None:
        assert result <= left - lease / 5 + 1e-9


@pytest.mark.parametrize(
    "timeout, lease, left, may_send",
    [
        (30, 150, 150, True),  # a fresh lease: a whole 30 s request fits
        (30, 150, 60.0, True),  # exactly the request plus the reserve is left
        (30, 150, 59.9, False),  # a little less: released, not sent with a shorter timeout
        (120, 150, 149.9, False),  # the longest connection fits only a fresh lease
        (120, 150, 150, True),
        (5, 3, 3, True),  # a short lease: the whole request is its four fifths
        (5, 3, 2.99, False),
        (900, 300, 300, True),  # a longer lease: the whole request is still at most 120 s
        (900, 300, 179.9, False),
        (30, 150, -1, False),  # expired
    ],
)
def test_a_batch_member_goes_only_while_a_whole_request_fits(timeout, lease, left, may_send):
    """DLV-1, DLV-4: the proposals of one batch share a lease and go one after the
    other; the next goes only while the connection's whole timeout still fits before
    the lease's last fifth."""
    assert D.batch_member_may_send(timeout, lease, left) is may_send


def test_the_rest_of_a_batch_waits_as_long_as_a_retryable_failure():
    """DLV-1, DLV-6: after a retryable failure the released members wait its base
    delay; after a terminal one (that proposal's own) they go at once."""
    assert D.released_delay(True, 30) == 30
    assert D.released_delay(True, 0.5) == 0.5
    assert D.released_delay(True, -3) == 0
    assert D.released_delay(False, 30) == 0


def test_the_lease_setting_must_outlast_the_longest_connection(monkeypatch):
    """DLV-1: DELIVERY_LEASE_SECONDS shorter than 150 s (120 s of request, a fifth
    kept for recording) is refused at start; 150 s and longer are fine."""
    from app.config import delivery_lease_seconds

    monkeypatch.delenv("DELIVERY_LEASE_SECONDS", raising=False)
    assert delivery_lease_seconds() == 150
    monkeypatch.setenv("DELIVERY_LEASE_SECONDS", "300")
    assert delivery_lease_seconds() == 300
    monkeypatch.setenv("DELIVERY_LEASE_SECONDS", "149")
    with pytest.raises(ValueError, match="at least 150"):
        delivery_lease_seconds()


def test_sendable_and_awaits_decision_at_their_boundaries():
    """DLV-1, CONN-1, TEMP-4: sendable whatever its due time, not accepted, attempts
    left, past its not_before; APPR-3: decidable until its authorization expires."""
    base = D.Delivery(state=S.QUEUED, expires_at=NOW + timedelta(hours=1), next_attempt_at=NOW + timedelta(hours=1))
    assert D.is_sendable(base, NOW) and D.is_sendable(replace(base, state=S.FAILED), NOW)
    assert D.is_sendable(replace(base, not_before=NOW), NOW)
    assert not D.is_sendable(replace(base, not_before=NOW + timedelta(seconds=1)), NOW)
    assert not D.is_sendable(replace(base, accepted_at=NOW), NOW)
    assert not D.is_sendable(replace(base, delivery_terminal=True), NOW)
    assert not D.is_sendable(replace(base, state=S.APPLYING), NOW)
    assert D.is_sendable(replace(base, delivery_attempt_count=7), NOW)
    assert not D.is_sendable(replace(base, delivery_attempt_count=8), NOW)
    waiting = replace(base, state=S.APPROVAL_REQUIRED)
    assert D.awaits_decision(waiting, NOW) and not D.awaits_decision(waiting, NOW + timedelta(hours=1))
    assert not D.awaits_decision(base, NOW)
    leased = replace(base, state=S.APPLYING, lease_expires_at=NOW)
    assert D.lease_expired(leased, NOW) and not D.lease_expired(replace(leased, delivery_terminal=True), NOW)
    assert not D.lease_expired(replace(leased, lease_expires_at=None), NOW)
    assert not D.lease_expired(replace(leased, lease_expires_at=NOW + timedelta(seconds=1)), NOW)
    assert D.is_claimable(leased, NOW) and not D.is_claimable(base, NOW)


@pytest.mark.parametrize(
    "timeout, lease, left, expected",
    [
        (30, 150, 30.5, 0.5),  # half a second left after the reserve: it still goes
        (900, 1000, 1000, 120),  # a long lease never lets a request run past 120 s
    ],
)
def test_dlv4_a_request_gets_at_least_half_a_second_and_at_most_120(timeout, lease, left, expected):
    """DLV-1, DLV-4: half a second of room is enough to send; 120 s is the longest request."""
    assert D.request_timeout(timeout, lease, left) == pytest.approx(expected)


def test_temp4_a_proposal_is_due_at_its_not_before():
    """TEMP-4, DLV-1: at exactly its not_before it is due, a second before it is not."""
    assert D.is_due(proposal(not_before=NOW), NOW)
    assert not D.is_due(proposal(not_before=NOW + timedelta(seconds=1)), NOW)


def test_dlv3_a_deferral_queues_again_without_using_the_attempt():
    """DLV-3, CONN-1: a claimed attempt that sent nothing is deferred: queued again, due
    after the delay as given, its attempt given back, the reason kept; the write is
    guarded by the lease held."""
    d = proposal(state=S.APPLYING, delivery_attempt_count=3)
    change = D.failure(d, LEASE, code="budget_exhausted", retryable=True, delay_seconds=40, now=NOW, deferred=True)
    assert change == D.Change(
        Move.DELIVERY_DEFERRED,
        {
            "delivery_terminal": False,
            "next_attempt_at": NOW + timedelta(seconds=40),
            "lease_expires_at": None,
            "last_error_code": "budget_exhausted",
            "delivery_attempt_count": 2,
        },
        {
            "delivery_terminal": False,
            "delivery_attempt_count": 3,
            "delivery_cycle": 1,
            "lease_expires_at": LEASE.expires_at,
        },
        40,
    )
    written = D.write(replace(d, lease_expires_at=LEASE.expires_at), change)
    assert (written.state, written.delivery_attempt_count, written.last_error_code) == (S.QUEUED, 2, "budget_exhausted")


def test_dlv6_a_failure_that_sent_nothing_and_cannot_be_retried_is_terminal_without_an_attempt():
    """DLV-6, DLV-3: not retryable, it fails for good; nothing was sent, so the attempt
    is given back and the delay is not multiplied."""
    d = proposal(state=S.APPLYING, delivery_attempt_count=3)
    change = D.failure(d, LEASE, code="x", retryable=False, delay_seconds=40, now=NOW, deferred=True)
    assert change.move == Move.DELIVERY_FAILED and change.terminal and change.delay_seconds is None
    assert change.values["delivery_attempt_count"] == 2
    assert change.values["next_attempt_at"] == NOW + timedelta(seconds=40)


def test_conn2_a_rate_limited_failure_waits_no_longer_than_the_pause():
    """CONN-2, DLV-6: the backoff is capped by the pause's bound, so the proposal that got
    the 429 resumes with the others; a cap above the backoff changes nothing."""
    d = proposal(state=S.APPLYING, delivery_attempt_count=3)
    capped = D.failure(d, LEASE, code="platform_rate_limited", retryable=True, delay_seconds=15, now=NOW,
                       max_delay_seconds=45)
    assert capped.delay_seconds == 45 and capped.values["next_attempt_at"] == NOW + timedelta(seconds=45)
    uncapped = D.failure(d, LEASE, code="x", retryable=True, delay_seconds=15, now=NOW, max_delay_seconds=600)
    assert uncapped.delay_seconds == 60
    assert "delivery_attempt_count" not in uncapped.values  # sent: the attempt counts


@pytest.mark.parametrize(
    "cancelled, attempt, move, state, terminal, code",
    [
        (False, 3, Move.DELIVERY_DEFERRED, S.QUEUED, False, "bulk_batch_paused"),
        (True, 3, Move.BULK_CANCEL_SENT, S.FAILED, True, "bulk_batch_cancelled"),
        (True, 1, Move.DELIVERY_DEFERRED, S.QUEUED, False, "bulk_batch_cancelled"),
    ],
    ids=["paused-held", "cancelled-sent-before", "cancelled-never-sent"],
)
def test_bulk_7_a_claimed_item_of_a_stopped_batch_is_released_unsent(cancelled, attempt, move, state, terminal, code):
    """BULK-7: a claimed bulk item whose batch is paused is held (queued, no due time);
    cancelled, it fails for good when sent before, else waits to be cancelled; its
    attempt is given back in every case; the write is guarded by the lease."""
    lease = D.Lease(attempt, 1, NOW + timedelta(seconds=150))
    d = proposal(state=S.APPLYING, delivery_attempt_count=attempt, lease_expires_at=lease.expires_at)
    change = D.bulk_stopped(d, lease, cancelled=cancelled)
    assert change.move == move and change.terminal is terminal
    assert change.values["delivery_attempt_count"] == attempt - 1
    assert change.values["next_attempt_at"] is None and change.values["last_error_code"] == code
    written = D.write(d, change)
    assert written.state == state and written.lease_expires_at is None
    assert D.write(replace(d, lease_expires_at=NOW), change) is None  # another lease: nothing written
