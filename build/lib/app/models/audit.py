"""The append-only, hash-chained audit log (SPEC AUD)."""

from __future__ import annotations

import json
from datetime import datetime
from typing import Any

from sqlalchemy import ForeignKey, Index, String, Text, UniqueConstraint
from sqlalchemy.orm import Mapped, mapped_column

from .base import Base, created_at_column, id_column


class AuditEvent(Base):
    """One state change: who did what to which row, with canonical details.

    `seq` numbers an installation's events; `prev_hash` is the previous event's
    `row_hash`, an HMAC under ``AUDIT_CHAIN_KEY`` (``hmac-sha256:{key id}:{hex}``;
    ``sha256:{hex}`` for rows from before the key), so removing or editing a row
    breaks the chain (AUD-2, REC-3). The database refuses UPDATE, DELETE, TRUNCATE
    and REPLACE on this table (triggers in migrations 0001 and 0003, REC-1).

    `details_json` stays plain text, unlike the other ``*_json`` columns: the row
    hash covers these stored characters, so the chain check must read them as they
    are, not a value re-serialised on the way out.
    """

    __tablename__ = "audit_events"
    __table_args__ = (
        UniqueConstraint("installation_id", "seq"),
        Index("ix_audit_events_target", "target_type", "target_id", "seq"),
    )

    id: Mapped[str] = id_column("aud")
    installation_id: Mapped[str] = mapped_column(ForeignKey("installations.id"))
    seq: Mapped[int] = mapped_column()
    idempotency_key: Mapped[str] = mapped_column(String(900), unique=True)
    action: Mapped[str] = mapped_column(String(100))
    actor_type: Mapped[str] = mapped_column(String(30))  # operator, system, service_identity
    actor_id: Mapped[str] = mapped_column(String(700))
    target_type: Mapped[str] = mapped_column(String(50))
    target_id: Mapped[str] = mapped_column(String(700))
    details_json: Mapped[str] = mapped_column(Text)
    prev_hash: Mapped[str] = mapped_column(String(100))
    row_hash: Mapped[str] = mapped_column(String(100))
    created_at: Mapped[datetime] = created_at_column()

    @property
    def details(self) -> dict[str, Any]:
        return json.loads(self.details_json)
