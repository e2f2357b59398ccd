"""Temporary and scheduled actions through the services, against the demo platform
(TEMP-1..4): the reversal scheduled when the action is applied, delivered at its
time, created by the sweep when missing; end now, extend, cancel; an appeal
correction that undoes the action cancels its reversal."""

from __future__ import annotations

from datetime import timedelta

import pytest
from sqlalchemy import func, select

from app.domain.clock import utcnow
from app.domain.errors import ApiError
from app.domain.proposal import delivery as delivery_rules
from app.extensions import db
from app.models import ActionApproval, ActionProposal, AuditEvent, HumanTask, WorkflowRun, move_proposal
from app.services.cases.appeals import decide_appeal, file_appeal
from app.services.lifecycle import reversals, sweeps
from app.services.lifecycle.cancel_scheduled import cancel_scheduled
from app.services.lifecycle.dispatch import deliver
from app.services.lifecycle.proposals import delivery_of, guard
from app.services.lifecycle.receipt_intake import accept_async_result
from app.services.uow import Actor, unit_of_work

from ..builders import approve, decide_report, proposal_of, reload, reversal_of, set_graph, set_row, time_reaches

AUTHOR = "user:4412"  # the author of post:1001, the first demo report's target


def audits(action: str) -> list[AuditEvent]:
    db.session.rollback()
    return list(db.session.scalars(select(AuditEvent).where(AuditEvent.action == action).order_by(AuditEvent.seq)))


def suspended(world, platform, index: int = 0) -> ActionProposal:
    """The demo's suspension, decided, approved once and applied."""
    proposal = decide_report(world, index, code="suspend_account")
    assert proposal.action_code == "suspend_account" and proposal.temporary is not None
    approve(world, proposal)
    assert deliver(proposal.id).state == "applied"
    assert platform.state.accounts[AUTHOR] == "suspended"
    return reload(proposal)






def test_temp2_applied_action_schedules_its_reversal_authorized_by_its_approval(app, world, platform):
    """TEMP-2: applied (sync receipt) → its reversal exists in the same transaction, queued for
    applied time + duration, its own digest, linked both ways, authorized by the approval."""
    original = suspended(world, platform)
    reversal = reversal_of(original)
    assert reversal is not None
    assert (reversal.state, reversal.action_code, reversal.reverses_proposal_id) == (
        "queued",
        "unsuspend_account",
        original.id,
    )
    due = original.confirmed_at + timedelta(seconds=original.temporary["duration_seconds"])
    assert abs(reversal.not_before - due) < timedelta(milliseconds=1)  # the digest carries milliseconds
    assert reversal.payload_digest != original.payload_digest and reversal.payload_digest.startswith("sha256:")
    assert reversal.payload == original.temporary["reversal"]["payload"]
    assert reversal.target == original.temporary["reversal"]["target"] == original.target
    [granted] = db.session.scalars(select(ActionApproval).where(ActionApproval.proposal_id == reversal.id)).all()
    approved = db.session.scalar(select(ActionApproval).where(ActionApproval.proposal_id == original.id))
    assert (granted.payload_digest, granted.approver_id) == (reversal.payload_digest, approved.approver_id)
    assert approved.id in granted.reason and granted.idempotency_key == f"reversal-authorized-by:{approved.id}"
    assert db.session.scalar(select(func.count()).select_from(HumanTask)) == 1  # no second approval asked
    [scheduled] = audits("action.reversal_scheduled")
    assert scheduled.target_id == reversal.id


def test_temp4_claim_refuses_before_not_before_without_using_an_attempt(app, world, platform):
    """TEMP-4, TEMP-2: the reversal is not sent before its time; at its time it is
    delivered like any action and lifts the suspension."""
    reversal = reversal_of(suspended(world, platform))
    outcome = deliver(reversal.id)
    assert not outcome.claimed
    assert reload(reversal).delivery_attempt_count == 0 and platform.state.accounts[AUTHOR] == "suspended"
    assert reversal.id not in {row[0] for row in sweeps.due_proposals(utcnow())}
    time_reaches(reversal)
    assert reversal.id in {row[0] for row in sweeps.due_proposals(utcnow())}
    assert deliver(reversal.id).state == "applied"
    assert platform.state.accounts[AUTHOR] == "active"
    assert [e["effect"] for e in platform.state.effects] == ["suspended", "active"]


def test_temp4_not_before_on_any_proposal_in_the_claim_rule():
    """TEMP-4: the domain's claim says nothing is due before not_before, and nothing is counted."""
    now = utcnow()
    d = delivery_rules.Delivery(
        state="queued", expires_at=now + timedelta(days=1), next_attempt_at=now, not_before=now + timedelta(minutes=5)
    )
    assert delivery_rules.claim(d, now) is None
    later = delivery_rules.claim(d, now + timedelta(minutes=5))
    assert later is not None and later.values["delivery_attempt_count"] == 1


def test_temp2_async_receipt_schedules_the_reversal(app, world, platform):
    """TEMP-2: an action applied by the async result API gets its reversal in that transaction."""
    proposal = decide_report(world, code="suspend_account")
    approve(world, proposal)
    platform.state.configure(mode="async", console_url=None)
    assert deliver(proposal.id).state == "queued"  # accepted, waiting for the platform
    assert reversal_of(proposal) is None
    row = reload(proposal)
    accept_async_result(
        {
            "action_id": row.id,
            "operation_id": row.operation_id,
            "payload_digest": row.payload_digest,
            "status": "applied",
        },
        world.integration_id,
    )
    reversal = reversal_of(proposal)
    due = reload(proposal).confirmed_at + timedelta(seconds=180)
    assert reversal is not None and abs(reversal.not_before - due) < timedelta(milliseconds=1)


def test_temp2_sweep_creates_a_missing_reversal_once(app, world, platform, monkeypatch):
    """TEMP-2: an applied temporary action without its reversal gets one from the sweep;
    sweeps run twice (even at once) create exactly one."""
    monkeypatch.setattr(reversals, "schedule_reversal", lambda uow, original: None)
    original = suspended(world, platform)
    assert reversal_of(original) is None
    monkeypatch.undo()
    assert sweeps.run_sweeps().reversals_created == 1
    assert sweeps.run_sweeps().reversals_created == 0
    reversal = reversal_of(original)
    assert reversal.state == "queued" and reversal.not_before > utcnow()
    count = select(func.count()).where(ActionProposal.reverses_proposal_id == original.id)
    assert db.session.scalar(count) == 1
    time_reaches(reversal)
    assert sweeps.enqueue_due_deliveries(utcnow()) >= 1  # the sweep hands the due reversal to a worker


def _replacement(world, original, kind, who="reviewer2", **extra):
    result = reversals.propose_change(
        original.id, kind=kind, operator=world.user(who), idempotency_key=f"{kind}-1", **extra
    )
    return db.session.get(ActionProposal, result.proposal_id)


def test_temp3_end_now_is_a_four_eyes_proposal_that_replaces_the_schedule(app, world, platform):
    """TEMP-3, FOUR-1: "end now" is a new proposal; its proposer and the decision's maker
    cannot approve it; approved, it cancels the scheduled reversal and lifts the suspension."""
    original = suspended(world, platform)
    scheduled = reversal_of(original)
    end_now = _replacement(world, original, "end_now")
    assert (end_now.state, end_now.reverses_proposal_id, end_now.not_before) == ("approval_required", original.id, None)
    assert reload(scheduled).state == "queued"  # nothing changes before a second person approves
    for maker in ("reviewer2", "moderator"):  # its proposer; the suspension decision's maker
        with pytest.raises(ApiError) as refused:
            approve(world, end_now, reviewer=maker)
        assert (refused.value.status, refused.value.code) == (403, "maker_checker_violation")
    approve(world, end_now, reviewer="reviewer")
    assert (reload(scheduled).state, reload(scheduled).last_error_code) == ("cancelled", "action_reversal_superseded")
    assert deliver(end_now.id).state == "applied"
    assert platform.state.accounts[AUTHOR] == "active"
    assert not deliver(scheduled.id).claimed
    assert [a.target_id for a in audits("action.reversal_superseded")] == [scheduled.id]
    again = reversals.propose_change(
        original.id, kind="end_now", operator=world.user("reviewer2"), idempotency_key="end_now-1"
    )
    assert again.idempotent_replay and again.proposal_id == end_now.id
    with pytest.raises(ApiError) as ended:
        reversals.propose_change(
            original.id, kind="extend", operator=world.user("reviewer2"), idempotency_key="x-2", extend_seconds=600
        )
    assert (ended.value.status, ended.value.code) == (409, "action_temporary_ended")


def test_temp3_extend_moves_the_end_once_approved(app, world, platform):
    """TEMP-3: "extend" adds to the current end; approved, the new reversal waits for it."""
    original = suspended(world, platform)
    scheduled = reversal_of(original)
    with pytest.raises(ApiError) as invalid:
        _replacement(world, original, "extend", extend_seconds=30)
    assert (invalid.value.status, invalid.value.code) == (400, "action_duration_invalid")
    extension = _replacement(world, original, "extend", extend_seconds=3600)
    assert extension.not_before == scheduled.not_before + timedelta(hours=1)
    approve(world, extension, reviewer="reviewer")
    assert reload(scheduled).state == "cancelled" and reload(extension).state == "queued"
    time_reaches(scheduled)
    assert not deliver(scheduled.id).claimed and not deliver(extension.id).claimed
    assert platform.state.accounts[AUTHOR] == "suspended"
    time_reaches(extension)
    assert deliver(extension.id).state == "applied" and platform.state.accounts[AUTHOR] == "active"


def test_temp3_approval_refused_when_the_reversal_already_ran(app, world, platform):
    """TEMP-3: an "end now" approved after the scheduled reversal was sent changes nothing."""
    original = suspended(world, platform)
    end_now = _replacement(world, original, "end_now")
    scheduled = reversal_of(original)
    time_reaches(scheduled)
    assert deliver(scheduled.id).state == "applied"
    with pytest.raises(ApiError) as refused:
        approve(world, end_now, reviewer="reviewer")
    assert (refused.value.status, refused.value.code) == (409, "action_temporary_ended")
    assert reload(end_now).state == "approval_required"


def overturned_suspension(world, platform):
    original = suspended(world, platform)
    appeal_id = file_appeal(
        world.report_ids[0],
        statement="I was not harassing anyone.",
        actor=Actor("operator", world.users["moderator"]),
        installation_id=world.installation_id,
    ).appeal_id
    result = decide_appeal(appeal_id, outcome="reversed", rationale="Not harassment", operator=world.user("reviewer2"))
    assert len(result.correction_ids) == 1
    return original, proposal_of(world.report_ids[0])


def test_temp3_appeal_correction_cancels_the_scheduled_reversal(app, world, platform):
    """TEMP-3: the correction that undoes a suspension cancels its scheduled reversal (audited)."""
    original, correction = overturned_suspension(world, platform)
    scheduled = reversal_of(original)
    pending = _replacement(world, original, "extend", extend_seconds=600)
    assert correction.appeal_id and correction.action_code == "unsuspend_account"
    approve(world, correction, reviewer="admin")
    assert deliver(correction.id).state == "applied"
    assert platform.state.accounts[AUTHOR] == "active"
    assert (reload(scheduled).state, reload(scheduled).last_error_code) == (
        "cancelled",
        "action_reversal_undone_by_correction",
    )
    assert reload(pending).state == "cancelled"
    cancelled = audits("action.reversal_cancelled")
    assert {a.target_id for a in cancelled} == {scheduled.id, pending.id}
    time_reaches(scheduled)
    assert not deliver(scheduled.id).claimed
    assert [e["effect"] for e in platform.state.effects] == ["suspended", "active"]


def test_temp3_reversal_that_lost_the_race_with_a_correction_is_refused_by_its_guarded_write(app, world, platform):
    """TEMP-3: a worker read the reversal as due; a correction cancelled it meanwhile; the
    claim's guarded UPDATE matches nothing, so nothing is sent."""
    original, correction = overturned_suspension(world, platform)
    scheduled = reversal_of(original)
    time_reaches(scheduled)
    stale = delivery_of(reload(scheduled))  # what the worker read
    approve(world, correction, reviewer="admin")
    assert deliver(correction.id).state == "applied"
    change = delivery_rules.claim(stale, utcnow())
    assert change is not None  # on its stale read the reversal looked due...
    with unit_of_work() as uow:
        assert not move_proposal(uow.session, scheduled.id, change.move, where=guard(change), values=change.values)
    assert reload(scheduled).state == "cancelled" and reload(scheduled).delivery_attempt_count == 0


def scheduled_takedown(world, delay_seconds=3600):
    def mutate(graph):
        graph["nodes"]["takedown"]["config"]["delay_seconds"] = delay_seconds

    set_graph(world, mutate)
    proposal = decide_report(world)
    run = db.session.get(WorkflowRun, proposal.run_id)
    assert proposal.not_before == run.created_at + timedelta(seconds=delay_seconds)
    return reload(proposal)


def test_temp4_cancel_a_scheduled_proposal_until_it_is_sent(app, world, platform):
    """TEMP-4, FOUR-9: a proposal with not_before is never sent earlier, and is cancelled
    (approved: one asks, a second reviewer confirms; audited) before it is sent; its run
    resumes on the timeout port."""
    proposal = scheduled_takedown(world)
    assert proposal.not_before is not None and proposal.not_before > utcnow()
    approve(world, proposal)
    assert not deliver(proposal.id).claimed and platform.state.effects == []
    with pytest.raises(ApiError) as refused:
        cancel_scheduled(proposal.id, world.user("auditor"))
    assert refused.value.status == 403
    assert cancel_scheduled(proposal.id, world.user("moderator")).state == "queued"  # asked
    assert cancel_scheduled(proposal.id, world.user("reviewer2")).state == "cancelled"  # confirmed
    [event] = audits("action.cancelled")
    assert (event.actor_type, event.actor_id, event.target_id) == ("operator", world.users["reviewer2"], proposal.id)
    time_reaches(proposal)
    assert not deliver(proposal.id).claimed and platform.state.effects == []
    sweeps.run_sweeps()
    db.session.rollback()
    run = db.session.get(WorkflowRun, proposal.run_id)
    assert run.state in ("completed", "waiting") and platform.state.effects == []
    with pytest.raises(ApiError) as again:
        cancel_scheduled(proposal.id, world.user("moderator"))
    assert (again.value.status, again.value.code) == (409, "action_already_sent")


def test_temp4_cancel_refusals(app, world, platform):
    """TEMP-4: not scheduled, already sent, or a reversal (ended or extended instead, TEMP-3)."""
    unscheduled = decide_report(world, 1)
    with pytest.raises(ApiError) as refused:
        cancel_scheduled(unscheduled.id, world.user("moderator"))
    assert (refused.value.status, refused.value.code) == (409, "action_not_scheduled")
    reversal = reversal_of(suspended(world, platform))
    with pytest.raises(ApiError) as refused:
        cancel_scheduled(reversal.id, world.user("moderator"))
    assert (refused.value.status, refused.value.code) == (409, "action_reversal_not_cancellable")
    assert reload(reversal).state == "queued"


def test_temp1_bad_duration_is_a_clear_error_and_nothing_is_proposed(app, world, platform):
    """TEMP-1: a duration outside 60 s .. 366 days fails the node with action_duration_invalid."""

    def mutate(graph):
        graph["nodes"]["suspend"]["input_mapping"]["duration_seconds"] = "`30`"

    from app.models import WorkflowVersion

    suspension_id = db.session.scalar(
        select(WorkflowVersion.id).where(
            WorkflowVersion.installation_id == world.installation_id,
            WorkflowVersion.id != world.workflow_version_id,
        )
    )
    world_copy = type(world)(**{**world.__dict__, "workflow_version_id": suspension_id})
    set_graph(world_copy, mutate)
    proposal = decide_report(world, code="suspend_account")
    assert proposal is None
    run = db.session.scalar(select(WorkflowRun).where(WorkflowRun.workflow_version_id == suspension_id))
    assert (run.state, run.last_error_code) == ("failed", "action_duration_invalid")


def test_temp1_input_mapping_computes_the_duration(app, world, platform):
    """TEMP-1: the node's input mapping may compute the duration; the digest covers it."""
    from app.models import WorkflowVersion

    suspension_id = db.session.scalar(
        select(WorkflowVersion.id).where(
            WorkflowVersion.installation_id == world.installation_id,
            WorkflowVersion.id != world.workflow_version_id,
        )
    )

    def mutate(graph):
        graph["nodes"]["suspend"]["input_mapping"]["duration_seconds"] = "`604800`"

    set_graph(type(world)(**{**world.__dict__, "workflow_version_id": suspension_id}), mutate)
    proposal = decide_report(world, code="suspend_account")
    assert proposal.temporary["duration_seconds"] == 604800
    assert proposal.temporary["reversal"]["action_code"] == "unsuspend_account"


def test_temp3_extend_while_an_approved_end_now_waits_is_a_clear_answer_not_a_500(app, world, platform):
    """TEMP-3: an approved "end now" waits unsent (worker down, connection paused or
    disabled: CONN-1..3); proposing an extension then answers (from now, as the end is
    now), never a TypeError over the end-now reversal's missing ``not_before``."""
    original = suspended(world, platform)
    end_now = _replacement(world, original, "end_now")
    approve(world, end_now, reviewer="reviewer")
    assert (reload(end_now).state, reload(end_now).not_before) == ("queued", None)
    before = utcnow()
    extension = _replacement(world, original, "extend", extend_seconds=3600)
    assert extension.state == "approval_required"
    assert before + timedelta(hours=1) <= extension.not_before <= utcnow() + timedelta(hours=1)


def refused_for_good(reversal) -> None:
    """The reversal was sent once and the platform refused it for good."""
    set_row(
        ActionProposal,
        reversal.id,
        state="failed",
        delivery_terminal=True,
        delivery_attempt_count=1,
        last_error_code="platform_client_error",
    )


def test_temp3_a_reversal_an_approved_extension_replaced_cannot_be_retried_alone(app, world, platform):
    """TEMP-3, FOUR-1, RTRY-1: an extension is proposed, the scheduled reversal then fails
    for good, and a second person approves the extension. Retrying that old reversal would end the suspension now on
    one person's say, an "end now" without a second person: the retry (single or in bulk,
    CONN-4) is refused and nothing changes; the extension stands."""
    from app.domain.dead_letters import list_digest
    from app.services.lifecycle.dead_letter_retry import DeadLetterFilter, retry_dead_letters
    from app.services.lifecycle.retry import retry_proposal

    original = suspended(world, platform)
    scheduled = reversal_of(original)
    extension = _replacement(world, original, "extend", extend_seconds=86_400)  # proposed in time
    time_reaches(scheduled)  # then the reversal is sent and refused for good
    refused_for_good(scheduled)  # ...by the platform
    approve(world, extension, reviewer="reviewer")
    assert (reload(scheduled).state, reload(extension).state) == ("failed", "queued")
    with pytest.raises(ApiError) as refused:
        retry_proposal(
            scheduled.id,
            payload_digest=scheduled.payload_digest,
            idempotency_key="retry-old-reversal",
            operator=world.user("moderator"),
        )
    assert (refused.value.status, refused.value.code) == (409, "action_reversal_superseded")
    assert (reload(scheduled).state, reload(scheduled).delivery_cycle) == ("failed", 1)
    where = DeadLetterFilter()
    listed = list_digest([(scheduled.id, 1)])
    bulk = retry_dead_letters(world.user("reviewer"), where=where, list_digest=listed, idempotency_key="bulk-1")
    assert bulk.retried == [] and bulk.refused == {scheduled.id: "action_reversal_superseded"}
    assert not deliver(scheduled.id).claimed
    assert platform.state.accounts[AUTHOR] == "suspended"


def test_temp3_after_the_reversal_failed_for_good_a_change_says_the_action_is_still_in_force(app, world, platform):
    """TEMP-3, FOUR-7: once the scheduled reversal failed for good the suspension still
    holds; "extend" is refused with 409 ``action_reversal_failed`` (not "already
    ended"), which says to retry the reversal or end it now, and no proposal is made
    ("end now" is allowed: tests/services/test_reversal_recovery.py)."""
    original = suspended(world, platform)
    scheduled = reversal_of(original)
    time_reaches(scheduled)
    refused_for_good(scheduled)
    before = db.session.scalar(select(func.count()).select_from(ActionProposal))
    for kind, extra in (("extend", {"extend_seconds": 600}),):
        with pytest.raises(ApiError) as refused:
            reversals.propose_change(
                original.id, kind=kind, operator=world.user("reviewer2"), idempotency_key=f"{kind}-1", **extra
            )
        assert (refused.value.status, refused.value.code) == (409, "action_reversal_failed")
        assert "still in force" in refused.value.message
    db.session.rollback()
    assert db.session.scalar(select(func.count()).select_from(ActionProposal)) == before
    assert platform.state.accounts[AUTHOR] == "suspended"
