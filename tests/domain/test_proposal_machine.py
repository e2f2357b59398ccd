"""Random sequences of everything that can happen to a proposal, against the SPEC's
invariants (DLV-1, DLV-6, RCPT-2, WAIT-2, RTRY-2, COMP-3, APPR-4, EDGE-3).

The machine drives the domain's decisions (`app.domain.proposal.delivery`) the way
the services do: read the row, ask for a `Change`, write it only if the row still
matches (`write`). Workers hold leases that may expire; receipts arrive late and
twice; runs time out; operators retry and compensate. After every step it checks:
terminal states stay terminal, at most 8 counted attempts per cycle, nothing is sent
without a matching approval (human) or room in the budget (bounded_auto), and the
proposal is applied at most once.
"""

from __future__ import annotations

import os
from dataclasses import replace
from datetime import UTC, datetime, timedelta

from hypothesis import HealthCheck, event, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, precondition, rule

from app.domain.proposal import delivery as D
from app.domain.receipts import Receipt
from app.domain.states import MAX_ATTEMPTS_PER_CYCLE, TERMINAL_STATES, Move, ProposalState

S = ProposalState
T0 = datetime(2026, 4, 1, tzinfo=UTC)
DIGEST = "sha256:" + "a" * 64
BUDGET = 5


def a_receipt(status: str, terminal: bool | None, retry_after: int) -> Receipt:
    is_terminal = status == "applied" or (status == "failed" and terminal is not False)
    code = "action_provider_failed" if status == "failed" else None
    return Receipt("act", "op", DIGEST, status, is_terminal, code, retry_after, None)


RECEIPTS = st.builds(
    a_receipt,
    st.sampled_from(["accepted", "applied", "failed"]),
    st.sampled_from([None, True, False]),
    st.integers(1, 21_600),
)
LATE_RECEIPTS = st.builds(
    a_receipt, st.sampled_from(["applied", "failed"]), st.sampled_from([None, True, False]), st.integers(1, 21_600)
)


class ProposalMachine(RuleBasedStateMachine):
    @initialize(mode=st.sampled_from(["human", "bounded_auto"]), lifetime=st.integers(60, 200_000))
    def prepare(self, mode, lifetime):
        self.now = T0
        self.mode = mode
        state = S.APPROVAL_REQUIRED if mode == "human" else S.QUEUED
        self.row = D.Delivery(
            state=state,
            expires_at=T0 + timedelta(seconds=lifetime),
            payload_digest=DIGEST,
            approval_mode=mode,
            next_attempt_at=None if mode == "human" else T0,
        )
        self.approved = False  # an approval row with this digest exists
        self.leases: list[D.Lease] = []  # what workers believe they hold
        self.sent = 0
        self.budget_used = 0
        self.applied_entries = 0
        self.late: Receipt | None = None
        self.previous = self.row

    # -- writes, as the guarded UPDATE does them ------------------------------------

    def write(self, change: D.Change | None) -> bool:
        if change is None:
            return False
        written = D.write(self.row, change)
        if written is None:
            return False
        self.previous, self.row = self.row, written
        if written.state == S.APPLIED and self.previous.state != S.APPLIED:
            self.applied_entries += 1
        event(f"{change.move.value} → {written.state}")
        return True

    # -- people -------------------------------------------------------------------------

    @rule(decision=st.sampled_from(["approved", "approved", "rejected"]), wrong_digest=st.sampled_from([False, True]))
    def review(self, decision, wrong_digest):
        digest = "sha256:other" if wrong_digest else DIGEST
        if D.decision_refusal(self.row, digest, self.now) is None and self.write(D.decide(decision)):
            self.approved = decision == "approved"

    @rule()
    def enqueue(self):
        self.write(D.enqueue_approved(self.now) if self.row.state == S.APPROVED else None)

    @rule()
    def operator_retry(self):
        if D.retry_refusal(self.row, DIGEST, self.now) is None:
            self.write(D.retry(self.row, self.now))

    @rule()
    def compensate(self):
        if D.compensation_refusal(self.row) is None:
            self.write(D.mark_compensated(self.row))

    # -- workers ----------------------------------------------------------------------

    @rule()
    def claim(self):
        before = self.row
        change = D.claim(before, self.now)
        if self.write(change):
            self.leases.append(D.lease_of(change, before))

    def _send(self, lease: D.Lease) -> str | None:
        """The pre-send checks and the request; the error code when nothing was sent."""
        problem = D.pre_send_problem(self.row, self.now)
        if problem is None and D.approval_missing(self.row, self.approved):
            problem = D.APPROVAL_MISSING
        if problem is not None:
            return problem
        if self.row.state != S.APPLYING or self.row.lease_expires_at != lease.expires_at:
            return "stale"  # the worker lost its lease: its writes will not match
        if self.mode == "bounded_auto" and self.budget_used >= BUDGET:
            return "budget_exhausted"
        assert self.now < self.row.expires_at
        assert self.mode == "bounded_auto" or self.approved, "sent without an approval"
        self.budget_used += self.mode == "bounded_auto"
        self.sent += 1
        return None

    @rule(data=st.data(), retryable=st.booleans(), delay=st.sampled_from([1, 15, 400]))
    @precondition(lambda self: self.leases)
    def attempt_fails(self, data, retryable, delay):
        lease = data.draw(st.sampled_from(self.leases))
        problem = self._send(lease)
        deferred = problem == "budget_exhausted"
        code = problem or "platform_server_error"
        change = D.failure(
            self.row,
            lease,
            code=code,
            retryable=retryable if problem in (None, "budget_exhausted", "stale") else False,
            delay_seconds=delay,
            now=self.now,
            deferred=deferred,
        )
        self.write(change)

    @rule(data=st.data(), result=RECEIPTS)
    @precondition(lambda self: self.leases)
    def attempt_answers(self, data, result):
        lease = data.draw(st.sampled_from(self.leases))
        if self._send(lease) is None:
            self.write(D.receipt(self.row, result, self.now, lease))

    # -- the platform, later ------------------------------------------------------------

    @rule(result=LATE_RECEIPTS)
    def late_receipt(self, result):
        self.late = result
        if D.late_result_check(self.row, result.status, self.now) is None:
            self.write(D.receipt(self.row, result, self.now))

    @rule()
    @precondition(lambda self: self.late is not None)
    def duplicated_receipt(self):
        self.late_receipt(self.late)

    # -- time ---------------------------------------------------------------------------

    @rule(seconds=st.integers(0, 100_000))
    def time_passes(self, seconds):
        self.now += timedelta(seconds=seconds)

    @rule()
    @precondition(lambda self: self.row.lease_expires_at is not None)
    def lease_expires(self):
        self.now = max(self.now, self.row.lease_expires_at)

    @rule()
    @precondition(lambda self: self.now >= self.row.expires_at)  # the run's wait ends at the expiry
    def run_times_out(self):
        for _ in range(3):
            change = D.time_out(self.row)
            if change is None or self.write(change):
                break
        assert self.row.terminal, "a timed-out wait leaves the proposal terminal"

    @rule()
    def confirmation_sweep(self):
        self.write(D.confirmation_timeout(self.row, self.now))

    # -- invariants -----------------------------------------------------------------------

    @invariant()
    def terminal_states_stay_terminal(self):
        if self.previous.state in TERMINAL_STATES:
            assert self.row.state in TERMINAL_STATES
            assert self.row.state == self.previous.state or (
                self.previous.state == S.APPLIED and self.row.state == S.COMPENSATION_REQUIRED
            )

    @invariant()
    def at_most_eight_counted_attempts_per_cycle(self):
        assert 0 <= self.row.attempts_in_cycle <= MAX_ATTEMPTS_PER_CYCLE

    @invariant()
    def nothing_sent_beyond_the_budget(self):
        assert self.budget_used <= BUDGET

    @invariant()
    def applied_at_most_once(self):
        assert self.applied_entries <= 1
        if self.row.state == S.APPLIED:
            assert self.row.delivery_terminal and self.row.confirmed_at is not None

    @invariant()
    def an_unapproved_human_proposal_is_never_deliverable(self):
        if self.mode == "human" and not self.approved:
            assert self.row.state in (S.APPROVAL_REQUIRED, S.REJECTED, S.CANCELLED)


ProposalMachine.TestCase.settings = settings(
    max_examples=int(os.environ.get("PROPOSAL_MACHINE_EXAMPLES", "200")),  # the mutation run asks for fewer
    stateful_step_count=50,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much],
)
TestProposalMachine = ProposalMachine.TestCase


def test_a_move_from_a_stale_read_changes_nothing():
    """EDGE-3, DLV-5: the machine's write refuses a change decided on an older row."""
    row = D.Delivery(state=S.QUEUED, expires_at=T0 + timedelta(days=1), next_attempt_at=T0)
    change = D.claim(row, T0)
    moved = D.write(row, change)
    assert moved.state == S.APPLYING and D.write(moved, change) is None
    assert D.write(replace(row, delivery_attempt_count=1), change) is None
    assert change.move == Move.CLAIM
