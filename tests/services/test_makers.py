"""The makers of a proposal, on every path that decides, claims or lists (FOUR-1)."""

from __future__ import annotations

import pytest
from sqlalchemy import func, select

from app.domain.errors import ApiError
from app.extensions import db
from app.models import ActionProposal, AuditEvent, HumanTask, HumanTaskClaim, OperatorUser
from app.services.cases.appeals import decide_appeal, file_appeal
from app.services.cases.reports import record_decision
from app.services.cases.tasks import claim_task
from app.services.lifecycle.approval import approval_verdict, makers_of
from app.services.lifecycle.compensation import propose_compensation
from app.services.lifecycle.dispatch import deliver
from app.services.read.console import ProposalFilters, list_proposals
from app.services.uow import Actor

from ..builders import approve, decide_report, login, proposal_of, reload, set_graph, set_row

SECOND_NODE = {
    "type": "action",
    "config": {"action_code": "takedown_followup", "approval_policy": {"mode": "human"}},
    "input_mapping": {
        "idempotency_key": "join(':', ['followup', decision.id])",
        "target": "{reference: targets[0].target_reference, kind: targets[0].kind}",
        # the payload carries the report's *latest* decision, not the run's first one
        "payload": "{reason_code: decision.decision_code, report_reference: report.public_reference}",
    },
    "next": {},
}


def two_node_workflow(world) -> None:
    """takedown → (applied) → followup, the follow-up built from the latest decision."""

    def mutate(graph):
        first = graph["nodes"]["takedown"]
        first["input_mapping"]["preconditions"] = "{report_state: 'decided'}"  # pins no decision
        first["next"] = {"applied": "followup"}
        graph["nodes"]["followup"] = {
            **SECOND_NODE,
            "config": {**SECOND_NODE["config"], "component_version_id": world.components["takedown"]},
        }

    set_graph(world, mutate)


def followup_carrying_a_later_decision(world) -> tuple[ActionProposal, ActionProposal]:
    """Maya decides (the run's decision); Rita records a later decision while the first
    action awaits approval; the second node then carries Rita's decision."""
    two_node_workflow(world)
    first = decide_report(world)
    record_decision(world.report_ids[0], decision_code="restrict_reach", rationale="", operator=world.user("reviewer2"))
    approve(world, first, reviewer="reviewer")
    assert deliver(first.id).state == "applied"
    second = proposal_of(world.report_ids[0])
    assert second.id != first.id and second.action_code == "takedown_followup"
    assert second.payload["reason_code"] == "restrict_reach"
    return reload(first), second


def test_maker_of_the_latest_decision_a_proposal_carries_cannot_approve_it(app, world, platform):
    """FOUR-1: the report's latest decision when the proposal was prepared counts, not
    only the run's first decision (issue 11 finding)."""
    _, second = followup_carrying_a_later_decision(world)
    with pytest.raises(ApiError) as caught:
        approve(world, second, reviewer="reviewer2")
    assert (caught.value.status, caught.value.code) == (403, "maker_checker_violation")
    assert reload(second).state == "approval_required"
    assert world.users["reviewer2"] in makers_of(db.session, second)
    approve(world, second, reviewer="reviewer")  # a reviewer who made no decision may
    assert reload(second).state == "queued"


def test_a_later_decision_does_not_make_its_maker_a_maker_of_earlier_proposals(app, world, platform):
    """FOUR-1: decisions recorded after a proposal was prepared are not among its makers."""
    proposal = decide_report(world)
    record_decision(world.report_ids[0], decision_code="restrict_reach", rationale="", operator=world.user("reviewer2"))
    assert set(makers_of(db.session, reload(proposal))) == {world.users["moderator"]}
    assert approval_verdict(db.session, reload(proposal), world.user("reviewer2"))


def test_a_maker_cannot_claim_the_approval_task(app, world, client):
    """FOUR-1: claiming the approval task of one's own proposal is refused (issue 11
    finding); the queue shows it as not theirs to decide; nothing changes."""
    proposal = decide_report(world, maker="reviewer2")
    task = db.session.scalar(select(HumanTask).where(HumanTask.action_proposal_id == proposal.id))
    audit_rows = db.session.scalar(select(func.count()).select_from(AuditEvent))
    with pytest.raises(ApiError) as caught:
        claim_task(task.id, world.user("reviewer2"))
    assert (caught.value.status, caught.value.code) == (403, "maker_checker_violation")
    db.session.rollback()
    assert db.session.get(HumanTask, task.id).state == "open"
    assert db.session.scalar(select(func.count()).select_from(HumanTaskClaim)) == 0
    assert db.session.scalar(select(func.count()).select_from(AuditEvent)) == audit_rows

    token = login(client, "reviewer2@example.com")
    page = client.get("/tasks").get_data(as_text=True)
    assert "Not yours to decide" in page and f"/tasks/{task.id}/claim" not in page
    forged = client.post(f"/tasks/{task.id}/claim", data={"csrf_token": token}, headers={"Accept": "application/json"})
    assert forged.status_code == 403 and forged.get_json()["error"]["code"] == "maker_checker_violation"
    assert reload_task(task).state == "open"

    claim_task(task.id, world.user("reviewer"))  # anyone else may
    assert reload_task(task).state == "claimed"


def reload_task(task) -> HumanTask:
    db.session.rollback()
    return db.session.get(HumanTask, task.id)


def test_the_proposer_of_a_compensation_cannot_claim_its_task(app, world, platform):
    """FOUR-1, COMP-3: a compensation's proposer is its maker on the task queue too."""
    original = decide_report(world)
    approve(world, original)
    assert deliver(original.id).state == "applied"
    result = propose_compensation(
        original.id,
        component_version_id=world.components["restore"],
        action_code="restore",
        target=reload(original).target,
        payload={"reason_code": "mistake", "report_reference": "R-DEMO01"},
        idempotency_key="comp-1",
        operator=world.user("admin"),
    )
    task = db.session.scalar(select(HumanTask).where(HumanTask.action_proposal_id == result.proposal_id))
    with pytest.raises(ApiError) as caught:
        claim_task(task.id, world.user("admin"))
    assert caught.value.code == "maker_checker_violation"


def every_kind_of_proposal(world) -> list[str]:
    """Proposals awaiting approval whose makers come from every source: a workflow
    action, a follow-up carrying a later decision, a compensation, a correction."""
    set_row(OperatorUser, world.users["moderator"], roles_text="moderator,reviewer")
    first, followup = followup_carrying_a_later_decision(world)
    compensation = propose_compensation(
        first.id,
        component_version_id=world.components["restore"],
        action_code="restore",
        target=first.target,
        payload={"reason_code": "mistake", "report_reference": "R-DEMO01"},
        idempotency_key="comp-1",
        operator=world.user("admin"),
    ).proposal_id
    plain = decide_report(world, 1)
    appealed = decide_report(world, 2)
    approve(world, appealed)
    assert deliver(appealed.id).state == "applied"
    appeal_id = file_appeal(
        world.report_ids[2],
        statement="It was satire.",
        actor=Actor("operator", world.users["moderator"]),
        installation_id=world.installation_id,
    ).appeal_id
    [correction_id] = decide_appeal(
        appeal_id, outcome="reversed", rationale="Satire", operator=world.user("reviewer2")
    ).correction_ids
    correction = db.session.scalar(select(ActionProposal).where(ActionProposal.appeal_id == appeal_id))
    assert correction is not None, correction_id
    return [followup.id, compensation, plain.id, correction.id]


def test_needs_my_approval_never_lists_a_proposal_its_viewer_is_refused(app, world, platform):
    """FOUR-1: the "needs my approval" filter is the makers rule as SQL; for every
    reviewer it lists exactly the proposals they may then approve (the filter used to
    leave out the appeal decision's maker)."""
    ids = every_kind_of_proposal(world)
    proposals = db.session.scalars(select(ActionProposal).where(ActionProposal.state == "approval_required")).all()
    assert set(ids) <= {p.id for p in proposals}
    for name in ("moderator", "reviewer", "reviewer2", "admin"):
        operator = world.user(name)
        page = list_proposals(operator, ProposalFilters(needs_my_approval=True), None, with_counts=False)
        listed = {row["proposal"].id for row in page.rows}
        may_approve = {p.id for p in proposals if approval_verdict(db.session, p, operator)}
        assert listed == may_approve, name
    assert ids[3] not in {  # the correction: its appeal decision's maker is not offered it
        row["proposal"].id
        for row in list_proposals(
            world.user("reviewer2"), ProposalFilters(needs_my_approval=True), None, with_counts=False
        ).rows
    }


def test_the_sql_makers_rule_agrees_with_the_domain_rule(app, world, platform):
    """FOUR-1: for every operator and proposal, the SQL clause and `makers` agree."""
    from app.services.lifecycle.maker_lookup import is_a_maker

    every_kind_of_proposal(world)
    db.session.rollback()
    proposals = db.session.scalars(select(ActionProposal)).all()
    for operator_id in world.users.values():
        in_sql = set(db.session.scalars(select(ActionProposal.id).where(is_a_maker(operator_id))))
        in_python = {p.id for p in proposals if operator_id in makers_of(db.session, p)}
        assert in_sql == in_python, operator_id


def test_needs_my_approval_leaves_out_an_expired_authorization_as_the_offer_does(app, world, platform):
    """APPR-3, FOUR-1: the filter lists exactly what the page then offers to decide;
    an authorization that expired is offered to nobody (`offers.decide_offer`)."""
    from datetime import timedelta

    from app.domain.clock import utcnow
    from app.services.read.console import proposal_detail

    proposal = decide_report(world)
    reviewer = world.user("reviewer")
    mine = ProposalFilters(needs_my_approval=True)
    assert proposal.id in {r["proposal"].id for r in list_proposals(reviewer, mine, None, with_counts=False).rows}
    set_row(ActionProposal, proposal.id, expires_at=utcnow() - timedelta(seconds=1))
    db.session.rollback()
    assert not proposal_detail(reviewer, proposal.id).offers.decide.allowed
    listed = {r["proposal"].id for r in list_proposals(reviewer, mine, None, with_counts=False).rows}
    assert proposal.id not in listed
