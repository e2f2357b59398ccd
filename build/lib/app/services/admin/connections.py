"""Connections: where actions are delivered. A connection is a named destination;
its settings (base URL, bearer token, Standard Webhooks signing secret, timeout,
allowed hosts) live in immutable versions, and a change is a new version.

Secrets are written once and never read back to a page: the views get
`ConnectionVersionView`, which only says whether each secret is set. A signing
secret generated here is returned once, so the admin can give it to the platform.

A version that changes the destination (scheme, host, port, allowed hosts) or a
secret is a configuration change for a second admin (SPEC FOUR-2,
`app.services.admin.changes`), and a version whose origin differs from the previous
one's cannot keep the stored secrets (SEC-4). The settings are checked in
`app.services.admin.connection_settings`; creating a connection is
`app.services.admin.connection_create`.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import select

from app.domain.config_changes import ChangeKind
from app.domain.errors import ApiError
from app.extensions import db
from app.models import Connection, ConnectionVersion, Integration, OperatorUser
from app.services.admin.changes import ApplyContext, ChangeType, PendingChange, submit
from app.services.admin.connection_settings import (
    SECRET_NAMES,
    ConnectionSettings,
    proposed_settings,
    settings_content,
    shown_once,
    version_row,
)
from app.services.admin.input import add_version, latest_version, lock_owned, owned, plausible_id
from app.services.uow import UnitOfWork, unit_of_work


@dataclass(frozen=True)
class ConnectionSaved:
    """What saving a connection version gave.

    Attributes:
        signing_secret: the signing secret generated now (shown once), else None.
    """

    connection_id: str
    version_id: str
    version: int
    signing_secret: str | None


@dataclass(frozen=True)
class ConnectionVersionView:
    """A connection version without its secrets."""

    id: str
    version: int
    base_url: str
    timeout_seconds: float
    allowed_hosts: list[str]
    has_bearer_token: bool
    has_signing_secret: bool
    created_at: datetime
    breaker_failure_threshold: int = 5
    breaker_first_probe_seconds: float = 30
    breaker_max_probe_seconds: float = 600
    failure_window_seconds: float = 86_400
    rate_limit_per_second: float | None = None


@dataclass(frozen=True)
class ConnectionListing:
    connection: Connection
    integration_name: str | None
    versions: list[ConnectionVersionView]  # newest first

    @property
    def latest(self) -> ConnectionVersionView | None:
        return self.versions[0] if self.versions else None


def _view(version: ConnectionVersion) -> ConnectionVersionView:
    return ConnectionVersionView(
        id=version.id,
        version=version.version,
        base_url=version.base_url,
        timeout_seconds=version.timeout_seconds,
        allowed_hosts=version.allowed_hosts,
        has_bearer_token=bool(version.bearer_token),
        has_signing_secret=bool(version.signing_secret),
        created_at=version.created_at,
        breaker_failure_threshold=version.breaker_failure_threshold,
        breaker_first_probe_seconds=version.breaker_first_probe_seconds,
        breaker_max_probe_seconds=version.breaker_max_probe_seconds,
        failure_window_seconds=version.failure_window_seconds,
        rate_limit_per_second=version.rate_limit_per_second,
    )


def list_connections(installation_id: str) -> list[ConnectionListing]:
    """The installation's connections by name, each with its versions (newest first)."""
    connections = db.session.execute(
        select(Connection, Integration.name)
        .outerjoin(Integration, Integration.id == Connection.integration_id)
        .where(Connection.installation_id == installation_id)
        .order_by(Connection.name, Connection.id)
    ).all()
    versions: dict[str, list[ConnectionVersionView]] = {}
    for version in db.session.scalars(
        select(ConnectionVersion)
        .where(ConnectionVersion.installation_id == installation_id)
        .order_by(ConnectionVersion.connection_id, ConnectionVersion.version.desc())
    ):
        versions.setdefault(version.connection_id, []).append(_view(version))
    return [ConnectionListing(c, name, versions.get(c.id, [])) for c, name in connections]


def connection_detail(installation_id: str, connection_id: str) -> ConnectionListing:
    """One connection of the installation with its versions.

    Raises:
        ApiError: 404 ``connection_not_found`` (also for another installation's).
    """
    connection = db.session.get(Connection, connection_id) if plausible_id(connection_id) else None
    if connection is None or connection.installation_id != installation_id:
        raise ApiError(404, "connection_not_found", "No such connection.")
    integration = db.session.get(Integration, connection.integration_id) if connection.integration_id else None
    versions = [
        _view(v)
        for v in db.session.scalars(
            select(ConnectionVersion)
            .where(
                ConnectionVersion.connection_id == connection.id, ConnectionVersion.installation_id == installation_id
            )
            .order_by(ConnectionVersion.version.desc())
        )
    ]
    return ConnectionListing(connection, integration.name if integration else None, versions)


def _lock_connection(session, installation_id: str, connection_id: Any) -> Connection:
    return lock_owned(session, Connection, connection_id, installation_id, "connection_not_found", "connection")


def _latest(session, connection: Connection) -> ConnectionVersion | None:
    return latest_version(session, ConnectionVersion, ConnectionVersion.connection_id, connection.id)


def _current_version(session, installation_id: str, content: dict[str, Any]) -> dict[str, Any]:
    connection = owned(
        session, Connection, content["connection_id"], installation_id, "connection_not_found", "connection"
    )
    latest = _latest(session, connection)
    current: dict[str, Any] = {"connection": connection.name, "version": latest.version if latest else 0}
    if latest is not None:
        current |= {
            "base_url": latest.base_url,
            "timeout_seconds": latest.timeout_seconds,
            "allowed_hosts": latest.allowed_hosts,
            "bearer_token": bool(latest.bearer_token),
            "signing_secret": bool(latest.signing_secret),
        }
    return current


def _apply_version(uow: UnitOfWork, context: ApplyContext, content: dict[str, Any], secrets) -> dict[str, Any]:
    connection = _lock_connection(uow.session, context.installation_id, content["connection_id"])
    previous = _latest(uow.session, connection)
    if (previous.id if previous else None) != content["base_version_id"]:
        raise ApiError(
            409,
            "config_change_stale",
            "The connection has a newer version than the one this change was made against. Propose it again.",
        )
    columns, details = version_row(content, secrets, previous)
    number = (previous.version if previous else 0) + 1
    version = add_connection_version(uow, connection, number, columns)
    uow.audit(
        context.installation_id,
        f"admin:connection-version-created:{version.id}",
        "admin.connection_version_created",
        context.actor,
        "connection",
        connection.id,
        context.details({"version_id": version.id, "version": number, **details}),
    )
    return {"connection_id": connection.id, "version_id": version.id, "version": number}


def _display(content: dict[str, Any], current: dict[str, Any] | None) -> tuple[dict[str, Any], dict[str, Any]]:
    """The version's settings now and as proposed, secrets named but never shown."""
    current = dict(current or {})
    for name in SECRET_NAMES:
        if name in current:
            current[name] = "set" if current[name] else "not set"
    return current, proposed_settings(content, current)


CONNECTION_VERSION = ChangeType(
    kind=ChangeKind.CONNECTION_VERSION,
    subject_type="connection",
    subject="connection_id",
    current=_current_version,
    summary=lambda content, current: (
        f"Connection {current['connection']!r}: version {current['version'] + 1} ({content['base_url']})"
    ),
    apply=_apply_version,
    display=_display,
)


def create_connection_version(
    operator: OperatorUser, connection_id: str, settings: ConnectionSettings
) -> ConnectionSaved | PendingChange:
    """Add a version to a connection of the operator's installation, or propose it.

    A version that changes the destination (scheme, host, port, allowed hosts) or a
    secret is a change for a second admin (FOUR-2): it is stored pending, with any
    signing secret generated for it shown once to the proposer. A version whose
    origin differs from the previous one's cannot keep the stored secrets (SEC-4).
    Components keep pointing at the version they were published with; publish a
    component version to use the new connection version.

    Returns:
        What was saved, or the `PendingChange` stored.

    Raises:
        ApiError: 404 ``connection_not_found``; 400 ``connection_url_invalid``,
            ``connection_timeout_invalid``, ``connection_allowed_hosts_invalid``,
            ``connection_bearer_token_invalid``, ``connection_signing_secret_invalid``,
            ``connection_secrets_reentry_required``; 409 ``version_conflict`` when
            another version was saved at the same moment.
    """
    with unit_of_work() as uow:
        connection = _lock_connection(uow.session, operator.installation_id, connection_id)
        previous = _latest(uow.session, connection)
        fields, secrets = settings_content(settings, previous)
        content = {"connection_id": connection.id, "base_version_id": previous.id if previous else None, **fields}
        generated = shown_once(secrets)
        outcome = submit(uow, operator, CONNECTION_VERSION, content, secrets, shown_once=generated)
        uow.commit()
    if isinstance(outcome, PendingChange):
        return outcome
    return ConnectionSaved(
        outcome["connection_id"], outcome["version_id"], outcome["version"], generated.get("signing_secret")
    )


def add_connection_version(
    uow: UnitOfWork, connection: Connection, number: int, columns: dict[str, Any]
) -> ConnectionVersion:
    """Add version `number` of a connection with the columns of `version_row`.

    Raises:
        ApiError: 409 ``version_conflict`` when another version was saved at the same moment.
    """
    version = ConnectionVersion(
        installation_id=connection.installation_id, connection_id=connection.id, version=number, **columns
    )
    return add_version(uow.session, version)


def connection_version_choices(installation_id: str) -> list[tuple[str, str]]:
    """(id, label) of every connection version of the installation, for a select."""
    rows = db.session.execute(
        select(ConnectionVersion.id, ConnectionVersion.version, ConnectionVersion.base_url, Connection.name)
        .join(Connection, Connection.id == ConnectionVersion.connection_id)
        .where(ConnectionVersion.installation_id == installation_id)
        .order_by(Connection.name, ConnectionVersion.version.desc())
    ).all()
    return [(row.id, f"{row.name} v{row.version} ({row.base_url})") for row in rows]
