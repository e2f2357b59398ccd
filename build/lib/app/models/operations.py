"""Records of the periodic sweeps, for the operations screen (SPEC EVT-3)."""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import Index, String
from sqlalchemy.orm import Mapped, mapped_column

from .base import Base, UTCDateTime, created_at_column, id_column, json_column


class SweepRun(Base):
    __tablename__ = "sweep_runs"
    __table_args__ = (Index("ix_sweep_runs_recent", "started_at"),)

    id: Mapped[str] = id_column("swp")
    started_at: Mapped[datetime] = created_at_column()
    finished_at: Mapped[datetime | None] = mapped_column(UTCDateTime(), nullable=True)
    counts: Mapped[dict[str, int]] = json_column("counts_json", default=dict)
    error: Mapped[str | None] = mapped_column(String(500), nullable=True)
