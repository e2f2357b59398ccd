"""Events for workflow runs and their delivery state (SPEC EVT-2)."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import ForeignKey, Index, String
from sqlalchemy.orm import Mapped, mapped_column

from .base import Base, UTCDateTime, created_at_column, json_column, updated_at_column


class WorkflowEventInbox(Base):
    """An event a run may be waiting for, written once by its deterministic id."""

    __tablename__ = "workflow_event_inbox"

    id: Mapped[str] = mapped_column(String(800), primary_key=True)
    installation_id: Mapped[str] = mapped_column(ForeignKey("installations.id"))
    run_id: Mapped[str] = mapped_column(ForeignKey("workflow_runs.id"), index=True)
    event_type: Mapped[str] = mapped_column(String(800))
    event_key: Mapped[str] = mapped_column(String(800))
    source_type: Mapped[str] = mapped_column(String(30))
    source_id: Mapped[str] = mapped_column(String(700))
    payload: Mapped[dict[str, Any]] = json_column("payload_json")
    payload_digest: Mapped[str] = mapped_column(String(100))  # of the stored payload_json text
    received_at: Mapped[datetime] = created_at_column()
    delivered_at: Mapped[datetime | None] = mapped_column(UTCDateTime(), nullable=True)
    delivery_attempts: Mapped[int] = mapped_column(default=0)
    last_error_code: Mapped[str | None] = mapped_column(String(200), nullable=True)


class WorkflowDispatchOutbox(Base):
    """A wake-up owed to a run (start it, or hand it an event); retried until done."""

    __tablename__ = "workflow_dispatch_outbox"
    __table_args__ = (Index("ix_outbox_pending", "state", "available_at"),)

    id: Mapped[str] = mapped_column(String(800), primary_key=True)
    installation_id: Mapped[str] = mapped_column(ForeignKey("installations.id"))
    run_id: Mapped[str] = mapped_column(ForeignKey("workflow_runs.id"), index=True)
    operation: Mapped[str] = mapped_column(String(20))  # start, event
    event_inbox_id: Mapped[str | None] = mapped_column(String(800), nullable=True)
    operation_key: Mapped[str] = mapped_column(String(1000), unique=True)
    state: Mapped[str] = mapped_column(String(20), default="pending")  # pending, delivered, failed
    attempts: Mapped[int] = mapped_column(default=0)
    available_at: Mapped[datetime] = created_at_column()
    last_error_code: Mapped[str | None] = mapped_column(String(200), nullable=True)
    created_at: Mapped[datetime] = created_at_column()
    updated_at: Mapped[datetime] = updated_at_column()
