"""A connection's recovery: the half-open probe sent when it is due, and the
deliveries it held woken at once when it closes (SPEC CONN-1, OPS-7).

When the breaker opens (or opens again after a failed probe), a probe job is
scheduled in RQ for the probe's due time (`schedule_probe`; the workers run RQ's
scheduler). The job (`probes.probe_when_due`) makes the connection's longest-waiting
delivery due and delivers it: the claim's own check (`breaker.admit`)
takes the probe with a write guarded on the health row's version, so the job run
twice, early, or after the breaker closed sends at most the one probe. The sweep
schedules it again for a connection whose probe is overdue (a job lost with Redis).

When the breaker closes or an admin re-enables the endpoint, `release_held` makes
every delivery the connection held back due now: those that waited for it, and
those whose own backoff followed a failure of the outage, so a recovered platform
is delivered to within one probe interval, not at each proposal's next retry.

A hold decided on the connection as read before it closed may commit after the
close's release: it would wait its whole wait (a probe's lease is the request's
timeout and 10 s more). Two looks close that gap (issue 24): the close releases once
more after its commit (`release_again_after_commit`), and a hold or deferral looks
at the connection again after its own commit (`connection_holds.release_if_recovered`).
Whichever commits last sees the other.
"""

from __future__ import annotations

import logging
from datetime import datetime

from sqlalchemy import and_, case, or_, select, update

from app.domain import connection_health as health_rules
from app.domain.clock import utcnow
from app.domain.proposal.delivery import BATCH_RELEASED
from app.models import ActionProposal, ComponentVersion, ConnectionHealth, ConnectionVersion, predicates
from app.services.uow import UnitOfWork, unit_of_work

log = logging.getLogger(__name__)
P = ActionProposal
ENDPOINT_GONE = "platform_endpoint_gone"
# The failures of a platform that is down (they count for the breaker, CONN-1): a
# proposal waiting on its own backoff after one of them is woken with the others.
OUTAGE_CODES = frozenset(
    {
        "connection_failed",
        "connection_timeout",
        "platform_server_error",
        "platform_request_timeout",
        "tls_certificate_invalid",
        "tls_handshake_failed",
    }
)
RELEASED_CODES = health_rules.WAIT_CODES | OUTAGE_CODES | {ENDPOINT_GONE, BATCH_RELEASED}


def _components_of(connection_id: str):
    return (
        select(ComponentVersion.id)
        .join(ConnectionVersion, ConnectionVersion.id == ComponentVersion.connection_version_id)
        .where(ConnectionVersion.connection_id == connection_id)
    )


def _sendable(now: datetime) -> tuple:
    """A delivery waiting to be sent: not terminal, not accepted, attempts left in
    its cycle, not scheduled for later (TEMP-4)."""
    return (predicates.sendable(now),)


def waiting_for(connection_id: str, now: datetime) -> tuple:
    """A delivery of the connection waiting to be sent (`_sendable`)."""
    return (*_sendable(now), P.component_version_id.in_(_components_of(connection_id)))


def release_held(uow: UnitOfWork, connection_id: str) -> int:
    """Make every delivery the connection held back due now, and enqueue them after
    commit: the breaker closed, or the endpoint was re-enabled (CONN-1, CONN-3, OPS-7).

    Only the waiting time changes (no state move): waiting deliveries of the
    connection whose last error is one of its wait codes, a batch release, a 410 or
    a failure of the outage (`RELEASED_CODES`); a platform's own "retry later"
    (a receipt's ``retry_after_seconds``) is kept.

    Returns:
        How many deliveries were released.
    """
    from app.queueing import enqueue_delivery

    now = utcnow()
    released = uow.session.execute(
        update(P)
        .where(*waiting_for(connection_id, now), P.last_error_code.in_(sorted(RELEASED_CODES)), P.next_attempt_at > now)
        .values(next_attempt_at=now)
        .returning(P.id, P.delivery_cycle, P.delivery_attempt_count)
        .execution_options(synchronize_session=False)
    ).all()
    jobs = [tuple(row) for row in released]
    tag = f"r{int(now.timestamp() * 1000)}"
    uow.after_commit(lambda: [enqueue_delivery(pid, cycle, count, tag=tag) for pid, cycle, count in jobs])
    return len(jobs)


def release_again_after_commit(uow: UnitOfWork, connection_id: str) -> None:
    """Once the close (or re-enabling) committed, release the connection's held
    deliveries once more, in a transaction of its own (CONN-1, CONN-3; issue 24).

    A hold or deferral that read the connection before it closed and committed after
    `release_held`'s UPDATE is not seen by it (its row was still due then); this
    second look, after the close's commit, sees it, so it does not wait out its
    whole wait.
    """

    def again() -> None:
        with unit_of_work() as later:
            release_held(later, connection_id)
            later.commit()

    uow.after_commit(again)


def schedule_probe(uow: UnitOfWork, connection_id: str, at: datetime) -> None:
    """Schedule the connection's probe job for `at` (UTC), after commit (OPS-7)."""
    from app.queueing import enqueue_probe

    uow.after_commit(lambda: enqueue_probe(connection_id, at))


def probe_due(health: health_rules.Health, now: datetime) -> bool:
    """Whether the connection's probe may go now: open past its probe time, or
    half-open with an expired probe lease; not disabled, not paused (CONN-1)."""
    if health.disabled or (health.paused_until is not None and health.paused_until > now):
        return False
    if health.state == health_rules.OPEN:
        return health.next_probe_at is None or health.next_probe_at <= now
    if health.state == health_rules.HALF_OPEN:
        return health.probe_lease_expires_at is None or health.probe_lease_expires_at <= now
    return False


def overdue_probes(session, now: datetime) -> list[tuple[str, datetime]]:
    """(connection id, the probe's due time) of each connection whose probe is due
    and that holds a delivery back: the sweep schedules its probe job again (the one
    scheduled when the breaker opened may have been lost with Redis)."""
    H = ConnectionHealth
    due_at = case((H.state == health_rules.OPEN, H.next_probe_at), else_=H.probe_lease_expires_at)
    holds_one = (
        select(P.id)
        .join(ComponentVersion, ComponentVersion.id == P.component_version_id)
        .join(ConnectionVersion, ConnectionVersion.id == ComponentVersion.connection_version_id)
        .where(ConnectionVersion.connection_id == H.connection_id, *_sendable(now))
        .exists()
    )
    return [
        (row.connection_id, row.due_at)
        for row in session.execute(
            select(H.connection_id, due_at.label("due_at")).where(
                H.disabled_at.is_(None),
                or_(H.paused_until.is_(None), H.paused_until <= now),
                or_(
                    and_(H.state == health_rules.OPEN, H.next_probe_at <= now),
                    and_(H.state == health_rules.HALF_OPEN, H.probe_lease_expires_at <= now),
                ),
                holds_one,
            )
        )
    ]
