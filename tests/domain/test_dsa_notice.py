"""The affected user's notice rendered from a statement of reasons
(app/domain/dsa_notice.py, app/domain/proposal/notice_action.py, SPEC DSA-4)."""

from __future__ import annotations

from datetime import date, datetime, timezone

import pytest

from app.domain import dsa
from app.domain.dsa import build_statement
from app.domain.dsa_notice import OPENINGS, WORDS, complaint_deadline, notice_language, render_notice
from app.domain.proposal.notice_action import affected_user, notice_operation_id
from tests.dsa_examples import facts

UNTIL = datetime(2027, 6, 2, 12, 0, tzinfo=timezone.utc)


def removal() -> dict:
    """A human removal of a scam post, incompatible with the terms."""
    return build_statement(
        facts(reference_url="https://platform.example/terms#fraud", category="STATEMENT_CATEGORY_SCAMS_AND_FRAUD")
    )


def suspension() -> dict:
    """A fully automated account suspension for illegal speech, ending on a day."""
    return build_statement(
        facts(
            restriction="account",
            restriction_type="DECISION_ACCOUNT_SUSPENDED",
            category="STATEMENT_CATEGORY_ILLEGAL_OR_HARMFUL_SPEECH",
            ground="DECISION_GROUND_ILLEGAL_CONTENT",
            ground_reference="§ 130 StGB (Volksverhetzung)",
            explanation="The posts incite hatred against a group.",
            automated_detection=True,
            automated_decision="AUTOMATED_DECISION_FULLY",
            end_date=date(2026, 12, 8),
        )
    )


@pytest.mark.parametrize("language", ["en", "de"])
def test_dsa4_removal_notice_names_restriction_facts_ground_automation_and_complaint(language):
    """DSA-4: a content removal's notice in en and de: the restriction in words, the
    facts, the contractual ground with its reference and URL, no automated means,
    the complaint deadline (ISO date) and out-of-court settlement and courts."""
    statement = removal()
    notice = render_notice(statement, language, UNTIL)
    text, w = notice["text"], WORDS[language]
    assert notice["language"] == language
    assert text.startswith(OPENINGS[language]["STATEMENT_CATEGORY_SCAMS_AND_FRAUD"])
    words = "Removal of content" if language == "en" else "Entfernung von Inhalten"
    assert words in notice["subject"] and words in text
    assert statement["decision_facts"] in text
    assert "Terms of service 4.2 (fraud)" in text and "https://platform.example/terms#fraud" in text
    assert "The post links to a phishing page." in text
    assert w["detection_no"] in text
    assert w["decision"][dsa.AutomatedDecision.NOT_AUTOMATED] in text
    assert "2027-06-02" in text and statement["puid"] in text
    assert w["redress"] in text
    assert ("Article 21" if language == "en" else "Artikel 21") in text


@pytest.mark.parametrize("language", ["en", "de"])
def test_dsa4_suspension_notice_names_illegal_ground_end_and_full_automation(language):
    """DSA-4: an automated account suspension's notice, second category: the legal
    ground, its end date, automated detection and a fully automated decision."""
    statement = suspension()
    notice = render_notice(statement, language, UNTIL)
    text, w = notice["text"], WORDS[language]
    assert text.startswith(OPENINGS[language]["STATEMENT_CATEGORY_ILLEGAL_OR_HARMFUL_SPEECH"])
    assert ("Suspension of the account" if language == "en" else "Sperrung des Kontos") in text
    assert w["ground_illegal"].format(reference="§ 130 StGB (Volksverhetzung)") in text
    assert "The posts incite hatred against a group." in text
    assert w["until"].format(day="2026-12-08") in text
    assert w["detection_yes"] in text and w["decision"][dsa.AutomatedDecision.FULLY] in text
    assert "2027-06-02" in text


def test_dsa4_unknown_language_falls_back_to_the_default():
    """DSA-4: a language without a template, or not offered by the settings, gives
    the settings' default language."""
    assert render_notice(removal(), "fr", UNTIL)["language"] == "en"
    assert render_notice(removal(), None, UNTIL, default_language="de")["language"] == "de"
    assert render_notice(removal(), "de", UNTIL, languages=("en",))["language"] == "en"
    assert notice_language("DE") == "de"


def test_dsa4_every_category_has_an_opening_in_every_language():
    """DSA-4: a category-specific opening line for every API v2 category, en and de."""
    for language in ("en", "de"):
        assert set(OPENINGS[language]) == set(dsa.STATEMENT_CATEGORIES)


def test_dsa4_user_text_is_never_read_as_a_template():
    """DSA-4: braces and markup in the facts stay as typed; nothing is formatted from them."""
    statement = removal()
    statement["decision_facts"] = "Said {puid} and {day} <b>loudly</b> {0}"
    text = render_notice(statement, "en", UNTIL)["text"]
    assert "Said {puid} and {day} <b>loudly</b> {0}" in text


def test_dsa4_complaint_deadline_is_never_under_six_months():
    """DSA-4 (Art. 20): a record saying less than six months still tells the user six months."""
    assert complaint_deadline(date(2027, 1, 1), "2026-12-01") == date(2027, 6, 2)
    assert complaint_deadline(UNTIL, "2026-12-01") == date(2027, 6, 2)
    assert complaint_deadline(date(2028, 1, 1), "2026-12-01") == date(2028, 1, 1)


def test_dsa4_the_notice_goes_to_the_content_author_or_the_restricted_account():
    """DSA-4: a content restriction's notice goes to the evidence's author; an account
    restriction's to its own target; one operation id per restriction."""
    post = {"kind": "post", "reference": "post:1001"}
    assert affected_user("visibility", post, "user:4412") == {"kind": "account", "reference": "user:4412"}
    assert affected_user("visibility", post, None) == post
    author_of = {"kind": "author_of", "reference": "post:1001"}
    assert affected_user("account", author_of, "user:4412") == author_of
    assert notice_operation_id("action:r:n:main:k") == "notice:action:r:n:main:k"
