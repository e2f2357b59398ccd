"""Pause, resume and cancel a bulk batch; the bulk sweeps, `flask bulk-status` and the
bulk metrics (SPEC BULK-6, BULK-7, BULK-9, FOUR-9)."""

from __future__ import annotations

import threading
from datetime import timedelta

import pytest
from sqlalchemy import func, select

from app.domain.clock import utcnow
from app.domain.errors import ApiError
from app.extensions import db
from app.metrics import exposition
from app.models import ActionProposal, AuditEvent, BulkBatch, ConnectionAttempt, WorkflowRun
from app.services.bulk import progress
from app.services.bulk.actions import bulk_actions
from app.services.bulk.batch_approval import approve_batch
from app.services.bulk.controls import cancel_batch, pause_batch, resume_batch
from app.services.bulk.dry_runs import start_dry_run
from app.services.bulk.progress import ledger
from app.services.bulk.submission import submit_batch
from app.services.lifecycle.dispatch import deliver
from app.services.lifecycle.dispatch.claim import take_lease
from app.services.lifecycle.sweeps import complete_idle_batches, emit_missing_resolutions, expire_bulk_batches
from tests import scripted as s
from tests.builders import make_operator, make_team, run_worker, set_row

P = ActionProposal


def _dry_run(team, count: int, maker: str = "moderator") -> str:
    action = bulk_actions(db.session, team.installation_id)[0]
    return start_dry_run(
        make_operator(team.installation_id, maker),
        selection={"source": "list", "text": "\n".join(f"post:{n}" for n in range(count))},
        action_key=action.key,
        decision_code=action.decision_code,
        reason="spam network",
    )


def _running(team, count: int, maker: str = "moderator", approver: str = "reviewer") -> str:
    batch_id = _dry_run(team, count, maker)
    batch = db.session.get(BulkBatch, batch_id)
    digest = submit_batch(make_operator(team.installation_id, maker), batch_id, batch.dry_run_digest)
    approve_batch(make_operator(team.installation_id, approver), batch_id, digest)
    return batch_id


def _batch(batch_id: str) -> BulkBatch:
    db.session.rollback()
    return db.session.get(BulkBatch, batch_id)


def _book(batch_id: str):
    book = ledger(db.session, _batch(batch_id))
    assert book.adds_up, book
    return book


def _items(batch_id: str) -> list[ActionProposal]:
    db.session.rollback()
    return db.session.scalars(select(P).where(P.bulk_batch_id == batch_id).order_by(P.id)).all()


def _audits(batch_id: str, action: str) -> list[AuditEvent]:
    db.session.rollback()
    return db.session.scalars(select(AuditEvent).where(AuditEvent.target_id == batch_id,
                                                       AuditEvent.action == action)).all()


def test_bulk_7_pause_holds_and_sends_nothing_resume_delivers_each_once(app, team):
    """BULK-7: a paused batch's waiting items are held (no due time, bulk_batch_paused)
    and a worker sends none of them, even one made due by a race; resume delivers
    every item once and the batch completes."""
    batch_id = _running(team, 5)
    moderator = make_operator(team.installation_id, "moderator")
    assert pause_batch(moderator, batch_id) == 5
    assert _batch(batch_id).state == "paused"
    assert {(p.state, p.next_attempt_at, p.last_error_code) for p in _items(batch_id)} == {
        ("queued", None, "bulk_batch_paused")}
    run_worker(app)
    assert team.demo_platform.state.effects == [] and _book(batch_id)["not_started"] == 5
    # a held item made due anyway (a retry scheduled before the pause): its claim sends nothing
    raced = _items(batch_id)[0]
    set_row(P, raced.id, next_attempt_at=utcnow() - timedelta(seconds=1))
    deliver(raced.id)
    db.session.rollback()
    row = db.session.get(P, raced.id)
    assert (row.state, row.delivery_attempt_count, row.next_attempt_at, row.last_error_code) == (
        "queued", 0, None, "bulk_batch_paused")
    assert db.session.scalar(select(func.count()).select_from(ConnectionAttempt)) == 0
    assert team.demo_platform.state.effects == []
    with pytest.raises(ApiError) as refused:
        pause_batch(moderator, batch_id)
    assert (refused.value.status, refused.value.code) == (409, "bulk_batch_not_running")
    assert len(_audits(batch_id, "bulk.paused")) == 1

    assert resume_batch(moderator, batch_id) == 5
    run_worker(app)
    keys = [e["idempotency_key"] for e in team.demo_platform.state.effects]
    assert len(keys) == 5 == len(set(keys))
    assert _book(batch_id)["applied"] == 5 and _batch(batch_id).state == "completed"
    digest = _batch(batch_id).batch_digest
    for action in ("bulk.paused", "bulk.resumed", "bulk.completed"):
        assert [a.details["batch_digest"] for a in _audits(batch_id, action)] == [digest], action


def test_bulk_7_pause_and_resume_refused_without_a_role(app, team):
    """BULK-7: an auditor may neither pause nor resume; nothing changes."""
    batch_id = _running(team, 2)
    auditor = make_operator(team.installation_id, "auditor")
    with pytest.raises(ApiError) as refused:
        pause_batch(auditor, batch_id)
    assert (refused.value.status, refused.value.code) == (403, "bulk_control_refused")
    assert _batch(batch_id).state == "running"
    with pytest.raises(ApiError) as refused:
        resume_batch(make_operator(team.installation_id, "moderator"), batch_id)
    assert (refused.value.status, refused.value.code) == (409, "bulk_batch_not_paused")


def _slow_platform(httpserver):
    """A platform that holds the request of the first item it is told to hold until
    the test releases it, fails another with a 503, and applies the rest."""
    control = {"hold": None, "fail": None, "arrived": threading.Event(), "release": threading.Event()}
    script = s.Script(s.applied())

    def handler(request):
        body = request.get_json()
        if body["action_id"] == control["hold"]:
            control["arrived"].set()
            control["release"].wait(30)
        elif body["action_id"] == control["fail"]:
            return s.json_response({"error": "unavailable"}, 503)
        return script(request)

    httpserver.expect_request("/actions/takedown", method="POST").respond_with_handler(handler)
    return control, script


def test_bulk_7_cancel_mid_run_leaves_every_item_applied_cancelled_or_failed(app, httpserver):
    """BULK-7, BULK-6: cancelled with one item in flight (its request held by a slow
    platform), one applied and one sent and waiting to be retried: the waiting one
    fails for good, the unsent ones are cancelled, the one in flight finishes applied;
    the ledger adds up at each step and no item is left unknown or sent again."""
    team = make_team(httpserver.url_for("/"))
    control, script = _slow_platform(httpserver)
    batch_id = _running(team, 6)
    items = _items(batch_id)
    control["fail"], control["hold"] = items[1].id, items[2].id
    deliver(items[0].id)  # applied
    deliver(items[1].id)  # sent, 503: failed, waiting to be retried
    assert _book(batch_id)["applied"] == 1 and _book(batch_id)["in_flight"] == 1

    def in_flight():
        with app.app_context():
            deliver(items[2].id)

    worker = threading.Thread(target=in_flight)
    worker.start()
    try:
        assert control["arrived"].wait(30), "the slow item's request never arrived"
        assert _book(batch_id)["in_flight"] == 2
        result = cancel_batch(make_operator(team.installation_id, "reviewer"), batch_id, "wrong network")
        assert result == {"cancelled": 3, "failed": 1, "in_flight": 1}
        book = _book(batch_id)
        assert (book["applied"], book["failed"], book["cancelled"], book["in_flight"], book["not_started"]) == (
            1, 1, 3, 1, 0)
    finally:
        control["release"].set()
        worker.join(30)
    run_worker(app)  # the cancelled items' jobs find nothing to send
    book = _book(batch_id)
    assert (book["applied"], book["failed"], book["cancelled"], book.open) == (2, 1, 3, 0)
    rows = {p.id: p for p in _items(batch_id)}
    assert rows[items[1].id].last_error_code == "bulk_batch_cancelled" and rows[items[1].id].delivery_terminal
    assert {rows[p.id].last_error_code for p in items[3:]} == {"bulk_batch_cancelled"}
    assert sorted(script.effects.values()) == [1, 1]
    assert len(script.requests) == 2 and len(httpserver.log) == 3  # nothing sent after the cancel
    batch = _batch(batch_id)
    assert batch.state == "cancelled" and batch.ended_by == make_operator(team.installation_id, "reviewer").id
    [audit] = _audits(batch_id, "bulk.cancelled")
    assert audit.details["batch_digest"] == batch.batch_digest and audit.details["reason"] == "wrong network"
    run = db.session.scalar(select(WorkflowRun).where(WorkflowRun.trigger_key == f"bulk:{batch_id}"))
    assert run.state == "completed"


def test_bulk_7_an_item_claimed_again_after_the_cancel_fails_for_good_unsent(app, httpserver):
    """BULK-7: an item in flight at the cancel (claimed; its worker died) whose lease
    runs out is claimed again: nothing is sent, it fails for good with
    bulk_batch_cancelled and its attempt given back; the rest were cancelled."""
    team = make_team(httpserver.url_for("/"))
    _slow_platform(httpserver)
    batch_id = _running(team, 2)
    first, _ = _items(batch_id)
    assert take_lease(first.id, utcnow(), utcnow() - timedelta(seconds=1)) is not None
    result = cancel_batch(make_operator(team.installation_id, "reviewer"), batch_id, "wrong network")
    assert result == {"cancelled": 1, "failed": 0, "in_flight": 1}
    deliver(first.id)
    db.session.rollback()
    row = db.session.get(P, first.id)
    assert (row.state, row.delivery_terminal, row.delivery_attempt_count, row.last_error_code) == (
        "failed", True, 1, "bulk_batch_cancelled")
    assert len(httpserver.log) == 0
    book = _book(batch_id)
    assert (book["failed"], book["cancelled"], book.open) == (1, 1, 0)


@pytest.mark.parametrize("who", ["maker", "moderator"])
def test_bulk_7_four_9_cancel_refused_to_the_maker_and_a_moderator(app, team, who):
    """BULK-7, FOUR-9: cancelling an approved batch needs a reviewer who is not its
    maker; refused, nothing changes."""
    batch_id = _running(team, 3, maker="reviewer2", approver="reviewer")
    operator = make_operator(team.installation_id, "reviewer2" if who == "maker" else "moderator")
    with pytest.raises(ApiError) as refused:
        cancel_batch(operator, batch_id, "wrong network")
    assert (refused.value.status, refused.value.code) == (403, "bulk_cancel_refused")
    assert _batch(batch_id).state == "running"
    assert {p.state for p in _items(batch_id)} == {"queued"} and not _audits(batch_id, "bulk.cancelled")


def test_bulk_7_cancel_refused_when_finished_or_without_reason(app, team):
    """BULK-7: a completed batch cannot be cancelled (409), nor any without a reason (400)."""
    batch_id = _running(team, 2)
    reviewer = make_operator(team.installation_id, "reviewer")
    with pytest.raises(ApiError) as refused:
        cancel_batch(reviewer, batch_id, " ")
    assert (refused.value.status, refused.value.code) == (400, "bulk_reason_invalid")
    run_worker(app)
    with pytest.raises(ApiError) as refused:
        cancel_batch(reviewer, batch_id, "wrong network")
    assert (refused.value.status, refused.value.code) == (409, "bulk_batch_not_cancellable")
    with pytest.raises(ApiError) as refused:
        cancel_batch(reviewer, "blk_nothing", "wrong network")
    assert (refused.value.status, refused.value.code) == (404, "bulk_batch_not_found")


def test_bulk_6_completion_sweep_twice_at_once_completes_once(app, team, monkeypatch):
    """BULK-6: a batch whose last item's completion check was lost stays running until
    the sweep; two sweeps at once complete it once, with one audit row."""
    batch_id = _running(team, 3)
    monkeypatch.setattr(progress, "item_resolved", lambda uow, proposal: None)  # the check lost with its worker
    run_worker(app)
    monkeypatch.undo()
    assert _batch(batch_id).state == "running" and _book(batch_id)["applied"] == 3
    barrier, done = threading.Barrier(2), []

    def sweep():
        with app.app_context():
            barrier.wait(10)
            done.append(complete_idle_batches())

    threads = [threading.Thread(target=sweep) for _ in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(30)
    assert sorted(done) == [0, 1]
    assert _batch(batch_id).state == "completed" and len(_audits(batch_id, "bulk.completed")) == 1
    assert complete_idle_batches() == 0


def test_bulk_2_dry_run_and_submitted_batch_expire(app, team):
    """BULK-2, BULK-3: the sweep expires a dry run past its time, and a submitted
    batch past its time with its items cancelled (bulk_batch_expired) and its run
    ended; each audited; one not yet due stays."""
    dry = _dry_run(team, 2)
    waiting = _dry_run(team, 2)
    submitted = _dry_run(team, 3)
    batch = db.session.get(BulkBatch, submitted)
    submit_batch(make_operator(team.installation_id, "moderator"), submitted, batch.dry_run_digest)
    past = utcnow() - timedelta(seconds=1)
    set_row(BulkBatch, dry, expires_at=past)
    set_row(BulkBatch, submitted, expires_at=past)
    assert expire_bulk_batches(utcnow()) == 2
    assert expire_bulk_batches(utcnow()) == 0
    assert (_batch(dry).state, _batch(waiting).state, _batch(submitted).state) == ("expired", "dry_run", "expired")
    assert {(p.state, p.last_error_code) for p in _items(submitted)} == {("cancelled", "bulk_batch_expired")}
    assert _book(submitted)["cancelled"] == 3
    assert [a.details["was"] for a in _audits(dry, "bulk.expired")] == ["dry_run"]
    [audit] = _audits(submitted, "bulk.expired")
    assert audit.details["batch_digest"] == _batch(submitted).batch_digest
    run = db.session.scalar(select(WorkflowRun).where(WorkflowRun.trigger_key == f"bulk:{submitted}"))
    assert run.state == "completed"


def test_bulk_9_bulk_status_prints_the_batch_and_its_ledger(app, team):
    """BULK-9, BULK-6: `flask bulk-status ID` prints the batch and a ledger that adds
    up; an unknown id exits 1 with a clear message."""
    batch_id = _running(team, 4)
    pause_batch(make_operator(team.installation_id, "moderator"), batch_id)
    batch = _batch(batch_id)
    result = app.test_cli_runner().invoke(args=["bulk-status", batch_id])
    assert result.exit_code == 0, result.output
    out = result.output
    assert batch.public_reference in out and "state paused" in out and batch.batch_digest in out
    assert "maker Moderator" in out and "approver Reviewer" in out
    assert "not_started  4" in out and "total        4  (adds up)" in out
    missing = app.test_cli_runner().invoke(args=["bulk-status", "blk_nothing"])
    assert missing.exit_code == 1 and "bulk_batch_not_found" in missing.output


def test_bulk_6_metrics_count_items_by_bucket_and_batches_by_state(app, team):
    """BULK-6, BULK-9: /metrics gauges: items of unfinished batches by ledger bucket,
    batches by state and in progress."""
    paused = _running(team, 3)
    pause_batch(make_operator(team.installation_id, "moderator"), paused)
    _dry_run(team, 2)
    db.session.rollback()
    text = exposition(utcnow())[0].decode()
    assert 'console_bulk_items{bucket="not_started"} 3.0' in text
    assert 'console_bulk_items{bucket="applied"} 0.0' in text
    assert 'console_bulk_batches{state="paused"} 1.0' in text
    assert 'console_bulk_batches{state="dry_run"} 1.0' in text
    assert "console_bulk_batches_in_progress 1.0" in text


def test_bulk_6_the_resolution_sweep_leaves_applied_items_to_their_batch(app, team):
    """BULK-6, EVT-3: a bulk item's resolution goes to its batch, never to a run event,
    so the sweep that emits missing run events must not take applied items as
    missing (it took them every time, up to 500, ahead of the runs' own)."""
    batch_id = _running(team, 3)
    run_worker(app)
    assert _book(batch_id)["applied"] == 3
    assert emit_missing_resolutions() == 0
