"""Readable labels for codes, set by admins per installation (SPEC REV-3)."""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import ForeignKey, String, UniqueConstraint
from sqlalchemy.orm import Mapped, mapped_column

from .base import Base, id_column, updated_at_column


class CodeLabel(Base):
    """The words shown for one code of one kind (e.g. state ``approval_required``)."""

    __tablename__ = "code_labels"
    __table_args__ = (UniqueConstraint("installation_id", "kind", "code"),)

    id: Mapped[str] = id_column("lbl")
    installation_id: Mapped[str] = mapped_column(ForeignKey("installations.id"))
    kind: Mapped[str] = mapped_column(String(40))
    code: Mapped[str] = mapped_column(String(200))
    label: Mapped[str] = mapped_column(String(100))
    updated_by: Mapped[str | None] = mapped_column(ForeignKey("operator_users.id"), nullable=True)
    updated_at: Mapped[datetime] = updated_at_column()
