"""Queues' time-to-decide targets (SPEC QUEUE-4), set by one admin: a target only
marks what is overdue and changes no action (`SINGLE_ADMIN_WRITES`), audited."""

from __future__ import annotations

from dataclasses import dataclass

from sqlalchemy import select

from app.domain.errors import ApiError
from app.domain.time_targets import parse_target
from app.extensions import db
from app.models import OperatorUser, Queue
from app.models.base import new_id
from app.services.uow import Actor, unit_of_work


@dataclass(frozen=True)
class QueueTarget:
    slug: str
    name: str
    seconds: int | None


def queue_targets_table(installation_id: str) -> list[QueueTarget]:
    """Every queue of the installation with its target, by name."""
    rows = db.session.execute(select(Queue.slug, Queue.name, Queue.decide_within_seconds)
                              .where(Queue.installation_id == installation_id).order_by(Queue.name)).all()
    return [QueueTarget(*row) for row in rows]


def set_queue_target(operator: OperatorUser, slug: str, target: str | None) -> int | None:
    """Set (or clear) a queue's time to decide (QUEUE-4); audited ``queue.target_set``
    with the value before and after.

    Args:
        operator: an admin of the queue's installation.
        slug: the queue's slug.
        target: ``90m``, ``4h``, ``2d``, a number of minutes, or empty for none.

    Returns:
        The target in seconds (None: no target).

    Raises:
        ApiError: 403 ``forbidden`` (not an admin); 404 ``queue_not_found``; 400
            ``queue_required``, ``queue_target_invalid``. Nothing changes.
    """
    if not operator.has_role("admin"):
        raise ApiError(403, "forbidden", "Only an admin sets a queue's time to decide.")
    seconds = parse_target(target)
    if not (slug or "").strip():
        raise ApiError(400, "queue_required", "Choose a queue.", "queue")
    with unit_of_work() as uow:
        queue = uow.session.scalar(select(Queue).where(
            Queue.installation_id == operator.installation_id, Queue.slug == (slug or "").strip()).with_for_update())
        if queue is None:
            raise ApiError(404, "queue_not_found", "No queue with that slug.", "queue")
        before = queue.decide_within_seconds
        queue.decide_within_seconds = seconds
        key = f"queue-target:{queue.id}:{operator.id}:{new_id('set')}"
        uow.audit(operator.installation_id, key, "queue.target_set", Actor("operator", operator.id), "queue",
                  queue.id, {"slug": queue.slug, "before_seconds": before, "after_seconds": seconds})
        uow.commit()
    return seconds
