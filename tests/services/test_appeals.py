"""Appeals, appeal corrections (CORR-1..4) and compensating actions (COMP-1..3)."""

from __future__ import annotations

import pytest
from sqlalchemy import func, select

from app.domain.clock import utcnow
from app.domain.errors import ApiError
from app.extensions import db
from app.models import (
    ActionProposal,
    AppealCorrection,
    AppealDecision,
    AuditEvent,
    Decision,
    Report,
)
from app.services.cases.appeal_corrections import record_manual_correction
from app.services.cases.appeals import decide_appeal, file_appeal, redact_rationale
from app.services.lifecycle.compensation import propose_compensation
from app.services.lifecycle.dispatch import deliver
from app.services.uow import Actor, unit_of_work

from ..builders import approve, decide_report, reload, set_graph, set_row


def applied_takedown(world, report_index=0):
    proposal = decide_report(world, report_index)
    approve(world, proposal)
    assert deliver(proposal.id).state == "applied"
    return reload(proposal)


def appeal(world, report_index=0):
    return file_appeal(
        world.report_ids[report_index],
        statement="It was satire.",
        actor=Actor("operator", world.users["moderator"]),
        installation_id=world.installation_id,
    ).appeal_id


def overturn(world, appeal_id, outcome="reversed", who="reviewer2"):
    return decide_appeal(appeal_id, outcome=outcome, rationale="Satire is allowed", operator=world.user(who))


@pytest.fixture
def correction(app, world, platform):
    """A takedown applied on the platform, then reversed on appeal: a correction awaits approval."""
    original = applied_takedown(world)
    assert platform.state.content["post:1001"] == "removed"
    result = overturn(world, appeal(world))
    [correction_id] = result.correction_ids
    row = db.session.get(AppealCorrection, correction_id)
    assert (row.mode, row.state) == ("automated", "proposed")
    row.original_action = original  # kept beside the row (its relationships load only when asked)
    return row


def correction_proposal(correction) -> ActionProposal:
    db.session.rollback()
    return db.session.get(ActionProposal, db.session.get(AppealCorrection, correction.id).proposal_id)


def test_reversed_appeal_restores_the_post(app, world, platform, correction):
    """CORR-1..4: the eligible reviewer approves; the post is restored; the appeal completes."""
    proposal = correction_proposal(correction)
    assert (proposal.action_code, proposal.target, proposal.state) == (
        "restore",
        {"kind": "post", "reference": "post:1001"},
        "approval_required",
    )
    assert proposal.preconditions == {
        "appeal_decision_id": correction.appeal_decision_id,
        "latest_decision_id": correction.original_action.decision_id,
        "original_payload_digest": correction.original_action.payload_digest,
    }
    approve(world, proposal, reviewer="admin")
    assert reload(proposal).state == "queued"
    assert deliver(proposal.id).state == "applied"
    assert platform.state.content["post:1001"] == "visible"
    db.session.rollback()
    row = db.session.get(AppealCorrection, correction.id)
    ad = db.session.get(AppealDecision, correction.appeal_decision_id)
    assert (row.state, row.approved_by) == ("confirmed", world.users["admin"])
    assert (ad.completion_state, ad.correction_confirmed_at is not None) == ("completed", True)  # CORR-4
    assert db.session.get(Report, world.report_ids[0]).state == "closed"
    actions = db.session.scalars(select(AuditEvent.action).order_by(AuditEvent.seq)).all()
    story = [
        a
        for a in actions
        if a
        in (
            "report.decided",
            "action.approved",
            "workflow.action_applied",
            "appeal.filed",
            "appeal.decided",
            "appeal.correction_prepared",
            "appeal.decision_completed",
        )
    ]
    assert story == [
        "report.decided",
        "action.approved",
        "workflow.action_applied",
        "appeal.filed",
        "appeal.decided",
        "appeal.correction_prepared",
        "action.approved",
        "workflow.action_applied",
        "appeal.decision_completed",
    ]


@pytest.mark.parametrize("who", ["moderator", "reviewer2"])
def test_makers_of_either_decision_cannot_approve_the_correction(app, world, correction, who):
    """CORR-2: not the original decision's maker, not the appeal decision's maker."""
    proposal = correction_proposal(correction)
    set_row(
        __import__("app.models", fromlist=["OperatorUser"]).OperatorUser,
        world.users["moderator"],
        roles_text="moderator,reviewer",
    )
    with pytest.raises(ApiError) as caught:
        approve(world, proposal, reviewer=who)
    assert (caught.value.status, caught.value.code) == (403, "maker_checker_violation")
    assert reload(proposal).state == "approval_required"


def blocked(world, platform, correction, *, at="approval"):
    """Assert the correction is refused with the documented code and nothing is sent."""
    proposal = correction_proposal(correction)
    seen = platform.state.requests_seen
    if at == "approval":
        with pytest.raises(ApiError) as caught:
            approve(world, proposal, reviewer="admin")
        assert (caught.value.status, caught.value.code) == (409, "appeal_correction_precondition_changed")
        assert reload(proposal).state == "approval_required"
    else:
        outcome = deliver(proposal.id)
        assert (outcome.error_code, outcome.terminal) == ("appeal_correction_precondition_changed", True)
    assert platform.state.requests_seen == seen and platform.state.content["post:1001"] == "removed"


def newer_upheld(world, correction):
    with unit_of_work() as uow:
        from app.models import Appeal

        appeal = uow.session.get(Appeal, correction.appeal_id)
        uow.session.add(
            AppealDecision(
                installation_id=world.installation_id,
                appeal_id=appeal.id,
                outcome="upheld",
                maker_id=world.users["admin"],
                completion_state="completed",
            )
        )
        uow.commit()


BREAKERS = {
    "newer upheld decision": newer_upheld,
    "original not confirmed": lambda world, c: set_row(ActionProposal, c.original_proposal_id, confirmed_at=None),
    "target changed": lambda world, c: set_row(AppealCorrection, c.id, original_target={"reference": "post:9"}),
    "report no longer appealed": lambda world, c: set_row(Report, c.report_id, state="closed"),
    "appeal no longer contests the latest decision": lambda world, c: _new_decision(world, c),
}


def _new_decision(world, correction):
    with unit_of_work() as uow:
        uow.session.add(
            Decision(
                installation_id=world.installation_id,
                report_id=correction.report_id,
                seq=99,
                decision_code="no_violation",
                maker_id=world.users["moderator"],
            )
        )
        uow.commit()


@pytest.mark.parametrize("name", sorted(BREAKERS))
def test_each_condition_blocks_approval(app, world, platform, correction, name):
    """CORR-1, CORR-3: checked when the reviewer approves; nothing sent."""
    BREAKERS[name](world, correction)
    blocked(world, platform, correction, at="approval")


@pytest.mark.parametrize("name", sorted(BREAKERS))
def test_each_condition_blocks_delivery(app, world, platform, correction, name):
    """CORR-3: checked again before every delivery attempt; nothing sent."""
    approve(world, correction_proposal(correction), reviewer="admin")
    BREAKERS[name](world, correction)
    blocked(world, platform, correction, at="delivery")


def closed_as_usual(world, platform, correction, proposal) -> None:
    """The correction was applied, the post is back, the appeal completed, the report closed (CORR-4)."""
    assert reload(proposal).state == "applied" and platform.state.content["post:1001"] == "visible"
    db.session.rollback()
    assert db.session.get(AppealCorrection, correction.id).state == "confirmed"
    assert db.session.get(AppealDecision, correction.appeal_decision_id).completion_state == "completed"
    assert db.session.get(Report, correction.report_id).state == "closed"


def _deactivate_approver(world, c):
    from app.services.admin.operators import set_operator_active

    set_operator_active(world.user("admin"), world.users["reviewer"], False)


def _drop_approver_role(world, c):
    from app.services.admin.operators import change_operator_roles
    from app.services.admin.reviews import approve_change

    outcome = change_operator_roles(world.user("admin"), world.users["reviewer"], ["moderator"])
    if hasattr(outcome, "change_id"):  # a change of roles may wait for a second admin (FOUR-4)
        approve_change(world.user("admin2"), outcome.change_id, outcome.digest)


AFTER_APPROVAL = {  # single-admin acts that take no power from the approved correction (FOUR-7, FOUR-9)
    "rationale redacted": lambda world, c: redact_rationale(c.appeal_decision_id, operator=world.user("admin")),
    "approver deactivated": _deactivate_approver,
    "approver lost the reviewer role": _drop_approver_role,
}


@pytest.mark.parametrize("name", sorted(AFTER_APPROVAL))
def test_one_admin_cannot_strand_an_approved_correction(app, world, platform, correction, name):
    """FOUR-7, FOUR-9, CORR-2: the approver's eligibility and the rationale are decided
    once, at approval; after it, redacting the rationale, deactivating the approver or
    removing their reviewer role does not fail the delivery: the post is restored."""
    proposal = correction_proposal(correction)
    approve(world, proposal, reviewer="reviewer")
    AFTER_APPROVAL[name](world, correction)
    assert deliver(proposal.id).state == "applied"
    closed_as_usual(world, platform, correction, proposal)


@pytest.mark.parametrize("name", sorted(AFTER_APPROVAL))
def test_one_admin_cannot_fail_the_receipt_of_a_correction_in_flight(
    app, world, platform, correction, name, monkeypatch
):
    """FOUR-7, FOUR-9, CORR-3: the same acts during the request do not fail the guarded
    receipt write: the console records what the platform applied."""
    from app import egress

    proposal = correction_proposal(correction)
    approve(world, proposal, reviewer="reviewer")
    real_send = egress.send

    def send_then_act(*args, **kwargs):
        response = real_send(*args, **kwargs)
        with app.app_context():
            AFTER_APPROVAL[name](world, correction)
        return response

    monkeypatch.setattr(egress, "send", send_then_act)
    assert deliver(proposal.id).state == "applied"
    closed_as_usual(world, platform, correction, proposal)


@pytest.mark.parametrize("name", sorted(AFTER_APPROVAL))
def test_one_admin_cannot_stop_the_retry_of_an_approved_correction(app, world, platform, correction, name):
    """FOUR-7, FOUR-9, RTRY: a correction that failed for good after approval is retried
    by another reviewer although, meanwhile, an admin redacted the rationale, deactivated
    the approver or removed their role; the retry restores the post and closes the case."""
    from app.services.lifecycle.retry import retry_proposal

    proposal = correction_proposal(correction)
    approve(world, proposal, reviewer="reviewer")
    platform.state.configure(fail_next=1, fail_status=400)
    assert (deliver(proposal.id).state, reload(proposal).delivery_terminal) == ("failed", True)
    AFTER_APPROVAL[name](world, correction)
    result = retry_proposal(
        proposal.id, payload_digest=proposal.payload_digest, idempotency_key="r-1", operator=world.user("admin")
    )
    assert (result.state, result.delivery_cycle) == ("queued", 2)
    assert deliver(proposal.id).state == "applied"
    closed_as_usual(world, platform, correction, proposal)


def test_redaction_before_approval_does_not_block_the_correction(app, world, platform, correction):
    """FOUR-7, CORR-1: the correction follows the appeal decision's outcome, not its
    words: a rationale redacted before approval (privacy) leaves the correction
    approvable and it is delivered; the case closes as usual."""
    redact_rationale(correction.appeal_decision_id, operator=world.user("admin"))
    proposal = correction_proposal(correction)
    approve(world, proposal, reviewer="reviewer")
    assert deliver(proposal.id).state == "applied"
    closed_as_usual(world, platform, correction, proposal)


def test_an_approver_removed_before_approving_cannot_approve(app, world, platform, correction):
    """CORR-2: the approver's eligibility is checked at approval (then bound)."""
    _drop_approver_role(world, correction)
    proposal = correction_proposal(correction)
    with pytest.raises(ApiError) as caught:
        approve(world, proposal, reviewer="reviewer")
    assert caught.value.status == 403
    assert reload(proposal).state == "approval_required"


def test_condition_checked_inside_the_receipt_write(app, world, platform, correction, monkeypatch):
    """CORR-3: a change of the case during the request still blocks the receipt write."""
    from app import egress

    proposal = correction_proposal(correction)
    approve(world, proposal, reviewer="admin")
    real_send = egress.send

    report_id = correction.report_id

    def send_then_close(*args, **kwargs):
        response = real_send(*args, **kwargs)
        with app.app_context():
            set_row(Report, report_id, state="closed")
        return response

    monkeypatch.setattr(egress, "send", send_then_close)
    outcome = deliver(proposal.id)
    assert (outcome.error_code, outcome.terminal) == ("appeal_correction_precondition_changed", True)
    assert reload(proposal).confirmed_at is None
    db.session.rollback()
    assert db.session.get(AppealDecision, correction.appeal_decision_id).completion_state == "waiting"


def test_correction_not_prepared_when_ineligible(app, world, platform):
    """CORR-3: checked when preparing: an unconfirmed original gets no correction proposal."""
    original = applied_takedown(world)
    set_row(ActionProposal, original.id, confirmed_at=None)
    result = overturn(world, appeal(world))
    row = db.session.get(AppealCorrection, result.correction_ids[0])
    assert (row.state, row.last_error_code, row.proposal_id) == (
        "failed",
        "appeal_correction_precondition_changed",
        None,
    )


def test_upheld_appeal_closes_the_case_without_corrections(app, world, platform):
    applied_takedown(world)
    result = overturn(world, appeal(world), outcome="upheld")
    assert result.correction_ids == []
    assert db.session.get(Report, world.report_ids[0]).state == "closed"


def test_manual_correction_is_recorded_by_an_eligible_reviewer(app, world, platform):
    """CORR-2, CORR-4: without a correcting component a reviewer records the manual fix."""
    set_graph(world, lambda g: g["nodes"]["takedown"]["config"].pop("correction"))
    applied_takedown(world)
    [correction_id] = overturn(world, appeal(world)).correction_ids
    assert db.session.get(AppealCorrection, correction_id).mode == "manual"
    with pytest.raises(ApiError) as caught:
        record_manual_correction(correction_id, note="Restored by hand", operator=world.user("reviewer2"))
    assert caught.value.code == "maker_checker_violation"
    record_manual_correction(correction_id, note="Restored by hand in the admin tool", operator=world.user("admin"))
    db.session.rollback()
    assert db.session.get(AppealCorrection, correction_id).state == "confirmed"
    ad = db.session.scalar(select(AppealDecision))
    assert ad.completion_state == "completed" and db.session.get(Report, world.report_ids[0]).state == "closed"


def test_appeal_needs_a_decided_report_and_an_uninvolved_reviewer(app, world, platform):
    with pytest.raises(ApiError) as caught:
        appeal(world)  # not decided yet
    assert caught.value.code == "report_not_appealable"
    applied_takedown(world)
    appeal_id = appeal(world)
    with pytest.raises(ApiError) as caught:
        overturn(world, appeal_id, who="moderator")
    assert caught.value.code == "maker_checker_violation"
    with pytest.raises(ApiError) as caught:
        decide_appeal(appeal_id, outcome="quashed", rationale="", operator=world.user("reviewer"))
    assert caught.value.code == "appeal_outcome_invalid"


# -- COMP --------------------------------------------------------------------------------


def compensate(world, original, key="comp-1", who="reviewer", **overrides):
    args = dict(
        component_version_id=world.components["restore"],
        action_code="restore",
        target=original.target,
        payload={"reason_code": "mistake", "report_reference": "R-DEMO01"},
        idempotency_key=key,
        operator=world.user(who),
    )
    args.update(overrides)
    return propose_compensation(original.id, **args)


def test_compensation_is_proposed_replayed_and_approved_by_someone_else(app, world, platform):
    """COMP-1, COMP-2, COMP-3: operation id, replay, digest covers the original, proposer cannot approve."""
    original = applied_takedown(world)
    first = compensate(world, original)
    again = compensate(world, original)
    assert (again.proposal_id, again.idempotent_replay) == (first.proposal_id, True)
    proposal = db.session.get(ActionProposal, first.proposal_id)
    assert proposal.operation_id == f"compensation:{original.operation_id}:comp-1"
    assert (proposal.compensates_proposal_id, proposal.state, proposal.approval_mode) == (
        original.id,
        "approval_required",
        "human",
    )
    assert (proposal.expires_at - proposal.created_at).total_seconds() == pytest.approx(86_400, abs=1)
    assert reload(original).state == "compensation_required"
    assert (
        db.session.scalar(select(AuditEvent.action).where(AuditEvent.target_id == proposal.id))
        == "workflow.compensation_proposed"
    )
    with pytest.raises(ApiError) as caught:
        approve(world, proposal, reviewer="reviewer")
    assert caught.value.code == "maker_checker_violation"
    approve(world, proposal, reviewer="admin")
    assert deliver(proposal.id).state == "applied"
    assert platform.state.content["post:1001"] == "visible"


def test_compensation_digest_covers_the_original(app, world, platform):
    """COMP-2: the same body for two originals gives two digests."""
    first = compensate(world, applied_takedown(world, 0))
    second_original = applied_takedown(world, 1)
    second = compensate(world, second_original, target={"kind": "post", "reference": "post:1001"})
    assert first.payload_digest != second.payload_digest


def test_compensation_needs_an_applied_original(app, world):
    """COMP-1: 409 action_compensation_unavailable."""
    proposal = decide_report(world)
    with pytest.raises(ApiError) as caught:
        compensate(world, proposal)
    assert (caught.value.status, caught.value.code) == (409, "action_compensation_unavailable")


@pytest.mark.parametrize(
    "overrides, status, code",
    [
        ({"action_code": "x" * 201}, 400, "action_compensation_invalid"),
        ({"action_code": ""}, 400, "action_compensation_invalid"),
        ({"target": "post:1"}, 400, "action_target_invalid"),
        ({"payload": ["x"]}, 400, "action_payload_invalid"),
        ({"payload": {"reason_code": 5}}, 422, "action_payload_schema_invalid"),
    ],
)
def test_compensation_input_is_validated(app, world, platform, overrides, status, code):
    """COMP-1: and nothing changes when refused."""
    original = applied_takedown(world)
    before = db.session.scalar(select(func.count()).select_from(ActionProposal))
    with pytest.raises(ApiError) as caught:
        compensate(world, original, **overrides)
    assert (caught.value.status, caught.value.code) == (status, code)
    assert db.session.scalar(select(func.count()).select_from(ActionProposal)) == before
    assert reload(original).state == "applied"


def test_sweep_reconciles_a_correction_a_crashed_worker_left(app, world, platform, correction):
    """CORR-4, EVT-3: applied but not reconciled (the worker died): the sweep completes it."""
    from app.services.lifecycle import sweeps

    proposal = correction_proposal(correction)
    set_row(ActionProposal, proposal.id, state="applied", delivery_terminal=True, confirmed_at=utcnow())
    assert sweeps.reconcile_corrections() == 1
    db.session.rollback()
    assert db.session.get(AppealDecision, correction.appeal_decision_id).completion_state == "completed"
    assert sweeps.reconcile_corrections() == 0
