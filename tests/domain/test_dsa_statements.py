"""Statements of reasons built from a restriction's facts and checked against the
Transparency Database's documented rules (app/domain/dsa.py, SPEC DSA-2)."""

from __future__ import annotations

import dataclasses
import re
from datetime import date

import pytest

from app.domain import dsa
from app.domain.dsa import Restriction, build_statement, puid_for, statement_problems
from tests.dsa_examples import documented_example, facts


def test_the_documented_example_is_valid():
    """DSA-2: the documentation's own example passes the local rules (its illegal
    content fields are ignored under an incompatible-content ground)."""
    assert statement_problems(documented_example()) == {}


def test_the_puid_is_derived_deterministically_from_the_proposal():
    """DSA-2: the same proposal gives the same puid, another proposal another; at
    most 500 characters of [A-Za-z0-9_-], also for a 700-character proposal id."""
    long_id = "run_" + "x" * 680 + ":step:proposal"
    for proposal_id in ("run_1:step_1:proposal", long_id, "a b/c?é"):
        puid = puid_for(proposal_id)
        assert puid == puid_for(proposal_id)
        assert re.fullmatch(r"[A-Za-z0-9_-]{1,500}", puid)
    assert puid_for("run_1:step_1:proposal") != puid_for("run_1:step_2:proposal")
    assert build_statement(facts("run_9:s:proposal"))["puid"] == puid_for("run_9:s:proposal")


@pytest.mark.parametrize(
    "restriction, restriction_type, field, end_field",
    [
        (Restriction.VISIBILITY, "DECISION_VISIBILITY_CONTENT_REMOVED", "decision_visibility",
         "end_date_visibility_restriction"),
        (Restriction.MONETARY, "DECISION_MONETARY_SUSPENSION", "decision_monetary", "end_date_monetary_restriction"),
        (Restriction.PROVISION, "DECISION_PROVISION_PARTIAL_SUSPENSION", "decision_provision",
         "end_date_service_restriction"),
        (Restriction.ACCOUNT, "DECISION_ACCOUNT_SUSPENDED", "decision_account", "end_date_account_restriction"),
    ],
)  # fmt: skip
def test_each_restriction_fills_its_decision_and_end_date(restriction, restriction_type, field, end_field):
    """DSA-2: the restriction's decision field (visibility as an array) and, for a
    temporary restriction, its own end date; the statement is valid."""
    statement = build_statement(
        facts(restriction=restriction, restriction_type=restriction_type, end_date=date(2026, 12, 8))
    )
    expected = [restriction_type] if restriction is Restriction.VISIBILITY else restriction_type
    assert statement[field] == expected
    assert statement[end_field] == "2026-12-08"
    assert [k for k in statement if k.startswith("decision_") and k in dsa.DECISIONS] == [field]
    assert statement_problems(statement) == {}


def test_an_indefinite_restriction_has_no_end_date():
    """DSA-2: blank end date means indefinite."""
    statement = build_statement(facts())
    assert not [k for k in statement if k.startswith("end_date_")]
    assert statement_problems(statement) == {}


def test_the_ground_decides_which_pair_of_fields_is_filled():
    """DSA-2: illegal content fills the legal ground and its explanation;
    incompatible content the contractual ground and its explanation."""
    illegal = build_statement(facts(ground="DECISION_GROUND_ILLEGAL_CONTENT", ground_reference="StGB §130"))
    assert illegal["illegal_content_legal_ground"] == "StGB §130"
    assert "incompatible_content_ground" not in illegal
    assert statement_problems(illegal) == {}
    incompatible = build_statement(facts(incompatible_content_illegal=True))
    assert incompatible["incompatible_content_ground"] == "Terms of service 4.2 (fraud)"
    assert incompatible["incompatible_content_illegal"] == "Yes"
    assert "illegal_content_legal_ground" not in incompatible


def test_automation_and_dates_take_the_documented_forms():
    """DSA-2: Yes/No for detection, the enumeration for the decision, YYYY-MM-DD."""
    statement = build_statement(facts(automated_detection=True, automated_decision=dsa.AutomatedDecision.FULLY))
    assert statement["automated_detection"] == "Yes"
    assert statement["automated_decision"] == "AUTOMATED_DECISION_FULLY"
    assert statement["application_date"] == "2026-12-01"
    assert statement["territorial_scope"] == ["DE", "FR", "NL"]


MISSING_FACTS = {
    "restriction": "decision_visibility",
    "restriction_type": "decision_visibility",
    "category": "category",
    "ground": "decision_ground",
    "decision_facts": "decision_facts",
    "source_type": "source_type",
    "automated_detection": "automated_detection",
    "automated_decision": "automated_decision",
    "application_date": "application_date",
    "content_date": "content_date",
}


@pytest.mark.parametrize("fact, field", MISSING_FACTS.items())
def test_a_missing_fact_is_named_by_its_field(fact, field):
    """DSA-2: a decision that lacks a required fact yields a problem naming it."""
    problems = statement_problems(build_statement(facts(**{fact: None})))
    assert field in problems
    assert "required" in problems[field]


@pytest.mark.parametrize("fact, field", [("content_types", "content_type"), ("territorial_scope", "territorial_scope")])
def test_an_empty_list_fact_is_missing(fact, field):
    """DSA-2: content type and territorial scope need at least one value."""
    assert field in statement_problems(build_statement(facts(**{fact: ()})))


@pytest.mark.parametrize(
    "ground, fields",
    [
        ("DECISION_GROUND_ILLEGAL_CONTENT", ("illegal_content_legal_ground", "illegal_content_explanation")),
        ("DECISION_GROUND_INCOMPATIBLE_CONTENT", ("incompatible_content_ground", "incompatible_content_explanation")),
    ],
)
def test_the_ground_requires_its_reference_and_explanation(ground, fields):
    """DSA-2: conditional requirements by ground."""
    problems = statement_problems(build_statement(facts(ground=ground, ground_reference=None, explanation=None)))
    assert set(fields) <= set(problems)
    assert all("required when decision ground is" in problems[f] for f in fields)


def test_at_least_one_decision_field():
    """DSA-2: without any decision_* the four are each reported."""
    problems = statement_problems(documented_example(
        decision_visibility=None, decision_monetary=None, decision_provision=None, decision_account=None,
        end_date_monetary_restriction=None,
    ))  # fmt: skip
    assert set(dsa.DECISIONS) <= set(problems)
    account_only = documented_example(
        decision_visibility=None, decision_monetary=None, decision_provision=None, end_date_monetary_restriction=None
    )
    assert statement_problems(account_only) == {}


@pytest.mark.parametrize(
    "end, ok",
    [(date(2026, 11, 30), False), (date(2026, 12, 1), True), (date(2026, 12, 31), True)],
)
def test_an_end_date_is_on_or_after_the_application_date(end, ok):
    """DSA-2: end_date_* on or after the application date."""
    problems = statement_problems(build_statement(facts(end_date=end)))
    assert (problems == {}) is ok
    if not ok:
        assert set(problems) == {"end_date_visibility_restriction"}


@pytest.mark.parametrize(
    "changes, field",
    [
        ({"category": "STATEMENT_CATEGORY_PORNOGRAPHY_OR_SEXUALIZED_CONTENT"}, "category"),  # v1 only
        ({"category": "STATEMENT_CATEGORY_SCOPE_OF_PLATFORM_SERVICE"}, "category"),  # v1 only
        ({"territorial_scope": ["DE", "US"]}, "territorial_scope"),
        ({"territorial_scope": "DE"}, "territorial_scope"),
        ({"decision_visibility": "DECISION_VISIBILITY_CONTENT_DISABLED"}, "decision_visibility"),
        ({"decision_monetary": "DECISION_MONETARY_FINE"}, "decision_monetary"),
        ({"decision_ground": "DECISION_GROUND_RUDE"}, "decision_ground"),
        ({"automated_detection": "yes"}, "automated_detection"),
        ({"automated_decision": "AUTOMATED_DECISION_MAYBE"}, "automated_decision"),
        ({"source_type": "SOURCE_RUMOUR"}, "source_type"),
        ({"content_type": ["CONTENT_TYPE_HOLOGRAM"]}, "content_type"),
        ({"account_type": "ACCOUNT_TYPE_BOT"}, "account_type"),
        ({"content_language": "en"}, "content_language"),
        ({"category_specification": ["KEYWORD_DISINFORMATION"]}, "category_specification"),  # v1 only
        ({"puid": "TK 421"}, "puid"),
        ({"puid": "TK421\n"}, "puid"),
        ({"puid": "x" * 501}, "puid"),
        ({"application_date": "2023-8-08"}, "application_date"),
        ({"application_date": "08/08/2023"}, "application_date"),
        ({"application_date": "2023-02-30"}, "application_date"),
        ({"application_date": "2019-12-31"}, "application_date"),
        ({"content_date": "1999-12-31"}, "content_date"),
        ({"end_date_monetary_restriction": "2023-08-07"}, "end_date_monetary_restriction"),
        ({"end_date_monetary_restriction": "2023-8-9"}, "end_date_monetary_restriction"),
        ({"decision_facts": "x" * 5001}, "decision_facts"),
        ({"incompatible_content_explanation": "x" * 2001}, "incompatible_content_explanation"),
        ({"decision_visibility": ["DECISION_VISIBILITY_OTHER"]}, "decision_visibility_other"),
        ({"decision_monetary": "DECISION_MONETARY_OTHER"}, "decision_monetary_other"),
        ({"content_type": ["CONTENT_TYPE_OTHER"]}, "content_type_other"),
        ({"decision_ground_reference_url": "not a url"}, "decision_ground_reference_url"),
        ({"content_id": {"EAN-13": "12345"}}, "content_id"),
    ],
)
def test_documented_rules_refuse_the_field(changes, field):
    """DSA-2: enumerations of API v2, formats, lengths and conditional fields."""
    problems = statement_problems(documented_example(**changes))
    assert list(problems) == [field], problems


def test_the_boundaries_are_accepted():
    """DSA-2: 500-character puid, 5000-character facts, the first allowed dates."""
    assert statement_problems(documented_example(
        puid="a-Z_9" * 100, decision_facts="x" * 5000, application_date="2020-01-01", content_date="2000-01-01",
        end_date_monetary_restriction="2020-01-01",
    )) == {}  # fmt: skip


def test_other_values_carry_their_text():
    """DSA-2: an OTHER restriction or content type sends its specification."""
    statement = build_statement(facts(
        restriction_type="DECISION_VISIBILITY_OTHER", restriction_other="Hidden from search",
        content_types=("CONTENT_TYPE_OTHER",), content_type_other="Livestream chat",
    ))  # fmt: skip
    assert statement["decision_visibility_other"] == "Hidden from search"
    assert statement["content_type_other"] == "Livestream chat"
    assert statement_problems(statement) == {}


def test_every_fact_field_is_used_or_documented():
    """The facts dataclass and the builder stay in step: each field changes the body."""
    base = build_statement(facts())
    unchanged = []
    probes = {
        "account_type": "ACCOUNT_TYPE_PRIVATE",
        "reference_url": "https://example.org/terms",
        "category_specification": ("KEYWORD_PHISHING",),
        "content_language": "DE",
        "source_identity": "Trusted flagger X",
        "ean13": "0123456789123",
        "incompatible_content_illegal": False,
    }
    for name, value in probes.items():
        if build_statement(dataclasses.replace(facts(), **{name: value})) == base:
            unchanged.append(name)
    assert unchanged == []
