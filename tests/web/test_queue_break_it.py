"""Trying to break the moderator's queue through its pages (issue 25, SPEC QUEUE-1..6)
as an insider (forged forms, other installations' ids, claims held by another,
hostile filters, cursors and redirects, "retry now" beyond the budget) and as a
misbehaving platform (HTML and script in report text, author names, references and
in the platform's answer). Each test asserts a promise; a test marked
xfail(strict) is a finding (it fails today)."""

from __future__ import annotations

import re
from urllib.parse import urlsplit

import pytest
from sqlalchemy import func, select

from app.demo import DEMO_PASSWORD
from app.domain.clock import utcnow
from app.domain.failures import body_excerpt
from app.extensions import db
from app.models import ActionProposal, AuditEvent, ConnectionAttempt, Decision, Report, ReportSubject
from app.services.cases.queue_subjects import claim_subject

from ..builders import add_report_with_evidence, login, logout, make_proposal, make_team, reload, run_worker, set_row
from ..conftest import CSRF_PATTERN

XSS = '<script>alert("x")</script><img src=x onerror=alert(1)>'
RAW_MARKERS = ("<script>alert", "<img src=x")


def _csrf(page: str) -> str:
    match = CSRF_PATTERN.search(page)
    return (match.group(1) or match.group(2)) if match else ""


def _subject_of(report_id: str) -> str:
    db.session.rollback()
    return db.session.get(Report, report_id).subject_id


def _count(model, *where) -> int:
    db.session.rollback()
    return db.session.scalar(select(func.count()).select_from(model).where(*where))


def _no_raw_markup(page: str, where: str) -> None:
    for marker in RAW_MARKERS:
        assert marker not in page, f"unescaped {marker!r} on {where}"


# --- QUEUE-1 / QUEUE-6: what a platform sends is text everywhere ------------------------------------


def test_queue_1_6_script_in_report_text_author_and_reference_is_escaped_everywhere(app, client, world):
    """QUEUE-1, QUEUE-6: HTML in a report's content, summary, author name and even its
    reference (no whitespace, so the intake takes it) is shown as text on the queue,
    the subject page, a search echo, the report page, the flash after deciding, the
    proposal's title and the proposals list."""
    report_id = add_report_with_evidence(world, "xss-1", "post:<b>bold</b>" + "<script>alert(1)</script>",
                                         content_text=XSS, author_name=XSS, author_reference="user:666")
    login(client, "moderator@example.com")
    pages = {"queue": client.get("/queue").get_data(as_text=True),
             "search": client.get("/queue", query_string={"q": XSS[:100]}).get_data(as_text=True)}
    subject_id = _subject_of(report_id)
    subject_page = client.get(f"/queue/{subject_id}").get_data(as_text=True)
    pages["subject"] = subject_page
    pages["report"] = client.get(f"/reports/{report_id}").get_data(as_text=True)
    assert "&lt;script&gt;" in pages["queue"] and "&lt;script&gt;" in pages["subject"]
    key = re.search(r'name="idempotency_key"[^>]*value="([^"]+)"', subject_page)
    answer = client.post(f"/queue/{subject_id}/decision", data={
        "csrf_token": _csrf(subject_page), "decision_code": "suspend_account", "rationale": XSS,
        "idempotency_key": key.group(1) if key else "xss-key"}, follow_redirects=True)
    pages["after decision"] = answer.get_data(as_text=True)
    assert "Decided 1 report" in pages["after decision"]
    pages["proposals"] = client.get("/proposals").get_data(as_text=True)
    proposal = db.session.scalar(select(ActionProposal).where(ActionProposal.report_id == report_id))
    assert proposal is not None
    pages["proposal"] = client.get(f"/proposals/{proposal.id}").get_data(as_text=True)
    for where, page in pages.items():
        _no_raw_markup(page, where)
        assert "<script>alert(1)</script>" not in page and "<b>bold</b>" not in page, where


def test_queue_6_a_platform_answer_with_html_binary_and_size_is_bounded_and_escaped(app, client, team):
    """QUEUE-6: the failure excerpt of an answer that is HTML with script, binary and
    a megabyte long is at most 300 characters and shown as text on the proposal page
    and Operations."""
    excerpt = body_excerpt(b"<html><script>alert(1)</script>" + b"\x00\xff\xfe" * 10 + b"A" * 1_000_000)
    assert excerpt is not None and len(excerpt) <= 300 and "\x00" not in excerpt
    proposal = make_proposal(team, state="failed", attempts=1, terminal=False)
    attempt = db.session.scalar(select(ConnectionAttempt).where(ConnectionAttempt.proposal_id == proposal.id))
    set_row(ConnectionAttempt, attempt.id, response_excerpt=excerpt)
    login(client, team.user("reviewer").email)
    page = client.get(f"/proposals/{proposal.id}").get_data(as_text=True)
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in page
    _no_raw_markup(page, "proposal")
    assert "&lt;html&gt;" in page
    operations = client.get("/operations").get_data(as_text=True)
    _no_raw_markup(operations, "operations")


# --- QUEUE-2: forged forms and other paths around a claim -----------------------------------------


def test_queue_2_forged_claim_posts_are_refused(app, client, world):
    """QUEUE-2: a claim without a CSRF token changes nothing; a reviewer or auditor
    cannot claim; another installation's subject is 404 to claim, release, decide and view."""
    report_id = world.report_ids[0]
    subject_id = _subject_of(report_id)
    token = login(client, "moderator@example.com")
    assert client.post(f"/queue/{subject_id}/claim", data={}).status_code in (400, 303)
    db.session.rollback()
    assert db.session.get(ReportSubject, subject_id).claimed_by_id is None
    logout(client, token)
    token = login(client, "auditor@example.com")
    assert client.post(f"/queue/{subject_id}/claim", data={"csrf_token": token}).status_code == 403
    db.session.rollback()
    assert db.session.get(ReportSubject, subject_id).claimed_by_id is None
    logout(client, token)
    other = make_team()
    theirs = add_report_with_evidence(world, "ours", "post:ours")  # a subject of the world...
    from app.services.cases.reports import intake_report

    foreign = intake_report({"external_id": "f-1", "targets": [{"reference": "post:foreign"}]}, other.integration_id)
    foreign_subject = _subject_of(foreign.report_id)
    token = login(client, "moderator@example.com")
    assert theirs
    for path in ("claim", "release", "decision"):
        answer = client.post(f"/queue/{foreign_subject}/{path}",
                             data={"csrf_token": token, "decision_code": "remove_content", "idempotency_key": "k"})
        assert answer.status_code == 404, path
    assert client.get(f"/queue/{foreign_subject}").status_code == 404
    assert client.get(f"/reports/{foreign.report_id}").status_code == 404
    db.session.rollback()
    assert db.session.get(ReportSubject, foreign_subject).claimed_by_id is None and _count(Decision) == 0


def test_queue_2_a_claimed_subject_cannot_be_decided_by_another_through_the_queue_or_the_report_page(
        app, client, world):
    """QUEUE-2: Alice holds the subject; Bob's decision through the subject page and
    through the report page is refused with 409 subject_claimed in words, and nothing
    is decided."""
    report_id = world.report_ids[0]
    subject_id = _subject_of(report_id)
    claim_subject(world.user("moderator"), subject_id)
    before = _count(Decision)
    token = login(client, "reviewer2@example.com")  # a moderator too
    page = client.get(f"/queue/{subject_id}").get_data(as_text=True)
    assert "Claimed by" in page
    for path in (f"/queue/{subject_id}/decision", f"/reports/{report_id}/decisions"):
        answer = client.post(path, data={"csrf_token": token, "decision_code": "remove_content", "rationale": "",
                                          "idempotency_key": f"bob-{path[-9:]}"})
        body = answer.get_data(as_text=True)
        assert answer.status_code == 409, (path, answer.status_code)
        assert "is working on this subject" in body, path
    json_answer = client.post(f"/queue/{subject_id}/decision", headers={"Accept": "application/json"},
                              data={"csrf_token": token, "decision_code": "remove_content", "idempotency_key": "j"})
    assert json_answer.status_code == 409
    assert _count(Decision) == before
    db.session.rollback()
    assert db.session.get(Report, report_id).state == "open"


# --- QUEUE-1: hostile filters and cursors on the page --------------------------------------------


def test_queue_1_hostile_filters_answer_400_in_words_or_a_page(app, client, world):
    """QUEUE-1: wildcards search as text; over-long words, unknown choices and bad times
    are 400 with the form; nothing is a 500."""
    login(client, "moderator@example.com")
    for args in ({"q": "%"}, {"q": "_"}, {"q": "\\"}, {"q": "' OR 1=1 --"}, {"category": "%"}, {"reason": "_"},
                 {"queue": "general"}):
        answer = client.get("/queue", query_string=args)
        assert answer.status_code == 200, args
        if args.get("q") in ("%", "\\", "' OR 1=1 --"):  # (demo authors have "_" in their names)
            assert '<tr id="row-' not in answer.get_data(as_text=True), args
    for args in ({"q": "x" * 201}, {"category": "c" * 101}, {"sort": "id; drop table"}, {"state": "all"},
                 {"assigned": "bob"}, {"from": "yesterday"}, {"queue": "nope"}, {"cursor": "A" * 100_000},
                 {"cursor": "%%%"}, {"q": "\x00"}):
        answer = client.get("/queue", query_string=args)
        assert answer.status_code == 400, (list(args), answer.status_code)


@pytest.mark.parametrize("args", [
    {"from": "0001-01-01T00:00:00+01:00"},
    {"sort": "most", "cursor": "WyJtb3N0IiwxMDAwMDAwMDAwMDAwMDAwMDAwMDAwMDAsInN1Yl94Il0"},  # 10**24
    {"sort": "most", "cursor": "WyJtb3N0Iix0cnVlLCJzdWJfeCJd"},  # true as the count
])
def test_queue_1_edge_of_calendar_windows_and_forged_cursors_are_400_on_the_page(app, client, world, args):
    """QUEUE-1: a filter or page link not made here is refused in words."""
    app.config["PROPAGATE_EXCEPTIONS"] = False
    login(client, "moderator@example.com")
    assert client.get("/queue", query_string=args).status_code == 400


# --- QUEUE-2 / QUEUE-5: where a form or a sign-in sends you ---------------------------------------


def test_queue_2_a_claims_return_address_never_leaves_the_site(app, client, world):
    """QUEUE-2: the no-JS claim returns to `next` only when it is a queue path of ours."""
    subject_id = _subject_of(world.report_ids[0])
    token = login(client, "moderator@example.com")
    for target in ("//evil.example/queue", "https://evil.example/queue", "/\\evil.example",
                   "javascript:alert(1)", "/queue/../admin", "/queue\\/evil.example"):
        answer = client.post(f"/queue/{subject_id}/claim", data={"csrf_token": token, "next": target})
        assert answer.status_code == 303, target
        location = answer.headers["Location"]
        parts = urlsplit(location)
        assert parts.netloc in ("", "localhost") and not location.startswith(("//", "/\\")), (target, location)
        assert "\n" not in location and "\r" not in location and "X-Evil" not in answer.headers


def test_queue_2_a_return_address_with_a_line_break_is_ignored_not_a_500(app, client, world):
    """QUEUE-2: a `next` that is no clean queue path falls back to the subject's page."""
    app.config["PROPAGATE_EXCEPTIONS"] = False
    subject_id = _subject_of(world.report_ids[0])
    token = login(client, "moderator@example.com")
    answer = client.post(f"/queue/{subject_id}/claim", data={"csrf_token": token, "next": "/queue\r\nX-Evil: 1"})
    assert answer.status_code == 303 and "X-Evil" not in answer.headers


def test_queue_5_sign_in_lands_by_role_and_next_never_leaves_the_site(app, client, world):
    """QUEUE-5: each role lands on its own work; a `next` of another host is ignored."""
    landings = {"moderator@example.com": "/queue", "reviewer@example.com": "/tasks",
                "admin2@example.com": "/admin", "auditor@example.com": "/proposals"}
    for email, where in landings.items():
        token = login(client, email)
        answer = client.get("/")
        assert answer.status_code in (302, 303) and urlsplit(answer.headers["Location"]).path.startswith(where), email
        logout(client, token)
    for target in ("//evil.example", "/\\evil.example", "https://evil.example", "/\t/evil.example", "\\\\evil.example"):
        page = client.get("/login").get_data(as_text=True)
        answer = client.post(f"/login?next={target}", data={"csrf_token": _csrf(page), "email": "moderator@example.com",
                                                            "password": DEMO_PASSWORD})
        assert answer.status_code in (302, 303), (target, answer.status_code)
        location = answer.headers.get("Location", "")
        assert not location.startswith(("//", "/\\", "http")) or urlsplit(location).netloc in ("", "localhost"), (
            target, location)
        assert "evil.example" not in urlsplit(location).netloc
        if "\\" in location or "\t" in location:
            pytest.fail(f"a browser would read {location!r} as another host")
        client.get("/")
        token = _csrf(client.get("/queue").get_data(as_text=True))
        logout(client, token)


# --- QUEUE-6: "retry now" within the attempt budget ---------------------------------------------------


def test_queue_6_retry_now_cannot_exceed_the_cycles_attempts(app, client, team):
    """QUEUE-6 (DLV-1, RTRY): on a delivery with one attempt left, "retry now" three
    times with three keys, then the worker: one more attempt (the eighth), never a
    ninth; once the cycle is spent, "retry now" is 409 and audits nothing."""
    proposal = make_proposal(team, state="failed", attempts=7, terminal=False)
    token = login(client, team.user("reviewer").email)
    for n in range(3):
        answer = client.post(f"/proposals/{proposal.id}/retry-now", data={"csrf_token": token, "idempotency_key": f"k{n}"})
        assert answer.status_code in (303, 409), answer.status_code
    team.demo_platform.state.configure(fail_next=5, fail_status=503)
    run_worker(app)
    row = reload(proposal)
    assert row.delivery_attempt_count <= 8
    assert _count(ConnectionAttempt, ConnectionAttempt.proposal_id == proposal.id) <= 8 * 3  # purposes per attempt
    assert (row.delivery_attempt_count, row.state, row.delivery_terminal) == (8, "failed", True)
    audits = _count(AuditEvent, AuditEvent.action == "action.retry_now_requested")
    refused = client.post(f"/proposals/{proposal.id}/retry-now", data={"csrf_token": token, "idempotency_key": "k9"})
    assert refused.status_code == 409
    assert _count(AuditEvent, AuditEvent.action == "action.retry_now_requested") == audits


def test_queue_6_retry_now_of_another_installations_proposal_is_not_found(app, client, team):
    """QUEUE-6: a proposal id of another installation is 404 and nothing is made due."""
    proposal = make_proposal(team, state="failed", attempts=1, terminal=False)
    other = make_team()
    token = login(client, other.user("reviewer").email)
    due = reload(proposal).next_attempt_at
    answer = client.post(f"/proposals/{proposal.id}/retry-now", data={"csrf_token": token, "idempotency_key": "x"})
    assert answer.status_code == 404
    assert reload(proposal).next_attempt_at == due and due > utcnow()


# --- FOUR-10 on the queue's new pages: platform text isolated ---------------------------------------


def _isolated_everywhere(page: str, text: str) -> bool:
    """Every occurrence of `text` on the page sits inside a <bdi> element."""
    shown = page.count(text)
    return shown > 0 and all(
        "<bdi>" in page[max(0, at - 200):at] and page.rfind("<bdi>", 0, at) > page.rfind("</bdi>", 0, at)
        for at in [m.start() for m in re.finditer(re.escape(text), page)])


def test_queue_1_four_10_a_right_to_left_override_in_an_author_name_is_isolated_on_the_queue(app, client, world):
    """FOUR-10: platform text is isolated (`<bdi>`) wherever shown; the queue list and
    the subject page show the author name and the content preview."""
    name, content = "\u202egnp.exe_author", "\u202etxet desrever"
    add_report_with_evidence(world, "rlo-1", "post:rlo", content_text=content, author_name=name,
                             author_reference="user:rlo")
    login(client, "moderator@example.com")
    listing = client.get("/queue", query_string={"q": "post:rlo"}).get_data(as_text=True)
    subject_id = db.session.scalar(select(ReportSubject.id).where(ReportSubject.reference == "post:rlo"))
    detail = client.get(f"/queue/{subject_id}").get_data(as_text=True)
    assert name in listing and content in listing and name in detail
    bare = [where for where, page, text in (("author name on /queue", listing, name), ("preview on /queue", listing, content),
                                            ("author name on the subject page", detail, name))
            if not _isolated_everywhere(page, text)]
    assert bare == [], f"not isolated: {bare}"


def test_queue_6_four_10_an_account_named_in_a_proposal_title_is_isolated(app, client, world):
    """QUEUE-6 with FOUR-10: "Suspend the account <name> (<ref>)": the name is the
    platform's text and is isolated in the page's heading."""
    name = "\u202egreg_rlo"
    report_id = add_report_with_evidence(world, "rlo-2", "user:777", author_name=name, author_reference="user:777")
    from ..builders import decide

    proposal = decide(world, report_id, code="suspend_account")
    assert proposal is not None
    login(client, "reviewer@example.com")
    page = client.get(f"/proposals/{proposal.id}").get_data(as_text=True)
    heading = page[page.index("<h1"):page.index("</h1>")]
    assert name in heading and f"<bdi>{name}</bdi>" in heading, heading
