"""Approve or reject as the second person (APPR-1..5)."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

import pytest
from sqlalchemy import func, select

from app.domain.errors import ApiError
from app.extensions import db
from app.models import (
    ActionApproval,
    ActionProposal,
    AuditEvent,
    HumanTask,
    HumanTaskClaim,
    WorkflowDispatchOutbox,
    WorkflowEventInbox,
)
from app.services.cases.tasks import claim_task
from app.services.lifecycle.approval import decide_proposal

from ..builders import approve, make_proposal, reload, set_row


def snapshot(proposal_id):
    """Everything a refused decision must leave unchanged."""
    db.session.rollback()
    p = db.session.get(ActionProposal, proposal_id)
    count = lambda model: db.session.scalar(select(func.count()).select_from(model))  # noqa: E731
    return (
        p.state,
        p.updated_at,
        count(ActionApproval),
        count(AuditEvent),
        count(WorkflowEventInbox),
        count(WorkflowDispatchOutbox),
        db.session.scalar(select(HumanTask.state).where(HumanTask.action_proposal_id == proposal_id)),
    )


def decide(team, proposal, who="reviewer", **overrides):
    args = dict(
        decision="approved",
        payload_digest=proposal.payload_digest,
        reason=None,
        idempotency_key="key-1",
        operator=team.user(who),
    )
    args.update(overrides)
    return decide_proposal(proposal.id, **args)


def test_approval_writes_everything_in_one_transaction(app, team):
    """APPR-5: approval row, state, task completed, claims released, audit, event."""
    proposal = make_proposal(team)
    task = db.session.scalar(select(HumanTask).where(HumanTask.action_proposal_id == proposal.id))
    claim_task(task.id, team.user("reviewer"))
    result = decide(team, proposal, reason="  Clear violation  ")
    assert not result.idempotent_replay and result.state == "approved"
    approval = db.session.scalar(select(ActionApproval))
    assert (approval.approver_id, approval.payload_digest, approval.reason) == (
        team.user("reviewer").id,
        proposal.payload_digest,
        "Clear violation",
    )
    db.session.refresh(task)
    assert task.state == "completed" and task.completed_at is not None
    claim = db.session.scalar(select(HumanTaskClaim))
    assert claim.released_at is not None and claim.release_reason == "direct_action_decision"
    event = db.session.get(WorkflowEventInbox, approval.id)
    assert event.event_type == f"action.{proposal.id}.resolved" and event.event_key == f"action-approval:{approval.id}"
    audit = db.session.scalar(select(AuditEvent).where(AuditEvent.action == "action.approved"))
    assert audit.actor_id == team.user("reviewer").id and audit.details["payload_digest"] == proposal.payload_digest


def test_rejection_ends_the_proposal_and_the_run(app, team):
    """APPR-5: a rejection is final; nothing is ever sent."""
    proposal = make_proposal(team)
    decide(team, proposal, decision="rejected", reason="Not a violation")
    assert reload(proposal).state == "rejected"
    assert db.session.scalar(select(AuditEvent.action).where(AuditEvent.action == "action.rejected"))
    from app.models import WorkflowRun

    run = db.session.get(WorkflowRun, proposal.run_id)
    assert (run.state, run.outcome_port) == ("completed", "rejected")
    assert team.platform.state.requests_seen == 0


@pytest.mark.parametrize("reason", ["ab", "x" * 2001, 7])
def test_reason_must_be_3_to_2000_characters(app, team, reason):
    """APPR-1: 400 action_decision_reason_invalid, nothing changed."""
    proposal = make_proposal(team)
    before = snapshot(proposal.id)
    with pytest.raises(ApiError) as caught:
        decide(team, proposal, reason=reason)
    assert (caught.value.status, caught.value.code) == (400, "action_decision_reason_invalid")
    assert snapshot(proposal.id) == before


def test_same_key_same_decision_is_a_replay(app, team):
    """APPR-2"""
    proposal = make_proposal(team)
    first = decide(team, proposal)
    again = decide(team, proposal)
    assert again.idempotent_replay and again.approval_id == first.approval_id
    assert db.session.scalar(select(func.count()).select_from(ActionApproval)) == 1


def test_same_key_other_decision_or_proposal_is_reused(app, team):
    """APPR-2: 409 idempotency_key_reused."""
    proposal = make_proposal(team)
    other = make_proposal(team)
    decide(team, proposal)
    for kwargs in ({"decision": "rejected"},):
        with pytest.raises(ApiError) as caught:
            decide(team, proposal, **kwargs)
        assert (caught.value.status, caught.value.code) == (409, "idempotency_key_reused")
    before = snapshot(other.id)
    with pytest.raises(ApiError) as caught:
        decide(team, other)
    assert caught.value.code == "idempotency_key_reused"
    assert snapshot(other.id) == before


def test_not_awaiting_approval(app, team):
    """APPR-3: 409 action_not_awaiting_approval; exactly one decision."""
    proposal = make_proposal(team)
    decide(team, proposal)
    with pytest.raises(ApiError) as caught:
        decide(team, reload(proposal), who="admin", idempotency_key="key-2", decision="rejected")
    assert (caught.value.status, caught.value.code) == (409, "action_not_awaiting_approval")
    assert db.session.scalar(select(func.count()).select_from(ActionApproval)) == 1


def test_wrong_digest_changes_nothing(app, team):
    """APPR-3: 409 action_approval_digest_mismatch."""
    proposal = make_proposal(team)
    before = snapshot(proposal.id)
    with pytest.raises(ApiError) as caught:
        decide(team, proposal, payload_digest="sha256:" + "0" * 64)
    assert (caught.value.status, caught.value.code) == (409, "action_approval_digest_mismatch")
    assert snapshot(proposal.id) == before


def test_expired_authorization_cannot_be_approved(app, team):
    """APPR-3: 409 action_approval_changed when the authorization expired."""
    from datetime import timedelta

    from app.domain.clock import utcnow

    proposal = make_proposal(team)
    set_row(ActionProposal, proposal.id, expires_at=utcnow() - timedelta(seconds=1))
    before = snapshot(proposal.id)
    with pytest.raises(ApiError) as caught:
        decide(team, proposal)
    assert (caught.value.status, caught.value.code) == (409, "action_approval_changed")
    assert snapshot(proposal.id) == before


@pytest.mark.parametrize("who", ["moderator", "auditor"])
def test_makers_and_non_reviewers_are_refused(app, team, who):
    """APPR-4: 403 maker_checker_violation for the decision's maker or a non-reviewer."""
    proposal = make_proposal(team, maker="moderator")
    before = snapshot(proposal.id)
    with pytest.raises(ApiError) as caught:
        decide(team, proposal, who=who)
    assert (caught.value.status, caught.value.code) == (403, "maker_checker_violation")
    assert snapshot(proposal.id) == before


def test_reviewer_who_made_the_decision_cannot_approve(app, team):
    """APPR-4: holding the reviewer role does not let the maker check their own work."""
    proposal = make_proposal(team, maker="reviewer2")
    with pytest.raises(ApiError) as caught:
        decide(team, proposal, who="reviewer2")
    assert caught.value.code == "maker_checker_violation"
    assert decide(team, proposal, who="reviewer").state == "approved"


def test_concurrent_decisions_record_exactly_one(app, team):
    """APPR-3: racing approve/reject posts from two reviewers: exactly one decision."""
    proposal = make_proposal(team)

    def attempt(args):
        index, (who, decision) = args
        with app.app_context():
            try:
                return decide(team, proposal, who=who, decision=decision, idempotency_key=f"{who}-{index}").state
            except ApiError as error:
                return error.code

    jobs = list(enumerate([("reviewer", "approved"), ("admin", "rejected")] * 5))
    with ThreadPoolExecutor(max_workers=4) as pool:
        results = list(pool.map(attempt, jobs))
    winners = [r for r in results if r in ("approved", "rejected")]
    assert len(winners) == 1, results
    assert set(results) - {"approved", "rejected"} <= {"action_not_awaiting_approval", "action_approval_changed"}
    db.session.rollback()  # end this session's read snapshot (SQLite WAL)
    assert db.session.scalar(select(func.count()).select_from(ActionApproval)) == 1
    assert reload(proposal).state in ("queued", "rejected")


def test_approve_helper(app, team):
    proposal = make_proposal(team)
    assert approve(team, proposal).state == "approved"
