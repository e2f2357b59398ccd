"""RQ worker classes for the console: heartbeats that tell live workers from dead
ones, and child processes that die with their worker.

RQ's own workers go quiet in two ways that mislead the operations screen: after a
Redis restart a running worker is no longer listed (its registration was lost and
a heartbeat only refreshes the hash), and a SimpleWorker sends no heartbeat while it
runs a job, so a killed one and a busy one look alike until its key expires. Here
every heartbeat re-registers a worker Redis forgot, and a thread keeps heartbeats
going while a job runs, so `heartbeat_is_live` can judge by the heartbeat alone.
"""

from __future__ import annotations

import ctypes
import logging
import os
import signal
import threading
from datetime import datetime, timedelta

from rq import SimpleWorker, Worker, worker_registration
from rq.cron import CronScheduler
from rq.exceptions import InvalidJobOperation
from rq.scheduler import RQScheduler

log = logging.getLogger(__name__)

DEFAULT_WORKER_TTL_SECONDS = 60
# A heartbeat this much later than the worker's TTL means the worker is gone.
LIVENESS_GRACE_SECONDS = 15
_PR_SET_PDEATHSIG = 1


def heartbeat_is_live(last_heartbeat: datetime | None, worker_ttl_seconds: int, now: datetime) -> bool:
    """Whether a worker whose last heartbeat was `last_heartbeat` (UTC) still runs.

    Console workers heartbeat at least every ``worker_ttl_seconds - 15`` seconds,
    idle or busy, so a heartbeat older than the TTL plus a grace means the process
    died (``kill -9``, a lost machine) even if Redis still lists it.
    """
    if last_heartbeat is None:
        return False
    return now - last_heartbeat <= timedelta(seconds=worker_ttl_seconds + LIVENESS_GRACE_SECONDS)


class _ChildScheduler(RQScheduler):
    """RQ's scheduler process (it moves retries due later onto the queue), dying with
    the worker that forked it and holding none of the worker's Redis sockets."""

    def __init__(self, *args, connection, **kwargs):
        super().__init__(*args, connection=connection, **kwargs)
        self._worker_pid = os.getpid()
        self._worker_pool = connection.connection_pool

    def work(self):
        die_with_parent(self._worker_pid)
        close_inherited_sockets(self._worker_pool)
        return super().work()


def close_inherited_sockets(pool) -> None:
    """Close, in a forked child, its copies of the parent's Redis sockets.

    A copy keeps the parent's connection open in Redis after the parent dies: a
    ``kill -9``ed worker's blocking dequeue then stayed open while its scheduler child
    lived, and Redis moved the next job into the dead worker's hands (EVT-3). redis-py
    closes a connection without shutting it down when called from another process, so
    the parent's own sockets are untouched; it has no public call for this (its pool
    forgets a parent's connections on first use in the child, without closing them).

    Args:
        pool: the parent's ``redis.ConnectionPool``, as the child inherited it.
    """
    for connection in [*pool._available_connections, *pool._in_use_connections]:
        connection.disconnect()


class _Heartbeats:
    """Mixin: re-register when Redis forgot this worker; heartbeat during jobs;
    a scheduler child that dies with the worker."""

    def _start_scheduler(self, burst=False, logging_level="INFO", date_format=None, log_format=None, **_):
        # RQ's own method with the scheduler class swapped: RQ names it directly.
        options = {k: v for k, v in (("date_format", date_format), ("log_format", log_format)) if v}
        self.scheduler = _ChildScheduler(
            self.queues,
            connection=self.connection,
            logging_level=logging_level if logging_level is not None else self.log.level,
            serializer=self.serializer,
            **options,
        )
        self.scheduler.acquire_locks()
        if not self.scheduler.acquired_locks:
            return
        if not burst:
            self.scheduler.start()
            return
        try:
            self.scheduler.register_birth()
            self.scheduler.enqueue_scheduled_jobs()
        finally:
            self.scheduler.release_locks()
            self.scheduler.register_death()

    def heartbeat(self, timeout=None, pipeline=None):
        super().heartbeat(timeout, pipeline)
        if pipeline is None and not self.connection.sismember(worker_registration.REDIS_WORKER_KEYS, self.key):
            # Redis restarted or was flushed: put this worker back on the lists.
            with self.connection.pipeline() as pipe:
                pipe.hset(self.key, mapping=self.serialize())
                worker_registration.register(self, pipe)
                pipe.expire(self.key, timeout or self.worker_ttl + 60)
                pipe.execute()
            log.info("worker registered again after Redis forgot it", extra={"worker": self.name})

    def handle_job_success(self, job, queue, started_job_registry, execution):
        """RQ's bookkeeping of a job that returned, tolerating a Redis that forgot the job.

        When Redis was flushed or restarted while the job ran, RQ's cleanup of a
        ``result_ttl=0`` job cannot read the job's status and raises
        ``InvalidJobOperation``, which RQ logged as an ERROR of the job and then
        filed it as failed -- though the job's work (a delivery, recorded in the
        database, SPEC EVT-3) was done. That is not an error of the job: one WARNING
        line, the heartbeat's leftover job hash removed, nothing else.

        Raises:
            InvalidJobOperation: when the job's status is still in Redis (a real RQ error).
        """
        try:
            return super().handle_job_success(job, queue, started_job_registry, execution)
        except InvalidJobOperation:
            if self.connection.hget(job.key, "status") is not None:
                raise
            self.connection.delete(job.key)  # only RQ's last heartbeat was written to it
            log.warning(
                "job %s finished, but Redis no longer knows it (flushed or restarted): its RQ bookkeeping is skipped",
                job.id,
                extra={"job_id": job.id, "worker": self.name},
            )
            return None

    def execute_job(self, job, queue):
        stop = threading.Event()
        interval = max(1, self.dequeue_timeout // 2)

        def beat():
            while not stop.wait(interval):
                try:
                    super(_Heartbeats, self).heartbeat(self.worker_ttl + 60)
                except Exception:  # Redis away: the job's own writes will notice
                    log.debug("heartbeat during a job failed", exc_info=True)

        thread = threading.Thread(target=beat, name="rq-heartbeat", daemon=True)
        thread.start()
        try:
            return super().execute_job(job, queue)
        finally:
            stop.set()
            thread.join(timeout=5)


class ConsoleSimpleWorker(_Heartbeats, SimpleWorker):
    """RQ's SimpleWorker (jobs in the worker process) with console heartbeats."""


class ConsoleWorker(_Heartbeats, Worker):
    """RQ's forking Worker with console heartbeats."""


class ConsoleCronScheduler(CronScheduler):
    """RQ's cron scheduler whose stop is quiet: the first SIGTERM/SIGINT stops it and
    later ones are ignored while it registers its death. A killed worker's cron child
    can get two (the parent-death signal, and a terminal's signal to the group); RQ's
    handler raised ``StopRequested`` again inside its own ``finally``, which escaped as
    an uncaught traceback."""

    def _request_stop(self, signum, frame):
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        super()._request_stop(signum, frame)


def die_with_parent(parent_pid: int) -> None:
    """Ask Linux to send this process SIGTERM when its parent dies.

    Called first in the worker's child processes (sweep cron, sweep worker), so a
    ``kill -9`` of the worker does not leave them running under init.

    Args:
        parent_pid: the worker's pid, read before the fork: if it already died
            before the request took effect, this process exits at once.
    """
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(_PR_SET_PDEATHSIG, signal.SIGTERM, 0, 0, 0)
    except (OSError, AttributeError):  # not Linux: the worker's finally still stops us
        log.debug("prctl is not available")
    if os.getppid() != parent_pid:
        os._exit(0)
