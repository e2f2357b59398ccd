"""BULK-1: a bulk action's subjects drawn from open reports and from one author's
history (app/services/bulk/sources.py), on SQLite and PostgreSQL."""

from __future__ import annotations

import itertools
from datetime import UTC, datetime, timedelta

import pytest
from sqlalchemy import event

from app.domain.bulk.report_filter import parse_report_filter
from app.domain.errors import ApiError
from app.extensions import db
from app.models import Queue, Report
from app.services.admin.integrations import create_integration
from app.services.bulk.sources import SourceSubject, subjects_from_reports, subjects_of_author
from app.services.cases.appeals import decide_appeal, file_appeal
from app.services.cases.reports import intake_report
from app.services.uow import Actor, unit_of_work

from ..builders import make_decision, make_operator, make_team, set_row

T0 = datetime(2026, 12, 1, 8, 0, tzinfo=UTC)
_serial = itertools.count(1)


@pytest.fixture
def team(app):
    """A minimal installation; nothing is delivered here, so no platform answers."""
    return make_team()


def report(
    team,
    reference: str,
    minute: int,
    *,
    author: str | None = None,
    category: str = "spam",
    queue: str | None = None,
    integration_id: str | None = None,
    kind: str = "post",
    more_targets: tuple[str, ...] = (),
) -> str:
    """An open report through the intake, received `minute` minutes after T0; its first
    target is `reference` (with evidence naming `author`)."""
    target = {"reference": reference, "kind": kind}
    if author:
        target["evidence"] = {"author_reference": author}
    body = {
        "external_id": f"bulk-{next(_serial)}",
        "targets": [target, *({"reference": extra} for extra in more_targets)],
        "category": category,
    }
    if queue:
        body["queue"] = queue
    report_id = intake_report(body, integration_id or team.integration_id).report_id
    set_row(Report, report_id, created_at=T0 + timedelta(minutes=minute))  # when it was received
    return report_id


def select_reports(team, cap: int = 100, **criteria) -> list[SourceSubject]:
    db.session.rollback()
    return subjects_from_reports(db.session, team.installation_id, parse_report_filter(criteria), cap=cap)


def refused(call) -> ApiError:
    with pytest.raises(ApiError) as caught:
        call()
    assert caught.value.status == 400
    return caught.value


def add_queue(team, slug: str) -> str:
    with unit_of_work() as uow:
        queue = Queue(installation_id=team.installation_id, name=slug.title(), slug=slug)
        uow.session.add(queue)
        uow.commit()
        return queue.id


def close(report_id: str, team) -> None:
    """Decided, appealed, then the appeal upheld: the report is closed."""
    decision = make_decision(db.session.get(Report, report_id))
    appeal_id = file_appeal(
        report_id,
        statement="Not spam.",
        actor=Actor("operator", decision.maker_id),
        installation_id=team.installation_id,
    ).appeal_id
    reviewer = make_operator(team.installation_id, "reviewer")
    decide_appeal(appeal_id, outcome="upheld", rationale="It was spam.", operator=reviewer)
    db.session.rollback()
    assert db.session.get(Report, report_id).state == "closed"


def test_bulk_1_reports_on_one_subject_are_grouped_oldest_first(team):
    """BULK-1, BULK-9: one subject per first target with all its open reports (oldest
    first); subjects in the order of their oldest report; the kind of the oldest."""
    a1 = report(team, "post:1", 5, kind="post")
    b1 = report(team, "post:2", 3)
    a2 = report(team, "post:1", 1, kind="content")
    a3 = report(team, "post:1", 9)
    b2 = report(team, "post:2", 7)
    c1 = report(team, "user:3", 4)
    assert select_reports(team, category="spam") == [
        SourceSubject("post:1", "content", (a2, a1, a3), None),
        SourceSubject("post:2", "post", (b1, b2), None),
        SourceSubject("user:3", "post", (c1,), None),
    ]


def test_bulk_1_reports_received_at_the_same_time_are_ordered_by_id(team):
    """BULK-1: a tie on the receipt time is broken by the report id, for subjects and reports."""
    ids: dict[str, list[str]] = {}
    for reference in ("post:0", "post:1", "post:2", "post:0", "post:3", "post:1"):
        ids.setdefault(reference, []).append(report(team, reference, 0))
    expected = sorted(ids, key=lambda reference: min(ids[reference]))
    subjects = select_reports(team, category="spam")
    assert [s.reference for s in subjects] == expected
    assert [s.report_ids for s in subjects] == [tuple(sorted(ids[reference])) for reference in expected]


def test_bulk_1_filter_by_category(team):
    """BULK-1: the category is compared whole."""
    spam = report(team, "post:1", 1, category="spam")
    report(team, "post:2", 2, category="spam-adjacent")
    report(team, "post:3", 3, category="")
    assert [s.report_ids for s in select_reports(team, category="spam")] == [(spam,)]


def test_bulk_1_filter_by_queue_slug_or_id(team):
    """BULK-1: a queue named by slug or by id; unknown queues are refused, not empty."""
    urgent = add_queue(team, "urgent")
    mine = report(team, "post:1", 1, queue="urgent")
    report(team, "post:2", 2)  # the integration's default queue
    assert [s.report_ids for s in select_reports(team, queue="urgent")] == [(mine,)]
    assert [s.report_ids for s in select_reports(team, queue=urgent)] == [(mine,)]
    error = refused(lambda: select_reports(team, queue="nowhere"))
    assert (error.code, error.field) == ("bulk_filter_invalid", "queue")
    other = make_team()
    error = refused(lambda: select_reports(team, queue=other.queue_id))  # another installation's
    assert (error.code, error.field) == ("bulk_filter_invalid", "queue")


def test_bulk_1_filter_by_integration_slug_or_id(team):
    """BULK-1: the reporting integration by slug or id; an unknown one is refused."""
    second = create_integration(
        make_operator(team.installation_id, "admin"), name="Second", slug="second", default_queue_id=team.queue_id
    )
    theirs = report(team, "post:1", 1, integration_id=second)
    report(team, "post:2", 2)
    assert [s.report_ids for s in select_reports(team, integration="second")] == [(theirs,)]
    assert [s.report_ids for s in select_reports(team, integration=second)] == [(theirs,)]
    assert [s.reference for s in select_reports(team, integration="platform")] == ["post:2"]
    error = refused(lambda: select_reports(team, integration="gone"))
    assert (error.code, error.field) == ("bulk_filter_invalid", "integration")


def test_bulk_1_filter_by_target_reference_reads_the_first_target_only(team):
    """BULK-1: the target is a report's first target; a report naming it second is not selected."""
    first = report(team, "post:1", 1)
    report(team, "post:9", 2, more_targets=("post:1",))
    assert select_reports(team, target_reference="post:1") == [SourceSubject("post:1", "post", (first,), None)]


def test_bulk_1_filter_by_author_reads_the_first_targets_evidence(team):
    """BULK-1: the author named by the evidence of the report's first target."""
    one = report(team, "post:1", 1, author="user:42")
    two = report(team, "post:2", 2, author="user:42")
    report(team, "post:3", 3, author="user:7")
    report(team, "post:4", 4)  # no evidence
    assert [s.report_ids for s in select_reports(team, author_reference="user:42")] == [(one,), (two,)]
    assert [s.reference for s in select_reports(team, author_reference="user:42", category="spam")] == [
        "post:1",
        "post:2",
    ]


def test_bulk_1_filter_by_received_window_includes_from_excludes_to(team):
    """BULK-1: received in [from, to)."""
    report(team, "post:0", 0)
    at_from = report(team, "post:1", 10)
    inside = report(team, "post:2", 15)
    report(team, "post:3", 20)  # at `to`: excluded
    window = {"received_from": "2026-12-01T08:10:00Z", "received_to": "2026-12-01T09:20:00+01:00"}
    assert [s.report_ids for s in select_reports(team, **window)] == [(at_from,), (inside,)]
    assert [s.reference for s in select_reports(team, received_from="2026-12-01T08:15:00Z")] == ["post:2", "post:3"]


def test_bulk_1_every_criterion_must_hold(team):
    """BULK-1: criteria are combined with AND."""
    add_queue(team, "urgent")
    hit = report(team, "post:1", 5, author="user:42", queue="urgent")
    report(team, "post:1", 6, author="user:42")  # other queue
    report(team, "post:1", 30, author="user:42", queue="urgent")  # outside the window
    report(team, "post:2", 5, author="user:9", queue="urgent")  # other author
    chosen = select_reports(
        team,
        category="spam",
        queue="urgent",
        target_reference="post:1",
        author_reference="user:42",
        received_to="2026-12-01T08:20:00Z",
        integration="platform",
    )
    assert chosen == [SourceSubject("post:1", "post", (hit,), None)]


def test_bulk_1_decided_appealed_and_closed_reports_are_not_selected(team):
    """BULK-1: only open reports; a subject whose reports are all decided is not a subject."""
    decided = report(team, "post:1", 1)
    still_open = report(team, "post:1", 2)
    closed = report(team, "post:2", 3)
    make_decision(db.session.get(Report, decided))
    close(closed, team)
    assert select_reports(team, category="spam") == [SourceSubject("post:1", "post", (still_open,), None)]
    error = refused(lambda: select_reports(team, target_reference="post:2"))
    assert error.code == "bulk_selection_empty"


def test_bulk_1_another_installations_reports_are_not_selected(team):
    """BULK-1: the installation's own reports only."""
    other = make_team()
    report(other, "post:1", 1)
    mine = report(team, "post:1", 2)
    assert [s.report_ids for s in select_reports(team, target_reference="post:1")] == [(mine,)]


def test_bulk_1_more_subjects_than_the_cap_are_refused(team):
    """BULK-1, BULK-5: over the cap is refused naming the cap and the count found
    (counted up to cap + 1); exactly the cap is accepted."""
    for n in range(5):
        report(team, f"post:{n}", n)
    report(team, "post:0", 9)  # a second report is not a second subject
    error = refused(lambda: select_reports(team, cap=3, category="spam"))
    assert error.code == "bulk_selection_over_cap"
    assert "At least 4 subjects" in error.message and "at most 3" in error.message
    assert len(select_reports(team, cap=5, category="spam")) == 5


def test_bulk_1_nothing_found_is_refused(team):
    """BULK-1: an empty selection is bulk_selection_empty."""
    report(team, "post:1", 1)
    error = refused(lambda: select_reports(team, category="harassment"))
    assert error.code == "bulk_selection_empty"


def test_bulk_1_two_queries_whatever_the_size(team):
    """BULK-1: the selection is read in two statements (no statement per subject or report),
    plus one per queue or integration named."""
    for n in range(30):
        report(team, f"post:{n % 20}", n, author="user:42")
    statements = []
    db.session.rollback()
    engine = db.session.get_bind()
    listener = lambda *args: statements.append(args[2])  # noqa: E731
    event.listen(engine, "before_cursor_execute", listener)
    try:
        subjects = select_reports(team, author_reference="user:42", queue="general")
        authors = subjects_of_author(db.session, team.installation_id, "user:42", cap=20)
    finally:
        event.remove(engine, "before_cursor_execute", listener)
    assert len(subjects) == len(authors) == 20 and sum(len(s.report_ids) for s in subjects) == 30
    assert len([s for s in statements if "report_targets" in s]) == 4
    assert len([s for s in statements if s.lstrip().startswith("SELECT")]) == 5  # and the queue's slug, once


# -- one author's subjects --------------------------------------------------------------


def test_bulk_1_author_subjects_include_decided_ones_with_only_open_reports(team):
    """BULK-1: every subject of the author's reports, whatever their state, with the
    open reports among them (possibly none); subjects by their oldest report."""
    old = report(team, "post:1", 1, author="user:42")
    make_decision(db.session.get(Report, old))
    open_later = report(team, "post:1", 5, author="user:42")
    closed = report(team, "post:2", 2, author="user:42")
    close(closed, team)
    third = report(team, "post:3", 3, author="user:42")
    report(team, "post:4", 4, author="user:7")
    report(team, "post:5", 0, more_targets=("post:6",))
    db.session.rollback()
    assert subjects_of_author(db.session, team.installation_id, "user:42", cap=10) == [
        SourceSubject("post:1", "post", (open_later,), None),
        SourceSubject("post:2", "post", (), None),
        SourceSubject("post:3", "post", (third,), None),
    ]


def test_bulk_1_author_subjects_cap_empty_and_bad_reference(team):
    """BULK-1: the cap and the empty rule hold; the author must be a plain reference."""
    for n in range(3):
        report(team, f"post:{n}", n, author="user:42")
    db.session.rollback()
    error = refused(lambda: subjects_of_author(db.session, team.installation_id, "user:42", cap=2))
    assert error.code == "bulk_selection_over_cap" and "At least 3" in error.message
    error = refused(lambda: subjects_of_author(db.session, team.installation_id, "user:99", cap=2))
    assert error.code == "bulk_selection_empty"
    for bad in ("user 42", "user:4\u200b2"):
        error = refused(lambda bad=bad: subjects_of_author(db.session, team.installation_id, bad, cap=2))
        assert (error.code, error.field) == ("bulk_filter_invalid", "author_reference")
