"""What the operations screen shows: deliveries that need a person (dead letters by
connection and error code, CONN-4; stuck ones), queue depth and workers from RQ, and
the last sweep. Redis being down degrades this view, never the console."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

import redis
from rq import Queue, Worker
from rq.registry import FailedJobRegistry, ScheduledJobRegistry, StartedJobRegistry
from sqlalchemy import func, or_, select
from sqlalchemy.orm import aliased

from app.domain.clock import utcnow
from app.domain.dead_letters import list_digest
from app.extensions import db
from app.models import ActionProposal, ConnectionAttempt, SweepRun, WorkflowDispatchOutbox, predicates
from app.rq_workers import heartbeat_is_live
from app.services.lifecycle.dead_letter_retry import NO_CONNECTION, DeadLetterFilter, groups_statement, listed_statement

P = ActionProposal
A = ConnectionAttempt
OVERDUE_SECONDS = 300
LIMIT = 50


@dataclass
class QueueStatus:
    reachable: bool
    error: str | None = None
    queued: int = 0
    scheduled: int = 0
    started: int = 0
    failed: int = 0
    workers: list[dict[str, Any]] = field(default_factory=list)

    @property
    def live_workers(self) -> int:
        return sum(1 for w in self.workers if w["live"])


@dataclass(frozen=True)
class PlatformAnswer:
    """What the platform answered to a delivery's last failed attempt (QUEUE-6):
    its HTTP status (None when nothing answered) and the start of its body."""

    error_code: str | None
    status: int | None
    excerpt: str | None


@dataclass(frozen=True)
class DeadLetterGroup:
    """Dead letters of one connection with one error code (CONN-4)."""

    connection_id: str  # NO_CONNECTION for components without a connection
    connection_name: str | None
    error_code: str | None
    count: int
    oldest: datetime | None


@dataclass(frozen=True)
class DeadLetter:
    proposal: ActionProposal
    connection_id: str
    connection_name: str | None


@dataclass
class DeadLetters:
    """What the dead-letter section lists for a filter, and the digest of exactly
    that list, which a bulk retry must confirm (CONN-4)."""

    where: DeadLetterFilter
    groups: list[DeadLetterGroup]
    listed: list[DeadLetter]
    matching: int  # how many match the filter; at most LIST_LIMIT are listed
    digest: str

    @property
    def total(self) -> int:
        return sum(group.count for group in self.groups)


@dataclass
class OperationsView:
    failed: list[ActionProposal]  # the dead letters listed
    stuck: list[ActionProposal]
    failed_dispatches: int
    retrying: list[ActionProposal]  # failed, will retry: next attempt soonest first (QUEUE-6)
    retrying_answers: dict[str, PlatformAnswer]  # proposal id -> its last failed attempt's answer
    queue: QueueStatus
    last_sweep: SweepRun | None
    last_sweep_counts: dict[str, int]
    sweep_lag_seconds: float | None
    dead_letters: DeadLetters | None = None


def queue_status(queue: Queue, worker_ttl_seconds: int, now: datetime | None = None) -> QueueStatus:
    """Depth of a queue and the workers serving it, from RQ.

    Args:
        queue: the RQ queue.
        worker_ttl_seconds: the workers' TTL (``WORKER_TTL_SECONDS``): a worker
            whose last heartbeat is older than that plus a grace is shown dead.
        now: the time to judge heartbeats by (UTC); defaults to now.
    """
    now = now or utcnow()
    try:
        connection = queue.connection
        workers = [
            {
                "name": w.name,
                "live": heartbeat_is_live(w.last_heartbeat, worker_ttl_seconds, now),
                "state": w.get_state(),
                "current_job": w.get_current_job_id(),
                "last_heartbeat": w.last_heartbeat,
                "successful": w.successful_job_count,
                "failed": w.failed_job_count,
            }
            for w in Worker.all(queue=queue)
        ]
        return (
            QueueStatus(
                reachable=True,
                queued=queue.count,
                scheduled=ScheduledJobRegistry(queue=queue).count,
                started=StartedJobRegistry(queue=queue).count,
                failed=FailedJobRegistry(queue=queue).count,
                workers=sorted(workers, key=lambda w: w["name"]),
            )
            if connection.ping()
            else QueueStatus(False, "no answer")
        )
    except (redis.RedisError, OSError) as error:
        return QueueStatus(reachable=False, error=f"{type(error).__name__}: {error}"[:200])


def dead_letters(installation_id: str, where: DeadLetterFilter | None = None) -> DeadLetters:
    """Terminal delivery failures grouped by connection and error code, and those the
    filter lists (oldest first, at most LIST_LIMIT) with the digest of that list
    (CONN-4). Two queries whatever the number of rows.

    Args:
        installation_id: the operator's installation.
        where: connection (``"none"``: without one) and error code, each optional.
    """
    where = where or DeadLetterFilter()
    groups = sorted(
        (
            DeadLetterGroup(connection_id or NO_CONNECTION, name, code, count, oldest)
            for connection_id, name, code, count, oldest in db.session.execute(groups_statement(installation_id))
        ),
        key=lambda g: (g.connection_name or "", g.connection_id, g.error_code or ""),
    )
    listed = [
        DeadLetter(proposal, connection_id or NO_CONNECTION, name)
        for proposal, connection_id, name in db.session.execute(listed_statement(installation_id, where))
    ]
    matching = sum(
        g.count
        for g in groups
        if where.connection_id in (None, "", g.connection_id) and where.error_code in (None, "", g.error_code)
    )
    return DeadLetters(
        where=where,
        groups=groups,
        listed=sorted(listed, key=lambda d: (d.connection_name or "", d.proposal.last_error_code or "")),
        matching=matching,
        digest=list_digest((d.proposal.id, d.proposal.delivery_cycle) for d in listed),
    )


def last_failed_attempt_id():
    """A scalar subquery, correlated with the outer ActionProposal: the id of its
    latest attempt that ended in an error (newest cycle, then attempt), or NULL (QUEUE-6)."""
    inner = aliased(ConnectionAttempt)
    return (
        select(inner.id)
        .where(inner.proposal_id == P.id, inner.error_code.is_not(None))
        .order_by(inner.delivery_cycle.desc(), inner.attempt_number.desc(), inner.started_at.desc())
        .limit(1)
        .correlate(P)
        .scalar_subquery()
    )


def operations_view(
    installation_id: str,
    queue: Queue,
    worker_ttl_seconds: int,
    now: datetime | None = None,
    dead_letter_filter: DeadLetterFilter | None = None,
) -> OperationsView:
    """Dead letters and stuck deliveries of one installation, queue status, last sweep.

    Args:
        dead_letter_filter: which dead letters to list (CONN-4); all by default.
    """
    now = now or utcnow()
    overdue = now - timedelta(seconds=OVERDUE_SECONDS)
    mine = P.installation_id == installation_id
    dead = dead_letters(installation_id, dead_letter_filter)
    stuck = db.session.scalars(
        select(P)
        .where(
            mine,
            # claimable yet not claimed: a lease over now, or due for five minutes (DLV-1)
            or_(predicates.lease_expired(now), predicates.due(overdue)),
        )
        .order_by(P.next_attempt_at)
        .limit(LIMIT)
    ).all()
    retrying = db.session.execute(
        select(P, A.error_code, A.response_status, A.response_excerpt)
        .outerjoin(A, A.id == last_failed_attempt_id())  # in the same query: no query per row
        .where(mine, P.state == "failed", P.delivery_terminal.is_(False))
        .order_by(P.next_attempt_at)
        .limit(LIMIT)
    ).all()
    failed_dispatches = db.session.scalar(
        select(func.count())
        .select_from(WorkflowDispatchOutbox)
        .where(WorkflowDispatchOutbox.installation_id == installation_id, WorkflowDispatchOutbox.state == "failed")
    )
    last = db.session.scalar(select(SweepRun).order_by(SweepRun.started_at.desc()).limit(1))
    return OperationsView(
        failed=[d.proposal for d in dead.listed],
        stuck=list(stuck),
        failed_dispatches=failed_dispatches or 0,
        retrying=[row[0] for row in retrying],
        retrying_answers={row[0].id: PlatformAnswer(*row[1:]) for row in retrying},
        queue=queue_status(queue, worker_ttl_seconds, now),
        last_sweep=last,
        last_sweep_counts=last.counts if last else {},
        sweep_lag_seconds=(now - last.started_at).total_seconds() if last else None,
        dead_letters=dead,
    )
