"""The approval panel in the console: maker/checker in the page and against forged
posts (APPR-4), reject and wrong-digest paths through HTTP (APPR-3)."""

from __future__ import annotations

from sqlalchemy import func, select

from app.extensions import db
from app.models import ActionApproval, AuditEvent

from ..builders import decide_report, login, reload


def post_decision(client, proposal, token, **overrides):
    data = {
        "decision": "approved",
        "payload_digest": proposal.payload_digest,
        "reason": "",
        "idempotency_key": "page-key-1",
        "csrf_token": token,
    }
    data.update(overrides)
    return client.post(f"/proposals/{proposal.id}/decision", data=data)


def counts():
    db.session.rollback()
    return (
        db.session.scalar(select(func.count()).select_from(ActionApproval)),
        db.session.scalar(select(func.count()).select_from(AuditEvent)),
    )


def test_maker_sees_why_and_cannot_forge_an_approval(app, client, world):
    """APPR-4: the page disables the buttons with the reason; a forged POST is 403."""
    proposal = decide_report(world, maker="reviewer2")  # a reviewer who made the decision
    token = login(client, "reviewer2@example.com")
    page = client.get(f"/proposals/{proposal.id}").get_data(as_text=True)
    assert "You cannot decide this action." in page and "second reviewer" in page
    assert f'action="/proposals/{proposal.id}/decision"' not in page
    assert "disabled" in page

    before = counts()
    response = post_decision(client, proposal, token)
    assert response.status_code == 403
    assert "maker_checker_violation" in response.get_data(as_text=True)
    assert counts() == before and reload(proposal).state == "approval_required"

    json_response = client.post(
        f"/proposals/{proposal.id}/decision",
        headers={"Accept": "application/json"},
        data={
            "decision": "approved",
            "payload_digest": proposal.payload_digest,
            "idempotency_key": "k2",
            "csrf_token": token,
        },
    )
    assert json_response.status_code == 403


def test_moderator_without_reviewer_role_is_refused(app, client, world):
    """APPR-4: the reviewer role is required."""
    proposal = decide_report(world, maker="reviewer2")
    token = login(client, "moderator@example.com")
    assert "Only reviewers can approve" in client.get(f"/proposals/{proposal.id}").get_data(as_text=True)
    assert post_decision(client, proposal, token).status_code == 403


def test_reject_through_the_page(app, client, world, platform):
    """APPR-5: a reviewer rejects with a reason; the run ends, nothing is sent."""
    proposal = decide_report(world)
    token = login(client, "reviewer@example.com")
    response = post_decision(client, proposal, token, decision="rejected", reason="Satire, not harassment")
    assert response.status_code == 303
    assert reload(proposal).state == "rejected"
    page = client.get(f"/proposals/{proposal.id}").get_data(as_text=True)
    assert "Rejected by Rafael Reviewer" in page and "Satire, not harassment" in page
    assert platform.state.requests_seen == 0


def test_wrong_digest_is_409_and_changes_nothing(app, client, world):
    """APPR-3: the form keeps the input and shows the code; no row changes."""
    proposal = decide_report(world)
    token = login(client, "reviewer@example.com")
    before = counts()
    response = post_decision(client, proposal, token, payload_digest="sha256:" + "f" * 64, reason="Looks right")
    assert response.status_code == 409
    html = response.get_data(as_text=True)
    assert "action_approval_digest_mismatch" in html and "Looks right" in html
    assert counts() == before and reload(proposal).state == "approval_required"


def test_missing_csrf_token_is_refused(app, client, world):
    """A POST without the session's CSRF token changes nothing."""
    proposal = decide_report(world)
    login(client, "reviewer@example.com")
    before = counts()
    response = post_decision(client, proposal, token="forged")
    assert response.status_code == 400 and "csrf_invalid" in response.get_data(as_text=True)
    assert counts() == before
