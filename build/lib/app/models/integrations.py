"""Platforms the team serves, their API tokens, and review queues."""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import Boolean, ForeignKey, String, UniqueConstraint
from sqlalchemy.orm import Mapped, mapped_column

from app.domain.clock import utcnow

from .base import Base, UTCDateTime, created_at_column, id_column


class Integration(Base):
    """A platform (service identity) whose reports and actions we handle."""

    __tablename__ = "integrations"
    __table_args__ = (UniqueConstraint("installation_id", "slug"),)

    id: Mapped[str] = id_column("int")
    installation_id: Mapped[str] = mapped_column(ForeignKey("installations.id"), index=True)
    name: Mapped[str] = mapped_column(String(200))
    slug: Mapped[str] = mapped_column(String(100))
    active: Mapped[bool] = mapped_column(Boolean, default=True)
    # Queue new reports from this platform land in, unless the intake names one.
    default_queue_id: Mapped[str | None] = mapped_column(ForeignKey("queues.id"), nullable=True)
    created_at: Mapped[datetime] = created_at_column()


class IntegrationToken(Base):
    """A bearer token of an integration. Only its SHA-256 is stored.

    ``standing_since`` (FOUR-8) is from when the token may speak for an action's
    result: its creation, or, for a token approved as the successor of others of the
    same integration (a rotation), the earliest standing of those. It is copied from
    stored rows, never read from a clock of its own.
    """

    __tablename__ = "integration_tokens"

    id: Mapped[str] = id_column("tok")
    installation_id: Mapped[str] = mapped_column(ForeignKey("installations.id"), index=True)
    integration_id: Mapped[str] = mapped_column(ForeignKey("integrations.id"), index=True)
    label: Mapped[str] = mapped_column(String(200), default="")
    token_prefix: Mapped[str] = mapped_column(String(20))
    token_hash: Mapped[str] = mapped_column(String(100), unique=True)
    created_by_id: Mapped[str | None] = mapped_column(String(200), nullable=True)
    created_at: Mapped[datetime] = created_at_column()
    revoked_at: Mapped[datetime | None] = mapped_column(UTCDateTime(), nullable=True)
    last_used_at: Mapped[datetime | None] = mapped_column(UTCDateTime(), nullable=True)
    standing_since: Mapped[datetime] = mapped_column(UTCDateTime(), nullable=False)

    def __init__(self, **values):
        """The row; ``created_at`` and ``standing_since`` default to one reading of the clock."""
        values.setdefault("created_at", utcnow())
        values.setdefault("standing_since", values["created_at"])
        super().__init__(**values)


class Queue(Base):
    """A review queue reports are routed to."""

    __tablename__ = "queues"
    __table_args__ = (UniqueConstraint("installation_id", "slug"),)

    id: Mapped[str] = id_column("que")
    installation_id: Mapped[str] = mapped_column(ForeignKey("installations.id"), index=True)
    name: Mapped[str] = mapped_column(String(200))
    slug: Mapped[str] = mapped_column(String(100))
    # time-to-decide target in seconds: the queue shows what waited longer (QUEUE-4)
    decide_within_seconds: Mapped[int | None] = mapped_column(nullable=True)
    created_at: Mapped[datetime] = created_at_column()
