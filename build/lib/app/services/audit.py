"""Verifying the audit log, and its checkpoints outside the database (SPEC AUD-2, REC-3, REC-4).

A checkpoint is one JSON line per installation: its chain head (last sequence, head
hash, row count, time), signed under the chain key. Lines are appended to a file
(``AUDIT_CHECKPOINT_PATH``, default ``instance/audit-checkpoints.jsonl``) and written
to the log stream, from where they should be shipped to storage that the database's
administrators cannot rewrite. ``verify_chain`` checked against them tells a cut tail
and rows rewritten under the key from an intact chain.
"""

from __future__ import annotations

import fcntl
import json
import logging
import os
import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from flask import current_app
from sqlalchemy import func, select

from app.domain.audit_chain import (
    GENESIS_HASH,
    KEYED,
    LEGACY,
    RECHAINED_ACTION,
    ChainReport,
    ChainWalk,
    Checkpoint,
    hash_scheme,
    read_checkpoint,
    sign_checkpoint,
)
from app.domain.clock import iso, utcnow
from app.domain.digests import canonical_json
from app.extensions import db
from app.models import AuditEvent, Installation

from .uow import Actor, audit_hash_material, chain_key, rechained_details, unit_of_work

log = logging.getLogger(__name__)


# What the walk reads: plain rows, not ORM objects (a third of the time per row).
CHAIN_COLUMNS = tuple(
    getattr(AuditEvent, name)
    for name in (
        "installation_id",
        "seq",
        "idempotency_key",
        "action",
        "actor_type",
        "actor_id",
        "target_type",
        "target_id",
        "details_json",
        "prev_hash",
        "row_hash",
        "created_at",
    )
)


def verify_chain(installation_id: str, checkpoints: Iterable[Checkpoint] = (), batch: int = 5000) -> ChainReport:
    """Walk an installation's audit chain under the chain key and report the first problem.

    Args:
        installation_id: the chain to walk.
        checkpoints: that installation's checkpoints (``read_checkpoints``); each
            must agree with the row at its sequence, and none may lie beyond the head.
        batch: rows read per query.

    Returns:
        A ``ChainReport``; ``ok`` when every row, link and checkpoint agrees (REC-3,
        REC-4). Rows hashed before the chain was keyed must be sealed by an
        ``audit.rechained`` row (``flask audit-rekey``).
    """
    walk = ChainWalk(installation_id, chain_key(), tuple(checkpoints))
    last_seq = 0
    while not walk.broken:
        rows = db.session.execute(
            select(*CHAIN_COLUMNS)
            .where(AuditEvent.installation_id == installation_id, AuditEvent.seq > last_seq)
            .order_by(AuditEvent.seq)
            .limit(batch)
        ).all()
        if not rows:
            break
        for row in rows:
            material = audit_hash_material(row, row.seq, row.details_json)
            walk.feed(row.seq, row.action, row.prev_hash, row.row_hash, material)
        last_seq = rows[-1].seq
    db.session.rollback()
    return walk.finish()


# -- checkpoints ---------------------------------------------------------------------------


def checkpoint_path() -> Path:
    """Where this app appends checkpoints (``AUDIT_CHECKPOINT_PATH`` or the instance folder)."""
    configured = current_app.config.get("AUDIT_CHECKPOINT_PATH")
    return Path(configured or Path(current_app.config["INSTANCE_PATH"]) / "audit-checkpoints.jsonl")


@dataclass(frozen=True)
class Head:
    installation_id: str
    seq: int
    head_hash: str
    rows: int


def chain_head(installation_id: str) -> Head:
    """An installation's last sequence, its hash and the row count, read in one statement."""
    rows, seq = db.session.execute(
        select(func.count(), func.coalesce(func.max(AuditEvent.seq), 0)).where(
            AuditEvent.installation_id == installation_id
        )
    ).one()
    head_hash = GENESIS_HASH
    if seq:
        head_hash = db.session.scalar(
            select(AuditEvent.row_hash).where(AuditEvent.installation_id == installation_id, AuditEvent.seq == seq)
        )
    return Head(installation_id, seq, head_hash, rows)


def _append_line(path: Path, line: str) -> None:
    """Append one line in a single write under an exclusive lock, then fsync it."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o640)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        os.write(fd, (line + "\n").encode())
        os.fsync(fd)
    finally:
        os.close(fd)


def write_checkpoint(head: Head) -> dict[str, Any]:
    """Sign `head`, append it to the checkpoint file and write it to the log stream (REC-4).

    Returns:
        The signed checkpoint (see ``app.domain.audit_chain.sign_checkpoint``).

    Raises:
        OSError: when the checkpoint file cannot be written.
    """
    record = sign_checkpoint(head.installation_id, head.seq, head.head_hash, head.rows, iso(utcnow()), chain_key())
    line = canonical_json(record)
    _append_line(checkpoint_path(), line)
    log.info("audit checkpoint %s", line, extra={"audit_checkpoint": record})
    return record


def write_checkpoints(installation_ids: Iterable[str] | None = None) -> list[dict[str, Any]]:
    """Write a checkpoint of every installation's chain head now (``flask audit-checkpoint``).

    Args:
        installation_ids: only these; default every installation.
    """
    ids = list(installation_ids) if installation_ids is not None else list(installation_slugs())
    heads = [chain_head(installation_id) for installation_id in ids]
    db.session.rollback()
    records = [write_checkpoint(head) for head in heads]
    for record in records:
        _last_checkpoint[(str(checkpoint_path()), record["installation_id"])] = _Seen(
            record["seq"], record["head_hash"], time.monotonic()
        )
    return records


@dataclass(frozen=True)
class _Seen:
    seq: int
    head_hash: str
    at: float


# (checkpoint file, installation) -> the last checkpoint this process wrote there.
_last_checkpoint: dict[tuple[str, str], _Seen] = {}


def write_due_checkpoints() -> int:
    """The sweep's step (REC-4): a checkpoint of each chain whose head moved since this
    process's last one, at most every ``AUDIT_CHECKPOINT_INTERVAL_SECONDS``, and one of
    each chain when the process starts. A head that went backwards is logged as an error.

    Returns:
        How many checkpoints were written.
    """
    interval = current_app.config["AUDIT_CHECKPOINT_INTERVAL_SECONDS"]
    path = str(checkpoint_path())
    now = time.monotonic()
    due = []
    for installation_id in installation_slugs():
        seen = _last_checkpoint.get((path, installation_id))
        if seen is not None and (now - seen.at < interval):
            continue
        head = chain_head(installation_id)
        if head.seq == 0 or (seen is not None and (head.seq, head.head_hash) == (seen.seq, seen.head_hash)):
            continue
        if seen is not None:
            _warn_if_rewound(installation_id, seen, head)
        due.append(head)
    db.session.rollback()
    for head in due:
        write_checkpoint(head)
        _last_checkpoint[(path, head.installation_id)] = _Seen(head.seq, head.head_hash, now)
    return len(due)


def _warn_if_rewound(installation_id: str, seen: _Seen, head: Head) -> None:
    """Log an error when rows this process checkpointed are gone or changed."""
    then = db.session.scalar(
        select(AuditEvent.row_hash).where(AuditEvent.installation_id == installation_id, AuditEvent.seq == seen.seq)
    )
    if then != seen.head_hash:
        log.error(
            "audit chain of %s no longer holds the head of its last checkpoint (seq %s): cut or rewritten",
            installation_id,
            seen.seq,
            extra={"installation_id": installation_id, "checkpoint_seq": seen.seq, "head_seq": head.seq},
        )


@dataclass
class CheckpointFile:
    """The checkpoints read from files, by installation, and the lines that were not valid."""

    by_installation: dict[str, list[Checkpoint]] = field(default_factory=dict)
    problems: list[str] = field(default_factory=list)
    lines: int = 0


def read_checkpoints(paths: Iterable[Path]) -> CheckpointFile:
    """Read and check checkpoints from JSON-lines files (REC-4).

    Args:
        paths: checkpoint files, or log exports holding one checkpoint per line
            (a log record with an ``audit_checkpoint`` field). Blank lines are skipped.

    Returns:
        A ``CheckpointFile``; a line that is not a validly signed checkpoint is a
        problem (``file:line: reason``), since nobody else writes these files.
    """
    found = CheckpointFile()
    key = chain_key()
    for path in paths:
        with open(path, encoding="utf-8") as handle:
            for number, line in enumerate(handle, 1):
                if not line.strip():
                    continue
                found.lines += 1
                try:
                    checkpoint = read_checkpoint(json.loads(line), key)
                except ValueError as error:  # json.JSONDecodeError is a ValueError
                    found.problems.append(f"{path}:{number}: {error}")
                    continue
                found.by_installation.setdefault(checkpoint.installation_id, []).append(checkpoint)
    return found


# -- keying an unkeyed chain ----------------------------------------------------------------


class RekeyRefused(Exception):
    """The chain cannot be sealed under the key (see the message)."""


def rekey_chain(installation_id: str) -> dict[str, Any]:
    """Seal a chain written before it was keyed (``flask audit-rekey``, REC-3).

    Verifies the unkeyed rows first, then appends an ``audit.rechained`` row under
    the key that links to their head, so changing any of them breaks the keyed chain.
    The rows themselves stay as they are (the table is append-only).

    Returns:
        The details of the ``audit.rechained`` row.

    Raises:
        RekeyRefused: the chain is empty, already keyed, or broken.
    """
    head = chain_head(installation_id)
    db.session.rollback()
    scheme, _ = hash_scheme(head.head_hash)
    if head.seq == 0:
        raise RekeyRefused("the chain is empty; new rows are keyed")
    if scheme == KEYED:
        raise RekeyRefused("the chain is keyed already")
    report = verify_chain(installation_id)
    if scheme != LEGACY or report.first_broken_seq is not None:
        raise RekeyRefused(f"the unkeyed chain is broken at seq {report.first_broken_seq}: {report.reason}")
    details = rechained_details(head.seq, head.head_hash, verified=True)
    with unit_of_work() as uow:
        uow.audit(
            installation_id,
            f"audit-rechained:{installation_id}:{head.seq}",
            RECHAINED_ACTION,
            Actor.system("cli"),
            "installation",
            installation_id,
            details,
        )
        uow.commit()
    return details


def installation_slugs() -> dict[str, str]:
    """id -> slug of every installation, by slug."""
    return dict(db.session.execute(select(Installation.id, Installation.slug).order_by(Installation.slug)).all())
