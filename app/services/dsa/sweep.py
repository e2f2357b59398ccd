"""Submitting statements of reasons from the periodic sweep (SPEC §7 DSA-3).

Every sweep (`app.services.lifecycle.sweeps.run_sweeps`, every
``SWEEP_INTERVAL_SECONDS``) sends the pending statements of each installation whose
DSA settings are on and name a Transparency Database connection that can be used
(`connection.endpoint_status`), at most `SWEEP_MAX_BATCHES` batches per
installation per sweep. Why a sweep and not a job per statement: statements are
built in the applied receipt's transaction, many at a time under bulk actions, and
the database wants them in batches of 100; a sweep batches them naturally, and a
statement whose job was lost is sent by the next sweep anyway.

When the database asks to wait (429 with ``Retry-After``, 5xx, no answer, a wrong
token, egress refusing), the run stops and the installation is held for that long:
a key in Redis with that time to live, so the next sweeps send nothing until it
expires. Like the rate limit (CONN-2) the hold is politeness, not safety: losing it
costs one early request, and a Redis error lets the sweep send (logged). Two sweeps
at once are safe: statements are claimed by a guarded UPDATE (`submission._claim`).
"""

from __future__ import annotations

import json
import logging
import time
from dataclasses import dataclass
from datetime import UTC, datetime

import redis
from sqlalchemy import select

from app.domain.dsa_answers import StatementState
from app.extensions import db
from app.models import DsaStatement

from .connection import endpoint_status
from .settings import current_settings
from .submission import SubmissionRun, submit_pending

log = logging.getLogger(__name__)
HOLD_PREFIX = "console:dsa:hold:"
SWEEP_MAX_BATCHES = 20  # 2,000 statements per installation per sweep
MAX_HOLD_SECONDS = 3600.0
MIN_HOLD_SECONDS = 1.0


@dataclass(frozen=True)
class Hold:
    """An installation's submissions held back (DSA-3).

    Attributes:
        until: when the hold ends, epoch seconds.
        error: why (``tdb_rate_limited``, ``tdb_unavailable``, ``tdb_unauthorized``,
            ``egress_host_not_allowed``, ...).
    """

    until: float
    error: str | None

    @property
    def until_at(self) -> datetime:
        """When the hold ends (UTC)."""
        return datetime.fromtimestamp(self.until, UTC)


def _redis():
    from app.queueing import get_redis

    return get_redis()


def hold_of(installation_id: str, client=None) -> Hold | None:
    """The hold on `installation_id`'s submissions, or None (none, or Redis down:
    logged) (DSA-3)."""
    try:
        raw = (client or _redis()).get(HOLD_PREFIX + installation_id)
    except redis.RedisError:
        log.warning("DSA submission hold of %s unavailable", installation_id, exc_info=True)
        return None
    if not raw:
        return None
    try:
        value = json.loads(raw)
        return Hold(float(value["until"]), value.get("error"))
    except (ValueError, KeyError, TypeError):
        return None


def hold(installation_id: str, seconds: float, error: str | None, client=None) -> None:
    """Hold `installation_id`'s submissions for `seconds` (bounded to 1 s .. 1 h),
    because of `error` (DSA-3). A Redis error is logged, never raised."""
    seconds = min(max(float(seconds), MIN_HOLD_SECONDS), MAX_HOLD_SECONDS)
    value = json.dumps({"until": time.time() + seconds, "error": error})
    try:
        (client or _redis()).set(HOLD_PREFIX + installation_id, value, px=int(seconds * 1000))
    except redis.RedisError:
        log.warning("could not hold DSA submissions of %s", installation_id, exc_info=True)


def installations_with_pending() -> list[str]:
    """Installations that have statements waiting to be sent (DSA-3)."""
    ids = db.session.scalars(
        select(DsaStatement.installation_id).where(DsaStatement.state == StatementState.PENDING.value).distinct()
    ).all()
    db.session.rollback()
    return sorted(ids)


def submit_installation(installation_id: str) -> SubmissionRun | None:
    """Send one installation's pending statements if it has DSA on, a usable
    connection and no hold (DSA-3); hold it when the database asks to wait.

    Returns:
        The `SubmissionRun`, or None when nothing was tried (DSA off, no
        connection or token: Operations says why; or held).
    """
    settings = current_settings(db.session, installation_id)
    status = endpoint_status(db.session, installation_id, settings) if settings.enabled else None
    db.session.rollback()
    if status is None or status.endpoint is None or hold_of(installation_id) is not None:
        return None
    run = submit_pending(installation_id, status.endpoint, max_batches=SWEEP_MAX_BATCHES)
    if run.retry_after is not None:
        hold(installation_id, run.retry_after, run.error)
    return run


def submit_due_statements() -> int:
    """The sweep's step (DSA-3): submit every installation's pending statements.

    Returns:
        How many statements were recorded as submitted.
    """
    submitted = 0
    for installation_id in installations_with_pending():
        run = submit_installation(installation_id)
        submitted += run.submitted if run else 0
    return submitted
