"""DSA settings in words (SPEC §7 DSA-1, REV-3)."""

from __future__ import annotations

from app.domain import dsa
from app.domain.dsa_settings import ComponentRestriction, settings_from_json, settings_problems
from app.domain.dsa_words import NOT_A_RESTRICTION, allowed_values, change_words, restriction_words


def test_dsa1_a_restriction_reads_as_its_type_and_kind_and_other_as_its_words():
    """DSA-1: a component's restriction is its type's label and its kind; an "other"
    type is the admin's words; no restriction reads as "Not a restriction under the DSA"."""
    removed = ComponentRestriction(dsa.Restriction.VISIBILITY, "DECISION_VISIBILITY_CONTENT_REMOVED")
    other = ComponentRestriction(dsa.Restriction.MONETARY, "DECISION_MONETARY_OTHER", "Payouts held for review")
    assert restriction_words(removed) == "Removal of content (restriction of the visibility of content)"
    assert restriction_words(other) == "Other restriction: Payouts held for review (restriction of monetary payments)"
    assert restriction_words(None) == NOT_A_RESTRICTION == "Not a restriction under the DSA"


def test_dsa1_the_change_page_words_and_the_allowed_values_have_labels_for_every_code():
    """DSA-1, REV-3: the change page compares the settings in words, and every value a
    document may use is listed with a label that is not its code."""
    words = change_words({"enabled": True, "decisions": {"spam": {
        "category": "STATEMENT_CATEGORY_SCAMS_AND_FRAUD", "ground": "DECISION_GROUND_ILLEGAL_CONTENT",
        "reference": "§ 263 StGB", "keywords": ["KEYWORD_PHISHING"]}}, "territorial_scope": ["DE", "AT"]})
    assert words["decisions"] == ["spam: Scams and/or fraud; Illegal content; § 263 StGB; keywords: Phishing; illegal"]
    assert words["territorial_scope"] == "Germany, Austria"
    assert words["tdb_connection"] == "None: statements wait until a connection is set"
    for _what, values in allowed_values():
        assert values and all(label and label != code for code, label in values)
    assert len(dict(dict(allowed_values())["category"])) == len(dsa.STATEMENT_CATEGORIES)


def test_dsa1_a_value_outside_a_long_list_is_named_without_repeating_the_list():
    """DSA-1: every problem at once, in words; a value outside one of the API's long
    lists names the value and how many are allowed, not all of them."""
    problems = settings_problems({"enabled": True, "territorial_scope": ["US"], "complaint_window_days": 7,
                                  "decisions": {"x": {"category": "HATE", "ground": "DECISION_GROUND_ILLEGAL_CONTENT",
                                                      "reference": "law"}}})
    assert problems == [
        "complaint_window_days: 7 is less than the minimum of 183",
        "decisions.x.category: 'HATE' is not one of the 16 allowed values (see the list of allowed values).",
        "territorial_scope.0: 'US' is not one of the 30 allowed values (see the list of allowed values).",
    ]
    assert settings_from_json({"enabled": False}).restriction_of("takedown") is None


def test_dsa1_the_shapes_problems_and_the_meanings_are_said_together():
    """DSA-1: a document with a value of the wrong type and a slug no component has is
    refused with both problems at once; values of any JSON type never raise."""
    problems = settings_problems(
        {"enabled": "yes",
         "restrictions": {"nowhere": {"restriction": ["visibility"], "type": 3},
                          "takedown": {"restriction": "account", "type": "DECISION_VISIBILITY_OTHER"}},
         "decisions": {"x": [1]}, "notice_component": 5, "notice_languages": "en", "default_language": {},
         "tdb_connection": "tdb"},
        components=["takedown"], connections=[],
    )
    assert "enabled: 'yes' is not of type 'boolean'" in problems
    assert "restrictions.nowhere: no component has this slug." in problems
    assert "restrictions.takedown.type: DECISION_VISIBILITY_OTHER is not a type of account restriction." in problems
    assert "tdb_connection: no connection has the slug tdb." in problems
    for value in (None, [], "x", 1, {"restrictions": []}, {"decisions": {"x": {"reference_url": 5}}}):
        assert settings_problems(value, components=[], connections=[])
