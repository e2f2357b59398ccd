"""The approval binds the delivery (SPEC FOUR-5, issue 22): the digest covers where
the action goes and how its answer is read; a delivery whose destination or reading
changed after approval sends nothing and says why."""

from __future__ import annotations

import json

import pytest
from pytest_httpserver import HTTPServer
from sqlalchemy import select

from app.domain.digests import payload_digest
from app.domain.proposal.identity import digest_material
from app.extensions import db
from app.models import AuditEvent, ComponentVersion, ConnectionAttempt, ConnectionVersion
from app.services.lifecycle.dispatch import deliver

from ..builders import (
    approve,
    decide_report,
    make_decision,
    make_proposal,
    make_report,
    make_team,
    proposal_of,
    reload,
    set_row,
)

READS_404_AS_APPLIED = {
    "request": "POST /v1/nowhere/{target.reference}",
    "outcome": {"2xx": "'applied'", "4xx": "'applied'"},
}


@pytest.fixture
def other_host():
    """A second loopback server: the host a changed connection would send to."""
    server = HTTPServer(host="127.0.0.1", port=0)
    server.start()
    yield server
    server.clear()
    server.stop()


def _material_of(p) -> dict:
    return digest_material(
        action_id=p.id,
        action_code=p.action_code,
        target=p.target,
        payload=p.payload,
        preconditions=p.preconditions,
        component_version_id=p.component_version_id,
        expires_at=p.expires_at,
        installation_id=p.installation_id,
        workflow_version_id=p.workflow_version_id,
        policy_version_id=p.policy_version_id,
        delivery=p.delivery,
    )


def test_four_5_prepare_stores_the_delivery_the_digest_covers_404_read_as_applied(app, httpserver):
    """FOUR-5 (issue 22 (a)): a REST component that posts to a path that does not exist
    and reads 4xx as applied: the proposal stores that destination and mapping, and its
    digest covers them."""
    team = make_team(httpserver.url_for("/"))
    set_row(
        ComponentVersion,
        team.components["takedown"],
        implementation_kind="rest",
        implementation_reference=json.dumps(READS_404_AS_APPLIED),
    )
    report = make_report(team, target="post:1001")
    make_decision(report)
    proposal = proposal_of(report.id)

    host, port = httpserver.host, httpserver.port
    assert proposal.delivery == {
        "kind": "rest",
        "origin": f"http://{host}:{port}",
        "method": "POST",
        "path": "/v1/nowhere/post%3A1001",
        "answer": "outcome",
        "outcome": {"2xx": "'applied'", "4xx": "'applied'"},
        "read_back": None,
    }
    material = _material_of(proposal)
    assert material["delivery"]["outcome"]["4xx"] == "'applied'"
    assert payload_digest(material) == proposal.payload_digest


def test_four_5_a_destination_changed_after_approval_sends_nothing_and_says_why(app, httpserver, other_host):
    """FOUR-5 (issue 22 (b)): approved for one host; the connection then points at
    another. Nothing reaches either host; the proposal fails terminally with
    ``action_delivery_changed`` and an audit row names the approved and current
    destinations."""
    team = make_team(httpserver.url_for("/"))
    proposal = make_proposal(team, state="queued")  # decided, approved by the reviewer
    assert proposal.delivery["origin"] == f"http://127.0.0.1:{httpserver.port}"
    set_row(ConnectionVersion, team.connection_version_id, base_url=other_host.url_for("/"))

    outcome = deliver(proposal.id)

    assert (outcome.state, outcome.error_code, outcome.terminal) == ("failed", "action_delivery_changed", True)
    assert other_host.log == [] and httpserver.log == []
    row = reload(proposal)
    assert (row.state, row.last_error_code, row.delivery_terminal) == ("failed", "action_delivery_changed", True)
    attempts = db.session.scalars(select(ConnectionAttempt).where(ConnectionAttempt.proposal_id == proposal.id)).all()
    assert attempts == []  # no request row: nothing left
    [audit] = db.session.scalars(
        select(AuditEvent).where(AuditEvent.target_id == proposal.id, AuditEvent.action == "action.delivery_changed")
    ).all()
    details = json.loads(audit.details_json)
    assert details["approved"]["origin"] == f"http://127.0.0.1:{httpserver.port}"
    assert details["in_force"]["origin"] == f"http://127.0.0.1:{other_host.port}"


def test_four_5_a_changed_outcome_mapping_is_refused_too(app, httpserver):
    """FOUR-5: how the answer is read is approved as well: a mapping changed in place
    after approval (4xx now read as applied) sends nothing."""
    team = make_team(httpserver.url_for("/"))
    set_row(
        ComponentVersion,
        team.components["takedown"],
        implementation_kind="rest",
        implementation_reference=json.dumps(
            {"request": "POST /v1/takedowns/{target.reference}", "outcome": {"2xx": "'applied'"}}
        ),
    )
    proposal = make_proposal(team, state="queued")
    set_row(
        ComponentVersion,
        team.components["takedown"],
        implementation_reference=json.dumps(
            {**READS_404_AS_APPLIED, "request": "POST /v1/takedowns/{target.reference}"}
        ),
    )

    outcome = deliver(proposal.id)

    assert (outcome.error_code, outcome.terminal) == ("action_delivery_changed", True)
    assert httpserver.log == []


def test_four_5_unchanged_delivery_is_sent_where_approved(app, platform):
    """FOUR-5: the ordinary path still delivers (the description matches), and a
    compensation carries its own description."""
    team = make_team(platform)
    applied = make_proposal(team, state="compensation_required")
    from app.models import ActionProposal

    compensation = db.session.scalar(select(ActionProposal).where(ActionProposal.compensates_proposal_id == applied.id))
    assert applied.delivery["path"] == "/actions/takedown"
    assert compensation.delivery["path"] == "/actions/restore"
    approve(team, compensation, reviewer="admin")
    assert deliver(compensation.id).state == "applied"


def test_four_5_a_compensation_is_bound_to_its_own_approved_delivery(app, platform, other_host):
    """FOUR-5: a compensation has its own approval and its own description; its
    destination changing after approval sends nothing either (retries included)."""
    team = make_team(platform)
    applied = make_proposal(team, state="compensation_required")
    from app.models import ActionProposal

    compensation = db.session.scalar(
        select(ActionProposal).where(ActionProposal.compensates_proposal_id == applied.id)
    )
    approve(team, compensation, reviewer="admin")
    set_row(ConnectionVersion, team.connection_version_id, base_url=other_host.url_for("/"))
    seen = platform.state.requests_seen

    outcome = deliver(compensation.id)

    assert (outcome.error_code, outcome.terminal) == ("action_delivery_changed", True)
    assert other_host.log == [] and platform.state.requests_seen == seen

    from app.services.lifecycle.retry import retry_proposal

    retry_proposal(
        compensation.id,
        payload_digest=compensation.payload_digest,
        idempotency_key="retry-after-change-1",
        operator=team.user("admin"),
    )
    again = deliver(compensation.id)
    assert (again.error_code, again.terminal) == ("action_delivery_changed", True)
    assert other_host.log == [] and platform.state.requests_seen == seen


def test_four_5_a_scheduled_reversal_keeps_the_delivery_approved_with_its_action(app, world, platform):
    """FOUR-5, TEMP-1: the reversal a temporary action schedules needs no second
    approval, so the action's digest covers where the reversal goes (its plan carries
    the description). The reversal component rewired after that approval: the reversal
    still states the approved delivery and, when due, sends nothing."""
    from .test_reversals import reversal_of, time_reaches

    proposal = decide_report(world, 0, code="suspend_account")
    planned = proposal.temporary["reversal"]["delivery"]
    assert planned["path"] == "/actions/unsuspend"
    approve(world, proposal)
    set_row(ComponentVersion, world.components["unsuspend_account"], implementation_reference="POST /actions/elsewhere")
    assert deliver(proposal.id).state == "applied"  # the action itself is unchanged
    reversal = reversal_of(proposal)
    assert reversal.delivery == planned
    time_reaches(reversal)
    seen = platform.state.requests_seen

    outcome = deliver(reversal.id)

    assert (outcome.error_code, outcome.terminal) == ("action_delivery_changed", True)
    assert platform.state.requests_seen == seen


def test_four_5_a_proposal_stored_before_four_5_still_replays_and_delivers(app, world, platform):
    """ID-2, PREP-7, FOUR-5: a proposal prepared before FOUR-5 (no stored delivery, its
    digest over the material without it) replays with the same digest and is
    delivered unchecked: nothing approved before changes meaning."""
    from app.models import ActionProposal

    from .test_prepare import prepare_again

    proposal = decide_report(world)
    legacy = payload_digest({k: v for k, v in _material_of(proposal).items() if k != "delivery"})
    set_row(ActionProposal, proposal.id, delivery=None, payload_digest=legacy)

    outcome = prepare_again(reload(proposal))

    assert outcome.waiting and outcome.idempotent_replay and outcome.payload_digest == legacy
    approve(world, reload(proposal))
    assert deliver(proposal.id).state == "applied"


def test_four_5_approving_after_the_destination_changed_is_refused_and_changes_nothing(app, world, other_host):
    """FOUR-5: a reviewer cannot approve a delivery that is no longer the one shown:
    409 ``action_delivery_changed`` naming both hosts, no approval row, still waiting;
    rejecting it stays possible."""
    from app.domain.errors import ApiError
    from app.models import ActionApproval

    proposal = decide_report(world)
    set_row(ConnectionVersion, world.connection_version_id, base_url=other_host.url_for("/"))

    with pytest.raises(ApiError) as refused:
        approve(world, proposal)

    assert (refused.value.status, refused.value.code) == (409, "action_delivery_changed")
    assert f"127.0.0.1:{other_host.port}" in refused.value.message
    db.session.rollback()
    assert db.session.scalar(select(ActionApproval).where(ActionApproval.proposal_id == proposal.id)) is None
    assert reload(proposal).state == "approval_required"
    approve(world, proposal, decision="rejected")
    assert reload(proposal).state == "rejected"
