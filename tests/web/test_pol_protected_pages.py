"""Protected subjects in the console (SPEC POL-4): the admin page proposes marking and
unmarking for a second admin, and the mark ("Protected", the reason in its tooltip) is
shown wherever the subject appears: the queue row and the subject page, the report
page, the proposal page's heading and lead, the proposals list and the approval tasks."""

from __future__ import annotations

import re

from sqlalchemy import select

from app.extensions import db
from app.models import ProtectedSubject, ReportSubject

from ..builders import add_report_with_evidence, approve_pending, decide, login, pending_changes
from .test_admin import admin, assert_refused, post, text

REASON = 'a "journalist" <b>covering</b> the match'
TITLE = "Protected author: a &#34;journalist&#34; &lt;b&gt;covering&lt;/b&gt; the match"
BADGE = re.compile(r'<span class="badge protected" data-protected="(\w+)" title="([^"]*)">Protected</span>')


def badges(html: str) -> list[tuple[str, str]]:
    return BADGE.findall(html)


def signed_in(app, email: str):
    """A fresh browser signed in as `email`; (client, CSRF token)."""
    client = app.test_client()
    return client, login(client, email)


def mark_in_console(app, _client=None, reference: str = "user:5120", kind: str = "author",
                    reason: str = REASON) -> None:
    """An admin proposes the mark on the admin page; a second admin approves it."""
    client, csrf = signed_in(app, "admin@example.com")
    response = post(client, "/admin/protected", csrf, kind=kind, reference=reference, reason=reason)
    [change] = pending_changes()
    assert response.status_code == 303 and response.headers["Location"].endswith(f"/admin/changes/{change.id}")
    approve_pending(app)


def test_pol4_the_admin_page_marks_and_unmarks_through_a_second_admin(app, client, world):
    """POL-4, FOUR-2: an admin's proposal waits (listed as pending, no mark); a second
    admin's approval marks the subject (kind, reference, name, reason, the change);
    the unmark button's proposal waits too, and once approved the list is empty."""
    add_report_with_evidence(world, "pol4-name", "post:7301", author_reference="user:5120",
                             author_name="goalline_greg")
    csrf = admin(client)
    post(client, "/admin/protected", csrf, kind="author", reference="user:5120", reason=REASON)
    [change] = pending_changes()
    page = text(client.get("/admin/protected"))
    assert 'id="protected-empty"' in page and f"/admin/changes/{change.id}" in page
    assert db.session.scalars(select(ProtectedSubject)).all() == []
    approve_pending(app)
    page = text(client.get("/admin/protected"))
    [row] = re.findall(r'<tr data-protected="[^"]+">.*?</tr>', page, re.S)
    assert "<code>user:5120</code>" in row and "<bdi>goalline_greg</bdi>" in row and "Author" in row
    assert badges(row) == [("author", TITLE)] and f"/admin/changes/{change.id}" in row
    protected_id = db.session.scalar(select(ProtectedSubject.id))
    assert_refused(post(client, f"/admin/protected/{protected_id}/unmark", csrf, reason=""), 400,
                   "protected_reason_invalid")
    response = post(client, f"/admin/protected/{protected_id}/unmark", csrf, reason="no longer covering it")
    [unmark] = pending_changes()
    assert response.status_code == 303 and unmark.kind == "subject.unprotect"
    assert 'id="protected-subjects"' in text(client.get("/admin/protected"))
    approve_pending(app)
    assert 'id="protected-empty"' in text(client.get("/admin/protected"))


def test_pol4_refusals_are_shown_with_their_codes(app, client, world):
    """POL-4: a bad reference or reason, or a subject protected already, is answered
    with its code on the page; nothing is stored; an auditor may look, not propose."""
    csrf = admin(client)
    assert_refused(post(client, "/admin/protected", csrf, kind="account", reference="user 1", reason="why not"),
                   400, "protected_reference_invalid")
    assert_refused(post(client, "/admin/protected", csrf, kind="account", reference="user:1", reason="x"),
                   400, "protected_reason_invalid")
    assert_refused(post(client, "/admin/protected", csrf, kind="group", reference="user:1", reason="why not"),
                   400, "protected_kind_invalid")
    assert pending_changes() == []
    mark_in_console(app, None, "user:1", kind="account", reason="a public figure")
    assert_refused(post(client, "/admin/protected", csrf, kind="account", reference="USER:1", reason="again"),
                   409, "protected_subject_already")
    assert pending_changes() == []
    auditor = app.test_client()
    token = login(auditor, "auditor@example.com")
    assert auditor.get("/admin/protected").status_code == 200
    assert post(auditor, "/admin/protected", token, kind="account", reference="user:2", reason="why").status_code == 403


def test_pol4_the_mark_is_shown_wherever_the_subject_appears(app, client, world):
    """POL-4: with the author user:5120 protected, their post's queue row and subject
    page, its report page, its proposal's heading and lead (which names the protected
    policy), the proposals list and the approval tasks list all carry the badge with
    the reason as its tooltip; another author's rows carry none."""
    report_id = add_report_with_evidence(world, "pol4-shown", "post:7401", author_reference="user:5120",
                                         author_name="goalline_greg", content_text="Match report")
    other_id = add_report_with_evidence(world, "pol4-plain", "post:7402", author_reference="user:7781",
                                        author_name="crowd_sourced", content_text="Other")
    mark_in_console(app, client)
    proposal = decide(world, report_id)
    plain = decide(world, other_id)
    assert proposal.approval_route["protected"] is True and plain.approval_route["protected"] is False
    client, _ = signed_in(app, "reviewer@example.com")

    queue = text(client.get("/queue?state=done"))
    subject_id = db.session.scalar(select(ReportSubject.id).where(ReportSubject.reference == "post:7401"))
    row = re.search(rf'<tr id="row-{subject_id}".*?</tr>', queue, re.S).group(0)
    assert badges(row) == [("author", TITLE)]
    plain_subject = db.session.scalar(select(ReportSubject.id).where(ReportSubject.reference == "post:7402"))
    assert badges(re.search(rf'<tr id="row-{plain_subject}".*?</tr>', queue, re.S).group(0)) == []

    moderator, _ = signed_in(app, "moderator@example.com")
    heading = re.search(r"<h1>.*?</h1>", text(moderator.get(f"/queue/{subject_id}")), re.S).group(0)
    assert badges(heading) == [("author", TITLE)]

    report = text(client.get(f"/reports/{report_id}"))
    protected = re.search(r'<dd id="report-protected">.*?</dd>', report, re.S).group(0)
    assert "<code>post:7401</code>" in protected and "<code>user:5120</code>" in protected
    assert ("author", TITLE) in badges(re.search(r'<td data-label="Target">.*?</td>', report, re.S).group(0))

    page = text(client.get(f"/proposals/{proposal.id}"))
    assert badges(re.search(r"<h1 [^>]*>.*?</h1>", page, re.S).group(0)) == [("author", TITLE)]
    lead = re.search(r'<p class="protected-note" id="lead-protected">.*?</p>', page, re.S).group(0)
    assert badges(lead) == [("author", TITLE)] and "Two reviewers" in lead
    assert 'id="lead-protected"' not in text(client.get(f"/proposals/{plain.id}"))

    listing = text(client.get("/proposals"))
    rows = re.findall(r"<tr>\s*<td data-label=\"Created\">.*?</tr>", listing, re.S)
    assert [badges(r) for r in rows if proposal.id in r] == [[("author", TITLE)]]
    assert [badges(r) for r in rows if plain.id in r] == [[]]

    tasks = text(client.get("/tasks"))
    task_rows = re.findall(r"<tr data-task=.*?</tr>", tasks, re.S)
    assert [badges(r) for r in task_rows if proposal.id in r] == [[("author", TITLE)]]
    assert [badges(r) for r in task_rows if plain.id in r] == [[]]


def test_pol4_an_account_mark_shows_on_the_account_action_and_goes_when_unmarked(app, client, world):
    """POL-4: an account mark shows on an action on that account (through its post),
    and after unmarking the proposals list shows no badge."""
    from ..builders import decide_report

    mark_in_console(app, None, "user:4412", kind="account", reason="a verified public figure")
    proposal = decide_report(world, 0, code="suspend_account")
    client, _ = signed_in(app, "reviewer@example.com")
    listing = text(client.get("/proposals"))
    row = next(r for r in re.findall(r"<tr>\s*<td data-label=\"Created\">.*?</tr>", listing, re.S) if proposal.id in r)
    assert badges(row) == [("account", "Protected account: a verified public figure")], row
    protected_id = db.session.scalar(select(ProtectedSubject.id))
    admin_client, csrf = signed_in(app, "admin@example.com")
    post(admin_client, f"/admin/protected/{protected_id}/unmark", csrf, reason="no longer public")
    approve_pending(app)
    listing = text(client.get("/proposals"))
    assert badges(listing) == []
