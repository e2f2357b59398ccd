"""The unit of work: one transaction, its audit events, and what runs after commit.

Services open one with `unit_of_work()`, make their changes, record audit events
with `uow.audit(...)` and call `uow.commit()`. Leaving the block without commit
rolls everything back, so a rejected request changes no row. Audit events are
appended to the hash chain just before the commit (AUD-1, AUD-2) to keep the chain
lock short.
"""

from __future__ import annotations

import hashlib
import logging
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from sqlalchemy import select, text
from sqlalchemy.orm import Session

from app.database import write_intent
from app.domain.clock import iso, utcnow
from app.domain.digests import canonical_json, sha256_hex
from app.extensions import db
from app.models import AuditEvent

log = logging.getLogger(__name__)

GENESIS_HASH = "sha256:" + "0" * 64


@dataclass(frozen=True)
class Actor:
    """Who caused a change: an operator, the system, or a platform (service identity)."""

    type: str
    id: str

    @classmethod
    def system(cls, id: str = "system") -> Actor:
        return cls("system", id)


@dataclass
class PendingAudit:
    installation_id: str
    key: str
    action: str
    actor: Actor
    target_type: str
    target_id: str
    details: dict[str, Any]
    created_at: datetime = field(default_factory=utcnow)


def audit_row_hash(prev_hash: str, row: dict[str, Any]) -> str:
    """Hash of an audit row chained to its predecessor (AUD-2)."""
    return "sha256:" + sha256_hex(prev_hash + "\n" + canonical_json(row))


def audit_hash_material(event: AuditEvent | PendingAudit, seq: int, details_json: str) -> dict:
    """The fields an audit row's hash covers."""
    actor_type = event.actor.type if isinstance(event, PendingAudit) else event.actor_type
    actor_id = event.actor.id if isinstance(event, PendingAudit) else event.actor_id
    key = event.key if isinstance(event, PendingAudit) else event.idempotency_key
    return {
        "installation_id": event.installation_id,
        "seq": seq,
        "idempotency_key": key,
        "action": event.action,
        "actor_type": actor_type,
        "actor_id": actor_id,
        "target_type": event.target_type,
        "target_id": event.target_id,
        "details_json": details_json,
        "created_at": iso(event.created_at),
    }


class UnitOfWork:
    def __init__(self, session: Session) -> None:
        self.session = session
        self._audits: list[PendingAudit] = []
        self._before_commit: list[Callable[[], Any]] = []
        self._after_commit: list[Callable[[], Any]] = []
        self.committed = False

    def audit(
        self,
        installation_id: str,
        key: str,
        action: str,
        actor: Actor,
        target_type: str,
        target_id: str,
        details: dict[str, Any],
    ) -> None:
        """Record an audit event, written at commit (AUD-1).

        Args:
            key: the idempotency key; an event whose key exists is not written again.
            action: e.g. ``action.approved``.
            details: JSON-compatible details, stored as canonical JSON.
        """
        self._audits.append(PendingAudit(installation_id, key, action, actor, target_type, target_id, details))

    def after_commit(self, callback: Callable[[], Any]) -> None:
        """Run `callback` once the transaction committed (enqueue jobs, wake runs)."""
        self._after_commit.append(callback)

    def before_commit(self, callback: Callable[[], Any]) -> None:
        """Run `callback` inside this transaction, just before it commits (wake-ups)."""
        self._before_commit.append(callback)

    @contextmanager
    def savepoint(self) -> Iterator[None]:
        """A nested transaction: on error its rows, audit events and callbacks are undone
        and the unit of work carries on."""
        audits, callbacks = len(self._audits), len(self._after_commit)
        try:
            with self.session.begin_nested():
                yield
        except Exception:
            del self._audits[audits:]
            del self._after_commit[callbacks:]
            raise

    def commit(self) -> None:
        while self._before_commit:
            self._before_commit.pop(0)()
        self._write_audits()
        self.session.commit()
        self.committed = True

    def _write_audits(self) -> None:
        """Append the pending events to their installations' chains (three round
        trips whatever their number: the lock, the keys already written, the tails)."""
        if not self._audits:
            return
        session = self.session
        session.flush()
        installations = sorted({a.installation_id for a in self._audits})
        for installation_id in installations:
            _lock_chain(session, installation_id)
        keys = {a.key for a in self._audits}
        written = set(session.scalars(select(AuditEvent.idempotency_key).where(AuditEvent.idempotency_key.in_(keys))))
        tails = {installation_id: _chain_tail(session, installation_id) for installation_id in installations}
        rows = []
        for pending in self._audits:
            if pending.key in written:
                continue
            written.add(pending.key)
            seq, prev_hash = tails[pending.installation_id]
            seq += 1
            details_json = canonical_json(pending.details)
            row_hash = audit_row_hash(prev_hash, audit_hash_material(pending, seq, details_json))
            tails[pending.installation_id] = (seq, row_hash)
            rows.append(
                AuditEvent(
                    installation_id=pending.installation_id,
                    seq=seq,
                    idempotency_key=pending.key,
                    action=pending.action,
                    actor_type=pending.actor.type,
                    actor_id=pending.actor.id,
                    target_type=pending.target_type,
                    target_id=pending.target_id,
                    details_json=details_json,
                    prev_hash=prev_hash,
                    row_hash=row_hash,
                    created_at=pending.created_at,
                )
            )
        session.add_all(rows)
        session.flush()
        self._audits.clear()

    def run_after_commit(self) -> None:
        """Run the after-commit callbacks in order. One that fails is logged with its
        name and traceback and the others still run: the commit stands, and the sweeps
        repair what the failed one left undone (an enqueue, EVT-3)."""
        callbacks, self._after_commit = self._after_commit, []
        for callback in callbacks:
            try:
                callback()
            except Exception:
                log.exception("after-commit callback %s failed", getattr(callback, "__qualname__", repr(callback)))


def _chain_tail(session: Session, installation_id: str) -> tuple[int, str]:
    """(seq, row_hash) of an installation's last audit event, or the genesis."""
    last = session.execute(
        select(AuditEvent.seq, AuditEvent.row_hash)
        .where(AuditEvent.installation_id == installation_id)
        .order_by(AuditEvent.seq.desc())
        .limit(1)
    ).first()
    return (last.seq, last.row_hash) if last else (0, GENESIS_HASH)


def _lock_chain(session: Session, installation_id: str) -> None:
    """Serialise appends to one installation's chain. SQLite's write lock already does."""
    if session.get_bind().dialect.name != "postgresql":
        return
    key = int.from_bytes(hashlib.sha256(installation_id.encode()).digest()[:8], "big", signed=True)
    session.execute(text("SELECT pg_advisory_xact_lock(:key)"), {"key": key})


@contextmanager
def unit_of_work() -> Iterator[UnitOfWork]:
    """Open a unit of work on the app's session.

    Any read transaction still open on the session is ended first, so the writes
    start from fresh data (and take SQLite's write lock at BEGIN).
    """
    session = db.session
    session.rollback()
    token = write_intent.set(True)
    uow = UnitOfWork(session)
    try:
        yield uow
    except BaseException:
        session.rollback()
        raise
    else:
        if not uow.committed:
            session.rollback()
    finally:
        write_intent.reset(token)
        if uow.committed:  # also when the block failed after its commit: what committed is durable
            uow.run_after_commit()
