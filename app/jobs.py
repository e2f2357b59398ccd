"""RQ entrypoints: ids in, one service call, inside an app context per job.

Jobs take ids, never objects. Each opens its own app context (and so its own
database session); in a forked work horse the inherited connection pool is
dropped first, so no connection is shared across the fork.
"""

from __future__ import annotations

import logging
import os

log = logging.getLogger(__name__)

_app = None
_pid = None


def bind_app(app) -> None:
    """Use `app` for the jobs this process runs (worker.py and tests call this)."""
    global _app, _pid
    _app, _pid = app, os.getpid()


def _job_context():
    global _app, _pid
    if _app is None:
        from app import create_app

        bind_app(create_app(web=False))
    if os.getpid() != _pid:  # a forked work horse: don't reuse the parent's connections
        from app.extensions import db

        with _app.app_context():
            db.engine.dispose(close=False)
        _pid = os.getpid()
    return _app.app_context()


def deliver_proposal_job(proposal_id: str) -> str | None:
    """Deliver one proposal if it is due (SPEC DLV). Returns its state afterwards."""
    from app.services.lifecycle.dispatch import deliver

    with _job_context():
        outcome = deliver(proposal_id)
        return outcome.state


def probe_connection_job(connection_id: str) -> str | None:
    """Send a connection's half-open probe if it is due (SPEC CONN-1, OPS-7).
    Returns the probe delivery's state, or None when nothing was due."""
    from app.services.lifecycle.probes import probe_when_due

    with _job_context():
        outcome = probe_when_due(connection_id)
        return outcome.state if outcome else None


def send_notices_job() -> int:
    """Send the approval notices that are due (SPEC POL-7). Returns how many were sent."""
    from app.services.approval_notices import send_pending_notices

    with _job_context():
        return send_pending_notices()


def sweep_job() -> dict:
    """Run the periodic sweeps once (SPEC EVT-3)."""
    from dataclasses import asdict

    from app.services.lifecycle.sweeps import run_sweeps

    with _job_context():
        return asdict(run_sweeps())
