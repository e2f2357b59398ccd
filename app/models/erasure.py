"""Erasure of personal data and retention periods (SPEC OPS-4)."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import ForeignKey, Index, Integer, String, Text
from sqlalchemy.orm import Mapped, mapped_column

from .base import Base, UTCDateTime, created_at_column, id_column, json_column, updated_at_column


class ErasureRequest(Base):
    """An admin's request to erase a subject's personal data (kind ``subject``) or to
    set the installation's retention period (kind ``retention``); applied only when a
    different admin approves it. `counts` says how many rows the approval erased."""

    __tablename__ = "erasure_requests"
    __table_args__ = (Index("ix_erasure_requests_list", "installation_id", "state", "created_at"),)

    id: Mapped[str] = id_column("era")
    installation_id: Mapped[str] = mapped_column(ForeignKey("installations.id"))
    kind: Mapped[str] = mapped_column(String(20))  # subject, retention
    subject_reference: Mapped[str | None] = mapped_column(String(500), nullable=True)
    retention_days: Mapped[int | None] = mapped_column(Integer, nullable=True)  # retention: None = keep
    reason: Mapped[str] = mapped_column(Text)
    state: Mapped[str] = mapped_column(String(20), default="pending")  # pending, approved, rejected
    requested_by: Mapped[str] = mapped_column(ForeignKey("operator_users.id"))
    decided_by: Mapped[str | None] = mapped_column(ForeignKey("operator_users.id"), nullable=True)
    decided_at: Mapped[datetime | None] = mapped_column(UTCDateTime(), nullable=True)
    counts: Mapped[dict[str, Any]] = json_column("counts_json", default=dict)
    created_at: Mapped[datetime] = created_at_column()


class RetentionSetting(Base):
    """An installation's retention period: the personal data of a case closed more
    than `closed_case_days` ago is erased by the sweep (None: kept)."""

    __tablename__ = "retention_settings"

    id: Mapped[str] = id_column("ret")
    installation_id: Mapped[str] = mapped_column(ForeignKey("installations.id"), unique=True)
    closed_case_days: Mapped[int | None] = mapped_column(Integer, nullable=True)
    request_id: Mapped[str | None] = mapped_column(ForeignKey("erasure_requests.id"), nullable=True)
    updated_at: Mapped[datetime] = updated_at_column()
