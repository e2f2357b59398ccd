"""Due deliveries of a connection in trouble, held back before they are claimed
(SPEC CONN-1..3).

The cheap path for the thousands of due deliveries of a platform in trouble: one
read, and when the connection is open, paused, disabled or probing, one guarded
move (`Move.HOLD_QUEUED` / `Move.HOLD_FAILED`: the proposal keeps its state) that
makes it due at the end of the wait. The claim's own check (`breaker.admit`) still
decides every delivery that gets through (a race, the probe, the rate limit). A hold
or deferral that committed as its connection closed is made due again at once
(`release_if_recovered`).
"""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import select, update

from app.domain import connection_health as health_rules
from app.domain.clock import utcnow
from app.domain.connection_health import HEALTH_FIELDS, Health
from app.domain.proposal.delivery import Delivery, hold
from app.metrics import record_connection_wait
from app.models import ActionProposal, ComponentVersion, ConnectionHealth, ConnectionVersion, predicates
from app.models.proposals import move_proposal
from app.services.lifecycle.breaker import PROBE_LEASE_MARGIN_SECONDS
from app.services.lifecycle.proposals import guard
from app.services.uow import unit_of_work

P = ActionProposal
# what `hold` reads of the proposal, besides its state
DELIVERY_COLUMNS = (
    "expires_at",
    "delivery_terminal",
    "next_attempt_at",
    "accepted_at",
    "delivery_cycle",
    "delivery_attempt_count",
)


def _with_health(*columns):
    """SELECT `columns` of proposals joined to their connection's health row (a
    connection without one was never in trouble and is left out)."""
    return (
        select(*columns, ConnectionHealth.connection_id, *(getattr(ConnectionHealth, c) for c in HEALTH_FIELDS))
        .join(ComponentVersion, ComponentVersion.id == P.component_version_id)
        .join(ConnectionVersion, ConnectionVersion.id == ComponentVersion.connection_version_id)
        .join(ConnectionHealth, ConnectionHealth.connection_id == ConnectionVersion.connection_id)
    )


def _read(session, proposal_id: str):
    """The proposal's delivery columns, its connection's timeout and health row, or
    None when the connection has no health row (never in trouble: the hot path)."""
    return session.execute(
        _with_health(
            P.state.label("proposal_state"),  # the health row has a ``state`` too
            *(getattr(P, c) for c in DELIVERY_COLUMNS),
            ConnectionVersion.timeout_seconds,
        ).where(P.id == proposal_id)
    ).first()


def hold_before_claim(proposal_id: str, now: datetime | None = None) -> str | None:
    """Defer a due delivery whose connection holds it back, before it is claimed
    (CONN-1..3).

    Nothing is claimed, so no attempt is used, nothing is sent and the proposal keeps
    its state (the wait shows as its ``last_error_code``); its delivery job is
    enqueued again for the end of the wait. The move is guarded on the proposal as
    read (`app.domain.proposal.delivery.hold`) and on the health row's version, so a
    breaker that closed meanwhile (and released its deliveries) wins.

    Args:
        proposal_id: a proposal whose delivery job is running.
        now: the time to judge by (aware UTC); defaults to now.

    Returns:
        The wait code when the delivery was deferred, else None (claim it as usual).
    """
    from app.extensions import db
    from app.queueing import enqueue_delivery

    now = now or utcnow()
    db.session.rollback()  # a fresh read, and no write lock taken for it (SQLite)
    try:
        row = _read(db.session, proposal_id)
    finally:
        db.session.rollback()
    if row is None:
        return None
    health = Health(**{c: getattr(row, c) for c in HEALTH_FIELDS})
    admission = health_rules.admit(health, now, row.timeout_seconds + PROBE_LEASE_MARGIN_SECONDS)
    if admission.send:
        return None
    delivery = Delivery(state=row.proposal_state, **{c: getattr(row, c) for c in DELIVERY_COLUMNS})
    change = hold(delivery, now, code=admission.wait_code, until=admission.wait_until)
    if change is None:
        return None
    with unit_of_work() as uow:
        health_unchanged = (
            select(ConnectionHealth.connection_id)
            .where(ConnectionHealth.connection_id == row.connection_id, ConnectionHealth.version == health.version)
            .exists()
        )
        where = (*guard(change), health_unchanged)
        if not move_proposal(uow.session, proposal_id, change.move, where=where, values=change.values):
            return None
        cycle, count = delivery.delivery_cycle, delivery.delivery_attempt_count
        tag = f"w{int(admission.wait_until.timestamp() * 1000)}"
        uow.after_commit(lambda: enqueue_delivery(proposal_id, cycle, count, change.delay_seconds, tag=tag))
        uow.commit()
    record_connection_wait(row.connection_id, admission.wait_code)
    release_if_recovered([proposal_id])  # the connection closed as this hold committed (issue 24)
    return admission.wait_code


# The waits a recovered connection ends; a rate-limit deferral keeps its slot's time (CONN-2).
RECOVERY_ENDS = health_rules.WAIT_CODES - {health_rules.WAIT_RATE_LIMITED}


def release_if_recovered(proposal_ids: list[str], now: datetime | None = None) -> int:
    """After a hold or deferral of these proposals committed, look at their
    connections again: those that no longer hold deliveries back (closed, not paused,
    not disabled) make their proposals due now and enqueue them (CONN-1..3, issue 24).

    The hold decided on the connection as read; if it closed meanwhile, its release
    (`connection_recovery.release_held`) may have run before this hold committed and
    not seen it. Only the proposals' own waits for their connection
    (`RECOVERY_ENDS`) are ended, guarded on the row (still waiting, still later):
    a claim or another release that came first wins.

    Args:
        proposal_ids: proposals this job just held or deferred for their connection.
        now: the time to judge by (aware UTC); defaults to now.

    Returns:
        How many were made due now.
    """
    from app.extensions import db
    from app.queueing import enqueue_delivery

    if not proposal_ids:
        return 0
    now = now or utcnow()
    db.session.rollback()  # read what committed since
    try:
        rows = db.session.execute(_with_health(P.id).where(P.id.in_(proposal_ids))).all()
    finally:
        db.session.rollback()
    healths = {row.id: Health(**{c: getattr(row, c) for c in HEALTH_FIELDS}) for row in rows}
    recovered = [pid for pid, health in healths.items() if not health_rules.holds_back(health, now)]
    if not recovered:
        return 0
    with unit_of_work() as uow:
        released = uow.session.execute(
            update(P)
            .where(
                P.id.in_(recovered),
                predicates.sendable(now),
                P.last_error_code.in_(sorted(RECOVERY_ENDS)),
                P.next_attempt_at > now,
            )
            .values(next_attempt_at=now)
            .returning(P.id, P.delivery_cycle, P.delivery_attempt_count)
            .execution_options(synchronize_session=False)
        ).all()
        jobs = [tuple(row) for row in released]
        tag = f"r{int(now.timestamp() * 1000)}"
        uow.after_commit(lambda: [enqueue_delivery(pid, cycle, count, tag=tag) for pid, cycle, count in jobs])
        uow.commit()
    return len(jobs)
