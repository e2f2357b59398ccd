"""The unit of work: one transaction, its audit events, and what runs after commit.

Services open one with `unit_of_work()`, make their changes, record audit events
with `uow.audit(...)` and call `uow.commit()`. Leaving the block without commit
rolls everything back, so a rejected request changes no row. Audit events are
appended to the keyed hash chain just before the commit (AUD-1, AUD-2, REC-3) to
keep the chain lock short.
"""

from __future__ import annotations

import hashlib
import logging
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import datetime
from functools import cached_property
from typing import Any

from flask import current_app
from sqlalchemy import select, text
from sqlalchemy.orm import Session

from app.database import write_intent
from app.domain.audit_chain import GENESIS_HASH, KEYED, RECHAINED_ACTION, hash_scheme, key_id, keyed_row_hash
from app.domain.clock import iso, utcnow
from app.domain.digests import canonical_json
from app.extensions import db
from app.models import AuditEvent, new_id, statements
from app.models.base import attach_written, insert_known

log = logging.getLogger(__name__)


class AuditKeyConflict(RuntimeError):
    """Two different audit events were given one idempotency key (REC-5)."""


class AuditChainKeyMismatch(RuntimeError):
    """The chain's head was written under another AUDIT_CHAIN_KEY than this process has (REC-3)."""


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

    @cached_property
    def details_json(self) -> str:
        """The details as stored: canonical JSON (computed once: compared, hashed, written)."""
        return canonical_json(self.details)


def audit_row_hash(prev_hash: str, row: dict[str, Any], key: bytes) -> str:
    """Hash of an audit row chained to its predecessor under the chain key (AUD-2, REC-3)."""
    return keyed_row_hash(prev_hash, row, key)


def chain_key() -> bytes:
    """The app's ``AUDIT_CHAIN_KEY`` as bytes (REC-3)."""
    return current_app.config["AUDIT_CHAIN_KEY"].encode()


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


class RetryWithSavepoints(BaseException):  # noqa: N818 - a signal, not an error
    """A unit of work opened with ``savepoints=False`` met an error that a savepoint
    would have undone. The transaction can no longer be trusted in part: the caller
    rolls all of it back and runs the work again with savepoints.

    A BaseException, so that the ``except Exception`` that would have handled the
    error inside the savepoint does not swallow it and commit half a change."""


class UnitOfWork:
    def __init__(self, session: Session, savepoints: bool = True) -> None:
        self.session = session
        # Without savepoints a batch's happy path saves two round trips and a flush
        # per member; any error inside `savepoint()` then asks for the careful rerun.
        self.savepoints = savepoints
        self._later: dict[Any, list[dict[str, Any]]] = {}
        # What services add up in this transaction to write once at commit (a batch's budget takes).
        self.scratch: dict[str, Any] = {}
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
        """Record an audit event, written at commit (AUD-1, REC-5).

        Args:
            key: the idempotency key, naming the event's subject (e.g.
                ``action-result:{operation}:{cycle}:{receipt}``). An event whose key
                exists with the same content is not written again; with other
                content the commit raises ``AuditKeyConflict``.
            action: e.g. ``action.approved``.
            details: JSON-compatible details, stored as canonical JSON.
        """
        self._audits.append(PendingAudit(installation_id, key, action, actor, target_type, target_id, details))

    def after_commit(self, callback: Callable[[], Any]) -> None:
        """Run `callback` once the transaction committed (enqueue jobs, wake runs)."""
        self._after_commit.append(callback)

    def write_later(self, statement, params: dict[str, Any], *, every_row: bool = False) -> None:
        """Run a write that nothing in this transaction reads back, at commit: every
        such write of one prebuilt statement goes in one executemany round trip.
        With savepoints (where a rollback must undo it with its savepoint) it runs
        at once.

        The statements run in the order each was first deferred, so a row must not
        be written by two different deferred statements.

        Args:
            every_row: each write must change one row (a guarded UPDATE of a row
                this transaction locked): at commit, if they changed fewer, the
                transaction raises `RetryWithSavepoints` instead of committing.
        """
        if self.savepoints:
            statements.run(self.session, statement, params)
        else:
            self._later.setdefault((statement, every_row), []).append(params)

    def insert_known(self, model, values: dict[str, Any]):
        """`app.models.base.insert_known` in this unit of work: the row, as a persistent
        object, when it was inserted; None when its key existed.

        Without savepoints (a batch's first try) the INSERT … ON CONFLICT DO NOTHING
        goes out at commit with the others of its table (`write_later`) and the row
        is taken as new: use it only for a row no earlier transaction can have
        written (a delivery's resolution event: one per cycle, behind the guarded
        receipt write). Were one there, it would stay as it was.
        """
        if self.savepoints:
            return insert_known(self.session, model, values)
        self.insert_ignore_later(model, values)
        return attach_written(self.session, model, values)

    def insert_ignore_later(self, model, values: dict[str, Any]) -> None:
        """`app.models.insert_ignore` of a row nothing in this transaction reads back,
        at commit with the others of its table (`write_later`).

        Args:
            values: keyed by the mapped attributes' names.
        """
        statement = statements.insert_ignore_statement(model, statements.dialect_of(self.session), False)
        self.write_later(statement, statements.column_keys(model, values))

    def _run_later(self) -> None:
        later, self._later = self._later, {}
        for (statement, every_row), params in later.items():
            changed = statements.run(self.session, statement, params).rowcount
            if every_row and changed != len(params):
                raise RetryWithSavepoints()

    def before_commit(self, callback: Callable[[], Any]) -> None:
        """Run `callback` inside this transaction, just before it commits (wake-ups)."""
        self._before_commit.append(callback)

    @contextmanager
    def savepoint(self) -> Iterator[None]:
        """A nested transaction: on error its rows, audit events and callbacks (before
        and after commit) are undone and the unit of work carries on.

        Raises:
            RetryWithSavepoints: on any error, in a unit of work without savepoints.
        """
        if not self.savepoints:
            try:
                yield
            except Exception as error:
                raise RetryWithSavepoints() from error
            return
        audits, callbacks, wake_ups = len(self._audits), len(self._after_commit), len(self._before_commit)
        try:
            with self.session.begin_nested():
                yield
        except Exception:
            del self._audits[audits:]
            del self._after_commit[callbacks:]
            del self._before_commit[wake_ups:]
            raise

    def commit(self) -> None:
        self._run_later()
        while self._before_commit:
            self._before_commit.pop(0)()
        self._run_later()
        self._write_audits()
        self.session.commit()
        self.committed = True

    def _write_audits(self) -> None:
        """Append the pending events to their installations' chains (three round
        trips whatever their number: the lock, the keys already written, the tails).

        Raises:
            AuditKeyConflict: an event's key exists with other content (REC-5).
            AuditChainKeyMismatch: a chain's head was written under another key (REC-3).
        """
        if not self._audits:
            return
        session = self.session
        session.flush()
        installations = sorted({a.installation_id for a in self._audits})
        for installation_id in installations:
            _lock_chain(session, installation_id)
        keys = {a.key for a in self._audits}
        written = {
            row.idempotency_key: _content(row)
            for row in session.scalars(select(AuditEvent).where(AuditEvent.idempotency_key.in_(keys)))
        }
        tails = {installation_id: _chain_tail(session, installation_id) for installation_id in installations}
        key = chain_key()
        rows = []
        for pending in self._audits:
            content = _content(pending)
            if pending.key in written:
                if written[pending.key] != content:
                    differ = [
                        n for n, a, b in zip(CONTENT_FIELDS, written[pending.key], content, strict=True) if a != b
                    ]
                    raise AuditKeyConflict(
                        f"audit key {pending.key!r} exists with another {', '.join(differ)}: "
                        "two different changes must not share a key"
                    )
                continue
            written[pending.key] = content
            if _needs_anchor(tails[pending.installation_id], pending, key):
                rows.append(self._append(tails, _anchor(pending.installation_id, tails), key))
            rows.append(self._append(tails, pending, key))
        if rows:  # one executemany: no ORM objects to track, nothing reads them back here
            statements.run(session, statements.insert_statement(AuditEvent), rows)
        self._audits.clear()

    @staticmethod
    def _append(tails: dict[str, tuple[int, str]], pending: PendingAudit, key: bytes) -> dict[str, Any]:
        seq, prev_hash = tails[pending.installation_id]
        seq += 1
        details_json = pending.details_json
        row_hash = audit_row_hash(prev_hash, audit_hash_material(pending, seq, details_json), key)
        tails[pending.installation_id] = (seq, row_hash)
        return dict(
            id=new_id("aud"),
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


CONTENT_FIELDS = ("installation", "action", "actor type", "actor", "target type", "target", "details")


def _content(event: AuditEvent | PendingAudit) -> tuple:
    """What two events with one key must share to be the same event (REC-5)."""
    if isinstance(event, PendingAudit):
        actor = (event.actor.type, event.actor.id)
        return (
            event.installation_id,
            event.action,
            *actor,
            event.target_type,
            event.target_id,
            event.details_json,
        )
    return (
        event.installation_id,
        event.action,
        event.actor_type,
        event.actor_id,
        event.target_type,
        event.target_id,
        event.details_json,
    )


def _needs_anchor(tail: tuple[int, str], pending: PendingAudit, key: bytes) -> bool:
    """Whether a keyed row may follow this tail only after an ``audit.rechained`` row.

    Raises:
        AuditChainKeyMismatch: the tail is keyed under another key; appending would
            fork the chain between keys, so the process must be given the right key.
    """
    seq, prev_hash = tail
    if pending.action == RECHAINED_ACTION:  # the explicit anchor of `flask audit-rekey`
        if pending.details.get("previous_head") != prev_hash:
            raise RuntimeError("the audit chain moved on since it was verified; run the rekey again")
        return False
    scheme, tail_key_id = hash_scheme(prev_hash)
    if seq == 0:
        return False
    if scheme == KEYED:
        if tail_key_id != key_id(key):
            raise AuditChainKeyMismatch(
                f"the audit chain of installation {pending.installation_id} was written under key id "
                f"{tail_key_id}, but this process's AUDIT_CHAIN_KEY has key id {key_id(key)}; "
                "every web and worker process must share one AUDIT_CHAIN_KEY"
            )
        return False
    return True


def _anchor(installation_id: str, tails: dict[str, tuple[int, str]]) -> PendingAudit:
    """The ``audit.rechained`` row a first keyed write puts after unkeyed rows (REC-3)."""
    seq, prev_hash = tails[installation_id]
    return PendingAudit(
        installation_id,
        f"audit-rechained:{installation_id}:{seq}",
        RECHAINED_ACTION,
        Actor.system("audit"),
        "installation",
        installation_id,
        rechained_details(seq, prev_hash, verified=False),
    )


def rechained_details(seq: int, prev_hash: str, *, verified: bool) -> dict[str, Any]:
    """The details of an ``audit.rechained`` row sealing `seq` unkeyed rows ending in `prev_hash`."""
    return {"previous_rows": seq, "previous_head": prev_hash, "verified": verified}


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
def unit_of_work(savepoints: bool = True) -> Iterator[UnitOfWork]:
    """Open a unit of work on the app's session.

    Any read transaction still open on the session is ended first, so the writes
    start from fresh data (and take SQLite's write lock at BEGIN).

    Args:
        savepoints: False for a batch's first, optimistic try: `UnitOfWork.savepoint`
            then opens none and turns an error into `RetryWithSavepoints`.
    """
    session = db.session
    session.rollback()
    token = write_intent.set(True)
    uow = UnitOfWork(session, savepoints)
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
