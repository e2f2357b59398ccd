"""A connection's circuit breaker, 429 pause and disabling as stored, around each
delivery, and re-enabling (SPEC CONN-1, CONN-2, CONN-3).

The delivery job asks `admit` in its claim's transaction whether the request may
leave (the breaker, then the rate limit's slot: `rate_limit`); a delivery that may
not raises `ConnectionHeld`, which the job records like an exhausted budget:
deferred until the time given, no attempt used, nothing sent. After the request,
`record_success` or `record_failure` writes what it taught about the connection in
the transaction that records the attempt. Due deliveries of a connection in trouble
are held before they are even claimed by `connection_holds`.

The state is the ``connection_health`` row (database), so every worker shares it and
it survives a Redis loss. The rules are pure functions (`app.domain.connection_health`);
each write is one UPDATE guarded on the row's ``version`` as read, so of two workers
deciding on one row only one wins (for the half-open probe: exactly one probe). A
healthy connection's row is read, never written: successes write only when there was
a failure streak to end.
"""

from __future__ import annotations

import logging
from dataclasses import asdict, dataclass
from datetime import datetime

from sqlalchemy import select, update

from app.domain import connection_health as health_rules
from app.domain.clock import utcnow
from app.domain.connection_health import HEALTH_FIELDS, Health, HealthChange, Settings
from app.domain.errors import ActionError, ApiError
from app.metrics import record_connection_transition, record_connection_wait
from app.models import Connection, ConnectionHealth, ConnectionVersion, insert_ignore
from app.services.lifecycle import rate_limit
from app.services.lifecycle.connection_recovery import (
    ENDPOINT_GONE,
    release_again_after_commit,
    release_held,
    schedule_probe,
)
from app.services.uow import Actor, UnitOfWork, unit_of_work

log = logging.getLogger(__name__)
PROBE_LEASE_MARGIN_SECONDS = 10  # a probe may take its timeout and this before another goes
GUARDED_WRITE_TRIES = 8


class ConnectionHeld(ActionError):
    """The connection holds this delivery back (open breaker, probe in flight, 429
    pause, disabled, rate limit): defer until `delay_seconds` from now, nothing sent,
    no attempt used (CONN-1..3)."""

    def __init__(self, code: str, delay_seconds: float) -> None:
        super().__init__(code, retryable=True, delay_seconds=max(0.05, delay_seconds))


class PausedByPlatform(ActionError):
    """A 429's failure (CONN-2, DLV-6): its base delay is the connection's pause
    (Retry-After, at most an hour), doubled per attempt as any retryable failure, but
    never beyond the pause's bound (`max_delay_seconds`, an hour, not the backoff's
    6 h): a Retry-After of days leaves it waiting exactly as long as the others."""

    def __init__(self, code: str, pause_seconds: float) -> None:
        super().__init__(code, retryable=True, delay_seconds=pause_seconds)
        self.max_delay_seconds = float(health_rules.MAX_PAUSE_SECONDS)


@dataclass(frozen=True)
class Gate:
    """What `admit` let through: the connection, whether this request is the probe,
    and how long to sleep for its rate-limit slot before sending (seconds)."""

    connection_id: str
    installation_id: str
    settings: Settings
    probe: bool
    health: Health
    rate_wait_seconds: float = 0.0


def settings_of(version: ConnectionVersion) -> Settings:
    """A connection version's health settings (CONN-1..3)."""
    return Settings(
        failure_threshold=version.breaker_failure_threshold,
        first_probe_seconds=version.breaker_first_probe_seconds,
        max_probe_seconds=version.breaker_max_probe_seconds,
        failure_window_seconds=version.failure_window_seconds,
        rate_limit_per_second=version.rate_limit_per_second,
    )


def load(session, connection_id: str) -> Health:
    """The connection's health as stored; a connection never written is healthy."""
    row = session.execute(
        select(*(getattr(ConnectionHealth, c) for c in HEALTH_FIELDS)).where(
            ConnectionHealth.connection_id == connection_id
        )
    ).first()
    return Health(**row._asdict()) if row else Health()


def _write(uow: UnitOfWork, connection_id: str, installation_id: str, read: Health, change: HealthChange) -> bool:
    """One UPDATE guarded on the version read; the row is created first if missing."""
    if read.version == 0:
        insert_ignore(
            uow.session,
            ConnectionHealth,
            {
                **asdict(Health()),
                "connection_id": connection_id,
                "installation_id": installation_id,
            },
        )
    statement = (
        update(ConnectionHealth)
        .where(ConnectionHealth.connection_id == connection_id, ConnectionHealth.version == read.version)
        .values(**change.values, version=read.version + 1)
        .execution_options(synchronize_session=False)
    )
    return uow.session.execute(statement).rowcount == 1


def _audit(uow: UnitOfWork, gate_or_ids, written: Health, change: HealthChange, actor: Actor | None = None) -> None:
    """An audit row and a metric for each breaker transition (CONN-1..3)."""
    connection_id, installation_id = gate_or_ids
    if change.transition is None:
        return
    uow.audit(
        installation_id,
        f"connection-health:{connection_id}:{written.version}:{change.transition}",
        f"connection.{change.transition}",
        actor or Actor.system("connection-health"),
        "connection",
        connection_id,
        {"state": written.state, "disabled": written.disabled, **change.details},
    )
    uow.after_commit(lambda: record_connection_transition(connection_id, change.transition))
    log.warning(
        "connection %s: %s", connection_id, change.transition, extra={"connection_id": connection_id, **change.details}
    )


def _decide_and_write(uow: UnitOfWork, connection_id: str, installation_id: str, decide, actor=None) -> Health | None:
    """Read, decide, write guarded; read again when another worker wrote first.

    Args:
        decide: Health -> HealthChange | None (None: nothing to write).

    Returns:
        The row as written, or None when nothing was written.
    """
    for _ in range(GUARDED_WRITE_TRIES):
        health = load(uow.session, connection_id)
        change = decide(health)
        if change is None:
            return None
        if _write(uow, connection_id, installation_id, health, change):
            written = change.applied_to(health)
            _audit(uow, (connection_id, installation_id), written, change, actor)
            if written.state == health_rules.CLOSED and not written.disabled and health.state != health_rules.CLOSED:
                release_held(uow, connection_id)  # OPS-7: the recovered platform gets them at once
                release_again_after_commit(uow, connection_id)  # and a hold that committed just after
            elif change.transition in ("opened", "reopened") and written.next_probe_at is not None:
                schedule_probe(uow, connection_id, written.next_probe_at)  # OPS-7: sent when due
            return written
    log.error("connection %s: health write lost %d times", connection_id, GUARDED_WRITE_TRIES)
    return None


def admit(
    uow: UnitOfWork,
    connection_id: str,
    installation_id: str,
    settings: Settings,
    timeout_seconds: float,
    now: datetime | None = None,
    read: Health | None = None,
) -> Gate:
    """Whether a claimed delivery to the connection may send now (CONN-1..3).

    Runs in the claim's transaction (inside its savepoint): taking the half-open
    probe is written there, so it commits with the claim, or not at all.

    Args:
        connection_id: the connection (not the version: the health is the endpoint's).
        settings: the health settings of the connection version the delivery uses.
        timeout_seconds: the request's timeout; the probe's lease is this plus a margin.
        read: the health as this transaction already read it for another delivery of
            a batch claim (not read again); None to read it.

    Returns:
        The `Gate` to pass to `rate_limit.before_send` and `record_success`/`record_failure`.

    Raises:
        ConnectionHeld: ``connection_disabled``, ``connection_paused``,
            ``connection_circuit_open``, ``connection_probe_in_flight`` or
            ``connection_rate_limited``, with the seconds to wait.
    """
    now = now or utcnow()
    ids = (connection_id, installation_id)
    for _ in range(GUARDED_WRITE_TRIES):
        health, read = read or load(uow.session, connection_id), None
        admission = health_rules.admit(health, now, timeout_seconds + PROBE_LEASE_MARGIN_SECONDS)
        if not admission.send:
            record_connection_wait(connection_id, admission.wait_code)
            raise ConnectionHeld(admission.wait_code, (admission.wait_until - now).total_seconds())
        if admission.change is None:
            return Gate(*ids, settings, False, health, _slot_wait(connection_id, settings))
        if _write(uow, *ids, health, admission.change):
            written = admission.change.applied_to(health)
            _audit(uow, ids, written, admission.change)
            return Gate(*ids, settings, True, written)
    raise ConnectionHeld(health_rules.WAIT_PROBE, 1.0)


def _slot_wait(connection_id: str, settings: Settings) -> float:
    """Take the request's rate-limit slot (CONN-2): seconds to sleep for it.

    Raises:
        ConnectionHeld: ``connection_rate_limited`` when the slot is further away
            than `rate_limit.MAX_RATE_WAIT_SECONDS` (nothing taken).
    """
    slot = rate_limit.take_slot(connection_id, settings.rate_limit_per_second)
    if not slot.taken:
        record_connection_wait(connection_id, health_rules.WAIT_RATE_LIMITED)
        raise ConnectionHeld(health_rules.WAIT_RATE_LIMITED, slot.wait_seconds)
    if slot.wait_seconds > 0:
        record_connection_wait(connection_id, "rate_limit_sleep")
    return slot.wait_seconds


def record_success(uow: UnitOfWork, gate: Gate) -> None:
    """The platform answered: end the failure streak, close the breaker (CONN-1).

    Writes nothing when the connection was healthy as read at the claim.
    """
    if health_rules.after_success(gate.health) is None and not gate.probe:
        return
    _decide_and_write(uow, gate.connection_id, gate.installation_id, health_rules.after_success)


GONE_STATUS = 410


def record_failure(
    uow: UnitOfWork, gate: Gate, error: ActionError, status: int | None, reached: bool, now: datetime | None = None
) -> ActionError:
    """What a failed attempt teaches about the connection (CONN-1..3).

    A 429 pauses the connection until its Retry-After; a 410 disables it, and the
    proposal waits for re-enabling instead of failing for good; a retryable failure
    of the platform counts toward the breaker; any other answer of the platform (a
    4xx, a 2xx that was not a valid receipt) shows it alive and counts as a success.

    Args:
        error: the attempt's failure.
        status: the HTTP status the platform answered, if it answered.
        reached: whether the failure came from the request to the platform (egress).

    Returns:
        The error to record on the proposal (a 410 becomes ``platform_endpoint_gone``,
        retryable once the endpoint is re-enabled; a 429 a `PausedByPlatform` whose
        wait is the connection's pause, at most an hour).
    """
    now = now or utcnow()
    ids = (gate.connection_id, gate.installation_id)
    if status == 429 or error.code == "platform_rate_limited":
        _decide_and_write(uow, *ids, lambda h: health_rules.pause(h, now, error.delay_seconds, gate.probe))
        return PausedByPlatform(error.code, health_rules.pause_seconds(error.delay_seconds))
    if status == GONE_STATUS:
        _decide_and_write(uow, *ids, lambda h: health_rules.gone(h, now))
        return ActionError(ENDPOINT_GONE, retryable=True, delay_seconds=health_rules.DISABLED_RECHECK_SECONDS)
    if reached and health_rules.counts_as_failure(error.retryable, status, error.code):
        _decide_and_write(uow, *ids, lambda h: health_rules.after_failure(h, gate.settings, now, gate.probe))
    elif status is not None:
        record_success(uow, gate)
    return error


def re_enable(operator, connection_id: str) -> int:
    """An admin re-enables a disabled connection (CONN-3): closed, no failure streak,
    no pause; every delivery it held is due at once. Audited as ``connection.re_enabled``.

    Not four-eyes: FOUR-2 covers changes of a connection's destination and secrets;
    re-enabling sends to the destination already approved.

    Args:
        operator: the admin (an `OperatorUser`).
        connection_id: a connection of the operator's installation.

    Returns:
        How many held deliveries were released.

    Raises:
        ApiError: 404 ``connection_not_found``; 409 ``connection_not_disabled``.
    """
    from app.services.admin.input import owned

    with unit_of_work() as uow:
        connection = owned(
            uow.session, Connection, connection_id, operator.installation_id, "connection_not_found", "connection"
        )
        written = _decide_and_write(
            uow, connection.id, connection.installation_id, health_rules.re_enable, Actor("operator", operator.id)
        )
        if written is None:
            raise ApiError(409, "connection_not_disabled", "This connection is not disabled.")
        released = release_held(uow, connection.id)
        uow.commit()
    return released
