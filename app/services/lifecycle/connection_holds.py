"""Due deliveries of a connection in trouble, held back before they are claimed
(SPEC CONN-1..3).

The cheap path for the thousands of due deliveries of a platform in trouble: one
read, and when the connection is open, paused, disabled or probing, one guarded
move (`Move.HOLD_QUEUED` / `Move.HOLD_FAILED`: the proposal keeps its state) that
makes it due at the end of the wait. The claim's own check (`breaker.admit`) still
decides every delivery that gets through (a race, the probe, the rate limit).
"""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import select

from app.domain import connection_health as health_rules
from app.domain.clock import utcnow
from app.domain.connection_health import HEALTH_FIELDS, Health
from app.domain.proposal.delivery import Delivery, hold
from app.metrics import record_connection_wait
from app.models import ActionProposal, ComponentVersion, ConnectionHealth, ConnectionVersion
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


def _read(session, proposal_id: str):
    """The proposal's delivery columns, its connection's timeout and health row, or
    None when the connection has no health row (never in trouble: the hot path)."""
    return session.execute(
        select(
            P.state.label("proposal_state"),  # the health row has a ``state`` too
            *(getattr(P, c) for c in DELIVERY_COLUMNS),
            ConnectionVersion.timeout_seconds,
            ConnectionHealth.connection_id,
            *(getattr(ConnectionHealth, c) for c in HEALTH_FIELDS),
        )
        .join(ComponentVersion, ComponentVersion.id == P.component_version_id)
        .join(ConnectionVersion, ConnectionVersion.id == ComponentVersion.connection_version_id)
        .join(ConnectionHealth, ConnectionHealth.connection_id == ConnectionVersion.connection_id)
        .where(P.id == proposal_id)
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
    return admission.wait_code
