"""What people read and how the console answers them (REV-3..6): labels from
configuration, undone actions, confirmations, forms without a preselected decision,
navigation by role, JSON refusals, short ids, copy buttons, receipts as sent."""

from __future__ import annotations

import re

import pytest
from sqlalchemy import func, select

from app.extensions import db
from app.models import ActionProposal, AuditEvent, CodeLabel, HumanTask, HumanTaskClaim

from ..builders import (
    appeal_through_api,
    approve,
    approve_in_console,
    decide_report,
    login,
    logout,
    pending_changes,
    proposal_of,
    reload,
    run_worker,
)


def counts(*models):
    db.session.rollback()
    return tuple(db.session.scalar(select(func.count()).select_from(m)) for m in models)


# -- REV-3 labels -----------------------------------------------------------------


def test_codes_show_as_labels_with_the_code_in_the_tooltip(app, client, world):
    """REV-3: decision codes, action codes, states and approval modes read as
    words; the code is in the tooltip (title), not printed after the label (issue 25);
    "human (assist)" and "Cycle / attempts" are gone."""
    proposal = decide_report(world)
    login(client, "reviewer@example.com")
    page = client.get(f"/proposals/{proposal.id}").get_data(as_text=True)
    assert "Take the content down" in page and '<small class="code">takedown' not in page
    badge = '<span class="badge state-approval_required" title="state: approval_required">Waiting for approval</span>'
    assert badge in page
    assert '<span class="coded" title="human">A second person approves</span>' in page
    assert '<span class="coded" title="assist">Assist — the workflow proposes, people decide</span>' in page
    assert "human (assist)" not in page
    assert "Nothing has been sent to the platform yet." in page
    listing = client.get("/proposals").get_data(as_text=True)
    assert "Cycle / attempts" not in listing and ">Delivery</th>" in listing and "not sent yet" in listing
    report = client.get(f"/reports/{world.report_ids[0]}").get_data(as_text=True)
    assert '<span class="coded" title="remove_content">Remove content</span>' in report


def test_an_admin_sets_and_resets_a_label(app, client, world):
    """REV-3: a label per code is set in the admin screens (audited) and shown everywhere;
    an empty label goes back to the default."""
    proposal = decide_report(world)
    token = login(client, "admin@example.com")
    assert "Waiting for approval" in client.get("/admin/labels").get_data(as_text=True)
    response = client.post(
        "/admin/labels",
        data={"kind": "proposal_state", "code": "approval_required", "label": "Needs a checker", "csrf_token": token},
    )
    assert response.status_code == 303  # FOUR-4: stored for a second admin, who approves it
    assert "applies when a second admin approves" in client.get(response.headers["Location"]).get_data(as_text=True)
    assert "Waiting for approval" in client.get(f"/proposals/{proposal.id}").get_data(as_text=True)
    [change] = pending_changes()
    assert approve_in_console(app, change.id).status_code == 303
    page = client.get(f"/proposals/{proposal.id}").get_data(as_text=True)
    assert "Needs a checker" in page and "Waiting for approval" not in page
    assert db.session.scalar(select(AuditEvent).where(AuditEvent.action == "label.changed")).details == {
        "kind": "proposal_state",
        "code": "approval_required",
        "label": "Needs a checker",
        "previous": None,
        "config_change_id": change.id,
    }
    client.post(
        "/admin/labels", data={"kind": "proposal_state", "code": "approval_required", "label": "", "csrf_token": token}
    )
    [reset] = pending_changes()
    assert approve_in_console(app, reset.id).status_code == 303
    assert "Waiting for approval" in client.get(f"/proposals/{proposal.id}").get_data(as_text=True)
    assert counts(CodeLabel) == (0,)


@pytest.mark.parametrize(
    "data, field",
    [
        ({"kind": "bogus", "code": "x", "label": "X"}, "kind"),
        ({"kind": "decision", "code": "two words", "label": "X"}, "code"),
        ({"kind": "decision", "code": "ok", "label": "x" * 101}, "label"),
    ],
)
def test_bad_labels_are_refused_and_change_nothing(app, client, world, data, field):
    """REV-3: a refused label is a 400 label_invalid (JSON when asked) and changes no row."""
    token = login(client, "admin@example.com")
    before = counts(CodeLabel, AuditEvent)
    page = client.post("/admin/labels", data={**data, "csrf_token": token})
    assert page.status_code == 400 and "label_invalid" in page.get_data(as_text=True)
    answer = client.post("/admin/labels", data={**data, "csrf_token": token}, headers={"Accept": "application/json"})
    assert answer.status_code == 400 and answer.get_json()["error"] == {
        "code": "label_invalid",
        "message": answer.get_json()["error"]["message"],
        "field": field,
    }
    assert counts(CodeLabel, AuditEvent) == before


def test_only_admins_set_labels(app, client, world):
    """REV-3: an auditor sees the labels, read-only; a forged change is 403."""
    token = login(client, "auditor@example.com")
    assert "Read-only" in client.get("/admin/labels").get_data(as_text=True)
    before = counts(CodeLabel)
    response = client.post("/admin/labels", data={"kind": "decision", "code": "x", "label": "X", "csrf_token": token})
    assert response.status_code == 403 and counts(CodeLabel) == before


# -- REV-4 undone actions --------------------------------------------------------


def compensate(world, proposal, key="comp-1"):
    from app.services.lifecycle.compensation import propose_compensation

    result = propose_compensation(
        proposal.id,
        component_version_id=world.components["restore"],
        action_code="restore",
        target={"reference": "post:1001", "kind": "post"},
        payload={"reason_code": "mistake", "report_reference": "R-DEMO01"},
        idempotency_key=key,
        operator=world.user("reviewer"),
    )
    db.session.rollback()
    return db.session.get(ActionProposal, result.proposal_id)


def test_a_compensated_action_says_it_was_undone(app, client, world, platform):
    """REV-4: while a compensation waits the original says it is being undone; once applied,
    "Undone" with a link replaces the plain badge, in lists and on its page."""
    takedown = decide_report(world)
    approve(world, takedown)
    run_worker(app)
    compensation = compensate(world, takedown)
    login(client, "reviewer@example.com")
    page = client.get(f"/proposals/{takedown.id}").get_data(as_text=True)
    assert "being undone by" in page and f'href="/proposals/{compensation.id}"' in page
    approve(world, compensation, reviewer="admin")
    run_worker(app)
    assert platform.state.content["post:1001"] == "visible"
    link = f'href="/proposals/{compensation.id}">compensation: Restore the content'
    for url in ("/proposals", f"/reports/{world.report_ids[0]}"):
        html = client.get(url).get_data(as_text=True)
        row = re.search(rf'<tr>(?:(?!</tr>).)*href="/proposals/{re.escape(takedown.id)}".*?</tr>', html, re.S).group(0)
        assert "state-undone" in row and link in row, url
    page = client.get(f"/proposals/{takedown.id}").get_data(as_text=True)
    state = re.search(r'<p class="state-line">(.*?)</p>', page, re.S).group(1)
    assert "Undone" in state and "Applied on the platform" not in state


def test_a_corrected_action_says_so_and_the_appeal_shows_it(app, client, world, platform):
    """REV-4: after a reversed appeal's correction is applied, the original action shows
    "Undone" with a link to the appeal; the appeal page shows the contested action and
    its correction's state."""
    from app.services.cases.appeals import decide_appeal

    takedown = decide_report(world)
    approve(world, takedown)
    run_worker(app)
    appeal_id = appeal_through_api(client, world)
    decide_appeal(appeal_id, outcome="reversed", rationale="satire", operator=world.user("reviewer2"))
    login(client, "reviewer@example.com")
    page = client.get(f"/appeals/{appeal_id}").get_data(as_text=True)
    contested = re.search(r"<dt>Contested action</dt><dd>(.*?)</dd>", page, re.S).group(1)
    assert f'href="/proposals/{takedown.id}"' in contested and "being undone by" in contested
    assert "Correction proposed" in page
    restore = proposal_of(world.report_ids[0])
    approve(world, restore, reviewer="admin")
    run_worker(app)
    page = client.get(f"/appeals/{appeal_id}").get_data(as_text=True)
    contested = re.search(r"<dt>Contested action</dt><dd>(.*?)</dd>", page, re.S).group(1)
    assert "Undone" in contested and f'href="/appeals/{appeal_id}">appeal correction' in contested
    assert "Done" in page and 'title="state: confirmed">Done</span>' in page
    original = client.get(f"/proposals/{takedown.id}").get_data(as_text=True)
    assert "state-undone" in original and f'href="/appeals/{appeal_id}"' in original


# -- REV-5 feedback and flow -----------------------------------------------------


def test_each_recorded_step_is_confirmed(app, client, world, platform):
    """REV-5: a decision, an approval, a retry, an appeal outcome and sign-out each show a confirmation."""
    token = login(client, "moderator@example.com")
    response = client.post(
        f"/reports/{world.report_ids[0]}/decisions",
        data={"decision_code": "remove_content", "rationale": "", "csrf_token": token, "idempotency_key": "d1"},
    )
    page = client.get(response.headers["Location"]).get_data(as_text=True)
    assert '<p class="notice notice-ok">Decision recorded: Remove content.' in page
    assert '<p class="notice' not in client.get(response.headers["Location"]).get_data(as_text=True)  # shown once
    logout(client, token)
    assert "You are signed out." in client.get("/login").get_data(as_text=True)

    platform.state.configure(fail_next=1, fail_status=400)
    proposal = proposal_of(world.report_ids[0])
    token = login(client, "reviewer@example.com")
    response = client.post(
        f"/proposals/{proposal.id}/decision",
        data={
            "decision": "approved",
            "payload_digest": proposal.payload_digest,
            "idempotency_key": "a1",
            "csrf_token": token,
        },
    )
    assert "You approved “Take the content down”" in client.get(response.headers["Location"]).get_data(as_text=True)
    run_worker(app)
    failed = reload(proposal)
    assert (failed.state, failed.delivery_terminal) == ("failed", True)
    response = client.post(
        f"/proposals/{proposal.id}/retry",
        data={"payload_digest": proposal.payload_digest, "idempotency_key": "r1", "csrf_token": token},
    )
    assert "Retry requested: delivery cycle 2 has started." in client.get(response.headers["Location"]).get_data(
        as_text=True
    )
    run_worker(app)
    appeal_id = client.post(
        "/api/v1/appeals",
        headers={"Authorization": f"Bearer {world.console_token}"},
        json={"report_external_id": "demo-report-1"},
    ).get_json()["appeal_id"]
    response = client.post(f"/appeals/{appeal_id}/decision", data={"outcome": "upheld", "csrf_token": token})
    assert "Appeal outcome recorded: Upheld" in client.get(response.headers["Location"]).get_data(as_text=True)


def test_forms_start_with_no_decision_chosen(app, client, world):
    """REV-5: the report's decision, the approval and the appeal outcome preselect nothing."""
    proposal = decide_report(world)
    token = login(client, "reviewer2@example.com")
    report = client.get(f"/reports/{world.report_ids[1]}").get_data(as_text=True)
    select_html = re.search(r'<select[^>]*name="decision_code".*?</select>', report, re.S).group(0)
    assert (
        "selected" not in select_html.replace('value="" selected', "") and 'value="">Choose a decision' in select_html
    )
    logout(client, token)
    login(client, "reviewer@example.com")
    page = client.get(f"/proposals/{proposal.id}").get_data(as_text=True)
    radios = re.findall(r'<input[^>]*name="decision"[^>]*>', page)
    assert len(radios) == 2 and not any("checked" in r for r in radios)


def test_a_report_decision_without_a_choice_is_refused(app, client, world):
    """REV-5: posting the untouched form records nothing (400 form_invalid)."""
    token = login(client, "moderator@example.com")
    before = counts(AuditEvent)
    response = client.post(f"/reports/{world.report_ids[0]}/decisions", data={"decision_code": "", "csrf_token": token})
    assert response.status_code == 400 and "form_invalid" in response.get_data(as_text=True)
    assert counts(AuditEvent) == before


ROLE_SECTIONS = {
    "moderator@example.com": {"Queue", "Proposals", "Reports", "Appeals", "Bulk"},
    "reviewer@example.com": {"Queue", "Proposals", "Approval tasks", "Reports", "Appeals", "Bulk", "Operations"},
    "admin@example.com": {"Queue", "Proposals", "Approval tasks", "Reports", "Appeals", "Bulk", "Operations",
                          "Transparency", "Admin"},  # DSA-6: the transparency report
    "auditor@example.com": {"Queue", "Proposals", "Approval tasks", "Reports", "Appeals", "Bulk", "Operations",
                            "Transparency", "Admin"},
}
ALL_SECTIONS = {
    "Queue": "/queue",  # QUEUE-1: every role reads it, moderators work it
    "Proposals": "/proposals",
    "Approval tasks": "/tasks",
    "Reports": "/reports",
    "Appeals": "/appeals",
    "Bulk": "/bulk",  # BULK: read by every role, started by moderators
    "Operations": "/operations",
    "Transparency": "/transparency",
    "Admin": "/admin/",
}


@pytest.mark.parametrize("email", sorted(ROLE_SECTIONS))
def test_navigation_shows_only_what_the_role_opens(app, client, world, email):
    """REV-5: every section in the navigation opens (200); every hidden one is 403."""
    login(client, email)
    nav = re.search(r'<nav aria-label="Main">(.*?)</nav>', client.get("/reports").get_data(as_text=True), re.S).group(1)
    shown = set(re.findall(r">([^<]+)</a>", nav))
    assert shown == ROLE_SECTIONS[email]
    for name, url in ALL_SECTIONS.items():
        assert client.get(url).status_code == (200 if name in shown else 403), (email, name)


def test_the_queue_marks_tasks_the_viewer_may_not_decide_and_refuses_their_claim(app, client, world):
    """REV-5: a maker sees the task marked as not theirs, with no Claim button; a forged
    claim is 403 maker_checker_violation (JSON when asked) and changes no row."""
    proposal = decide_report(world, maker="reviewer2")
    token = login(client, "reviewer2@example.com")
    task = db.session.scalar(select(HumanTask).where(HumanTask.action_proposal_id == proposal.id))
    page = client.get("/tasks").get_data(as_text=True)
    row = re.search(rf'<tr data-task="{re.escape(task.id)}".*?</tr>', page, re.S).group(0)
    assert 'class="not-yours"' in row and "Not yours to decide." in row and ">Claim</button>" not in row
    before = counts(HumanTaskClaim, AuditEvent)
    refused = client.post(f"/tasks/{task.id}/claim", data={"csrf_token": token})
    assert refused.status_code == 403 and "maker_checker_violation" in refused.get_data(as_text=True)
    as_json = client.post(f"/tasks/{task.id}/claim", data={"csrf_token": token}, headers={"Accept": "application/json"})
    assert as_json.status_code == 403 and as_json.get_json()["error"]["code"] == "maker_checker_violation"
    assert counts(HumanTaskClaim, AuditEvent) == before
    db.session.rollback()
    assert db.session.get(HumanTask, task.id).state == "open"
    logout(client, token)
    token = login(client, "reviewer@example.com")
    row = re.search(rf'<tr data-task="{re.escape(task.id)}".*?</tr>', client.get("/tasks").get_data(as_text=True), re.S)
    assert ">Claim</button>" in row.group(0)
    assert client.post(f"/tasks/{task.id}/claim", data={"csrf_token": token}).status_code == 303


def test_the_maker_checker_refusal_answers_json_when_asked(app, client, world):
    """REV-5: like every other refusal, maker/checker answers JSON to a JSON client; no row changes."""
    proposal = decide_report(world, maker="reviewer2")
    token = login(client, "reviewer2@example.com")
    before = counts(AuditEvent)
    response = client.post(
        f"/proposals/{proposal.id}/decision",
        headers={"Accept": "application/json"},
        data={
            "decision": "approved",
            "payload_digest": proposal.payload_digest,
            "idempotency_key": "j1",
            "csrf_token": token,
        },
    )
    assert response.status_code == 403 and response.mimetype == "application/json"
    assert response.get_json()["error"]["code"] == "maker_checker_violation"
    bad_form = client.post(
        f"/proposals/{proposal.id}/decision", headers={"Accept": "application/json"}, data={"csrf_token": token}
    )
    assert bad_form.status_code == 400 and bad_form.get_json()["error"]["code"] == "form_invalid"
    assert counts(AuditEvent) == before and reload(proposal).state == "approval_required"


def test_a_json_client_signed_out_gets_a_json_401(app, client, world):
    """REV-5: a console request without a session answers JSON to a JSON client, a redirect to a browser."""
    proposal = decide_report(world)
    answer = client.get(f"/proposals/{proposal.id}", headers={"Accept": "application/json"})
    assert answer.status_code == 401 and answer.get_json()["error"]["code"] == "unauthorized"
    assert client.get(f"/proposals/{proposal.id}").status_code == 302


def test_long_ids_are_short_with_the_full_value_kept_and_the_digest_can_be_copied(app, client, world):
    """REV-5: long ids are shortened by CSS with the whole value in the page and its title
    (hover and copy give it all); a copy button sits beside the payload digest."""
    proposal = decide_report(world)
    login(client, "reviewer@example.com")
    page = client.get(f"/proposals/{proposal.id}").get_data(as_text=True)
    escaped = proposal.operation_id.replace("'", "&#39;")
    assert f'<code class="id" title="{escaped}">{escaped}</code>' in page
    assert f'<code class="id" title="{proposal.id}">{proposal.id}</code>' in page
    assert re.search(
        r'<button type="button" class="copy" data-copy="#payload-digest" hidden>Copy digest</button>', page
    )
    assert f'<code id="payload-digest">{proposal.payload_digest}</code>' in page


# -- REV-6 layout ----------------------------------------------------------------


def test_a_receipt_shows_only_the_fields_the_platform_sent(app, client, world, platform):
    """REV-6: the demo platform sends no retry_after_seconds, terminal or error_code; the page shows none."""
    proposal = decide_report(world)
    approve(world, proposal)
    run_worker(app)
    assert set(reload(proposal).last_receipt) == {
        "action_id",
        "operation_id",
        "payload_digest",
        "status",
        "provider_request_id",
    }
    login(client, "reviewer@example.com")
    live = client.get(f"/proposals/{proposal.id}/live").get_data(as_text=True)
    receipt = re.search(r"<summary>Receipt</summary>(.*?)</details>", live, re.S).group(1)
    assert "provider_request_id" in receipt
    assert "retry_after_seconds" not in receipt and "terminal" not in receipt and "error_code" not in receipt


def test_every_table_cell_has_its_label_for_narrow_screens(app, client, world, platform):
    """REV-6: every cell of the console's tables carries its column's label (shown on narrow screens)."""
    proposal = decide_report(world)
    approve(world, proposal)
    run_worker(app)
    decide_report(world, 1)
    login(client, "admin@example.com")
    pages = ["/proposals", "/tasks", "/reports", "/appeals", "/operations", f"/proposals/{proposal.id}"]
    pages += [f"/reports/{world.report_ids[0]}", "/admin/labels"]
    for url in pages:
        html = client.get(url).get_data(as_text=True)
        for table in re.findall(r'<table class="[^"]*\b(?:stack|attempts)\b[^"]*".*?</table>', html, re.S):
            headers = re.findall(r'<th scope="col">(?:<span class="visually-hidden">)?([^<]*)', table)
            for cell in re.findall(r"<td([^>]*)>", table):
                if 'class="empty"' in cell or 'class="more"' in cell:
                    continue
                label = re.search(r'data-label="([^"]+)"', cell)
                assert label and label.group(1) in headers, (url, cell)
        assert re.findall(r"<table(?![^>]*\b(?:stack|attempts)\b)[^>]*>", html) == [], url
