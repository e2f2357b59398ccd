"""Action types (components) and the connections they are delivered through."""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import Boolean, ForeignKey, String, UniqueConstraint, false
from sqlalchemy.orm import Mapped, mapped_column

from .base import Base, SealedText, UTCDateTime, created_at_column, id_column, json_column, updated_at_column

IMPLEMENTATION_KINDS = ("webhook", "external_api", "atproto_pds", "rest")
MAX_CONNECTION_TIMEOUT_SECONDS = 120


class Connection(Base):
    """A named destination (a platform API); its settings live in versions."""

    __tablename__ = "connections"
    __table_args__ = (UniqueConstraint("installation_id", "slug"),)

    id: Mapped[str] = id_column("con")
    installation_id: Mapped[str] = mapped_column(ForeignKey("installations.id"), index=True)
    integration_id: Mapped[str | None] = mapped_column(ForeignKey("integrations.id"), nullable=True)
    name: Mapped[str] = mapped_column(String(200))
    slug: Mapped[str] = mapped_column(String(100))
    created_at: Mapped[datetime] = created_at_column()


class ConnectionVersion(Base):
    """Immutable settings of a connection: base URL, auth, timeout, allowed hosts.

    Secrets are kept so the worker can authenticate and sign, sealed at rest (OPS-3);
    the console never shows them again after they are saved.
    """

    __tablename__ = "connection_versions"
    __table_args__ = (UniqueConstraint("connection_id", "version"),)

    id: Mapped[str] = id_column("cnv")
    installation_id: Mapped[str] = mapped_column(ForeignKey("installations.id"), index=True)
    connection_id: Mapped[str] = mapped_column(ForeignKey("connections.id"))
    version: Mapped[int] = mapped_column(default=1)
    base_url: Mapped[str] = mapped_column(String(2000))
    # OPS-3: sealed at rest under SECRETS_KEY (an `UnreadableSecret` when no key opens it).
    bearer_token: Mapped[str | None] = mapped_column(SealedText("connection_versions.bearer_token"), nullable=True)
    signing_secret: Mapped[str | None] = mapped_column(SealedText("connection_versions.signing_secret"), nullable=True)
    timeout_seconds: Mapped[float] = mapped_column(default=30)
    allowed_hosts: Mapped[list[str]] = json_column("allowed_hosts_json", default=list)
    # The connection's health settings (CONN-1..3, `app.domain.connection_health.Settings`).
    breaker_failure_threshold: Mapped[int] = mapped_column(default=5, server_default="5")
    breaker_first_probe_seconds: Mapped[float] = mapped_column(default=30, server_default="30")
    breaker_max_probe_seconds: Mapped[float] = mapped_column(default=600, server_default="600")
    failure_window_seconds: Mapped[float] = mapped_column(default=86_400, server_default="86400")
    rate_limit_per_second: Mapped[float | None] = mapped_column(nullable=True)
    created_at: Mapped[datetime] = created_at_column()


class ConnectionHealth(Base):
    """A connection's circuit breaker, pause and disabling, shared by every worker
    (CONN-1..3). One row per connection, written only when something changes, each
    write guarded on `version` as read (`app.services.lifecycle.breaker`).
    Kept in the database, not in Redis, so losing Redis loses no breaker state."""

    __tablename__ = "connection_health"

    connection_id: Mapped[str] = mapped_column(ForeignKey("connections.id"), primary_key=True)
    installation_id: Mapped[str] = mapped_column(ForeignKey("installations.id"), index=True)
    state: Mapped[str] = mapped_column(String(20), default="closed")
    consecutive_failures: Mapped[int] = mapped_column(default=0)
    failing_since: Mapped[datetime | None] = mapped_column(UTCDateTime(), nullable=True)
    opened_at: Mapped[datetime | None] = mapped_column(UTCDateTime(), nullable=True)
    probe_delay_seconds: Mapped[float | None] = mapped_column(nullable=True)
    next_probe_at: Mapped[datetime | None] = mapped_column(UTCDateTime(), nullable=True)
    probe_lease_expires_at: Mapped[datetime | None] = mapped_column(UTCDateTime(), nullable=True)
    paused_until: Mapped[datetime | None] = mapped_column(UTCDateTime(), nullable=True)
    disabled_at: Mapped[datetime | None] = mapped_column(UTCDateTime(), nullable=True)
    disabled_reason: Mapped[str | None] = mapped_column(String(20), nullable=True)
    version: Mapped[int] = mapped_column(default=0)
    updated_at: Mapped[datetime] = updated_at_column()


class ComponentDefinition(Base):
    """An action type, e.g. ``takedown``; its behaviour lives in versions."""

    __tablename__ = "component_definitions"
    __table_args__ = (UniqueConstraint("installation_id", "slug"),)

    id: Mapped[str] = id_column("cmp")
    installation_id: Mapped[str] = mapped_column(ForeignKey("installations.id"), index=True)
    name: Mapped[str] = mapped_column(String(200))
    slug: Mapped[str] = mapped_column(String(100))
    effect_class: Mapped[str] = mapped_column(String(30), default="side_effecting")
    status: Mapped[str] = mapped_column(String(20), default="active")
    created_at: Mapped[datetime] = created_at_column()


class ComponentVersion(Base):
    """One published version of an action type: how to call it and what it accepts."""

    __tablename__ = "component_versions"
    __table_args__ = (UniqueConstraint("definition_id", "version"),)

    id: Mapped[str] = id_column("cmv")
    installation_id: Mapped[str] = mapped_column(ForeignKey("installations.id"), index=True)
    definition_id: Mapped[str] = mapped_column(ForeignKey("component_definitions.id"))
    version: Mapped[int] = mapped_column(default=1)
    implementation_kind: Mapped[str] = mapped_column(String(30))
    implementation_reference: Mapped[str] = mapped_column(String(8000))  # "POST /actions/takedown"; see PLAT kinds
    connection_version_id: Mapped[str | None] = mapped_column(ForeignKey("connection_versions.id"), nullable=True)
    input_schema: Mapped[dict] = json_column("input_schema_json", default=dict)
    output_schema: Mapped[dict] = json_column("output_schema_json", default=dict)
    approval_policy: Mapped[dict] = json_column("approval_policy_json", default=lambda: {"mode": "human"})
    irreversible: Mapped[bool] = mapped_column(Boolean, default=False, server_default=false())  # POL-5
    retired_at: Mapped[datetime | None] = mapped_column(UTCDateTime(), nullable=True)
    # TEMP-1: {duration_seconds, reversal: {component_version_id, action_code, payload}}
    temporary: Mapped[dict | None] = json_column("temporary_json", nullable=True)
    created_at: Mapped[datetime] = created_at_column()
