"""Erasure in the console (SPEC OPS-4): requested by one admin, approved by another, and
every page that showed the personal data says when and why it was erased instead."""

from __future__ import annotations

import re

from sqlalchemy import select

from app.extensions import db
from app.models import ErasureRequest, ReportEvidence, ReportSubject, RetentionSetting

from ..builders import decide, login
from ..services.test_ops4_erasure import AUTHOR, MARKERS, reported
from .test_admin import admin, assert_refused, post, snapshot, text

ERASED = re.compile(r'<span class="erased" data-erased="request">Erased on <time datetime="[^"]+"[^>]*>[^<]+</time>, '
                    r"by request</span>")


def second_admin(app):
    client = app.test_client()
    return client, login(client, "admin2@example.com")


def test_ops4_erasure_in_the_console_needs_a_second_admin(app, client, world):
    """OPS-4: the requester sees no Approve button and is refused (403
    ``erasure_same_admin``) when posting it; a refusal of substance names its code."""
    reported(world)
    csrf = admin(client)
    assert_refused(post(client, "/admin/erasure", csrf, subject=AUTHOR, reason="because"), 400,
                   "erasure_reason_invalid")
    assert_refused(post(client, "/admin/erasure", csrf, subject="", reason="Data subject request DSR-1"), 400,
                   "erasure_subject_invalid")
    response = post(client, "/admin/erasure", csrf, subject=AUTHOR, reason="Data subject request, ticket DSR-1")
    assert response.status_code == 303
    db.session.rollback()
    request = db.session.scalar(select(ErasureRequest))
    page = text(client.get("/admin/erasure"))
    assert f"Erase <code>{AUTHOR}</code>" in page and "waits for another admin" in page
    assert f"/admin/erasure/{request.id}/approve" not in page
    before = snapshot(ReportEvidence, ErasureRequest)
    assert_refused(post(client, f"/admin/erasure/{request.id}/approve", csrf), 403, "erasure_same_admin")
    assert snapshot(ReportEvidence, ErasureRequest) == before
    assert_refused(post(client, "/admin/erasure/era_missing/approve", csrf), 404, "erasure_not_found")
    second, token = second_admin(app)
    with app.app_context():
        assert f"/admin/erasure/{request.id}/approve" in text(second.get("/admin/erasure"))
        assert post(second, f"/admin/erasure/{request.id}/approve", token).status_code == 303
        page = text(second.get("/admin/erasure"))
    assert "state-approved" in page and "1 evidence, 1 reports, 0 appeals, 1 queue rows" in page


def test_ops4_retention_in_the_console_is_a_request_for_a_second_admin(app, client, world):
    csrf = admin(client)
    assert_refused(post(client, "/admin/erasure-retention", csrf, days="ten", reason="Retention policy v3 by DPO"),
                   400, "retention_days_invalid")
    assert post(client, "/admin/erasure-retention", csrf, days="365", reason="Retention policy v3 by DPO") \
        .status_code == 303
    db.session.rollback()
    assert db.session.scalar(select(RetentionSetting)) is None
    request = db.session.scalar(select(ErasureRequest))
    second, token = second_admin(app)
    with app.app_context():
        assert post(second, f"/admin/erasure/{request.id}/reject", token).status_code == 303
    db.session.rollback()
    assert db.session.scalar(select(RetentionSetting)) is None
    assert "<strong>none</strong> (personal data is kept)" in text(client.get("/admin/erasure"))


def test_ops4_pages_say_what_was_erased_and_when(app, client, world):
    """OPS-4: the report page, its list, the queue and its subject page, and the proposal's
    evidence panel say "Erased on …, by request"; the digest is still shown; no erased text."""
    open_report = reported(world, "page-1")
    decided = reported(world, "page-2", reference="post:77002")
    proposal = decide(world, decided)
    db.session.rollback()
    digest = db.session.scalar(select(ReportEvidence.evidence_digest).where(ReportEvidence.report_id == open_report))
    subject_id = db.session.scalar(select(ReportSubject.id).where(ReportSubject.reference == "post:77001"))
    from app.services.admin import erasure_requests as erasure

    request = erasure.request_erasure(world.user("admin"), AUTHOR, "Data subject request, ticket DSR-1")
    erasure.approve(world.user("admin2"), request.id)
    login(client, "moderator@example.com")
    pages = {
        "report": f"/reports/{open_report}",
        "reports": "/reports",
        "queue": "/queue",
        "subject": f"/queue/{subject_id}",
        "proposal": f"/proposals/{proposal.id}",
    }
    for name, url in pages.items():
        response = client.get(url)
        page = text(response)
        assert response.status_code == 200, (name, page[-1500:])
        assert ERASED.search(page), name
        for marker in MARKERS:
            assert marker not in page, (name, marker)
    assert digest in text(client.get(pages["report"]))
    reviewer = app.test_client()
    with app.app_context():
        login(reviewer, "reviewer@example.com")
        page = text(reviewer.get("/tasks"))
    assert ERASED.search(page) and not any(marker in page for marker in MARKERS)
