"""Protected subjects (SPEC POL-4): marking and unmarking are four-eyes changes, and an
action on a protected subject routes to the protected policy."""

from __future__ import annotations

import pytest
from sqlalchemy import func, select

from app.domain.errors import ApiError
from app.extensions import db
from app.models import AuditEvent, ConfigChange, ProtectedSubject
from app.services.admin.protected_subjects import propose_mark, propose_unmark
from app.services.approval_routing import protection_of
from app.services.read.protection import protected_marks

from ..builders import add_report_with_evidence, approve_change, decide, pending_changes


def protected_rows() -> list[ProtectedSubject]:
    db.session.rollback()
    return list(db.session.scalars(select(ProtectedSubject).order_by(ProtectedSubject.marked_at)))


def mark(world, reference: str, kind: str = "account", reason: str = "a verified public figure") -> ProtectedSubject:
    """One admin proposes, a second approves: the subject is protected."""
    approve_change(world, propose_mark(world.user("admin"), kind, reference, reason))
    return next(r for r in protected_rows() if r.subject_reference == reference and r.unmarked_at is None)


def unmark(world, row: ProtectedSubject, reason: str = "no longer a public figure") -> None:
    approve_change(world, propose_unmark(world.user("admin"), row.id, reason))


def refused(call, status: int, code: str) -> None:
    with pytest.raises(ApiError) as caught:
        call()
    assert (caught.value.status, caught.value.code) == (status, code), caught.value.message


def test_pol4_marking_needs_a_second_admin(app, world):
    """POL-4, FOUR-2: a proposal to protect an account stores a pending change and no
    mark; its proposer cannot approve it; a second admin's approval inserts the mark
    (canonical reference, the change named) and audits it."""
    pending = propose_mark(world.user("admin"), "account", "USER:5120", "verified public figure, ticket 7")
    assert protected_rows() == []
    [change] = pending_changes()
    assert change.kind == "subject.protect" and change.content["reference"] == "user:5120"
    with pytest.raises(ApiError) as caught:
        approve_change(world, pending, approver="admin")
    assert caught.value.status == 403 and protected_rows() == []
    approve_change(world, pending)
    [row] = protected_rows()
    assert (row.kind, row.subject_reference, row.reason) == ("account", "user:5120", "verified public figure, ticket 7")
    assert row.marked_change_id == change.id and row.unmarked_at is None
    assert db.session.scalar(select(func.count()).where(AuditEvent.action == "protected_subject.marked")) == 1


def test_pol4_bad_or_repeated_marks_are_refused_and_change_nothing(app, world):
    """POL-4: a kind that is no kind, a reference that is no reference (or hides
    characters), a reason too short or too long, and marking a subject already
    protected are refused with their codes; nothing is stored."""
    admin = world.user("admin")
    refused(lambda: propose_mark(admin, "post", "user:1", "a reason"), 400, "protected_kind_invalid")
    refused(lambda: propose_mark(admin, "account", "not a reference", "a reason"), 400, "protected_reference_invalid")
    refused(lambda: propose_mark(admin, "account", "user:1\u202e", "a reason"), 400, "protected_reference_suspicious")
    refused(lambda: propose_mark(admin, "account", "user:1", "ab"), 400, "protected_reason_invalid")
    refused(lambda: propose_mark(admin, "account", "user:1", "x" * 2001), 400, "protected_reason_invalid")
    refused(lambda: propose_mark(world.user("reviewer"), "account", "user:1", "a reason"), 403, "forbidden")
    assert pending_changes() == []
    mark(world, "user:5120")
    refused(lambda: propose_mark(admin, "author", "User:5120", "again"), 409, "protected_subject_already")
    assert pending_changes() == [] and len(protected_rows()) == 1


def test_pol4_a_second_mark_approved_late_is_refused(app, world):
    """POL-4: two pending marks of one subject: the second approval finds it protected
    already and is refused; the change stays pending, one mark exists."""
    admin = world.user("admin")
    first = propose_mark(admin, "account", "user:5120", "first reason")
    second = propose_mark(admin, "author", "user:5120", "second reason")
    approve_change(world, first)
    refused(lambda: approve_change(world, second), 409, "protected_subject_already")
    assert len(protected_rows()) == 1
    assert db.session.get(ConfigChange, second.change_id).state == "pending"


def test_pol4_unmarking_needs_a_second_admin(app, world):
    """POL-4, FOUR-2: unmarking waits for a second admin; once approved the row stays
    with its unmarking change; unmarking again, or another installation's id, is refused."""
    row = mark(world, "user:5120")
    pending = propose_unmark(world.user("admin"), row.id, "no longer a public figure")
    assert protected_rows()[0].unmarked_at is None
    approve_change(world, pending)
    [after] = protected_rows()
    assert after.unmarked_at is not None and after.unmarked_change_id == pending.change_id
    admin = world.user("admin")
    refused(lambda: propose_unmark(admin, row.id, "again please"), 409, "protected_subject_not_protected")
    refused(lambda: propose_unmark(admin, "prs_nope", "a reason"), 404, "protected_subject_not_found")
    refused(lambda: propose_unmark(admin, row.id, ""), 400, "protected_reason_invalid")
    assert pending_changes() == []


def test_pol4_a_pending_unmark_of_an_unmarked_subject_is_refused_on_approval(app, world):
    """POL-4: two pending unmarks: the second approval finds it unprotected and is refused."""
    row = mark(world, "user:5120")
    first = propose_unmark(world.user("admin"), row.id, "first reason")
    second = propose_unmark(world.user("admin"), row.id, "second reason")
    approve_change(world, first)
    refused(lambda: approve_change(world, second), 409, "protected_subject_not_protected")
    assert protected_rows()[0].unmarked_change_id == first.change_id


def test_pol4_protection_covers_accounts_authors_and_stops_when_unmarked(app, world):
    """POL-4: an account mark covers an ``account`` target and an ``author_of`` target
    whose author it is, not a post of theirs; an author mark covers their posts too;
    another author's evidence on the same report does not spread it; unmarked, nothing
    is covered."""
    iid = world.installation_id
    report_id = add_report_with_evidence(world, "pol4-two-authors", "post:7001",
                                         author_reference="user:5120", author_name="goalline_greg")
    from app.services.cases.reports import intake_report

    both = intake_report({"external_id": "pol4-both", "targets": [
        {"reference": "post:7002", "kind": "post", "evidence": {"author_reference": "user:5120"}},
        {"reference": "post:7003", "kind": "post", "evidence": {"author_reference": "user:9999"}},
    ]}, world.integration_id).report_id
    covered = lambda target, report=None: protection_of(db.session, iid, target, report)  # noqa: E731
    account = mark(world, "user:5120")
    assert covered({"kind": "account", "reference": "user:5120"}).id == account.id
    assert covered({"kind": "account", "reference": "USER:5120"}).id == account.id
    assert covered({"kind": "author_of", "reference": "post:7001"}, report_id).id == account.id
    assert covered({"kind": "post", "reference": "post:7001"}, report_id) is None  # the post is not the account
    assert covered({"kind": "author_of", "reference": "post:7003"}, both) is None  # another author's post
    unmark(world, account)
    assert covered({"kind": "account", "reference": "user:5120"}) is None
    author = mark(world, "user:5120", kind="author", reason="every post of a journalist")
    assert covered({"kind": "post", "reference": "post:7001"}, report_id).id == author.id
    assert covered({"kind": "post", "reference": "post:7002"}, both).id == author.id
    assert covered({"kind": "post", "reference": "post:7003"}, both) is None
    assert covered({"kind": "author_of", "reference": "post:7001"}, report_id).id == author.id
    unmark(world, author)
    assert covered({"kind": "post", "reference": "post:7001"}, report_id) is None


def test_pol4_a_protected_subjects_proposal_routes_to_the_protected_policy(app, world):
    """POL-4: a proposal prepared for a protected author records ``protected: true`` and
    the protected policy (two reviewers by default); another subject's keeps the default."""
    report_id = add_report_with_evidence(world, "pol4-route", "post:1003",
                                         author_reference="user:5120", author_name="goalline_greg")
    other = add_report_with_evidence(world, "pol4-other", "post:1004", author_reference="user:7781")
    mark(world, "user:5120", kind="author")
    proposal = decide(world, report_id)
    route = proposal.approval_route
    assert route["protected"] is True and [p["key"] for p in route["policies"]] == ["two_reviewers"]
    plain = decide(world, other)
    assert plain.approval_route["protected"] is False
    assert [p["key"] for p in plain.approval_route["policies"]] != ["two_reviewers"]


def test_pol4_marks_load_for_a_page_in_one_query(app, world):
    """POL-4: `protected_marks` answers for many subjects in one query: direct marks by
    any spelling, content through its author's mark, nothing once unmarked."""
    from sqlalchemy import event

    report_id = add_report_with_evidence(world, "pol4-page", "post:7101", author_reference="user:5120")
    row = mark(world, "user:5120", kind="author")
    mark(world, "did:plc:abc")
    statements = []
    listen = lambda *args: statements.append(args[2])  # noqa: E731
    event.listen(db.engine, "before_cursor_execute", listen)
    try:
        marks = protected_marks(db.session, world.installation_id,
                                ["user:5120", "AT://did:plc:abc", "post:7101", "post:1", None], [report_id])
    finally:
        event.remove(db.engine, "before_cursor_execute", listen)
    assert len([s for s in statements if s != "BEGIN"]) == 1
    assert set(marks) == {"user:5120", "did:plc:abc", "post:7101"} and marks["post:7101"].id == row.id
    assert protected_marks(db.session, world.installation_id, []) == {}
    unmark(world, row)
    assert set(protected_marks(db.session, world.installation_id, ["user:5120", "post:7101"], [report_id])) == set()
