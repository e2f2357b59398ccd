"""Trying to break the moderator's queue (issue 25, SPEC QUEUE-1..4) as an insider
and as a misbehaving platform, at the level of the services. Each test asserts a
promise; a test marked xfail(strict) is a finding (it fails today)."""

from __future__ import annotations

import base64
import json
from datetime import timedelta

import pytest
from sqlalchemy import func, insert, select

from app.domain.clock import utcnow
from app.domain.errors import ApiError
from app.domain.queue import QueueFilter, QueueSort, claim_until, parse_filter
from app.extensions import db
from app.models import AuditEvent, Decision, Report, ReportSubject, ReportTarget, WorkflowRun
from app.models.base import new_id
from app.services.cases.queue_subjects import claim_subject, refresh_subjects, release_subject
from app.services.cases.reports import decide_subject, intake_report, record_decision
from app.services.read.queue_pages import queue_page
from tests.builders import at_once, make_operator, make_team, set_row


def _report(team, target, n, **extra):
    targets = [{"reference": target, **extra.pop("t", {})}]
    result = intake_report({"external_id": f"bk-{target}-{n}", "targets": targets, **extra}, team.integration_id)
    db.session.rollback()
    return db.session.get(Report, result.report_id)


def _subject(subject_id) -> ReportSubject:
    db.session.rollback()
    return db.session.get(ReportSubject, subject_id)


def _count(model, *where) -> int:
    db.session.rollback()
    return db.session.scalar(select(func.count()).select_from(model).where(*where))


def _refused(call, *args, **kwargs) -> ApiError:
    with pytest.raises(ApiError) as refused:
        call(*args, **kwargs)
    return refused.value


def _two(team):
    alice = make_operator(team.installation_id)
    bob = make_operator(team.installation_id, "moderator2", roles=["moderator"])
    return alice, bob


def _cursor(*parts) -> str:
    return base64.urlsafe_b64encode(json.dumps(list(parts)).encode()).decode().rstrip("=")


# --- QUEUE-2: deciding a subject another moderator holds, by every path --------------------------


def test_queue_2_decide_subject_of_a_claimed_subject_is_refused_and_writes_nothing(app):
    """QUEUE-2: Bob cannot decide the subject Alice holds; no decision, no audit row,
    no run; Alice's claim is untouched."""
    team = make_team()
    reports = [_report(team, "post:held", n) for n in range(3)]
    alice, bob = _two(team)
    until = claim_subject(alice, reports[0].subject_id)
    before = (_count(Decision), _count(AuditEvent), _count(WorkflowRun))
    error = _refused(decide_subject, reports[0].subject_id, decision_code="remove_content", rationale="x",
                     operator=bob, idempotency_key="bob-1")
    assert error.status == 409 and error.code == "subject_claimed" and "Moderator" in error.message
    for report in reports:  # nor one report at a time through the report page's service
        assert _refused(record_decision, report.id, decision_code="remove_content", rationale="",
                        operator=bob).code == "subject_claimed"
    assert (_count(Decision), _count(AuditEvent), _count(WorkflowRun)) == before
    subject = _subject(reports[0].subject_id)
    assert subject.claimed_by_id == alice.id and subject.claimed_until == until


def test_queue_2_bob_cannot_steal_release_or_extend_alices_claim(app):
    """QUEUE-2: a claim by someone else is refused; only the holder releases; Bob's
    claim attempt does not move Alice's expiry."""
    team = make_team()
    report = _report(team, "post:steal", 0)
    alice, bob = _two(team)
    until = claim_subject(alice, report.subject_id)
    assert _refused(claim_subject, bob, report.subject_id).code == "subject_claimed"
    assert _refused(release_subject, bob, report.subject_id).code == "subject_not_claimed_by_you"
    assert _subject(report.subject_id).claimed_until == until
    assert _subject(report.subject_id).claimed_by_id == alice.id


def test_queue_2_claiming_again_extends_from_now_not_cumulatively(app):
    """QUEUE-2: claiming one's own subject again extends it to now + the claim time;
    repeated claims never stack beyond that."""
    team = make_team()
    report = _report(team, "post:extend", 0)
    alice, _ = _two(team)
    for _ in range(5):
        until = claim_subject(alice, report.subject_id)
    assert until <= utcnow() + timedelta(seconds=app.config["QUEUE_CLAIM_SECONDS"] + 1)


def test_queue_2_claim_lengths_outside_the_range_are_refused(app):
    """QUEUE-2: a claim lasts 60 s .. 8 h; booleans, floats, negatives and huge numbers are refused."""
    team = make_team()
    report = _report(team, "post:len", 0)
    alice, _ = _two(team)
    for seconds in (True, 59, -1, 8 * 3600 + 1, 10**20, 120.0, "900"):
        assert _refused(claim_subject, alice, report.subject_id, seconds).code == "queue_claim_invalid", seconds
    assert _subject(report.subject_id).claimed_by_id is None
    with pytest.raises(ApiError):
        claim_until(utcnow(), 10**30)


def test_queue_2_ids_of_another_installation_answer_not_found(app):
    """QUEUE-2/3: a subject or report id of another installation is not found, by claim,
    release, decision of the subject or of the report."""
    ours, theirs = make_team(), make_team()
    report = _report(theirs, "post:foreign", 0)
    spy = make_operator(ours.installation_id)
    assert _refused(claim_subject, spy, report.subject_id).code == "subject_not_found"
    assert _refused(release_subject, spy, report.subject_id).code == "subject_not_found"
    assert _refused(decide_subject, report.subject_id, decision_code="remove_content", rationale="",
                    operator=spy).code == "subject_not_found"
    assert _refused(record_decision, report.id, decision_code="remove_content", rationale="",
                    operator=spy).code == "report_not_found"
    assert _subject(report.subject_id).claimed_by_id is None and _count(Decision) == 0


def test_queue_2_a_done_subject_cannot_be_claimed(app):
    """QUEUE-2: nothing left to decide, nothing to claim."""
    team = make_team()
    report = _report(team, "post:done", 0)
    alice, bob = _two(team)
    decide_subject(report.subject_id, decision_code="remove_content", rationale="", operator=alice)
    assert _refused(claim_subject, bob, report.subject_id).code == "subject_not_open"


def test_queue_2_a_proactive_report_about_a_held_subject_cannot_be_decided_by_its_opener(app):
    """QUEUE-2: Bob opens a report in the console about the subject Alice holds (it joins
    her subject); deciding it is refused like any report of the subject."""
    from app.services.cases.proactive import open_report

    team = make_team()
    report = _report(team, "post:proactive", 0)
    alice, bob = _two(team)
    claim_subject(alice, report.subject_id)
    opened = open_report(bob, reference="POST:proactive", summary="I saw it too")
    assert opened.subject_id == report.subject_id
    assert _refused(record_decision, opened.id, decision_code="remove_content", rationale="",
                    operator=bob).code == "subject_claimed"


def _bulk_from_reports(team, operator, target_reference: str) -> str:
    from app.models import BulkBatch
    from app.services.bulk.actions import bulk_actions
    from app.services.bulk.dry_runs import start_dry_run
    from app.services.bulk.submission import submit_batch

    action = bulk_actions(db.session, team.installation_id)[0]
    batch_id = start_dry_run(operator, selection={"source": "reports", "filter": {"target_reference": target_reference}},
                             action_key=action.key, decision_code=action.decision_code, reason="spam network")
    batch = db.session.get(BulkBatch, batch_id)
    return submit_batch(operator, batch_id, batch.dry_run_digest)


def test_queue_2_a_bulk_action_cannot_decide_the_reports_of_a_subject_another_holds(app):
    """QUEUE-2 with BULK-9: reports selected through a bulk action advance as with a
    single decision — so a decision on a subject Alice holds, by Bob through a bulk
    action over open reports, is refused (or the item skipped with subject_claimed)
    and her subject's reports stay open."""
    team = make_team()
    reports = [_report(team, "post:bulkheld", n) for n in range(2)]
    alice, bob = _two(team)
    claim_subject(alice, reports[0].subject_id)
    try:
        _bulk_from_reports(team, bob, "post:bulkheld")
    except ApiError as error:
        assert error.code == "subject_claimed"
    db.session.rollback()
    states = {db.session.get(Report, r.id).state for r in reports}
    assert states == {"open"}, f"Bob's bulk action decided Alice's subject: {states}"
    assert _subject(reports[0].subject_id).claimed_by_id == alice.id


# --- QUEUE-3: deciding a subject together ---------------------------------------------------


def test_queue_3_a_thousand_reports_about_one_subject_are_decided_together_and_enforced_once(app):
    """QUEUE-3 (a platform that sends 1,200 reports about one subject): the row counts
    them all, the subject page shows 500 and says there are more, one decision
    decides every one, each recorded, and one run starts."""
    from app.services.read.queue_subject import subject_page

    team = make_team()
    first = _report(team, "post:flood", 0)
    now = utcnow()
    rows, targets = [], []
    for n in range(1, 1200):
        rid = new_id("rep")
        rows.append(dict(id=rid, installation_id=team.installation_id, integration_id=team.integration_id,
                         subject_id=first.subject_id, queue_id=team.queue_id, external_id=f"flood-{n}",
                         public_reference=f"R-FL{n:06d}", state="open", category="spam", reason="spam", summary="",
                         created_at=now + timedelta(milliseconds=n), updated_at=now))
        targets.append(dict(id=new_id("tgt"), installation_id=team.installation_id, report_id=rid,
                            target_reference="post:flood", kind="content", position=0))
    db.session.execute(insert(Report), rows)
    db.session.execute(insert(ReportTarget), targets)
    refresh_subjects(db.session, [first.subject_id])
    db.session.commit()
    subject = _subject(first.subject_id)
    assert (subject.open_count, subject.report_count) == (1200, 1200)
    moderator = make_operator(team.installation_id)
    page = subject_page(moderator, first.subject_id)
    assert len(page.reports) == 500 and page.more_reports
    result = decide_subject(first.subject_id, decision_code="remove_content", rationale="flood", operator=moderator)
    assert len(result.report_ids) == 1200 and result.report_ids[0] == first.id
    assert _count(Decision) == 1200 and _count(WorkflowRun) == 1
    assert _subject(first.subject_id).state == "done"


def test_queue_3_two_moderators_deciding_one_unclaimed_subject_at_once_enforce_once(app):
    """QUEUE-3: two decisions of the same subject at the same moment: one decides, the
    other is refused (subject_not_open or a conflict); each report has one decision
    and one run starts."""
    team = make_team()
    reports = [_report(team, "post:race", n) for n in range(5)]
    alice, bob = _two(team)
    results = at_once(app, [
        lambda: decide_subject(reports[0].subject_id, decision_code="remove_content", rationale="a",
                               operator=db.session.merge(alice)),
        lambda: decide_subject(reports[0].subject_id, decision_code="remove_content", rationale="b",
                               operator=db.session.merge(bob)),
    ])
    counts = (_count(Decision), _count(WorkflowRun))
    assert counts == (5, 1), f"(decisions, runs) = {counts}; {results}"
    wins = [r for r in results if not isinstance(r, Exception)]
    assert len(wins) == 1, results
    assert all(isinstance(r, ApiError) for r in results if r not in wins), results


def test_queue_1_the_same_external_id_twice_at_once_makes_one_report(app):
    """QUEUE-1 (a platform that sends one report twice at the same moment): one report,
    counted once in its subject's row; the other answer is the repeat."""
    team = make_team()
    body = {"external_id": "twice", "targets": [{"reference": "post:twice"}]}
    results = at_once(app, [lambda: intake_report(body, team.integration_id) for _ in range(2)])
    import traceback

    assert not any(isinstance(r, Exception) for r in results), [
        "".join([line for line in traceback.format_exception(r) if "/app/" in line]) for r in results if isinstance(r, Exception)]
    assert sorted(r.created for r in results) == [False, True]
    assert _count(Report) == 1
    subject = db.session.scalar(select(ReportSubject).where(ReportSubject.reference == "post:twice"))
    assert (subject.open_count, subject.report_count) == (1, 1)


# --- QUEUE-1: spellings, filters, search, cursors ----------------------------------------------


def test_queue_1_other_spellings_of_one_subject_make_one_row(app):
    """QUEUE-1: POST:1 / post:1, did:plc:x / at://did:plc:x / AT://did:plc:x/ are one
    subject each; a lookalike spelling is refused at intake by the service too (FOUR-10,
    POL-4: it would dodge a protected mark), so it never makes a row of its own nor
    merges into the real one."""
    team = make_team()
    did = "did:plc:abcdefghijklmnopqrstuvwx"
    for n, ref in enumerate(("post:1", "POST:1", "Post:1")):
        _report(team, ref, n)
    for n, ref in enumerate((did, f"at://{did}", f"AT://{did}/")):
        _report(team, ref, n)
    with pytest.raises(ApiError) as refused:  # Cyrillic o: refused like the API refuses it (FOUR-10)
        _report(team, "p\u043est:1", 0)
    assert refused.value.code == "reference_characters"
    rows = {r.reference: r.report_count for r in queue_page(make_operator(team.installation_id), QueueFilter()).rows}
    assert rows["post:1"] == 3 and rows[did] == 3 and len(rows) == 2


def test_queue_1_search_treats_like_wildcards_as_text(app):
    """QUEUE-1: a search for %, _ or a backslash matches those characters only."""
    team = make_team()
    _report(team, "post:plain", 0, summary="nothing special")
    _report(team, "post:pct", 0, summary="100% sure")
    _report(team, "post:under", 0, summary="snake_case")
    moderator = make_operator(team.installation_id)
    found = lambda q: [r.reference for r in queue_page(moderator, parse_filter({"q": q})).rows]  # noqa: E731
    assert found("%") == ["post:pct"]
    assert found("_") == ["post:under"]
    assert found("\\") == [] and found("%%") == [] and found("' or 1=1 --") == []


def test_queue_1_a_category_filter_holding_the_delimiter_matches_no_subject(app):
    """QUEUE-1: a category is one word; "abuse|spam" is no category a report has, so
    it matches nothing (or is refused as queue_filter_invalid)."""
    team = make_team()
    _report(team, "post:cat", 0, category="abuse")
    _report(team, "post:cat", 1, category="spam")
    moderator = make_operator(team.installation_id)
    try:
        rows = queue_page(moderator, parse_filter({"category": "abuse|spam"})).rows
    except ApiError as error:
        assert error.code == "queue_filter_invalid"
        return
    assert rows == []


def test_queue_1_search_finds_each_recent_reports_text_whatever_the_others_length(app):
    """QUEUE-1: searchable by text: a report's summary is found even when other reports
    about the subject carried long summaries."""
    team = make_team()
    _report(team, "post:long", 0, summary="a" * 5000)
    _report(team, "post:long", 1, summary="needle in the middle")
    _report(team, "post:long", 2, summary="b" * 5000)
    _report(team, "post:long", 3, summary="latest")
    moderator = make_operator(team.installation_id)
    assert [r.reference for r in queue_page(moderator, parse_filter({"q": "needle"})).rows] == ["post:long"]


def test_queue_1_very_long_text_is_previewed_and_bounded(app):
    """QUEUE-1: 10,000 characters of content and a 200-character author name: the
    preview is 280 characters, the stored search text at most 4,000."""
    team = make_team()
    report = _report(team, "post:huge", 0, summary="s" * 5000,
                     t={"evidence": {"content_text": "x" * 10_000, "author_name": "n" * 200,
                                     "author_reference": "user:" + "9" * 400}})
    subject = _subject(report.subject_id)
    assert len(subject.preview) == 280 and len(subject.search_text) <= 4000 and subject.author_name == "n" * 200


@pytest.mark.parametrize("args", [
    {"from": "0001-01-01T00:00:00+01:00"},
    {"to": "9999-12-31T23:59:59-01:00"},
])
def test_queue_1_a_received_window_at_the_calendars_edge_is_refused_in_words(app, args):
    """QUEUE-1: a malformed window is 400 queue_filter_invalid, never an exception."""
    with pytest.raises(ApiError) as refused:
        parse_filter(args)
    assert refused.value.code == "queue_filter_invalid"


def test_queue_1_malformed_cursors_are_refused_in_words(app):
    """QUEUE-1: cursors of the wrong shape, another sort, bad base64, wrong types,
    a megabyte of junk: 400 queue_cursor_invalid."""
    team = make_team()
    _report(team, "post:c", 0)
    moderator = make_operator(team.installation_id)
    bad = ["!!!", "a", _cursor("oldest"), _cursor("most", "1", "sub_x"), _cursor("most", 1.5, "sub_x"),
           _cursor("most", 1, 2), _cursor("oldest", "not a time", "sub_x"), _cursor("newest", 5, "sub_x"),
           base64.urlsafe_b64encode(b"\xff\xfe").decode(), "A" * 1_000_000,
           _cursor({"a": 1, "b": 2, "c": 3})]
    for cursor in bad:
        for sort in (QueueSort.MOST, QueueSort.OLDEST):
            with pytest.raises(ApiError) as refused:
                queue_page(moderator, QueueFilter(sort=sort), cursor)
            assert refused.value.code == "queue_cursor_invalid", cursor[:40]


@pytest.mark.parametrize("cursor", [
    _cursor("most", 10**30, "sub_x"),
    _cursor("oldest", "0001-01-01T00:00:00+01:00", "sub_x"),
    _cursor("most", True, "sub_x"),
])
def test_queue_1_a_forged_cursor_out_of_range_is_refused_in_words(app, cursor):
    """QUEUE-1: a cursor not made here is 400 queue_cursor_invalid."""
    team = make_team()
    _report(team, "post:c", 0)
    sort = QueueSort.MOST if "most" in base64.urlsafe_b64decode(cursor + "==").decode() else QueueSort.OLDEST
    with pytest.raises(ApiError) as refused:
        queue_page(make_operator(team.installation_id), QueueFilter(sort=sort), cursor)
    assert refused.value.code == "queue_cursor_invalid"


def test_queue_2_an_expired_claim_blocks_nobody_and_the_old_holder_cannot_release_the_new(app):
    """QUEUE-2: after expiry Bob claims and decides; Alice's late release is refused."""
    team = make_team()
    report = _report(team, "post:expiry", 0)
    alice, bob = _two(team)
    claim_subject(alice, report.subject_id)
    set_row(ReportSubject, report.subject_id, claimed_until=utcnow() - timedelta(seconds=1))
    claim_subject(bob, report.subject_id)
    assert _refused(release_subject, alice, report.subject_id).code == "subject_not_claimed_by_you"
    assert _refused(decide_subject, report.subject_id, decision_code="remove_content", rationale="",
                    operator=alice).code == "subject_claimed"
    decide_subject(report.subject_id, decision_code="remove_content", rationale="", operator=bob)
    assert _subject(report.subject_id).claimed_by_id is None


def test_queue_2_two_claims_at_once_one_holds(app):
    """QUEUE-2: Alice and Bob claim one subject at the same moment: one holds it, the
    other is refused with subject_claimed; the row names the winner."""
    team = make_team()
    report = _report(team, "post:claimrace", 0)
    alice, bob = _two(team)
    results = at_once(app, [lambda who=who: claim_subject(db.session.merge(who), report.subject_id)
                             for who in (alice, bob)])
    wins = [n for n, r in enumerate(results) if not isinstance(r, Exception)]
    assert len(wins) == 1, results
    loser = results[1 - wins[0]]
    assert isinstance(loser, ApiError) and loser.code == "subject_claimed", results
    assert _subject(report.subject_id).claimed_by_id == (alice, bob)[wins[0]].id


def test_queue_4_a_time_to_decide_target_is_bounded(app):
    """QUEUE-4: a target outside one minute .. 30 days, or not a duration, is refused
    (a huge one would overflow the overdue comparison of every queue page)."""
    from app.domain.time_targets import parse_target

    for text in ("999999d", "0", "59s", "-5m", "1e9", "4 hours", "4h; drop"):
        with pytest.raises(ApiError) as refused:
            parse_target(text)
        assert refused.value.code == "queue_target_invalid", text
    assert parse_target(" 4h ") == 4 * 3600 and parse_target("") is None
