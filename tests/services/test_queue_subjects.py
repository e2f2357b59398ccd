"""The queue's subjects: grouping, claims and deciding a subject (SPEC QUEUE-1 to QUEUE-4)."""

from __future__ import annotations

from datetime import timedelta

import pytest
from sqlalchemy import func, select

from app.domain.clock import utcnow
from app.domain.errors import ApiError
from app.domain.queue import Assignment, QueueFilter, QueueSort, parse_filter
from app.extensions import db
from app.models import AuditEvent, Decision, Queue, Report, ReportSubject, WorkflowRun
from app.services.cases.reports import decide_subject, intake_report, record_decision
from app.services.cases.queue_subjects import claim_subject, release_subject
from app.services.read.queue_pages import queue_page
from tests.builders import make_operator, make_team, set_row


def _report(team, target, n, **extra):
    result = intake_report({"external_id": f"q-{target}-{n}", "targets": [{"reference": target, **extra.pop("t", {})}],
                            **extra}, team.integration_id)
    db.session.rollback()
    return db.session.get(Report, result.report_id)


def _subject(reference):
    db.session.rollback()
    return db.session.scalar(select(ReportSubject).where(ReportSubject.reference == reference))


def test_reports_about_one_subject_make_one_queue_row_QUEUE_1(app):
    """QUEUE-1: one row per subject, its reports counted and described."""
    team = make_team()
    for n in range(3):
        _report(team, "user:5120", n, reason="spam" if n else "harassment", category="abuse",
                t={"evidence": {"content_text": f"hello {n}", "author_reference": "user:5120",
                                "author_name": "goalline_greg"}})
    _report(team, "USER:5120", 9)  # another spelling of the same subject
    _report(team, "post:1", 0)
    subject = _subject("user:5120")
    assert (subject.open_count, subject.report_count, subject.state) == (4, 4, "open")
    assert subject.reasons == "|harassment|spam|" and subject.categories == "|abuse|"
    assert subject.author_name == "goalline_greg" and subject.preview == "hello 2"
    moderator = make_operator(team.installation_id)
    page = queue_page(moderator, QueueFilter())
    assert [row.reference for row in page.rows] == ["user:5120", "post:1"]  # waiting longest first
    assert page.rows[0].reasons == ["harassment", "spam"]


def test_the_queue_filters_searches_and_pages_by_keyset_QUEUE_1(app):
    """QUEUE-1: one row per subject, its reports counted and described."""
    team = make_team()
    for n in range(5):
        _report(team, f"post:{n}", 0, reason="spam" if n % 2 else "other",
                t={"evidence": {"content_text": f"text number {n}"}})
    moderator = make_operator(team.installation_id)
    assert [r.reference for r in queue_page(moderator, parse_filter({"reason": "spam"})).rows] == ["post:1", "post:3"]
    assert [r.reference for r in queue_page(moderator, parse_filter({"q": "NUMBER 4"})).rows] == ["post:4"]
    first = queue_page(moderator, QueueFilter(sort=QueueSort.NEWEST), limit=2)
    second = queue_page(moderator, QueueFilter(sort=QueueSort.NEWEST), first.next_cursor, limit=2)
    third = queue_page(moderator, QueueFilter(sort=QueueSort.NEWEST), second.next_cursor, limit=2)
    seen = [r.reference for page in (first, second, third) for r in page.rows]
    assert seen == [f"post:{n}" for n in (4, 3, 2, 1, 0)] and third.next_cursor is None
    with pytest.raises(ApiError) as error:
        queue_page(moderator, QueueFilter(sort=QueueSort.OLDEST), first.next_cursor)
    assert error.value.code == "queue_cursor_invalid"
    with pytest.raises(ApiError) as error:
        parse_filter({"sort": "loudest"})
    assert error.value.code == "queue_filter_invalid"


def test_a_claim_assigns_blocks_others_and_expires_QUEUE_2(app):
    """QUEUE-2: a claim assigns the subject; others are refused until it expires or is released."""
    team = make_team()
    report = _report(team, "post:7", 0)
    alice = make_operator(team.installation_id)
    bob = make_operator(team.installation_id, "moderator2", roles=["moderator"])
    until = claim_subject(alice, report.subject_id)
    assert until > utcnow()
    row = queue_page(bob, QueueFilter()).rows[0]
    assert row.claimed_by == "Moderator" and not row.claimed_by_me
    assert queue_page(alice, QueueFilter(assignment=Assignment.MINE)).rows[0].claimed_by_me
    assert queue_page(bob, QueueFilter(assignment=Assignment.UNASSIGNED)).rows == []
    with pytest.raises(ApiError) as error:
        claim_subject(bob, report.subject_id)
    assert error.value.code == "subject_claimed"
    before = db.session.scalar(select(func.count()).select_from(Decision))
    with pytest.raises(ApiError) as error:
        record_decision(report.id, decision_code="remove_content", rationale="", operator=bob)
    assert error.value.code == "subject_claimed"
    assert db.session.scalar(select(func.count()).select_from(Decision)) == before  # nothing written
    set_row(ReportSubject, report.subject_id, claimed_until=utcnow() - timedelta(seconds=1))  # the claim expired
    claim_subject(bob, report.subject_id)
    with pytest.raises(ApiError) as error:
        release_subject(alice, report.subject_id)
    assert error.value.code == "subject_not_claimed_by_you"
    release_subject(bob, report.subject_id)
    record_decision(report.id, decision_code="remove_content", rationale="", operator=alice)  # released: anyone


def test_deciding_a_subject_decides_its_open_reports_together_QUEUE_3(app):
    """QUEUE-3: every open report decided, each recorded; enforced once."""
    team = make_team()
    reports = [_report(team, "post:30", n) for n in range(30)]
    other = _report(team, "post:31", 0)
    moderator = make_operator(team.installation_id)
    claim_subject(moderator, reports[0].subject_id)
    result = decide_subject(reports[0].subject_id, decision_code="remove_content", rationale="spam wave",
                            operator=moderator, idempotency_key="k1")
    db.session.rollback()
    assert sorted(result.report_ids) == sorted(r.id for r in reports) and result.report_ids[0] == reports[0].id
    states = set(db.session.scalars(select(Report.state).where(Report.subject_id == reports[0].subject_id)))
    assert states == {"decided"} and db.session.get(Report, other.id).state == "open"
    assert db.session.scalar(select(func.count()).select_from(Decision)) == 30  # each recorded
    runs = db.session.scalars(select(WorkflowRun.report_id)).all()
    assert runs == [reports[0].id]  # enforced once
    subject = _subject("post:30")
    assert (subject.state, subject.open_count, subject.claimed_by_id) == ("done", 0, None)
    assert [r.reference for r in queue_page(moderator, QueueFilter()).rows] == ["post:31"]  # it left the queue
    again = decide_subject(reports[0].subject_id, decision_code="remove_content", rationale="spam wave",
                           operator=moderator, idempotency_key="k1")
    assert again.decision_id == result.decision_id
    with pytest.raises(ApiError) as error:
        decide_subject(reports[0].subject_id, decision_code="remove_content", rationale="", operator=moderator)
    assert error.value.code == "subject_not_open"
    assert db.session.scalar(select(func.count()).select_from(AuditEvent).where(
        AuditEvent.action == "report.decided")) == 30


def test_a_queue_with_a_target_shows_age_and_what_is_overdue_QUEUE_4(app):
    """QUEUE-4: age and overdue against the queue's target."""
    team = make_team()
    late = _report(team, "post:old", 0)
    _report(team, "post:new", 0)
    set_row(Report, late.id, created_at=utcnow() - timedelta(hours=3))
    with db.session.begin():
        db.session.get(Queue, team.queue_id).decide_within_seconds = 3600
    from app.services.cases.queue_subjects import refresh_subjects

    refresh_subjects(db.session, [late.subject_id])
    db.session.commit()
    page = queue_page(make_operator(team.installation_id), QueueFilter())
    assert [(r.reference, r.overdue) for r in page.rows] == [("post:old", True), ("post:new", False)]
    assert page.rows[0].age_seconds >= 3 * 3600 - 5 and page.overdue_count == 1
