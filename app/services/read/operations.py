"""What the operations screen shows: deliveries that need a person, queue depth and
workers from RQ, and the last sweep. Redis being down degrades this view, never
the console."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

import redis
from rq import Queue, Worker
from rq.registry import FailedJobRegistry, ScheduledJobRegistry, StartedJobRegistry
from sqlalchemy import and_, func, or_, select

from app.domain.clock import utcnow
from app.domain.states import ProposalState
from app.extensions import db
from app.models import ActionProposal, SweepRun, WorkflowDispatchOutbox
from app.rq_workers import heartbeat_is_live

P = ActionProposal
S = ProposalState
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


@dataclass
class OperationsView:
    failed: list[ActionProposal]
    stuck: list[ActionProposal]
    failed_dispatches: int
    queue: QueueStatus
    last_sweep: SweepRun | None
    last_sweep_counts: dict[str, int]
    sweep_lag_seconds: float | None


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


def operations_view(
    installation_id: str, queue: Queue, worker_ttl_seconds: int, now: datetime | None = None
) -> OperationsView:
    """Failed and stuck deliveries of one installation, queue status, last sweep."""
    now = now or utcnow()
    overdue = now - timedelta(seconds=OVERDUE_SECONDS)
    mine = P.installation_id == installation_id
    failed = db.session.scalars(
        select(P)
        .where(mine, P.state == S.FAILED, P.delivery_terminal.is_(True))
        .order_by(P.updated_at.desc())
        .limit(LIMIT)
    ).all()
    stuck = db.session.scalars(
        select(P)
        .where(
            mine,
            P.delivery_terminal.is_(False),
            or_(
                and_(P.state == S.APPLYING, P.lease_expires_at <= now),
                and_(P.state.in_([S.QUEUED, S.FAILED]), P.next_attempt_at <= overdue),
            ),
        )
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
        failed=list(failed),
        stuck=list(stuck),
        failed_dispatches=failed_dispatches or 0,
        queue=queue_status(queue, worker_ttl_seconds, now),
        last_sweep=last,
        last_sweep_counts=last.counts if last else {},
        sweep_lag_seconds=(now - last.started_at).total_seconds() if last else None,
    )
