"""Kill -9 a worker anywhere in a delivery, over many trials: every proposal ends
terminal, none stays applying past its lease plus one sweep, no operation is
applied twice on the platform, no audit row is duplicated (issue: proof)."""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
from datetime import timedelta
from pathlib import Path

import pytest
from sqlalchemy import func, select, update

from app.domain.clock import utcnow
from app.extensions import db
from app.models import ActionProposal, AuditEvent
from app.services.lifecycle import sweeps

from ..builders import add_reports, decide_report, make_world

ROOT = Path(__file__).resolve().parents[2]
POINTS = ("before_send", "during_request", "after_response", "before_receipt_write")
PROPOSALS = 16
MAX_ROUNDS = 60


def run_crashing_worker(app, tmp_path, failpoints: str, batch_size: int = 10) -> int:
    """One worker in burst mode that kills itself at the given failpoints (point:chance,...)."""
    env = {
        **os.environ,
        "DATABASE_URL": app.config["SQLALCHEMY_DATABASE_URI"],
        "REDIS_URL": app.config["REDIS_URL"],
        "EGRESS_ALLOW_PRIVATE": "1",
        "INSTANCE_PATH": str(tmp_path / "worker"),
        "LOG_LEVEL": "ERROR",
        "FAILPOINTS": failpoints,
        "DELIVERY_BATCH_SIZE": str(batch_size),
    }
    worker = subprocess.run(
        [sys.executable, str(ROOT / "worker.py"), "--burst"],
        env=env,
        cwd=ROOT,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        timeout=120,
    )
    return worker.returncode


def time_passes() -> None:
    """Time travel: dead workers' leases expire and retry backoffs run out."""
    past = utcnow() - timedelta(seconds=1)
    db.session.execute(update(ActionProposal).where(ActionProposal.state == "applying").values(lease_expires_at=past))
    db.session.execute(
        update(ActionProposal)
        .where(ActionProposal.state == "failed", ActionProposal.delivery_terminal.is_(False))
        .values(next_attempt_at=past)
    )
    db.session.commit()


@pytest.mark.parametrize("batch_size", [1, 10], ids=["one-per-job", "batch-claims"])
def test_killed_workers_lose_and_duplicate_nothing(app, platform, tmp_path, batch_size):
    """DLV-1..7: one proposal per job, and batch claims of up to 10 (a kill then
    strands every proposal of the batch until its lease expires)."""
    random.seed(7)
    world = make_world(platform.url, approval_mode="bounded_auto")
    platform.configure_for(world)
    platform.state.configure(response_delay_seconds=0.2)  # so "during the request" exists
    add_reports(world, PROPOSALS - len(world.report_ids))
    for index in range(PROPOSALS):
        decide_report(world, index)
    # First a sure kill at each point in turn, then kills at random points.
    schedule = [f"{point}:1" for point in POINTS]
    kills = 0
    for round_number in range(MAX_ROUNDS):
        failpoints = schedule[round_number] if round_number < len(schedule) else ",".join(f"{p}:0.1" for p in POINTS)
        returncode = run_crashing_worker(app, tmp_path, failpoints, batch_size)
        kills += returncode == -signal.SIGKILL
        db.session.rollback()
        open_ = db.session.scalar(
            select(func.count()).where(ActionProposal.state != "applied", ActionProposal.delivery_terminal.is_(False))
        )
        if open_ == 0:
            break
        time_passes()  # a dead worker's lease runs out...
        sweeps.run_sweeps()  # ...and one sweep hands the action to the next worker
    else:
        raise AssertionError(f"{open_} proposals not terminal after {MAX_ROUNDS} rounds")
    assert kills >= len(POINTS), "a failpoint did not fire"

    db.session.rollback()
    rows = db.session.scalars(select(ActionProposal)).all()
    assert all(r.state == "applied" or (r.state == "failed" and r.delivery_terminal) for r in rows)
    # Eight crashes in a row use up a cycle: terminal, for an operator to retry; nothing else fails.
    assert {r.last_error_code for r in rows if r.state == "failed"} <= {"action_delivery_attempts_exhausted"}
    keys = [effect["idempotency_key"] for effect in platform.state.effects]
    assert len(keys) == len(set(keys)), "an operation was applied twice on the platform"
    assert {r.operation_id for r in rows if r.state == "applied"} <= set(keys)
    applied = db.session.execute(
        select(AuditEvent.target_id, func.count())
        .where(AuditEvent.action == "workflow.action_applied")
        .group_by(AuditEvent.target_id)
    ).all()
    assert sorted(applied) == sorted((r.id, 1) for r in rows if r.state == "applied")
    assert db.session.scalar(select(func.count(AuditEvent.idempotency_key.distinct()))) == db.session.scalar(
        select(func.count()).select_from(AuditEvent)
    )
    assert sum(r.state == "applied" for r in rows) >= PROPOSALS - 2
    from app.services.audit import verify_chain

    assert verify_chain(world.installation_id).ok
