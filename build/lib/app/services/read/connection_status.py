"""Connections' health as Operations and the admin pages show it: breaker, pause,
disabling, how many deliveries each holds back, and the latest transitions
(SPEC CONN-1..3). Read only; `app.services.lifecycle.breaker` writes.
"""

from __future__ import annotations

from dataclasses import dataclass

from sqlalchemy import func, select

from app.domain import connection_health as health_rules
from app.domain.clock import utcnow
from app.domain.connection_health import HEALTH_FIELDS, Health
from app.models import ActionProposal, ComponentVersion, Connection, ConnectionHealth, ConnectionVersion, predicates
from app.services.lifecycle.connection_recovery import ENDPOINT_GONE


@dataclass(frozen=True)
class ConnectionHealthView:
    """A connection's health for Operations and the admin pages."""

    connection_id: str
    name: str
    health: Health
    held: int  # deliveries waiting on it


def _held_filter():
    return (
        predicates.waiting(),
        ActionProposal.last_error_code.in_(sorted(health_rules.WAIT_CODES | {ENDPOINT_GONE})),
    )


def health_views(session, installation_id: str, connection_id: str | None = None) -> list[ConnectionHealthView]:
    """The installation's connections (or one) with their health and how many
    deliveries each holds back, by name, in one query (CONN-1..3).

    Held back: while the connection holds every delivery (open, half-open, paused,
    disabled: `health_rules.holds_back`), each of its waiting deliveries, the one that
    received the 429 or the failing answer included; otherwise those still waiting
    with one of its wait codes.
    """
    def count(*where):
        return (
            select(func.count())
            .select_from(ActionProposal)
            .join(ComponentVersion, ComponentVersion.id == ActionProposal.component_version_id)
            .join(ConnectionVersion, ConnectionVersion.id == ComponentVersion.connection_version_id)
            .where(ConnectionVersion.connection_id == Connection.id, *where)
            .scalar_subquery()
        )

    waiting = (predicates.waiting(), ActionProposal.accepted_at.is_(None))
    columns = [getattr(ConnectionHealth, c) for c in HEALTH_FIELDS]
    query = (
        select(Connection.id, Connection.name, count(*_held_filter()).label("held"), *columns)
        .add_columns(count(*waiting).label("waiting"))
        .outerjoin(ConnectionHealth, ConnectionHealth.connection_id == Connection.id)
        .where(Connection.installation_id == installation_id)
        .order_by(Connection.name, Connection.id)
    )
    if connection_id is not None:
        query = query.where(Connection.id == connection_id)
    views, now = [], utcnow()
    for row in session.execute(query).all():
        values = row._asdict()
        stored = {c: values[c] for c in HEALTH_FIELDS}
        health = Health(**stored) if stored["version"] is not None else Health()
        held = values["waiting"] if health_rules.holds_back(health, now) else values["held"]
        views.append(ConnectionHealthView(values["id"], values["name"], health, held or 0))
    return views


def disabled_connections(session, installation_id: str) -> list[tuple[str, str, str | None]]:
    """(id, name, reason) of the installation's disabled connections (the admin banner, CONN-3)."""
    return [
        tuple(row)
        for row in session.execute(
            select(Connection.id, Connection.name, ConnectionHealth.disabled_reason)
            .join(ConnectionHealth, ConnectionHealth.connection_id == Connection.id)
            .where(Connection.installation_id == installation_id, ConnectionHealth.disabled_at.is_not(None))
            .order_by(Connection.name)
        ).all()
    ]


def history(session, installation_id: str, connection_id: str | None = None, limit: int = 20) -> list:
    """The latest connection health transitions (audit rows), newest first (CONN-1)."""
    from app.models import AuditEvent

    query = select(AuditEvent).where(
        AuditEvent.installation_id == installation_id,
        AuditEvent.target_type == "connection",
        AuditEvent.action.in_([f"connection.{t}" for t in TRANSITIONS]),
    )
    if connection_id is not None:
        query = query.where(AuditEvent.target_id == connection_id)
    return list(session.scalars(query.order_by(AuditEvent.seq.desc()).limit(limit)))


TRANSITIONS = ("opened", "probe_started", "closed", "reopened", "paused", "disabled", "re_enabled")
