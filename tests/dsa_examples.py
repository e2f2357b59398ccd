"""Statements for the DSA tests: the documentation's own example, and valid facts."""

from __future__ import annotations

import copy
from datetime import date

from app.domain.dsa import StatementFacts

# The example body of "Creating a Statement" in the Transparency Database's API
# documentation (resources/markdown/api-documentation.md), as published.
DOCUMENTED_EXAMPLE = {
    "decision_visibility": ["DECISION_VISIBILITY_CONTENT_DISABLED"],
    "decision_monetary": "DECISION_MONETARY_TERMINATION",
    "end_date_monetary_restriction": "2023-08-08",
    "decision_provision": "DECISION_PROVISION_TOTAL_SUSPENSION",
    "decision_account": "DECISION_ACCOUNT_SUSPENDED",
    "account_type": "ACCOUNT_TYPE_BUSINESS",
    "decision_ground": "DECISION_GROUND_INCOMPATIBLE_CONTENT",
    "decision_ground_reference_url": "https://www.anurl.com",
    "content_type": ["CONTENT_TYPE_VIDEO", "CONTENT_TYPE_AUDIO", "CONTENT_TYPE_SYNTHETIC_MEDIA"],
    "category": "STATEMENT_CATEGORY_CYBER_VIOLENCE_AGAINST_WOMEN",
    "illegal_content_legal_ground": "illegal content legal grounds",
    "illegal_content_explanation": "illegal content explanation",
    "incompatible_content_ground": "incompatible content grounds",
    "incompatible_content_explanation": "incompatible content explanation",
    "incompatible_content_illegal": "Yes",
    "territorial_scope": ["PT", "ES", "DE"],
    "content_language": "EN",
    "content_date": "2023-08-08",
    "content_id": {"EAN-13": "0123456789123"},
    "application_date": "2023-08-08",
    "decision_facts": "facts about the decision",
    "source_type": "SOURCE_TRUSTED_FLAGGER",
    "automated_detection": "No",
    "automated_decision": "AUTOMATED_DECISION_PARTIALLY",
    "puid": "TK421",
}


def documented_example(**changes) -> dict:
    """The documented example with `changes` (a value of None removes the field)."""
    body = copy.deepcopy(DOCUMENTED_EXAMPLE)
    for key, value in changes.items():
        if value is None:
            body.pop(key, None)
        else:
            body[key] = value
    return body


def facts(proposal_id: str = "run_1:step_1:proposal", **changes) -> StatementFacts:
    """Valid facts of a human removal of content incompatible with the terms."""
    values = dict(
        proposal_id=proposal_id,
        restriction="visibility",
        restriction_type="DECISION_VISIBILITY_CONTENT_REMOVED",
        category="STATEMENT_CATEGORY_SCAMS_AND_FRAUD",
        ground="DECISION_GROUND_INCOMPATIBLE_CONTENT",
        ground_reference="Terms of service 4.2 (fraud)",
        explanation="The post links to a phishing page.",
        decision_facts="Reported by a user; a moderator checked the link.",
        source_type="SOURCE_ARTICLE_16",
        automated_detection=False,
        automated_decision="AUTOMATED_DECISION_NOT_AUTOMATED",
        content_types=("CONTENT_TYPE_TEXT",),
        territorial_scope=("DE", "FR", "NL"),
        application_date=date(2026, 12, 1),
        content_date=date(2026, 11, 29),
    )
    values.update(changes)
    return StatementFacts(**values)
