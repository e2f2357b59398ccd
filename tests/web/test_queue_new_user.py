"""What a new user tripped over in the queue (issue 25, SPEC QUEUE-1, QUEUE-4, QUEUE-6):
filters of labels, decided subjects that read as decided, a refused filter that keeps
its form, a claim that says what it did, the time format's hint, the same words for
the same codes everywhere."""

from __future__ import annotations

import re

from sqlalchemy import select

from app.demo_queue import BUSY_ACCOUNT, seed_queue_demo
from app.extensions import db
from app.models import Report

from ..builders import add_report_with_evidence, decide_report, login, logout
from .test_queue_pages import _subject_id


def _select(html: str, name: str) -> str:
    match = re.search(rf'<select name="{name}"[^>]*>.*?</select>', html, re.S)
    assert match, f"no <select name={name}>"
    return match.group(0)


def test_reason_and_category_are_chosen_by_label_QUEUE_1(app, client, world):
    """QUEUE-1: Reason and Category are selects of labels with "any"; a code or a label
    typed in the URL (any case) filters by the code."""
    seed_queue_demo()
    login(client, "moderator@example.com")
    page = client.get("/queue").get_data(as_text=True)
    reasons = _select(page, "reason")
    assert '<option value="">any</option>' in reasons and '<option value="hate">Hateful conduct</option>' in reasons
    categories = _select(page, "category")
    assert '<option value="">any</option>' in categories and '<option value="abuse">Abuse</option>' in categories
    by_code = client.get("/queue?reason=hate").get_data(as_text=True)
    by_label = client.get("/queue?reason=hateful+CONDUCT&category=abuse").get_data(as_text=True)
    assert by_label.count('<tr id="row-') == by_code.count('<tr id="row-') > 0
    assert '<option value="hate" selected>Hateful conduct</option>' in by_label
    assert client.get("/queue?category=ABUSE").get_data(as_text=True).count('<tr id="row-') > 0


def test_decided_subjects_read_as_decided_QUEUE_4(app, client, world):
    """QUEUE-4: a decided subject shows "Decided" and its last report, no due time and
    no claim control; its page has no Claim box and its keys line no c or d."""
    seed_queue_demo()
    subject_id = _subject_id("post:2003")
    token = login(client, "moderator@example.com")
    client.post(f"/queue/{subject_id}/decision", data={"csrf_token": token, "decision_code": "no_violation",
                                                       "rationale": "Fair comment."})
    done = client.get("/queue?state=done").get_data(as_text=True)
    row = re.search(rf'<tr id="row-{subject_id}".*?</tr>', done, re.S).group(0)
    assert "Decided" in row and "last report" in row
    assert "due " not in row and "overdue" not in row and "<form" not in row and "Unclaimed" not in row
    page = client.get(f"/queue/{subject_id}").get_data(as_text=True)
    keys = re.search(r'<small class="keys-hint">.*?</small>', page, re.S).group(0)
    assert 'id="claim"' not in page and "<kbd>c</kbd>" not in keys and "<kbd>d</kbd>" not in keys
    assert "<kbd>j</kbd>" in keys and "Decided</strong>" in page


def test_a_refused_filter_keeps_every_option_QUEUE_1(app, client, world):
    """QUEUE-1: the 400 page after a bad filter keeps the queues, reasons and categories."""
    login(client, "moderator@example.com")
    response = client.get("/queue?sort=bogus&from=notadate")
    body = response.get_data(as_text=True)
    assert response.status_code == 400
    assert ">General</option>" in _select(body, "queue")
    assert ">Hateful conduct</option>" in _select(body, "reason") and ">Abuse</option>" in _select(body, "category")


def test_a_keyboard_claim_says_what_it_did_QUEUE_6(app, client, world):
    """QUEUE-6: an htmx claim or release answers with a status line in the page's
    aria-live area ("Claimed until …", "Released …"), not only the row."""
    seed_queue_demo()
    subject_id = _subject_id(BUSY_ACCOUNT)
    token = login(client, "moderator@example.com")
    htmx = {"HX-Request": "true"}
    claimed = client.post(f"/queue/{subject_id}/claim", data={"csrf_token": token, "next": "/queue"}, headers=htmx)
    body = claimed.get_data(as_text=True)
    notices = re.search(r'<div id="notices"[^>]*hx-swap-oob="true"[^>]*>.*?</div>', body, re.S).group(0)
    assert 'aria-live="polite"' in notices and re.search(r"Claimed until \d\d:\d\d UTC", notices)
    assert "goalline_greg" in notices
    released = client.post(f"/queue/{subject_id}/release", data={"csrf_token": token, "next": "/queue"},
                           headers=htmx).get_data(as_text=True)
    assert re.search(r'<div id="notices"[^>]*hx-swap-oob="true"[^>]*>[^<]*<p[^>]*>Released ', released)


def test_the_queue_target_field_shows_its_format_QUEUE_4(app, client, world):
    """QUEUE-4: the time-to-decide field says how to write a time before a mistake."""
    login(client, "admin@example.com")
    page = client.get("/admin/queues").get_data(as_text=True)
    assert "e.g. 90m, 4h or 2d" in page


def test_codes_read_as_the_same_words_everywhere_QUEUE_6(app, client, world, platform):
    """QUEUE-6: category labels on /reports and report pages as in the queue; a history
    row names the shared author; the task row says what other reports share; a report
    opened in the console says so instead of "The platform sent no evidence"."""
    seed_queue_demo()
    token = login(client, "moderator@example.com")
    reports = client.get("/reports").get_data(as_text=True)
    assert '<td data-label="Category">Abuse' in reports and '<td data-label="Category">abuse' not in reports
    report_id = add_report_with_evidence(world, "again-2002", "post:2002", author_reference="user:7002",
                                         author_name="cheapseats")
    page = client.get(f"/reports/{report_id}").get_data(as_text=True)
    abuse = db.session.scalar(select(Report.id).where(Report.category == "abuse").limit(1))
    assert "<dt>Category</dt><dd>Abuse</dd>" in client.get(f"/reports/{abuse}").get_data(as_text=True)
    history = re.search(r'<section class="card history".*?</section>', page, re.S).group(0)
    assert "by the same author post:2002" not in history.replace("<code>", "").replace("</code>", "")
    assert re.search(r"same target <code>post:2002</code>", history)
    proposal = decide_report(world, 0)
    logout(client, token)
    token = login(client, "reviewer@example.com")
    tasks = client.get("/tasks").get_data(as_text=True)
    assert "on this author" not in tasks
    assert proposal and "1 other report about content by this author" in tasks
    logout(client, token)
    token = login(client, "moderator@example.com")
    opened = client.post("/reports/new", data={"csrf_token": token, "reference": "user:9999", "kind": "user",
                                               "reason": "harassment", "summary": "Threats seen in a screenshot"})
    page = client.get(opened.headers["Location"]).get_data(as_text=True)
    assert "Opened in the console; no platform evidence" in page and "The platform sent no evidence" not in page


def test_a_label_or_a_code_names_the_same_code_QUEUE_1():
    """QUEUE-1: `code_for` takes a code as is, a label in any case to its code, an
    installation's own label too, and leaves unknown words alone."""
    from app.domain.labels import code_for, label_choices

    configured = {("report_reason", "doxxing"): "Shared private details"}
    assert code_for({}, "report_reason", "hate") == "hate"
    assert code_for({}, "report_reason", "  hateful CONDUCT ") == "hate"
    assert code_for(configured, "report_reason", "shared private details") == "doxxing"
    assert code_for({}, "report_reason", "nonsense") == "nonsense"
    assert ("doxxing", "Shared private details") in label_choices(configured, "report_reason")
    assert [code for code, _ in label_choices({}, "report_category")] == ["abuse", "illegal_content"]
