"""Reading and verifying the audit log (SPEC AUD-2)."""

from __future__ import annotations

from dataclasses import dataclass

from sqlalchemy import select

from app.extensions import db
from app.models import AuditEvent

from .uow import GENESIS_HASH, audit_hash_material, audit_row_hash


@dataclass(frozen=True)
class ChainReport:
    installation_id: str
    rows_checked: int
    first_broken_seq: int | None
    reason: str | None

    @property
    def ok(self) -> bool:
        return self.first_broken_seq is None


def verify_chain(installation_id: str, batch: int = 5000) -> ChainReport:
    """Walk an installation's audit chain and report the first broken row.

    A row is broken when its sequence skips, its ``prev_hash`` is not the previous
    row's hash, or its own hash does not match its contents.
    """
    expected_seq, prev_hash, checked = 1, GENESIS_HASH, 0
    last_seq = 0
    while True:
        rows = db.session.scalars(
            select(AuditEvent)
            .where(AuditEvent.installation_id == installation_id, AuditEvent.seq > last_seq)
            .order_by(AuditEvent.seq)
            .limit(batch)
        ).all()
        if not rows:
            return ChainReport(installation_id, checked, None, None)
        for row in rows:
            checked += 1
            if row.seq != expected_seq:
                return ChainReport(installation_id, checked, expected_seq, "missing row")
            if row.prev_hash != prev_hash:
                return ChainReport(installation_id, checked, row.seq, "previous hash does not match")
            if row.row_hash != audit_row_hash(prev_hash, audit_hash_material(row, row.seq, row.details_json)):
                return ChainReport(installation_id, checked, row.seq, "row contents changed")
            prev_hash, expected_seq, last_seq = row.row_hash, row.seq + 1, row.seq
