"""Budgets that bound automation, and the reservations charged against them."""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import Boolean, ForeignKey, String, UniqueConstraint
from sqlalchemy.orm import Mapped, mapped_column

from .base import Base, UTCDateTime, created_at_column, id_column, updated_at_column

BUDGET_SCOPES = ("workflow", "component", "queue")


class Budget(Base):
    """At most `limit_amount` of `metric` per `window_seconds` for one scope.

    `window_start` and `used_amount` are the current window's counter, moved by one
    conditional UPDATE so two workers can never overspend it.
    """

    __tablename__ = "budgets"
    __table_args__ = (UniqueConstraint("installation_id", "scope_type", "scope_id", "metric"),)

    id: Mapped[str] = id_column("bud")
    installation_id: Mapped[str] = mapped_column(ForeignKey("installations.id"), index=True)
    scope_type: Mapped[str] = mapped_column(String(20))
    scope_id: Mapped[str] = mapped_column(String(200))
    metric: Mapped[str] = mapped_column(String(30), default="actions")
    limit_amount: Mapped[int] = mapped_column()
    window_seconds: Mapped[int] = mapped_column(default=3600)
    window_start: Mapped[datetime | None] = mapped_column(UTCDateTime(), nullable=True)
    used_amount: Mapped[int] = mapped_column(default=0)
    active: Mapped[bool] = mapped_column(Boolean, default=True)
    created_at: Mapped[datetime] = created_at_column()
    updated_at: Mapped[datetime] = updated_at_column()


class BudgetReservation(Base):
    """One unit reserved for a delivery attempt; settled consumed or released."""

    __tablename__ = "budget_reservations"
    __table_args__ = (UniqueConstraint("budget_id", "operation_id", "attempt_id"),)

    id: Mapped[str] = id_column("bres")
    installation_id: Mapped[str] = mapped_column(ForeignKey("installations.id"))
    budget_id: Mapped[str] = mapped_column(ForeignKey("budgets.id"), index=True)
    window_start: Mapped[datetime] = mapped_column(UTCDateTime())
    operation_type: Mapped[str] = mapped_column(String(30), default="action_proposal")
    operation_id: Mapped[str] = mapped_column(String(700))
    attempt_id: Mapped[str] = mapped_column(String(50))
    amount: Mapped[int] = mapped_column(default=1)
    state: Mapped[str] = mapped_column(String(20), default="reserved")
    created_at: Mapped[datetime] = created_at_column()
    settled_at: Mapped[datetime | None] = mapped_column(UTCDateTime(), nullable=True)
