"""From the console's records to a statement of reasons' facts (app/domain/dsa_facts.py,
SPEC DSA-2): source and detection from the report's origin, automation from the
workflow's authority, the rest from the decision, the evidence, the component and the
settings; a missing fact named in words."""

from __future__ import annotations

import dataclasses
from datetime import UTC, date, datetime

import pytest

from app.demo_dsa import DEMO_DSA_SETTINGS
from app.domain import dsa
from app.domain.dsa import AutomatedDecision, SourceType
from app.domain.dsa_facts import (
    REPORT_SOURCES,
    ActionRecord,
    DecisionRecord,
    EvidenceRecord,
    ReportRecord,
    automation_of,
    missing_fact_message,
    source_of,
    statement_facts,
)
from app.domain.dsa_settings import DEFAULT_SETTINGS, settings_from_json

SETTINGS = settings_from_json(DEMO_DSA_SETTINGS)
APPLIED = datetime(2026, 12, 3, 21, 0, tzinfo=UTC)
REPORT = ReportRecord(created_at=datetime(2026, 12, 1, tzinfo=UTC))
DECISION = DecisionRecord("remove_content", "Targeted insults at a named person.", "policy-2026-11")
EVIDENCE = EvidenceRecord("post:1001", found=True, posted_at=datetime(2026, 11, 30, 8, 15, tzinfo=UTC), language="de")
TAKEDOWN = ActionRecord("run_1:takedown:main:proposal", "takedown", target_kind="post", kind_label="Post")


def build(**changes):
    records = dict(report=REPORT, decision=DECISION, evidence=EVIDENCE, action=TAKEDOWN, settings=SETTINGS,
                   applied_at=APPLIED)
    records.update(changes)
    return statement_facts(**records)


def test_a_takedown_yields_a_valid_statement_with_every_fact_from_its_record():
    """DSA-2: ground, category, reference and keywords from the decision code's
    meaning; restriction from the component; facts = rationale + pinned policy
    version; explanation = rationale; dates from the applied receipt and the evidence;
    language in capitals; territorial scope from the settings."""
    facts = build()
    statement = dsa.build_statement(facts)
    assert dsa.statement_problems(statement) == {}
    assert statement["puid"] == dsa.puid_for(TAKEDOWN.proposal_id)
    assert statement["decision_visibility"] == ["DECISION_VISIBILITY_CONTENT_REMOVED"]
    assert statement["decision_ground"] == "DECISION_GROUND_INCOMPATIBLE_CONTENT"
    assert statement["incompatible_content_ground"] == "Community guidelines, section 3 (harassment)"
    assert statement["incompatible_content_explanation"] == DECISION.rationale
    assert statement["incompatible_content_illegal"] == "No"
    assert statement["category"] == "STATEMENT_CATEGORY_ILLEGAL_OR_HARMFUL_SPEECH"
    assert statement["category_specification"] == ["KEYWORD_CYBER_HARASSMENT"]
    assert statement["decision_ground_reference_url"] == "https://platform.example/terms#harassment"
    assert statement["decision_facts"] == (
        "Targeted insults at a named person.\n\nDecided under policy version policy-2026-11."
    )
    assert statement["application_date"] == "2026-12-03"
    assert statement["content_date"] == "2026-11-30"
    assert statement["content_language"] == "DE"
    assert statement["content_type"] == ["CONTENT_TYPE_TEXT"]
    assert statement["territorial_scope"] == sorted(DEMO_DSA_SETTINGS["territorial_scope"])
    assert "end_date_visibility_restriction" not in statement  # permanent: indefinite


@pytest.mark.parametrize(
    "report, source_type, detected",
    [
        (ReportRecord(None), SourceType.ARTICLE_16, False),
        (ReportRecord(None, source="trusted_flagger"), SourceType.TRUSTED_FLAGGER, False),
        (ReportRecord(None, source="other_notification"), SourceType.OTHER_NOTIFICATION, False),
        (ReportRecord(None, source="automated_detection"), SourceType.VOLUNTARY, True),
        (ReportRecord(None, opened_in_console=True), SourceType.VOLUNTARY, False),
    ],
)
def test_the_source_type_and_detection_follow_the_reports_origin(report, source_type, detected):
    """DSA-2: no source is an Article 16 notice; a trusted flagger and another
    notification are what they say; the platform's automated detection and a report
    opened in the console are the platform's own initiative (detection Yes / No)."""
    assert source_of(report) == (source_type, detected)
    statement = dsa.build_statement(build(report=report))
    assert statement["source_type"] == source_type.value
    assert statement["automated_detection"] == ("Yes" if detected else "No")


def test_every_report_source_maps_to_a_source_type():
    """DSA-2: the report API's sources are exactly the mapped ones, each with a label."""
    assert set(REPORT_SOURCES) == {"trusted_flagger", "other_notification", "automated_detection"}
    assert all(source_of(ReportRecord(None, source=s))[0] in SourceType for s in REPORT_SOURCES)


@pytest.mark.parametrize(
    "changes, report, expected",
    [
        ({"approval_mode": "bounded_auto"}, REPORT, AutomatedDecision.FULLY),
        ({}, REPORT, AutomatedDecision.PARTIALLY),
        ({"created_by_type": "operator"}, REPORT, AutomatedDecision.NOT_AUTOMATED),
        ({"bulk": True}, REPORT, AutomatedDecision.NOT_AUTOMATED),
        ({"emergency": True}, REPORT, AutomatedDecision.NOT_AUTOMATED),
        ({}, ReportRecord(None, opened_in_console=True), AutomatedDecision.NOT_AUTOMATED),
    ],
)
def test_the_automated_decision_follows_the_workflows_authority(changes, report, expected):
    """DSA-2: bounded automation → fully automated; a person approving a workflow's
    proposal → partially; a person acting directly (operator-made, bulk, console,
    emergency) → not automated."""
    action = dataclasses.replace(TAKEDOWN, **changes)
    assert automation_of(action, report) is expected
    assert build(action=action, report=report).automated_decision is expected


def test_a_temporary_suspension_ends_after_its_duration_on_the_account_field():
    """DSA-2: a temporary action's end date is the applied time plus its duration; the
    account restriction fills decision_account and its end date."""
    suspension = ActionRecord("p:suspend", "suspend_account", target_kind="author_of",
                              kind_label="The author's account", duration_seconds=3 * 86400)
    decision = DecisionRecord("suspend_account", "Runs a ring of fake accounts.")
    statement = dsa.build_statement(build(action=suspension, decision=decision))
    assert dsa.statement_problems(statement) == {}
    assert statement["decision_account"] == "DECISION_ACCOUNT_SUSPENDED"
    assert statement["end_date_account_restriction"] == "2026-12-06"
    assert statement["content_type"] == ["CONTENT_TYPE_OTHER"]
    assert statement["content_type_other"] == "The author's account"
    assert statement["decision_facts"] == "Runs a ring of fake accounts."  # no policy version pinned


def test_an_action_that_declares_no_restriction_or_dsa_off_needs_no_statement():
    """DSA-2: a component with no declared restriction (a restore, the notice) and an
    installation with DSA off yield no facts."""
    assert build(action=dataclasses.replace(TAKEDOWN, component_slug="restore")) is None
    assert build(action=dataclasses.replace(TAKEDOWN, component_slug=None)) is None
    assert build(settings=DEFAULT_SETTINGS) is None


@pytest.mark.parametrize(
    "changes, field, words",
    [
        ({"evidence": EvidenceRecord("post:1001", found=True)}, "content_date",
         "A statement of reasons needs the content date: the evidence of post:1001 gives no posted time."),
        ({"evidence": EvidenceRecord("post:77")}, "content_date",
         "A statement of reasons needs the content date: no evidence of post:77 was received"),
        ({"decision": DecisionRecord("remove_content", "  ")}, "decision_facts",
         "A statement of reasons needs the facts and the explanation: the decision's rationale is empty."),
        ({"decision": DecisionRecord("warn_user", "Rude.")}, "category",
         "A statement of reasons needs the category, ground and reference of the decision code warn_user"),
        ({"action": dataclasses.replace(TAKEDOWN, target_kind="video")}, "content_type",
         "A statement of reasons needs the content type: the DSA settings give none for targets of kind video."),
    ],
)
def test_a_missing_fact_is_named_in_words(changes, field, words):
    """DSA-2: an absent posted time, an empty rationale, an unmapped decision code, a
    kind with no content type: the statement is invalid and the message names the
    missing fact and why the records lack it."""
    facts = build(**changes)
    problems = dsa.statement_problems(dsa.build_statement(facts))
    assert field in problems
    records = {"decision": DECISION, "evidence": EVIDENCE, "action": TAKEDOWN}
    records.update({k: v for k, v in changes.items() if k in records})
    message = missing_fact_message(problems, **records)
    assert message.startswith(words)


def test_the_application_date_is_the_applied_day_in_utc():
    """DSA-2: the application date is the applied receipt's UTC day, and an end date is
    never before it."""
    late = datetime(2026, 12, 31, 23, 59, 59, tzinfo=UTC)
    facts = build(applied_at=late, action=dataclasses.replace(TAKEDOWN, duration_seconds=60))
    assert facts.application_date == date(2026, 12, 31)
    assert facts.end_date == date(2027, 1, 1)
    assert dsa.statement_problems(dsa.build_statement(facts)) == {}
