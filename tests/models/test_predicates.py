"""Every named proposal predicate and its SQL twin agree (DLV-1, DLV-7, COMP-1, RTRY-1).

One row per combination of state and flags (delivery_terminal; next_attempt_at, lease
and not_before absent, past or future; attempts used in the cycle; accepted or not) is
inserted, each SQL expression of `app.models.predicates` is evaluated by the database,
and the rows it selects must be exactly those the Python predicate accepts. Runs on
SQLite by default and on PostgreSQL with TEST_DATABASE_URL.
"""

from __future__ import annotations

import itertools
from datetime import timedelta

import pytest
from sqlalchemy import insert, select

from app.domain import states
from app.domain.clock import utcnow
from app.domain.proposal import delivery as rules
from app.extensions import db
from app.domain import approval_policy as pol
from app.models import ActionProposal, ApprovalVote, predicates
from app.services.lifecycle.proposals import delivery_of

from ..builders import decide_report

P = ActionProposal
NOW = utcnow().replace(microsecond=0)
PAST, FUTURE = NOW - timedelta(seconds=5), NOW + timedelta(seconds=60)
TIMES = [None, PAST, FUTURE]

# predicate name -> (Python predicate over a Delivery, its SQL twin)
TWINS = {
    "waiting": (lambda d: states.is_waiting(d.state, d.delivery_terminal), predicates.waiting),
    "effective": (lambda d: states.is_effective(d.state), predicates.effective),
    "dead_letter": (lambda d: states.is_dead_letter(d.state, d.delivery_terminal), predicates.dead_letter),
    "terminal": (lambda d: states.is_terminal(d.state, d.delivery_terminal), predicates.terminal),
    "resolved": (lambda d: states.is_resolved(d.state, d.delivery_terminal), predicates.resolved),
    "has_attempts_left": (
        lambda d: states.has_attempts_left(d.delivery_attempt_count, d.cycle_start_attempt),
        predicates.has_attempts_left,
    ),
    "due": (lambda d: rules.is_due(d, NOW), lambda: predicates.due(NOW)),
    "lease_expired": (lambda d: rules.lease_expired(d, NOW), lambda: predicates.lease_expired(NOW)),
    "claimable": (lambda d: rules.is_claimable(d, NOW), lambda: predicates.claimable(NOW)),
    "sendable": (lambda d: rules.is_sendable(d, NOW), lambda: predicates.sendable(NOW)),
    "awaits_decision": (lambda d: rules.awaits_decision(d, NOW), lambda: predicates.awaits_decision(NOW)),
}


@pytest.fixture
def every_combination(app, world, platform) -> dict[str, rules.Delivery]:
    """One proposal row per combination, copied from a real one; id -> its Delivery."""
    base = decide_report(world)
    row = {c.key: getattr(base, c.key) for c in P.__mapper__.column_attrs}
    combinations = itertools.product(
        states.ProposalState, [False, True], TIMES, TIMES, TIMES, [0, 7, 8], [None, PAST], [PAST, FUTURE]
    )
    rows = []
    for n, (state, terminal, due, lease, not_before, used, accepted, expires) in enumerate(combinations):
        rows.append(
            {
                **row,
                "id": f"{base.id}:{n}",
                "operation_id": f"{base.operation_id}:{n}",
                "state": state.value,
                "delivery_terminal": terminal,
                "next_attempt_at": due,
                "lease_expires_at": lease,
                "not_before": not_before,
                "delivery_attempt_count": used + 2,
                "cycle_start_attempt": 2,
                "accepted_at": accepted,
                "expires_at": expires,
            }
        )
    db.session.execute(insert(P), rows)
    db.session.commit()
    loaded = db.session.scalars(select(P).where(P.id.like(f"{base.id}:%"))).all()
    return {p.id: delivery_of(p) for p in loaded}


def _of(combinations: dict) -> object:
    """The rows of `every_combination` (ids ``{base}:{n}``)."""
    base = next(iter(combinations)).rsplit(":", 1)[0]
    return P.id.like(f"{base}:%")


def test_every_combination_is_there(every_combination):
    """Every combination once (one insert: the predicates below share it)."""
    assert len(every_combination) == len(states.ProposalState) * 2 * 3 * 3 * 3 * 3 * 2 * 2


def test_every_sql_twin_selects_exactly_what_its_python_predicate_accepts(every_combination):
    """§3, DLV-1, DLV-7, COMP-1, RTRY-1, APPR-3: one rule, two spellings, the same rows."""
    mine = _of(every_combination)
    for name, (python, sql) in TWINS.items():
        expected = {pid for pid, d in every_combination.items() if python(d)}
        selected = set(db.session.scalars(select(P.id).where(mine, sql())))
        assert selected == expected, f"{name}: SQL and Python disagree on {sorted(selected ^ expected)[:5]}"
        assert expected, f"{name}: no combination accepts it, so the test proves nothing"
        assert len(expected) < len(every_combination), f"{name}: every combination accepts it"


def test_the_parity_test_covers_every_sql_twin():
    """Each public expression of `app.models.predicates` has its Python predicate here."""
    public = {
        name
        for name, value in vars(predicates).items()
        if callable(value) and getattr(value, "__module__", None) == predicates.__name__ and not name.startswith("_")
    }
    assert public == set(TWINS) | {"attempts_in_cycle", "in_waiting_states", "notice", "counting_vote"}


def test_notice_twins_agree_DSA_4(world):
    """DSA-4: `predicates.notice` selects exactly the proposals `is_notice` calls a
    notice: made by the system for a restriction, never by an operator, and a ``%`` or
    ``_`` in an id is no wildcard."""
    first = decide_report(world)
    table = P.__table__
    row = dict(db.session.execute(select(table).where(table.c.id == first.id)).mappings().one())
    makers = [("system", "notice-of:x"), ("operator", "notice-of:x"), ("system", "notice-ofx"),
              ("system", "run:notice-of:x"), ("system", "notice_of:x"), ("system", "notice-o%")]
    copies = [{**row, "id": f"{first.id}-n{n}", "operation_id": f"{row['operation_id']}-n{n}",
               "created_by_type": kind, "created_by_id": by} for n, (kind, by) in enumerate(makers)]
    db.session.execute(insert(table), copies)
    db.session.commit()
    ids = [c["id"] for c in copies]
    selected = set(db.session.scalars(select(P.id).where(P.id.in_(ids), predicates.notice())))
    expected = {p.id for p in db.session.scalars(select(P).where(P.id.in_(ids))) if p.is_notice}
    assert selected == expected == {ids[0]}


def test_attempts_in_cycle_twins(every_combination):
    """DLV-6, RTRY-2: the attempts used in the cycle, counted by the database."""
    rows = db.session.execute(select(P.id, predicates.attempts_in_cycle()).where(_of(every_combination)))
    counted = dict(rows.all())
    assert counted == {pid: d.attempts_in_cycle for pid, d in every_combination.items()}


def test_the_sets_are_derived_from_the_transition_table():
    """§3: each named set is the table's answer, not a list kept by hand."""
    S, M = states.ProposalState, states.Move
    assert states.WAITING_STATES == {S.QUEUED, S.FAILED}
    assert states.EFFECTIVE_STATES == {S.APPLIED, S.COMPENSATION_REQUIRED} == states.sources(M.COMPENSATE)
    assert states.CANCELLABLE_STATES == {S.APPROVAL_REQUIRED, S.APPROVED, S.QUEUED}
    assert states.DEAD_LETTER_STATES == {S.FAILED}
    assert states.TERMINAL_STATES == {S.APPLIED, S.REJECTED, S.CANCELLED, S.COMPENSATION_REQUIRED}


def test_counting_vote_twins_agree_POL_2(world):
    """POL-2: `predicates.counting_vote` selects exactly the votes `approval_policy.counting`
    counts: bound to the proposal's current payload digest and not expired; a vote on an
    earlier digest, or past its expiry, does not count."""
    proposal = decide_report(world)
    reviewer = world.user("reviewer")
    votes = [
        ApprovalVote(installation_id=world.installation_id, proposal_id=proposal.id, approver_id=reviewer.id,
                     decision="approved", payload_digest=digest, idempotency_key=f"twin-{n}", expires_at=expires)
        for n, (digest, expires) in enumerate(itertools.product([proposal.payload_digest, "sha256:earlier"],
                                                                 [PAST, NOW, FUTURE]))
    ]
    db.session.add_all(votes)
    db.session.commit()
    selected = set(db.session.scalars(
        select(ApprovalVote.id).join(P, P.id == ApprovalVote.proposal_id).where(predicates.counting_vote(NOW))))
    as_domain = [pol.Vote(pol.Approver(v.approver_id, frozenset()), v.decision, v.payload_digest, v.expires_at,
                          v.batch_digest, v.created_at) for v in votes]
    live, _, _ = pol.counting(as_domain, payload_digest=proposal.payload_digest, batch_digest=None, now=NOW)
    expected = {votes[as_domain.index(vote)].id for vote in live}
    assert selected == expected == {votes[2].id}
