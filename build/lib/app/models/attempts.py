"""Every HTTP attempt to deliver an action (SPEC DLV-4)."""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import ForeignKey, String, UniqueConstraint
from sqlalchemy.orm import Mapped, mapped_column

from .base import Base, UTCDateTime, created_at_column, id_column

RESPONSE_CLASSES = (
    "success",
    "client_error",
    "server_error",
    "timeout",
    "network_error",
    "invalid_response",
    "refused",  # egress policy refused the destination; nothing left the process
    "tls_error",  # the TLS handshake failed (a certificate that does not verify): nothing sent
)


ATTEMPT_PURPOSES = ("update", "read-back", "recheck")


class ConnectionAttempt(Base):
    """One request to a platform, written before it is sent and finished after."""

    __tablename__ = "connection_attempts"
    __table_args__ = (UniqueConstraint("proposal_id", "attempt_number", "purpose"),)

    id: Mapped[str] = id_column("att")
    installation_id: Mapped[str] = mapped_column(ForeignKey("installations.id"))
    proposal_id: Mapped[str] = mapped_column(ForeignKey("action_proposals.id"), index=True)
    attempt_number: Mapped[int] = mapped_column()
    # Which request of the attempt this row is (PLAT-4): the update itself, the
    # read-back that confirms it, or the read-back before a resend (`ATTEMPT_PURPOSES`).
    purpose: Mapped[str] = mapped_column(String(20), default="update", server_default="update")
    delivery_cycle: Mapped[int] = mapped_column()
    connection_version_id: Mapped[str] = mapped_column(ForeignKey("connection_versions.id"))
    method: Mapped[str] = mapped_column(String(10))
    url: Mapped[str] = mapped_column(String(2000))
    request_digest: Mapped[str] = mapped_column(String(100))
    response_status: Mapped[int | None] = mapped_column(nullable=True)
    response_digest: Mapped[str | None] = mapped_column(String(100), nullable=True)
    response_class: Mapped[str | None] = mapped_column(String(30), nullable=True)
    error_code: Mapped[str | None] = mapped_column(String(200), nullable=True)
    # A short reason in words, e.g. the TLS verifier's ("self-signed certificate").
    detail: Mapped[str | None] = mapped_column(String(200), nullable=True)
    # The start of the platform's answer to an error status, as text (QUEUE-6:
    # `domain.failures.body_excerpt`, at most 300 characters); escaped where shown.
    response_excerpt: Mapped[str | None] = mapped_column(String(300), nullable=True)
    started_at: Mapped[datetime] = created_at_column()
    finished_at: Mapped[datetime | None] = mapped_column(UTCDateTime(), nullable=True)
    duration_ms: Mapped[int | None] = mapped_column(nullable=True)
