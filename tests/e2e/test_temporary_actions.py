"""Temporary actions end to end (TEMP-1..4): a suspension approved once is applied
and lifted at its time by real worker processes, even when the worker is killed and
Redis flushed across the due time; end now, extend, cancel and the appeal path
through the console's pages and the worker."""

from __future__ import annotations

import signal
from datetime import timedelta

import pytest
from sqlalchemy import func, select

from app.domain.clock import utcnow
from app.extensions import db
from app.models import ActionProposal, AuditEvent, ConnectionAttempt, SweepRun
from app.queueing import get_redis

from ..builders import approve, decide_report, login, logout, proposal_of, reload, reversal_of, run_worker, set_row
from ..processes import children_of, wait_for_exit
from .test_workers_processes import start_worker, stop, wait_for

AUTHOR = "user:4412"  # the author of post:1001, the first demo report's target




def state_of(proposal_id: str) -> str | None:
    db.session.rollback()
    row = db.session.get(ActionProposal, proposal_id)
    return row.state if row else None


def due_in(proposal, seconds: float) -> None:
    """Time travel: the scheduled time comes `seconds` from now (instead of minutes)."""
    when = utcnow() + timedelta(seconds=seconds)
    set_row(ActionProposal, proposal.id, not_before=when, next_attempt_at=when)


def applied_once(proposal_id: str) -> int:
    db.session.rollback()
    return db.session.scalar(
        select(func.count()).where(AuditEvent.action == "workflow.action_applied", AuditEvent.target_id == proposal_id)
    )


def approved_suspension(world):
    proposal = decide_report(world, 0, code="suspend_account")
    approve(world, proposal)
    return reload(proposal)


@pytest.mark.slow
def test_temp2_a_suspension_approved_once_is_lifted_by_itself(app, world, platform, tmp_path):
    """TEMP-2: one approval; the worker applies the suspension, then at its time lifts it."""
    suspension = approved_suspension(world)
    worker = start_worker(app, tmp_path, SWEEP_INTERVAL_SECONDS="1")
    try:
        wait_for(lambda: state_of(suspension.id) == "applied", 60, "the suspension to apply")
        assert platform.state.accounts[AUTHOR] == "suspended"
        reversal = wait_for(lambda: reversal_of(suspension), 10, "its reversal")
        assert reversal.state == "queued" and reversal.not_before > utcnow() + timedelta(seconds=60)
        due_in(reversal, 2)
        wait_for(lambda: state_of(reversal.id) == "applied", 60, "the reversal to apply")
    finally:
        stop(worker)
    assert platform.state.accounts[AUTHOR] == "active"
    assert [e["effect"] for e in platform.state.effects] == ["suspended", "active"]
    assert applied_once(reversal.id) == 1


@pytest.mark.slow
def test_temp2_worker_killed_and_redis_flushed_across_the_due_time_lifts_exactly_once(app, world, platform, tmp_path):
    """TEMP-2: kill -9 the worker (and its sweep cron and scheduler) before the reversal is
    due, flush Redis (its scheduled job is gone), let the due time pass: nothing is
    lifted while everything is down; a new worker lifts it, exactly once."""
    suspension = approved_suspension(world)
    worker = start_worker(app, tmp_path, SWEEP_INTERVAL_SECONDS="1")
    try:
        wait_for(lambda: state_of(suspension.id) == "applied", 60, "the suspension to apply")
        reversal = wait_for(lambda: reversal_of(suspension), 10, "its reversal")
        due_in(reversal, 3)
        children = children_of(worker.pid)
        worker.send_signal(signal.SIGKILL)
        worker.wait(timeout=10)
        assert wait_for_exit(children, 30) == set(), "the worker's children outlived it"
    finally:
        stop(worker)
    get_redis(app).flushdb()
    due = reload(reversal).not_before
    wait_for(lambda: utcnow() > due + timedelta(seconds=1), 10, "the due time to pass")
    assert state_of(reversal.id) == "queued" and platform.state.accounts[AUTHOR] == "suspended"

    worker = start_worker(app, tmp_path, SWEEP_INTERVAL_SECONDS="1")
    try:
        wait_for(lambda: state_of(reversal.id) == "applied", 60, "the reversal to apply after the outage")
        # a few more sweeps and jobs: nothing is sent again
        finished = sweeps_finished()
        wait_for(lambda: sweeps_finished() >= finished + 2, 30, "two more sweeps to run")
    finally:
        stop(worker)
    assert platform.state.accounts[AUTHOR] == "active"
    assert [e["effect"] for e in platform.state.effects] == ["suspended", "active"]
    assert applied_once(reversal.id) == 1
    db.session.rollback()
    attempts = select(func.count()).where(ConnectionAttempt.proposal_id == reversal.id)
    assert db.session.scalar(attempts) == 1


# -- through the console's pages and the worker ------------------------------------


def approve_via_page(client, token, proposal, key):
    return client.post(
        f"/proposals/{proposal.id}/decision",
        data={
            "decision": "approved",
            "payload_digest": proposal.payload_digest,
            "idempotency_key": key,
            "csrf_token": token,
        },
    )


def suspended_via_pages(app, client, world, platform):
    """The moderator decides, a reviewer confirms the digest shown beside the plan, the worker applies."""
    report_id = world.report_ids[0]
    token = login(client, "moderator@example.com")
    client.post(f"/reports/{report_id}/decisions", data={"decision_code": "suspend_account", "csrf_token": token})
    suspension = proposal_of(report_id)
    logout(client, token)
    token = login(client, "reviewer@example.com")
    page = client.get(f"/proposals/{suspension.id}").get_data(as_text=True)
    assert "suspend_account for 3 minutes, then unsuspend_account" in page
    assert approve_via_page(client, token, suspension, "k-suspend").status_code == 303
    run_worker(app)
    assert platform.state.accounts[AUTHOR] == "suspended"
    logout(client, token)
    return reload(suspension)


def test_temp3_end_now_through_the_console(app, client, world, platform):
    """TEMP-3: a reviewer proposes "end now"; they cannot approve it; another reviewer does;
    the worker lifts the suspension and the scheduled reversal never runs."""
    suspension = suspended_via_pages(app, client, world, platform)
    scheduled = reversal_of(suspension)
    token = login(client, "reviewer2@example.com")
    response = client.post(
        f"/proposals/{suspension.id}/temporary-change",
        data={"kind": "end_now", "idempotency_key": "end-1", "csrf_token": token},
    )
    assert response.status_code == 303
    end_now = db.session.get(ActionProposal, response.headers["Location"].rsplit("/", 1)[1])
    assert end_now.state == "approval_required" and end_now.reverses_proposal_id == suspension.id
    assert approve_via_page(client, token, end_now, "k-own").status_code == 403  # FOUR-1: its proposer
    logout(client, token)
    token = login(client, "admin@example.com")
    assert approve_via_page(client, token, end_now, "k-end").status_code == 303
    run_worker(app)
    assert platform.state.accounts[AUTHOR] == "active"
    assert state_of(scheduled.id) == "cancelled" and state_of(end_now.id) == "applied"
    page = client.get(f"/proposals/{suspension.id}").get_data(as_text=True)
    assert 'data-state="ended"' in page and 'data-following="false"' in page


def test_temp3_extend_through_the_console(app, client, world, platform):
    """TEMP-3: "extend by 60 minutes", approved by a second reviewer, moves the end."""
    suspension = suspended_via_pages(app, client, world, platform)
    scheduled = reversal_of(suspension)
    token = login(client, "reviewer2@example.com")
    response = client.post(
        f"/proposals/{suspension.id}/temporary-change",
        data={"kind": "extend", "extend_minutes": "60", "idempotency_key": "ext-1", "csrf_token": token},
    )
    assert response.status_code == 303
    extension = db.session.get(ActionProposal, response.headers["Location"].rsplit("/", 1)[1])
    logout(client, token)
    token = login(client, "admin@example.com")
    assert approve_via_page(client, token, extension, "k-ext").status_code == 303
    run_worker(app)
    assert state_of(scheduled.id) == "cancelled" and state_of(extension.id) == "queued"
    assert reload(extension).not_before == reload(scheduled).not_before + timedelta(hours=1)
    assert platform.state.accounts[AUTHOR] == "suspended"
    due_in(extension, -1)
    from app.services.lifecycle import sweeps

    sweeps.run_sweeps()
    run_worker(app)
    assert state_of(extension.id) == "applied" and platform.state.accounts[AUTHOR] == "active"


def test_temp4_cancel_through_the_console(app, client, world, platform):
    """TEMP-4, FOUR-9: a scheduled takedown shows its countdown, is not sent when
    approved; a moderator asks to cancel it and a second reviewer confirms; nothing ever
    reaches the platform."""
    from ..builders import set_graph

    set_graph(world, lambda g: g["nodes"]["takedown"]["config"].__setitem__("delay_seconds", 3600))
    report_id = world.report_ids[0]
    token = login(client, "moderator@example.com")
    client.post(f"/reports/{report_id}/decisions", data={"decision_code": "remove_content", "csrf_token": token})
    takedown = proposal_of(report_id)
    logout(client, token)
    token = login(client, "reviewer@example.com")
    assert approve_via_page(client, token, takedown, "k-td").status_code == 303
    run_worker(app)
    assert platform.state.effects == [] and state_of(takedown.id) == "queued"
    logout(client, token)
    token = login(client, "moderator@example.com")
    page = client.get(f"/proposals/{takedown.id}").get_data(as_text=True)
    assert 'id="not-before"' in page and 'class="countdown"' in page and "Ask to cancel it" in page
    response = client.post(f"/proposals/{takedown.id}/cancel", data={"csrf_token": token})
    assert response.status_code == 303 and state_of(takedown.id) == "queued"  # asked, not held
    logout(client, token)
    token = login(client, "reviewer2@example.com")
    page = client.get(f"/proposals/{takedown.id}").get_data(as_text=True)
    assert 'id="cancel-asked"' in page and "Confirm the cancel" in page
    response = client.post(f"/proposals/{takedown.id}/cancel", data={"csrf_token": token})
    assert response.status_code == 303
    assert state_of(takedown.id) == "cancelled"
    again = client.post(f"/proposals/{takedown.id}/cancel", data={"csrf_token": token})
    assert again.status_code == 409 and "action_already_sent" in again.get_data(as_text=True)
    due_in(takedown, -1)
    from app.services.lifecycle import sweeps

    sweeps.run_sweeps()
    run_worker(app)
    assert platform.state.effects == []


def test_temp3_appeal_path_lifts_the_suspension_and_cancels_its_reversal(app, client, world, platform):
    """TEMP-3: the suspension is reversed on appeal; the approved correction lifts it and
    cancels the scheduled reversal (audited); the reversal's time comes and nothing is sent."""
    suspension = suspended_via_pages(app, client, world, platform)
    scheduled = reversal_of(suspension)
    response = client.post(
        "/api/v1/appeals",
        headers={"Authorization": f"Bearer {world.console_token}"},
        json={"report_external_id": "demo-report-1", "external_id": "appeal-1", "statement": "Not me."},
    )
    appeal_id = response.get_json()["appeal_id"]
    token = login(client, "reviewer2@example.com")
    client.post(
        f"/appeals/{appeal_id}/decision",
        data={"outcome": "reversed", "rationale": "Not harassment after all", "csrf_token": token},
    )
    correction = proposal_of(world.report_ids[0])
    assert correction.appeal_id == appeal_id and correction.action_code == "unsuspend_account"
    logout(client, token)
    token = login(client, "admin@example.com")
    assert approve_via_page(client, token, correction, "k-corr").status_code == 303
    run_worker(app)
    assert platform.state.accounts[AUTHOR] == "active"
    assert state_of(scheduled.id) == "cancelled"
    db.session.rollback()
    assert db.session.scalar(
        select(func.count()).where(
            AuditEvent.action == "action.reversal_cancelled", AuditEvent.target_id == scheduled.id
        )
    )
    due_in(scheduled, -1)
    from app.services.lifecycle import sweeps

    sweeps.run_sweeps()
    run_worker(app)
    assert [e["effect"] for e in platform.state.effects] == ["suspended", "active"]


def sweeps_finished() -> int:
    """How many sweeps have finished (the worker's sweep cron runs them)."""
    db.session.rollback()
    return db.session.scalar(select(func.count()).select_from(SweepRun).where(SweepRun.finished_at.is_not(None)))
