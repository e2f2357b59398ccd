"""Statements of reasons built when a restriction is applied, and decisions refused when
they could not yield one (app/services/dsa/statements.py, app/services/dsa/refusal.py,
SPEC DSA-2), through the real flow: intake, decision, approval, the worker delivering
to the demo platform on loopback."""

from __future__ import annotations

import copy
from datetime import timedelta

import pytest
from sqlalchemy import func, select

from app.demo_dsa import DEMO_DSA_SETTINGS
from app.domain import dsa
from app.domain.errors import ApiError
from app.extensions import db
from app.models import (
    ActionProposal,
    AuditEvent,
    BulkBatch,
    Decision,
    DsaStatement,
    Report,
    WorkflowRun,
)
from app.services.bulk.actions import bulk_actions
from app.services.bulk.batch_approval import approve_batch
from app.services.bulk.dry_runs import start_dry_run
from app.services.bulk.submission import submit_batch
from app.services.cases.proactive import open_report
from app.services.cases.reports import decide_subject, intake_report, record_decision
from app.services.dsa.settings import current_settings
from app.services.dsa.statements import record_statement
from app.services.dsa.submission import TdbEndpoint, submit_pending
from app.services.lifecycle.dispatch import deliver
from app.services.uow import unit_of_work
from tests.builders import (
    add_report_with_evidence,
    approve,
    decide_report,
    make_world,
    proposal_of,
    reload,
    reversal_of,
    run_worker,
    set_dsa_settings,
    time_reaches,
)

POSTED = "2026-11-30T08:15:00Z"


def statements() -> list[DsaStatement]:
    db.session.rollback()
    return list(db.session.scalars(select(DsaStatement).order_by(DsaStatement.created_at)))


def counts() -> tuple[int, ...]:
    db.session.rollback()
    return tuple(
        db.session.scalar(select(func.count()).select_from(model))
        for model in (Decision, WorkflowRun, ActionProposal, AuditEvent, DsaStatement)
    )


def applied_through_the_worker(app, world, proposal) -> ActionProposal:
    """A person approves; the worker delivers to the demo platform; applied."""
    approve(world, proposal)
    run_worker(app)
    row = reload(proposal)
    assert row.state == "applied", (row.state, row.last_error_code)
    return row


def test_dsa2_an_approved_takedown_yields_exactly_one_valid_statement(app, world, tdb):
    """DSA-2: a human-approved takedown applied through the real flow yields one
    statement, built in the applied receipt's transaction, valid locally and accepted
    by the Transparency Database on loopback; partially automated (a person approved a
    workflow's proposal), an Article 16 notice; its report columns filled."""
    set_dsa_settings(world.installation_id)
    proposal = applied_through_the_worker(app, world, decide_report(world))
    [row] = statements()
    statement = row.statement
    assert dsa.statement_problems(statement) == {}
    assert (row.proposal_id, row.puid, row.state) == (proposal.id, dsa.puid_for(proposal.id), "pending")
    assert statement["decision_visibility"] == ["DECISION_VISIBILITY_CONTENT_REMOVED"]
    assert statement["automated_decision"] == "AUTOMATED_DECISION_PARTIALLY"
    assert (statement["source_type"], statement["automated_detection"]) == ("SOURCE_ARTICLE_16", "No")
    assert statement["application_date"] == proposal.confirmed_at.date().isoformat()
    assert statement["content_date"] == "2026-11-29"  # post:1001's posted time (its evidence)
    assert statement["incompatible_content_explanation"] == "test"
    assert statement["decision_facts"] == "test\n\nDecided under policy version policy-2026-11."
    report = db.session.get(Report, proposal.report_id)
    assert (row.report_id, row.decision_id, row.reported_at) == (report.id, proposal.decision_id, report.created_at)
    assert (row.category, row.ground, row.restriction, row.restriction_type) == (
        "STATEMENT_CATEGORY_ILLEGAL_OR_HARMFUL_SPEECH", "DECISION_GROUND_INCOMPATIBLE_CONTENT", "visibility",
        "DECISION_VISIBILITY_CONTENT_REMOVED")
    assert (row.automated_decision, row.automated_detection, row.source_type) == (
        "AUTOMATED_DECISION_PARTIALLY", False, "SOURCE_ARTICLE_16")
    assert row.applied_at == proposal.confirmed_at and row.ends_at is None
    assert row.complaint_until == proposal.confirmed_at + timedelta(days=183)
    [built] = db.session.scalars(select(AuditEvent).where(AuditEvent.action == "dsa.statement_built")).all()
    assert built.target_id == row.id and built.details["puid"] == row.puid
    run = submit_pending(world.installation_id, TdbEndpoint(base_url=tdb.base_url, token="tdb-token"))
    assert (run.submitted, run.dead_lettered) == (1, 0) and set(tdb.statements) == {row.puid}


def test_dsa2_the_statement_is_written_once_per_proposal(app, world):
    """DSA-2: building again for the same proposal returns the row it wrote (its puid
    is unique): one statement per restriction."""
    set_dsa_settings(world.installation_id)
    proposal = applied_through_the_worker(app, world, decide_report(world))
    [row] = statements()
    with unit_of_work() as uow:
        again = record_statement(uow, uow.session.get(ActionProposal, proposal.id),
                                 current_settings(uow.session, world.installation_id))
        uow.commit()
    assert again.id == row.id and len(statements()) == 1


def test_dsa2_bounded_automation_is_fully_automated(app, platform):
    """DSA-2: a bounded-automation workflow applies with no person in between: the
    statement says fully automated."""
    world = make_world(platform.url, approval_mode="bounded_auto")
    platform.configure_for(world)
    set_dsa_settings(world.installation_id)
    proposal = decide_report(world)
    assert proposal.approval_mode == "bounded_auto"
    run_worker(app)
    assert reload(proposal).state == "applied"
    [row] = statements()
    assert row.automated_decision == row.statement["automated_decision"] == "AUTOMATED_DECISION_FULLY"
    assert dsa.statement_problems(row.statement) == {}


def test_dsa2_a_temporary_suspension_gets_its_end_date_and_its_reversal_no_statement(app, world, platform):
    """DSA-2: a temporary suspension's statement restricts the account until applied +
    duration (its end date and ends_at); lifting it at its time (the reversal) makes
    no statement of its own."""
    set_dsa_settings(world.installation_id)
    original = applied_through_the_worker(app, world, decide_report(world, code="suspend_account"))
    [row] = statements()
    ends = original.confirmed_at + timedelta(seconds=original.temporary["duration_seconds"])
    assert row.ends_at == ends and row.restriction == "account"
    assert row.statement["decision_account"] == "DECISION_ACCOUNT_SUSPENDED"
    assert row.statement["end_date_account_restriction"] == ends.date().isoformat()
    assert row.statement["content_type"] == ["CONTENT_TYPE_OTHER"]
    assert dsa.statement_problems(row.statement) == {}
    reversal = reversal_of(original)
    time_reaches(reversal)
    assert deliver(reversal.id).state == "applied"
    assert [r.id for r in statements()] == [row.id]


def test_dsa2_the_reports_source_and_the_evidence_language_reach_the_statement(app, world):
    """DSA-2: a trusted flagger's report with German evidence: source type trusted
    flagger, content language DE; the notice's language (DSA-4) is German."""
    set_dsa_settings(world.installation_id)
    target = {"reference": "post:1002", "kind": "post", "evidence": {"posted_at": POSTED, "language": "de"}}
    result = intake_report({"external_id": "flagged-1", "source": "trusted_flagger", "targets": [target]},
                           world.integration_id)
    assert db.session.get(Report, result.report_id).source == "trusted_flagger"
    record_decision(result.report_id, decision_code="remove_content", rationale="Threats.",
                    operator=world.user("moderator"))
    applied_through_the_worker(app, world, proposal_of(result.report_id))
    [row] = statements()
    assert (row.source_type, row.language) == ("SOURCE_TRUSTED_FLAGGER", "de")
    assert (row.statement["content_language"], row.statement["content_date"]) == ("DE", "2026-11-30")


def test_dsa2_a_report_opened_in_the_console_is_voluntary_and_not_automated(app, world):
    """DSA-2: a moderator opens a report on post:1003 and decides it: own initiative
    (voluntary, detection No), a person chose the subject (not automated); the content
    date comes from the evidence the platform sent about post:1003."""
    set_dsa_settings(world.installation_id)
    report = open_report(world.user("moderator"), reference="post:1003", kind="post", summary="Seen on patrol.")
    record_decision(report.id, decision_code="remove_content", rationale="Harassment.",
                    operator=world.user("moderator"))
    applied_through_the_worker(app, world, proposal_of(report.id))
    [row] = statements()
    assert (row.source_type, row.automated_detection, row.automated_decision) == (
        "SOURCE_VOLUNTARY", False, "AUTOMATED_DECISION_NOT_AUTOMATED")
    assert row.statement["content_date"] == "2026-11-28" and dsa.statement_problems(row.statement) == {}


def refused(call) -> ApiError:
    with pytest.raises(ApiError) as caught:
        call()
    error = caught.value
    assert (error.status, error.code) == (422, "dsa_statement_incomplete"), error
    return error


def test_dsa2_a_decision_without_the_content_date_is_refused_and_changes_nothing(app, world):
    """DSA-2: evidence with no posted time: the decision is refused when taken, naming
    the missing fact; no decision, run, proposal, audit row or statement is written and
    the report stays open — by report and by subject (QUEUE-3) alike."""
    set_dsa_settings(world.installation_id)
    report_id = add_report_with_evidence(world, "no-time-1", "post:2001", content_text="rude words")
    before = counts()
    error = refused(lambda: record_decision(report_id, decision_code="remove_content", rationale="Harassment.",
                                            operator=world.user("moderator")))
    assert str(error.message) == (
        "A statement of reasons needs the content date: the evidence of post:2001 gives no posted time.")
    subject_id = db.session.get(Report, report_id).subject_id
    refused(lambda: decide_subject(subject_id, decision_code="remove_content", rationale="Harassment.",
                                   operator=world.user("moderator")))
    assert counts() == before
    assert db.session.get(Report, report_id).state == "open"


def test_dsa2_an_empty_rationale_and_an_unmapped_decision_code_are_refused(app, world):
    """DSA-2: a restriction needs the facts and explanation (the rationale) and the
    decision code's category, ground and reference (the settings); each missing fact
    refuses the decision in words, nothing stored."""
    set_dsa_settings(world.installation_id)
    report_id = world.report_ids[0]
    before = counts()
    error = refused(lambda: record_decision(report_id, decision_code="remove_content", rationale="  ",
                                            operator=world.user("moderator")))
    assert "the decision's rationale is empty" in error.message
    unmapped = copy.deepcopy(DEMO_DSA_SETTINGS)
    del unmapped["decisions"]["remove_content"]
    set_dsa_settings(world.installation_id, unmapped)
    before = counts()
    error = refused(lambda: record_decision(report_id, decision_code="remove_content", rationale="Harassment.",
                                            operator=world.user("moderator")))
    assert "the decision code remove_content" in error.message and "no meaning" in error.message
    assert counts() == before


def test_dsa2_a_console_report_on_a_subject_with_no_evidence_is_refused(app, world):
    """DSA-2: a report opened in the console about a post no platform report carried
    evidence of cannot give the content date: its decision is refused."""
    set_dsa_settings(world.installation_id)
    report = open_report(world.user("moderator"), reference="post:4242", kind="post", summary="Seen on patrol.")
    before = counts()
    error = refused(lambda: record_decision(report.id, decision_code="remove_content", rationale="Spam.",
                                            operator=world.user("moderator")))
    assert "no evidence of post:4242 was received" in error.message
    assert counts() == before


def test_dsa2_a_bulk_batch_with_an_item_missing_a_fact_is_refused_at_submission(app, world):
    """DSA-2, BULK-3: one statement per item; an item whose subject has no evidence
    refuses the batch's submission with the missing fact, nothing stored; without it
    the batch is submitted and each applied item gets its own statement, not
    automated (a moderator chose each subject)."""
    set_dsa_settings(world.installation_id)
    moderator = world.user("moderator")
    action = next(a for a in bulk_actions(db.session, world.installation_id) if a.decision_code == "remove_content")

    def dry_run(lines):
        return start_dry_run(moderator, selection={"source": "list", "text": "\n".join(lines)},
                             action_key=action.key, decision_code=action.decision_code, reason="Spam network.")

    batch_id = dry_run(["post:1004", "post:9999"])
    batch = db.session.get(BulkBatch, batch_id)
    before = counts()
    error = refused(lambda: submit_batch(moderator, batch_id, batch.dry_run_digest))
    assert "no evidence of post:9999 was received" in error.message
    assert counts() == before and db.session.get(BulkBatch, batch_id).state == "dry_run"
    batch_id = dry_run(["post:1004", "post:1005"])
    digest = submit_batch(moderator, batch_id, db.session.get(BulkBatch, batch_id).dry_run_digest)
    assert approve_batch(world.user("reviewer"), batch_id, digest) == {"approved": 2, "skipped": 0}
    run_worker(app)
    rows = statements()
    assert len(rows) == 2 and {r.automated_decision for r in rows} == {"AUTOMATED_DECISION_NOT_AUTOMATED"}
    assert all(dsa.statement_problems(r.statement) == {} for r in rows)


def test_dsa2_settings_changed_after_the_decision_keep_the_statement_as_a_dead_letter(app, world):
    """DSA-2: a decision accepted while its code was mapped, applied after the mapping
    was removed: the statement is kept as a dead letter with the problem in words,
    never lost."""
    set_dsa_settings(world.installation_id)
    proposal = decide_report(world)
    unmapped = copy.deepcopy(DEMO_DSA_SETTINGS)
    del unmapped["decisions"]["remove_content"]
    set_dsa_settings(world.installation_id, unmapped)
    applied_through_the_worker(app, world, proposal)
    [row] = statements()
    assert row.state == "dead_letter"
    assert "the decision code remove_content" in row.last_error


def test_dsa2_with_dsa_off_nothing_is_built_or_refused(app, world):
    """DSA-2: an installation with DSA off: a decision with an empty rationale is
    accepted and its applied takedown makes no statement."""
    record_decision(world.report_ids[0], decision_code="remove_content", rationale="",
                    operator=world.user("moderator"))
    applied_through_the_worker(app, world, proposal_of(world.report_ids[0]))
    assert statements() == []
    assert db.session.scalar(select(func.count()).select_from(AuditEvent).where(
        AuditEvent.action == "dsa.statement_built")) == 0
