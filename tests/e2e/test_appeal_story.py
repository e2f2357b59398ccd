"""An overturned decision is corrected end to end: takedown applied on the demo
platform; the appeal reverses it; an eligible reviewer approves the correction; the
worker restores the post; the appeal completes; the audit log tells it in order
(CORR-1..4, COMP-1..3)."""

from __future__ import annotations

import re

from sqlalchemy import select

from app.extensions import db
from app.models import AppealCorrection, AppealDecision, AuditEvent, Report

from ..builders import login, logout, proposal_of, run_worker


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


def test_reversed_appeal_restores_the_post(app, client, world, platform):
    report_id = world.report_ids[0]
    token = login(client, "moderator@example.com")
    client.post(f"/reports/{report_id}/decisions", data={"decision_code": "remove_content", "csrf_token": token})
    takedown = proposal_of(report_id)
    logout(client, token)
    token = login(client, "reviewer@example.com")
    assert approve_via_page(client, token, takedown, "k1").status_code == 303
    run_worker(app)
    assert platform.state.content["post:1001"] == "removed"

    # The platform forwards the user's appeal through the API.
    response = client.post(
        "/api/v1/appeals",
        headers={"Authorization": f"Bearer {world.console_token}"},
        json={"report_external_id": "demo-report-1", "external_id": "appeal-77", "statement": "My post was satire."},
    )
    assert response.status_code == 201
    appeal_id = response.get_json()["appeal_id"]
    again = client.post(
        "/api/v1/appeals",
        headers={"Authorization": f"Bearer {world.console_token}"},
        json={"report_external_id": "demo-report-1", "external_id": "appeal-77"},
    )
    assert again.status_code == 200 and again.get_json()["appeal_id"] == appeal_id
    logout(client, token)

    token = login(client, "reviewer2@example.com")
    response = client.post(
        f"/appeals/{appeal_id}/decision",
        data={"outcome": "reversed", "rationale": "Satire is allowed under policy 4.2", "csrf_token": token},
    )
    assert response.status_code == 303
    page = client.get(f"/appeals/{appeal_id}").get_data(as_text=True)
    assert "You cannot approve this correction." in page and "made the appeal decision" in page
    correction = db.session.scalar(select(AppealCorrection))
    restore = proposal_of(report_id)
    assert restore.id == correction.proposal_id and restore.action_code == "restore"
    assert approve_via_page(client, token, restore, "k2").status_code == 403  # CORR-2: appeal decision maker
    logout(client, token)

    token = login(client, "admin@example.com")
    page = client.get(f"/appeals/{appeal_id}").get_data(as_text=True)
    assert "correction&#39;s page" in page or "correction's page" in page
    assert approve_via_page(client, token, restore, "k3").status_code == 303
    run_worker(app)

    assert platform.state.content["post:1001"] == "visible"
    assert [e["effect"] for e in platform.state.effects] == ["removed", "visible"]
    db.session.rollback()
    ad = db.session.scalar(select(AppealDecision))
    assert (ad.outcome, ad.completion_state) == ("reversed", "completed")
    assert db.session.get(Report, report_id).state == "closed"
    story = [
        a
        for a in db.session.scalars(select(AuditEvent.action).order_by(AuditEvent.seq))
        if not a.startswith(("workflow.run_", "operator.", "installation.", "integration."))
    ]
    assert story == [
        "report.decided",
        "action.proposed",
        "action.approved",
        "workflow.action_applied",
        "appeal.filed",
        "appeal.decided",
        "appeal.correction_prepared",
        "action.proposed",
        "action.approved",
        "workflow.action_applied",
        "appeal.decision_completed",
    ]
    page = client.get(f"/appeals/{appeal_id}").get_data(as_text=True)
    assert re.search(r"completion <strong><span class=\"coded\" title=\"completed\">completed</span></strong>", page)


def test_compensation_from_the_detail_page(app, client, world, platform):
    """COMP-1..3: proposed from the page, refused for its proposer, approved by another."""
    report_id = world.report_ids[0]
    token = login(client, "moderator@example.com")
    client.post(f"/reports/{report_id}/decisions", data={"decision_code": "remove_content", "csrf_token": token})
    takedown = proposal_of(report_id)
    logout(client, token)
    token = login(client, "reviewer@example.com")
    approve_via_page(client, token, takedown, "k1")
    run_worker(app)
    page = client.get(f"/proposals/{takedown.id}").get_data(as_text=True)
    assert "Propose a compensating action" in page
    form = {
        "component_version_id": world.components["restore"],
        "action_code": "restore",
        "target": '{"reference": "post:1001", "kind": "post"}',
        "payload": '{"reason_code": "mistake", "report_reference": "R-DEMO01"}',
        "idempotency_key": "comp-1",
        "csrf_token": token,
    }
    bad = client.post(f"/proposals/{takedown.id}/compensate", data={**form, "payload": "{not json"})
    assert bad.status_code == 400 and "action_payload_invalid" in bad.get_data(as_text=True)
    response = client.post(f"/proposals/{takedown.id}/compensate", data=form)
    assert response.status_code == 303
    compensation_url = response.headers["Location"]
    replay = client.post(f"/proposals/{takedown.id}/compensate", data=form)
    assert replay.headers["Location"] == compensation_url  # COMP-2: same key, same proposal
    compensation = proposal_of(report_id)
    assert compensation.compensates_proposal_id == takedown.id
    assert approve_via_page(client, token, compensation, "k2").status_code == 403
    logout(client, token)
    token = login(client, "admin@example.com")
    assert approve_via_page(client, token, compensation, "k3").status_code == 303
    run_worker(app)
    assert platform.state.content["post:1001"] == "visible"
