"""Each console page runs a bounded number of SQL queries, whatever the number of
attempts, receipts, audit rows or proposals."""

from __future__ import annotations

from contextlib import contextmanager
from datetime import timedelta

from sqlalchemy import event, update

from app.domain.clock import utcnow
from app.extensions import db
from app.models import ActionReceiptRecord, ConnectionAttempt, DsaStatement, new_id
from app.services.dsa.sweep import submit_due_statements
from app.services.uow import Actor, unit_of_work

from ..builders import add_reports, approve, decide_report, login, run_worker, set_dsa_settings
from ..dsa_notice_steps import applied_removal, queued_notice
from ..services.test_dsa_submission import pending_statements
from ..services.test_dsa_sweep import tdb_connection


@contextmanager
def counting(app):
    statements = []

    def count(conn, cursor, statement, *args):
        if statement != "BEGIN":  # SQLite's explicit transaction start is not a query
            statements.append(statement)

    engine = db.engine
    event.listen(engine, "before_cursor_execute", count)
    try:
        yield statements
    finally:
        event.remove(engine, "before_cursor_execute", count)


def grow_history(world, proposal, n: int) -> None:
    """n attempts, receipts and audit rows more on one proposal."""
    start = utcnow()
    with unit_of_work() as uow:
        for i in range(n):
            uow.session.add(
                ConnectionAttempt(
                    installation_id=world.installation_id,
                    proposal_id=proposal.id,
                    attempt_number=100 + i,
                    delivery_cycle=1 + i % 3,
                    connection_version_id=world.connection_version_id,
                    method="POST",
                    url="http://x/",
                    request_digest="sha256:" + "0" * 64,
                    response_status=503,
                    response_class="server_error",
                    error_code="platform_server_error",
                    finished_at=utcnow(),
                    duration_ms=5,
                )
            )
            uow.session.add(
                ActionReceiptRecord(
                    id=new_id("rcp"),
                    installation_id=world.installation_id,
                    proposal_id=proposal.id,
                    delivery_cycle=1,
                    attempt_number=i,
                    source="async",
                    status="accepted",
                    receipt={},
                    receipt_digest=f"sha256:{i}",
                    # arrival order is explicit: one transaction's default times are equal
                    received_at=start + timedelta(milliseconds=i),
                )
            )
            uow.audit(
                world.installation_id,
                f"test-history:{i}",
                "test.event",
                Actor("operator", world.users["admin"]),
                "action_proposal",
                proposal.id,
                {"i": i},
            )
        uow.commit()


def queries_for(app, client, url) -> int:
    from app.queueing import get_redis

    from app.services.approval_inbox import forget_kept_counts

    get_redis(app).flushdb()  # no cached state counts: count every query a cold page runs
    forget_kept_counts()  # nor the navigation's kept count (it runs its mark and its count)
    db.session.remove()  # the request shares the test's app context: start it with an empty session
    with counting(app) as statements:
        response = client.get(url)
    assert response.status_code == 200
    return len(statements)


def test_proposal_detail_queries_do_not_grow_with_history(app, client, world):
    proposal = decide_report(world)
    login(client, "reviewer@example.com")
    small = queries_for(app, client, f"/proposals/{proposal.id}")
    live_small = queries_for(app, client, f"/proposals/{proposal.id}/live")
    grow_history(world, proposal, 50)
    assert queries_for(app, client, f"/proposals/{proposal.id}") == small
    assert queries_for(app, client, f"/proposals/{proposal.id}/live") == live_small
    # the operator, the proposal with its report, approval, task, run and decisions,
    # its attempts, its receipts, the audit count and rows, the actors' names, and
    # the approval verdict's correction lookup (8 and 8 then); now also the evidence,
    # the subject history, labels and undone marks (REV-1..4) and the makers' facts (FOUR-1),
    # and what the reviewer approves: the decision, its maker and the delivery (FOUR-5)
    # and the navigation's inbox count (POL-7: its mark, and cold the count; not on the live fragment), the votes and
    # their approvers (POL-1..3; one query each, the live panel reads the votes too),
    # the subject's protected mark (POL-4), its statement of reasons (DSA-3; read once, the
    # DSA-4 notice panel shows the same row; not on the live fragment)
    assert (small, live_small) == (26, 13)


def test_lists_do_not_grow_with_rows(app, client, world):
    decide_report(world, 0)
    login(client, "reviewer@example.com")
    pages = [
        "/proposals",
        "/proposals?state=approval_required",
        "/proposals?mine=1",
        "/tasks",
        "/reports",
        "/operations",
    ]
    before = {url: queries_for(app, client, url) for url in pages}
    add_reports(world, 12)
    for index in range(1, 18):
        decide_report(world, index)
    after = {url: queries_for(app, client, url) for url in pages}
    assert after == before
    # the operator first; the lists load their related rows in the same query
    # (4, 4, 4, 2, 2 and 5 before the labels, undone marks, evidence and makers' facts);
    # every full page then counts what waits in the navigation's inbox (POL-7: its mark,
    # and on a cold page the count: two queries; a warm page whose mark is unchanged, one)
    assert after == {
        "/proposals": 10,  # proposals with their reports, queues, state counts, labels, undone marks,
        # the protected marks (POL-4)
        "/proposals?state=approval_required": 10,
        "/proposals?mine=1": 10,
        "/tasks": 11,  # tasks with their proposals and assignees (one query), makers' facts, evidence,
        # decisions (FOUR-5), the protected marks (POL-4)
        "/reports": 6,  # and the active temporary actions with their reversals (TEMP-2)
        "/operations": 15,  # and the reversals due within 24 h or overdue (TEMP-2), the connections' health
        # with their held counts, and their transitions (CONN-1), the dead letters' groups, then those listed (CONN-4),
        # the deliveries retrying (QUEUE-6), the overdue reviews of emergency actions (POL-6),
        # the DSA settings and the statements counted by state (DSA-3)
    }


def test_dsa3_operations_statements_do_not_grow_with_refused_statements(app, client, world, tdb):
    """DSA-3: with DSA on, a connection and refused statements, Operations adds the
    refused ones listed (one query with their proposals) and the connection, whatever
    their number (2 refused, then 6)."""
    tdb_connection(world, tdb)
    pending_statements(world, 6, broken={1, 3})
    submit_due_statements()
    login(client, "admin@example.com")
    few = queries_for(app, client, "/operations")
    db.session.remove()
    with unit_of_work() as uow:
        uow.session.execute(update(DsaStatement).values(state="dead_letter", last_error='{"category": ["x"]}'))
        uow.commit()
    # the page's 15, then the refused statements, the connection and the labels they are named by
    assert queries_for(app, client, "/operations") == few == 15 + 3


def test_report_detail_is_bounded(app, client, world):
    decide_report(world, 0)
    login(client, "moderator@example.com")
    first = queries_for(app, client, f"/reports/{world.report_ids[0]}")
    for _ in range(3):
        from app.services.cases.reports import record_decision

        record_decision(
            world.report_ids[0], decision_code="no_violation", rationale="", operator=world.user("moderator")
        )
    assert queries_for(app, client, f"/reports/{world.report_ids[0]}") == first
    # the operator, the report, then one query each: targets, decisions with their
    # makers, runs, proposals, appeals (7), then the evidence, subject history, labels
    # and undone marks (REV-1..4), and the navigation's inbox count (POL-7: mark and count), the
    # protected marks of its subjects and their authors (POL-4), the complaint window of
    # the latest decision (DSA-5), the DSA settings for the rationale's hint (DSA-2)
    assert first == 22


def test_appeal_pages_are_bounded(app, client, world):
    from app.services.cases.appeals import decide_appeal, file_appeal

    def appeal_on(index: int) -> str:
        actor = Actor("operator", world.users["moderator"])
        return file_appeal(
            world.report_ids[index], statement="Not mine.", actor=actor, installation_id=world.installation_id
        ).appeal_id

    proposal = decide_report(world)
    approve(world, proposal)
    run_worker(app)  # applied: reversing the decision makes a correction to show
    appeal_id = appeal_on(0)
    decide_appeal(appeal_id, outcome="reversed", rationale="Misread.", operator=world.user("reviewer"))
    login(client, "reviewer@example.com")
    detail = queries_for(app, client, f"/appeals/{appeal_id}")
    listing = queries_for(app, client, "/appeals")
    for index in range(1, 4):
        decide_report(world, index)
        appeal_on(index)
    assert queries_for(app, client, "/appeals") == listing
    # the operator, the appeal with its report and contested decision, its decisions
    # with their makers, its corrections with both actions and approver, then the two
    # checks each open correction runs (latest decision, a later appeal decision);
    # 6 and 2 before the evidence, the contested action and the labels (REV-1, REV-4);
    # each with the navigation's inbox count (POL-7); the detail with the protected marks (POL-4)
    # and the outcome notice's statement and, with none, the DSA settings (DSA-5)
    assert (detail, listing) == (24, 5)


def grow_subject_history(world, n: int) -> None:
    """n more reports on the same post and its author, each decided (REV-2's history grows)."""
    from ..builders import add_report_with_evidence, decide

    for i in range(n):
        reference = "post:1001" if i % 2 else f"post:9{i:03d}"
        report_id = add_report_with_evidence(world, f"history-{i}", reference, author_reference="user:4412")
        decide(world, report_id)


def test_review_pages_stay_fixed_as_subject_history_grows(app, client, world):
    """REV-2: the report and proposal pages' query counts stay fixed as the target's and
    its author's history grows (bounded queries on indexes)."""
    proposal = decide_report(world, 0)
    login(client, "reviewer@example.com")
    urls = [f"/reports/{world.report_ids[0]}", f"/proposals/{proposal.id}", f"/proposals/{proposal.id}/live"]
    before = {url: queries_for(app, client, url) for url in urls}
    grow_subject_history(world, 6)
    after = {url: queries_for(app, client, url) for url in urls}
    grow_subject_history_more = 25
    grow_subject_history(world, grow_subject_history_more)
    assert {url: queries_for(app, client, url) for url in urls} == after == before
    assert max(before.values()) <= 40


def test_dsa4_a_restrictions_page_reads_its_statement_once(app, client, world, platform):
    """DSA-3, DSA-4: an applied takedown with its statement of reasons and notice: the
    page reads the statement once (the statement panel and the notice panel share the
    row) and the notice's proposal once."""
    set_dsa_settings(world.installation_id)
    removal = applied_removal(world, platform)
    assert queued_notice(removal) is not None
    login(client, "reviewer@example.com")
    db.session.remove()
    with counting(app) as statements:
        page = client.get(f"/proposals/{removal.id}").get_data(as_text=True)
    assert 'id="dsa-notice"' in page
    from_statements = [s for s in statements if "FROM dsa_statements" in s]
    assert len(from_statements) == 1, from_statements
