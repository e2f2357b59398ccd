"""The appeal's outcome notice (app/domain/dsa_appeal_notice.py, SPEC DSA-5)."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from app.domain.dsa_appeal_notice import notice_language, render_appeal_notice

DECIDED = datetime(2026, 3, 4, 10, 0, tzinfo=UTC)


@pytest.mark.parametrize(
    ("language", "settlement", "court", "day"),
    [
        ("en", "out-of-court dispute settlement body certified under Article 21", "to a court", "4 March 2026"),
        ("de", "zertifizierten außergerichtlichen Streitbeilegungsstelle", "an ein Gericht", "4. März 2026"),
    ],
)
def test_dsa5_the_notice_names_out_of_court_dispute_settlement(language, settlement, court, day):
    """DSA-5: in English and German the notice names a certified out-of-court dispute
    settlement body (Art. 21) and a court, the day and the reason."""
    reason = "Threat stays a threat."
    text = render_appeal_notice(outcome="upheld", reason=reason, decided_at=DECIDED, language=language).text
    assert settlement in text and court in text and day in text
    assert "Threat stays a threat." in text


@pytest.mark.parametrize(
    ("outcome", "en", "de"),
    [
        ("upheld", "We upheld our decision", "halten an unserer Entscheidung fest"),
        ("modified", "We changed our decision", "Entscheidung geändert"),
        ("reversed", "We reversed our decision", "Entscheidung aufgehoben"),
    ],
)
def test_dsa5_the_outcome_is_said_in_words(outcome, en, de):
    """DSA-5: each outcome in words, in both languages."""
    assert en in render_appeal_notice(outcome=outcome, reason=None, decided_at=DECIDED, language="en").text
    assert de in render_appeal_notice(outcome=outcome, reason=None, decided_at=DECIDED, language="de").text


def test_dsa5_no_reason_is_said_so():
    """DSA-5: a blank or redacted reason reads as "no further reason", never as an empty line."""
    text = render_appeal_notice(outcome="reversed", reason="  ", decided_at=DECIDED, language="en").text
    assert "No further reason was recorded" in text and "Reason:" not in text


def test_dsa5_the_language_falls_back_to_a_template_that_exists():
    """DSA-5: ``DE`` and ``de-AT`` are German; a language without a template gets the default."""
    assert (notice_language("DE"), notice_language("de-AT"), notice_language("fr"), notice_language("fr", "de")) == (
        "de",
        "de",
        "en",
        "de",
    )
    assert notice_language(None) == "en"


def test_dsa5_an_unknown_outcome_or_language_is_an_error():
    """DSA-5: the renderer refuses what it has no words for (a caller's bug)."""
    with pytest.raises(ValueError):
        render_appeal_notice(outcome="maybe", reason=None, decided_at=DECIDED, language="en")
    with pytest.raises(ValueError):
        render_appeal_notice(outcome="upheld", reason=None, decided_at=DECIDED, language="fr")
