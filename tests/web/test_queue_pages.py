"""The moderator's queue as pages (SPEC QUEUE-1..5; issue 25): the list with its
filter, claims, a subject's page and its decision, proactive reports, landing by role."""

from __future__ import annotations

import re

from sqlalchemy import select

from app.demo_queue import BUSY_ACCOUNT, seed_queue_demo
from app.extensions import db
from app.models import AuditEvent, Report, ReportSubject

from ..builders import add_reports, login, logout


def _subject_id(reference: str) -> str:
    db.session.rollback()
    return db.session.scalar(select(ReportSubject.id).where(ReportSubject.reference == reference))


def _form_token(html: str) -> str:
    return re.search(r'name="csrf_token" (?:type="hidden" )?value="([^"]+)"', html).group(1)


def test_the_queue_lists_subjects_in_words_and_keeps_the_filter_QUEUE_1_QUEUE_6(app, client, world):
    """QUEUE-1: one row per subject, reasons as words, its count; the filter form keeps
    its values. QUEUE-6: the subject is named by what it is (an account, its author)."""
    seed_queue_demo()
    login(client, "moderator@example.com")
    page = client.get("/queue?q=goalline&sort=most&assigned=unassigned").get_data(as_text=True)
    assert "<strong>Account</strong> <code class=\"ref\">user:5120</code>" in page
    assert "goalline_greg" in page and ">30<" in page
    assert "Harassment, Hateful conduct, Spam" in page
    assert 'value="goalline"' in page and '<option value="most" selected>' in page
    assert '<option value="unassigned" selected>' in page
    assert "post:2003" not in page  # the search keeps it out
    everything = client.get("/queue").get_data(as_text=True)
    assert "post:2003" in everything and "post:1001" in everything
    assert "overdue</strong>" in everything  # QUEUE-4: the General queue has a four-hour target


def test_the_queue_pages_by_keyset_keeping_the_filter_QUEUE_1(app, client, world):
    """QUEUE-1: "Next page" carries the cursor and the filter; the last page has none."""
    add_reports(world, 51, prefix="extra")
    login(client, "moderator@example.com")
    first = client.get("/queue?q=extra&sort=newest").get_data(as_text=True)
    assert first.count('<tr id="row-') == 50
    link = re.search(r'<a rel="next" href="([^"]+)">Next page</a>', first).group(1).replace("&amp;", "&")
    assert "q=extra" in link and "sort=newest" in link and "cursor=" in link
    second = client.get(link).get_data(as_text=True)
    assert second.count('<tr id="row-') == 1 and "post:extra-0<" in second and "Next page" not in second
    assert 'value="extra"' in second
    cursor = link.split("cursor=")[1].split("&")[0]
    assert client.get(f"/queue?sort=oldest&cursor={cursor}").status_code == 400


def test_a_bad_filter_is_refused_in_words_with_the_form_QUEUE_1(app, client, world):
    """QUEUE-1: an unknown sort or a window the wrong way round: 400 with a message, the form kept."""
    login(client, "moderator@example.com")
    response = client.get("/queue?sort=loudest&q=keep+me")
    body = response.get_data(as_text=True)
    assert response.status_code == 400 and "sort must be one of" in body and 'value="keep me"' in body
    response = client.get("/queue?from=2026-01-02T00:00&to=2026-01-01T00:00")
    assert response.status_code == 400 and "to must be after from" in response.get_data(as_text=True)
    assert client.get("/queue?cursor=nonsense").status_code == 400


def test_claim_and_release_without_javascript_QUEUE_2(app, client, world):
    """QUEUE-2: a plain POST claims and returns to the page it came from; others see
    "Claimed by <name> until HH:MM"; their claim is refused in words, not with a 500."""
    seed_queue_demo()
    subject_id = _subject_id(BUSY_ACCOUNT)
    token = login(client, "moderator@example.com")
    response = client.post(f"/queue/{subject_id}/claim", data={"csrf_token": token, "next": "/queue?sort=most"})
    assert response.status_code == 303 and response.headers["Location"].endswith("/queue?sort=most")
    page = client.get("/queue?sort=most").get_data(as_text=True)
    assert "Claimed until" in page and "Claimed by you until" in page and ">Release<" in page
    logout(client, token)
    token = login(client, "reviewer2@example.com")  # reviewer and moderator
    page = client.get(f"/queue/{subject_id}").get_data(as_text=True)
    name = world.user("moderator").display_name
    assert re.search(f"Claimed by {name} until <time datetime=\"[^\"]+\" title=\"[^\"]+\">[-0-9 ]+\\d\\d:\\d\\d:\\d\\d UTC</time>", page)  # QUEUE-6: the time helper
    response = client.post(f"/queue/{subject_id}/claim", data={"csrf_token": token}, follow_redirects=True)
    assert response.status_code == 200 and f"{name} is working on this subject until" in response.get_data(as_text=True)
    response = client.post(f"/queue/{subject_id}/release", data={"csrf_token": token}, follow_redirects=True)
    assert "You do not hold a claim on this subject." in response.get_data(as_text=True)
    logout(client, token)
    token = login(client, "moderator@example.com")
    response = client.post(f"/queue/{subject_id}/release", data={"csrf_token": token}, follow_redirects=True)
    assert "Released Account user:5120 (goalline_greg)" in response.get_data(as_text=True)
    assert client.post(f"/queue/{subject_id}/claim", data={}).status_code in (303, 400)


def test_claim_with_htmx_swaps_the_row_QUEUE_2(app, client, world):
    """QUEUE-2: htmx gets the subject's row back; a refusal is the error fragment (409)."""
    seed_queue_demo()
    subject_id = _subject_id(BUSY_ACCOUNT)
    token = login(client, "moderator@example.com")
    headers = {"HX-Request": "true", "X-CSRFToken": token}
    response = client.post(f"/queue/{subject_id}/claim", headers=headers, data={"csrf_token": token})
    row = response.get_data(as_text=True)
    assert response.status_code == 200 and row.strip().startswith(f'<tr id="row-{subject_id}"')
    assert "Claimed by you until" in row and "<html" not in row
    logout(client, token)
    token = login(client, "reviewer2@example.com")
    headers = {"HX-Request": "true", "X-CSRFToken": token}
    response = client.post(f"/queue/{subject_id}/claim", headers=headers, data={"csrf_token": token})
    assert response.status_code == 409 and 'class="error"' in response.get_data(as_text=True)


def test_claims_need_the_moderator_role_QUEUE_2(app, client, world):
    """QUEUE-2: a reviewer or auditor reads the queue but claims nothing (403) and sees no button."""
    seed_queue_demo()
    subject_id = _subject_id(BUSY_ACCOUNT)
    token = login(client, "reviewer@example.com")
    page = client.get("/queue").get_data(as_text=True)
    assert ">Claim</button>" not in page and "Report a subject" not in page
    assert client.post(f"/queue/{subject_id}/claim", data={"csrf_token": token}).status_code == 403
    detail = client.get(f"/queue/{subject_id}").get_data(as_text=True)
    assert "Decide all" not in detail
    assert client.post(f"/queue/{subject_id}/decision", data={"csrf_token": token}).status_code == 403
    assert client.get("/queue/sub_nothing").status_code == 404


def test_the_subject_page_lists_its_reports_and_decides_them_together_QUEUE_3(app, client, world):
    """QUEUE-3: the subject's page lists every report (newest first, with reason and
    evidence); deciding it decides all 30, flashes how many, and it leaves the queue."""
    seed_queue_demo()
    subject_id = _subject_id(BUSY_ACCOUNT)
    token = login(client, "moderator@example.com")
    client.post(f"/queue/{subject_id}/claim", data={"csrf_token": token})
    page = client.get(f"/queue/{subject_id}").get_data(as_text=True)
    assert page.count('href="/reports/rep_') == 30 and "Decide all 30 open reports" in page
    assert "Message 30 from goalline_greg" in page.split("Message 1 from")[0]  # newest first
    assert '<option value="">Choose a decision…</option>' in page
    response = client.post(f"/queue/{subject_id}/decision", data={"csrf_token": token, "decision_code": ""})
    assert response.status_code == 400 and "Choose a decision." in response.get_data(as_text=True)
    response = client.post(f"/queue/{subject_id}/decision", data={
        "csrf_token": token, "decision_code": "no_violation", "rationale": "Banter between rival fans."})
    assert response.status_code == 303 and response.headers["Location"].endswith("/queue")
    listing = client.get("/queue").get_data(as_text=True)
    assert "Decided 30 reports about Account user:5120 (goalline_greg): No violation." in listing
    assert "user:5120</code>" not in listing.split("<tbody>")[1]
    db.session.rollback()
    assert db.session.scalar(select(ReportSubject.state).where(ReportSubject.id == subject_id)) == "done"
    again = client.post(f"/queue/{subject_id}/decision", data={"csrf_token": token, "decision_code": "no_violation"})
    assert again.status_code == 409 and "nothing to decide" in again.get_data(as_text=True)


def test_a_decision_on_a_subject_someone_else_holds_is_refused_in_words_QUEUE_2(app, client, world):
    """QUEUE-2: the subject page answers subject_claimed with the holder's name (409), nothing decided."""
    seed_queue_demo()
    subject_id = _subject_id(BUSY_ACCOUNT)
    token = login(client, "moderator@example.com")
    client.post(f"/queue/{subject_id}/claim", data={"csrf_token": token})
    logout(client, token)
    token = login(client, "reviewer2@example.com")
    response = client.post(f"/queue/{subject_id}/decision", data={"csrf_token": token, "decision_code": "no_violation"})
    assert response.status_code == 409 and "is working on this subject until" in response.get_data(as_text=True)
    db.session.rollback()
    assert db.session.scalar(select(ReportSubject.open_count).where(ReportSubject.id == subject_id)) == 30


def test_a_moderator_reports_a_subject_nobody_reported(app, client, world):
    """QUEUE-1 (issue 25): a report opened in the console joins the queue, names who
    opened it, is audited, and is refused in words when its reference is not one."""
    token = login(client, "moderator@example.com")
    assert "Report a subject" in client.get("/queue").get_data(as_text=True)
    assert "Report a subject" in client.get("/reports").get_data(as_text=True)
    form = client.get("/reports/new").get_data(as_text=True)
    assert 'name="reference"' in form and 'name="integration_id"' not in form  # one platform: no choice
    bad = client.post("/reports/new", data={"csrf_token": token, "reference": "user 5120", "kind": "user",
                                            "summary": "Threats in DMs"})
    assert bad.status_code == 400 and "like post:123" in bad.get_data(as_text=True)
    bad = client.post("/reports/new", data={"csrf_token": token, "reference": "user:5\u200b120", "kind": "user",
                                            "summary": "Threats in DMs"})
    assert bad.status_code == 400
    response = client.post("/reports/new", data={"csrf_token": token, "reference": "user:9999", "kind": "user",
                                                 "reason": "harassment", "summary": "Threats seen in a screenshot"})
    assert response.status_code == 303
    db.session.rollback()
    report = db.session.scalar(select(Report).where(Report.external_id.like("console:%")))
    assert report.opened_by_id == world.users["moderator"] and report.external_id == f"console:{report.id}"
    assert db.session.scalar(select(AuditEvent.action).where(AuditEvent.target_id == report.id)) \
        == "report.opened_in_console"
    page = client.get(response.headers["Location"]).get_data(as_text=True)
    name = world.user("moderator").display_name
    assert f"Opened in the console by {name} (no platform report)" in page
    assert "user:9999</code>" in client.get("/queue").get_data(as_text=True)
    logout(client, token)
    token = login(client, "reviewer@example.com")
    assert client.get("/reports/new").status_code == 403


def test_the_demo_gives_the_queue_something_real_QUEUE_4(app, world):
    """QUEUE-1, QUEUE-4: `flask demo`'s queue has an account with 30 reports, reasons,
    authors, a General queue with a four-hour target and subjects past it; seeded once."""
    from app.domain.queue import QueueFilter, QueueSort
    from app.services.read.queue_pages import queue_page

    assert seed_queue_demo() is True and seed_queue_demo() is False
    page = queue_page(world.user("moderator"), QueueFilter(sort=QueueSort.MOST))
    busiest = page.rows[0]
    assert (busiest.reference, busiest.open_count, busiest.author_name) == (BUSY_ACCOUNT, 30, "goalline_greg")
    assert busiest.overdue and busiest.queue_name == "General" and len(busiest.reasons) == 3
    assert page.overdue_count == 3 and len(page.rows) >= 10


def test_a_proactive_report_names_its_platform_when_there_are_several(app, client, world):
    """Issue 25: with two platforms the form asks which (integration_required in words
    when left out); with one chosen, the report is that platform's."""
    from app.models import Integration
    from app.services.uow import unit_of_work

    with unit_of_work() as uow:
        uow.session.add(Integration(installation_id=world.installation_id, name="Second platform", slug="second"))
        uow.commit()
    second = db.session.scalar(select(Integration.id).where(Integration.slug == "second"))
    token = login(client, "moderator@example.com")
    assert 'name="integration_id"' in client.get("/reports/new").get_data(as_text=True)
    fields = {"csrf_token": token, "reference": "post:77", "kind": "post", "summary": "Seen while reviewing"}
    refused = client.post("/reports/new", data={**fields, "integration_id": ""})
    assert refused.status_code == 400 and "Choose the platform the subject is on." in refused.get_data(as_text=True)
    assert client.post("/reports/new", data={**fields, "integration_id": second}).status_code == 303
    db.session.rollback()
    assert db.session.scalar(select(Report.integration_id).where(Report.external_id.like("console:%"))) == second


def test_a_decision_no_workflow_acts_on_says_nothing_is_enforced_QUEUE_3(app, client, world):
    """QUEUE-3, found by the new-user pass: "Restrict account" on a subject whose
    workflows name no such decision enforced nothing, silently. The confirmation now
    says so; a decision that starts a workflow says how many."""
    seed_queue_demo()
    token = login(client, "moderator@example.com")
    client.post(f"/queue/{_subject_id(BUSY_ACCOUNT)}/decision",
                data={"csrf_token": token, "decision_code": "no_violation"})
    listing = client.get("/queue").get_data(as_text=True)
    assert "No active workflow acts on this decision, so nothing is sent to the platform." in listing
    subject_id = _subject_id("post:1001")
    client.post(f"/queue/{subject_id}/decision", data={"csrf_token": token, "decision_code": "remove_content"})
    assert "It started 1 enforcement workflow." in client.get("/queue").get_data(as_text=True)
