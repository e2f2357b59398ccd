"""The console's pages about temporary and scheduled actions (TEMP-1..4): the plan in
the approval panel, the panel that follows the action until its reversal ends it,
Reports' active temporary actions, Operations' due and overdue reversals, the metric."""

from __future__ import annotations

from datetime import timedelta

from sqlalchemy import select

from app.domain.clock import utcnow
from app.extensions import db
from app.models import ActionProposal
from app.services.lifecycle.dispatch import deliver

from ..builders import approve, decide_report, login, logout, reload, set_row


def applied_suspension(world, platform):
    suspension = decide_report(world, 0, code="suspend_account")
    approve(world, suspension)
    assert deliver(suspension.id).state == "applied"
    db.session.rollback()
    reversal = db.session.scalar(select(ActionProposal).where(ActionProposal.reverses_proposal_id == suspension.id))
    return reload(suspension), reversal


def test_temp1_the_approval_panel_shows_the_plan_the_digest_covers(client, world, platform):
    """TEMP-1: "suspend for 3 minutes, then lift the suspension", beside the digest to confirm."""
    suspension = decide_report(world, 0, code="suspend_account")
    login(client, "reviewer@example.com")
    page = client.get(f"/proposals/{suspension.id}").get_data(as_text=True)
    assert 'id="approves-plan"' in page
    assert "Suspend the account for 3 minutes, then Lift the suspension" in page
    assert "suspend_account for 3 minutes, then unsuspend_account" in page
    assert "Planned reversal" in page and "suspension_ended" in page
    assert suspension.payload_digest in page


def test_temp2_the_panel_follows_the_action_until_its_reversal_applies(client, world, platform):
    """TEMP-2: while the suspension is in force the panel polls and counts down; when the
    reversal applies, the fragment says so and stops polling."""
    suspension, reversal = applied_suspension(world, platform)
    login(client, "reviewer@example.com")
    fragment = client.get(f"/proposals/{suspension.id}/temporary", headers={"HX-Request": "true"})
    html = fragment.get_data(as_text=True)
    assert 'data-state="scheduled"' in html and "hx-trigger" in html and 'class="countdown"' in html
    assert f'href="/proposals/{reversal.id}"' in html  # linked both ways
    assert "Propose ending it now" in html and "Propose extension" in html
    assert 'name="csrf_token" value=""' not in html
    reversal_page = client.get(f"/proposals/{reversal.id}").get_data(as_text=True)
    assert f'href="/proposals/{suspension.id}"' in reversal_page and 'data-state="reversal"' in reversal_page
    past = utcnow() - timedelta(seconds=1)
    set_row(ActionProposal, reversal.id, not_before=past, next_attempt_at=past)
    assert deliver(reversal.id).state == "applied"
    html = client.get(f"/proposals/{suspension.id}/temporary").get_data(as_text=True)
    assert 'data-state="ended"' in html and "hx-trigger" not in html and "Propose ending it now" not in html


def test_temp2_reports_and_operations_show_reversals_and_the_overdue_metric(client, world, platform):
    """TEMP-2: Reports lists active temporary actions (and the subject history marks them);
    Operations lists reversals due within 24 h, then overdue ones; console_reversals_overdue
    counts those."""
    suspension, reversal = applied_suspension(world, platform)
    login(client, "admin@example.com")
    reports = client.get("/reports").get_data(as_text=True)
    assert "Active temporary actions" in reports and f'href="/proposals/{suspension.id}"' in reports
    same_author = client.get(f"/reports/{world.report_ids[1]}").get_data(as_text=True)  # REV-2's history
    assert "temporary, 3 minutes" in same_author
    operations = client.get("/operations").get_data(as_text=True)
    assert 'data-group="due"' in operations and f'href="/proposals/{reversal.id}"' in operations
    assert "console_reversals_overdue 0.0" in client.get("/metrics").get_data(as_text=True)
    late = utcnow() - timedelta(minutes=6)
    set_row(ActionProposal, reversal.id, not_before=late, next_attempt_at=late)
    operations = client.get("/operations").get_data(as_text=True)
    assert 'data-group="overdue"' in operations and 'id="reversals-overdue"' in operations
    assert "console_reversals_overdue 1.0" in client.get("/metrics").get_data(as_text=True)


def test_temp4_only_operators_cancel_and_a_refusal_changes_nothing(client, world, platform):
    """TEMP-4: an auditor cannot cancel (403); a JSON client gets the refusal's code."""
    suspension, reversal = applied_suspension(world, platform)
    token = login(client, "auditor@example.com")
    assert client.post(f"/proposals/{reversal.id}/cancel", data={"csrf_token": token}).status_code == 403
    client.post("/logout", data={"csrf_token": token})
    token = login(client, "moderator@example.com")
    refused = client.post(
        f"/proposals/{reversal.id}/cancel", data={"csrf_token": token}, headers={"Accept": "application/json"}
    )
    assert refused.status_code == 409 and refused.get_json()["error"]["code"] == "action_reversal_not_cancellable"
    assert reload(reversal).state == "queued"


def test_temp3_the_page_offers_end_now_and_extend_whenever_the_service_accepts_them(client, world, platform):
    """TEMP-3: an approved reversal waiting unsent can still be ended now or extended
    (`propose_change` accepts it); the page offers exactly what `offers` says (it used
    to re-derive the offer from ``state == 'queued'``)."""
    suspension, reversal = applied_suspension(world, platform)
    set_row(ActionProposal, reversal.id, state="approved")
    token = login(client, "reviewer@example.com")
    html = client.get(f"/proposals/{suspension.id}/temporary", headers={"HX-Request": "true"}).get_data(as_text=True)
    assert "Propose ending it now" in html and "Propose extension" in html
    logout(client, token)
    login(client, "auditor@example.com")
    html = client.get(f"/proposals/{suspension.id}/temporary", headers={"HX-Request": "true"}).get_data(as_text=True)
    assert "Propose ending it now" not in html and "Propose extension" not in html
