"""The walking skeleton: a moderator's decision is enforced end to end, approved by
a second person and delivered by an RQ worker (PREP, APPR, DLV, RCPT, AUD)."""

from __future__ import annotations

from sqlalchemy import select

from app.extensions import db
from app.models import ActionApproval, ActionReceiptRecord, AuditEvent, ConnectionAttempt, HumanTask, WorkflowRun

from ..builders import login, logout, proposal_of, run_worker


def audit_actions(target_id: str) -> list[str]:
    return list(
        db.session.scalars(select(AuditEvent.action).where(AuditEvent.target_id == target_id).order_by(AuditEvent.seq))
    )


def test_decision_is_approved_by_second_person_and_delivered(app, client, world, platform):
    """PREP-8, APPR-5, DLV-4, DLV-5, RCPT-2, AUD-1: the whole path through the console."""
    report_id = world.report_ids[0]
    token = login(client, "moderator@example.com")
    response = client.post(
        f"/reports/{report_id}/decisions",
        data={"decision_code": "remove_content", "rationale": "Targeted harassment", "csrf_token": token},
    )
    assert response.status_code == 303

    proposal = proposal_of(report_id)
    assert proposal.state == "approval_required"
    assert proposal.payload_digest.startswith("sha256:")
    task = db.session.scalar(select(HumanTask).where(HumanTask.action_proposal_id == proposal.id))
    assert task.state == "open"
    logout(client, token)

    token = login(client, "reviewer@example.com")
    page = client.get(f"/proposals/{proposal.id}").get_data(as_text=True)
    assert proposal.payload_digest in page and "Record decision" in page
    response = client.post(
        f"/proposals/{proposal.id}/decision",
        data={
            "decision": "approved",
            "payload_digest": proposal.payload_digest,
            "reason": "Clear violation",
            "idempotency_key": "review-1",
            "csrf_token": token,
        },
    )
    assert response.status_code == 303, response.get_data(as_text=True)[:2000]
    assert proposal_of(report_id).state == "queued"  # the run moved the approved action on

    run_worker(app)

    proposal = proposal_of(report_id)
    assert proposal.state == "applied"
    assert proposal.confirmed_at is not None and proposal.delivery_terminal
    attempts = db.session.scalars(select(ConnectionAttempt).where(ConnectionAttempt.proposal_id == proposal.id)).all()
    assert [(a.attempt_number, a.response_status, a.response_class) for a in attempts] == [(1, 200, "success")]
    receipt = db.session.scalar(select(ActionReceiptRecord).where(ActionReceiptRecord.proposal_id == proposal.id))
    assert receipt.status == "applied" and receipt.source == "sync"
    assert proposal.last_receipt["operation_id"] == proposal.operation_id
    assert (
        db.session.scalar(select(ActionApproval.approver_id).where(ActionApproval.proposal_id == proposal.id))
        == world.users["reviewer"]
    )
    assert audit_actions(proposal.id) == ["action.proposed", "action.approved", "workflow.action_applied"]
    run = db.session.get(WorkflowRun, proposal.run_id)
    assert (run.state, run.outcome_port) == ("completed", "applied")
    assert platform.state.content["post:1001"] == "removed"
    assert [e["reference"] for e in platform.state.effects] == ["post:1001"]

    detail = client.get(f"/proposals/{proposal.id}").get_data(as_text=True)
    assert "applied" in detail and "workflow.action_applied" in detail
    assert 'hx-trigger="every' not in detail  # terminal: the live panel no longer polls
